// Admin views: every login session with its mode and live countdown (and a
// revert button and its allowed domains), every terminal with its running state (and a kill
// button), the audit log with filters, and a debug page.

import { ApiError, del, get, post, type AdminSession, type AuditRecord, type DebugInfo, type Limits } from './api';
import { confirmDialog } from './dialog';
import { h, icon, replace } from './dom';
import { openEgressEditor } from './egress';
import { countdown, dateTime, permissionLabel, uptime, usageLine } from './format';
import { playButton } from './player';
import { errorToast } from './popover';
import { store } from './state';
import { toast } from './toast';

type Tab = 'sessions' | 'terminals' | 'audit' | 'debug';

// Several hosts share the store: the views say which host serves what.
function inFleet(): boolean {
  return store.status?.host?.store === 'postgresql';
}

const TABS: { id: Tab; label: string }[] = [
  { id: 'sessions', label: 'Sessions' },
  { id: 'terminals', label: 'Terminals' },
  { id: 'audit', label: 'Audit log' },
  { id: 'debug', label: 'Debug' },
];

// The actions brokerd records (docs/audit.md), offered in the filter.
const AUDIT_ACTIONS = [
  'login',
  'login_failed',
  'logout',
  'mode_requested',
  'mode_granted',
  'mode_refused',
  'permission_changed',
  'permission_refused',
  'spawn_refused',
  'terminal_closed',
  'terminal_exited',
  'recording',
  'token_minted',
  'admin_revert',
  'admin_kill',
  'admin_refused',
  'admin_debug',
  'egress',
  'egress_summary',
  'egress_allow',
  'csrf_refused',
  'auth_refused',
];

// The audit filters, as the query of /api/admin/audit (and of /admin/audit).
type AuditFilters = {
  user: string;
  action: string;
  session: string;
  decision: string;
  request_id: string;
  since: string;
  until: string;
  limit: string;
};
const AUDIT_KEYS = ['user', 'action', 'session', 'decision', 'request_id', 'since', 'until', 'limit'] as const;
const noFilters = (): AuditFilters => ({
  user: '',
  action: '',
  session: '',
  decision: '',
  request_id: '',
  since: '',
  until: '',
  limit: '100',
});

const shortId = (id: string): string => (id.length > 12 ? `${id.slice(0, 8)}…` : id);

// A table with a header row; rows are arrays of cells.
function table(caption: string, heads: string[], rows: (Node | string)[][], cls = ''): HTMLElement {
  const thead = h('thead', {}, h('tr', {}, ...heads.map((t) => h('th', { text: t, attrs: { scope: 'col' } }))));
  const tbody = h(
    'tbody',
    {},
    ...rows.map((r) => h('tr', {}, ...r.map((c) => h('td', {}, c)))),
  );
  return h(
    'div',
    { class: 'table-wrap' },
    h('table', { class: `table ${cls}` }, h('caption', { class: 'visually-hidden', text: caption }), thead, tbody),
  );
}

function emptyRow(text: string): HTMLElement {
  return h('p', { class: 'empty-row', text });
}

function loadError(e: unknown): HTMLElement {
  const msg = e instanceof ApiError ? e.describe() : String(e);
  return h('p', { class: 'load-error text-error', role: 'alert', text: `Could not load: ${msg}` });
}

// A session's or terminal's mode, direct in warning text.
function modeText(mode: string): HTMLElement {
  return h('span', {
    class: mode === 'direct' ? 'text-warning strong' : '',
    text: mode === 'direct' ? 'Direct' : 'Sandboxed',
  });
}

export class AdminView {
  readonly el: HTMLElement;
  private nav: HTMLElement;
  private body: HTMLElement;
  private tab: Tab = 'sessions';
  private timer: number | null = null;
  // Live countdowns: element and its deadline (performance.now()).
  private countdowns: { el: HTMLElement; until: number }[] = [];
  private unTick: (() => void) | null = null;
  private unSub: (() => void) | null = null;
  private auditFilters: AuditFilters = noFilters();

