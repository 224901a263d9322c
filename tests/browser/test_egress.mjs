// Egress by allowlist in the panel: the popover offers the two allowlist
// profiles; under one it lists the allowed domains (HOSTGATE_EGRESS_ALLOW,
// marked "everyone") and, with no egress proxy running here, warns that
// spawns would fail. An admin adds a domain for their own session and one
// for their account in the sessions view (by keyboard), sees a refused
// pattern as a toast with the server's message, and finds both domains in
// the popover, each marked where it comes from.

import { check, login, modeLabel, waitFor, waitText, waitToast } from './lib.mjs';

const GLOBAL = ['pypi.org', '*.pythonhosted.org'];

// The popover's allowed domains: [[domain, source, label]...].
async function listed(page) {
  return page
    .locator('#mode-popover .egress-item')
    .evaluateAll((els) =>
      els.map((e) => [e.dataset.domain, e.dataset.source, e.querySelector('.egress-source').textContent]),
    );
}

export default async function ({ hostgate, users, newPage, shot }) {
  const hg = await hostgate('egress', { HOSTGATE_EGRESS_ALLOW: GLOBAL.join(',') });
  const page = await newPage();
  await login(page, hg.url, 'alice', users.alice.password);

  // The popover: both profiles, each with its explanation.
  await page.click('#mode-button');
  await page.locator('#mode-popover').waitFor();
  for (const v of ['workspace-write+allowlist', 'read-only+allowlist']) {
    const help = await page.locator(`#mode-popover [data-value="${v}"] .option-help`).textContent();
    check(/proxy/.test(help) && /allowed domains/.test(help), `${v} explained: ${help}`);
  }
  check(await page.locator('#mode-popover [data-egress]').isHidden(), 'no domain list under workspace-write');

  // Choose workspace write + allowlist: the global domains, the proxy warning.
  await page.click('#mode-popover [data-value="workspace-write+allowlist"]');
  await waitFor(
    async () => (await modeLabel(page)) === 'Sandboxed · Workspace write + allowlist',
    'label Workspace write + allowlist',
  );
  await waitToast(page, /Permission: Workspace write \+ allowlist/);
  await page.locator('#mode-popover [data-egress]').waitFor();
  let items = [];
  await waitFor(async () => {
    items = await listed(page);
    return JSON.stringify(items) === JSON.stringify(GLOBAL.map((d) => [d, 'allow', 'everyone']));
  }, `the global domains (${JSON.stringify(items)})`);
  await waitText(
    page.locator('#mode-popover [data-proxy="down"]'),
    /egress proxy.*not running: commands under this profile fail until it is back\./,
  );
  await waitText(page.locator('#mode-popover [data-egress]'), /Ports 443, 80/);
  await shot(page, 'egress-popover');
  await page.keyboard.press('Escape');
  await waitFor(async () => !(await page.locator('#mode-popover').count()), 'popover closed');

  // The admin view: alice's session row, its allowed domains.
  await page.click('.mainnav a[href="/admin"]');
  const row = page.locator('.table-sessions tbody tr', { hasText: 'alice' });
  await row.locator('[data-egress-edit]').focus();
  await page.keyboard.press('Enter');
  const dialog = page.locator('#egress-dialog');
  await dialog.waitFor();
  await waitText(dialog.locator('[data-egress-global]'), /pypi\.org, \*\.pythonhosted\.org/);
  const sessionInput = dialog.locator('[data-egress-input="session"]');
  await waitFor(() => sessionInput.isEnabled(), 'the session list read');

  // A pattern brokerd refuses: a toast with its message; nothing added.
  await sessionInput.fill('not a domain');
  await sessionInput.press('Enter');
  await waitToast(page, /Allowed domains not changed/);
  const detail = await page.locator('.toast-error .toast-detail').last().textContent();
  check(detail.length > 5 && !/^\d{3} /.test(detail), `the server's message: ${detail}`);
  check((await dialog.locator('[data-scope="session"] .egress-edit-row').count()) === 0, 'nothing added');

  // A session domain and an account domain, by keyboard.
  await sessionInput.fill('docs.example.com');
  await sessionInput.press('Enter');
  await dialog.locator('[data-scope="session"] [data-domain="docs.example.com"]').waitFor();
  const userInput = dialog.locator('[data-egress-input="user"]');
  await userInput.fill('API.Example.org');
  await userInput.press('Enter');
  await dialog.locator('[data-scope="user"] [data-domain="api.example.org"]').waitFor();
  await waitToast(page, /Allowed domains saved/);
  await shot(page, 'egress-admin');
  await page.keyboard.press('Escape');
  await waitFor(async () => !(await dialog.count()), 'dialog closed');

  // The popover lists them, each marked where it comes from.
  await page.click('#mode-button');
  await page.locator('#mode-popover [data-egress]').waitFor();
  const want = [
    ...GLOBAL.map((d) => [d, 'allow', 'everyone']),
    ['api.example.org', 'user', 'your account'],
    ['docs.example.com', 'session', 'this session'],
  ];
  await waitFor(async () => {
    items = await listed(page);
    return JSON.stringify(items) === JSON.stringify(want);
  }, `the domains with their sources (${JSON.stringify(items)})`);
  await shot(page, 'egress-popover-added');

  // Removing one takes it out of the popover too.
  await page.keyboard.press('Escape');
  await row.locator('[data-egress-edit]').click();
  await dialog.waitFor();
  const remove = dialog.locator('[data-egress-remove="docs.example.com"]');
  await remove.waitFor();
  await remove.click();
  await waitFor(async () => !(await dialog.locator('[data-domain="docs.example.com"]').count()), 'removed');
  await page.keyboard.press('Escape');
  await page.click('#mode-button');
  await waitFor(async () => !(await listed(page)).some(([d]) => d === 'docs.example.com'), 'gone from the popover');
}
