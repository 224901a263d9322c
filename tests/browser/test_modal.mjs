// The panel's dialogs share one modal() (dialog.ts), and behave alike:
// Connect an agent, the admin's Allowed domains and a confirmation open
// with the focus inside, Tab and Shift+Tab stay inside, Escape closes the
// topmost only, a press on the backdrop closes, and the focus goes back
// to the element that opened the dialog.

import { check, login, waitFor } from './lib.mjs';

const USER = 'hana';

// What has the focus: its id, data attributes, and which dialog holds it.
const active = (page) =>
  page.evaluate(() => {
    const a = document.activeElement;
    return {
      id: a?.id ?? '',
      focusKey: a?.dataset?.focusKey ?? '',
      revoke: a?.dataset?.revoke ?? '',
      dialog: a?.closest('.dialog')?.id || a?.closest('.dialog')?.getAttribute('role') || '',
    };
  });

// Tab and Shift+Tab, each more times than the dialog has stops: the focus
// never leaves the dialog.
async function tabStaysInside(page, dialog, what) {
  const stops = await page.locator(`${dialog} button:not([disabled]), ${dialog} input:not([disabled])`).count();
  for (const key of ['Tab', 'Shift+Tab']) {
    for (let i = 0; i <= stops; i++) {
      await page.keyboard.press(key);
      const a = await active(page);
      check(a.dialog !== '' && (await page.locator(`${dialog}`).evaluate((d) => d.contains(document.activeElement))),
            `${what}: ${key} ${i + 1} left the dialog: ${JSON.stringify(a)}`);
    }
  }
}

export default async function ({ main, users, newPage, shot }) {
  const page = await newPage();
  // The first terminal, opened by the panel after the login, is held back
  // until the focus has moved to the top bar: a terminal that comes late
  // does not take the keyboard from where the user has put it.
  let release;
  const held = new Promise((resolve) => (release = resolve));
  let opened = 0;
  await page.route('**/api/terminals', async (route) => {
    if (route.request().method() === 'POST') {
      await held;
      opened++;
    }
    await route.continue();
  });
  await login(page, main.url, USER, users[USER].password);
  await page.focus('#agents-button');
  release();
  await waitFor(async () => opened > 0 && (await page.locator('.xterm').count()) > 0, 'the first terminal');
  await waitFor(async () => (await page.locator('.term-item.active').count()) > 0, 'the first terminal active');
  check((await active(page)).id === 'agents-button', `a late terminal took the focus: ${JSON.stringify(await active(page))}`);
  await page.unroute('**/api/terminals');

  // Connect an agent: Escape closes it, and the focus is back on the button.
  await page.keyboard.press('Enter');
  const agents = page.locator('#agents-dialog');
  await agents.waitFor();
  check((await active(page)).id === 'agent-create', `agents: the focus on Create: ${JSON.stringify(await active(page))}`);
  await tabStaysInside(page, '#agents-dialog', 'agents');
  await page.keyboard.press('Escape');
  await waitFor(async () => !(await agents.count()), 'agents: Escape closed it');
  check((await active(page)).id === 'agents-button', `agents: focus back after Escape: ${JSON.stringify(await active(page))}`);

  // A press on the backdrop closes it too; so does Close.
  await page.click('#agents-button');
  await agents.waitFor();
  await page.mouse.click(5, 5);
  await waitFor(async () => !(await agents.count()), 'agents: the backdrop closed it');
  check((await active(page)).id === 'agents-button', `agents: focus back after the backdrop: ${JSON.stringify(await active(page))}`);
  await page.click('#agents-button');
  await agents.locator('[data-action=close]').click();
  await waitFor(async () => !(await agents.count()), 'agents: Close closed it');
  check((await active(page)).id === 'agents-button', `agents: focus back after Close: ${JSON.stringify(await active(page))}`);

  // A confirmation on top of it: Escape and the backdrop close the
  // confirmation alone, the focus back on Revoke; the token stays.
  await page.click('#agents-button');
  await page.click('#agent-create');
  const id = await waitFor(
    () => page.$$eval('#agent-tokens .agent-token-row', (rows) => rows.map((r) => r.dataset.id)[0]),
    'a token listed',
  );
  const confirm = page.locator('[role=alertdialog]');
  for (const how of ['Escape', 'backdrop']) {
    await page.focus(`[data-revoke="${id}"]`);
    await page.keyboard.press('Enter');
    await confirm.waitFor();
    check((await active(page)).dialog === 'alertdialog', `confirm: the focus inside: ${JSON.stringify(await active(page))}`);
    await tabStaysInside(page, '[role=alertdialog]', 'confirm');
    if (how === 'Escape') await page.keyboard.press('Escape');
    else await page.mouse.click(5, 5);
    await waitFor(async () => !(await confirm.count()), `confirm: ${how} closed it`);
    check(await agents.isVisible(), `confirm: ${how} left the agents dialog open`);
    check((await active(page)).revoke === id, `confirm: focus back on Revoke after ${how}: ${JSON.stringify(await active(page))}`);
    check(
      (await page.$$eval('#agent-tokens .agent-token-row', (rows) => rows.map((r) => r.dataset.id))).includes(id),
      `confirm: ${how} kept the token`,
    );
  }
  await page.keyboard.press('Escape');
  await waitFor(async () => !(await agents.count()), 'agents: closed');

  // The admin's Allowed domains: the same, back on its row's button.
  await page.click('.mainnav a[href="/admin"]');
  const edit = page.locator('.table-sessions tbody tr', { hasText: USER }).locator('[data-egress-edit]').first();
  const key = await edit.getAttribute('data-focus-key');
  await edit.focus();
  await page.keyboard.press('Enter');
  const egress = page.locator('#egress-dialog');
  await egress.waitFor();
  await waitFor(async () => (await active(page)).dialog === 'egress-dialog', 'egress: the focus inside');
  await tabStaysInside(page, '#egress-dialog', 'egress');
  await shot(page, 'modal-egress');
  await page.keyboard.press('Escape');
  await waitFor(async () => !(await egress.count()), 'egress: Escape closed it');
  check((await active(page)).focusKey === key, `egress: focus back on its button: ${JSON.stringify(await active(page))}`);
  await edit.click();
  await egress.waitFor();
  await page.mouse.click(5, 5);
  await waitFor(async () => !(await egress.count()), 'egress: the backdrop closed it');
  check((await active(page)).focusKey === key, `egress: focus back after the backdrop: ${JSON.stringify(await active(page))}`);
}
