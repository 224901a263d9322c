// Readable at 1280×800 and 390×844, light and dark (prefers-color-scheme):
// nothing overflows sideways, the state button and the popover fit on a
// phone, and the dark scheme is applied.

import { check, login, modeLabel, waitFor } from './lib.mjs';

// Whether the page scrolls sideways, and the box of a selector.
const overflow = (page) => page.evaluate(() => document.documentElement.scrollWidth > window.innerWidth);
const box = (page, sel) => page.locator(sel).boundingBox();

export default async function ({ main, users, newPage, shot }) {
  // Dark, desktop: the admin popover.
  const desk = await newPage({ colorScheme: 'dark' });
  await login(desk, main.url, 'alice', users.alice.password);
  const bg = await desk.evaluate(() => getComputedStyle(document.body).backgroundColor);
  const [r, g, b] = bg.match(/\d+/g).map(Number);
  check(r + g + b < 120, `dark background: ${bg}`);
  await desk.click('#mode-button');
  await desk.locator('#mode-popover').waitFor();
  await shot(desk, 'dark-popover');

  // A phone, as a user: the terminal and the button fit.
  const phone = await newPage({ viewport: { width: 390, height: 844 }, colorScheme: 'dark' });
  await login(phone, main.url, 'bob', users.bob.password);
  await phone.locator('.term-host:not([hidden]) .xterm').waitFor();
  check(!(await overflow(phone)), 'no sideways scrolling at 390 px (terminals)');
  const btn = await box(phone, '#mode-button');
  check(btn.x >= 0 && btn.x + btn.width <= 390, `state button inside the screen: ${JSON.stringify(btn)}`);
  check(/^Sandboxed · Workspace write$/.test(await modeLabel(phone)), 'the full label on a phone');
  const term = await box(phone, '.term-host:not([hidden])');
  check(term.width > 300 && term.height > 500, `terminal fills the screen: ${JSON.stringify(term)}`);
  await shot(phone, 'mobile-terminal-dark');

  // A phone, light, as an admin: the popover's columns stack and fit.
  const phone2 = await newPage({ viewport: { width: 390, height: 844 } });
  await login(phone2, main.url, 'alice', users.alice.password);
  await phone2.click('#mode-button');
  await phone2.locator('#mode-popover').waitFor();
  const pop = await box(phone2, '#mode-popover');
  check(pop.x >= 0 && pop.x + pop.width <= 390, `popover inside the screen: ${JSON.stringify(pop)}`);
  const p1 = await box(phone2, '#mode-popover [data-col=permission]');
  const p2 = await box(phone2, '#mode-popover [data-col=execution]');
  check(p2.y >= p1.y + p1.height - 1, 'the columns stack on a phone');
  check(!(await overflow(phone2)), 'no sideways scrolling at 390 px (popover)');

  // The admin views fit too.
  await phone2.keyboard.press('Escape');
  await phone2.click('.mainnav a[href="/admin"]');
  await phone2.locator('.table-sessions').waitFor();
  check(!(await overflow(phone2)), 'no sideways page scrolling at 390 px (admin; tables scroll in place)');
  await phone2.click('#mode-button');
  await waitFor(() => phone2.locator('#mode-popover').isVisible(), 'popover open again');
  await shot(phone2, 'mobile-popover');
}
