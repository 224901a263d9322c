// Terminals: a list of the user's terminals and an xterm.js view filling the
// rest, connected to /api/terminals/{id}/ws (binary frames are pty bytes
// both ways, text frames JSON control). The tab remembers its terminals in
// sessionStorage and attaches to them again after a reload while their
// shells live. One viewer per terminal: a tab that attaches takes the
// terminal over, and tabs of this browser tell each other so, so that the
// one that lost it does not take it back.
//
// When a shell ends, frontd sends its last output, then a text frame
// {"type":"exit",...} and closes the WebSocket with the same words as the
// reason; the panel shows them. It never closes an open WebSocket because
// the event stream said the shell exited: that event can come before the
// last output has arrived.

import { Terminal } from '@xterm/xterm';
import { FitAddon } from '@xterm/addon-fit';
import '@xterm/xterm/css/xterm.css';

import { ApiError, del, get, post, type TerminalInfo } from './api';
import { h, icon, replace } from './dom';
import { FilesPane } from './files';
import { errorToast } from './popover';
import { store } from './state';
import { toast } from './toast';

const STORE_KEY = 'hostgate.terminals';
const TAB_ID = Math.random().toString(36).slice(2);

type Conn = 'connecting' | 'open' | 'lost' | 'elsewhere' | 'exited' | 'failed';

// The exit message frontd sends after a terminal's last output.
interface ExitMessage {
  type: 'exit';
  reason: string | null;
  exit_code: number | null;
  signal: number | null;
  signal_name: string | null;
  message: string;
}

interface Saved {
  ids: string[];
  active: string | null;
}

function loadSaved(): Saved {
  try {
    const v = JSON.parse(sessionStorage.getItem(STORE_KEY) ?? 'null') as Saved | null;
    if (v && Array.isArray(v.ids)) return v;
  } catch {
    /* nothing saved */
  }
  return { ids: [], active: null };
}

const darkQuery = window.matchMedia('(prefers-color-scheme: dark)');

function theme(): Record<string, string> {
  return darkQuery.matches
    ? {
        background: '#0d1117',
        foreground: '#e6edf3',
        cursor: '#e6edf3',
        cursorAccent: '#0d1117',
        selectionBackground: '#264f78',
      }
    : {
        background: '#ffffff',
        foreground: '#1f2328',
        cursor: '#1f2328',
        cursorAccent: '#ffffff',
        selectionBackground: '#b6d3ff',
        black: '#24292f',
        red: '#cf222e',
        green: '#116329',
        yellow: '#8a5a00',
        blue: '#0550ae',
        magenta: '#8250df',
        cyan: '#1b7c83',
        white: '#6e7781',
        brightBlack: '#57606a',
        brightRed: '#a40e26',
        brightGreen: '#1a7f37',
        brightYellow: '#7d4e00',
        brightBlue: '#0969da',
        brightMagenta: '#6639ba',
        brightCyan: '#3192aa',
        brightWhite: '#8c959f',
      };
}

const encoder = new TextEncoder();

// One terminal of this tab: its xterm.js instance and its WebSocket.
class TermView {
  readonly id: string;
  info: TerminalInfo;
  readonly el: HTMLElement;
  readonly term: Terminal;
  readonly fit = new FitAddon();
  private ws: WebSocket | null = null;
  conn: Conn = 'connecting';
  private openedAt = 0;
  private retries = 0;
  private retryTimer: number | null = null;
  private opened = false;
  private oomShown = false;
  // How the shell ended, from frontd's exit message or close reason.
  endWords: string | null = null;
  private endKilled = false;
  // In a fleet: the host it ran on, when that host was lost with it.
  lostWith: string | null = null;
  // Whether this tab was attached to the terminal before (a reload counts).
  attachedBefore = false;
  onChange: () => void = () => undefined;

  constructor(info: TerminalInfo) {
    this.id = info.id;
    this.info = info;
    this.el = h('div', { class: 'term-host', attrs: { 'data-terminal': info.id } });
    this.term = new Terminal({
      fontFamily: '"DejaVu Sans Mono", "Liberation Mono", ui-monospace, Menlo, Consolas, monospace',
      fontSize: 14,
      lineHeight: 1.15,
      cursorBlink: true,
      scrollback: 5000,
      allowProposedApi: false,
      theme: theme(),
    });
    this.term.loadAddon(this.fit);
    // F6 belongs to the page: it moves the focus to the top bar.
    this.term.attachCustomKeyEventHandler((ev) => ev.key !== 'F6');
    this.term.onData((d) => this.send(encoder.encode(d)));
    this.term.onBinary((d) => this.send(Uint8Array.from(d, (c) => c.charCodeAt(0) & 0xff)));
    this.term.onResize(({ cols, rows }) => this.sendResize(cols, rows));
  }

