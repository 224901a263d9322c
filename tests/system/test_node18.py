"""The web panel builds with Debian 12's own Node.js 18, and scripts/deps.sh
offers Debian's nodejs and npm where there is no node.

This machine may carry a newer Node.js, so the build test fetches Debian's
nodejs and libnode108 (and the parts of their dependencies that are not
installed here) with apt-get download, keeps the .debs in
$HG_BUILD/node18/, extracts them with dpkg-deb and runs scripts/web.sh on a
copy of frontd/web with that node first on PATH and npm 9.2.0 (the release
Debian 12's npm packages). Debian's libnode loads acorn, cjs-module-lexer
and undici from /usr/share/nodejs, so the build runs under bwrap with the
extracted /usr/share/nodejs mounted there; nothing on the host changes.
"""

import glob
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile

import pytest

import hglib

CACHE = os.path.join(hglib.BUILD, "node18")
NPM_VERSION = "9.2.0"      # Debian 12's npm is 9.2.0~ds1
CHROMIUM = "/usr/bin/chromium"
_updated = []
_debs = []          # fetch_debs()'s answer, once found


def run(argv, **kw):
    """Run argv, its output captured as text."""
    kw.setdefault("timeout", 900)
    return subprocess.run(argv, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, **kw)


def tail(text, n=3):
    """The last n lines of text, on one line."""
    return " | ".join(text.strip().splitlines()[-n:])


def apt_update():
    """apt-get update once (as root), or skip when the mirror is away."""
    if _updated or not hglib.IS_ROOT:
        return False
    _updated.append(True)
    r = run(["apt-get", "update", "-qq"])
    if r.returncode != 0:
        pytest.skip("the Debian mirror cannot be reached (apt-get update: "
                    "%s)" % tail(r.stderr))
    return True


def apt_cache(*args):
    """apt-cache with its binary cache kept in CACHE/apt: this machine's
    apt configuration keeps none (Dir::Cache::pkgcache ""), so that each
    run would parse all of apt's lists again, seconds each. apt checks the
    cache against the lists and builds it again when they changed."""
    d = os.path.join(CACHE, "apt")
    os.makedirs(d, exist_ok=True)
    return run(["apt-cache", "-o", "Dir::Cache=" + d,
                "-o", "Dir::Cache::pkgcache=pkgcache.bin",
                "-o", "Dir::Cache::srcpkgcache=srcpkgcache.bin"] + list(args))


def debian_node_version():
    """The newest nodejs 18 that apt knows of (Debian 12's own)."""
    for _ in range(2):
        r = apt_cache("madison", "nodejs")
        for line in r.stdout.splitlines():
            ver = line.split("|")[1].strip() if line.count("|") >= 2 else ""
            if ver.startswith("18."):
                return ver
        if not apt_update():
            break
    pytest.fail("apt knows no nodejs 18 (Debian 12's); apt-cache madison: "
                + r.stdout + r.stderr)


def apt_record(spec):
    """The fields of one package version ("name=version" or the
    candidate of "name")."""
    r = apt_cache("show", "--no-all-versions", spec)
    assert r.returncode == 0 and r.stdout.strip(), (spec, r.stderr)
    fields, key = {}, None
    for line in r.stdout.split("\n\n")[0].splitlines():
        if line[:1] in (" ", "\t") and key:
            fields[key] += " " + line.strip()
        elif ":" in line:
            key, _, val = line.partition(":")
            fields[key] = val.strip()
    return fields


def installed(name):
    """Whether the Debian package name is installed here."""
    r = run(["dpkg-query", "-W", "-f=${Status}", name])
    return r.returncode == 0 and r.stdout.endswith("ok installed")


