// Display texts: labels of the permission profiles, durations, clock times.

import type { Limits, Permission, Usage } from './api';

export const PERMISSIONS: { value: Permission; label: string; help: string }[] = [
  {
    value: 'read-only',
    label: 'Read-only',
    help: 'Commands can read your workspace but change nothing.',
  },
  {
    value: 'workspace-write',
    label: 'Workspace write',
    help: 'Commands can change files in your workspace, and only there.',
  },
  {
    value: 'workspace-write+network',
    label: 'Workspace write + network',
    help: 'Workspace write, plus outbound network access.',
  },
  {
    value: 'workspace-write+allowlist',
    label: 'Workspace write + allowlist',
    help: 'Workspace write; the network only through a proxy, to the allowed domains.',
  },
  {
    value: 'read-only+allowlist',
    label: 'Read-only + allowlist',
    help: 'Read-only; the network only through a proxy, to the allowed domains.',
  },
];

// Whether a profile leaves the workspace read-only.
export function isReadOnly(p: string | undefined): boolean {
  return p === 'read-only' || p === 'read-only+allowlist';
}

// Whether a profile reaches the network through the egress proxy.
export function isAllowlist(p: string | undefined): boolean {
  return p !== undefined && p.endsWith('+allowlist');
}

export function permissionLabel(p: string): string {
  return PERMISSIONS.find((x) => x.value === p)?.label ?? p;
}

const pad = (n: number): string => String(n).padStart(2, '0');

// A countdown: "09:41", or "1:05:00" from an hour up.
export function countdown(seconds: number): string {
  const s = Math.max(0, Math.ceil(seconds));
  const hh = Math.floor(s / 3600);
  const mm = Math.floor((s % 3600) / 60);
  const ss = s % 60;
  return hh > 0 ? `${hh}:${pad(mm)}:${pad(ss)}` : `${pad(mm)}:${pad(ss)}`;
}

// A duration in words: "10 minutes", "1 minute 30 seconds", "1 hour".
export function duration(seconds: number): string {
  const s = Math.max(0, Math.round(seconds));
  const parts: string[] = [];
  const hh = Math.floor(s / 3600);
  const mm = Math.floor((s % 3600) / 60);
  const ss = s % 60;
  const unit = (n: number, w: string): string => `${n} ${w}${n === 1 ? '' : 's'}`;
  if (hh) parts.push(unit(hh, 'hour'));
  if (mm) parts.push(unit(mm, 'minute'));
  if (ss || parts.length === 0) parts.push(unit(ss, 'second'));
  return parts.join(' ');
}

// The local clock time of a moment: "14:32", with seconds when near.
export function clock(at: Date, withSeconds = false): string {
  const t = `${pad(at.getHours())}:${pad(at.getMinutes())}`;
  return withSeconds ? `${t}:${pad(at.getSeconds())}` : t;
}

// A date and time for tables: "2025-11-29 14:32:05".
export function dateTime(v: unknown): string {
  if (v === null || v === undefined || v === '') return '—';
  let d: Date;
  if (typeof v === 'number') d = new Date(v < 1e12 ? v * 1000 : v);
  else d = new Date(String(v));
  if (Number.isNaN(d.getTime())) return String(v);
  return (
    `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ` +
    `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`
  );
}

// An uptime: "3 d 4 h", "2 h 5 min", "42 s".
export function uptime(seconds: number): string {
  const s = Math.floor(seconds);
  const d = Math.floor(s / 86400);
  const hh = Math.floor((s % 86400) / 3600);
  const mm = Math.floor((s % 3600) / 60);
  if (d) return `${d} d ${hh} h`;
  if (hh) return `${hh} h ${mm} min`;
  if (mm) return `${mm} min ${s % 60} s`;
  return `${s} s`;
}

// "used / limit" of one resource; the limit alone when usage is unknown.
function gauge(used: number | null, max: number | null, fmt: (n: number) => string): string {
  const limit = max === null ? 'no limit' : fmt(max);
  return used === null ? limit : `${fmt(used)} / ${limit}`;
}

// Memory, processes and disk against their limits, one short line:
// "mem 12 M / 4.0 G · pids 3 / 1024 · disk 1.2 G / 10 G". A limit that
// sandboxd says it cannot enforce here (containment) reads "not enforced",
// never as a limit; with no usage known, "limits: mem 4.0 G · ...".
export function usageLine(u: Usage | null, lim: Limits, c?: Record<string, unknown> | null): string {
  const count = (n: number): string => String(n);
  const known = !!c && 'uid' in c;
  const off = (key: string): boolean => known && c![key] !== undefined && typeof c![key] !== 'string';
  const parts = [
    off('memory')
      ? 'mem not enforced'
      : `mem ${gauge(u?.memory.current ?? null, u?.memory.max ?? lim.memory_max, bytes)}`,
    off('pids')
      ? 'pids not enforced'
      : `pids ${gauge(u?.pids.current ?? null, u?.pids.max ?? lim.pids_max, count)}`,
  ];
  if (known && c!.disk_quota === false) {
    if (lim.disk_max !== null) parts.push('disk not enforced');
  } else if (u?.disk) parts.push(`disk ${gauge(u.disk.used, u.disk.max ?? lim.disk_max, bytes)}`);
  else if (lim.disk_max !== null) parts.push(`disk ${gauge(null, lim.disk_max, bytes)}`);
  return (u ? '' : 'limits: ') + parts.join(' · ');
}

// A size in bytes, short: "512 B", "12 M", "4.0 G".
export function bytes(n: number): string {
  const units = ['B', 'K', 'M', 'G', 'T'];
  let v = n;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  const text = i === 0 || v >= 10 ? String(Math.round(v)) : v.toFixed(1);
  return `${text} ${units[i]}`;
}
