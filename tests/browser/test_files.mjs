// The file pane: browse into a folder a command made (and through links),
// upload by the button and by dropped files, an 8 MiB upload with its
// progress, cancelling uploads, replacing after a confirmation, download, delete after a
// confirmation (Cancel keeps the file), a new folder, Refresh, the
// server's refusals as toasts (a link out of the workspace, a non-empty
// folder, read-only permission with the controls off, a forced upload
// under it, an upload over the cap), a hostile name shown as text, the
// keyboard, and a phone's width.

import crypto from 'node:crypto';
import fs from 'node:fs';

import { apiSession, check, login, modeLabel, waitFor } from './lib.mjs';

const USER = 'frank';
const READ_ONLY_MESSAGE = /permission is read-only: the workspace cannot be changed/;

// The names in the pane's list, in order.
const listed = (page) =>
  page.$$eval('#files-list .file-row', (rows) => rows.map((r) => [r.dataset.name, r.dataset.type]));

async function waitListed(page, name, present = true) {
  return waitFor(
    async () => (await listed(page)).some(([n]) => n === name) === present,
    `${JSON.stringify(name)} ${present ? 'listed' : 'gone'} ` +
      `(list: ${JSON.stringify(await listed(page).catch(() => []))})`,
  );
}

// The row of a name (any text: matched in the page, never as a selector).
async function rowIndex(page, name) {
  return page.$$eval('#files-list .file-row', (rows, n) => rows.findIndex((r) => r.dataset.name === n), name);
}
const row = async (page, name) => page.locator('#files-list .file-row').nth(await rowIndex(page, name));

// The state of an upload's row: [state, progress value, progress max].
const upload = (page, name) =>
  page.$$eval(
    '#files-uploads .upload-row',
    (rows, n) => {
      const r = rows.find((x) => x.dataset.name === n);
      const bar = r?.querySelector('progress');
      return r ? [r.dataset.state, bar?.value ?? null, bar?.max ?? null, r.textContent] : null;
    },
    name,
  );

async function waitUpload(page, name, state) {
  return waitFor(
    async () => {
      const u = await upload(page, name);
      return u && u[0] === state ? u : null;
    },
    `the upload of ${JSON.stringify(name)} ${state} ` +
      `(now: ${JSON.stringify(await upload(page, name).catch(() => null))})`,
  );
}

// Choose files through the Upload button's file chooser.
async function chooseFiles(page, files) {
  const [chooser] = await Promise.all([page.waitForEvent('filechooser'), page.click('#files-upload')]);
  check(chooser.isMultiple(), 'the file chooser takes several files');
  await chooser.setFiles(files);
}

// Keep the text of every toast the page shows (a toast goes away after
// a while; the log stays).
const logToasts = (page) =>
  page.evaluate(() => {
    window.__toastLog = [];
    new MutationObserver((muts) => {
      for (const m of muts) {
        for (const n of m.addedNodes) {
          if (n instanceof HTMLElement && n.classList.contains('toast')) window.__toastLog.push(n.textContent);
        }
      }
    }).observe(document.body, { subtree: true, childList: true });
  });

// The logged toast matching re.
async function waitToast(page, re) {
  return waitFor(
    async () => (await page.evaluate(() => window.__toastLog)).find((t) => re.test(t)),
    `a toast matching ${re} (toasts: ${JSON.stringify(await page.evaluate(() => window.__toastLog).catch(() => []))})`,
  );
}

const sha = (buf) => crypto.createHash('sha256').update(buf).digest('hex');

// The bytes of a workspace file, read by Node through the API.
async function serverBytes(api, path) {
  const url = '/api/files/' + path.split('/').map(encodeURIComponent).join('/');
  const r = await api.raw('GET', url);
  return { status: r.status, body: Buffer.from(await r.arrayBuffer()), headers: r.headers };
}

// File requests share the per-user spawn rate limit (30 at once, 2 a
// second): this test's hostgate lifts it, so that no request of its fast
// sequence is refused for the machine's speed.
const UNLIMITED = { HOSTGATE_SPAWN_RATE_PER_MINUTE: '100000', HOSTGATE_SPAWN_BURST: '100000' };

