"""Test servers for the egress tests and the egress benchmark: a network
namespace of the test's own, joined to the host by a veth pair, with an HTTP
server (port 80), an HTTPS server (port 443, a test CA) and a UDP echo
(port 53) inside (egress_server.py); static files, a PEP 503 index with a
tiny wheel, a git repository over dumb HTTP and a 64 MiB file. Names reach
egressd through a HOSTGATE_EGRESS_HOSTS file; egress_env() is the hostgate
configuration that goes with it. Standard library only.

Addresses, N the namespace's number (claimed by creating hg-egress-N):

    host 10.213.N.1/30  <->  10.213.N.2/30  the "public" servers
                             (HOSTGATE_EGRESS_ALLOW_NETS=10.213.N.0/30)
    host 10.213.N.5/30  <->  10.213.N.6/30  the same servers, at an address
                             left inside the deny nets (private.test)
"""

import atexit
import base64
import contextlib
import hashlib
import io
import os
import select
import shutil
import subprocess
import tempfile
import time
import zipfile

import hglib


HERE = os.path.dirname(os.path.abspath(__file__))
SERVER = os.path.join(HERE, "egress_server.py")
PYTHON = "/usr/bin/python3"
BIG_BYTES = 64 * 1024 * 1024
WHEEL = "hgdemo-1.0-py3-none-any.whl"
DEMO_VALUE = "hgdemo-imported-ok"
SMALL_TEXT = "hello from files.test\n"

# The allowlist the tests run under; extra.test is on no list (an admin
# allows it during the test); blocked.pkg.test matches *.pkg.test and is
# on the denylist, which wins.
ALLOW = "pkg.test,*.pkg.test,files.test,loop.test,private.test,loop6.test"
DENY = "blocked.pkg.test"
PUBLIC_NAMES = ("pkg.test", "files.test", "other.pkg.test",
                "blocked.pkg.test", "extra.test")
TLS_NAMES = PUBLIC_NAMES + ("private.test", "loop.test", "loop6.test")


def _ip(*args, check=True):
    r = subprocess.run(["ip"] + list(args), capture_output=True, text=True)
    if check and r.returncode != 0:
        raise AssertionError("ip %s: exit %d: %s" % (" ".join(args),
                                                      r.returncode, r.stderr))
    return r


def _openssl(*args):
    r = subprocess.run(["openssl"] + list(args), capture_output=True,
                       text=True)
    if r.returncode != 0:
        raise AssertionError("openssl %s: %s" % (args[0], r.stderr))


def make_ca(directory, names):
    """A test CA and a leaf certificate for names (DNS SANs), signed by it:
    (ca.pem, leaf.pem, leaf.key) in directory."""
    ca, ca_key = os.path.join(directory, "ca.pem"), \
        os.path.join(directory, "ca.key")
    leaf, key = os.path.join(directory, "leaf.pem"), \
        os.path.join(directory, "leaf.key")
    csr, ext = os.path.join(directory, "leaf.csr"), \
        os.path.join(directory, "leaf.ext")
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
          "-nodes"]
    _openssl("req", "-x509", *ec, "-keyout", ca_key, "-out", ca, "-days",
             "2", "-subj", "/CN=hostgate egress test CA",
             "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    _openssl("req", "-new", *ec, "-keyout", key, "-out", csr,
             "-subj", "/CN=%s" % names[0])
    with open(ext, "w") as f:
        f.write("basicConstraints=CA:FALSE\n"
                "keyUsage=critical,digitalSignature\n"
                "extendedKeyUsage=serverAuth\n"
                "subjectAltName=%s\n" % ",".join("DNS:" + n for n in names))
    _openssl("x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key,
             "-CAcreateserial", "-out", leaf, "-days", "2", "-extfile", ext)
    for p in (ca, leaf):
        os.chmod(p, 0o644)
    return ca, leaf, key


def _record_hash(data):
    return "sha256=" + base64.urlsafe_b64encode(
        hashlib.sha256(data).digest()).rstrip(b"=").decode()


def make_wheel(path):
    """A pure-Python wheel of one module, hgdemo (VALUE = DEMO_VALUE):
    METADATA, WHEEL, RECORD as PEP 427 has them. Returns its SHA-256."""
    files = {
        "hgdemo/__init__.py": ('VALUE = "%s"\n' % DEMO_VALUE).encode(),
        "hgdemo-1.0.dist-info/METADATA":
            b"Metadata-Version: 2.1\nName: hgdemo\nVersion: 1.0\n"
            b"Summary: hostgate egress test package\n",
        "hgdemo-1.0.dist-info/WHEEL":
            b"Wheel-Version: 1.0\nGenerator: hostgate-tests\n"
            b"Root-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = "".join("%s,%s,%d\n" % (n, _record_hash(d), len(d))
                     for n, d in files.items())
    record += "hgdemo-1.0.dist-info/RECORD,,\n"
    files["hgdemo-1.0.dist-info/RECORD"] = record.encode()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for n, d in files.items():
            z.writestr(n, d)
    data = buf.getvalue()
    with open(path, "wb") as f:
        f.write(data)
    return hashlib.sha256(data).hexdigest()


