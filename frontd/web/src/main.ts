// The hostgate panel: login, then a top bar (with the state button) over the
// terminals or the admin views. The state comes from /api/status on load
// and from the event stream after.

import { installConstructedStyles } from './cspstyle';
import './style.css';

import { ApiError, get, post, setCsrfToken, setSessionLostHandler, type Status } from './api';
import { usageLine } from './format';
import { AdminView } from './admin';
import { closeAgents, openAgents, refreshAgents } from './agents';
import { closeEgressEditor } from './egress';
import { h, icon } from './dom';
import { startEvents, stopEvents } from './events';
import { loginView } from './login';
import { ModeControl } from './popover';
import { currentPath, navigate, startRouter } from './router';
import { store } from './state';
import { forgetFiles } from './files';
import { TerminalsView, forgetTerminals } from './terminals';
import { clearToasts } from './toast';

installConstructedStyles();

const root = document.getElementById('app')!;

interface App {
  shell: HTMLElement;
  main: HTMLElement;
  nav: HTMLElement;
  terminals: TerminalsView;
  admin: AdminView;
  mode: ModeControl;
  unsub: () => void;
  onVisible: () => void;
  onKey: (ev: KeyboardEvent) => void;
  renderTop: () => void;
  usageTimer: number;
}

// How often the top bar's usage is read again while the tab is visible.
const USAGE_REFRESH_MS = 20000;

// The user's memory, processes and disk against their limits, one line.
function renderUsage(el: HTMLElement, st: Status): void {
  const lim = st.limits;
  if (!lim) {
    el.hidden = true;
    return;
  }
  const u = st.usage ?? null;
  el.textContent = usageLine(u, lim, st.containment);
  el.title = u
    ? `Your usage against your limits${u.oom_kills ? `; ${u.oom_kills} out-of-memory kills` : ''}`
    : `Your limits (usage unknown: ${st.usage_reason ?? 'not reported'})`;
  el.hidden = false;
}

let app: App | null = null;
// Where to go after logging in.
let afterLogin = '/';

function buildApp(): App {
  const s = store.status!;
  const mode = new ModeControl();
  const live = h('span', { class: 'live-state', role: 'status' });
  const usage = h('span', { class: 'usage-state', id: 'usage' });
  const nav = h('nav', { class: 'mainnav', attrs: { 'aria-label': 'Main' } });
  const agents = h(
    'button',
    {
      class: 'btn btn-small btn-ghost agents-button',
      id: 'agents-button',
      type: 'button',
      title: 'Connect an agent (an MCP client) with a token of this session',
      attrs: { 'aria-haspopup': 'dialog', 'aria-label': 'Connect an agent' },
      on: { click: () => openAgents() },
    },
    icon('link'),
    h('span', { class: 'agents-label', text: 'Connect an agent' }),
  );
  const logout = h(
    'button',
    { class: 'btn btn-small btn-ghost', id: 'logout', type: 'button', on: { click: () => void logOut() } },
    h('span', { text: 'Log out' }),
  );
  const header = h(
    'header',
    { class: 'topbar' },
    h('a', { class: 'skip-link', href: '#main', text: 'Skip to content' }),
    h(
      'a',
      { class: 'brand', href: '/', attrs: { 'aria-label': 'hostgate, terminals' } },
      h('span', { class: 'brand-mark', attrs: { 'aria-hidden': 'true' } }, 'h'),
      h('span', { class: 'brand-name', text: 'hostgate' }),
    ),
    nav,
    h('div', { class: 'topbar-spacer' }),
    usage,
    live,
    mode.el,
    h(
      'div',
      { class: 'user-box' },
      h('span', { class: 'user-name', text: s.user }),
      h('span', { class: 'user-role', text: s.role === 'admin' ? 'admin' : 'user' }),
      ...(s.host
        ? [
            h('span', {
              class: 'user-host',
              id: 'serving-host',
              text: `on ${s.host.id}`,
              title: `Served by host ${s.host.id} (${s.host.store === 'postgresql' ? 'a fleet on PostgreSQL' : 'embedded store'})`,
            }),
          ]
        : []),
    ),
    agents,
    logout,
  );
  const main = h('main', { class: 'main', id: 'main', tabindex: -1 });
  const shell = h('div', { class: 'shell' }, header, main);
  const terminals = new TerminalsView();
  const admin = new AdminView();
  main.append(terminals.el, admin.el);

  const renderTop = (): void => {
    const st = store.status;
    if (!st) return;
    renderUsage(usage, st);
    live.textContent = store.live ? '' : 'Live updates paused';
    live.hidden = store.live;
    const path = currentPath();
    const links: [string, string, boolean][] = [['/', 'Terminals', !path.startsWith('/admin')]];
    if (st.role === 'admin') links.push(['/admin', 'Admin', path.startsWith('/admin')]);
    nav.replaceChildren(
      ...links.map(([href, text, on]) =>
        h('a', {
          href,
          text,
          class: on ? 'mainnav-link active' : 'mainnav-link',
          attrs: on ? { 'aria-current': 'page' } : {},
        }),
      ),
    );
  };
  const unsub = store.subscribe(renderTop);
  renderTop();
  // F6 moves the focus between the top bar and the page (the terminal
  // keeps Tab for the shell).
  const onKey = (ev: KeyboardEvent): void => {
    if (ev.key !== 'F6' || ev.altKey || ev.ctrlKey || ev.metaKey || document.querySelector('[aria-modal="true"]')) {
      return;
    }
    ev.preventDefault();
    const inFiles = terminals.files.el.contains(document.activeElement);
    if (header.contains(document.activeElement)) {
      if (terminals.el.hidden || !terminals.focusActive()) main.focus();
    } else if (inFiles || terminals.el.hidden || !terminals.focusFiles()) {
      // (From the terminal, the open file pane comes before the top bar.)
      document.getElementById('mode-button')?.focus();
    }
  };
  document.addEventListener('keydown', onKey);
  const onVisible = (): void => {
    if (document.visibilityState === 'visible') store.refresh().catch(() => undefined);
  };
  document.addEventListener('visibilitychange', onVisible);
  // Usage changes without an event: read it again now and then, for the
  // top bar alone.
  const usageTimer = window.setInterval(() => {
    if (document.visibilityState !== 'visible') return;
    get<Status>('/api/status')
      .then((fresh) => renderUsage(usage, fresh))
      .catch(() => undefined);
  }, USAGE_REFRESH_MS);
  return { shell, main, nav, terminals, admin, mode, unsub, onVisible, onKey, renderTop, usageTimer };
}

