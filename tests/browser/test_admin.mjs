// Admin views: sessions with their mode and a live countdown, reverting
// another admin's direct session; terminals with their state, killing one;
// the audit log with a filter; the debug page.

import { apiSession, check, login, waitFor, waitText,
        waitToast } from './lib.mjs';

export default async function ({ main, users, newPage, shot }) {
  // carol, elsewhere: direct mode and a terminal.
  const carol = await apiSession(main.url, 'carol', users.carol.password);
  const granted = await carol.post('/api/execution-mode', { mode: 'direct' });
  check(granted.status === 200 && granted.json.mode === 'direct', `carol direct: ${granted.text}`);

  const page = await newPage();
  await login(page, main.url, 'alice', users.alice.password);
  await page.click('.mainnav a[href="/admin"]');
  await page.locator('.table-sessions').waitFor();
  check(new URL(page.url()).pathname === '/admin', `admin URL: ${page.url()}`);
  // The status area names the host that serves the panel; one host, no
  // Host column.
  const st = await carol.get('/api/status');
  const served = await page.locator('#serving-host').textContent();
  check(served === `on ${st.json.host.id}`, `serving host: ${served} (${st.text})`);
  const heads = await page.locator('.table-sessions thead th').allTextContents();
  check(!heads.includes('Host'), `no Host column with the embedded store: ${heads}`);

  // carol's direct session, counting down.
  const row = page.locator('.table-sessions tbody tr', { hasText: 'carol' }).filter({ hasText: 'Direct' });
  await row.waitFor();
  const c1 = await row.locator('.countdown').textContent();
  check(/^(09:5\d|10:00)$/.test(c1), `countdown: ${c1}`);
  // The countdown moves on its own: its next second, whenever it shows.
  const c2 = await waitFor(async () => {
    const t = await row.locator('.countdown').textContent();
    return t !== c1 ? t : null;
  }, `the countdown to move from ${c1}`);
  check(/^(09:5\d|10:00)$/.test(c2), `live countdown: ${c1} then ${c2}`);
  await shot(page, 'admin-sessions');

  // Revert it.
  await row.locator('button', { hasText: 'Revert to sandboxed' }).click();
  await waitToast(page, /carol's session is sandboxed again/);
  const after = await carol.get('/api/execution-mode');
  check(after.json.mode === 'sandbox', `carol after the revert: ${after.text}`);
  const term = await carol.post('/api/terminals', { cols: 80, rows: 24 });
  check(term.status === 201 && term.json.mode === 'sandbox', `carol's terminal: ${term.text}`);
  const termId = term.json.id;

  // Terminals: carol's is running; kill it (after a confirmation).
  await page.click('.subnav a[href="/admin/terminals"]');
  await page.locator('.table-terminals').waitFor();
  const trow = page.locator('.table-terminals tbody tr', { has: page.locator(`code[title="${termId}"]`) });
  await waitText(trow, /carol.*Running/);
  await trow.locator('button', { hasText: 'Kill' }).click();
  await page.locator('[role=alertdialog]').waitFor();
  await page.click('[role=alertdialog] [data-action=confirm]');
  await waitToast(page, /Terminal killed/);
  await waitFor(async () => {
    const list = (await carol.get('/api/terminals')).json.terminals;
    return !list.some((t) => t.id === termId && t.running);
  }, "carol's terminal gone");
  await shot(page, 'admin-terminals');

  // Audit: filtered by action.
  await page.click('.subnav a[href="/admin/audit"]');
  await page.locator('#audit-action').waitFor();
  await page.fill('#audit-action', 'admin_revert');
  await page.click('.filters button[type=submit]');
  let actions = [];
  await waitFor(async () => {
    actions = await page.locator('.table-audit tbody tr td:nth-child(3)').allTextContents();
    return actions.length > 0 && actions.every((a) => a === 'admin_revert');
  }, `only admin_revert records (${actions})`);
  await page.fill('#audit-action', '');
  await page.fill('#audit-user', 'carol');
  await page.click('.filters button[type=submit]');
  await waitFor(async () => {
    const who = await page.locator('.table-audit tbody tr td:nth-child(2)').allTextContents();
    return who.length > 0 && who.every((u) => u === 'carol');
  }, "only carol's records");
  await waitText(page.locator('.audit-results'), /mode_granted/);
  await shot(page, 'admin-audit');

  // Debug: the backend probe, versions, configuration.
  await page.click('.subnav a[href="/admin/debug"]');
  await page.locator('.debug').waitFor();
  await waitText(page.locator('.debug'), /bwrap: works/);
  await waitText(page.locator('.debug'), /Versions.*hostgate/s);
  await waitText(page.locator('.debug'), /Effective configuration/);
  await shot(page, 'admin-debug');
}
