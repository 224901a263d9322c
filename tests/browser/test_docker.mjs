// The docker runtime (with the system tests' fake docker CLI): the state
// button says "Docker container", the Execution Environment column names
// the container and offers no switch, and the server refuses direct (409).

import fs from 'node:fs';
import path from 'node:path';

import { REPO, check, login, modeLabel, waitFor } from './lib.mjs';

// The fake docker first on the daemons' PATH, its log and state writable.
function fakeDocker(hg) {
  const dir = path.join(hg.dir, 'fakebin');
  fs.mkdirSync(dir, { mode: 0o777 });
  fs.chmodSync(dir, 0o777);
  const bin = path.join(dir, 'docker');
  fs.copyFileSync(path.join(REPO, 'tests', 'system', 'fake-docker'), bin);
  fs.chmodSync(bin, 0o755);
  for (const [f, text] of [
    ['docker.log', ''],
    ['docker.state', JSON.stringify({ engine: 'up', containers: {} })],
  ]) {
    fs.writeFileSync(path.join(dir, f), text);
    fs.chmodSync(path.join(dir, f), 0o666);
  }
  hg.env.PATH = `${dir}:${hg.env.PATH}`;
}

export default async function ({ hostgate, users, newPage, shot }) {
  const hg = await hostgate('docker', { HOSTGATE_RUNTIME: 'docker', HOSTGATE_DOCKER_IMAGE: 'debian:12-slim' }, fakeDocker);
  const page = await newPage();
  await login(page, hg.url, 'alice', users.alice.password);
  await waitFor(async () => (await modeLabel(page)) === 'Docker container · Workspace write', 'the docker label');

  await page.click('#mode-button');
  await page.locator('#mode-popover').waitFor();
  const col = page.locator('#mode-popover [data-col=execution]');
  check(/Docker container/.test(await col.textContent()), 'the column names the container');
  check((await col.locator('[role=radio], button').count()) === 0, 'no switch under docker');

  const r = await page.evaluate(async () => {
    const res = await fetch('/api/execution-mode', {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'X-CSRF-Token': localStorage.getItem('hostgate.csrf') },
      body: JSON.stringify({ mode: 'direct' }),
    });
    return { status: res.status, body: await res.json() };
  });
  check(r.status === 409, `direct under docker: ${JSON.stringify(r)}`);
  await shot(page, 'docker-popover');
}
