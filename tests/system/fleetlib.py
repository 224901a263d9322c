"""A hostgate fleet for the system tests: one real PostgreSQL (pglib's, on
a unix socket of its own, no TCP port), N hostgates (hglib.Hostgate, each
with its own state and run directories and port) sharing HOSTGATE_STORE
and one audit.key, and HAProxy (Debian's) in front with the routing of
etc/haproxy.cfg.in, listening on a socket bound here (port 0) before the
hosts start (each has HOSTGATE_PUBLIC_URL, HAProxy's URL) and handed over
as `bind fd@N`. Ready once HAProxy's stats socket says every server is UP.
Standard library only."""

import contextlib
import csv
import http.client
import io
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile

import hglib

import pglib

HAPROXY = shutil.which("haproxy", path="/usr/sbin:/usr/bin:/sbin:/bin")
TEMPLATE = os.path.join(hglib.REPO, "etc", "haproxy.cfg.in")
HOST_HEADER = "X-Hostgate-Host"     # set by HAProxy: the server that answered


def missing():
    """What a fleet needs and this machine lacks (a skip reason), or
    None."""
    if HAPROXY is None:
        return "haproxy is not installed (make check installs it: " \
            "scripts/deps.sh --install fleet)"
    return pglib.available()


# -- HAProxy ---------------------------------------------------------------

def render(bind, stats, servers, check_inter="1s", global_lines=()):
    """etc/haproxy.cfg.in with its @...@ lines filled in: servers is
    [(host id, "addr:port")]."""
    with open(TEMPLATE) as f:
        text = f.read()
    routes = []
    homes = []
    lines = []
    for hid, addr in servers:
        routes.append("\tacl to_%s path_beg /api/terminals/%s." % (hid, hid))
        routes.append("\tacl to_%s req.hdr(Mcp-Session-Id) -m beg %s."
                      % (hid, hid))
        routes.append("\tuse-server %s if to_%s" % (hid, hid))
        # A token names its user's home host: after the spawn routes.
        homes.append("\tacl home_%s req.hdr(Authorization) -i -m beg "
                     "\"Bearer hgt_%s.\"" % (hid, hid))
        homes.append("\tuse-server %s if home_%s" % (hid, hid))
        lines.append("\tserver %s %s cookie %s" % (hid, addr, hid))
    routes += homes
    for k, v in (("@BIND@", bind), ("@STATS_SOCKET@", stats),
                 ("@CHECK_INTER@", check_inter)):
        text = text.replace(k, v)
    text = text.replace("@ROUTES@", "\n".join(routes))
    text = text.replace("@SERVERS@", "\n".join(lines))
    text = text.replace("@GLOBAL@", "\n".join("\t" + g for g in global_lines))
    return text


