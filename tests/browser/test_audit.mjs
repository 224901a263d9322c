// The admin audit view's filters: from the sessions view, a session's
// "Audit records" link shows that session's records only (and the address
// says so); the request-id filter finds the record of one refused request
// (a forged cookie), and the decision filter keeps refusals.

import { apiSession, check, login, waitFor } from './lib.mjs';

export default async function ({ main, users, newPage, shot }) {
  // carol does something that is recorded under her session.
  const carol = await apiSession(main.url, 'carol', users.carol.password);
  const perm = await carol.post('/api/permission', { permission: 'read-only' });
  check(perm.status === 200, `carol's permission: ${perm.text}`);
  // A forged cookie: refused, recorded with its request id.
  const forged = await fetch(`${main.url}/api/execution-mode`, { headers: { Cookie: 'hg_session=forged-in-the-browser-test' } });
  check(forged.status === 401, `forged cookie: ${forged.status}`);
  const rid = forged.headers.get('x-request-id');
  check(/^[0-9a-f]{16}$/.test(rid ?? ''), `request id: ${rid}`);

  const page = await newPage();
  await login(page, main.url, 'alice', users.alice.password);
  await page.click('.mainnav a[href="/admin"]');
  await page.locator('.table-sessions').waitFor();

  // carol's session: its link to the audit view.
  // (Other tests' sessions of carol's keep the default permission.)
  const row = page.locator('.table-sessions tbody tr', { hasText: 'carol' }).filter({ hasText: 'Read-only' });
  await row.waitFor();
  const sid = await row.locator('code').first().getAttribute('title');
  check(/^[0-9a-f]{32}$/.test(sid ?? ''), `carol's session id: ${sid}`);
  await row.locator('a.audit-link').click();
  await page.locator('.table-audit').waitFor();
  const url = new URL(page.url());
  check(url.pathname === '/admin/audit' && url.searchParams.get('session') === sid, `audit URL: ${page.url()}`);
  check((await page.inputValue('#audit-session')) === sid, 'the session filter is filled in');
  let sessions = [];
  await waitFor(async () => {
    sessions = await page.locator('.table-audit tbody tr td:nth-child(7) code').evaluateAll((els) => els.map((e) => e.getAttribute('title')));
    return sessions.length > 0 && sessions.every((s) => s === sid);
  }, `only carol's session's records (${sessions})`);
  const actions = await page.locator('.table-audit tbody tr td:nth-child(3)').allTextContents();
  check(actions.includes('login') && actions.includes('permission_changed'), `carol's session's actions: ${actions}`);
  await shot(page, 'audit-session');

  // The request id of the forged cookie: its one record.
  await page.fill('#audit-session', '');
  await page.fill('#audit-request_id', rid);
  await page.click('.filters button[type=submit]');
  await waitFor(async () => {
    const got = await page.locator('.table-audit tbody tr td:nth-child(3)').allTextContents();
    return got.length === 1 && got[0] === 'auth_refused';
  }, 'the forged request\'s record');
  const text = await page.locator('.table-audit tbody tr').first().textContent();
  check(/Refused/.test(text) && /unknown or expired session cookie/.test(text) && text.includes(rid), `the record: ${text}`);

  // Refusals only.
  await page.fill('#audit-request_id', '');
  await page.selectOption('#audit-decision', 'refused');
  await page.click('.filters button[type=submit]');
  await waitFor(async () => {
    const got = await page.locator('.table-audit tbody tr td:nth-child(4)').allTextContents();
    return got.length > 0 && got.every((d) => d === 'Refused');
  }, 'only refused records');
  await shot(page, 'audit-refused');

  // Reloading the session link's address keeps its filter.
  await page.goto(`${main.url}/admin/audit?session=${sid}`);
  await page.locator('.table-audit').waitFor();
  check((await page.inputValue('#audit-session')) === sid, 'the session filter after a reload');
}
