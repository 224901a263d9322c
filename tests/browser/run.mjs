// Runs hostgate's browser tests: starts two hostgates (one with the default
// direct-mode TTL, one with a short TTL and a low mode-change rate), one
// Chromium, and each test_*.mjs in turn. Every test saves a screenshot of
// its final state under tests/browser/screenshots/ (git ignores it); a
// failing test also saves NAME-failed.png and prints the daemons' logs.
//
//   node tests/browser/run.mjs [NAME...]    run all tests, or those named

import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

import { BUILD, Hostgate, SLOW, WEB_DIST, check, launchBrowser,
        screenshotPath } from './lib.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
// A whole test: several waits, each bounded by SLOW.
const TEST_TIMEOUT = 5 * SLOW;

const USERS = {
  alice: { password: 'alice-password-1', admin: true },
  bob: { password: 'bob-password-12', admin: false },
  carol: { password: 'carol-password-1', admin: true },
  dave: { password: 'dave-password-12', admin: true },
  erin: { password: 'erin-password-12', admin: true },
  // The file pane's own workspace (test_files).
  frank: { password: 'frank-password-1', admin: false },
  // The agent tokens of test_agents, in sessions of their own.
  gina: { password: 'gina-password-12', admin: false },
  // The shared modal dialogs (test_modal): an admin of her own.
  hana: { password: 'hana-password-12', admin: true },
};

// The direct-mode TTL of the short hostgate, in seconds.
const SHORT_TTL = 8;

async function main() {
  const only = process.argv.slice(2);
  const files = fs
    .readdirSync(HERE)
    .filter((f) => /^test_.*\.mjs$/.test(f))
    .sort()
    .filter((f) => only.length === 0 || only.some((o) => f.includes(o)));
  if (files.length === 0) {
    console.error('no tests match');
    process.exit(2);
  }
  for (const b of ['sandboxd', 'brokerd', 'frontd', 'hgctl']) {
    if (!fs.existsSync(path.join(BUILD, b))) {
      console.error(`browser tests: ${path.join(BUILD, b)} missing (run make)`);
      process.exit(2);
    }
  }
  if (!fs.existsSync(path.join(WEB_DIST, 'index.html'))) {
    console.error(`browser tests: the panel is not built (${WEB_DIST}; run make)`);
    process.exit(2);
  }

  const t0 = Date.now();
  const main = new Hostgate('main');
  const short = new Hostgate('short', {
    HOST_EXECUTION_DIRECT_TTL_SECONDS: String(SHORT_TTL),
    HOSTGATE_MODE_RATE_PER_MINUTE: '2',
  });
  // Hostgates a test starts for itself (ctx.hostgate), stopped at the end.
  const extra = [];
  let browser = null;
  let failures = 0;
  try {
    await Promise.all([main.start(), short.start()]);
    for (const [name, u] of Object.entries(USERS)) {
      main.addUser(name, u.password, u.admin);
      short.addUser(name, u.password, u.admin);
    }
    browser = await launchBrowser();
    console.log(`browser tests: ${browser.version()}, hostgates up in ${Date.now() - t0} ms`);

    for (const file of files) {
      const mod = await import(pathToFileURL(path.join(HERE, file)).href);
      const name = file.replace(/^test_|\.mjs$/g, '');
      const contexts = [];
      const pages = [];
      const ctx = {
        main,
        short,
        browser,
        users: USERS,
        shortTtl: SHORT_TTL,
        // One more hostgate, with the usual users.
        async hostgate(hgName, env, prepare) {
          const hg = new Hostgate(hgName, env, prepare);
          extra.push(hg);
          await hg.start();
          for (const [n, u] of Object.entries(USERS)) hg.addUser(n, u.password, u.admin);
          return hg;
        },
        // A new browser context (its own cookies, storage and session).
        async newContext(opts = {}) {
          const c = await browser.newContext({
            viewport: { width: 1280, height: 800 },
            colorScheme: 'light',
            reducedMotion: 'reduce',
            ...opts,
          });
          // Playwright's own waits (a click for its element, a
          // navigation) have the suite's bound too, not its 30 s.
          c.setDefaultTimeout(SLOW);
          // Record Content-Security-Policy violations and page errors.
          await c.addInitScript(() => {
            window.__csp = [];
            document.addEventListener('securitypolicyviolation', (e) =>
              window.__csp.push(`${e.violatedDirective} ${e.blockedURI} ${e.sample}`),
            );
          });
          c.on('page', (p) => {
            pages.push(p);
            p.__errors = [];
            p.on('pageerror', (e) => p.__errors.push(String(e)));
          });
          contexts.push(c);
          return c;
        },
        async newPage(opts = {}) {
          const c = await ctx.newContext(opts);
          return c.newPage();
        },
        async shot(page, shotName) {
          await page.screenshot({ path: screenshotPath(shotName) });
        },
      };
      const started = Date.now();
      let error = null;
      try {
        await Promise.race([
          mod.default(ctx),
          new Promise((_, reject) =>
            setTimeout(() => reject(new Error(`timed out after ${TEST_TIMEOUT / 1000} s`)), TEST_TIMEOUT),
          ),
        ]);
        // No page may have broken the CSP or thrown.
        for (const p of pages) {
          if (p.isClosed()) continue;
          const csp = await p.evaluate(() => window.__csp ?? []).catch(() => []);
          check(csp.length === 0, `Content-Security-Policy violations: ${csp.join('; ')}`);
          check(p.__errors.length === 0, `page errors: ${p.__errors.join('; ')}`);
        }
      } catch (e) {
        error = e;
      }
      const ms = Date.now() - started;
      if (error) {
        failures++;
        console.log(`FAIL ${name} (${ms} ms)\n  ${String(error.stack ?? error).split('\n').join('\n  ')}`);
        const open = pages.filter((p) => !p.isClosed());
        for (let i = 0; i < open.length; i++) {
          await open[i]
            .screenshot({ path: screenshotPath(`${name}-failed${open.length > 1 ? `-${i + 1}` : ''}`) })
            .catch(() => undefined);
        }
        main.failed = short.failed = true;
        for (const hg of extra) hg.failed = true;
      } else {
        console.log(`ok   ${name} (${ms} ms)`);
      }
      for (const c of contexts) await c.close().catch(() => undefined);
    }
  } catch (e) {
    failures++;
    console.log(`FAIL set-up: ${e.stack ?? e}`);
  } finally {
    await browser?.close().catch(() => undefined);
    if (failures) {
      console.log(main.dir ? main.logs() : '');
      console.log(short.dir ? short.logs() : '');
    }
    for (const hg of extra) {
      if (failures && hg.dir) console.log(hg.logs());
      await hg.stop();
    }
    await main.stop();
    await short.stop();
  }
  console.log(
    `browser tests: ${files.length - failures} of ${files.length} passed in ${((Date.now() - t0) / 1000).toFixed(1)} s`,
  );
  process.exit(failures ? 1 : 0);
}

await main();
