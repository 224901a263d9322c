// The state button's popover: two columns (Permission | Execution
// Environment) for an admin's session, the Permission column alone for a
// user; choosing a permission changes the label.

import { check, login, modeLabel, waitFor, waitToast } from './lib.mjs';

async function openPopover(page) {
  await page.click('#mode-button');
  await page.locator('#mode-popover').waitFor();
}

export default async function ({ main, users, newPage, shot }) {
  // A user: one column, no execution environment, no admin link.
  const bobPage = await newPage();
  await login(bobPage, main.url, 'bob', users.bob.password);
  check(!(await bobPage.locator('.mainnav a[href="/admin"]').count()), 'no admin link for a user');
  await openPopover(bobPage);
  const bobCols = await bobPage.locator('#mode-popover [data-col]').evaluateAll((els) =>
    els.map((e) => e.dataset.col),
  );
  check(JSON.stringify(bobCols) === '["permission"]', `user's columns: ${bobCols}`);
  check(!(await bobPage.locator('#mode-popover [data-value="direct"]').count()), 'no direct choice for a user');
  const helps = await bobPage.locator('#mode-popover [data-col=permission] .option-help').allTextContents();
  check(helps.length === 5 && helps.every((t) => t.length > 10), `one-line explanations: ${helps}`);
  await shot(bobPage, 'popover-user');

  // An admin: two columns.
  const page = await newPage();
  await login(page, main.url, 'alice', users.alice.password);
  await openPopover(page);
  const cols = await page.locator('#mode-popover [data-col]').evaluateAll((els) => els.map((e) => e.dataset.col));
  check(JSON.stringify(cols) === '["permission","execution"]', `admin's columns: ${cols}`);
  const titles = await page.locator('#mode-popover .col-title').allTextContents();
  check(titles.join('|') === 'Permission|Execution Environment', `column titles: ${titles}`);
  const perms = await page.locator('#mode-popover [data-col=permission] .option-title').allTextContents();
  check(
    perms.join('|') ===
      'Read-only|Workspace write|Workspace write + network|Workspace write + allowlist|Read-only + allowlist',
    `permission choices: ${perms}`,
  );
  const envs = await page.locator('#mode-popover [data-col=execution] .option-title').allTextContents();
  check(envs.join('|') === 'Sandboxed|Direct', `environment choices: ${envs}`);
  check(
    (await page.locator('#mode-popover [data-value="sandbox"]').getAttribute('aria-checked')) === 'true',
    'sandboxed is checked',
  );
  check(
    /10 minutes/.test(await page.locator('#mode-popover [data-value="direct"] .option-help').textContent()),
    'direct names its TTL',
  );

  // Choose a permission: the label says it, in this tab and over the API.
  await page.click('#mode-popover [data-value="read-only"]');
  await waitFor(async () => (await modeLabel(page)) === 'Sandboxed · Read-only', 'label Read-only');
  await waitToast(page, /Permission: Read-only/);
  const p = await page.evaluate(async () => (await (await fetch('/api/permission')).json()).permission);
  check(p === 'read-only', `permission on the server: ${p}`);
  await page.click('#mode-popover [data-value="workspace-write"]');
  await waitFor(async () => (await modeLabel(page)) === 'Sandboxed · Workspace write', 'label Workspace write');

  // A click outside closes it.
  await page.mouse.click(1150, 400);
  await waitFor(async () => !(await page.locator('#mode-popover').count()), 'popover closed');
  await openPopover(page);
  await page.locator('#mode-popover [data-value="workspace-write"]').hover();
  await shot(page, 'popover-admin');
}
