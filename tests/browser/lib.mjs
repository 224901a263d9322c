// Helpers of hostgate's browser tests: start the real daemons in a private
// temporary directory (as tests/system/hglib.py does: as root, they run as
// the unprivileged user hostgate-test), drive Debian's Chromium with
// playwright-core, and a few waiting and checking helpers. Node's standard
// library and playwright-core only.

import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const HERE = path.dirname(fileURLToPath(import.meta.url));
export const REPO = path.resolve(HERE, '..', '..');
export const BUILD = path.join(REPO, process.env.HG_BUILD ?? 'build');
export const WEB_DIST = path.join(REPO, 'frontd', 'web', 'dist');
export const SHOTS = path.join(HERE, 'screenshots');
export const CHROMIUM = process.env.HG_CHROMIUM ?? '/usr/bin/chromium';

// playwright-core is a dependency of the panel's package (one lockfile).
const require = createRequire(path.join(REPO, 'frontd', 'web', 'package.json'));
export const { chromium } = require('playwright-core');

const IS_ROOT = process.getuid?.() === 0;
const TEST_USER = 'hostgate-test';
const DAEMONS = ['sandboxd', 'brokerd', 'frontd'];
const BINARIES = [...DAEMONS, 'hgctl'];

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// The one bound, in ms, on every wait for work the machine does (a daemon
// starting, a page loading, output arriving), as SLOW in
// tests/system/hglib.py: each wait ends as soon as its state is there, so
// the bound only says when a hang is called a failure, generously enough
// that a slow or loaded machine is never taken for a hung one.
// HG_SLOW_BOUND (seconds) overrides it.
export const SLOW = Number(process.env.HG_SLOW_BOUND || 120) * 1000;

// frontd's port from RUN_DIR/frontd.listen ("ADDR:PORT\n"), or null.
function readListen(runDir) {
  let text;
  try {
    text = fs.readFileSync(path.join(runDir, 'frontd.listen'), 'utf8');
  } catch (e) {
    if (e.code === 'ENOENT') return null;
    throw e;
  }
  const m = /^(.+):([0-9]+)\n$/.exec(text);
  if (!m) throw new Error(`frontd.listen: not ADDR:PORT: ${JSON.stringify(text)}`);
  return parseInt(m[2], 10);
}

function idOf(flag, user) {
  const r = spawnSync('id', [flag, user], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`no user ${user}: ${r.stderr}`);
  return parseInt(r.stdout, 10);
}

// Copy a directory tree, readable by everyone.
function copyTree(src, dst) {
  fs.cpSync(src, dst, { recursive: true });
  const walk = (d) => {
    fs.chmodSync(d, 0o755);
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) walk(p);
      else fs.chmodSync(p, 0o644);
    }
  };
  walk(dst);
}

// One hostgate: three daemons in a private directory; frontd listens on
// port 0 and this.port is the port it reports in RUN_DIR/frontd.listen.
export class Hostgate {
  // prepare(hg), when given, runs after the directory is set up and
  // before the daemons start (it may change hg.env).
  constructor(name, env = {}, prepare = null) {
    this.name = name;
    this.extraEnv = env;
    this.prepare = prepare;
    this.procs = new Map();
    this.failed = false;
  }

  async start() {
    this.port = null;
    this.dir = fs.mkdtempSync(path.join(os.tmpdir(), `hg-browser-${this.name}-`));
    fs.chmodSync(this.dir, 0o755);
    for (const d of ['bin', 'state', 'run', 'logs']) {
      fs.mkdirSync(path.join(this.dir, d), { mode: 0o755 });
      fs.chmodSync(path.join(this.dir, d), 0o755);
    }
    for (const b of BINARIES) {
      const dst = path.join(this.dir, 'bin', b);
      fs.copyFileSync(path.join(BUILD, b), dst);
      fs.chmodSync(dst, 0o755);
    }
    // Copies, so that the daemons' user need not reach the checkout.
    copyTree(path.join(REPO, 'profiles'), path.join(this.dir, 'profiles'));
    copyTree(WEB_DIST, path.join(this.dir, 'web'));
    this.envFile = path.join(this.dir, 'empty.env');
    fs.writeFileSync(this.envFile, '', { mode: 0o644 });

    this.runAs = null;
    if (IS_ROOT) {
      this.runAs = { uid: idOf('-u', TEST_USER), gid: idOf('-g', TEST_USER) };
      for (const d of ['state', 'run']) {
        fs.chownSync(path.join(this.dir, d), this.runAs.uid, this.runAs.gid);
      }
    }
    this.env = {
      PATH: '/usr/sbin:/usr/bin:/sbin:/bin',
      LANG: 'C.UTF-8',
      HOSTGATE_ENV_FILE: this.envFile,
      HOSTGATE_STATE_DIR: path.join(this.dir, 'state'),
      HOSTGATE_RUN_DIR: path.join(this.dir, 'run'),
      HOSTGATE_LISTEN: '127.0.0.1:0',
      HOSTGATE_PROFILES_DIR: path.join(this.dir, 'profiles'),
      HOSTGATE_WEB_DIR: path.join(this.dir, 'web'),
      HOSTGATE_LOG_LEVEL: 'debug',
      HOSTGATE_LOGIN_RATE_PER_MINUTE: '600',
      HOSTGATE_LOGIN_BURST: '100',
      ASAN_OPTIONS: 'detect_leaks=0',
      ...this.extraEnv,
    };
    if (this.prepare) this.prepare(this);
    for (const d of DAEMONS) this.startDaemon(d);
    await this.waitListen();
    await this.waitHealthy();
    return this;
  }

