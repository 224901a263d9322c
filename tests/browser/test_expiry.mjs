// Expiry with a short TTL: two tabs of one session both count down, and
// within a second of the deadline both show Sandboxed again, each with the
// "Direct mode ended" toast, driven by the server's events.

import { check, login, modeLabel, waitFor, waitToast } from './lib.mjs';

// Record (in the page) when the button leaves direct mode.
async function watchRevert(page) {
  await page.evaluate(() => {
    window.__revertedAt = null;
    const b = document.getElementById('mode-button');
    new MutationObserver(() => {
      if (window.__revertedAt === null && b.dataset.mode === 'sandbox') window.__revertedAt = Date.now();
    }).observe(b, { attributes: true, attributeFilter: ['data-mode'] });
  });
}

export default async function ({ short, users, newContext, shot, shortTtl }) {
  const context = await newContext();
  const tab1 = await context.newPage();
  await login(tab1, short.url, 'carol', users.carol.password);
  // A second tab of the same session (cookie and CSRF token shared).
  const tab2 = await context.newPage();
  await tab2.goto(`${short.url}/`);
  await tab2.locator('#mode-button').waitFor();
  await waitFor(async () => /^Sandboxed/.test(await modeLabel(tab2)), 'tab 2 sandboxed');
  // Both tabs follow the event stream before the switch.
  for (const tab of [tab1, tab2]) {
    await waitFor(() => tab.locator('.live-state').isHidden(), 'live updates connected');
  }

  await tab1.click('#mode-button');
  await tab1.click('#mode-popover [data-value="direct"]');
  const dialog = tab1.locator('[role=alertdialog]');
  await dialog.waitFor();
  check(new RegExp(`${shortTtl} seconds`).test(await dialog.textContent()), 'the confirmation names the short TTL');
  await dialog.locator('[data-action=confirm]').click();
  await waitToast(tab1, /Direct mode on until \d\d:\d\d:\d\d/);
  await tab1.keyboard.press('Escape');

  // Tab 2 follows through mode_changed.
  await waitFor(async () => /^Direct · 00:0\d left$/.test(await modeLabel(tab2)), 'tab 2 direct with a countdown');
  const m = await tab1.evaluate(async () => (await fetch('/api/execution-mode')).json());
  check(m.mode === 'direct', `server: ${JSON.stringify(m)}`);
  const deadline = Date.parse(m.expires_at);
  await watchRevert(tab1);
  await watchRevert(tab2);

  const times = [];
  // Both tabs are sandboxed within a second of the deadline. (expires_at
  // has whole seconds: the deadline is within the second it names.)
  for (const [i, tab] of [tab1, tab2].entries()) {
    await waitFor(
      async () => (await modeLabel(tab)) === 'Sandboxed · Workspace write',
      `tab ${i + 1} back to Sandboxed`,
      (shortTtl + 5) * 1000,
      50,
    );
    await waitToast(tab, /Direct mode ended/);
    const at = await tab.evaluate(() => window.__revertedAt);
    check(at !== null, `tab ${i + 1} saw the revert`);
    check(at - deadline < 2000, `tab ${i + 1} reverted ${at - deadline} ms after expires_at`);
    times.push(at);
  }
  // expires_at has whole seconds; the two tabs agree within a second.
  check(Math.abs(times[0] - times[1]) < 1000, `the tabs reverted ${Math.abs(times[0] - times[1])} ms apart`);
  console.log(`     expiry: tabs sandboxed ${times[0] - deadline} and ${times[1] - deadline} ms after expires_at`);
  const after = await tab2.evaluate(async () => (await fetch('/api/execution-mode')).json());
  check(after.mode === 'sandbox', `server after expiry: ${JSON.stringify(after)}`);
  await shot(tab1, 'expiry-tab1');
  await shot(tab2, 'expiry-tab2');
}
