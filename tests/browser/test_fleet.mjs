// A fleet behind HAProxy (issue 24): the panel loaded through the
// balancer, whose address is the page's origin, opens a terminal on a
// host that is not the first one; typed input comes back; a reload
// attaches to the same shell again. The fleet is the system tests'
// (tests/browser/fleet.py drives tests/system/fleetlib.py: PostgreSQL, two
// hostgates in the mode test_fleet.py runs, HAProxy), every host's
// HOSTGATE_PUBLIC_URL set to HAProxy's URL. Without it every host answers
// the WebSocket 403 and the panel shows "Reconnecting..." for ever.

import { spawn } from 'node:child_process';
import path from 'node:path';
import readline from 'node:readline';

import { Failure, REPO, check, login, terminalText, waitFor, waitTerminal } from './lib.mjs';

// Start the fleet; resolves to { url, hosts, stop(failed) }.
async function startFleet() {
  const p = spawn('/usr/bin/python3', [path.join(REPO, 'tests', 'browser', 'fleet.py'), '2'], {
    cwd: REPO,
    env: { ...process.env, PYTHONDONTWRITEBYTECODE: '1' },
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const exited = new Promise((resolve) => p.on('exit', (code, sig) => resolve({ code, sig })));
  const lines = readline.createInterface({ input: p.stdout });
  const first = await new Promise((resolve) => {
    lines.once('line', resolve);
    exited.then(() => resolve(null));
  });
  lines.close();
  const doc = first ? JSON.parse(first) : { error: `fleet.py exited: ${JSON.stringify(await exited)}` };
  const stop = async (failed) => {
    if (failed) p.stdin.write('failed\n');
    p.stdin.end();
    const { code } = await exited;
    if (code !== 0 && !failed) throw new Failure(`fleet.py exited ${code} on the way out`);
  };
  if (doc.error) {
    await stop(true).catch(() => undefined);
    throw new Failure(doc.error);
  }
  return { ...doc, stop };
}

// Type a line into the active terminal.
async function type(page, line) {
  await page.locator('.term-host:not([hidden]) .xterm').click();
  await page.keyboard.type(line);
  await page.keyboard.press('Enter');
}

export default async function ({ users, newContext, shot }) {
  const fleet = await startFleet();
  let failed = true;
  try {
    check(fleet.hosts.length >= 2, `hosts: ${fleet.hosts}`);
    const host = fleet.hosts[1];
    const ctx = await newContext();
    // HAProxy's stickiness cookie: the session (and so its terminals) on
    // the second host.
    await ctx.addCookies([{ name: 'HGHOST', value: host, url: fleet.url }]);
    const page = await ctx.newPage();
    await login(page, fleet.url, 'bob', users.bob.password);
    await waitFor(async () => (await page.locator('#serving-host').textContent()) === `on ${host}`, `served by ${host}`);

    // A terminal opens by itself, on that host; the shell answers.
    await page.locator('.term-host:not([hidden]) .xterm').waitFor();
    const id = await waitFor(() => page.locator('.term-item.active').getAttribute('data-id'), 'the active terminal');
    check(id.startsWith(`${host}.`), `the terminal ${id} is not on ${host}`);
    const tag = Math.random().toString(36).slice(2, 10);
    await type(page, `echo hello-${tag}-$((6*7))`);
    await waitTerminal(page, new RegExp(`hello-${tag}-42`));
    check(!/Reconnecting/.test(await terminalText(page)), 'the terminal says it reconnects');

    // A reload attaches to the same shell again, through the balancer.
    await type(page, `export HG_MARK=kept-${tag}`);
    await page.reload();
    await page.locator('.term-host:not([hidden]) .xterm').waitFor();
    await waitFor(
      async () => (await page.locator('.term-item.active').getAttribute('data-id')) === id,
      'the same terminal after the reload',
    );
    await type(page, 'echo mark=$HG_MARK');
    await waitTerminal(page, new RegExp(`mark=kept-${tag}`));
    await shot(page, 'fleet');
    // Closed before the fleet stops, so that no request of the page fails.
    await ctx.close();
    failed = false;
  } finally {
    await fleet.stop(failed);
  }
}