  // Put xterm.js into the page (once its element is visible) and fit it.
  show(): void {
    if (!this.opened) {
      this.term.open(this.el);
      this.opened = true;
    }
    this.fitNow();
  }

  fitNow(): void {
    if (!this.opened || this.el.hidden || this.el.clientWidth === 0) return;
    try {
      this.fit.fit();
    } catch {
      /* not measurable yet */
    }
  }

  setTheme(): void {
    this.term.options.theme = theme();
  }

  private send(data: Uint8Array): void {
    if (this.ws && this.ws.readyState === WebSocket.OPEN) this.ws.send(data);
  }

  private sendResize(cols: number, rows: number): void {
    if (this.ws && this.ws.readyState === WebSocket.OPEN) {
      this.ws.send(JSON.stringify({ type: 'resize', cols, rows }));
    }
  }

  private setConn(c: Conn): void {
    this.conn = c;
    this.onChange();
  }

  connect(): void {
    if (this.retryTimer !== null) window.clearTimeout(this.retryTimer);
    this.retryTimer = null;
    this.ws?.close();
    const proto = location.protocol === 'https:' ? 'wss:' : 'ws:';
    const ws = new WebSocket(`${proto}//${location.host}/api/terminals/${encodeURIComponent(this.id)}/ws`);
    ws.binaryType = 'arraybuffer';
    this.ws = ws;
    this.setConn('connecting');
    ws.onopen = () => {
      if (this.ws !== ws) return;
      this.openedAt = performance.now();
      this.retries = 0;
      channel?.postMessage({ type: 'attached', id: this.id, tab: TAB_ID });
      const again = this.attachedBefore;
      this.attachedBefore = true;
      this.setConn('open');
      const { cols, rows } = this.term;
      if (again && rows > 2) {
        // Reattached: nothing replays what the screen showed, so nudge the
        // size; the shell (or a full-screen program) redraws on SIGWINCH.
        this.sendResize(cols, rows - 1);
        window.setTimeout(() => this.sendResize(this.term.cols, this.term.rows), 60);
      } else {
        this.sendResize(cols, rows);
      }
    };
    ws.onmessage = (ev: MessageEvent<ArrayBuffer | string>) => {
      if (typeof ev.data === 'string') {
        this.control(ev.data);
        return;
      }
      this.term.write(new Uint8Array(ev.data));
    };
    ws.onclose = (ev) => {
      if (this.ws !== ws) return;
      this.ws = null;
      void this.closed(ev);
    };
  }

  // A control message from frontd: the exit message, for now.
  private control(text: string): void {
    let msg: Partial<ExitMessage>;
    try {
      msg = JSON.parse(text) as Partial<ExitMessage>;
    } catch {
      return;
    }
    if (msg.type !== 'exit' || typeof msg.message !== 'string') return;
    this.endWords = msg.message;
    this.endKilled = msg.reason !== 'exit' || msg.signal != null;
  }

  // The connection ended: the shell exited, another viewer took it, or
  // the network dropped.
  private async closed(ev: CloseEvent): Promise<void> {
    if (this.conn === 'elsewhere' || this.conn === 'exited') return;
    if (ev.code === 1000 || this.endWords !== null) {
      // Written after the output: the close comes after its last frame.
      this.markExited(undefined, this.endWords ?? (ev.reason || null));
      return;
    }
    if (ev.code === 4001 || /elsewhere/i.test(ev.reason)) {
      this.setConn('elsewhere');
      return;
    }
    const lived = this.openedAt ? performance.now() - this.openedAt : 0;
    this.openedAt = 0;
    let list: TerminalInfo[];
    try {
      list = (await get<{ terminals: TerminalInfo[] }>('/api/terminals')).terminals;
    } catch (e) {
      if (e instanceof ApiError && e.status === 401) return;
      this.retryLater();
      return;
    }
    const t = list.find((x) => x.id === this.id);
    if (!t || !t.running) {
      // Its host gone (the balancer sent us to another): lost with it.
      const host = this.id.includes('.') ? this.id.slice(0, this.id.indexOf('.')) : null;
      if (host && (t ? t.state === 'lost' : host !== store.status?.host?.id)) this.lostWith = host;
      this.markExited();
      return;
    }
    // The server is there and the shell lives: most likely another viewer
    // took the terminal over. Take it back once if ours had lived a while
    // (a proxy dropping an idle connection); never bounce it back and forth.
    if (lived > 10000 && this.retries === 0) this.retryLater();
    else this.setConn(this.retries > 0 ? 'failed' : 'lost');
  }

