// A shell's end: every line it printed before exiting is on the screen,
// then its exit status. The panel once closed the WebSocket when the event
// stream said the shell exited, before the last output was drawn (8 tries
// of 9 lost it), so the same is done ten times, each in a new terminal.

import { check, login, terminalText, waitFor, waitTerminal } from './lib.mjs';

const TRIES = 10;

// Type a line into the active terminal.
async function type(page, line) {
  await page.locator('.term-host:not([hidden]) .xterm').click();
  await page.keyboard.type(line);
  await page.keyboard.press('Enter');
}

export default async function ({ main, users, newPage, shot }) {
  const page = await newPage();
  // Count the panel's own closes of terminal WebSockets: frontd ends them.
  await page.addInitScript(() => {
    window.__termCloses = 0;
    const close = WebSocket.prototype.close;
    WebSocket.prototype.close = function (...args) {
      if (this.url.includes('/api/terminals/')) window.__termCloses++;
      return close.apply(this, args);
    };
  });
  // The frames of each terminal's WebSocket, as the browser received them.
  const frames = new Map();
  page.on('websocket', (ws) => {
    const m = ws.url().match(/\/api\/terminals\/([^/]+)\/ws$/);
    if (!m) return;
    const list = [];
    frames.set(decodeURIComponent(m[1]), list);
    ws.on('framereceived', (f) => list.push(f.payload));
  });
  await login(page, main.url, 'bob', users.bob.password);
  await page.locator('.term-host:not([hidden]) .xterm').waitFor();
  let id = await page.locator('.term-item.active').getAttribute('data-id');
  for (let i = 1; i <= TRIES; i++) {
    if (i > 1) {
      await page.click('#new-terminal');
      const old = id;
      id = await waitFor(async () => {
        const now = await page.locator('.term-item.active').getAttribute('data-id');
        return now && now !== old ? now : null;
      }, `terminal ${i} active`);
    }
    // The shell is there once it answers.
    await type(page, `echo ready-$((${i}*7))`);
    await waitTerminal(page, new RegExp(`ready-${i * 7}`));
    await type(page, 'seq 1 5; exit 3');
    await waitTerminal(page, /\[exited with status 3\]/);
    const lines = (await terminalText(page)).split('\n').map((l) => l.trimEnd());
    const end = lines.findIndex((l) => l.includes('[exited with status 3]'));
    const nums = lines.slice(0, end).filter((l) => /^\d+$/.test(l));
    check(nums.join(' ') === '1 2 3 4 5', `try ${i}: the numbers before the status: ${nums.join(' ')}`);
    check(
      !lines.some((l) => l.includes('[the shell has exited]')),
      `try ${i}: the status replaces the bare end`,
    );
    const banner = await page.locator('.term-banner').textContent();
    check(/exited with status 3/.test(banner), `try ${i}: the banner says the status: ${banner}`);
    const state = await page.locator(`.term-item[data-id="${id}"] .term-state`).textContent();
    check(state === 'exited', `try ${i}: listed as ${state}`);
    // The capture: the exit message is the last frame, after the output.
    const got = frames.get(id) ?? [];
    const last = got.length ? got[got.length - 1] : '';
    check(
      typeof last === 'string' && JSON.parse(last).message === 'exited with status 3',
      `try ${i}: the last frame is the exit message: ${String(last).slice(0, 200)}`,
    );
  }
  const closes = await page.evaluate(() => window.__termCloses);
  check(closes === 0, `the panel closed ${closes} terminal WebSockets itself`);
  await shot(page, 'terminal-exit');
}