def node_packages():
    """[(name, version, sha256)]: nodejs 18, libnode108, the JavaScript packages
    libnode reads from /usr/share/nodejs (always: they are mounted as a
    whole), and each other dependency that is not installed here."""
    want = [("nodejs", debian_node_version())]
    seen = {"nodejs"}
    out = []
    while len(out) < len(want):
        rec = apt_record("%s=%s" % want[len(out)])
        out.append(want[len(out)] + (rec["SHA256"],))
        for group in filter(None, rec.get("Depends", "").split(",")):
            dep = group.split("|")[0].strip()
            m = re.match(r"([^\s:(]+)(?::\S+)?\s*(?:\(\s*=\s*([^)\s]+)\s*\))?",
                         dep)
            name, exact = m.group(1), m.group(2)
            if name in seen:
                continue
            seen.add(name)
            if not name.startswith(("libnode", "node-")) and installed(name):
                continue
            want.append((name, exact or apt_record(name)["Version"]))
    return out


def deb_path(name, version, sha256):
    """The cached .deb of name at version when whole (its SHA256 as apt's
    lists give it), else None; a broken one is removed."""
    debs = os.path.join(CACHE, "debs")
    prefix = "%s_%s_" % (name, version.replace(":", "%3a"))
    for f in os.listdir(debs):
        if f.startswith(prefix) and f.endswith(".deb"):
            path = os.path.join(debs, f)
            with open(path, "rb") as fp:
                if hashlib.sha256(fp.read()).hexdigest() == sha256:
                    return path
            os.unlink(path)
    return None


def download(pkgs):
    """apt-get download of [(name, version, sha256)] into the cache."""
    return run(["apt-get", "download", "-q", "-o", "APT::Sandbox::User=root"]
               + ["%s=%s" % p[:2] for p in pkgs],
               cwd=os.path.join(CACHE, "debs"))


def fetch_debs():
    """The .debs of Debian's Node.js 18, downloaded once into CACHE. apt's
    lists are read once a run (a dozen apt-cache runs): test_mcp_sdk.py's
    Node.js 18 and this file's share the answer."""
    if _debs:
        return list(_debs)
    os.makedirs(os.path.join(CACHE, "debs"), exist_ok=True)
    pkgs = node_packages()
    need = [p for p in pkgs if deb_path(*p) is None]
    if need:
        r = download(need)
        if r.returncode != 0 and apt_update():
            # The lists were older than the mirror's pool.
            pkgs = node_packages()
            r = download([p for p in pkgs if deb_path(*p) is None])
        if r.returncode != 0:
            pytest.skip("the Debian mirror cannot be reached (apt-get "
                        "download: %s)" % tail(r.stderr))
    paths = [deb_path(*p) for p in pkgs]
    assert None not in paths, "apt-get download left out some of %s" % pkgs
    _debs.extend(paths)
    return paths


def fetch_npm():
    """npm 9.2.0's own package (it bundles its dependencies), once."""
    tgz = os.path.join(CACHE, "npm-%s.tgz" % NPM_VERSION)
    if not os.path.exists(tgz):
        part = tempfile.mkdtemp(prefix="npm-", dir=CACHE)
        try:
            r = run(["npm", "pack", "--silent", "npm@" + NPM_VERSION,
                     "--pack-destination", part])
            got = os.path.join(part, os.path.basename(tgz))
            assert r.returncode == 0 and os.path.exists(got), r.stderr
            os.replace(got, tgz)
        finally:
            shutil.rmtree(part, ignore_errors=True)
    return tgz


