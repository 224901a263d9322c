// The live event stream (GET /api/events, server-sent events). Every tab
// follows it, so that all tabs of a session show the true mode: the browser
// reconnects by itself after a network drop (resuming with Last-Event-ID);
// when the server refuses the stream, this module retries with a backoff,
// and after every (re)connection the status is read again, since events may
// have been missed in between.

import type { ExecutionMode, Permission } from './api';
import { store } from './state';
import { toast } from './toast';
import { clock, duration } from './format';

export interface EventHandlers {
  terminalExited(id: string, reason?: string): void;
  // The session ended (a logout in another tab).
  sessionEnded(): void;
  // Events were missed: read the state afresh.
  resync(): void;
  // An agent token of this session was revoked (here or elsewhere).
  tokenRevoked(id: string): void;
}

let source: EventSource | null = null;
let retryTimer: number | null = null;
let retryDelay = 1000;
let handlers: EventHandlers | null = null;
let pollTimer: number | null = null;
let running = false;

function parse<T>(ev: Event): T | null {
  try {
    return JSON.parse((ev as MessageEvent<string>).data) as T;
  } catch {
    return null;
  }
}

// The toast for the end of direct mode, by its reason.
export function revertToast(reason: string, elsewhere = false): void {
  const texts: Record<string, [string, string]> = {
    expired: ['Direct mode ended', 'Its time ran out. This session is sandboxed again.'],
    manual: [
      'Back to sandboxed',
      elsewhere
        ? 'Turned off from another tab or window.'
        : 'Commands and new terminals run in the sandbox.',
    ],
    admin: ['Direct mode ended by an admin', 'This session is sandboxed again.'],
    restart: ['Direct mode ended', 'hostgate restarted. This session is sandboxed again.'],
  };
  const [title, detail] = texts[reason] ?? [
    'Direct mode ended',
    'This session is sandboxed again.',
  ];
  toast(reason === 'manual' ? 'success' : 'warning', title, detail, 'mode');
}

// Open the stream (again).
function connect(): void {
  if (!running) return;
  if (source) source.close();
  const es = new EventSource('/api/events');
  source = es;

  es.addEventListener('open', () => {
    retryDelay = 1000;
    store.setLive(true);
    stopPolling();
    store.refresh().catch(() => undefined);
  });
  es.addEventListener('error', () => {
    if (source !== es) return;
    if (es.readyState === EventSource.CLOSED) {
      // Refused (an HTTP error, or not an event stream): retry ourselves.
      store.setLive(false);
      source = null;
      es.close();
      scheduleRetry();
    } else {
      // The browser reconnects by itself.
      store.setLive(false);
      startPolling();
    }
  });

  es.addEventListener('mode_changed', (ev) => {
    const m = parse<ExecutionMode>(ev);
    if (!m) return;
    store.setMode(m);
    if (m.mode === 'direct' && !store.ownChangeRecent()) {
      const end = store.endsAt();
      toast(
        'warning',
        end ? `Direct mode on until ${clock(end, m.ttl_seconds < 120)}` : 'Direct mode on',
        'Turned on for this session from another tab or window.',
        'mode',
      );
    }
  });
  es.addEventListener('mode_expiring', (ev) => {
    const d = parse<{ expires_at: string | null; remaining_seconds: number }>(ev);
    if (!d) return;
    store.setRemaining(d.remaining_seconds, d.expires_at);
    // A grant shorter than the notice gets it at once: the countdown on
    // the button says as much.
    const ttl = store.mode?.ttl_seconds ?? 0;
    if (d.remaining_seconds >= ttl - 2 && store.ownChangeRecent()) return;
    const end = store.endsAt();
    toast(
      'warning',
      `Direct mode ends in ${duration(d.remaining_seconds)}`,
      end ? `At ${clock(end, d.remaining_seconds < 120)} this session returns to sandboxed.` : undefined,
      'mode',
    );
  });
  es.addEventListener('mode_reverted', (ev) => {
    const d = parse<{ reason: string; execution_mode: ExecutionMode }>(ev);
    if (!d) return;
    if (d.execution_mode) store.setMode(d.execution_mode);
    else store.refresh().catch(() => undefined);
    if (d.reason !== 'manual' || !store.ownChangeRecent()) revertToast(d.reason, !store.ownChangeRecent());
  });
  es.addEventListener('permission_changed', (ev) => {
    const d = parse<{ permission: Permission }>(ev);
    if (d) store.setPermission(d.permission);
  });
  es.addEventListener('terminal_exited', (ev) => {
    const d = parse<{ id: string; reason?: string }>(ev);
    if (d) handlers?.terminalExited(d.id, d.reason);
  });
  es.addEventListener('token_revoked', (ev) => {
    const d = parse<{ id: string }>(ev);
    if (d) handlers?.tokenRevoked(d.id);
  });
  es.addEventListener('session_ended', () => {
    es.close();
    source = null;
    handlers?.sessionEnded();
  });
  es.addEventListener('resync', () => {
    store.refresh().catch(() => undefined);
    handlers?.resync();
  });
}

function scheduleRetry(): void {
  if (!running || retryTimer !== null) return;
  startPolling();
  retryTimer = window.setTimeout(() => {
    retryTimer = null;
    // A 401 here sends the tab to the login page (api.ts).
    store
      .refresh()
      .then(() => connect())
      .catch(() => scheduleRetry());
  }, retryDelay);
  retryDelay = Math.min(retryDelay * 2, 30000);
}

// While the stream is down, read the status every few seconds instead.
function startPolling(): void {
  if (!running || pollTimer !== null) return;
  pollTimer = window.setInterval(() => {
    store.refresh().catch(() => undefined);
  }, 5000);
}

function stopPolling(): void {
  if (pollTimer !== null) window.clearInterval(pollTimer);
  pollTimer = null;
}

export function startEvents(h: EventHandlers): void {
  handlers = h;
  running = true;
  retryDelay = 1000;
  connect();
}

export function stopEvents(): void {
  running = false;
  source?.close();
  source = null;
  if (retryTimer !== null) window.clearTimeout(retryTimer);
  retryTimer = null;
  stopPolling();
  store.setLive(false);
}
