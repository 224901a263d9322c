// The top bar's state button and its popover. The button always shows the
// present state ("Sandboxed · Workspace write", "Direct · 09:41 left"); the
// popover changes it: the Permission column for everyone, the Execution
// Environment column for admin sessions (on the docker runtime it names the
// container and offers no switch).

import { ApiError, post, type ExecutionMode, type Permission } from './api';
import { confirmDialog } from './dialog';
import { h, icon, isTopTrap, replace, trapFocus } from './dom';
import { revertToast } from './events';
import { egressSummary } from './egress';
import { PERMISSIONS, clock, countdown, duration, isAllowlist, permissionLabel } from './format';
import { store } from './state';
import { toast } from './toast';

// A failed change, as a toast with the server's message.
export function errorToast(title: string, e: unknown, key?: string): void {
  const msg = e instanceof ApiError ? e.describe() : String(e);
  toast('error', title, msg, key);
}

// The button's text for the present state.
export function stateLabel(): { kind: string; name: string; detail: string } {
  const s = store.status;
  if (!s) return { kind: 'unknown', name: 'Loading', detail: '' };
  const perm = permissionLabel(s.permission);
  const m = s.execution_mode;
  if (m.mode === 'direct') {
    const r = store.remaining();
    return { kind: 'direct', name: 'Direct', detail: r === null ? 'on' : `${countdown(r)} left` };
  }
  if (!s.backend.ok) return { kind: 'down', name: 'Sandbox unavailable', detail: perm };
  if (s.runtime === 'docker') return { kind: 'docker', name: 'Docker container', detail: perm };
  return { kind: 'sandbox', name: 'Sandboxed', detail: perm };
}

async function choosePermission(p: Permission): Promise<void> {
  if (store.status?.permission === p) return;
  try {
    const r = await post<{ permission?: Permission }>('/api/permission', { permission: p });
    store.setPermission(r?.permission ?? p);
    // The allowed domains and the proxy's state, as they are now.
    if (isAllowlist(p)) store.refresh().catch(() => undefined);
    const info = PERMISSIONS.find((x) => x.value === p);
    toast('success', `Permission: ${permissionLabel(p)}`, info?.help, 'permission');
  } catch (e) {
    errorToast('Permission not changed', e);
  }
}

async function chooseSandbox(): Promise<void> {
  if (store.mode?.mode !== 'direct') return;
  try {
    store.ownChangeAt = performance.now();
    store.setMode(await post<ExecutionMode>('/api/execution-mode', { mode: 'sandbox' }));
    revertToast('manual');
  } catch (e) {
    errorToast('Still in direct mode', e, 'mode');
  }
}

async function chooseDirect(): Promise<void> {
  const m = store.mode;
  if (!m) return;
  const ttl = m.ttl_seconds;
  const renew = m.mode === 'direct';
  const end = new Date(Date.now() + ttl * 1000);
  const ok = await confirmDialog({
    title: renew
      ? `Restart direct mode for ${duration(ttl)}?`
      : `Switch to direct mode for ${duration(ttl)}?`,
    body: [
      `Commands and new terminals of this session will run directly on the host, ` +
        `outside the sandbox and without permission limits, until ${clock(end, ttl < 120)}.`,
      `After ${duration(ttl)} the session returns to sandboxed by itself, and you can ` +
        `return sooner at any time. The switch is recorded in the audit log.`,
    ],
    confirm: renew ? `Restart for ${duration(ttl)}` : `Switch to direct for ${duration(ttl)}`,
    warning: true,
  });
  if (!ok) return;
  try {
    store.ownChangeAt = performance.now();
    const r = await post<ExecutionMode>('/api/execution-mode', { mode: 'direct' });
    store.setMode(r);
    const until = store.endsAt();
    toast(
      'warning',
      until ? `Direct mode on until ${clock(until, r.ttl_seconds < 120)}` : 'Direct mode on',
      'Commands and new terminals of this session run outside the sandbox.',
      'mode',
    );
  } catch (e) {
    errorToast('Direct mode not turned on', e, 'mode');
  }
}

// One choice of a column: a radio button with a title and a line of help.
function option(
  title: string,
  help: string,
  attrs: Record<string, string>,
  onPick: () => void,
): { el: HTMLButtonElement; help: HTMLElement } {
  const helpEl = h('span', { class: 'option-help', text: help });
  const el = h(
    'button',
    {
      class: 'option',
      type: 'button',
      role: 'radio',
      attrs: { 'aria-checked': 'false', ...attrs },
      on: { click: onPick },
    },
    h('span', { class: 'option-mark' }, icon('check', 'icon option-check')),
    h('span', { class: 'option-text' }, h('span', { class: 'option-title', text: title }), helpEl),
  );
  return { el, help: helpEl };
}

