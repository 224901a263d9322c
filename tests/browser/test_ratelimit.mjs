// A refusal with 429: past HOSTGATE_MODE_RATE_PER_MINUTE (2 on the short
// hostgate), switching to direct shows a toast with the server's message
// and the time to wait (Retry-After), and the state stays true.

import { check, login, modeLabel, waitFor, waitToast } from './lib.mjs';

async function chooseDirect(page) {
  await page.click('#mode-popover [data-value="direct"]');
  const dialog = page.locator('[role=alertdialog]');
  await dialog.waitFor();
  await dialog.locator('[data-action=confirm]').click();
  await waitFor(async () => !(await dialog.count()), 'dialog closed');
}

export default async function ({ short, users, newPage, shot }) {
  const page = await newPage();
  await login(page, short.url, 'dave', users.dave.password);
  await page.click('#mode-button');
  await page.locator('#mode-popover').waitFor();

  await chooseDirect(page); // change 1
  await waitFor(async () => /^Direct/.test(await modeLabel(page)), 'direct');
  await page.click('#mode-popover [data-value="sandbox"]'); // change 2
  await waitFor(async () => /^Sandboxed/.test(await modeLabel(page)), 'sandboxed again');
  await waitToast(page, /Back to sandboxed/);

  await chooseDirect(page); // change 3: refused
  const t = await waitToast(page, /Direct mode not turned on/);
  check(/too many execution-mode changes/i.test(t), `the server's message: ${t}`);
  check(/wait \d+ s/.test(t), `the retry time: ${t}`);
  check(
    (await page.locator('.toast[data-kind=error]').getAttribute('role')) === 'alert',
    'the refusal is announced',
  );
  check(/^Sandboxed/.test(await modeLabel(page)), 'still sandboxed');
  await page.keyboard.press('Escape');
  await shot(page, 'ratelimit');
}
