// The session's state as the server last told it: who we are, the execution
// mode and the permission profile. Views subscribe; the countdown ticks from
// the server's remaining_seconds against this tab's monotonic clock, so a
// wrong wall clock on the client does not shift it.

import { get, type ExecutionMode, type Permission, type Status } from './api';

type Listener = () => void;

class Store {
  status: Status | null = null;
  // performance.now() at which direct mode ends, or null.
  private deadline: number | null = null;
  private listeners = new Set<Listener>();
  private tickers = new Set<Listener>();
  private timer: number | null = null;
  private recheck: number | null = null;
  // Whether the live event stream is connected.
  live = false;
  // performance.now() of this tab's last mode change request: the events
  // it causes are no news here.
  ownChangeAt = -Infinity;

  ownChangeRecent(): boolean {
    return performance.now() - this.ownChangeAt < 5000;
  }

  subscribe(fn: Listener): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  // Called every quarter second while a countdown runs.
  onTick(fn: Listener): () => void {
    this.tickers.add(fn);
    return () => this.tickers.delete(fn);
  }

  get mode(): ExecutionMode | null {
    return this.status?.execution_mode ?? null;
  }

  get isAdmin(): boolean {
    return this.status?.role === 'admin';
  }

  setStatus(s: Status): void {
    this.status = s;
    this.applyMode(s.execution_mode);
    this.emit();
  }

  setMode(m: ExecutionMode): void {
    if (!this.status) return;
    this.status = { ...this.status, execution_mode: m };
    this.applyMode(m);
    this.emit();
  }

  // A mode_expiring event: the grant's end, re-synchronised.
  setRemaining(seconds: number, expiresAt: string | null): void {
    const m = this.mode;
    if (!m || m.mode !== 'direct') return;
    this.setMode({ ...m, remaining_seconds: seconds, expires_at: expiresAt ?? m.expires_at });
  }

  setPermission(p: Permission): void {
    if (!this.status || this.status.permission === p) return;
    this.status = { ...this.status, permission: p };
    this.emit();
  }

  setLive(live: boolean): void {
    if (this.live === live) return;
    this.live = live;
    this.emit();
  }

  // Seconds left in direct mode (0 when it should have ended), or null.
  remaining(): number | null {
    if (this.deadline === null) return null;
    return Math.max(0, (this.deadline - performance.now()) / 1000);
  }

  // The wall-clock end of direct mode, for "until 14:32".
  endsAt(): Date | null {
    const r = this.remaining();
    return r === null ? null : new Date(Date.now() + r * 1000);
  }

  clear(): void {
    this.status = null;
    this.deadline = null;
    this.live = false;
    this.stopTimer();
    this.emit();
  }

  // Read /api/status again.
  async refresh(): Promise<void> {
    this.setStatus(await get<Status>('/api/status'));
  }

  private applyMode(m: ExecutionMode): void {
    if (m.mode === 'direct') {
      let secs = m.remaining_seconds;
      if (secs === null && m.expires_at) secs = (Date.parse(m.expires_at) - Date.now()) / 1000;
      this.deadline = secs === null || Number.isNaN(secs) ? null : performance.now() + secs * 1000;
      this.startTimer();
    } else {
      this.deadline = null;
      this.stopTimer();
    }
  }

  private startTimer(): void {
    if (this.timer !== null) return;
    this.timer = window.setInterval(() => this.tick(), 250);
  }

  private stopTimer(): void {
    if (this.timer !== null) window.clearInterval(this.timer);
    this.timer = null;
    if (this.recheck !== null) window.clearTimeout(this.recheck);
    this.recheck = null;
  }

  private tick(): void {
    for (const fn of this.tickers) fn();
    // The grant should be over: the server's mode_reverted event normally
    // says so at once; if it does not come, ask.
    if (this.remaining() === 0 && this.recheck === null) {
      this.recheck = window.setTimeout(() => {
        this.recheck = null;
        if (this.mode?.mode === 'direct' && this.remaining() === 0) {
          this.refresh().catch(() => undefined);
        }
      }, 600);
    }
  }

  private emit(): void {
    for (const fn of this.listeners) fn();
  }
}

export const store = new Store();
