"""The guest suite's client side: the installed hostgate as an operator and
its users reach it (apt, systemctl, hgctl, HTTP on 127.0.0.1:8080, the
journal). Debian's python3 and python3-websocket only; nothing of the
repository but this directory is in the VM."""

import glob
import http.client
import json
import os
import pwd
import re
import subprocess
import time

import websocket

DEBS = os.environ.get("HGVM_DEBS", "/mnt/hgvm/debs")
ENV_FILE = "/etc/hostgate/hostgate.env"
STATE = "/var/lib/hostgate"
UNITS = ("hostgate-sandboxd.service", "hostgate-brokerd.service",
         "hostgate-frontd.service", "hostgate-egressd.service")
DAEMON = {"sandboxd": "hostgate-sandboxd.service",
          "brokerd": "hostgate-brokerd.service",
          "frontd": "hostgate-frontd.service",
          "egressd": "hostgate-egressd.service"}
SANDBOXD_CG = "/sys/fs/cgroup/system.slice/hostgate-sandboxd.service"
PASSWORD = {"admin": "admin-pw-0123456789", "bob": "bob-pw-0123456789",
            "keeper": "keeper-pw-0123456789"}
# What the modules hand on to the next ones (one pytest process).
SHARED = {}


def sh(*argv, check=True, input=None, timeout=300, env=None):
    """Run argv; returns the CompletedProcess (text). check: exit 0."""
    r = subprocess.run(argv, capture_output=True, text=True, input=input,
                       timeout=timeout,
                       env=dict(os.environ, **(env or {})))
    if check and r.returncode != 0:
        raise AssertionError("%s: exit %d\n%s%s" % (
            " ".join(argv), r.returncode, r.stdout[-4000:],
            r.stderr[-4000:]))
    return r


def wait_for(pred, timeout, what, interval=0.2):
    """pred() until it returns something true; AssertionError after
    timeout seconds (a generous bound: this is software emulation)."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        try:
            last = pred()
            if last:
                return last
        except (OSError, http.client.HTTPException, ValueError) as e:
            last = e
        if time.monotonic() >= deadline:
            raise AssertionError("timed out after %ds waiting for %s "
                                 "(last: %r)" % (timeout, what, last))
        time.sleep(interval)


def deb(which):
    """The path of the new or the previous .deb, copied off the share."""
    src = glob.glob(os.path.join(DEBS, which, "hostgate_*.deb"))
    assert len(src) == 1, src
    dst = os.path.join("/root", os.path.basename(src[0]))
    if not os.path.exists(dst):
        sh("cp", src[0], dst)
    return dst


def apt(*args):
    """apt-get, offline: every dependency must be installed already."""
    return sh("apt-get", "-y", "-o", "Acquire::Retries=0", *args,
              env={"DEBIAN_FRONTEND": "noninteractive"}, timeout=600)


def unit_prop(unit, prop):
    return sh("systemctl", "show", "-P", prop, unit).stdout.strip()


def main_pid(unit):
    return int(unit_prop(unit, "MainPID"))


def journal(unit, since=None):
    args = ["journalctl", "--no-pager", "-o", "cat", "-u", unit]
    if since:
        args += ["--since", since]
    return sh(*args, check=False).stdout


# -- HTTP ---------------------------------------------------------------

class Response:
    def __init__(self, status, headers, body):
        self.status, self.headers, self.body = status, headers, body

    def json(self):
        return json.loads(self.body)

    def __repr__(self):
        return "<Response %d %r>" % (self.status, self.body[:600])


def request(method, path, body=None, cookie=None, headers=None, timeout=60):
    h = dict(headers or {})
    if body is not None:
        body = json.dumps(body).encode()
        h["Content-Type"] = "application/json"
    if cookie:
        h["Cookie"] = "hg_session=" + cookie
    conn = http.client.HTTPConnection("127.0.0.1", 8080, timeout=timeout)
    try:
        conn.request(method, path, body=body, headers=h)
        r = conn.getresponse()
        return Response(r.status, r.getheaders(), r.read())
    finally:
        conn.close()


def health(backend=True):
    """/healthz when the chain is linked and the backend works (or, not
    backend, is reported at all), else None."""
    r = request("GET", "/healthz", timeout=10)
    doc = r.json()
    linked = all((doc.get(k) or {}).get("ok") for k in ("brokerd",
                                                         "sandboxd"))
    reported = (doc.get("backend") or {}).get("name") is not None
    if linked and reported and (not backend or r.status == 200):
        return doc
    return None


def wait_healthy(timeout=180, backend=True):
    try:
        return wait_for(lambda: health(backend), timeout,
                        "/healthz with the chain linked")
    except AssertionError as e:
        raise AssertionError("%s\n%s" % (e, status_text()))


def status_text():
    return sh("systemctl", "status", "--no-pager", "-n", "30", *UNITS,
              check=False).stdout


class Session:
    """A logged-in user."""

    def __init__(self, user, cookie, csrf, role):
        self.user, self.cookie, self.csrf, self.role = user, cookie, csrf, \
            role

    def req(self, method, path, body=None, **kw):
        headers = {}
        if method in ("POST", "PUT", "DELETE"):
            headers["X-CSRF-Token"] = self.csrf
        return request(method, path, body, cookie=self.cookie,
                       headers=headers, **kw)

    def get(self, path, **kw):
        return self.req("GET", path, **kw)

    def post(self, path, body=None, **kw):
        return self.req("POST", path, body, **kw)

    def status(self):
        r = self.get("/api/status")
        assert r.status == 200, r
        return r.json()

    def run(self, command, timeout=60, ok=True, **more):
        """POST /api/run_command; returns its JSON (200 asserted)."""
        body = dict(command=command, timeout=timeout, **more)
        r = self.post("/api/run_command", body, timeout=timeout + 120)
        assert r.status == 200, r
        doc = r.json()
        if ok:
            assert doc["exit_code"] == 0, doc
        return doc

    def permission(self, value):
        r = self.post("/api/permission", {"permission": value})
        assert r.status == 200, r

    def mode(self, value):
        r = self.post("/api/execution-mode", {"mode": value})
        assert r.status == 200, r
        return r.json()

    def terminal(self):
        """A new terminal, attached over WebSocket."""
        r = self.post("/api/terminals", {"cols": 120, "rows": 40})
        assert r.status == 201, r
        return Terminal(self, r.json()["id"])


def login(user, password=None):
    r = request("POST", "/api/login",
                {"username": user, "password": password or PASSWORD[user]})
    assert r.status == 200, r
    doc = r.json()
    cookie = None
    for k, v in r.headers:
        if k.lower() == "set-cookie" and v.startswith("hg_session="):
            cookie = v.split(";", 1)[0].split("=", 1)[1]
    assert cookie, r.headers
    return Session(user, cookie, doc["csrf_token"], doc["role"])


class Terminal:
    """A terminal's WebSocket: pty bytes both ways."""

    def __init__(self, session, tid):
        self.id = tid
        self.ws = websocket.create_connection(
            "ws://127.0.0.1:8080/api/terminals/%s/ws" % tid,
            header=["Cookie: hg_session=" + session.cookie], timeout=120)
        self.out = b""

    def send(self, text):
        self.ws.send_binary(text.encode())

    def expect(self, pattern, timeout=120):
        """Read until the regex pattern (bytes) appears in the output;
        returns the match."""
        deadline = time.monotonic() + timeout
        rx = re.compile(pattern)
        while True:
            m = rx.search(self.out)
            if m:
                return m
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError("no %r in the terminal's output: %r"
                                     % (pattern, self.out[-2000:]))
            self.ws.settimeout(left)
            op, data = self.ws.recv_data()
            if op == websocket.ABNF.OPCODE_CLOSE:
                raise AssertionError("terminal closed before %r: %r"
                                     % (pattern, self.out[-2000:]))
            if op == websocket.ABNF.OPCODE_BINARY:
                self.out += data

    def close(self):
        self.ws.close()