  private retryLater(): void {
    this.setConn('lost');
    const delay = Math.min(1000 * 2 ** this.retries, 15000);
    this.retries++;
    this.retryTimer = window.setTimeout(() => this.connect(), delay);
  }

  // Another tab of this browser attached to this terminal.
  takenElsewhere(): void {
    if (this.conn === 'exited') return;
    this.setConn('elsewhere');
    const ws = this.ws;
    this.ws = null;
    ws?.close();
  }

  // The server says the shell is gone (event stream, terminal list). An
  // open WebSocket is left to frontd, which closes it after the last
  // output with the exit status; else the shell's end is shown now.
  endedElsewhere(reason?: string): void {
    if (this.ws && (this.conn === 'open' || this.conn === 'connecting')) return;
    this.markExited(reason);
  }

  // The shell is gone. words: how, as frontd said it ("exited with status
  // 3", "killed: memory limit"); else reason (from the terminal_exited
  // event) says why when it was not its own doing, e.g. "oom".
  markExited(reason?: string, words?: string | null): void {
    if (this.conn === 'exited') return;
    if (!words && reason === 'oom' && !this.oomShown) {
      this.oomShown = true;
      words = 'killed: memory limit';
      this.endKilled = true;
    }
    if (words) this.endWords = words;
    if (this.retryTimer !== null) window.clearTimeout(this.retryTimer);
    this.retryTimer = null;
    const ws = this.ws;
    this.ws = null;
    ws?.close();
    this.info = { ...this.info, running: false };
    const text = this.lostWith
      ? `lost with its host ${this.lostWith}`
      : this.endWords && this.endWords !== 'terminal exited'
        ? this.endWords
        : 'the shell has exited';
    // Red for an end the shell did not choose; dim for its own exit.
    const red = this.lostWith !== null || this.endKilled;
    this.term.write(`\r\n\x1b[${red ? '31' : '2'}m[${text}]\x1b[0m\r\n`);
    this.setConn('exited');
  }

  focus(): void {
    this.term.focus();
  }

  dispose(): void {
    if (this.retryTimer !== null) window.clearTimeout(this.retryTimer);
    const ws = this.ws;
    this.ws = null;
    ws?.close();
    this.term.dispose();
    this.el.remove();
  }
}

let channel: BroadcastChannel | null = null;

// The terminals page: list on the side, the active terminal in the middle.
export class TerminalsView {
  readonly el: HTMLElement;
  private listEl: HTMLElement;
  private stage: HTMLElement;
  private banner: HTMLElement;
  private empty: HTMLElement;
  private views = new Map<string, TermView>();
  private known: TerminalInfo[] = [];
  private active: string | null = null;
  private started = false;
  private creating = false;
  private justCreated = new Set<string>();
  private resizeObs: ResizeObserver;
  private pendingFit = 0;
  readonly files: FilesPane;
  private filesBtn: HTMLButtonElement;