def make_git_repo(root, name="repo.git"):
    """A bare repository with one commit (README holding its text),
    prepared for the dumb HTTP protocol (git update-server-info)."""
    work = tempfile.mkdtemp(prefix="hg-egress-git-")
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@test",
               GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@test",
               GIT_CONFIG_NOSYSTEM="1", HOME=work)
    try:
        src = os.path.join(work, "src")

        def git(*args, cwd=src):
            subprocess.run(["git"] + list(args), cwd=cwd, env=env,
                           check=True, capture_output=True)
        os.mkdir(src)
        git("init", "-q", "-b", "main")
        with open(os.path.join(src, "README"), "w") as f:
            f.write("cloned over dumb HTTP\n")
        git("add", "README")
        git("commit", "-q", "-m", "one")
        dst = os.path.join(root, name)
        git("clone", "-q", "--bare", src, dst, cwd=work)
        git("update-server-info", cwd=dst)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def fill_root(root):
    """The servers' files: small.txt, big.bin (64 MiB, sparse), the PEP 503
    index under simple/ with the wheel under packages/, repo.git."""
    with open(os.path.join(root, "small.txt"), "w") as f:
        f.write(SMALL_TEXT)
    with open(os.path.join(root, "big.bin"), "wb") as f:
        f.truncate(BIG_BYTES)
    os.makedirs(os.path.join(root, "packages"))
    os.makedirs(os.path.join(root, "simple", "hgdemo"))
    digest = make_wheel(os.path.join(root, "packages", WHEEL))
    with open(os.path.join(root, "simple", "index.html"), "w") as f:
        f.write('<!DOCTYPE html>\n<html><body>\n'
                '<a href="hgdemo/">hgdemo</a>\n</body></html>\n')
    with open(os.path.join(root, "simple", "hgdemo", "index.html"), "w") as f:
        f.write('<!DOCTYPE html>\n<html><body>\n'
                '<a href="../../packages/%s#sha256=%s">%s</a>\n'
                '</body></html>\n' % (WHEEL, digest, WHEEL))
    make_git_repo(root)
    for d, dirs, files in os.walk(root):
        os.chmod(d, 0o755)
        for n in files:
            os.chmod(os.path.join(d, n), 0o644)


# Networks not yet torn down: removed at exit even if pytest is
# interrupted between setup and teardown.
_LIVE = set()


@atexit.register
def _teardown_all():
    for n in list(_LIVE):
        n.close()


