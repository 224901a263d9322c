// Terminals: an echo round trip through the sandboxed shell, fitting on
// resize, reattaching after a reload, and opening and closing terminals.

import { check, login, terminalText, waitFor, waitTerminal } from './lib.mjs';

// Type a line into the active terminal.
async function type(page, line) {
  await page.locator('.term-host:not([hidden]) .xterm').click();
  await page.keyboard.type(line);
  await page.keyboard.press('Enter');
}

// The terminal's size as the shell sees it: [rows, cols].
async function sttySize(page, tag) {
  await type(page, `echo ${tag}=$(stty size | tr ' ' x)=`);
  const re = new RegExp(`${tag}=(\\d+)x(\\d+)=`);
  await waitTerminal(page, re);
  const m = (await terminalText(page)).match(re);
  return [Number(m[1]), Number(m[2])];
}

export default async function ({ main, users, newPage, shot }) {
  const page = await newPage();
  await login(page, main.url, 'bob', users.bob.password);

  // A terminal opens by itself, sandboxed; the shell answers.
  await page.locator('.term-host:not([hidden]) .xterm').waitFor();
  await page.locator('.term-item.active').waitFor();
  // (bob's terminals of other tests may be listed too, as detached.)
  const n0 = await page.locator('.term-item').count();
  await type(page, 'echo hg-$((6*7))-ok');
  await waitTerminal(page, /hg-42-ok/);
  await type(page, 'echo mode=$HOSTGATE_MODE');
  await waitTerminal(page, /mode=sandbox/);

  // The terminal fills the view and follows its size.
  const [rows1, cols1] = await sttySize(page, 'a');
  check(cols1 > 100 && rows1 > 25, `terminal size at 1280x800: ${rows1}x${cols1}`);
  await page.setViewportSize({ width: 1000, height: 640 });
  // The new size goes from the panel through frontd to the pty: ask the
  // shell until it has it, however long that takes here.
  let asked = 0;
  const [rows2, cols2] = await waitFor(async () => {
    const [r, c] = await sttySize(page, `b${asked++}`);
    return c < cols1 && r < rows1 ? [r, c] : null;
  }, 'the smaller size in the shell');
  check(cols2 < cols1 && rows2 < rows1, `after resize: ${rows2}x${cols2}, before ${rows1}x${cols1}`);
  await page.setViewportSize({ width: 1280, height: 800 });

  // A reload attaches to the same shell again.
  const id = await page.locator('.term-item.active').getAttribute('data-id');
  await type(page, 'export HG_MARK=kept-$((40+2))');
  await page.reload();
  await page.locator('.term-host:not([hidden]) .xterm').waitFor();
  await waitFor(
    async () => (await page.locator('.term-item.active').getAttribute('data-id')) === id,
    'the same terminal after the reload',
  );
  await waitFor(async () => /\S/.test(await terminalText(page)), 'the prompt drawn again');
  await type(page, 'echo mark=$HG_MARK');
  await waitTerminal(page, /mark=kept-42/);

  // Open a second terminal, then close it: back to the first.
  await page.click('#new-terminal');
  await waitFor(async () => (await page.locator('.term-item').count()) === n0 + 1, 'one more terminal listed');
  const id2 = await page.locator('.term-item.active').getAttribute('data-id');
  check(id2 && id2 !== id, 'the new terminal is the active one');
  await type(page, 'echo second-$((2*3))');
  await waitTerminal(page, /second-6/);
  await page.click(`.term-item[data-id="${id2}"] .term-close`);
  await waitFor(async () => (await page.locator('.term-item').count()) === n0, 'one terminal fewer');
  check((await page.locator('.term-item.active').getAttribute('data-id')) === id, 'the first is active');
  const listed = await page.evaluate(async () => (await (await fetch('/api/terminals')).json()).terminals);
  check(!listed.some((t) => t.id === id2 && t.running), 'the closed terminal is gone on the server');

  await type(page, 'clear; echo hg-$((6*7))-ok; echo mode=$HOSTGATE_MODE; uname -sr; ls -ld ~');
  await waitTerminal(page, /hg-42-ok/);
  await shot(page, 'terminal');
}
