// A direct-mode terminal's recording plays in the admin audit view: dave
// types into a direct terminal (its WebSocket opened from a page logged in
// as dave), closes it; alice finds the "recording" record and plays it, and
// the player shows what was typed (under the panel's CSP).

import { SLOW, apiSession, check, login, waitFor, waitText } from './lib.mjs';

export default async function ({ main, users, newPage, shot }) {
  const dave = await apiSession(main.url, 'dave', users.dave.password);
  const granted = await dave.post('/api/execution-mode', { mode: 'direct' });
  check(granted.status === 200 && granted.json.mode === 'direct', `dave direct: ${granted.text}`);
  const term = await dave.post('/api/terminals', { cols: 80, rows: 24 });
  check(term.status === 201 && term.json.mode === 'direct', `dave's terminal: ${term.text}`);
  const id = term.json.id;

  // Type into it over its WebSocket, from a page with dave's session.
  const tpage = await newPage();
  await login(tpage, main.url, 'dave', users.dave.password);
  const seen = await tpage.evaluate(
    ({ tid, bound }) =>
      new Promise((resolve, reject) => {
        const ws = new WebSocket(`${location.origin.replace(/^http/, 'ws')}/api/terminals/${tid}/ws`);
        ws.binaryType = 'arraybuffer';
        let text = '';
        const dec = new TextDecoder();
        const timer = setTimeout(() => reject(new Error(`no output: ${text}`)),
                                 bound);
        ws.onopen = () => ws.send(new TextEncoder().encode('echo PLAY""BACK-$((6 * 7))\n'));
        ws.onmessage = (ev) => {
          text += typeof ev.data === 'string' ? ev.data : dec.decode(ev.data, { stream: true });
          if (text.includes('PLAYBACK-42')) {
            clearTimeout(timer);
            ws.close();
            resolve(text);
          }
        };
        ws.onerror = () => reject(new Error('websocket error'));
      }),
    { tid: id, bound: SLOW },
  );
  check(seen.includes('PLAYBACK-42'), `terminal output: ${seen}`);
  const closed = await dave.del(`/api/terminals/${id}`);
  check(closed.status === 200, `close: ${closed.text}`);

  // alice, in the audit view: the recording record, then Play.
  const page = await newPage();
  await login(page, main.url, 'alice', users.alice.password);
  await page.click('.mainnav a[href="/admin"]');
  await page.click('.subnav a[href="/admin/audit"]');
  await page.locator('#audit-action').waitFor();
  await page.fill('#audit-action', 'recording');
  const button = page.locator(`button[aria-label="Play recording ${id}"]`);
  // Each Apply draws the results anew: the old ones are marked first, so
  // that the button found (and clicked) is the new drawing's, which no
  // late answer replaces with the player inside.
  await waitFor(async () => {
    await page.$$eval('.audit-results > *', (els) => els.forEach((e) => e.setAttribute('data-stale', '')));
    await page.click('.filters button[type=submit]');
    await page.locator('.audit-results > :not([data-stale])').first().waitFor();
    return (await button.count()) === 1;
  }, `the recording record of ${id}`);
  await button.click();
  const player = page.locator(`.recording-player[data-recording="${id}"]`);
  await player.waitFor();
  const csp = await page.evaluate(() => window.__csp);
  try {
    await waitText(player, /PLAYBACK-42/);
  } catch (e) {
    const now = await page.evaluate(() => window.__csp);
    throw new Error(`${e.message}; CSP: ${now.join('; ')}; errors: ${page.__errors.join('; ')}`);
  }
  check(csp.length === 0, `CSP violations: ${csp.join('; ')}`);
  await shot(page, 'admin-recording');
}
