// Direct mode from the popover: the confirmation names the TTL (and Cancel
// changes nothing), then a toast "Direct mode on until HH:MM", a countdown
// in the top bar, and a new terminal that runs unsandboxed.

import { check, login, modeLabel, terminalText, waitFor, waitTerminal,
        waitToast } from './lib.mjs';

export default async function ({ main, users, newPage, shot }) {
  const page = await newPage();
  await login(page, main.url, 'alice', users.alice.password);
  await page.click('#mode-button');
  await page.click('#mode-popover [data-value="direct"]');

  // The confirmation names the TTL and what it means; Cancel keeps sandboxed.
  const dialog = page.locator('[role=alertdialog]');
  await dialog.waitFor();
  const text = await dialog.textContent();
  check(/10 minutes/.test(text), `confirmation names the TTL: ${text}`);
  check(/outside the sandbox/.test(text), `confirmation says what it means: ${text}`);
  check(
    (await page.evaluate(() => document.activeElement?.dataset.action)) === 'cancel',
    'Cancel has the focus first',
  );
  await dialog.locator('[data-action=cancel]').click();
  await waitFor(async () => !(await dialog.count()), 'dialog closed');
  check((await modeLabel(page)).startsWith('Sandboxed'), 'still sandboxed after Cancel');

  await page.click('#mode-popover [data-value="direct"]');
  await dialog.locator('[data-action=confirm]').click();
  const toast = await waitToast(page, /Direct mode on until \d\d:\d\d/);

  // The toast's time is the server's deadline.
  const m = await page.evaluate(async () => (await fetch('/api/execution-mode')).json());
  check(m.mode === 'direct' && m.remaining_seconds > 590, `server: ${JSON.stringify(m)}`);
  const end = new Date(m.expires_at);
  const hhmm = `${String(end.getHours()).padStart(2, '0')}:${String(end.getMinutes()).padStart(2, '0')}`;
  const late = new Date(end.getTime() + 1000);
  const hhmm2 = `${String(late.getHours()).padStart(2, '0')}:${String(late.getMinutes()).padStart(2, '0')}`;
  check(toast.includes(hhmm) || toast.includes(hhmm2), `toast ${toast} vs deadline ${m.expires_at}`);

  // The countdown runs in the top bar.
  const l1 = await modeLabel(page);
  check(/^Direct · (09:5\d|10:00) left$/.test(l1), `label: ${l1}`);
  check(
    (await page.locator('#mode-button').getAttribute('data-mode')) === 'direct',
    'the button is in its direct look',
  );
  // The countdown moves on its own: wait for its label to change.
  const l2 = await waitFor(async () => {
    const l = await modeLabel(page);
    return l !== l1 ? l : null;
  }, `the countdown to move from ${l1}`);
  check(/^Direct · 09:5\d left$/.test(l2),
        `countdown moves: ${l1} then ${l2}`);
  check(
    (await page.locator('#mode-popover [data-value="direct"]').getAttribute('aria-checked')) === 'true',
    'direct is checked in the popover',
  );

  // A new terminal runs in direct mode.
  await page.keyboard.press('Escape');
  await page.click('#new-terminal');
  await waitFor(
    async () => /direct/.test((await page.locator('.term-item.active .term-mode').textContent()) ?? ''),
    'the new terminal listed as direct',
  );
  await page.locator('.term-host:not([hidden]) .xterm').click();
  await page.keyboard.type('echo mode=$HOSTGATE_MODE');
  await page.keyboard.press('Enter');
  await waitTerminal(page, /mode=direct/);
  check(!/mode=sandbox/.test(await terminalText(page)), 'not sandboxed');

  await page.click('#mode-button');
  await page.locator('#mode-popover').waitFor();
  await shot(page, 'direct');
}