  constructor() {
    this.listEl = h('ul', { class: 'term-list', id: 'terminal-list', attrs: { 'aria-label': 'Terminals' } });
    const newBtn = h(
      'button',
      {
        class: 'btn btn-small',
        type: 'button',
        id: 'new-terminal',
        on: { click: () => void this.create() },
      },
      icon('plus'),
      h('span', { text: 'New' }),
    );
    this.files = new FilesPane();
    this.filesBtn = h(
      'button',
      {
        class: 'btn btn-small files-toggle',
        type: 'button',
        id: 'files-toggle',
        title: 'Files of your workspace',
        attrs: { 'aria-controls': 'files-pane', 'aria-expanded': String(this.files.isOpen) },
        on: { click: () => this.files.setOpen(!this.files.isOpen, true) },
      },
      icon('files'),
      h('span', { text: 'Files' }),
    );
    this.banner = h('div', { class: 'term-banner', role: 'status', hidden: true });
    this.empty = h('div', { class: 'term-empty', hidden: true });
    this.stage = h('div', { class: 'term-stage' });
    this.el = h(
      'div',
      { class: 'view view-terminals' },
      h(
        'aside',
        { class: 'term-side', attrs: { 'aria-label': 'Your terminals' } },
        h('div', { class: 'term-side-head' }, h('h2', { class: 'side-title', text: 'Terminals' }), newBtn),
        this.listEl,
        h('div', { class: 'term-side-foot' }, this.filesBtn),
      ),
      h(
        'section',
        { class: 'term-main', attrs: { 'aria-label': 'Terminal' } },
        this.banner,
        this.stage,
        this.empty,
      ),
      this.files.el,
    );
    this.el.classList.toggle('files-open', this.files.isOpen);
    this.files.onToggle = (open, hadFocus) => {
      this.el.classList.toggle('files-open', open);
      this.filesBtn.setAttribute('aria-expanded', String(open));
      if (!open && hadFocus) this.filesBtn.focus();
    };
    this.resizeObs = new ResizeObserver(() => {
      cancelAnimationFrame(this.pendingFit);
      this.pendingFit = requestAnimationFrame(() => this.current()?.fitNow());
    });
    this.resizeObs.observe(this.stage);
    darkQuery.addEventListener('change', () => {
      for (const v of this.views.values()) v.setTheme();
    });
    if ('BroadcastChannel' in window) {
      channel = new BroadcastChannel('hostgate-terminals');
      channel.onmessage = (ev: MessageEvent<{ type: string; id: string; tab: string }>) => {
        if (ev.data?.type === 'attached' && ev.data.tab !== TAB_ID) {
          this.views.get(ev.data.id)?.takenElsewhere();
        }
      };
    }
  }

  private current(): TermView | null {
    return this.active ? (this.views.get(this.active) ?? null) : null;
  }

  private save(): void {
    const saved: Saved = { ids: [...this.views.keys()], active: this.active };
    try {
      sessionStorage.setItem(STORE_KEY, JSON.stringify(saved));
    } catch {
      /* not kept across reloads */
    }
  }

  // First visit: attach to the terminals this tab had, else open one.
  async start(): Promise<void> {
    if (this.started) {
      this.current()?.fitNow();
      this.current()?.focus();
      return;
    }
    this.started = true;
    this.files.start();
    const saved = loadSaved();
    try {
      await this.refreshList();
    } catch (e) {
      this.showEmpty('The terminals cannot be listed.', e);
      return;
    }
    for (const id of saved.ids) {
      const t = this.known.find((x) => x.id === id && x.running);
      if (t) this.attach(t, false, true);
    }
    const active = saved.active && this.views.has(saved.active) ? saved.active : [...this.views.keys()][0];
    if (active) this.activate(active, this.focusFree());
    else await this.create();
  }

  async refreshList(): Promise<void> {
    const r = await get<{ terminals: TerminalInfo[] }>('/api/terminals');
    this.known = r.terminals ?? [];
    for (const t of this.known) {
      const v = this.views.get(t.id);
      if (v) v.info = t;
      if (v && !t.running) v.endedElsewhere();
    }
    this.renderList();
  }

  // Whether the keyboard may be given to a terminal that came late: not
  // when the user has moved the focus elsewhere (the top bar, a dialog)
  // while the terminal was being listed or opened.
  private focusFree(): boolean {
    const a = document.activeElement;
    if (document.querySelector('[aria-modal="true"]')) return false;
    return !a || a === document.body || a.id === 'main' || this.el.contains(a);
  }

  private attach(info: TerminalInfo, activate = true, reattach = false, focus = true): TermView {
    let v = this.views.get(info.id);
    if (!v) {
      v = new TermView(info);
      // A terminal this tab did not create has printed before.
      v.attachedBefore = reattach || this.known.some((t) => t.id === info.id && !this.justCreated.has(t.id));
      v.onChange = () => {
        this.renderList();
        this.renderBanner();
      };
      this.views.set(info.id, v);
      this.stage.appendChild(v.el);
      v.el.hidden = true;
      v.show();
      v.connect();
    } else if (v.conn !== 'open' && v.conn !== 'connecting' && v.conn !== 'exited') {
      v.connect();
    }
    if (activate) this.activate(info.id, focus);
    this.save();
    return v;
  }

  private activate(id: string, focus = true): void {
    this.active = id;
    for (const [k, v] of this.views) v.el.hidden = k !== id;
    this.empty.hidden = true;
    const v = this.views.get(id);
    if (v) {
      v.show();
      if (focus) v.focus();
    }
    this.save();
    this.renderList();
    this.renderBanner();
  }