export default async function ({ users, newPage, shot, hostgate }) {
  const main = await hostgate('files', UNLIMITED);
  const api = await apiSession(main.url, USER, users[USER].password);
  const made = await api.post('/api/run_command', {
    command:
      'mkdir -p d && echo hi > d/a.txt && echo top > A-first.txt && ' +
      'ln -s d linkdir && ln -s A-first.txt alink && ln -s /etc/passwd out',
  });
  check(made.status === 200 && made.json.exit_code === 0, `mkdir by a command: ${made.status} ${made.text}`);

  const page = await newPage({ acceptDownloads: true });
  await login(page, main.url, USER, users[USER].password);
  await logToasts(page);
  await page.locator('.term-host:not([hidden]) .xterm').waitFor();

  // Closed at first; the toggle opens it and it lists the workspace,
  // folders first.
  check(await page.locator('#files-pane').isHidden(), 'the file pane starts closed');
  check((await page.getAttribute('#files-toggle', 'aria-expanded')) === 'false', 'toggle aria-expanded false');
  await page.click('#files-toggle');
  await page.locator('#files-pane').waitFor();
  check((await page.getAttribute('#files-toggle', 'aria-expanded')) === 'true', 'toggle aria-expanded true');
  await waitListed(page, 'd');
  await waitListed(page, 'A-first.txt');
  const root = await listed(page);
  check(
    root.findIndex(([n]) => n === 'd') < root.findIndex(([n]) => n === 'A-first.txt'),
    `folders first: ${JSON.stringify(root)}`,
  );
  check(root.find(([n]) => n === 'd')[1] === 'dir', 'd is a folder');
  check(await page.locator('#files-up').isDisabled(), 'no Up at the workspace root');

  // Links: to a folder it opens (and a breadcrumb leads back), to a file
  // it downloads, out of the workspace the server's refusal.
  check(root.find(([n]) => n === 'linkdir')[1] === 'symlink', `linkdir is a link: ${JSON.stringify(root)}`);
  await (await row(page, 'linkdir')).locator('.file-name').click();
  await waitListed(page, 'a.txt');
  check((await page.locator('.files-crumb').allTextContents()).join('|') === 'Workspace|linkdir', 'in linkdir');
  await page.click('.files-crumb-link[data-path=""]');
  await waitListed(page, 'alink');
  const [dlLink] = await Promise.all([
    page.waitForEvent('download'),
    (await row(page, 'alink')).locator('.file-name').click(),
  ]);
  check(fs.readFileSync(await dlLink.path()).toString() === 'top\n', 'a link to a file downloads it');
  await (await row(page, 'out')).locator('.file-name').click();
  await waitToast(page, /Not opened.*leaves the workspace/);

  // Into the folder: breadcrumbs, the file with its size.
  await (await row(page, 'd')).locator('.file-name').click();
  await waitListed(page, 'a.txt');
  const crumbs = await page.locator('.files-crumb').allTextContents();
  check(crumbs.join('|') === 'Workspace|d', `breadcrumbs: ${crumbs}`);
  check(
    (await page.locator('.files-crumb-here').getAttribute('aria-current')) === 'location',
    'the current folder is marked',
  );
  const meta = await (await row(page, 'a.txt')).locator('.file-meta').textContent();
  check(/^3 B · \d{4}-\d\d-\d\d \d\d:\d\d:\d\d$/.test(meta), `size and time of a.txt: ${meta}`);

  // Upload two files by the button.
  const text1 = Buffer.from('first upload\n');
  const bin2 = crypto.randomBytes(70000);
  await chooseFiles(page, [
    { name: 'up1.txt', mimeType: 'text/plain', buffer: text1 },
    { name: 'up2.bin', mimeType: 'application/octet-stream', buffer: bin2 },
  ]);
  await waitUpload(page, 'up1.txt', 'done');
  await waitUpload(page, 'up2.bin', 'done');
  await waitListed(page, 'up1.txt');
  await waitListed(page, 'up2.bin');
  await waitToast(page, /Uploaded 2 files/);
  let got = await serverBytes(api, 'd/up2.bin');
  check(got.status === 200 && got.body.equals(bin2), `up2.bin on the server: ${got.status}, ${got.body.length} bytes`);
  got = await serverBytes(api, 'd/up1.txt');
  check(got.body.equals(text1), 'up1.txt on the server');

  // A file dropped on the pane (a synthetic drag and drop).
  const dropped = await page.evaluate(() => {
    const pane = document.getElementById('files-pane');
    const dt = new DataTransfer();
    dt.items.add(new File(['dropped bytes\n'], 'dropped.txt', { type: 'text/plain' }));
    dt.items.add(new File(['second drop\n'], 'dropped2.txt', { type: 'text/plain' }));
    const fire = (type) =>
      pane.querySelector('.files-list').dispatchEvent(
        new DragEvent(type, { dataTransfer: dt, bubbles: true, cancelable: true }),
      );
    fire('dragenter');
    fire('dragover');
    const shown = pane.classList.contains('files-dragging');
    const mask = pane.querySelector('.files-dropmask').textContent;
    const taken = !fire('drop');
    return { shown, mask, taken, after: pane.classList.contains('files-dragging') };
  });
  check(dropped.shown && /Drop to upload into d\//.test(dropped.mask), `drop target shown: ${JSON.stringify(dropped)}`);
  check(dropped.taken && !dropped.after, `the drop was taken: ${JSON.stringify(dropped)}`);
  await waitUpload(page, 'dropped.txt', 'done');
  await waitUpload(page, 'dropped2.txt', 'done');
  await waitListed(page, 'dropped.txt');
  await waitListed(page, 'dropped2.txt');
  got = await serverBytes(api, 'd/dropped.txt');
  check(got.body.toString() === 'dropped bytes\n', `dropped.txt on the server: ${got.body}`);
  got = await serverBytes(api, 'd/dropped2.txt');
  check(got.body.toString() === 'second drop\n', `dropped2.txt on the server: ${got.body}`);

  // A large upload shows its progress while it runs, and finishes full.
  await page.evaluate(() => {
    window.__uploadSeen = [];
    new MutationObserver(() => {
      for (const r of document.querySelectorAll('#files-uploads .upload-row')) {
        if (r.dataset.name !== 'big.bin') continue;
        const bar = r.querySelector('progress');
        window.__uploadSeen.push(`${r.dataset.state}:${bar && !bar.hidden && bar.getClientRects().length > 0}`);
      }
    }).observe(document.getElementById('files-uploads'), { subtree: true, childList: true, attributes: true });
  });
  const big = crypto.randomBytes(8 * 1024 * 1024);
  await chooseFiles(page, [{ name: 'big.bin', mimeType: 'application/octet-stream', buffer: big }]);
  const [, value, max] = await waitUpload(page, 'big.bin', 'done');
  check(value === big.length && max === big.length, `progress at the end: ${value} of ${max}`);
  const seen = await page.evaluate(() => window.__uploadSeen);
  check(seen.includes('uploading:true'), `a visible progress bar while uploading: ${seen.slice(0, 6)}`);
  await waitListed(page, 'big.bin');
  check(/^8\.0 M/.test(await (await row(page, 'big.bin')).locator('.file-meta').textContent()), 'big.bin is 8.0 M');
  got = await serverBytes(api, 'd/big.bin');
  check(got.body.length === big.length && sha(got.body) === sha(big), 'big.bin on the server, byte for byte');

  // Cancelling: with the upload throttled (Chromium's own network
  // emulation, 64 KiB/s: 8 MiB cannot finish in this test's time), a
  // waiting file and then the running one are cancelled; the next one
  // goes, and nothing of the cancelled ones is left on the server.
  const cdp = await page.context().newCDPSession(page);
  await cdp.send('Network.enable');
  await cdp.send('Network.emulateNetworkConditions', {
    offline: false,
    latency: 0,
    downloadThroughput: -1,
    uploadThroughput: 64 * 1024,
  });
  await chooseFiles(page, [
    { name: 'slow.bin', mimeType: 'application/octet-stream', buffer: big },
    { name: 'waiting.txt', mimeType: 'text/plain', buffer: Buffer.from('never\n') },
    { name: 'after.txt', mimeType: 'text/plain', buffer: Buffer.from('after\n') },
  ]);
  await waitUpload(page, 'slow.bin', 'uploading');
  check((await upload(page, 'waiting.txt'))[0] === 'waiting', 'the second file waits its turn');
  await page.click('#files-uploads .upload-row[data-name="waiting.txt"] .upload-cancel');
  await waitFor(async () => (await upload(page, 'waiting.txt')) === null, 'the waiting file cancelled');
  await page.click('#files-uploads .upload-row[data-name="slow.bin"] .upload-cancel');
  const cancelled = await waitUpload(page, 'slow.bin', 'failed');
  check(/cancelled/.test(cancelled[3]), `the row says cancelled: ${cancelled[3]}`);
  await cdp.send('Network.emulateNetworkConditions', {
    offline: false,
    latency: 0,
    downloadThroughput: -1,
    uploadThroughput: -1,
  });
  await waitUpload(page, 'after.txt', 'done');
  await waitListed(page, 'after.txt');
  check(!(await listed(page)).some(([n]) => n === 'slow.bin' || n === 'waiting.txt'), 'no cancelled file listed');
  for (const n of ['slow.bin', 'waiting.txt']) {
    const r = await serverBytes(api, `d/${n}`);
    check(r.status === 404, `${n} not on the server: ${r.status}`);
  }
  // A finished row is dismissed by its ×.
  await page.click('#files-uploads .upload-row[data-name="slow.bin"] .upload-cancel');
  await waitFor(async () => (await upload(page, 'slow.bin')) === null, 'the cancelled row dismissed');

  // Download: the bytes come back.
  const [dl] = await Promise.all([
    page.waitForEvent('download'),
    (await row(page, 'up2.bin')).locator('a.file-name').click(),
  ]);
  check(dl.suggestedFilename() === 'up2.bin', `download name: ${dl.suggestedFilename()}`);
  const dlBytes = fs.readFileSync(await dl.path());
  check(dlBytes.equals(bin2), `downloaded bytes: ${dlBytes.length}`);

  // The same name again: replaced only after a confirmation.
  const text1b = Buffer.from('second version\n');
  await chooseFiles(page, [{ name: 'up1.txt', mimeType: 'text/plain', buffer: text1b }]);
  await page.locator('[role=alertdialog]').waitFor();
  check(/Replace "up1\.txt"/.test(await page.locator('.dialog-title').textContent()), 'asks before replacing');
  await page.click('[role=alertdialog] [data-action=confirm]');
  const replaced = await waitUpload(page, 'up1.txt', 'done');
  check(/replaced/.test(replaced[3]), `the row says replaced: ${replaced[3]}`);
  got = await serverBytes(api, 'd/up1.txt');
  check(got.body.equals(text1b), `up1.txt replaced on the server: ${got.body}`);

  // Delete asks first: Cancel keeps the file, Delete removes it.
  await (await row(page, 'dropped.txt')).locator('.file-delete').click();
  await page.locator('[role=alertdialog]').waitFor();
  check(/dropped\.txt/.test(await page.locator('.dialog-title').textContent()), 'the dialog names the file');
  check(
    (await page.evaluate(() => document.activeElement?.dataset.action)) === 'cancel',
    'Cancel has the focus in the dialog',
  );
  await page.click('[role=alertdialog] [data-action=cancel]');
  await waitFor(async () => !(await page.locator('[role=alertdialog]').count()), 'dialog closed');
  check((await listed(page)).some(([n]) => n === 'dropped.txt'), 'Cancel kept dropped.txt in the list');
  check((await serverBytes(api, 'd/dropped.txt')).status === 200, 'Cancel kept dropped.txt on the server');
  await (await row(page, 'dropped.txt')).locator('.file-delete').click();
  await page.click('[role=alertdialog] [data-action=confirm]');
  await waitListed(page, 'dropped.txt', false);
  await waitToast(page, /Deleted dropped\.txt/);
  check((await serverBytes(api, 'd/dropped.txt')).status === 404, 'dropped.txt deleted on the server');

  // A new folder (by the keyboard: Enter creates it).
  await page.click('#files-mkdir');
  check(await page.locator('#files-mkdir-name').evaluate((e) => e === document.activeElement), 'name field focused');
  await page.keyboard.type('sub');
  await page.keyboard.press('Enter');
  await waitListed(page, 'sub');
  check((await listed(page))[0][0] === 'sub', 'the new folder is listed first');
  const subList = await api.get('/api/files/d/sub/');
  check(subList.status === 200 && subList.json.entries.length === 0, `sub on the server: ${subList.text}`);

  // A bad name is refused in the form, and Escape closes it.
  await page.click('#files-mkdir');
  await page.keyboard.type('x/y');
  await page.keyboard.press('Enter');
  await waitFor(
    async () => /cannot hold "\/"/.test(await page.locator('#files-mkdir-form .form-error').textContent()),
    'the form says why',
  );
  await page.keyboard.press('Escape');
  await waitFor(() => page.locator('#files-mkdir-form').isHidden(), 'the form closed');
  check((await page.evaluate(() => document.activeElement?.id)) === 'files-mkdir', 'focus back on New folder');
  check((await listed(page)).every(([n]) => n !== 'x' && n !== 'y'), 'nothing made from a bad name');

  // What a command writes shows after Refresh.
  const cmd = await api.post('/api/run_command', { command: 'echo by-command > d/by-cmd.txt' });
  check(cmd.status === 200 && cmd.json.exit_code === 0, `a command writes d/by-cmd.txt: ${cmd.text}`);
  check(!(await listed(page)).some(([n]) => n === 'by-cmd.txt'), 'not listed before Refresh');
  await page.click('#files-refresh');
  await waitListed(page, 'by-cmd.txt');

  // Up: the workspace again; a non-empty folder is refused, with the
  // server's message, and stays.
  await page.click('#files-up');
  await waitFor(async () => (await page.locator('.files-crumb').allTextContents()).join('|') === 'Workspace', 'up');
  await waitListed(page, 'd');
  await (await row(page, 'd')).locator('.file-delete').click();
  await page.click('[role=alertdialog] [data-action=confirm]');
  await waitToast(page, /Not deleted: d/);
  check((await listed(page)).some(([n]) => n === 'd'), 'd is still listed');

  // A hostile name is text: no element, no script, the same name back.
  const hostile = '<img src=x onerror="window.__pwned=1"> ü文 #%?&.txt';
  await chooseFiles(page, [{ name: hostile, mimeType: 'text/plain', buffer: Buffer.from('hostile\n') }]);
  await waitUpload(page, hostile, 'done');
  await waitListed(page, hostile);
  const safe = await page.evaluate(() => ({
    imgs: document.querySelectorAll('img').length,
    pwned: window.__pwned ?? null,
  }));
  check(safe.imgs === 0 && safe.pwned === null, `the hostile name made markup: ${JSON.stringify(safe)}`);
  const shownName = await (await row(page, hostile)).locator('.file-name-text').textContent();
  check(shownName === hostile, `the name as text: ${JSON.stringify(shownName)}`);
  await waitToast(page, new RegExp(`Uploaded ${hostile.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}`));
  got = await serverBytes(api, hostile);
  check(got.status === 200 && got.body.toString() === 'hostile\n', `the hostile file on the server: ${got.status}`);
  const [dl2] = await Promise.all([
    page.waitForEvent('download'),
    (await row(page, hostile)).locator('a.file-name').click(),
  ]);
  check(fs.readFileSync(await dl2.path()).toString() === 'hostile\n', 'the hostile file downloads');
  // (The screenshot without the toasts over the list.)
  await page.$$eval('.toast-close', (bs) => bs.forEach((b) => b.click()));
  await page.mouse.move(600, 400);
  await shot(page, 'files');

  // The keyboard: F6 from the terminal reaches the pane, Enter opens a
  // folder, the toggle closes the pane and keeps the focus.
  await page.locator('.term-host:not([hidden]) .xterm').click();
  await page.keyboard.press('F6');
  check(await page.evaluate(() => !!document.activeElement?.closest('#files-pane')), 'F6 moves into the file pane');
  await (await row(page, 'd')).locator('.file-name').focus();
  await page.keyboard.press('Enter');
  await waitFor(
    async () => (await page.locator('.files-crumb').allTextContents()).join('|') === 'Workspace|d',
    'Enter opens d',
  );
  await page.keyboard.press('F6');
  check(
    (await page.evaluate(() => document.activeElement?.id)) === 'mode-button',
    'F6 from the pane goes to the top bar',
  );

  // A reload keeps the pane open on the same folder.
  await page.reload();
  await page.locator('#files-pane').waitFor();
  await logToasts(page);
  await waitListed(page, 'a.txt');
  check((await page.locator('.files-crumb').allTextContents()).join('|') === 'Workspace|d', 'still in d after a reload');
  check((await page.getAttribute('#files-toggle', 'aria-expanded')) === 'true', 'the toggle says open');

  // Read-only, chosen in another tab of the session (this one hears it
  // as an event): the controls are off and say why; a forced upload gets
  // the server's refusal and leaves nothing.
  const tab2 = await page.context().newPage();
  await tab2.goto(`${main.url}/`);
  await tab2.locator('#mode-button').waitFor();
  await tab2.click('#mode-button');
  await tab2.click('#mode-popover [data-value="read-only"]');
  await waitFor(async () => (await modeLabel(page)) === 'Sandboxed · Read-only', 'label Read-only in the first tab');
  await waitFor(() => page.locator('#files-upload').isDisabled(), 'Upload off under read-only');
  check(await page.locator('#files-mkdir').isDisabled(), 'New folder off under read-only');
  const dels = await page.$$eval('#files-list .file-delete', (bs) => bs.map((b) => b.disabled));
  check(dels.length > 0 && dels.every(Boolean), `delete buttons off under read-only: ${dels}`);
  check(await page.locator('#files-readonly').isVisible(), 'the read-only note shows');
  const refusedDrop = await page.evaluate(() => {
    const dt = new DataTransfer();
    dt.items.add(new File(['no'], 'refused-drop.txt'));
    document
      .querySelector('#files-list')
      .dispatchEvent(new DragEvent('drop', { dataTransfer: dt, bubbles: true, cancelable: true }));
    return document.querySelectorAll('#files-uploads .upload-row').length;
  });
  await waitToast(page, /Nothing uploaded/);
  check((await upload(page, 'refused-drop.txt')) === null, `no upload started by a drop: ${refusedDrop}`);
  await page.$eval('#files-input', (el) => {
    el.disabled = false;
  });
  await page.setInputFiles('#files-input', { name: 'forced.txt', mimeType: 'text/plain', buffer: Buffer.from('x') });
  await waitUpload(page, 'forced.txt', 'failed');
  await waitToast(page, READ_ONLY_MESSAGE);
  check(READ_ONLY_MESSAGE.test((await upload(page, 'forced.txt'))[3]), 'the row says why');
  const forced = await serverBytes(api, 'd/forced.txt');
  check(forced.status === 404, `nothing written under read-only: ${forced.status} ${forced.body}`);
  await shot(page, 'files-readonly');
  await tab2.click('#mode-popover [data-value="workspace-write"]');
  await waitFor(() => page.locator('#files-upload').isEnabled(), 'Upload on again');
  check(await page.locator('#files-readonly').isHidden(), 'the read-only note gone');
  await tab2.close();

  // Over the cap: 413 with the server's message, nothing written.
  const capped = await hostgate('cap', { ...UNLIMITED, HOSTGATE_MAX_UPLOAD_BYTES: '1M' });
  const cpage = await newPage();
  await login(cpage, capped.url, USER, users[USER].password);
  await logToasts(cpage);
  await cpage.click('#files-toggle');
  await cpage.locator('#files-list').waitFor();
  await chooseFiles(cpage, [{ name: 'huge.bin', mimeType: 'application/octet-stream', buffer: Buffer.alloc(2 << 20) }]);
  await waitUpload(cpage, 'huge.bin', 'failed');
  const capToast = await waitToast(cpage, /Not uploaded: huge\.bin/);
  check(/larger than 1048576 bytes/.test(capToast), `the 413 answer's message: ${capToast}`);
  const capApi = await apiSession(capped.url, USER, users[USER].password);
  check((await serverBytes(capApi, 'huge.bin')).status === 404, 'nothing written over the cap');

  // A phone: the pane covers the terminal and fits the width.
  const phone = await newPage({ viewport: { width: 390, height: 844 } });
  await login(phone, main.url, USER, users[USER].password);
  await phone.click('#files-toggle');
  await phone.locator('#files-list .file-row').first().waitFor();
  const pane = await phone.locator('#files-pane').boundingBox();
  check(pane.x >= 0 && pane.x + pane.width <= 390 && pane.width > 300, `pane on a phone: ${JSON.stringify(pane)}`);
  check(
    !(await phone.evaluate(() => document.documentElement.scrollWidth > window.innerWidth)),
    'no sideways scrolling at 390 px (files)',
  );
  const up = await phone.locator('#files-upload').boundingBox();
  check(up && up.x + up.width <= 390, `Upload inside the screen: ${JSON.stringify(up)}`);
  await shot(phone, 'mobile-files');
  await phone.click('#files-close');
  await waitFor(() => phone.locator('.term-host:not([hidden])').isVisible(), 'the terminal back');
  check((await phone.evaluate(() => document.activeElement?.id)) === 'files-toggle', 'focus back on Files');
  check((await phone.getAttribute('#files-toggle', 'aria-expanded')) === 'false', 'toggle closed');
}
