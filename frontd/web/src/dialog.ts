// Modal dialogs. modal() is the one scaffolding every dialog of the panel
// uses: a backdrop, the focus held inside until it closes, Escape (when it
// is the topmost) or a press on the backdrop closes it, and the focus goes
// back to where it was (or to the redrawn twin of that element, found by
// its data-focus-key). confirmDialog() is a question on top of it: the
// safe answer has the focus first, and Escape declines.

import { focusables, h, isTopTrap, trapFocus } from './dom';

export interface ModalOptions {
  title: string;
  // Paragraphs (strings) or elements, in the dialog's body.
  body: (string | HTMLElement)[];
  // The buttons at the foot.
  actions: HTMLElement[];
  // The dialog element's id, for styles and tests.
  id?: string;
  // alertdialog for a question that needs an answer.
  role?: 'dialog' | 'alertdialog';
  // A wider dialog, for lists and forms.
  wide?: boolean;
  // The id of the element that describes the dialog; else the whole body.
  describedBy?: string;
  // What takes the focus at first; else the first focusable element.
  focus?: HTMLElement;
  // Called once, after it closed, whatever closed it.
  onClose?: () => void;
}

export interface Modal {
  // The dialog element (inside its backdrop).
  el: HTMLElement;
  // Close it; closing again does nothing.
  close: () => void;
}

let seq = 0;

// Open a modal dialog.
export function modal(o: ModalOptions): Modal {
  const n = ++seq;
  const opener = document.activeElement as HTMLElement | null;
  const focusKey = opener?.dataset?.focusKey;
  const titleId = `dialog-title-${n}`;
  const bodyId = `dialog-body-${n}`;
  let open = true;

  const el = h(
    'div',
    {
      class: o.wide ? 'dialog dialog-wide' : 'dialog',
      role: o.role ?? 'dialog',
      attrs: {
        'aria-modal': 'true',
        'aria-labelledby': titleId,
        'aria-describedby': o.describedBy ?? bodyId,
      },
    },
    h('h2', { class: 'dialog-title', id: titleId, text: o.title }),
    h(
      'div',
      { class: 'dialog-body', id: bodyId },
      ...o.body.map((b) => (typeof b === 'string' ? h('p', { text: b }) : b)),
    ),
    h('div', { class: 'dialog-actions' }, ...o.actions),
  );
  if (o.id) el.id = o.id;
  const backdrop = h('div', { class: 'backdrop' }, el);

  const onKey = (ev: KeyboardEvent): void => {
    if (ev.key === 'Escape' && isTopTrap(el)) {
      ev.preventDefault();
      ev.stopPropagation();
      close();
    }
  };
  function close(): void {
    if (!open) return;
    open = false;
    undoTrap();
    document.removeEventListener('keydown', onKey, true);
    backdrop.remove();
    if (opener && document.contains(opener)) opener.focus();
    else if (focusKey) document.querySelector<HTMLElement>(`[data-focus-key="${CSS.escape(focusKey)}"]`)?.focus();
    o.onClose?.();
  }
  // A press on the backdrop closes; its default (the focus to the page
  // body) would undo the focus given back to the opener.
  backdrop.addEventListener('mousedown', (ev) => {
    if (ev.target !== backdrop) return;
    ev.preventDefault();
    close();
  });

  document.body.appendChild(backdrop);
  document.addEventListener('keydown', onKey, true);
  const undoTrap = trapFocus(el);
  (o.focus ?? focusables(el)[0])?.focus();
  return { el, close };
}

export interface ConfirmOptions {
  title: string;
  body: (string | HTMLElement)[];
  confirm: string;
  cancel?: string;
  // A confirm button in warning text.
  warning?: boolean;
}

// Ask; resolves true when confirmed.
export function confirmDialog(o: ConfirmOptions): Promise<boolean> {
  return new Promise((resolve) => {
    let answer = false;
    const cancel = h('button', {
      class: 'btn',
      type: 'button',
      text: o.cancel ?? 'Cancel',
      attrs: { 'data-action': 'cancel' },
      on: { click: () => m.close() },
    });
    const ok = h('button', {
      class: o.warning ? 'btn btn-primary btn-warning' : 'btn btn-primary',
      type: 'button',
      text: o.confirm,
      attrs: { 'data-action': 'confirm' },
      on: {
        click: () => {
          answer = true;
          m.close();
        },
      },
    });
    const m = modal({
      title: o.title,
      body: o.body,
      actions: [cancel, ok],
      role: 'alertdialog',
      focus: cancel,
      onClose: () => resolve(answer),
    });
  });
}