  // Open a new terminal of the size the stage has room for.
  async create(): Promise<void> {
    if (this.creating) return;
    this.creating = true;
    try {
      const { cols, rows } = this.proposedSize();
      const r = await post<{ id: string; mode: 'sandbox' | 'direct'; backend: string }>('/api/terminals', {
        cols,
        rows,
      });
      const info: TerminalInfo = {
        id: r.id,
        user: store.status?.user ?? '',
        created: new Date().toISOString(),
        mode: r.mode,
        backend: r.backend,
        running: true,
      };
      this.known = [...this.known.filter((t) => t.id !== r.id), info];
      this.justCreated.add(r.id);
      this.attach(info, true, false, this.focusFree());
      if (r.mode === 'direct') {
        toast('warning', 'Direct terminal', 'This terminal runs on the host, outside the sandbox.', 'term-direct');
      }
    } catch (e) {
      errorToast('No new terminal', e);
      if (this.views.size === 0) this.showEmpty('No terminal is open.', e);
    } finally {
      this.creating = false;
    }
  }

  private proposedSize(): { cols: number; rows: number } {
    // Measure with a terminal that exists, else estimate from the stage.
    const dims = this.current()?.fit.proposeDimensions();
    if (dims && dims.cols > 1 && dims.rows > 1) return { cols: dims.cols, rows: dims.rows };
    const w = this.stage.clientWidth || 800;
    const hgt = this.stage.clientHeight || 480;
    const clamp = (n: number): number => Math.max(2, Math.min(1000, Math.floor(n)));
    return { cols: clamp((w - 16) / 8.43), rows: clamp((hgt - 8) / 16.1) };
  }

  async close(id: string): Promise<void> {
    const v = this.views.get(id);
    try {
      await del(`/api/terminals/${encodeURIComponent(id)}`);
    } catch (e) {
      if (!(e instanceof ApiError && e.status === 404)) {
        errorToast('Terminal not closed', e);
        return;
      }
    }
    v?.dispose();
    this.views.delete(id);
    this.known = this.known.filter((t) => t.id !== id);
    if (this.active === id) {
      const next = [...this.views.keys()][0];
      this.active = null;
      if (next) this.activate(next);
      else this.showEmpty('No terminal is open.');
    }
    this.save();
    this.renderList();
    this.renderBanner();
  }

  // The server said a shell exited (event stream).
  terminalExited(id: string, reason?: string): void {
    this.views.get(id)?.endedElsewhere(reason);
    if (reason === 'oom') {
      toast('error', 'Terminal killed', 'It ran out of memory: your memory limit was reached.', `oom-${id}`);
    }
    this.known = this.known.map((t) => (t.id === id ? { ...t, running: false } : t));
    this.renderList();
  }

  private showEmpty(text: string, e?: unknown): void {
    const msg = e instanceof ApiError ? e.describe() : '';
    replace(
      this.empty,
      icon('terminal', 'icon empty-icon'),
      h('p', { class: 'empty-title', text }),
      msg ? h('p', { class: 'empty-detail', text: msg }) : null,
      h(
        'button',
        { class: 'btn btn-primary', type: 'button', on: { click: () => void this.create() } },
        icon('plus'),
        h('span', { text: 'New terminal' }),
      ),
    );
    this.empty.hidden = false;
    this.renderBanner();
  }

  // The state of the active terminal's connection, above it.
  private renderBanner(): void {
    const v = this.current();
    const b = this.banner;
    if (!v || v.conn === 'open' || v.conn === 'connecting') {
      b.hidden = true;
      replace(b);
      return;
    }
    const actions: HTMLElement[] = [];
    let text = '';
    let kind = 'info';
    switch (v.conn) {
      case 'lost':
        text = 'Connection lost. Reconnecting…';
        kind = 'warning';
        actions.push(this.bannerButton('Reconnect now', () => v.connect()));
        break;
      case 'failed':
        text = 'The connection to this terminal was lost.';
        kind = 'warning';
        actions.push(this.bannerButton('Reconnect', () => v.connect()));
        break;
      case 'elsewhere':
        text = 'This terminal is open in another tab or window.';
        actions.push(this.bannerButton('Show it here', () => v.connect()));
        break;
      case 'exited':
        text = v.lostWith
          ? `This terminal was lost with its host ${v.lostWith}.`
          : v.endWords && v.endWords !== 'terminal exited'
            ? `The shell has ended: ${v.endWords}.`
            : 'The shell has exited.';
        actions.push(this.bannerButton('Close', () => void this.close(v.id)));
        actions.push(this.bannerButton('New terminal', () => void this.create(), true));
        break;
    }
    replace(
      b,
      h('span', { class: `term-banner-text text-${kind}`, text }),
      h('span', { class: 'term-banner-actions' }, ...actions),
    );
    b.hidden = false;
  }