# -- configuration, users, processes -------------------------------------

def configure(**variables):
    """Set variables in the env file (a block of this suite's own at its
    end, replaced each time) and restart hostgate.target."""
    with open(ENV_FILE) as f:
        text = f.read()
    text = text.split("# hgvm\n", 1)[0]
    SHARED.setdefault("config", {}).update(variables)
    text += "# hgvm\n" + "".join("%s=%s\n" % kv for kv in
                                 sorted(SHARED["config"].items()))
    with open(ENV_FILE, "w") as f:
        f.write(text)
    sh("systemctl", "restart", "hostgate.target")
    wait_healthy()


def add_user(name, admin=False):
    args = ["hgctl", "user", "add", name, "--password-stdin"]
    if admin:
        args.insert(4, "--admin")
    sh(*args, input=PASSWORD[name] + "\n")


def processes(marker):
    """[(pid, uid, argv)] of the processes whose argv holds marker."""
    out = []
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % p, "rb") as f:
                argv = [a.decode("utf-8", "replace")
                        for a in f.read().split(b"\0") if a]
            uid = os.stat("/proc/" + p).st_uid
        except OSError:
            continue
        if int(p) != os.getpid() and any(marker in a for a in argv):
            out.append((int(p), uid, argv))
    return out


def shells(marker):
    """processes(marker) that are the "sh -c SCRIPT" holding it, exec
    done: not a setsid(1) on its way (its child's cmdline reads empty for
    a moment while it execs sh, long enough under emulation to look like
    an end)."""
    return [p for p in processes(marker)
            if p[2][:2] == ["sh", "-c"] and marker in p[2][2]]


def cgroup_of(pid):
    """The cgroup v2 path of pid, under /sys/fs/cgroup."""
    with open("/proc/%d/cgroup" % pid) as f:
        for line in f:
            if line.startswith("0::"):
                return "/sys/fs/cgroup" + line[3:].strip()
    raise AssertionError("pid %d has no cgroup v2 line" % pid)


def read(path):
    with open(path) as f:
        return f.read().strip()


def audit(session, **query):
    """Records of GET /api/admin/audit (an admin session)."""
    q = "&".join("%s=%s" % kv for kv in query.items())
    r = session.get("/api/admin/audit?" + q)
    assert r.status == 200, r
    return r.json()["records"]