class EgressNet:
    """The namespace, its veth pair, the servers in it and the files that
    describe them (hosts file, CA). close() undoes all of it."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="hg-egress-net-")
        os.chmod(self.dir, 0o755)
        self.ns = None
        self.veth = None
        self.server = None
        self.n = None
        _LIVE.add(self)
        try:
            self._setup()
        except BaseException:
            self.close()
            raise

    # -- setup -------------------------------------------------------------

    def _claim(self):
        """A free N: `ip netns add hg-egress-N` succeeds for one caller
        only; an N whose subnet the host already routes is skipped."""
        start = os.getpid() % 200
        routes = _ip("-4", "route", "show").stdout
        for i in range(200):
            n = 20 + (start + i) % 200
            if ("10.213.%d." % n) in routes:
                continue
            name = "hg-egress-%d" % n
            if _ip("netns", "add", name, check=False).returncode == 0:
                return n, name
        raise AssertionError("no free hg-egress-N network namespace")

    def _setup(self):
        self.n, self.ns = self._claim()
        n = self.n
        self.host_ip, self.ip = "10.213.%d.1" % n, "10.213.%d.2" % n
        self.host_ip2, self.private_ip = "10.213.%d.5" % n, "10.213.%d.6" % n
        self.subnet = "10.213.%d.0/30" % n
        self.veth, peer = "hge%d" % n, "hge%dp" % n
        _ip("link", "add", self.veth, "type", "veth", "peer", "name", peer)
        _ip("link", "set", peer, "netns", self.ns)
        _ip("addr", "add", self.host_ip + "/30", "dev", self.veth)
        _ip("addr", "add", self.host_ip2 + "/30", "dev", self.veth)
        _ip("link", "set", self.veth, "up")
        _ip("-n", self.ns, "addr", "add", self.ip + "/30", "dev", peer)
        _ip("-n", self.ns, "addr", "add", self.private_ip + "/30", "dev",
            peer)
        _ip("-n", self.ns, "link", "set", peer, "up")
        _ip("-n", self.ns, "link", "set", "lo", "up")

        self.root = os.path.join(self.dir, "www")
        os.mkdir(self.root)
        fill_root(self.root)
        self.ca, leaf, key = make_ca(self.dir, TLS_NAMES)
        with open(self.ca) as f:
            self.ca_pem = f.read()
        self.hosts = os.path.join(self.dir, "hosts")
        with open(self.hosts, "w") as f:
            f.write("# hostgate egress tests (namespace %s)\n"
                    "%s %s\n%s private.test\n127.0.0.1 loop.test\n"
                    "::1 loop6.test\n"
                    % (self.ns, self.ip, " ".join(PUBLIC_NAMES),
                       self.private_ip))
        os.chmod(self.hosts, 0o644)

        self.server_log = os.path.join(self.dir, "server.log")
        log = open(self.server_log, "ab")
        try:
            self.server = subprocess.Popen(
                ["ip", "netns", "exec", self.ns, PYTHON, SERVER,
                 "--root", self.root, "--cert", leaf, "--key", key],
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log)
        finally:
            log.close()
        line = self._readline(self.server.stdout, 20)
        if not line.startswith(b"egress_server listening"):
            raise AssertionError("egress_server did not start: %r\n%s"
                                 % (line, self.log_text()))

    def _readline(self, f, timeout):
        """One line from f (a pipe), or what came before EOF or timeout."""
        buf = b""
        deadline = time.monotonic() + timeout
        fd = f.fileno()
        while not buf.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0:
                break
            r, _, _ = select.select([fd], [], [], left)
            if not r:
                break
            chunk = os.read(fd, 1)
            if not chunk:
                break
            buf += chunk
        return buf

    # -- use ---------------------------------------------------------------

    def env(self, **more):
        """The hostgate configuration for these servers."""
        env = {
            "HOSTGATE_EGRESS_HOSTS": self.hosts,
            "HOSTGATE_EGRESS_ALLOW": ALLOW,
            "HOSTGATE_EGRESS_DENY": DENY,
            "HOSTGATE_EGRESS_ALLOW_NETS": self.subnet,
        }
        env.update(more)
        return env

    def log_text(self):
        try:
            with open(self.server_log, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except FileNotFoundError:
            return ""

    def requests(self):
        """The servers' access lines so far: (scheme, client, host, line)."""
        out = []
        for ln in self.log_text().splitlines():
            parts = ln.split(" ", 3)
            if len(parts) == 4 and parts[0] in ("http", "https") and \
                    parts[3].startswith('"'):
                out.append(tuple(parts))
        return out

    def curl_host(self, url, *args, timeout=hglib.SLOW):
        """curl from the host straight to the servers (names pinned to the
        namespace's address with --resolve): CompletedProcess."""
        resolve = []
        for name in TLS_NAMES:
            for port in (80, 443):
                resolve += ["--resolve", "%s:%d:%s" % (
                    name, port, self.private_ip if name == "private.test"
                    else self.ip)]
        return subprocess.run(["curl", "-sS", "--noproxy", "*", "--cacert",
                               self.ca, "--max-time", str(timeout)] +
                              resolve + list(args) + [url],
                              capture_output=True, timeout=timeout + 5)

    # -- teardown ----------------------------------------------------------

    def close(self):
        """Stop the server (its pid), delete the veth pair (synchronously:
        the host end goes with it) and the namespace, remove the files."""
        if self.server is not None:
            if self.server.poll() is None:
                self.server.terminate()
                try:
                    self.server.wait(hglib.SLOW)
                except subprocess.TimeoutExpired:
                    self.server.kill()
                    self.server.wait()
            self.server.stdout.close()
            self.server = None
        if self.veth is not None:
            _ip("link", "del", self.veth, check=False)
            self.veth = None
        if self.ns is not None:
            _ip("netns", "del", self.ns, check=False)
            self.ns = None
        shutil.rmtree(self.dir, ignore_errors=True)
        _LIVE.discard(self)


@contextlib.contextmanager
def egress_net():
    """An EgressNet for the length of a with block (a module fixture)."""
    net = EgressNet()
    try:
        yield net
    finally:
        net.close()