  constructor() {
    this.nav = h('nav', { class: 'subnav', attrs: { 'aria-label': 'Admin' } });
    this.body = h('div', { class: 'admin-body' });
    this.el = h(
      'div',
      { class: 'view view-admin' },
      h('div', { class: 'admin-head' }, h('h1', { class: 'page-title', text: 'Administration' }), this.nav),
      this.body,
    );
  }

  // Show a tab (from the URL: /admin/sessions and so on).
  show(tab: string): void {
    this.stop();
    if (!store.isAdmin) {
      replace(this.nav);
      replace(this.body, h('p', { class: 'empty-row', text: 'Only admins see this page.' }));
      return;
    }
    this.tab = (TABS.some((t) => t.id === tab) ? tab : 'sessions') as Tab;
    // /admin/audit?session=...: filters from the address (a link, a reload).
    const params = new URLSearchParams(location.search);
    if (this.tab === 'audit' && AUDIT_KEYS.some((k) => params.has(k))) {
      this.auditFilters = noFilters();
      for (const k of AUDIT_KEYS) {
        const v = params.get(k);
        if (v !== null && k !== 'since' && k !== 'until') this.auditFilters[k] = v;
      }
    }
    replace(
      this.nav,
      ...TABS.map((t) =>
        h('a', {
          href: `/admin/${t.id}`,
          class: t.id === this.tab ? 'subnav-link active' : 'subnav-link',
          text: t.label,
          attrs: t.id === this.tab ? { 'aria-current': 'page' } : {},
        }),
      ),
    );
    this.unTick = setInterval1s(() => this.tickCountdowns());
    void this.load();
    if (this.tab === 'sessions' || this.tab === 'terminals') {
      this.timer = window.setInterval(() => void this.load(true), 5000);
      // Mode changes of this session show at once.
      this.unSub = store.subscribe(() => void this.load(true));
    }
  }

  stop(): void {
    if (this.timer !== null) window.clearInterval(this.timer);
    this.timer = null;
    this.unTick?.();
    this.unTick = null;
    this.unSub?.();
    this.unSub = null;
  }

  private async load(quiet = false): Promise<void> {
    const tab = this.tab;
    if (!quiet) replace(this.body, h('p', { class: 'loading', text: 'Loading…' }));
    let content: HTMLElement;
    try {
      if (tab === 'sessions') content = await this.sessions();
      else if (tab === 'terminals') content = await this.terminals();
      else if (tab === 'audit') content = await this.audit();
      else content = await this.debug();
    } catch (e) {
      if (quiet) return;
      content = loadError(e);
    }
    if (tab !== this.tab) return;
    // Keep the focus on a button that is drawn again.
    const focusKey = (document.activeElement as HTMLElement | null)?.dataset?.focusKey;
    replace(this.body, content);
    if (focusKey) this.body.querySelector<HTMLElement>(`[data-focus-key="${CSS.escape(focusKey)}"]`)?.focus();
  }

  private limits: Limits | null = null;
  private containment: Record<string, unknown> | null = null;

  private async fetchSessions(): Promise<AdminSession[]> {
    const r = await get<{
      sessions: AdminSession[];
      limits?: Limits;
      containment?: Record<string, unknown>;
    }>('/api/admin/sessions');
    this.limits = r.limits ?? null;
    this.containment = r.containment ?? null;
    return r.sessions ?? [];
  }

