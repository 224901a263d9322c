// Egress by allowlist: under the +allowlist profiles a command reaches the
// network only through hostgate's egress proxy, and only the allowed
// domains. The popover lists them (from /api/status's egress: the
// configured ones, the user's and the session's additions, each marked
// where it comes from) with the proxy's state; admins add and remove a
// user's and a session's domains in a dialog of the sessions view.

import { ApiError, get, put, type AdminEgress, type AdminSession, type Egress } from './api';
import { modal } from './dialog';
import { h, icon } from './dom';
import { store } from './state';
import { toast } from './toast';

// Where an allowed domain comes from, as the popover marks it.
const SOURCES: { key: 'allow' | 'user' | 'session'; label: string }[] = [
  { key: 'allow', label: 'everyone' },
  { key: 'user', label: 'your account' },
  { key: 'session', label: 'this session' },
];

// A failed change, as a toast with the server's message.
function failed(title: string, e: unknown): void {
  toast('error', title, e instanceof ApiError ? e.describe() : String(e));
}

// Why the proxy is down, as a sentence's start: the server's reason.
function proxyDown(reason: string | null): string {
  const r = reason?.trim().replace(/\.$/, '') || 'the egress proxy is not running';
  return r.charAt(0).toUpperCase() + r.slice(1);
}

// The popover's part for an allowlist profile: the proxy's state, then the
// allowed domains with their source, the ports and the denylist.
export function egressSummary(e: Egress | undefined): HTMLElement {
  const box = h('div', { class: 'egress', attrs: { 'data-egress': '' } });
  box.appendChild(h('h4', { class: 'egress-title', id: 'egress-heading', text: 'Allowed domains' }));
  if (!e) {
    box.appendChild(h('p', { class: 'egress-note', text: 'The allowed domains are not known yet.' }));
    return box;
  }
  if (!e.proxy.ok) {
    box.appendChild(
      h(
        'p',
        { class: 'egress-warning', role: 'alert', attrs: { 'data-proxy': 'down' } },
        icon('alert'),
        h('span', { text: `${proxyDown(e.proxy.reason)}: commands under this profile fail until it is back.` }),
      ),
    );
  }
  const items = SOURCES.flatMap((s) =>
    (e[s.key] ?? []).map((d) =>
      h(
        'li',
        { class: 'egress-item', attrs: { 'data-source': s.key, 'data-domain': d } },
        h('code', { class: 'egress-domain', text: d }),
        h('span', { class: 'egress-source', text: s.label }),
      ),
    ),
  );
  if (items.length === 0) {
    box.appendChild(
      h('p', {
        class: 'egress-note',
        attrs: { 'data-empty': '' },
        text: 'No domain is allowed: every connection is refused. An admin can allow domains.',
      }),
    );
  } else {
    box.appendChild(h('ul', { class: 'egress-list', attrs: { 'aria-labelledby': 'egress-heading' } }, ...items));
  }
  const notes = [`Ports ${e.ports.join(', ')}; other domains are refused.`];
  if (e.deny.length) notes.push(`Never: ${e.deny.join(', ')}.`);
  box.appendChild(h('p', { class: 'egress-note', text: notes.join(' ') }));
  return box;
}

// The open editor's close, or null.
let closeOpen: (() => void) | null = null;

// Close the editor if it is open (the session ended, the view changed).
export function closeEgressEditor(): void {
  closeOpen?.();
}