// Arrow keys move between the choices of a radio group.
function arrowKeys(group: HTMLElement): void {
  group.addEventListener('keydown', (ev) => {
    if (!['ArrowDown', 'ArrowUp', 'ArrowLeft', 'ArrowRight', 'Home', 'End'].includes(ev.key)) return;
    const items = Array.from(group.querySelectorAll<HTMLButtonElement>('[role="radio"]')).filter(
      (b) => !b.disabled,
    );
    const i = items.indexOf(document.activeElement as HTMLButtonElement);
    if (i < 0 || items.length === 0) return;
    ev.preventDefault();
    let j = i;
    if (ev.key === 'Home') j = 0;
    else if (ev.key === 'End') j = items.length - 1;
    else if (ev.key === 'ArrowDown' || ev.key === 'ArrowRight') j = (i + 1) % items.length;
    else j = (i - 1 + items.length) % items.length;
    items[j]!.focus();
  });
}

export class ModeControl {
  readonly el: HTMLElement;
  private button: HTMLButtonElement;
  private popover: HTMLElement | null = null;
  private undoTrap: (() => void) | null = null;
  private update: (() => void) | null = null;
  private unsubTick: () => void;

  constructor() {
    this.button = h('button', {
      id: 'mode-button',
      class: 'mode-button',
      type: 'button',
      title: 'Permission and execution environment',
      attrs: { 'aria-haspopup': 'dialog', 'aria-expanded': 'false', 'aria-controls': 'mode-popover' },
      on: { click: () => (this.popover ? this.close() : this.open()) },
    });
    this.el = h('div', { class: 'mode-anchor' }, this.button);
    this.render();
    store.subscribe(() => {
      this.render();
      this.update?.();
    });
    this.unsubTick = store.onTick(() => {
      this.render();
      this.update?.();
    });
    document.addEventListener('mousedown', (ev) => {
      if (this.popover && ev.target instanceof Node && !this.el.contains(ev.target)) {
        // A click in a dialog opened from the popover leaves it open.
        if (ev.target instanceof Element && ev.target.closest('.backdrop')) return;
        this.close(false);
      }
    });
  }

  destroy(): void {
    this.close(false);
    this.unsubTick();
  }

  // The button's text and look for the present state.
  private render(): void {
    const l = stateLabel();
    const text = l.detail ? `${l.name} · ${l.detail}` : l.name;
    if (this.button.dataset.label === text) return;
    this.button.dataset.label = text;
    this.button.dataset.mode = l.kind;
    const ic = l.kind === 'direct' ? 'unlock' : l.kind === 'docker' ? 'box' : l.kind === 'down' ? 'alert' : 'lock';
    replace(
      this.button,
      icon(ic, 'icon mode-icon'),
      h(
        'span',
        { class: 'mode-text' },
        h('span', { class: 'mode-name', text: l.name }),
        l.detail ? h('span', { class: 'mode-sep', text: ' · ' }) : null,
        l.detail ? h('span', { class: 'mode-detail', text: l.detail }) : null,
      ),
      icon('chevron', 'icon mode-chevron'),
    );
  }