  get url() {
    return `http://127.0.0.1:${this.port}`;
  }

  // argv as the daemons' user.
  wrap(argv) {
    if (!this.runAs) return argv;
    return ['setpriv', `--reuid=${this.runAs.uid}`, `--regid=${this.runAs.gid}`, '--clear-groups', '--', ...argv];
  }

  logPath(name) {
    return path.join(this.dir, 'logs', `${name}.log`);
  }

  startDaemon(name) {
    const fd = fs.openSync(this.logPath(name), 'a');
    const argv = this.wrap([path.join(this.dir, 'bin', name), '-d']);
    const p = spawn(argv[0], argv.slice(1), {
      env: this.env,
      cwd: this.dir,
      stdio: ['ignore', fd, fd],
    });
    fs.closeSync(fd);
    p.exited = new Promise((resolve) => p.on('exit', (code, sig) => resolve({ code, sig })));
    p.done = false;
    p.exited.then(() => (p.done = true));
    this.procs.set(name, p);
  }

  // Until frontd has written frontd.listen (then this.port is set).
  async waitListen(timeout = SLOW) {
    const runDir = this.env.HOSTGATE_RUN_DIR;
    const deadline = Date.now() + timeout;
    while (Date.now() < deadline) {
      this.port = readListen(runDir);
      if (this.port !== null) return;
      if (this.procs.get('frontd').done) break;
      await sleep(50);
    }
    this.failed = true;
    throw new Error(`hostgate ${this.name}: frontd wrote no frontd.listen\n${this.logs()}`);
  }

  async waitHealthy(timeout = SLOW) {
    const deadline = Date.now() + timeout;
    let last = null;
    while (Date.now() < deadline) {
      try {
        const r = await fetch(`${this.url}/healthz`);
        if (r.status === 200) return;
        last = `${r.status} ${await r.text()}`;
      } catch (e) {
        last = String(e);
      }
      const dead = [...this.procs].filter(([, p]) => p.done).map(([n]) => n);
      if (dead.length) break;
      await sleep(100);
    }
    this.failed = true;
    throw new Error(`hostgate ${this.name} not healthy (last: ${last})\n${this.logs()}`);
  }

  hgctl(args, input) {
    const argv = this.wrap([path.join(this.dir, 'bin', 'hgctl'), ...args]);
    const r = spawnSync(argv[0], argv.slice(1), {
      input,
      encoding: 'utf8',
      cwd: this.dir,
      timeout: SLOW,
      env: {
        PATH: this.env.PATH,
        LANG: 'C.UTF-8',
        HOSTGATE_RUN_DIR: this.env.HOSTGATE_RUN_DIR,
        HOSTGATE_STATE_DIR: this.env.HOSTGATE_STATE_DIR,
        HOSTGATE_ENV_FILE: this.envFile,
      },
    });
    fs.appendFileSync(this.logPath('hgctl'), `$ hgctl ${args.join(' ')} -> ${r.status}\n${r.stdout}${r.stderr}`);
    if (r.status !== 0) throw new Error(`hgctl ${args.join(' ')}: exit ${r.status}: ${r.stderr}`);
    return r.stdout;
  }

  addUser(name, password, admin = false) {
    this.hgctl(['user', 'add', name, ...(admin ? ['--admin'] : []), '--password-stdin'], `${password}\n`);
  }

  logs(maxBytes = 6000) {
    const out = [];
    for (const b of BINARIES) {
      const p = this.logPath(b);
      if (!fs.existsSync(p)) continue;
      // Without the spawns' long command lines.
      let data = fs
        .readFileSync(p, 'utf8')
        .split('\n')
        .filter((l) => !/ DEBUG sandboxd: (\[[0-9a-f]+\] )?spawn [0-9a-f]+: /.test(l))
        .join('\n');
      if (data.length > maxBytes) data = `[...]\n${data.slice(-maxBytes)}`;
      out.push(`==== ${b} (${p})\n${data}`);
    }
    return out.join('\n');
  }

