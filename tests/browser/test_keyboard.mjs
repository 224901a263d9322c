// The popover by keyboard alone: F6 leaves the terminal for the state
// button, Enter opens the popover with the focus inside, Tab stays inside,
// arrows and Enter choose, Escape closes a confirmation and then the
// popover, giving the focus back to the button.

import { check, login, modeLabel, waitFor } from './lib.mjs';

const active = (page) =>
  page.evaluate(() => {
    const a = document.activeElement;
    return {
      id: a?.id ?? '',
      value: a?.dataset?.value ?? '',
      action: a?.dataset?.action ?? '',
      inPopover: !!a?.closest('#mode-popover'),
      inDialog: !!a?.closest('[role=alertdialog]'),
      inTerminal: !!a?.closest('.xterm'),
      outline: a ? getComputedStyle(a).outlineStyle : '',
    };
  });

export default async function ({ main, users, newPage, shot }) {
  const page = await newPage();
  await login(page, main.url, 'erin', users.erin.password);
  await page.locator('.term-host:not([hidden]) .xterm').waitFor();
  await waitFor(async () => (await active(page)).inTerminal, 'the terminal has the focus');

  // F6: from the terminal to the state button.
  await page.keyboard.press('F6');
  let a = await active(page);
  check(a.id === 'mode-button', `F6 focus: ${JSON.stringify(a)}`);
  check(a.outline !== 'none', 'visible focus on the button');

  // Enter opens it; the checked permission has the focus.
  await page.keyboard.press('Enter');
  await page.locator('#mode-popover').waitFor();
  check((await page.locator('#mode-button').getAttribute('aria-expanded')) === 'true', 'aria-expanded');
  a = await active(page);
  check(a.inPopover && a.value === 'workspace-write', `focus on open: ${JSON.stringify(a)}`);

  // Tab and Shift+Tab never leave it.
  const seen = new Set();
  for (let i = 0; i < 14; i++) {
    await page.keyboard.press('Tab');
    a = await active(page);
    check(a.inPopover, `Tab ${i + 1} left the popover: ${JSON.stringify(a)}`);
    seen.add(a.value || a.id || 'close');
  }
  for (const v of ['read-only', 'workspace-write', 'workspace-write+network', 'sandbox', 'direct']) {
    check(seen.has(v), `Tab reaches ${v}: ${[...seen]}`);
  }
  for (let i = 0; i < 6; i++) {
    await page.keyboard.press('Shift+Tab');
    check((await active(page)).inPopover, `Shift+Tab ${i + 1} left the popover`);
  }

  // Arrows move within a column; Enter chooses.
  await page.locator('#mode-popover [data-value="workspace-write"]').focus();
  await page.keyboard.press('ArrowUp');
  check((await active(page)).value === 'read-only', 'ArrowUp moves to read-only');
  check((await active(page)).outline !== 'none', 'visible focus on the option');
  await shot(page, 'keyboard-popover');
  await page.keyboard.press('Enter');
  await waitFor(async () => (await modeLabel(page)) === 'Sandboxed · Read-only', 'read-only chosen by keyboard');
  await page.keyboard.press('Space');
  await page.keyboard.press('ArrowDown');
  await page.keyboard.press('Space');
  await waitFor(
    async () => (await modeLabel(page)) === 'Sandboxed · Workspace write',
    'workspace write chosen with Space',
  );

  // Direct asks first; Escape closes the confirmation only.
  await page.locator('#mode-popover [data-value="direct"]').focus();
  await page.keyboard.press('Enter');
  await page.locator('[role=alertdialog]').waitFor();
  a = await active(page);
  check(a.inDialog && a.action === 'cancel', `focus in the confirmation: ${JSON.stringify(a)}`);
  await page.keyboard.press('Tab');
  await page.keyboard.press('Tab');
  check((await active(page)).inDialog, 'Tab stays in the confirmation');
  await page.keyboard.press('Escape');
  await waitFor(async () => !(await page.locator('[role=alertdialog]').count()), 'confirmation closed');
  a = await active(page);
  check(a.inPopover && a.value === 'direct', `focus back on Direct: ${JSON.stringify(a)}`);
  check(/^Sandboxed/.test(await modeLabel(page)), 'still sandboxed');

  // Escape closes the popover; the focus is on the button again.
  await page.keyboard.press('Escape');
  await waitFor(async () => !(await page.locator('#mode-popover').count()), 'popover closed');
  a = await active(page);
  check(a.id === 'mode-button', `focus after Escape: ${JSON.stringify(a)}`);
  check((await page.locator('#mode-button').getAttribute('aria-expanded')) === 'false', 'aria-expanded false');
  await shot(page, 'keyboard');
}