  private async sessions(): Promise<HTMLElement> {
    const list = await this.fetchSessions();
    this.countdowns = [];
    if (list.length === 0) return emptyRow('No sessions.');
    const containers = list.some((s) => s.container);
    const fleet = inFleet();
    const rows = list.map((s) => {
      const direct = s.mode === 'direct';
      let mode: HTMLElement = modeText(s.mode);
      if (direct && s.remaining_seconds !== null) {
        const left = h('span', { class: 'countdown', text: countdown(s.remaining_seconds) });
        this.countdowns.push({ el: left, until: performance.now() + s.remaining_seconds * 1000 });
        mode = h('span', {}, mode, ' · ', left, ' left');
      }
      const running = s.terminals.filter((t) => t.running).length;
      const revert = h('button', {
        class: 'btn btn-small',
        type: 'button',
        text: 'Revert to sandboxed',
        disabled: !direct,
        attrs: { 'data-focus-key': `revert-${s.id}`, 'aria-label': `Revert ${s.user}'s session to sandboxed` },
        on: { click: () => void this.revert(s) },
      });
      const domains = h('button', {
        class: 'btn btn-small',
        type: 'button',
        text: 'Allowed domains',
        attrs: {
          'data-focus-key': `egress-${s.id}`,
          'data-egress-edit': s.id,
          'aria-label': `Allowed domains of ${s.user} and of the session ${shortId(s.id)}`,
        },
        on: { click: () => openEgressEditor(s) },
      });
      return [
        h('span', { class: 'strong', text: s.user }),
        h('code', { text: shortId(s.id), title: s.id }),
        dateTime(s.created),
        dateTime(s.last_seen),
        mode,
        s.permission ? permissionLabel(s.permission) : '—',
        ...(fleet ? [s.host ?? '—', s.home ?? '—'] : []),
        `${running} running${s.terminals.length > running ? `, ${s.terminals.length - running} ended` : ''}`,
        this.limits
          ? h('span', {
              class: 'usage-cell',
              text: usageLine(s.usage ?? null, this.limits, this.containment),
              title: s.usage ? '' : `usage unknown: ${s.usage_reason ?? 'not reported'}`,
            })
          : '—',
        ...(containers ? [s.container ? h('code', { text: s.container }) : '—'] : []),
        h('span', { class: 'row-actions' }, this.auditLink(s), domains, revert),
      ];
    });
    return table(
      'Login sessions',
      ['User', 'Session', 'Created', 'Last seen', 'Mode', 'Permission', ...(fleet ? ['Host', 'Home'] : []), 'Terminals', 'Usage', ...(containers ? ['Container'] : []), ''],
      rows,
      'table-sessions',
    );
  }

  private async revert(s: AdminSession): Promise<void> {
    try {
      await post(`/api/admin/sessions/${encodeURIComponent(s.id)}/revert`);
      toast('success', `${s.user}'s session is sandboxed again`, undefined, `revert-${s.id}`);
      store.refresh().catch(() => undefined);
    } catch (e) {
      errorToast('Session not reverted', e);
    }
    void this.load(true);
  }

  private async terminals(): Promise<HTMLElement> {
    const list = await this.fetchSessions();
    this.countdowns = [];
    const rows: (Node | string)[][] = [];
    const fleet = inFleet();
    for (const s of list) {
      for (const t of s.terminals) {
        const lost = t.state === 'lost';
        rows.push([
          h('code', { text: shortId(t.id), title: t.id }),
          h('span', { class: 'strong', text: s.user }),
          h('code', { text: shortId(s.id), title: s.id }),
          ...(fleet ? [t.host ?? '—'] : []),
          modeText(t.mode),
          h('span', {
            class: t.running ? 'text-success' : 'text-muted',
            text: lost ? 'Lost with its host' : t.running ? 'Running' : 'Ended',
          }),
          h('button', {
            class: 'btn btn-small btn-danger-text',
            type: 'button',
            text: 'Kill',
            // Another host's terminal is killed on that host.
            disabled: !t.running || (fleet && t.host !== store.status?.host?.id),
            attrs: { 'data-focus-key': `kill-${t.id}`, 'aria-label': `Kill terminal ${shortId(t.id)} of ${s.user}` },
            on: { click: () => void this.kill(s.user, t.id) },
          }),
        ]);
      }
    }
    if (rows.length === 0) return emptyRow('No terminals.');
    return table(
      'Terminals',
      ['Terminal', 'User', 'Session', ...(fleet ? ['Host'] : []), 'Mode', 'Status', ''],
      rows,
      'table-terminals',
    );
  }

  private async kill(user: string, id: string): Promise<void> {
    const ok = await confirmDialog({
      title: `Kill ${user}'s terminal?`,
      body: [`Terminal ${shortId(id)} and every process in it are stopped at once.`],
      confirm: 'Kill terminal',
      warning: true,
    });
    if (!ok) return;
    try {
      await del(`/api/admin/terminals/${encodeURIComponent(id)}`);
      toast('success', 'Terminal killed', `${user}'s terminal ${shortId(id)}`);
    } catch (e) {
      errorToast('Terminal not killed', e);
    }
    void this.load(true);
  }