// One scope's list in the editor: its domains with a Remove button each,
// and a field to add one. save() PUTs the whole new list.
function scopeEditor(
  key: string,
  title: string,
  help: string,
  save: (allow: string[]) => Promise<string[] | null>,
): { el: HTMLElement; set: (allow: string[]) => void } {
  let current: string[] = [];
  const headingId = `egress-${key}-title`;
  const inputId = `egress-${key}-input`;
  const list = h('ul', { class: 'egress-edit-list', attrs: { 'aria-labelledby': headingId } });
  const empty = h('p', { class: 'egress-note', text: 'None.' });
  // Disabled until the present list is read: a save replaces the list.
  const input = h('input', {
    id: inputId,
    class: 'input',
    type: 'text',
    placeholder: 'pypi.org or *.example.com',
    autocomplete: 'off',
    disabled: true,
    attrs: { spellcheck: 'false', 'data-egress-input': key },
  });
  const add = h(
    'button',
    { class: 'btn btn-small', type: 'submit', disabled: true, attrs: { 'data-egress-add': key } },
    icon('plus'),
    h('span', { text: 'Add' }),
  );
  const form = h(
    'form',
    { class: 'egress-add' },
    h('label', { class: 'visually-hidden', for: inputId, text: `Add a domain: ${title}` }),
    input,
    add,
  );

  const draw = (): void => {
    empty.hidden = current.length > 0;
    list.replaceChildren(
      ...current.map((d) =>
        h(
          'li',
          { class: 'egress-edit-row', attrs: { 'data-domain': d } },
          h('code', { class: 'egress-domain', text: d }),
          h('button', {
            class: 'btn btn-small btn-danger-text',
            type: 'button',
            text: 'Remove',
            attrs: { 'data-egress-remove': d, 'aria-label': `Remove ${d}: ${title}` },
            on: { click: () => void change(current.filter((x) => x !== d), null) },
          }),
        ),
      ),
    );
  };
  const change = async (next: string[], added: string | null): Promise<void> => {
    add.disabled = true;
    try {
      const got = await save(next);
      if (got === null) return;
      current = got;
      draw();
      if (added !== null) {
        input.value = '';
        input.focus();
      } else if (!list.contains(document.activeElement)) {
        input.focus();
      }
    } finally {
      add.disabled = false;
    }
  };
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const d = input.value.trim().toLowerCase();
    if (d === '') return;
    if (current.includes(d)) {
      toast('info', `${d} is allowed already`, title);
      return;
    }
    void change([...current, d], d);
  });

  const el = h(
    'section',
    { class: 'egress-scope', attrs: { 'data-scope': key } },
    h('h3', { class: 'agent-sub', id: headingId, text: title }),
    h('p', { class: 'agent-help', text: help }),
    empty,
    list,
    form,
  );
  return {
    el,
    set: (allow: string[]) => {
      current = [...allow];
      input.disabled = add.disabled = false;
      draw();
    },
  };
}

// The editor of a session's and its user's allowed domains; the focus goes
// back to the opener (or its redrawn twin, by data-focus-key) at close.
export function openEgressEditor(s: AdminSession): void {
  if (closeOpen) return;
  const shortId = s.id.slice(0, 8);

  const save = (scope: 'users' | 'sessions', target: string, what: string) => async (
    allow: string[],
  ): Promise<string[] | null> => {
    try {
      const r = await put<{ allow?: string[] }>(
        `/api/admin/egress/${scope}/${encodeURIComponent(target)}`,
        { allow },
      );
      toast('success', 'Allowed domains saved', what, `egress-${scope}-${target}`);
      // The popover of this tab shows its own session's list.
      store.refresh().catch(() => undefined);
      return r?.allow ?? allow;
    } catch (e) {
      failed('Allowed domains not changed', e);
      return null;
    }
  };
  const user = scopeEditor(
    'user',
    `${s.user}'s account`,
    `In every session of ${s.user}.`,
    save('users', s.user, `${s.user}'s account`),
  );
  const session = scopeEditor(
    'session',
    `This session (${shortId}…)`,
    'In this login session only; gone when it ends.',
    save('sessions', s.id, `session ${shortId}…`),
  );
  const global = h('p', { class: 'agent-help', attrs: { 'data-egress-global': '' }, text: 'Loading…' });

  const close = h('button', {
    class: 'btn',
    type: 'button',
    text: 'Close',
    attrs: { 'data-action': 'close' },
    on: { click: () => dlg.close() },
  });
  const dlg = modal({
    title: `Allowed domains: ${s.user}`,
    id: 'egress-dialog',
    wide: true,
    describedBy: 'egress-intro',
    body: [
      h('p', {
        id: 'egress-intro',
        text:
          'Under an allowlist profile, commands reach the network only through the egress proxy, and only ' +
          'these domains. A name allows that host; *.example.com allows its sub-domains. Changes apply to ' +
          'running commands at once.',
      }),
      global,
      user.el,
      session.el,
    ],
    actions: [close],
    focus: close,
    onClose: () => {
      closeOpen = null;
    },
  });
  const dialog = dlg.el;
  closeOpen = dlg.close;

  get<AdminEgress>('/api/admin/egress').then(
    (e) => {
      if (closeOpen !== dlg.close) return;
      global.textContent = e.allow.length
        ? `Allowed for everyone (configuration): ${e.allow.join(', ')}.`
        : 'No domain is allowed for everyone (configuration).';
      user.set(e.users?.[s.user] ?? []);
      session.set(e.sessions?.[s.id] ?? []);
      dialog.querySelector<HTMLElement>('[data-egress-input="user"]')?.focus();
    },
    (e) => {
      global.textContent = '';
      failed('Cannot read the allowed domains', e);
    },
  );
}