  private bannerButton(text: string, fn: () => void, primary = false): HTMLButtonElement {
    return h('button', {
      class: primary ? 'btn btn-small btn-primary' : 'btn btn-small',
      type: 'button',
      text,
      on: { click: fn },
    });
  }

  // The side list: this tab's terminals first, then the user's others.
  private renderList(): void {
    const rows: HTMLElement[] = [];
    const ids = [...this.views.keys()];
    for (const t of this.known) if (!ids.includes(t.id) && t.running) ids.push(t.id);
    // Stable names: by the order the server lists them (creation order).
    const order = [...this.known.map((t) => t.id), ...ids.filter((id) => !this.known.some((t) => t.id === id))];
    ids.sort((a, b) => order.indexOf(a) - order.indexOf(b));
    for (const id of ids) {
      const n = order.indexOf(id) + 1;
      const v = this.views.get(id);
      const info = v?.info ?? this.known.find((t) => t.id === id);
      if (!info) continue;
      const running = v ? v.conn !== 'exited' : info.running;
      const state = !running
        ? 'exited'
        : !v
          ? 'detached'
          : v.conn === 'open'
            ? 'running'
            : v.conn === 'elsewhere'
              ? 'in another tab'
              : v.conn === 'connecting'
                ? 'connecting'
                : 'disconnected';
      const name = `Terminal ${n}`;
      const isActive = id === this.active;
      const pick = h(
        'button',
        {
          class: 'term-pick',
          type: 'button',
          attrs: {
            'aria-current': isActive ? 'true' : 'false',
            'data-id': id,
            'aria-label': `${name}, ${info.mode === 'direct' ? 'direct' : 'sandboxed'}, ${state}`,
          },
          on: {
            click: () => {
              if (v) {
                this.activate(id);
                if (v.conn === 'failed' || v.conn === 'lost') v.connect();
              } else this.attach(info);
            },
          },
        },
        icon('terminal', 'icon term-icon'),
        h(
          'span',
          { class: 'term-pick-text' },
          h('span', { class: 'term-name', text: name }),
          h(
            'span',
            { class: 'term-meta' },
            h('span', {
              class: info.mode === 'direct' ? 'term-mode text-warning' : 'term-mode',
              text: info.mode === 'direct' ? 'direct' : info.backend === 'docker' ? 'container' : 'sandboxed',
            }),
            ' · ',
            h('span', { class: running ? 'term-state' : 'term-state text-muted', text: state }),
          ),
        ),
      );
      const closeBtn = h(
        'button',
        {
          class: 'icon-button term-close',
          type: 'button',
          title: `Close ${name}`,
          attrs: { 'aria-label': `Close ${name}` },
          on: { click: () => void this.close(id) },
        },
        icon('close'),
      );
      rows.push(
        h('li', { class: isActive ? 'term-item active' : 'term-item', attrs: { 'data-id': id } }, pick, closeBtn),
      );
    }
    if (rows.length === 0) rows.push(h('li', { class: 'term-none', text: 'No terminals' }));
    replace(this.listEl, ...rows);
  }

  // Give the keyboard to the active terminal; false when there is none.
  focusActive(): boolean {
    const v = this.current();
    if (!v) return false;
    v.focus();
    return true;
  }

  // Whether the file pane is open; focus it.
  focusFiles(): boolean {
    if (!this.files.isOpen) return false;
    this.files.focus();
    return true;
  }

  // Logout: drop every connection.
  destroy(): void {
    this.files.destroy();
    for (const v of this.views.values()) v.dispose();
    this.views.clear();
    this.resizeObs.disconnect();
    channel?.close();
    channel = null;
    this.el.remove();
  }
}

// Forget the tab's terminals (logout).
export function forgetTerminals(): void {
  try {
    sessionStorage.removeItem(STORE_KEY);
  } catch {
    /* nothing kept */
  }
}