  // A link to the audit records of one session (its spawns, terminals...).
  private auditLink(s: AdminSession): HTMLElement {
    const href = `/admin/audit?session=${encodeURIComponent(s.id)}`;
    return h('a', {
      class: 'btn btn-small audit-link',
      href,
      text: 'Audit records',
      attrs: { 'aria-label': `Audit records of ${s.user}'s session ${shortId(s.id)}` },
      on: {
        click: (ev: Event) => {
          ev.preventDefault();
          this.auditFilters = { ...noFilters(), session: s.id };
          history.pushState(null, '', href);
          this.show('audit');
        },
      },
    });
  }

  private async audit(): Promise<HTMLElement> {
    const f = this.auditFilters;
    const select = h(
      'select',
      { id: 'audit-decision', name: 'decision', class: 'input' },
      ...[
        ['', 'Any'],
        ['allowed', 'Allowed'],
        ['refused', 'Refused'],
      ].map(([v, t]) => h('option', { value: v, text: t, attrs: v === f.decision ? { selected: '' } : {} })),
    ) as HTMLSelectElement;
    select.addEventListener('change', () => (f.decision = select.value));
    const decision = h(
      'div',
      { class: 'field' },
      h('label', { for: 'audit-decision', text: 'Decision', class: 'label' }),
      select,
    );
    const field = (name: keyof AuditFilters, label: string, type: string, extra: Record<string, string> = {}) => {
      const id = `audit-${name}`;
      const input = h('input', { id, name, type, value: f[name], class: 'input', attrs: extra });
      input.addEventListener('change', () => (f[name] = input.value));
      input.addEventListener('input', () => (f[name] = input.value));
      return h('div', { class: 'field' }, h('label', { for: id, text: label, class: 'label' }), input);
    };
    const form = h(
      'form',
      { class: 'filters', attrs: { 'aria-label': 'Audit filters' } },
      field('user', 'User', 'text', { autocomplete: 'off', spellcheck: 'false' }),
      field('action', 'Action', 'text', { autocomplete: 'off', spellcheck: 'false', list: 'audit-actions' }),
      h('datalist', { id: 'audit-actions' }, ...AUDIT_ACTIONS.map((a) => h('option', { value: a }))),
      field('session', 'Session', 'text', { autocomplete: 'off', spellcheck: 'false' }),
      field('request_id', 'Request id', 'text', { autocomplete: 'off', spellcheck: 'false' }),
      decision,
      field('since', 'Since', 'datetime-local', { step: '1' }),
      field('until', 'Until', 'datetime-local', { step: '1' }),
      field('limit', 'Limit', 'number', { min: '1', max: '1000' }),
      h('div', { class: 'field field-actions' }, h('button', { class: 'btn btn-primary', type: 'submit', text: 'Apply' })),
    );
    const results = h('div', { class: 'audit-results' });
    form.addEventListener('submit', (ev) => {
      ev.preventDefault();
      void this.auditResults(results);
    });
    await this.auditResults(results);
    return h('div', {}, form, results);
  }

