// The top bar shows the user's memory, processes and disk against their
// limits (HOSTGATE_USER_*), as /api/status gives them: usage when
// sandboxd measures it, the limits alone (and why) when it does not.

import { check, login, waitText } from './lib.mjs';

// A size in the panel's short form, to match its text ("4.0 G", "12 M").
function short(n) {
  const units = ['B', 'K', 'M', 'G', 'T'];
  let v = n;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${i === 0 || v >= 10 ? Math.round(v) : v.toFixed(1)} ${units[i]}`;
}

export default async function ({ main, users, newPage, shot }) {
  const page = await newPage();
  await login(page, main.url, 'bob', users.bob.password);
  const st = await page.evaluate(async () => (await fetch('/api/status')).json());
  check(st.limits && typeof st.limits.pids_max === 'number', `limits: ${JSON.stringify(st.limits)}`);
  check('usage' in st, 'status has usage');

  const usage = page.locator('#usage');
  await usage.waitFor();
  check(await usage.isVisible(), 'usage shown in the top bar');
  // What the line must say of memory and processes: the limit, or "not
  // enforced" where sandboxd says it cannot hold one (containment).
  const c = st.containment ?? {};
  const said = (key, label, max, fmt) => {
    if ('uid' in c && typeof c[key] !== 'string') return `${label} not enforced`;
    return max === null ? `${label} .*no limit` : `${label} .*${fmt(max).replace('.', '\\.')}`;
  };
  const memMax = st.usage?.memory.max ?? st.limits.memory_max;
  const pidsMax = st.usage?.pids.max ?? st.limits.pids_max;
  await waitText(usage, new RegExp(`${said('memory', 'mem', memMax, short)}.*${said('pids', 'pids', pidsMax, String)}`));
  const title = await usage.getAttribute('title');
  check(st.usage ? /usage against your limits/.test(title) : /usage unknown/.test(title), `title: ${title}`);
  // One line, small: it does not wrap the top bar's text.
  const box = await usage.boundingBox();
  check(box && box.height < 24, `usage is one line: ${JSON.stringify(box)}`);
  await shot(page, 'usage');
}
