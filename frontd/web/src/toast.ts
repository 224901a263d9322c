// Toasts: short notices in a live region at the corner of the screen. A
// toast with a key replaces the one showing with the same key, so that the
// same news from the API answer and from the event stream shows once.

import { h, icon } from './dom';

export type ToastKind = 'info' | 'success' | 'warning' | 'error';

interface Shown {
  el: HTMLElement;
  timer: number | null;
}

let region: HTMLElement | null = null;
const byKey = new Map<string, Shown>();

function container(): HTMLElement {
  if (!region) {
    region = h('div', { class: 'toasts', attrs: { 'aria-label': 'Notifications' }, role: 'region' });
    document.body.appendChild(region);
  }
  return region;
}

// Show a toast; errors and warnings stay longer.
export function toast(
  kind: ToastKind,
  title: string,
  detail?: string,
  key?: string,
): void {
  const k = key ?? `${kind}:${title}:${detail ?? ''}`;
  const old = byKey.get(k);
  if (old) dismiss(k, old);

  const ms = kind === 'error' ? 10000 : kind === 'warning' ? 9000 : 6000;
  const closeBtn = h(
    'button',
    {
      class: 'toast-close',
      type: 'button',
      attrs: { 'aria-label': 'Dismiss notification' },
      on: { click: () => dismiss(k, shown) },
    },
    icon('close'),
  );
  const el = h(
    'div',
    {
      class: `toast toast-${kind}`,
      role: kind === 'error' || kind === 'warning' ? 'alert' : 'status',
      attrs: { 'data-kind': kind, 'data-key': k },
    },
    icon(kind === 'success' ? 'check' : kind === 'info' ? 'refresh' : 'alert', 'icon toast-icon'),
    h(
      'div',
      { class: 'toast-body' },
      h('div', { class: 'toast-title', text: title }),
      detail ? h('div', { class: 'toast-detail', text: detail }) : null,
    ),
    closeBtn,
  );
  const shown: Shown = { el, timer: null };
  const arm = (): void => {
    shown.timer = window.setTimeout(() => dismiss(k, shown), ms);
  };
  const disarm = (): void => {
    if (shown.timer !== null) window.clearTimeout(shown.timer);
    shown.timer = null;
  };
  el.addEventListener('mouseenter', disarm);
  el.addEventListener('mouseleave', arm);
  el.addEventListener('focusin', disarm);
  el.addEventListener('focusout', arm);
  byKey.set(k, shown);
  container().appendChild(el);
  arm();
}

function dismiss(key: string, shown: Shown): void {
  if (shown.timer !== null) window.clearTimeout(shown.timer);
  shown.el.remove();
  if (byKey.get(key) === shown) byKey.delete(key);
}

// Remove every toast (on logout).
export function clearToasts(): void {
  for (const [k, s] of byKey) dismiss(k, s);
}
