// Login: the page and its refusal, the panel after it, and how frontd
// serves the panel (content types, caching, security headers).

import { check, login, modeLabel, waitText } from './lib.mjs';

export default async function ({ main, users, newPage, shot }) {
  // frontd's headers for the panel.
  const index = await fetch(`${main.url}/some/client/route`);
  check(index.status === 200, `index.html for a client route: ${index.status}`);
  check(/text\/html/.test(index.headers.get('content-type')), 'index.html content type');
  const csp = index.headers.get('content-security-policy') ?? '';
  check(/script-src 'self'/.test(csp) && !/unsafe-inline/.test(csp), `CSP: ${csp}`);
  check(/frame-ancestors 'none'/.test(csp), `CSP frame-ancestors: ${csp}`);
  check(index.headers.get('x-content-type-options') === 'nosniff', 'nosniff');
  check(/no-referrer|strict-origin/.test(index.headers.get('referrer-policy') ?? ''), 'Referrer-Policy');
  const html = await index.text();
  const js = html.match(/src="(\/assets\/[^"]+\.js)"/)?.[1];
  check(js, 'index.html names its script');
  check(!/<script>(?!<)/.test(html) && !/ style="/.test(html), 'no inline script or style in index.html');
  const asset = await fetch(`${main.url}${js}`);
  check(/javascript/.test(asset.headers.get('content-type')), 'script content type');
  check(/immutable/.test(asset.headers.get('cache-control') ?? ''), `hashed asset cache: ${asset.headers.get('cache-control')}`);

  const page = await newPage();
  await page.goto(`${main.url}/`);
  await page.locator('#login-form').waitFor();
  check(new URL(page.url()).pathname === '/login', `not sent to /login: ${page.url()}`);
  await shot(page, 'login-page');

  // A wrong password is refused with the server's message.
  await page.fill('#login-user', 'alice');
  await page.fill('#login-password', 'not-the-password');
  await page.click('#login-form button[type=submit]');
  await waitText(page.locator('#login-error'), /invalid username or password/i);

  // Log in and out: back to the login page, and the session is gone.
  await login(page, main.url, 'alice', users.alice.password);
  await page.click('#logout');
  await page.locator('#login-form').waitFor();
  const r = await page.evaluate(async () => (await fetch('/api/status')).status);
  check(r === 401, `status after logout: ${r}`);

  await login(page, main.url, 'alice', users.alice.password);
  check((await modeLabel(page)) === 'Sandboxed · Workspace write', `label: ${await modeLabel(page)}`);
  await waitText(page.locator('.user-box'), /alice\s*admin/);
  check(await page.locator('.mainnav a[href="/admin"]').isVisible(), 'admin link for an admin');

  // A reload keeps the session (cookie) and its CSRF token (localStorage).
  await page.reload();
  await page.locator('#mode-button').waitFor();
  await waitText(page.locator('#mode-button'), /Sandboxed/);
  await page.locator('.term-host:not([hidden]) .xterm').waitFor();
  await shot(page, 'login');
}