class Balancer:
    """HAProxy in the foreground (-db), on a socket bound here: speaks HTTP
    to clients as hglib.Hostgate does, with host= to force a server by its
    HGHOST cookie."""

    scheme = "http"

    def __init__(self, directory, servers, check_inter="200ms"):
        self.dir = directory
        self.servers = list(servers)
        self.check_inter = check_inter
        self.stats = os.path.join(directory, "haproxy.stats")
        self.cfg = os.path.join(directory, "haproxy.cfg")
        self.log = os.path.join(directory, "haproxy.log")
        self.proc = None
        self.port = None
        self.sock = None

    @property
    def url(self):
        """The address clients use: the hosts' HOSTGATE_PUBLIC_URL."""
        return "http://127.0.0.1:%d" % self.port

    def bind(self):
        """Bind HAProxy's socket (port 0) now, so that self.port is known
        before the hosts start; start() hands it over."""
        if self.sock is None:
            self.sock = socket.socket()
            self.sock.bind(("127.0.0.1", 0))
            self.sock.listen(1024)
            self.port = self.sock.getsockname()[1]
        return self

    def start(self, timeout=hglib.SLOW):
        self.bind()
        sock, self.sock = self.sock, None
        try:
            with open(self.cfg, "w") as f:
                f.write(render("fd@%d" % sock.fileno(), self.stats,
                               self.servers, self.check_inter))
            r = subprocess.run([HAPROXY, "-c", "-q", "-f", self.cfg],
                               capture_output=True, text=True,
                               timeout=hglib.SLOW,
                               pass_fds=(sock.fileno(),))
            assert r.returncode == 0, "haproxy -c: %s%s" % (r.stdout,
                                                            r.stderr)
            with open(self.log, "ab") as log:
                self.proc = subprocess.Popen(
                    [HAPROXY, "-db", "-f", self.cfg],
                    pass_fds=(sock.fileno(),), stdin=subprocess.DEVNULL,
                    stdout=log, stderr=log, cwd=self.dir)
        finally:
            sock.close()
        self.wait_up(timeout=timeout)
        return self

    def stop(self):
        if self.sock is not None:
            self.sock.close()
            self.sock = None
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(hglib.SLOW)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def command(self, line):
        """One command on the stats socket; its answer."""
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(hglib.SLOW)
        try:
            s.connect(self.stats)
            s.sendall(line.encode() + b"\n")
            out = b""
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                out += chunk
            return out.decode()
        finally:
            s.close()

    def states(self):
        """{server name: status} of the backend, as HAProxy sees them
        ("UP", "DOWN", "UP 1/2", ...)."""
        text = self.command("show stat")
        rows = csv.reader(io.StringIO(text.lstrip("# ")))
        head = next(rows)
        out = {}
        for row in rows:
            if not row:
                continue
            d = dict(zip(head, row))
            if d.get("pxname") == "hosts" and d.get("svname") not in (
                    "BACKEND", "FRONTEND"):
                out[d["svname"]] = d.get("status")
        return out

    def wait_up(self, names=None, timeout=hglib.SLOW):
        """Wait until the servers (all by default) are UP."""
        want = set(names or [h for h, _ in self.servers])

        def up():
            if self.proc.poll() is not None:
                raise AssertionError("haproxy exited %d: %s" % (
                    self.proc.returncode, self.log_text()[-3000:]))
            st = self.states()
            return all(st.get(n) == "UP" for n in want)
        hglib.wait_for(up, timeout, what="haproxy: %s UP" % sorted(want))

    def wait_state(self, name, status, timeout=hglib.SLOW):
        hglib.wait_for(lambda: self.states().get(name) == status, timeout,
                       what="haproxy: %s %s" % (name, status))

    def log_text(self):
        try:
            with open(self.log, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except FileNotFoundError:
            return ""

    # -- HTTP, as hglib.Hostgate ---------------------------------------

    def connection(self, timeout=hglib.SLOW, source=None):
        return http.client.HTTPConnection(
            "127.0.0.1", self.port, timeout=timeout,
            source_address=(source, 0) if source else None)

    def request(self, method, path, body=None, headers=None, cookie=None,
                bearer=None, host=None, timeout=hglib.SLOW, source=None):
        """One request on a fresh connection; host forces that server
        (cookie HGHOST)."""
        h = {}
        if body is not None and not isinstance(body, (bytes, str)):
            body = json.dumps(body)
        if isinstance(body, str):
            body = body.encode()
        if body is not None:
            h["Content-Type"] = "application/json"
        cookies = []
        if cookie:
            cookies.append("hg_session=" + cookie)
        if host:
            cookies.append("HGHOST=" + host)
        if cookies:
            h["Cookie"] = "; ".join(cookies)
        if bearer:
            h["Authorization"] = "Bearer " + bearer
        h.update(headers or {})
        conn = self.connection(timeout=timeout, source=source)
        try:
            conn.request(method, path, body=body, headers=h)
            r = conn.getresponse()
            data = r.read()
            return hglib.Response(r.status, r.getheaders(), data)
        finally:
            conn.close()

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def post(self, path, body=None, **kw):
        return self.request("POST", path, body=body, **kw)

    def login(self, user, password, host=None):
        """Log in through the balancer (on host when given); a Session
        that sticks to the user's home host, as a browser does with the
        HGHOST cookie the answer sets (frontd names the home, HAProxy
        keeps it); its served is the host that answered."""
        if host is not None:
            # A login forced to a host HAProxy has marked DOWN would be
            # answered by another.
            self.wait_up([host])
        r = self.post("/api/login", {"username": user, "password": password},
                      host=host)
        assert r.status == 200, "login %s through haproxy: %r" % (user, r)
        doc = r.json()
        c = r.cookie()
        assert c and c[0], "no hg_session cookie in %r" % r.headers
        sticky = r.cookie("HGHOST")
        served = served_by(r)
        assert host is None or served == host, (host, served)
        assert sticky and sticky[0], "no HGHOST cookie in %r" % r.headers
        s = Session(self, doc["user"], doc["role"], c[0], doc["csrf_token"],
                    host=sticky[0])
        s.served = served
        return s


def served_by(r):
    """The host that answered, as HAProxy says."""
    return r.header(HOST_HEADER)


class Session(hglib.Session):
    """A login session through the balancer, stuck to one host (None: let
    HAProxy choose)."""

    def __init__(self, balancer, user, role, cookie, csrf, host=None):
        super().__init__(balancer, user, role, cookie, csrf)
        self.host = host
        self.served = host

    def on(self, host):
        """The same session sent to another host."""
        return Session(self.hg, self.user, self.role, self.cookie, self.csrf,
                       host=host)

    def request(self, method, path, body=None, csrf=True, **kw):
        kw.setdefault("host", self.host)
        return super().request(method, path, body=body, csrf=csrf, **kw)


# -- the fleet -------------------------------------------------------------


class Fleet:
    """N hostgates on one PostgreSQL behind HAProxy. fleet.hosts[i] is a
    hglib.Hostgate (id fleet.ids[i]); fleet.lb the Balancer; fleet.pg the
    PostgreSQL (pglib.Postgres: stop(), start()), fleet.url the store's
    URI."""

    def __init__(self, mode, n=3, env=None, name="fleet", check_inter="200ms",
                 host_lost=3, pg=None):
        self.mode = mode
        self.name = name
        self.dir = tempfile.mkdtemp(prefix="hg-%s-%s-lb-" % (name, mode))
        os.chmod(self.dir, 0o755)
        self.ids = ["h%d" % (i + 1) for i in range(n)]
        self.env = dict(hglib.LIFTED_ENV)
        self.env.update({"HOSTGATE_TRUSTED_PROXIES": "127.0.0.1/32",
                         "HOSTGATE_HOST_LOST_SECONDS": str(host_lost),
                         "HOSTGATE_STORE_TIMEOUT_SECONDS": "2"})
        self.env.update({k: str(v) for k, v in (env or {}).items()
                         if v is not None})
        self.unset = [k for k, v in (env or {}).items() if v is None]
        self.check_inter = check_inter
        self.pg = pg               # a pglib.Postgres to share, or our own
        self.own_pg = pg is None
        self.url = None
        self.hosts = []
        self.lb = None
        self.audit_key = secrets.token_bytes(32)
        self.failed = False

    # -- start and stop ------------------------------------------------

    def start(self, users=True):
        try:
            if self.pg is None:
                self.pg = pglib.Postgres()
            self.url = self.pg.database()
            # HAProxy's port first: every host names it as its public URL.
            self.lb = Balancer(self.dir, [], self.check_inter).bind()
            for hid in self.ids:
                self.hosts.append(self._host(hid))
            r = self.hosts[0].hgctl("store", "migrate")
            assert r.returncode == 0, "hgctl store migrate: %d %s%s" % (
                r.returncode, r.stdout, r.stderr)
            for hg in self.hosts:
                hg.start_all()
            if users:
                self.hosts[0].add_user(*hglib.ADMIN, admin=True)
                self.hosts[0].add_user(*hglib.USER)
            self.lb.servers = [(h, "127.0.0.1:%d" % hg.port)
                               for h, hg in zip(self.ids, self.hosts)]
            self.lb.start()
        except BaseException:
            self.failed = True
            print(self.logs())
            self.cleanup(check=False)
            raise
        return self

    def _host(self, hid):
        """A hostgate of the fleet, not started: the store, its id and the
        fleet's audit key in its configuration and state."""
        env = dict(self.env, HOSTGATE_STORE=self.url,
                   HOSTGATE_HOST_ID=hid)
        if "HOSTGATE_PUBLIC_URL" not in self.unset:
            env.setdefault("HOSTGATE_PUBLIC_URL", self.lb.url)
        hg = hglib.Hostgate(self.mode, env=env,
                            name="%s-%s" % (self.name, hid))
        for k in self.unset:
            hg.env.pop(k, None)
        # hgctl reads its configuration from the env file only.
        with open(hg.envfile, "w") as f:
            f.write("HOSTGATE_STORE=%s\nHOSTGATE_HOST_ID=%s\n"
                    % (self.url, hid))
        hg.give_audit_key(self.audit_key)
        return hg

    def psql(self, sql):
        """sql in the store's database, as its superuser: the rows."""
        return self.pg.psql(self.url, sql)

    def host(self, hid):
        return self.hosts[self.ids.index(hid)]

    def kill9(self, hid):
        """kill -9 every daemon of host hid, each by its pid, at once."""
        hg = self.host(hid)
        pids = [p.pid for p in hg.procs.values() if p.poll() is None]
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for p in hg.procs.values():
            p.wait(hglib.SLOW)
        # frontd cannot remove it after its privilege drop; a dead host's
        # address file must not pass for a live one.
        with contextlib.suppress(FileNotFoundError):
            os.unlink(hg.listen_path())
        return pids

    def cleanup(self, check=True):
        """Stop HAProxy, the hosts and PostgreSQL; the directories are
        kept when something failed. Raises on a host that misbehaved on
        the way out (when check)."""
        errors = []
        if self.lb is not None:
            self.lb.stop()
        for hg in self.hosts:
            if self.failed:
                hg.failed = True
            try:
                hg.cleanup()
            except AssertionError as e:
                errors.append(str(e))
        if self.pg is not None and self.own_pg:
            self.pg.close()
            self.pg = None
        if self.failed or errors:
            print("\nfleet directory kept: %s" % self.dir)
        else:
            shutil.rmtree(self.dir, ignore_errors=True)
        if errors and check:
            raise AssertionError("\n".join(errors))

    def logs(self):
        out = []
        for hid, hg in zip(self.ids, self.hosts):
            out.append("######## host %s\n%s" % (hid, hg.logs()))
        if self.lb is not None:
            out.append("######## haproxy\n%s" % self.lb.log_text()[-5000:])
        return "\n".join(out)


@contextlib.contextmanager
def running(mode, n=3, env=None, name="fleet", **kw):
    """A started fleet, stopped afterwards (its logs printed when the
    body raised)."""
    f = Fleet(mode, n=n, env=env, name=name, **kw)
    f.start()
    try:
        yield f
    except BaseException:
        f.failed = True
        print(f.logs())
        raise
    finally:
        f.cleanup(check=not f.failed)
