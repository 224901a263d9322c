// "Connect an agent": the top bar's button opens the dialog (by the
// keyboard), a token is minted and shown once, it works as a bearer, the
// snippets are docs/agents.md's with this host's URL and the token, Copy
// puts them on the clipboard, the session's tokens are listed without
// their secrets, Revoke asks first (Escape and Cancel keep the token) and
// then the token gets 401; one revoked by hgctl leaves the open list;
// reopened, the secret is not shown again; the
// session's end closes it (and its tokens die); a phone's width.

import fs from 'node:fs';
import path from 'node:path';

import { REPO, check, login, waitFor } from './lib.mjs';

const USER = 'gina';

// The fenced code blocks of a Markdown text (unindented).
function codeBlocks(md) {
  const out = [];
  let cur = null;
  for (const line of md.split('\n')) {
    const m = /^(\s*)```/.exec(line);
    if (m && cur === null) cur = { indent: m[1].length, lines: [] };
    else if (m) {
      out.push(cur.lines.join('\n'));
      cur = null;
    } else if (cur) cur.lines.push(line.slice(cur.indent));
  }
  return out;
}

// A status code of /api/status with the bearer.
async function statusWith(base, token) {
  const r = await fetch(`${base}/api/status`, { headers: { Authorization: `Bearer ${token}` } });
  return r.status;
}

const listedIds = (page) => page.$$eval('#agent-tokens .agent-token-row', (rows) => rows.map((r) => r.dataset.id));
const snippet = (page, key) => page.locator(`#agent-reveal [data-snippet="${key}"]`).textContent();
const focusedId = (page) => page.evaluate(() => document.activeElement?.id ?? '');
const overflow = (page) => page.evaluate(() => document.documentElement.scrollWidth > window.innerWidth);

export default async function ({ main, users, newPage, shot }) {
  const page = await newPage({ permissions: ['clipboard-read', 'clipboard-write'] });
  await login(page, main.url, USER, users[USER].password);
  const url = `${main.url}/mcp`;

  // By the keyboard: from the state button, Tab reaches the button.
  await page.focus('#mode-button');
  await page.keyboard.press('Tab');
  check((await focusedId(page)) === 'agents-button', `Tab after the state button: ${await focusedId(page)}`);
  await page.keyboard.press('Enter');
  await page.locator('#agents-dialog').waitFor();
  check(
    (await page.locator('#agents-dialog').getAttribute('aria-modal')) === 'true' &&
      (await page.locator('#agents-dialog').getAttribute('role')) === 'dialog',
    'a modal dialog',
  );
  check((await focusedId(page)) === 'agent-create', `the focus on Create: ${await focusedId(page)}`);
  const intro = await page.locator('#agents-dialog .dialog-body').textContent();
  check(/this session’s permission and execution mode/.test(intro), `it says whose permission: ${intro}`);
  check(/dies with this session/.test(intro), `it says the token dies with the session: ${intro}`);
  await waitFor(async () => await page.locator('.agent-empty').isVisible(), 'no tokens yet');

  // Mint (Enter on Create): the token is shown once and works.
  await page.keyboard.press('Enter');
  await page.locator('#agent-reveal [data-snippet="token"]').waitFor();
  const token1 = (await snippet(page, 'token')).trim();
  check(/^hgt_[A-Za-z0-9_-]{20,}$/.test(token1), `a token: ${token1}`);
  check(
    (await page.evaluate(() => document.activeElement?.dataset.copy)) === 'token',
    'the focus on the token’s Copy button',
  );
  check((await statusWith(main.url, token1)) === 200, 'the token shown is a working bearer');
  const st = await (
    await fetch(`${main.url}/api/status`, { headers: { Authorization: `Bearer ${token1}` } })
  ).json();
  check(st.user === USER && st.auth === 'token', `the token acts for ${USER}: ${JSON.stringify(st)}`);

  // The snippets: this host's URL and the token, in docs/agents.md's words.
  check((await snippet(page, 'url')).trim() === url, `the URL: ${await snippet(page, 'url')}`);
  const docs = codeBlocks(fs.readFileSync(path.join(REPO, 'docs', 'agents.md'), 'utf8'));
  const fill = (t) => t.replaceAll('http://127.0.0.1:8080/mcp', url).replaceAll('hgt_...', token1);
  const claudeDoc = docs.find((b) => b.startsWith('export HOSTGATE_TOKEN=') && b.includes('claude mcp add'));
  const codexDoc = docs.find((b) => b.startsWith('[mcp_servers.hostgate]'));
  check(claudeDoc && codexDoc, 'docs/agents.md has the Claude Code and Codex blocks');
  const claude = await snippet(page, 'claude');
  check(claude === fill(claudeDoc), `Claude Code's snippet is the docs' one:\n${claude}\n---\n${fill(claudeDoc)}`);
  check(
    claude.includes(`claude mcp add --transport http hostgate ${url}`) && claude.includes(token1),
    `Claude Code: URL and token: ${claude}`,
  );
  const codex = await snippet(page, 'codex');
  check(codex === fill(codexDoc), `Codex's snippet is the docs' one:\n${codex}\n---\n${fill(codexDoc)}`);
  check(codex.includes(`url = "${url}"`) && codex.includes('bearer_token_env_var = "HOSTGATE_TOKEN"'), codex);
  check((await snippet(page, 'codex-env')) === `export HOSTGATE_TOKEN=${token1}`, 'Codex: the export line');
  const any = await snippet(page, 'any');
  check(any === `${url}\nAuthorization: Bearer ${token1}`, `any client: ${any}`);

  // Copy puts the text on the clipboard.
  await page.click('#agent-reveal [data-copy="claude"]');
  await waitFor(async () => (await page.evaluate(() => navigator.clipboard.readText())) === claude, 'Claude copied');
  await page.click('#agent-reveal [data-copy="token"]');
  await waitFor(async () => (await page.evaluate(() => navigator.clipboard.readText())) === token1, 'token copied');

  // The list: the token's id, never its secret.
  const id1 = await waitFor(async () => {
    const ids = await listedIds(page);
    return ids.length === 1 ? ids[0] : null;
  }, 'one token listed');
  const listText = await page.locator('#agent-tokens').textContent();
  check(listText.includes(id1) && !listText.includes(token1), `the list shows the id only: ${listText}`);
  await shot(page, 'agents');

  // A second token; the first still works.
  await page.click('#agent-create');
  await waitFor(async () => (await listedIds(page)).length === 2, 'two tokens listed');
  const token2 = (await snippet(page, 'token')).trim();
  check(token2 !== token1 && /^hgt_/.test(token2), 'a new token shown');
  const id2 = await waitFor(async () => (await listedIds(page)).find((i) => i !== id1), 'the second id listed');
  check((await statusWith(main.url, token1)) === 200, 'the first token lives on');

  // Revoke the first by the keyboard; Escape declines and keeps it.
  await page.focus(`[data-revoke="${id1}"]`);
  await page.keyboard.press('Enter');
  await page.locator('[role=alertdialog]').waitFor();
  const question = await page.locator('[role=alertdialog]').textContent();
  check(question.includes(id1), `the confirmation names the token: ${question}`);
  await page.keyboard.press('Escape');
  await waitFor(async () => !(await page.locator('[role=alertdialog]').count()), 'confirmation declined');
  check(await page.locator('#agents-dialog').isVisible(), 'Escape closed the confirmation only');
  const back = await page.evaluate(() => document.activeElement?.dataset.revoke);
  check(back === id1, `the focus back on Revoke: ${back}`);
  check((await listedIds(page)).includes(id1), 'declined: still listed');
  check((await statusWith(main.url, token1)) === 200, 'declined: the token works');
  // Cancel keeps it too; Revoke ends it.
  await page.click(`[data-revoke="${id1}"]`);
  await page.click('[role=alertdialog] [data-action=cancel]');
  await waitFor(async () => !(await page.locator('[role=alertdialog]').count()), 'confirmation cancelled');
  check((await statusWith(main.url, token1)) === 200, 'cancelled: the token works');
  await page.click(`[data-revoke="${id1}"]`);
  await page.click('[role=alertdialog] [data-action=confirm]');
  await waitFor(async () => {
    const ids = await listedIds(page);
    return ids.length === 1 && ids[0] === id2;
  }, 'the revoked token gone from the list');
  check((await statusWith(main.url, token1)) === 401, 'the revoked token gets 401');
  check((await statusWith(main.url, token2)) === 200, 'the other token lives on');
  check(await page.locator('#agents-dialog').isVisible(), 'the dialog stays open');

  // Escape closes; the focus goes back to the button. Reopened, the list
  // is there but no secret is shown again.
  await page.keyboard.press('Escape');
  await waitFor(async () => !(await page.locator('#agents-dialog').count()), 'dialog closed');
  check((await focusedId(page)) === 'agents-button', `the focus back on the button: ${await focusedId(page)}`);
  await page.click('#agents-button');
  await waitFor(async () => JSON.stringify(await listedIds(page)) === JSON.stringify([id2]), 'the list reopened');
  check(await page.locator('#agent-reveal').isHidden(), 'no token shown on reopening');
  const body = await page.locator('body').textContent();
  check(!body.includes(token2) && !body.includes(token1), 'no secret in the page on reopening');
  // Revoking the one shown hides it.
  await page.click('#agent-create');
  await page.locator('#agent-reveal [data-snippet="token"]').waitFor();
  const token3 = (await snippet(page, 'token')).trim();
  const id3 = await waitFor(async () => (await listedIds(page)).find((i) => i !== id2), 'a third token listed');
  await page.click(`[data-revoke="${id3}"]`);
  await page.click('[role=alertdialog] [data-action=confirm]');
  await waitFor(async () => await page.locator('#agent-reveal').isHidden(), 'the revoked token no longer shown');
  check((await statusWith(main.url, token3)) === 401, 'the third token revoked');
  // One revoked elsewhere (hgctl) leaves the open list by itself (the
  // token_revoked event).
  await page.click('#agent-create');
  const id4 = await waitFor(async () => (await listedIds(page)).find((i) => i !== id2), 'a fourth token listed');
  const token4 = (await snippet(page, 'token')).trim();
  main.hgctl(['token', 'revoke', id4]);
  await waitFor(
    async () => JSON.stringify(await listedIds(page)) === JSON.stringify([id2]),
    'the token revoked by hgctl gone from the open list',
  );
  check(await page.locator('#agent-reveal').isHidden(), 'the token revoked by hgctl no longer shown');
  check((await statusWith(main.url, token4)) === 401, 'the fourth token revoked');
  await page.locator('#agents-dialog [data-action=close]').click();
  await waitFor(async () => !(await page.locator('#agents-dialog').count()), 'Close closes');

  // The session ends (here: logged out by another tab) with the dialog
  // open: the dialog goes with the panel, and the session's tokens die.
  await page.click('#agents-button');
  await page.locator('#agents-dialog').waitFor();
  const out = await page.evaluate(async () => {
    const r = await fetch('/api/logout', {
      method: 'POST',
      headers: { 'X-CSRF-Token': localStorage.getItem('hostgate.csrf') ?? '', 'Content-Type': 'application/json' },
      body: '{}',
    });
    return r.status;
  });
  check(out === 200, `logout: ${out}`);
  await page.locator('#login-user').waitFor();
  check(!(await page.locator('#agents-dialog').count()), 'the dialog closed with the session');
  check((await statusWith(main.url, token2)) === 401, 'the session’s token died with it');

  // A phone: the button fits the top bar, the dialog the screen.
  const phone = await newPage({ viewport: { width: 390, height: 844 } });
  await login(phone, main.url, USER, users[USER].password);
  const btn = await phone.locator('#agents-button').boundingBox();
  check(btn && btn.x >= 0 && btn.x + btn.width <= 390, `the button inside the screen: ${JSON.stringify(btn)}`);
  check(
    (await phone.locator('#agents-button').getAttribute('aria-label')) === 'Connect an agent' &&
      (await phone.locator('#agents-button .agents-label').isHidden()),
    'an icon button with its name at 390 px',
  );
  await phone.click('#agents-button');
  await phone.click('#agent-create');
  await phone.locator('#agent-reveal [data-snippet="claude"]').waitFor();
  const dlg = await phone.locator('#agents-dialog').boundingBox();
  check(dlg.x >= 0 && dlg.x + dlg.width <= 390, `the dialog inside the screen: ${JSON.stringify(dlg)}`);
  check(!(await overflow(phone)), 'no sideways scrolling at 390 px (agents dialog)');
  await shot(phone, 'mobile-agents');
}