class Node18:
    """Debian's Node.js 18 extracted into dir, run under bwrap."""

    def __init__(self, dir):
        self.root = os.path.join(dir, "root")
        for deb in fetch_debs():
            r = run(["dpkg-deb", "-x", deb, self.root])
            assert r.returncode == 0, (deb, r.stderr)
        npm = os.path.join(dir, "npm")
        os.makedirs(npm)
        r = run(["tar", "-xzf", fetch_npm(), "-C", npm])
        assert r.returncode == 0, r.stderr
        self.bin = os.path.join(dir, "bin")
        os.makedirs(self.bin)
        for tool in ("npm", "npx"):
            os.symlink(os.path.join(npm, "package", "bin", tool + "-cli.js"),
                       os.path.join(self.bin, tool))
        self.log = os.path.join(dir, "node-runs.log")
        self.recorder = os.path.join(dir, "record.cjs")
        with open(self.recorder, "w") as f:
            f.write("const fs = require('fs'), a = process.argv[1];\n"
                    "fs.appendFileSync(process.env.HG_NODE_LOG, "
                    "process.version + ' ' + (a ? fs.realpathSync(a) : '-')"
                    " + '\\n');\n")
        libs = sorted({os.path.dirname(p) for p in glob.glob(
            os.path.join(self.root, "usr", "lib", "**", "*.so*"),
            recursive=True)})
        self.env = dict(os.environ)
        self.env.update({
            "PATH": "%s:%s:%s" % (self.bin,
                                  os.path.join(self.root, "usr", "bin"),
                                  os.environ.get("PATH", "/usr/bin:/bin")),
            "LD_LIBRARY_PATH": ":".join(libs),
            "NODE_OPTIONS": "--require " + self.recorder,
            "HG_NODE_LOG": self.log,
            "npm_config_cache": os.path.join(CACHE, "npm-cache"),
            "npm_config_update_notifier": "false",
            # Every package must declare that it runs on Node.js 18.
            "npm_config_engine_strict": "true",
        })
        # A tmpfs on /usr/share with every entry of the host's bound back,
        # and the extracted /usr/share/nodejs over whatever is there.
        self.wrap = ["bwrap", "--dev-bind", "/", "/", "--tmpfs", "/usr/share"]
        for e in sorted(os.listdir("/usr/share")):
            p = os.path.join("/usr/share", e)
            self.wrap += ["--dev-bind", p, p]
        self.wrap += ["--ro-bind",
                      os.path.join(self.root, "usr", "share", "nodejs"),
                      "/usr/share/nodejs", "--"]

    def run(self, argv, **kw):
        return run(self.wrap + list(argv), env=self.env, **kw)

    def runs(self):
        """The node processes started so far: [(version, script)]."""
        if not os.path.exists(self.log):
            return []
        with open(self.log) as f:
            return [tuple(line.split(" ", 1)) for line in f.read().split("\n")
                    if line]


def copy_sources(dst):
    """scripts/web.sh and frontd/web without node_modules and dist."""
    os.makedirs(os.path.join(dst, "scripts"))
    shutil.copy2(os.path.join(hglib.REPO, "scripts", "web.sh"),
                 os.path.join(dst, "scripts"))
    src = os.path.join(hglib.REPO, "frontd", "web")
    shutil.copytree(src, os.path.join(dst, "frontd", "web"), symlinks=True,
                    ignore=lambda d, names: [
                        n for n in names if os.path.samefile(d, src)
                        and n in ("node_modules", "dist", "build.log")])
    return os.path.join(dst, "frontd", "web")


@pytest.fixture(scope="module")
def node18():
    d = tempfile.mkdtemp(prefix="hg-node18-")
    try:
        yield Node18(d), d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_panel_builds_with_debian_node18(node18):
    node, d = node18
    r = node.run(["node", "--version"])
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("v18."), r.stdout
    r = node.run(["npm", "--version"])
    assert r.stdout.strip() == NPM_VERSION, (r.stdout, r.stderr)

    web = copy_sources(os.path.join(d, "src"))
    open(node.log, "w").close()
    r = node.run(["sh", os.path.join(d, "src", "scripts", "web.sh")])
    assert r.returncode == 0, r.stdout + r.stderr

    # npm ci, tsc and vite all ran, each under Node.js 18.
    runs = node.runs()
    scripts = " ".join(s for _, s in runs)
    for part in ("npm-cli.js", "typescript/bin/tsc", "vite/bin/vite.js"):
        assert part in scripts, runs
    assert all(v.startswith("v18.") for v, _ in runs), runs

    # The panel as frontd serves it: index.html naming hashed assets that
    # exist, nothing inline (the Content-Security-Policy allows none).
    dist = os.path.join(web, "dist")
    assert os.path.exists(os.path.join(dist, ".built"))
    with open(os.path.join(dist, "index.html")) as f:
        html = f.read()
    js = re.findall(r'<script type="module" crossorigin '
                    r'src="/(assets/index-[0-9a-f]{8}\.js)"></script>', html)
    css = re.findall(r'<link rel="stylesheet" crossorigin '
                     r'href="/(assets/style-[0-9a-f]{8}\.css)">', html)
    assert len(js) == 1 and len(css) == 1, html
    for a in js + css + ["favicon.svg"]:
        assert os.path.getsize(os.path.join(dist, a)) > 0, a
    for a in os.listdir(os.path.join(dist, "assets")):
        # frontd caches assets/NAME-HASH.ext as immutable.
        assert re.fullmatch(r"[\w.]+-[0-9a-f]{8}\.\w+", a), a
    assert not re.search(r"<script>|<style|\sstyle=", html), html
    assert "/src/main.ts" not in html, html


