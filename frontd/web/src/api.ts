// The HTTP API: JSON requests with the login session's cookie and, on every
// state change, its CSRF token. The token comes with the login answer only
// (the cookie is HttpOnly), so it is kept in localStorage, where every tab
// of the session finds it.

export type Mode = 'sandbox' | 'direct';
export type Permission =
  | 'read-only'
  | 'workspace-write'
  | 'workspace-write+network'
  | 'workspace-write+allowlist'
  | 'read-only+allowlist';

// The domains an allowlist profile may reach through the egress proxy: the
// configured ones (allow), an admin's additions for the user and for this
// session, the denylist that wins over them, the allowed ports, and whether
// the proxy (egressd) is up.
export interface Egress {
  allow: string[];
  user: string[];
  session: string[];
  deny: string[];
  ports: number[];
  proxy: { ok: boolean; reason: string | null };
}

// GET /api/admin/egress: the configuration and every admin addition.
export interface AdminEgress {
  allow: string[];
  deny: string[];
  ports: number[];
  users: Record<string, string[]>;
  sessions: Record<string, string[]>;
}

export interface ExecutionMode {
  mode: Mode;
  default: Mode;
  available: boolean;
  reason: string | null;
  expires_at: string | null;
  remaining_seconds: number | null;
  ttl_seconds: number;
}

export interface Backend {
  name: string;
  ok: boolean;
  reason: string | null;
}

// A resource's use against its limit (max null: no limit).
export interface Gauge {
  current: number;
  max: number | null;
}

// A user's usage as sandboxd measures it.
export interface Usage {
  memory: Gauge;
  pids: Gauge;
  disk: { used: number; max: number | null } | null;
  oom_kills: number;
}

// The configured limits of a user's spawns (null: none).
export interface Limits {
  memory_max: number | null;
  swap_max: number | null;
  pids_max: number | null;
  cpu_weight: number;
  cpu_max_percent: number | null;
  io_weight: number;
  disk_max: number | null;
  spawn_memory_max: number | null;
  spawn_pids_max: number | null;
}

export interface Status {
  user: string;
  role: 'admin' | 'user';
  auth: 'session' | 'token';
  runtime: 'host' | 'docker';
  backend: Backend;
  execution_mode: ExecutionMode;
  permission: Permission;
  limits?: Limits;
  usage?: Usage | null;
  usage_reason?: string | null;
  containment?: Record<string, unknown>;
  egress?: Egress;
  // The host that answered, and the fleet's hosts (admins, PostgreSQL store).
  host?: { id: string; store: 'embedded' | 'postgresql' };
  hosts?: HostInfo[];
}

export interface HostInfo {
  id: string;
  state: 'up' | 'stopped' | 'lost';
  seen: string;
  started: string;
  version: string;
  terminals: number;
  commands: number;
}

export interface LoginAnswer {
  user: string;
  role: 'admin' | 'user';
  csrf_token: string;
}

export interface TerminalInfo {
  id: string;
  user: string;
  created: string | number;
  mode: Mode;
  backend: string;
  running: boolean;
  host?: string;
  state?: 'up' | 'stopped' | 'lost';
}

export interface AdminSession {
  id: string;
  user: string;
  created: string | number | null;
  last_seen: string | number | null;
  mode: Mode;
  expires_at: string | null;
  remaining_seconds: number | null;
  permission?: Permission;
  host?: string | null;
  // In a fleet: the user's home host, which holds their workspace.
  home?: string | null;
  terminals: { id: string; running: boolean; mode: Mode; host?: string; state?: string }[];
  container?: string | null;
  usage?: Usage | null;
  usage_reason?: string | null;
}

export type AuditRecord = Record<string, unknown>;

export interface DebugInfo {
  versions?: Record<string, unknown>;
  uptime_seconds?: number;
  backend?: Backend & Record<string, unknown>;
  config?: Record<string, unknown>;
  counters?: Record<string, unknown>;
  [key: string]: unknown;
}

const CSRF_KEY = 'hostgate.csrf';