  private async auditResults(into: HTMLElement): Promise<void> {
    const f = this.auditFilters;
    const q = new URLSearchParams();
    if (f.user.trim()) q.set('user', f.user.trim());
    if (f.action.trim()) q.set('action', f.action.trim());
    if (f.session.trim()) q.set('session', f.session.trim());
    if (f.request_id.trim()) q.set('request_id', f.request_id.trim());
    if (f.decision) q.set('decision', f.decision);
    const iso = (v: string): string => new Date(v).toISOString();
    if (f.since) q.set('since', iso(f.since));
    if (f.until) q.set('until', iso(f.until));
    if (f.limit) q.set('limit', f.limit);
    let records: AuditRecord[];
    try {
      records = (await get<{ records: AuditRecord[] }>(`/api/admin/audit?${q}`)).records ?? [];
    } catch (e) {
      replace(into, loadError(e));
      return;
    }
    if (records.length === 0) {
      replace(into, emptyRow('No records match.'));
      return;
    }
    const playerBox = h('div', { class: 'audit-player', hidden: true });
    // Records: {seq, time, action, user, session, allowed, reason, detail,
    // prev, hmac}; the chain's hashes are for verifiers, not for reading.
    const rows = records.map((r) => {
      const allowed = r.allowed;
      const detail = r.detail;
      const detailText =
        detail === null || detail === undefined
          ? ''
          : typeof detail === 'string'
            ? detail
            : Object.entries(detail as Record<string, unknown>)
                .map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`)
                .join('  ');
      return [
        h('span', { class: 'nowrap', text: dateTime(r.time) }),
        String(r.user ?? '—'),
        h('code', { text: String(r.action ?? '—') }),
        allowed === undefined || allowed === null
          ? '—'
          : h('span', {
              class: allowed ? 'text-success' : 'text-error',
              text: allowed ? 'Allowed' : 'Refused',
            }),
        String(r.reason ?? ''),
        h('span', { class: 'details', text: detailText }, playButton(r.action, detail, playerBox) ?? ''),
        r.session ? h('code', { text: shortId(String(r.session)), title: String(r.session) }) : '—',
      ];
    });
    replace(
      into,
      h('p', { class: 'count', text: `${records.length} record${records.length === 1 ? '' : 's'}` }),
      playerBox,
      table('Audit records', ['Time', 'User', 'Action', 'Decision', 'Reason', 'Detail', 'Session'], rows, 'table-audit'),
    );
  }

  private async debug(): Promise<HTMLElement> {
    const d = await get<DebugInfo>('/api/admin/debug');
    const kv = (title: string, obj: Record<string, unknown> | undefined, wide = false): HTMLElement | null => {
      if (!obj || Object.keys(obj).length === 0) return null;
      return h(
        'section',
        { class: wide ? 'card card-wide' : 'card' },
        h('h2', { class: 'card-title', text: title }),
        h(
          'dl',
          { class: 'kv' },
          ...Object.entries(obj).flatMap(([k, v]) => [
            h('dt', { text: k }),
            h(
              'dd',
              {},
              v === null || v === '' || v === undefined
                ? h('span', { class: 'text-muted', text: '—' })
                : h('code', { text: typeof v === 'string' ? v : JSON.stringify(v) }),
            ),
          ]),
        ),
      );
    };
    const b = d.backend;
    const probe = b
      ? h(
          'section',
          { class: 'card' },
          h('h2', { class: 'card-title', text: 'Backend probe' }),
          h(
            'p',
            { class: b.ok ? 'probe text-success strong' : 'probe text-error strong' },
            icon(b.ok ? 'check' : 'alert'),
            h('span', { text: `${b.name}: ${b.ok ? 'works' : 'does not work'}` }),
          ),
          b.reason ? h('p', { class: 'text-muted', text: String(b.reason) }) : null,
        )
      : null;
    const refresh = h(
      'button',
      { class: 'btn btn-small', type: 'button', on: { click: () => void this.load() } },
      icon('refresh'),
      h('span', { text: 'Refresh' }),
    );
    const rest: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(d)) {
      if (!['versions', 'uptime_seconds', 'backend', 'config', 'counters'].includes(k)) rest[k] = v;
    }
    return h(
      'div',
      { class: 'debug' },
      h(
        'div',
        { class: 'debug-head' },
        h('p', {
          class: 'text-muted',
          text: d.uptime_seconds !== undefined ? `Up for ${uptime(d.uptime_seconds)}` : '',
        }),
        refresh,
      ),
      h(
        'div',
        { class: 'cards' },
        probe,
        kv('Versions', d.versions),
        kv('Counters', d.counters),
        kv('Effective configuration', d.config, true),
        kv('Other', rest, true),
      ),
    );
  }

  private tickCountdowns(): void {
    const now = performance.now();
    for (const c of this.countdowns) {
      c.el.textContent = countdown(Math.max(0, (c.until - now) / 1000));
    }
  }
}

function setInterval1s(fn: () => void): () => void {
  const t = window.setInterval(fn, 500);
  return () => window.clearInterval(t);
}
