// Small DOM helpers: elements are built with properties and text nodes,
// never from HTML strings, so nothing the server sends is parsed as markup.

type Child = Node | string | null | undefined | false;

export interface Attrs {
  class?: string;
  text?: string;
  id?: string;
  type?: string;
  role?: string;
  title?: string;
  href?: string;
  hidden?: boolean;
  disabled?: boolean;
  tabindex?: number;
  for?: string;
  name?: string;
  value?: string;
  placeholder?: string;
  autocomplete?: string;
  required?: boolean;
  // aria-*, data-* and other plain attributes.
  attrs?: Record<string, string>;
  on?: { [K in keyof HTMLElementEventMap]?: (ev: HTMLElementEventMap[K]) => void };
}

// Create an element with attributes and children.
export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  a: Attrs = {},
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  if (a.class) el.className = a.class;
  if (a.id) el.id = a.id;
  if (a.text !== undefined) el.textContent = a.text;
  if (a.role) el.setAttribute('role', a.role);
  if (a.title) el.title = a.title;
  if (a.hidden) el.hidden = true;
  if (a.tabindex !== undefined) el.tabIndex = a.tabindex;
  if (a.href !== undefined) el.setAttribute('href', a.href);
  if (a.type !== undefined) el.setAttribute('type', a.type);
  if (a.for !== undefined) el.setAttribute('for', a.for);
  if (a.name !== undefined) el.setAttribute('name', a.name);
  if (a.placeholder !== undefined) el.setAttribute('placeholder', a.placeholder);
  if (a.autocomplete !== undefined) el.setAttribute('autocomplete', a.autocomplete);
  if (a.value !== undefined) (el as HTMLInputElement).value = a.value;
  if (a.required) el.setAttribute('required', '');
  if (a.disabled) (el as HTMLButtonElement).disabled = true;
  if (a.attrs) for (const [k, v] of Object.entries(a.attrs)) el.setAttribute(k, v);
  if (a.on) {
    for (const [k, fn] of Object.entries(a.on)) el.addEventListener(k, fn as EventListener);
  }
  append(el, ...children);
  return el;
}

// Append children, skipping empty ones.
export function append(el: Node, ...children: Child[]): void {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    el.appendChild(typeof c === 'string' ? document.createTextNode(c) : c);
  }
}

// Replace all children.
export function replace(el: Node, ...children: Child[]): void {
  while (el.firstChild) el.removeChild(el.firstChild);
  append(el, ...children);
}

const SVG = 'http://www.w3.org/2000/svg';

// Icons, 16×16, drawn with currentColor.
const ICONS: Record<string, string[]> = {
  lock: ['M4.5 7V5a3.5 3.5 0 0 1 7 0v2', 'M3.5 7h9v6.5h-9z'],
  unlock: ['M4.5 7V5a3.5 3.5 0 0 1 6.8-1.2', 'M3.5 7h9v6.5h-9z'],
  box: ['M2.5 4.5 8 2l5.5 2.5v7L8 14l-5.5-2.5z', 'M2.5 4.5 8 7l5.5-2.5', 'M8 7v7'],
  chevron: ['M4 6l4 4 4-4'],
  close: ['M4 4l8 8', 'M12 4l-8 8'],
  plus: ['M8 3v10', 'M3 8h10'],
  terminal: ['M2 3h12v10H2z', 'M4.5 6l2 2-2 2', 'M8 10h3.5'],
  check: ['M3.5 8.5l3 3 6-7'],
  alert: ['M8 2 1.5 13.5h13z', 'M8 6.5v3.5', 'M8 11.8v.2'],
  menu: ['M2.5 4h11', 'M2.5 8h11', 'M2.5 12h11'],
  refresh: ['M13 8a5 5 0 1 1-1.5-3.6', 'M13 2.5v2.5h-2.5'],
  folder: ['M1.5 3.5h4.5l1.5 1.5h7v8h-13z'],
  'folder-plus': ['M1.5 3.5h4.5l1.5 1.5h7v8h-13z', 'M8 7.5v4', 'M6 9.5h4'],
  file: ['M3.5 1.5h6l3 3v10h-9z', 'M9.5 1.5v3h3'],
  link: ['M6.5 9.5l3-3', 'M5 8 3.5 9.5a2.1 2.1 0 0 0 3 3L8 11', 'M8 5l1.5-1.5a2.1 2.1 0 0 1 3 3L11 8'],
  upload: ['M8 11V2.5', 'M4.5 6 8 2.5 11.5 6', 'M2.5 11v2.5h11V11'],
  download: ['M8 2.5V11', 'M4.5 7.5 8 11l3.5-3.5', 'M2.5 11v2.5h11V11'],
  trash: ['M2.5 4h11', 'M6 4V2.5h4V4', 'M4 4l.7 9.5h6.6L12 4', 'M6.8 6.5v4.5', 'M9.2 6.5v4.5'],
  up: ['M8 13V3', 'M4 7l4-4 4 4'],
  files: ['M5.5 1.5h5l3 3v8h-8z', 'M10.5 1.5v3h3', 'M3.5 4.5v10h7'],
};