def test_playwright_loads_under_node18(node18):
    """playwright-core (the browser tests' driver) on Node.js 18, driving
    Debian's chromium when it is installed (tests/browser/run.sh installs
    it, after the system tests)."""
    node, d = node18
    web = os.path.join(d, "src", "frontd", "web")
    if not os.path.isdir(os.path.join(web, "node_modules", "playwright-core")):
        pytest.fail("test_panel_builds_with_debian_node18 did not install "
                    "the packages")
    script = """
const { chromium } = await import('playwright-core');
const exe = process.argv[1];
let out = { version: process.version, launched: false };
if (exe) {
  const b = await chromium.launch({ executablePath: exe, headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu',
           '--disable-dev-shm-usage', '--no-first-run'] });
  const page = await b.newPage();
  await page.setContent('<p id="x">6*7</p>');
  out.answer = await page.evaluate(() => eval(document.getElementById('x').textContent));
  out.browser = b.version();
  out.launched = true;
  await b.close();
}
console.log(JSON.stringify(out));
"""
    exe = CHROMIUM if os.access(CHROMIUM, os.X_OK) else ""
    r = node.run(["node", "--input-type=module", "-e", script, exe], cwd=web)
    assert r.returncode == 0, r.stdout + r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["version"].startswith("v18."), out
    if exe:
        assert out["launched"] and out["answer"] == 42, out


def deps_run(tmp, with_node):
    """scripts/deps.sh --check build, not as root, with PATH holding the
    tools it uses and, with_node, the machine's node and npm."""
    bindir = os.path.join(tmp, "bin-%s" % ("node" if with_node else "none"))
    os.makedirs(bindir)
    tools = ["dpkg-query", "grep", "id"]
    if with_node:
        tools += ["node", "npm"]
    for t in tools:
        path = shutil.which(t)
        assert path, t
        os.symlink(path, os.path.join(bindir, t))
    argv = ["/bin/sh", os.path.join(hglib.REPO, "scripts", "deps.sh"),
            "--check", "build"]
    if hglib.IS_ROOT:
        uid, gid = hglib.account(hglib.TEST_USER)
        argv = [shutil.which("setpriv"), "--reuid=%d" % uid, "--regid=%d" % gid,
                "--clear-groups", "--"] + argv
    return run(argv, env={"PATH": bindir, "LC_ALL": "C"}, cwd="/")


def test_deps_offers_debian_nodejs_without_node():
    if not shutil.which("node") or not shutil.which("npm"):
        pytest.skip("no node and npm here to compare with")
    tmp = tempfile.mkdtemp(prefix="hg-deps-")
    try:
        os.chmod(tmp, 0o755)
        r = deps_run(tmp, with_node=False)
        lines = [l for l in r.stderr.splitlines() if "apt-get install" in l]
        assert r.returncode == 1 and len(lines) == 1, r.stderr
        assert lines[0].split()[-2:] == ["nodejs", "npm"], lines

        # A Node.js already there (another packaging, a newer one) stays.
        r = deps_run(tmp, with_node=True)
        assert "nodejs" not in r.stderr and " npm" not in r.stderr, r.stderr
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