export function csrfToken(): string | null {
  try {
    return localStorage.getItem(CSRF_KEY);
  } catch {
    return null;
  }
}

export function setCsrfToken(token: string | null): void {
  try {
    if (token) localStorage.setItem(CSRF_KEY, token);
    else localStorage.removeItem(CSRF_KEY);
  } catch {
    /* storage refused (private mode): this tab works until reload */
  }
}

// An error answer of the API: status, code and the server's message.
export class ApiError extends Error {
  readonly status: number;
  readonly code: string;
  // Seconds from Retry-After (429), or null.
  readonly retryAfter: number | null;

  constructor(status: number, code: string, message: string, retryAfter: number | null) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.code = code;
    this.retryAfter = retryAfter;
  }

  // The message with the retry time, as a toast shows it.
  describe(): string {
    const m = this.message.charAt(0).toUpperCase() + this.message.slice(1);
    if (this.retryAfter !== null && this.retryAfter > 0) {
      return `${m} (wait ${formatWait(this.retryAfter)})`;
    }
    return m;
  }
}

// "42 s", "2 min", "2 min 5 s".
export function formatWait(seconds: number): string {
  const s = Math.ceil(seconds);
  if (s < 60) return `${s} s`;
  const m = Math.floor(s / 60);
  const r = s % 60;
  return r ? `${m} min ${r} s` : `${m} min`;
}

// Seconds of a Retry-After header (delta-seconds or an HTTP date).
function retryAfter(h: string | null): number | null {
  if (!h) return null;
  if (/^\d+$/.test(h.trim())) return parseInt(h, 10);
  const t = Date.parse(h);
  return Number.isNaN(t) ? null : Math.max(0, Math.ceil((t - Date.now()) / 1000));
}

// Called when the session is gone (401) or its CSRF token is not valid.
let onSessionLost: ((why: string) => void) | null = null;

export function setSessionLostHandler(fn: (why: string) => void): void {
  onSessionLost = fn;
}

// One request; resolves to the JSON answer, rejects with ApiError.
export async function api<T>(method: string, path: string, body?: unknown): Promise<T> {
  const headers: Record<string, string> = { Accept: 'application/json' };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  if (method !== 'GET' && method !== 'HEAD') {
    const token = csrfToken();
    if (token) headers['X-CSRF-Token'] = token;
  }
  let res: Response;
  try {
    res = await fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      credentials: 'same-origin',
      cache: 'no-store',
    });
  } catch {
    throw new ApiError(0, 'network', 'hostgate cannot be reached', null);
  }
  let doc: unknown = null;
  const text = await res.text();
  if (text) {
    try {
      doc = JSON.parse(text);
    } catch {
      doc = null;
    }
  }
  if (res.ok) return doc as T;

  const e = errorOf(res.status, res.statusText, doc, res.headers.get('Retry-After'));
  if (path !== '/api/login') noteRefusal(e);
  throw e;
}

// The ApiError of an error answer: its JSON body's code and message, else
// the status line.
export function errorOf(status: number, statusText: string, doc: unknown, retry: string | null): ApiError {
  const err = (doc as { error?: { code?: string; message?: string } } | null)?.error;
  return new ApiError(
    status,
    err?.code ?? 'http_' + status,
    err?.message ?? `${status} ${statusText || 'error'}`,
    retryAfter(retry),
  );
}

// A refusal that means the session is gone (401) or this tab's CSRF token
// is not valid: back to the login page.
export function noteRefusal(e: ApiError): void {
  if (e.status === 401) onSessionLost?.('Your session has ended. Please sign in again.');
  else if (e.status === 403 && /csrf/i.test(e.message)) {
    onSessionLost?.('This tab lost its session key. Please sign in again.');
  }
}

export const get = <T>(path: string): Promise<T> => api<T>('GET', path);
export const post = <T>(path: string, body?: unknown): Promise<T> =>
  api<T>('POST', path, body ?? {});
export const del = <T>(path: string): Promise<T> => api<T>('DELETE', path);
export const put = <T>(path: string, body: unknown): Promise<T> => api<T>('PUT', path, body);