// An inline SVG icon, hidden from assistive technology.
export function icon(name: keyof typeof ICONS | string, cls = 'icon'): SVGSVGElement {
  const svg = document.createElementNS(SVG, 'svg');
  svg.setAttribute('viewBox', '0 0 16 16');
  svg.setAttribute('class', cls);
  svg.setAttribute('aria-hidden', 'true');
  svg.setAttribute('focusable', 'false');
  for (const d of ICONS[name] ?? []) {
    const p = document.createElementNS(SVG, 'path');
    p.setAttribute('d', d);
    svg.appendChild(p);
  }
  return svg;
}

// The elements inside root that take keyboard focus, in order.
export function focusables(root: HTMLElement): HTMLElement[] {
  const sel =
    'a[href], button:not([disabled]), input:not([disabled]), select:not([disabled]), ' +
    'textarea:not([disabled]), [tabindex]:not([tabindex="-1"])';
  return Array.from(root.querySelectorAll<HTMLElement>(sel)).filter(
    (el) => !el.hidden && el.closest('[hidden]') === null && el.getClientRects().length > 0,
  );
}

// Open dialogs and popovers that hold the focus; the last one is on top.
const traps: HTMLElement[] = [];

// Tab and Shift+Tab cycle inside the top trap.
function trapKey(ev: KeyboardEvent): void {
  const root = traps[traps.length - 1];
  if (!root || ev.key !== 'Tab') return;
  const items = focusables(root);
  if (items.length === 0) {
    ev.preventDefault();
    return;
  }
  const first = items[0]!;
  const last = items[items.length - 1]!;
  const active = document.activeElement;
  if (ev.shiftKey && (active === first || !root.contains(active))) {
    ev.preventDefault();
    last.focus();
  } else if (!ev.shiftKey && (active === last || !root.contains(active))) {
    ev.preventDefault();
    first.focus();
  }
}

// Focus that lands outside the top trap (a screen reader jump, a script)
// goes back inside.
function trapFocusIn(ev: FocusEvent): void {
  const root = traps[traps.length - 1];
  if (root && ev.target instanceof Node && !root.contains(ev.target)) {
    focusables(root)[0]?.focus();
  }
}

// Keep the keyboard focus inside root while it is open; returns the undo.
export function trapFocus(root: HTMLElement): () => void {
  if (traps.length === 0) {
    document.addEventListener('keydown', trapKey, true);
    document.addEventListener('focusin', trapFocusIn, true);
  }
  traps.push(root);
  return () => {
    const i = traps.lastIndexOf(root);
    if (i >= 0) traps.splice(i, 1);
    if (traps.length === 0) {
      document.removeEventListener('keydown', trapKey, true);
      document.removeEventListener('focusin', trapFocusIn, true);
    }
  };
}

// Whether root is the topmost focus trap (Escape belongs to it).
export function isTopTrap(root: HTMLElement): boolean {
  return traps[traps.length - 1] === root;
}