  open(): void {
    const s = store.status;
    if (this.popover || !s) return;
    const admin = s.role === 'admin' && s.auth !== 'token';

    // Permission column.
    const permGroup = h('div', {
      class: 'options',
      role: 'radiogroup',
      attrs: { 'aria-labelledby': 'perm-heading' },
    });
    const permOpts = PERMISSIONS.map((p) => {
      const o = option(p.label, p.help, { 'data-value': p.value }, () => void choosePermission(p.value));
      permGroup.appendChild(o.el);
      return { value: p.value, ...o };
    });
    arrowKeys(permGroup);
    const permNote = h('p', { class: 'col-note' });
    // Under an allowlist profile: the allowed domains and the proxy.
    const egressBox = h('div', { class: 'egress-box', hidden: true });
    let egressShown = '';
    const permCol = h(
      'section',
      { class: 'popover-col', attrs: { 'data-col': 'permission', 'aria-labelledby': 'perm-heading' } },
      h('h3', { id: 'perm-heading', class: 'col-title', text: 'Permission' }),
      permGroup,
      permNote,
      egressBox,
    );

    // Execution Environment column (admin sessions only).
    let execCol: HTMLElement | null = null;
    let updateExec: () => void = () => undefined;
    if (admin) {
      const heading = h('h3', { id: 'exec-heading', class: 'col-title', text: 'Execution Environment' });
      execCol = h(
        'section',
        { class: 'popover-col', attrs: { 'data-col': 'execution', 'aria-labelledby': 'exec-heading' } },
        heading,
      );
      if (s.runtime === 'docker') {
        execCol.appendChild(
          h(
            'div',
            { class: 'static-choice', attrs: { 'data-value': 'docker' } },
            icon('box', 'icon static-icon'),
            h(
              'div',
              { class: 'option-text' },
              h('span', { class: 'option-title', text: 'Docker container' }),
              h('span', {
                class: 'option-help',
                text: 'Commands run in your own container. Direct mode does not exist under the docker runtime.',
              }),
            ),
          ),
        );
      } else {
        const group = h('div', {
          class: 'options',
          role: 'radiogroup',
          attrs: { 'aria-labelledby': 'exec-heading' },
        });
        const sb = option(
          'Sandboxed',
          'Commands run in the sandbox, with the permission you chose.',
          { 'data-value': 'sandbox' },
          () => void chooseSandbox(),
        );
        const dr = option('Direct', '', { 'data-value': 'direct' }, () => void chooseDirect());
        dr.el.classList.add('option-direct');
        group.append(sb.el, dr.el);
        arrowKeys(group);
        const reason = h('p', { class: 'col-note col-note-warning' });
        execCol.append(group, reason);
        updateExec = () => {
          const m = store.mode;
          if (!m) return;
          const direct = m.mode === 'direct';
          sb.el.setAttribute('aria-checked', String(!direct));
          dr.el.setAttribute('aria-checked', String(direct));
          dr.el.disabled = !m.available && !direct;
          const r = store.remaining();
          dr.help.textContent = direct
            ? `${r === null ? 'On' : `${countdown(r)} left`}. Choose it again to restart the ${duration(m.ttl_seconds)}.`
            : `Outside the sandbox on the host for ${duration(m.ttl_seconds)}, then back to sandboxed.`;
          reason.textContent = !m.available && !direct && m.reason ? m.reason : '';
          reason.hidden = reason.textContent === '';
        };
      }
    }

    const status = h('p', { class: 'popover-alert', role: 'status' });
    const closeBtn = h(
      'button',
      {
        class: 'icon-button popover-close',
        type: 'button',
        attrs: { 'aria-label': 'Close' },
        on: { click: () => this.close() },
      },
      icon('close'),
    );
    const pop = h(
      'div',
      {
        id: 'mode-popover',
        class: admin ? 'popover popover-two' : 'popover popover-one',
        role: 'dialog',
        attrs: { 'aria-modal': 'true', 'aria-labelledby': 'popover-title' },
      },
      h(
        'div',
        { class: 'popover-head' },
        h('h2', { id: 'popover-title', class: 'popover-title', text: 'Session settings' }),
        closeBtn,
      ),
      status,
      h('div', { class: 'popover-cols' }, permCol, execCol),
      h('p', {
        class: 'popover-foot',
        text: 'Applies to this login session in all its tabs, from the next command or new terminal on.',
      }),
    );
    pop.addEventListener('keydown', (ev) => {
      if (ev.key === 'Escape' && isTopTrap(pop)) {
        ev.preventDefault();
        this.close();
      }
    });

    this.update = () => {
      const st = store.status;
      if (!st) return;
      for (const o of permOpts) o.el.setAttribute('aria-checked', String(st.permission === o.value));
      permNote.textContent =
        st.execution_mode.mode === 'direct'
          ? 'Direct mode runs commands outside the sandbox: the permission applies again when it ends.'
          : '';
      permNote.hidden = permNote.textContent === '';
      // Drawn again only when it changed: the tick calls this 4 times a second.
      const eg = isAllowlist(st.permission) ? JSON.stringify(st.egress ?? null) : '';
      if (eg !== egressShown) {
        egressShown = eg;
        egressBox.hidden = eg === '';
        if (eg === '') egressBox.replaceChildren();
        else egressBox.replaceChildren(egressSummary(st.egress));
      }
      status.textContent = st.backend.ok
        ? ''
        : `The sandbox is unavailable: ${st.backend.reason ?? 'no reason given'}. Nothing runs until it is back.`;
      status.hidden = status.textContent === '';
      updateExec();
    };
    this.update();

    this.popover = pop;
    this.el.appendChild(pop);
    this.button.setAttribute('aria-expanded', 'true');
    this.undoTrap = trapFocus(pop);
    const first =
      pop.querySelector<HTMLElement>('[role="radio"][aria-checked="true"]') ??
      pop.querySelector<HTMLElement>('[role="radio"]');
    first?.focus();
    // The allowed domains may have changed since the last read (an admin).
    if (isAllowlist(s.permission)) store.refresh().catch(() => undefined);
  }

  close(returnFocus = true): void {
    if (!this.popover) return;
    this.undoTrap?.();
    this.undoTrap = null;
    this.popover.remove();
    this.popover = null;
    this.update = null;
    this.button.setAttribute('aria-expanded', 'false');
    if (returnFocus) this.button.focus();
  }
}