// Draw the page of path.
function route(path: string): void {
  if (!app) {
    afterLogin = path === '/login' ? '/' : path;
    return;
  }
  if (path === '/login') {
    navigate('/', true);
    return;
  }
  const isAdmin = path === '/admin' || path.startsWith('/admin/');
  app.terminals.el.hidden = isAdmin;
  app.admin.el.hidden = !isAdmin;
  if (isAdmin) {
    app.admin.show(path.split('/')[2] ?? 'sessions');
    document.title = 'Admin · hostgate';
  } else {
    app.admin.stop();
    if (path !== '/') history.replaceState(null, '', '/');
    document.title = 'hostgate';
    void app.terminals.start();
  }
  app.renderTop();
}

function startApp(): void {
  app = buildApp();
  root.replaceChildren(app.shell);
  setSessionLostHandler((why) => showLogin(why));
  startEvents({
    terminalExited: (id, reason) => app?.terminals.terminalExited(id, reason),
    sessionEnded: () => {
      setCsrfToken(null);
      forgetTerminals();
      forgetFiles();
      showLogin('You were signed out: this session has ended.');
    },
    resync: () => {
      void app?.terminals.refreshList().catch(() => undefined);
      refreshAgents();
    },
    tokenRevoked: () => refreshAgents(),
  });
  const path = afterLogin !== '/' ? afterLogin : currentPath();
  afterLogin = '/';
  navigate(path, true);
}

function teardown(): void {
  setSessionLostHandler(() => undefined);
  stopEvents();
  clearToasts();
  closeAgents();
  closeEgressEditor();
  if (app) {
    app.unsub();
    window.clearInterval(app.usageTimer);
    app.mode.destroy();
    app.terminals.destroy();
    app.admin.stop();
    document.removeEventListener('visibilitychange', app.onVisible);
    document.removeEventListener('keydown', app.onKey);
    app = null;
  }
  store.clear();
}

function showLogin(notice: string | null): void {
  const path = currentPath();
  teardown();
  if (path !== '/login' && path !== '/') afterLogin = path;
  history.replaceState(null, '', '/login');
  document.title = 'Sign in · hostgate';
  loginView(root, notice, () => void boot());
}

async function logOut(): Promise<void> {
  // This tab's own session_ended event is no news.
  stopEvents();
  try {
    await post('/api/logout');
  } catch {
    /* the session may be gone already */
  }
  setCsrfToken(null);
  forgetTerminals();
  forgetFiles();
  showLogin(null);
}

// Read the status; show the app, the login page, or why neither works.
async function boot(): Promise<void> {
  let s: Status;
  try {
    s = await get<Status>('/api/status');
  } catch (e) {
    if (e instanceof ApiError && e.status === 401) {
      showLogin(null);
      return;
    }
    const msg = e instanceof ApiError ? e.describe() : String(e);
    root.replaceChildren(
      h(
        'main',
        { class: 'login-page' },
        h(
          'div',
          { class: 'login-card', role: 'alert' },
          h('h1', { class: 'login-title' }, icon('alert'), ' hostgate is not answering'),
          h('p', { class: 'login-sub', text: msg }),
          h('button', { class: 'btn btn-primary', type: 'button', text: 'Try again', on: { click: () => void boot() } }),
        ),
      ),
    );
    return;
  }
  teardown();
  store.setStatus(s);
  startApp();
}

startRouter(route);
if (currentPath() !== '/login') afterLogin = currentPath();
void boot();