  // SIGTERM, then SIGKILL after SLOW; keep the directory when something failed.
  async stop() {
    if (!this.dir) return;
    const running = [...this.procs.values()].filter((p) => !p.done);
    for (const p of running) p.kill('SIGTERM');
    let timer;
    const timeout = new Promise((r) => (timer = setTimeout(() => r('timeout'),
                                                           SLOW)));
    for (const p of running) {
      if ((await Promise.race([p.exited, timeout])) === 'timeout') {
        p.kill('SIGKILL');
        await p.exited;
      }
    }
    clearTimeout(timer);
    if (this.failed || process.env.HG_KEEP) console.log(`  hostgate test dir kept: ${this.dir}`);
    if (!this.failed && !process.env.HG_KEEP) fs.rmSync(this.dir, { recursive: true, force: true });
  }
}

// Chromium, headless, with nothing that talks to the network by itself.
export function launchBrowser() {
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--no-first-run',
      '--disable-dev-shm-usage',
    ],
  });
}

// A thrown test failure.
export class Failure extends Error {}

export function check(cond, msg) {
  if (!cond) throw new Failure(msg);
}

// Poll fn() until it returns a true value; returns it.
export async function waitFor(fn, what, timeout = SLOW, interval = 100) {
  const deadline = Date.now() + timeout;
  let last;
  for (;;) {
    try {
      last = await fn();
      if (last) return last;
    } catch (e) {
      last = e;
    }
    if (Date.now() >= deadline) break;
    await sleep(interval);
  }
  throw new Failure(`timed out after ${timeout} ms waiting for ${what} (last: ${String(last)})`);
}

// Wait until a locator's text matches re; returns the text.
export async function waitText(locator, re, timeout = SLOW) {
  let last = null;
  return waitFor(
    async () => {
      last = await locator.first().textContent({ timeout: 500 }).catch(() => null);
      return last !== null && re.test(last) ? last : null;
    },
    `text ${re} (last: ${JSON.stringify(last)})`,
    timeout,
  );
}

// The state button's text, "Sandboxed · Workspace write" and so on.
export async function modeLabel(page) {
  return (await page.locator('#mode-button').textContent())?.replace(/\s+/g, ' ').trim();
}

// Every toast's text now.
export async function toasts(page) {
  return page.locator('.toast').allTextContents();
}

export async function waitToast(page, re, timeout = SLOW) {
  return waitFor(
    async () => (await toasts(page)).find((t) => re.test(t)),
    `a toast matching ${re} (toasts: ${JSON.stringify(await toasts(page).catch(() => []))})`,
    timeout,
  );
}

// The visible text of the active terminal.
export async function terminalText(page) {
  return page.evaluate(() => {
    const host = [...document.querySelectorAll('.term-host')].find((e) => !e.hidden);
    const rows = host?.querySelector('.xterm-rows');
    return rows ? [...rows.children].map((r) => r.textContent).join('\n') : '';
  });
}

export async function waitTerminal(page, re, timeout = SLOW) {
  return waitFor(async () => re.test(await terminalText(page)), `terminal output ${re}`, timeout);
}

// Log in through the form.
export async function login(page, base, user, password) {
  await page.goto(`${base}/`);
  await page.locator('#login-user').waitFor();
  await page.fill('#login-user', user);
  await page.fill('#login-password', password);
  await page.click('#login-form button[type=submit]');
  await page.locator('#mode-button').waitFor();
  await waitFor(async () => !/Loading/.test(await modeLabel(page)), 'the state button');
}

export function screenshotPath(name) {
  fs.mkdirSync(SHOTS, { recursive: true });
  return path.join(SHOTS, `${name}.png`);
}

// A login session from Node (no browser): { get, post, del } with the
// cookie and the CSRF token.
export async function apiSession(base, user, password) {
  const r = await fetch(`${base}/api/login`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ username: user, password }),
  });
  if (r.status !== 200) throw new Failure(`login ${user}: ${r.status} ${await r.text()}`);
  const { csrf_token: csrf } = await r.json();
  // Headers.getSetCookie() is missing from Node 18's fetch; the value of
  // hg_session holds no ',' or ';', so it is found in the joined header.
  const cookie = (r.headers.get('set-cookie') ?? '').match(/(?:^|,\s*)(hg_session=[^;,]*)/)?.[1];
  if (!cookie) throw new Failure(`login ${user}: no hg_session cookie`);
  const call = async (method, path, body) => {
    const res = await fetch(`${base}${path}`, {
      method,
      headers: {
        Cookie: cookie,
        ...(method === 'GET' ? {} : { 'X-CSRF-Token': csrf }),
        ...(body === undefined ? {} : { 'Content-Type': 'application/json' }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    let json = null;
    try {
      json = JSON.parse(text);
    } catch {
      /* not JSON */
    }
    return { status: res.status, json, text };
  };
  // The answer itself (for bytes): body a Buffer or string, sent as is.
  const raw = (method, path, body, headers = {}) =>
    fetch(`${base}${path}`, {
      method,
      headers: { Cookie: cookie, ...(method === 'GET' ? {} : { 'X-CSRF-Token': csrf }), ...headers },
      body,
    });
  return {
    get: (p) => call('GET', p),
    post: (p, b = {}) => call('POST', p, b),
    del: (p) => call('DELETE', p),
    raw,
  };
}
