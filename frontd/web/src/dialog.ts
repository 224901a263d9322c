// A modal confirmation dialog: it holds the focus until answered; Escape or
// Cancel declines. The safe answer has the focus first.

import { h, isTopTrap, trapFocus } from './dom';

export interface ConfirmOptions {
  title: string;
  body: (string | HTMLElement)[];
  confirm: string;
  cancel?: string;
  // A confirm button in warning text.
  warning?: boolean;
}

let seq = 0;

// Ask; resolves true when confirmed.
export function confirmDialog(o: ConfirmOptions): Promise<boolean> {
  return new Promise((resolve) => {
    const n = ++seq;
    const opener = document.activeElement as HTMLElement | null;
    const titleId = `dialog-title-${n}`;
    const bodyId = `dialog-body-${n}`;
    let undoTrap: () => void = () => undefined;

    const finish = (answer: boolean): void => {
      undoTrap();
      document.removeEventListener('keydown', onKey, true);
      backdrop.remove();
      if (opener && document.contains(opener)) opener.focus();
      resolve(answer);
    };
    const onKey = (ev: KeyboardEvent): void => {
      if (ev.key === 'Escape' && isTopTrap(dialog)) {
        ev.preventDefault();
        ev.stopPropagation();
        finish(false);
      }
    };

    const cancel = h('button', {
      class: 'btn',
      type: 'button',
      text: o.cancel ?? 'Cancel',
      attrs: { 'data-action': 'cancel' },
      on: { click: () => finish(false) },
    });
    const ok = h('button', {
      class: o.warning ? 'btn btn-primary btn-warning' : 'btn btn-primary',
      type: 'button',
      text: o.confirm,
      attrs: { 'data-action': 'confirm' },
      on: { click: () => finish(true) },
    });
    const dialog = h(
      'div',
      {
        class: 'dialog',
        role: 'alertdialog',
        attrs: { 'aria-modal': 'true', 'aria-labelledby': titleId, 'aria-describedby': bodyId },
      },
      h('h2', { class: 'dialog-title', id: titleId, text: o.title }),
      h(
        'div',
        { class: 'dialog-body', id: bodyId },
        ...o.body.map((b) => (typeof b === 'string' ? h('p', { text: b }) : b)),
      ),
      h('div', { class: 'dialog-actions' }, cancel, ok),
    );
    const backdrop = h('div', { class: 'backdrop' }, dialog);
    backdrop.addEventListener('mousedown', (ev) => {
      if (ev.target === backdrop) finish(false);
    });
    document.body.appendChild(backdrop);
    document.addEventListener('keydown', onKey, true);
    undoTrap = trapFocus(dialog);
    cancel.focus();
  });
}
