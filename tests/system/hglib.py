"""Helpers for hostgate's system tests: start the real daemons in a private
temporary directory, talk HTTP(S) to frontd, run hgctl, and probe the IPC
sockets as a chosen uid. Standard library only."""

import atexit
import contextlib
import errno
import http.client
import json
import hashlib
import os
import pwd
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
BUILD = os.path.join(REPO, os.environ.get("HG_BUILD", "build"))
PROFILES = os.path.join(REPO, "profiles")


def _built(name):
    """Whether the Makefile builds $(B)/name: such a binary is required."""
    try:
        with open(os.path.join(REPO, "Makefile")) as f:
            return "$(B)/%s" % name in f.read()
    except OSError:
        return False


# egressd, the egress proxy, is started with the others; /healthz does
# not depend on it, so tests that do not use egress pass without it.
# hg-egress-bridge is no daemon: sandboxd finds it next to its own
# executable, so it is copied into the same directory.
EGRESSD = _built("egressd")
DAEMONS = ("sandboxd", "brokerd", "frontd") + (("egressd",) if EGRESSD
                                               else ())
HELPERS = ("hg-egress-bridge",) if _built("hg-egress-bridge") else ()
BINARIES = DAEMONS + ("hgctl",) + HELPERS

SERVICE_USERS = {
    "frontd": "hostgate-front",
    "brokerd": "hostgate-broker",
    "sandboxd": "hostgate-sandbox",
    "egressd": "hostgate-egress",
}
TEST_USER = "hostgate-test"

SOCK_FRONT = "front/broker.sock"
SOCK_CONTROL = "broker-control.sock"
SOCK_SANDBOX = "sandbox.sock"
SOCK_SANDBOX_EGRESS = "egress/sandbox.sock"
LISTEN_FILE = "frontd.listen"

IS_ROOT = os.geteuid() == 0
MODES = ("root", "user") if IS_ROOT else ("user",)

# The one bound on every wait for work the machine does (a daemon
# starting, a sandbox coming up, processes forking, output arriving).
# Each such wait ends as soon as the state it waits for is there, so the
# bound costs nothing when things work; it only says how long a test keeps
# waiting before it calls a hang a failure, and it is generous so that a
# slow or loaded machine is never taken for a hung one. HG_SLOW_BOUND
# (seconds) overrides it.
SLOW = float(os.environ.get("HG_SLOW_BOUND") or 120)

ADMIN = ("alice", "alice-password-1")
USER = ("bob", "bob-password-12")
# Their argon2id hashes, made once with brokerd's parameters (t 2, m 19456
# KiB, p 1) by libargon2's argon2id_hash_encoded, salts "hglib-alice-salt"
# and "hglib-bob-salt-1": add_user hands them to `hgctl user add
# --password-hash-stdin`, so a start pays no hash for them while each login
# still verifies the password at brokerd's cost.
HASHES = {
    ADMIN: "$argon2id$v=19$m=19456,t=2,p=1$aGdsaWItYWxpY2Utc2FsdA$"
           "6MFOIiUQ5W3C8EPmqdfgGBQVV+9QIJaP8ibfBRKym5M",
    USER: "$argon2id$v=19$m=19456,t=2,p=1$aGdsaWItYm9iLXNhbHQtMQ$"
          "ATYQoEuYst7BNdDp8g8jvhbO+OZoC5HC9bZu/iKxnd8",
    # policylib's carol, a second admin (salt "hglib-carol-salt").
    ("carol", "carol-password-3"):
        "$argon2id$v=19$m=19456,t=2,p=1$aGdsaWItY2Fyb2wtc2FsdA$"
        "WWKjTxYcGehxO8jxQ31vXwxL1UrPISuCQMKluhY0abc",
}


def missing_binaries():
    """Names of the build's binaries that do not exist yet."""
    return [b for b in BINARIES
            if not os.access(os.path.join(BUILD, b), os.X_OK)]


def read_listen(run_dir):
    """(host, port) from RUN_DIR/frontd.listen, or None when it is absent;
    host is as written, brackets of an IPv6 address included."""
    try:
        with open(os.path.join(run_dir, LISTEN_FILE)) as f:
            text = f.read()
    except FileNotFoundError:
        return None
    assert text.endswith("\n") and text.count("\n") == 1, \
        "%s: not one line: %r" % (LISTEN_FILE, text)
    host, _, port = text[:-1].rpartition(":")
    assert host and port.isdigit() and 0 < int(port) < 65536, \
        "%s: not ADDR:PORT: %r" % (LISTEN_FILE, text)
    return host, int(port)


def account(name):
    """(uid, gid) of a local user."""
    pw = pwd.getpwnam(name)
    return pw.pw_uid, pw.pw_gid


def wait_for(pred, timeout=SLOW, interval=0.05, what="condition"):
    """Poll pred() until it returns a true value or timeout seconds pass
    (by default the suite's bound, SLOW); returns the value, raises
    AssertionError on timeout."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        try:
            last = pred()
        except (OSError, http.client.HTTPException, ssl.SSLError) as e:
            last = e
            if time.monotonic() >= deadline:
                break
        else:
            if last and not isinstance(last, Exception):
                return last
            if time.monotonic() >= deadline:
                break
        time.sleep(interval)
    raise AssertionError("timed out after %.1fs waiting for %s (last: %r)"
                         % (timeout, what, last))


# Hostgates not yet cleaned up: stopped at exit even if pytest is
# interrupted, so that no daemon outlives the test run.
_LIVE = set()


@atexit.register
def _stop_all():
    for hg in list(_LIVE):
        hg.shutdown()


class Response:
    """An HTTP response, read in full."""

    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers          # list of (name, value)
        self.body = body

    def header(self, name):
        for k, v in self.headers:
            if k.lower() == name.lower():
                return v
        return None

    def header_all(self, name):
        return [v for k, v in self.headers if k.lower() == name.lower()]

    def json(self):
        try:
            return json.loads(self.body)
        except ValueError:
            raise AssertionError("response %d is not JSON: %r"
                                 % (self.status, self.body[:500]))

    def error(self):
        """The {"code","message"} of an error reply, checked for shape."""
        doc = self.json()
        assert isinstance(doc, dict) and isinstance(doc.get("error"), dict), \
            "no error object in %d reply: %r" % (self.status, doc)
        err = doc["error"]
        assert isinstance(err.get("code"), str) and err["code"], err
        assert isinstance(err.get("message"), str) and err["message"], err
        return err

    def cookie(self, name="hg_session"):
        """(value, {attribute: value}) of a Set-Cookie for name, or None."""
        for line in self.header_all("Set-Cookie"):
            parts = [p.strip() for p in line.split(";")]
            k, _, v = parts[0].partition("=")
            if k.strip() != name:
                continue
            attrs = {}
            for p in parts[1:]:
                ak, _, av = p.partition("=")
                attrs[ak.strip().lower()] = av.strip()
            return v.strip(), attrs
        return None

    def __repr__(self):
        return "<Response %d %r>" % (self.status, self.body[:300])


class Session:
    """A logged-in cookie session."""

    def __init__(self, hg, user, role, cookie, csrf):
        self.hg = hg
        self.user = user
        self.role = role
        self.cookie = cookie
        self.csrf = csrf

    def request(self, method, path, body=None, csrf=True, **kw):
        headers = dict(kw.pop("headers", {}) or {})
        if csrf and method in ("POST", "PUT", "DELETE"):
            headers["X-CSRF-Token"] = self.csrf
        return self.hg.request(method, path, body=body, cookie=self.cookie,
                               headers=headers, **kw)

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def post(self, path, body=None, **kw):
        return self.request("POST", path, body=body, **kw)


class Hostgate:
    """One hostgate: its daemons in a private directory. frontd listens
    on port 0 (HOSTGATE_LISTEN=127.0.0.1:0) and self.port is the port it
    reports in RUN_DIR/frontd.listen, learnt again at each start."""

    def __init__(self, mode, env=None, name="hostgate", tls=False):
        self.mode = mode
        self.port = None
        self.dir = tempfile.mkdtemp(prefix="hg-%s-%s-" % (name, mode))
        os.chmod(self.dir, 0o755)
        self.bindir = os.path.join(self.dir, "bin")
        self.state = os.path.join(self.dir, "state")
        self.run = os.path.join(self.dir, "run")
        self.logdir = os.path.join(self.dir, "logs")
        # The state directory is left to the daemons, which create it with
        # its owner and mode (and refuse one that has the wrong ones).
        for d in (self.bindir, self.run, self.logdir):
            os.mkdir(d)
            os.chmod(d, 0o755)
        for b in BINARIES:
            dst = os.path.join(self.bindir, b)
            shutil.copy(os.path.join(BUILD, b), dst)
            os.chmod(dst, 0o755)
        # sandboxd reads its policies from profiles/; a copy, so that the
        # service users need not traverse the repository's path.
        self.profiles = os.path.join(self.dir, "profiles")
        if os.path.isdir(PROFILES):
            shutil.copytree(PROFILES, self.profiles)
            for root, dirs, files in os.walk(self.profiles):
                os.chmod(root, 0o755)
                for f in files:
                    os.chmod(os.path.join(root, f), 0o644)
        self.envfile = os.path.join(self.dir, "empty.env")
        open(self.envfile, "w").close()
        os.chmod(self.envfile, 0o644)

        # Who the daemons run as: None means "as we are".
        self.run_as = None
        if mode == "user" and IS_ROOT:
            self.run_as = account(TEST_USER)
            # The test user cannot create it in our directory: made here,
            # the way the daemons would (its owner, 0700).
            os.mkdir(self.state, 0o700)
            os.chown(self.state, *self.run_as)
            os.chown(self.run, *self.run_as)
        self.daemon_uid = self.run_as[0] if self.run_as else os.geteuid()

        self.scheme = "https" if tls else "http"
        self.certfile = self.keyfile = None
        if tls:
            self.certfile, self.keyfile = make_cert(self.dir, self.run_as)

        self.env = {
            "PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
            "LANG": "C.UTF-8",
            "HOSTGATE_ENV_FILE": self.envfile,
            "HOSTGATE_STATE_DIR": self.state,
            "HOSTGATE_RUN_DIR": self.run,
            "HOSTGATE_LISTEN": "127.0.0.1:0",
            "HOSTGATE_LOG_LEVEL": "debug",
        }
        if os.path.isdir(self.profiles):
            self.env["HOSTGATE_PROFILES_DIR"] = self.profiles
        if mode == "root":
            self.env["HOSTGATE_FRONT_USER"] = SERVICE_USERS["frontd"]
            self.env["HOSTGATE_BROKER_USER"] = SERVICE_USERS["brokerd"]
            self.env["HOSTGATE_SANDBOX_USER"] = SERVICE_USERS["sandboxd"]
            if EGRESSD:
                self.env["HOSTGATE_EGRESS_USER"] = SERVICE_USERS["egressd"]
        if tls:
            self.env["HOSTGATE_TLS_CERT"] = self.certfile
            self.env["HOSTGATE_TLS_KEY"] = self.keyfile
        if env:
            self.env.update(env)
        self.procs = {}
        self.failed = False
        _LIVE.add(self)

    # -- processes ---------------------------------------------------------

    def wrap(self, argv, as_user=None):
        """argv run as the daemons' user (user mode as root) or as_user."""
        who = as_user if as_user is not None else self.run_as
        if who is None:
            return list(argv)
        if isinstance(who, str):
            who = account(who)
        uid, gid = who
        if uid == os.geteuid():
            return list(argv)
        return ["setpriv", "--reuid=%d" % uid, "--regid=%d" % gid,
                "--clear-groups", "--"] + list(argv)

    def binary(self, name):
        return os.path.join(self.bindir, name)

    def log_path(self, name):
        return os.path.join(self.logdir, name + ".log")

    def start(self, name, extra_env=None, prefix=(), args=("-d",)):
        """Start one daemon in the foreground, its stderr to its log. For
        frontd, wait until it has written frontd.listen (then self.port is
        its port) or has exited. prefix: a command that execs the rest;
        extra_env: a dict, or a function of the log file's os.stat that
        returns one."""
        assert name not in self.procs or self.procs[name].poll() is not None, \
            "%s already running" % name
        if name == "frontd":
            # The file of an earlier frontd must not pass for this one's.
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.listen_path())
            self.port = None
        env = dict(self.env)
        # LeakSanitizer stops the world with ptrace, which a daemon that has
        # dropped privileges and loaded its seccomp filter cannot do: in a
        # sanitizer build it would turn every clean exit into a failure.
        # ASan and UBSan stay on; `-n` runs (no drop) keep leak checks.
        asan = os.environ.get("ASAN_OPTIONS", "")
        env["ASAN_OPTIONS"] = (asan + ":" if asan else "") + "detect_leaks=0"
        log = open(self.log_path(name), "ab")
        log.write(("---- start %s %s\n" % (name, time.strftime("%T"))).encode())
        log.flush()
        if callable(extra_env):
            extra_env = extra_env(os.fstat(log.fileno()))
        if extra_env:
            env.update(extra_env)
        try:
            p = subprocess.Popen(list(prefix) +
                                 self.wrap([self.binary(name)] + list(args)),
                                 env=env, stdin=subprocess.DEVNULL,
                                 stdout=log, stderr=log, cwd=self.dir)
        finally:
            log.close()
        self.procs[name] = p
        if name == "frontd":
            self.wait_listen()
        return p

    def listen_path(self):
        return os.path.join(self.run, LISTEN_FILE)

    def wait_listen(self, timeout=SLOW):
        """Wait until frontd has written frontd.listen, or has exited; set
        self.port from the file. Returns the port, or None if frontd
        exited without listening."""
        p = self.procs["frontd"]
        wait_for(lambda: os.path.exists(self.listen_path())
                 or p.poll() is not None, timeout, what=LISTEN_FILE)
        got = read_listen(self.run)
        self.port = got[1] if got else None
        return self.port

    def wait_control(self, timeout=SLOW):
        """Wait until brokerd's control socket answers hgctl (what the
        next hgctl needs; /healthz may say 503 by design meanwhile)."""
        def answers():
            return self.hgctl("user", "list").returncode == 0
        try:
            wait_for(answers, timeout, what="hgctl user list")
        except AssertionError as e:
            raise AssertionError("%s (brokerd %s)" % (
                e, "running" if self.alive("brokerd") else "exited"))

    def start_all(self, wait=True):
        """Start the daemons; with wait, until /healthz says 200 (which
        does not wait for egressd: see wait_egress).
        A failure keeps the directory and carries the logs."""
        for name in DAEMONS:
            self.start(name)
        if wait:
            try:
                self.wait_healthy()
            except AssertionError as e:
                self.failed = True
                raise AssertionError("%s\n%s" % (e, self.logs())) from None
            self.wait_egress_settled()
        return self

    def egress_linked(self):
        """Whether egressd is linked to sandboxd: sandboxd's socket for it
        has an accepted connection (/proc/net/unix names an accepted
        socket by its listener's path; state 03 is connected)."""
        return egress_linked(self.run)

    def wait_egress_settled(self, timeout=SLOW):
        """Wait until egressd has linked to sandboxd or has exited, so that
        what a test looks at in it is past its start-up. Never fails:
        egressd is no part of /healthz, and a test that needs it says so
        itself (wait_egress)."""
        if "egressd" not in self.procs:
            return
        with contextlib.suppress(AssertionError):
            wait_for(lambda: self.egress_linked() or
                     not self.alive("egressd"), timeout,
                     what="egressd linked or gone")

    def pid(self, name):
        return self.procs[name].pid

    def alive(self, name):
        p = self.procs.get(name)
        return p is not None and p.poll() is None

    def send_signal(self, name, sig):
        self.procs[name].send_signal(sig)

    def stop(self, name, sig=signal.SIGTERM, timeout=SLOW):
        """Signal a daemon and wait for it to exit; returns its status."""
        p = self.procs[name]
        if p.poll() is None:
            p.send_signal(sig)
            try:
                p.wait(timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
                raise AssertionError("%s did not exit within %.0fs of "
                                     "signal %d" % (name, timeout, sig))
        return p.returncode

    def kill(self, name):
        return self.stop(name, signal.SIGKILL)

    def shutdown(self):
        """Stop every daemon: SIGTERM, then SIGKILL after SLOW seconds.
        Returns the problems seen: a daemon that was running and did not
        exit 0 on SIGTERM."""
        problems = []
        running = [n for n, p in self.procs.items() if p.poll() is None]
        for name in running:
            self.procs[name].terminate()
        deadline = time.monotonic() + SLOW
        for name in running:
            p = self.procs[name]
            try:
                p.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
                problems.append("%s ignored SIGTERM for %.0f s" % (name, SLOW))
                continue
            if p.returncode != 0:
                problems.append("%s exited %d on SIGTERM" % (name, p.returncode))
        return problems

    def sanitizer_reports(self):
        """Daemons whose log holds an ASan/UBSan/LSan report."""
        marks = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer",
                 "runtime error:")
        return ["%s: sanitizer report in its log" % name for name in BINARIES
                if any(m in self.log_text(name) for m in marks)]

    def mounts(self):
        """Workspace images mounted below this hostgate's directory:
        btrfs on a loop device (a test's own tmpfs is its business)."""
        out = []
        with open("/proc/self/mountinfo") as f:
            for line in f:
                left, _, right = line.partition(" - ")
                mnt = left.split()[4].encode().decode("unicode_escape")
                fstype, source = (right.split() + ["", ""])[:2]
                if mnt.startswith(self.dir + "/") and fstype == "btrfs" \
                        and source.startswith("/dev/loop"):
                    out.append(mnt)
        return out

    def unmount_leftovers(self, timeout=SLOW):
        """The safety net for workspace images: sandboxd's disk helper
        unmounts them when sandboxd goes; wait for that, then unmount
        lazily whatever is still there (so that removing the directory
        never reaches into a mounted image) and report it."""
        if not IS_ROOT:
            return []
        try:
            wait_for(lambda: not self.mounts(), timeout,
                     what="workspace mounts to go")
            return []
        except AssertionError:
            left = self.mounts()
        for mnt in sorted(left, reverse=True):
            subprocess.run(["umount", "-l", mnt], capture_output=True)
        return ["mounts left under %s after the daemons stopped: %s"
                % (self.dir, ", ".join(left))]

    def cgroup_tops(self, made=True):
        """The cgroup subtrees sandboxd makes for this instance, one per
        hierarchy (hostgate- and 8 hex of the run directory's SHA-256,
        under the cgroup the test itself is in); with made, those that
        exist."""
        if not IS_ROOT:
            return []
        name = "hostgate-" + hashlib.sha256(
            os.path.abspath(self.run).encode()).hexdigest()[:8]
        with open("/proc/self/cgroup") as f:
            lines = f.read().splitlines()
        tops = []
        for line in lines:
            _, ctrls, path = line.split(":", 2)
            mount = "unified" if ctrls == "" else \
                ctrls.split(",")[0].replace("name=", "")
            top = os.path.join("/sys/fs/cgroup", mount, path.lstrip("/"),
                               name)
            if not made or os.path.isdir(top):
                tops.append(top)
        return tops

    @staticmethod
    def cgroup_pids(top):
        """The processes anywhere in the cgroup subtree top."""
        pids = []
        for root, _, files in os.walk(top):
            if "cgroup.procs" in files:
                try:
                    with open(os.path.join(root, "cgroup.procs")) as f:
                        pids += [int(p) for p in f.read().split()]
                except OSError:
                    pass
        return pids

    def remove_cgroups(self, timeout=SLOW):
        """Remove the cgroup subtrees sandboxd made for this instance:
        sandboxd cannot leave its own leaf after dropping root. Returns
        the problems: a subtree that still holds processes once the
        daemons are gone (waited for up to timeout, then killed so that
        they do not outlive the test) or that cannot be removed. A tree
        left behind fails the test rather than being ignored."""
        problems = []
        for top in self.cgroup_tops():
            try:
                wait_for(lambda: not self.cgroup_pids(top), timeout,
                         what="the processes of %s to end" % top)
            except AssertionError:
                left = self.cgroup_pids(top)
                problems.append("processes left in %s after the daemons "
                                "stopped: %s" % (top, left))
                for pid in left:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except OSError:
                        pass
                try:
                    wait_for(lambda: not self.cgroup_pids(top), SLOW,
                             what="the processes of %s to die" % top)
                except AssertionError:
                    pass
            for root, dirs, _ in os.walk(top, topdown=False):
                for d in dirs + ([""] if root == top else []):
                    path = os.path.join(root, d) if d else root
                    try:
                        os.rmdir(path)
                    except FileNotFoundError:
                        pass
                    except OSError as e:
                        problems.append("cgroup %s left behind: %s"
                                        % (path, e.strerror))
        return problems

    def logs(self):
        out = []
        for name in BINARIES:
            path = self.log_path(name)
            if os.path.exists(path):
                with open(path, "rb") as f:
                    data = f.read()
                if len(data) > 20000:
                    data = b"[...]\n" + data[-20000:]
                out.append("==== %s (%s)\n%s" % (name, path,
                                                data.decode("utf-8", "replace")))
        return "\n".join(out)

    def log_text(self, name):
        try:
            with open(self.log_path(name), "rb") as f:
                return f.read().decode("utf-8", "replace")
        except FileNotFoundError:
            return ""

    def cleanup(self):
        """Stop the daemons; keep the directory when something failed,
        else remove it. Raises when a daemon misbehaved on the way out."""
        problems = self.shutdown() + self.sanitizer_reports()
        problems += self.unmount_leftovers()
        problems += self.remove_cgroups()
        _LIVE.discard(self)
        if problems:
            self.failed = True
        if self.failed:
            print("\nhostgate test dir kept: %s" % self.dir)
        else:
            shutil.rmtree(self.dir, ignore_errors=True)
        if problems:
            raise AssertionError("; ".join(problems) + "\n" + self.logs())

    # -- hgctl -------------------------------------------------------------

    def hgctl(self, *args, input=None, as_user=None, timeout=SLOW):
        """Run hgctl; returns CompletedProcess (text)."""
        if as_user is None and self.mode == "root":
            as_user = (0, 0)
        argv = self.wrap([self.binary("hgctl")] + list(args), as_user)
        env = {"PATH": self.env["PATH"], "LANG": "C.UTF-8",
               "HOSTGATE_RUN_DIR": self.run,
               "HOSTGATE_STATE_DIR": self.state,
               "HOSTGATE_ENV_FILE": self.envfile}
        r = subprocess.run(argv, input=input, capture_output=True, text=True,
                           env=env, timeout=timeout, cwd=self.dir)
        with open(self.log_path("hgctl"), "a") as log:
            log.write("$ hgctl %s -> %d\n%s%s" % (" ".join(args), r.returncode,
                                                   r.stdout, r.stderr))
        return r

    def hgctl_ok(self, *args, **kw):
        r = self.hgctl(*args, **kw)
        assert r.returncode == 0, "hgctl %s: exit %d: %s" % (
            " ".join(args), r.returncode, r.stderr)
        return r

    def hgctl_json(self, *args):
        r = self.hgctl_ok(*(list(args) + ["--json"]))
        try:
            return json.loads(r.stdout)
        except ValueError:
            raise AssertionError("hgctl %s --json: not JSON: %r"
                                 % (" ".join(args), r.stdout))

    def give_audit_key(self, key):
        """Before the first start: STATE_DIR/audit.key holds key (bytes),
        as an operator copies a fleet's one key to each host (the chain in
        a shared store takes records under one key only). The directory
        and the key as brokerd would make them: its user's, 0711 or 0700,
        the key 0600."""
        if self.mode == "root":
            owner = account(SERVICE_USERS["brokerd"])
        else:
            owner = self.run_as or (os.geteuid(), os.getegid())
        if not os.path.isdir(self.state):
            os.mkdir(self.state, 0o711 if self.mode == "root" else 0o700)
            os.chown(self.state, *owner)
        path = os.path.join(self.state, "audit.key")
        with open(path, "wb") as f:
            f.write(key)
        os.chmod(path, 0o600)
        os.chown(path, *owner)

    def add_user(self, name, password, admin=False):
        """Add a user; the test users (HASHES) by their known hash."""
        args = ["user", "add", name]
        if admin:
            args.append("--admin")
        known = HASHES.get((name, password))
        if known:
            args.append("--password-hash-stdin")
            self.hgctl_ok(*args, input=known + "\n")
        else:
            args.append("--password-stdin")
            self.hgctl_ok(*args, input=password + "\n")

    # -- HTTP --------------------------------------------------------------

    def connection(self, timeout=SLOW, source=None, context=None):
        if self.port is None:
            raise ConnectionRefusedError("frontd has reported no port")
        src = (source, 0) if source else None
        if self.scheme == "https":
            ctx = context or insecure_client_context()
            return http.client.HTTPSConnection("127.0.0.1", self.port,
                                               timeout=timeout, context=ctx,
                                               source_address=src)
        return http.client.HTTPConnection("127.0.0.1", self.port,
                                          timeout=timeout, source_address=src)

    def request(self, method, path, body=None, headers=None, cookie=None,
                bearer=None, source=None, timeout=SLOW):
        """One request on a fresh connection; body may be a dict (sent as
        JSON), str or bytes."""
        h = {}
        if body is not None and not isinstance(body, (bytes, str)):
            body = json.dumps(body)
        if isinstance(body, str):
            body = body.encode()
        if body is not None:
            h["Content-Type"] = "application/json"
        if cookie:
            h["Cookie"] = "hg_session=" + cookie
        if bearer:
            h["Authorization"] = "Bearer " + bearer
        h.update(headers or {})
        conn = self.connection(timeout=timeout, source=source)
        try:
            conn.request(method, path, body=body, headers=h)
            r = conn.getresponse()
            data = r.read()
            return Response(r.status, r.getheaders(), data)
        finally:
            conn.close()

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def post(self, path, body=None, **kw):
        return self.request("POST", path, body=body, **kw)

    def health(self):
        return self.get("/healthz")

    def healthy(self):
        try:
            return self.health().status == 200
        except (OSError, http.client.HTTPException, ssl.SSLError):
            return False

    def wait_healthy(self, timeout=SLOW):
        try:
            wait_for(self.healthy, timeout, what="/healthz 200")
        except AssertionError:
            dead = [n for n in DAEMONS if n in self.procs and not self.alive(n)]
            raise AssertionError("hostgate not healthy within %.0fs "
                                 "(exited: %s)"
                                 % (timeout, ", ".join(dead) or "none"))

    def wait_chain(self, timeout=SLOW):
        """Wait until /healthz shows the chain frontd -> brokerd -> sandboxd
        linked and the backend's state reported, whether the backend works
        or not (docker without an engine answers 503 by design). Returns
        the Response."""
        def linked():
            r = self.health()
            doc = r.json()
            parts = [doc.get(k) or {} for k in ("brokerd", "sandboxd")]
            backend = doc.get("backend") or {}
            if all(p.get("ok") is True for p in parts) and \
                    backend.get("name") is not None:
                return r
            return None
        try:
            return wait_for(linked, timeout, what="/healthz with the chain "
                            "linked and the backend reported")
        except AssertionError as e:
            dead = [n for n in DAEMONS if n in self.procs and not self.alive(n)]
            raise AssertionError("%s (exited: %s)" % (e, ", ".join(dead)
                                                       or "none"))

    def wait_egress(self, session, timeout=SLOW):
        """Wait until sandboxd's link to egressd is up, as /api/status
        shows it to session (egress.proxy.ok); returns that document."""
        def linked():
            r = session.get("/api/status")
            doc = r.json() if r.status == 200 else {}
            proxy = (doc.get("egress") or {}).get("proxy") or {}
            return doc if proxy.get("ok") is True else None
        try:
            return wait_for(linked, timeout, what="/api/status with "
                            "egress.proxy.ok")
        except AssertionError as e:
            raise AssertionError("%s (egressd %s)\n%s" % (
                e, "running" if self.alive("egressd") else "not running",
                self.log_text("egressd")[-3000:]))

    def wait_status(self, status, timeout=SLOW):
        """Poll /healthz until it answers status; returns the Response."""
        def check():
            r = self.health()
            return r if r.status == status else None
        return wait_for(check, timeout, what="/healthz %d" % status)

    def login(self, user, password, source=None):
        """Log in; asserts 200 and returns a Session."""
        r = self.post("/api/login", {"username": user, "password": password},
                      source=source)
        assert r.status == 200, "login %s: %r" % (user, r)
        doc = r.json()
        c = r.cookie()
        assert c and c[0], "no hg_session cookie in %r" % r.headers
        return Session(self, doc["user"], doc["role"], c[0], doc["csrf_token"])

    def raw(self, data, timeout=SLOW, shut=False):
        """Send raw bytes on a fresh TCP connection; returns what came back
        before the server closed or timeout seconds passed."""
        if self.port is None:
            raise ConnectionRefusedError("frontd has reported no port")
        s = socket.create_connection(("127.0.0.1", self.port), timeout=timeout)
        if self.scheme == "https":
            s = insecure_client_context().wrap_socket(s)
        try:
            s.sendall(data)
            if shut:
                s.shutdown(socket.SHUT_WR)
            out = b""
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                s.settimeout(max(0.05, deadline - time.monotonic()))
                try:
                    chunk = s.recv(65536)
                except socket.timeout:
                    break
                except (ConnectionResetError, ssl.SSLError):
                    break
                if not chunk:
                    break
                out += chunk
                if b"\r\n\r\n" in out and _complete(out):
                    break
            return out
        finally:
            s.close()


def egress_linked(run_dir):
    """Whether RUN_DIR/egress/sandbox.sock has an accepted connection."""
    path = os.path.join(run_dir, SOCK_SANDBOX_EGRESS)
    with open("/proc/net/unix") as f:
        for line in f.read().splitlines()[1:]:
            fields = line.split(None, 7)
            if len(fields) == 8 and fields[5] == "03" and fields[7] == path:
                return True
    return False


def _complete(data):
    """True when data holds a full HTTP response (head and Content-Length)."""
    head, _, body = data.partition(b"\r\n\r\n")
    for line in head.split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        if k.strip().lower() == b"content-length":
            try:
                return len(body) >= int(v.strip())
            except ValueError:
                return True
    return True


def parse_raw(data):
    """(status, headers dict lower-cased, body) of a raw HTTP response."""
    assert data.startswith(b"HTTP/1."), "not an HTTP response: %r" % data[:200]
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(b":")
        headers[k.strip().lower().decode()] = v.strip().decode()
    return status, headers, body


# Limits lifted for test instances: the tests spawn, log in and change
# modes far more often than a person would. The limits themselves are
# tested on their own instances (test_ratelimit.py, test_limits.py).
LIFTED_ENV = {
    # Concurrency tests open hundreds of connections from one address;
    # the per-address limit has its own tests (test_front_abuse.py).
    "HOSTGATE_MAX_CONNECTIONS_PER_ADDRESS": "1024",
    "HOSTGATE_LOGIN_RATE_PER_MINUTE": "600",
    "HOSTGATE_LOGIN_BURST": "100",
    "HOSTGATE_SPAWN_RATE_PER_MINUTE": "100000",
    "HOSTGATE_SPAWN_BURST": "10000",
    "HOSTGATE_MODE_RATE_PER_MINUTE": "10000",
}


@contextlib.contextmanager
def running(mode, name, env=None, more_users=()):
    """A running hostgate of its own (start_configured), stopped
    afterwards: for a fixture whose instance no other may share."""
    hg = start_configured(mode, name, env, more_users)
    yield hg
    hg.cleanup()


class Pool:
    """Running hostgates shared for a test session, one per (mode,
    configuration): a configuration is the environment over LIFTED_ENV
    (a None value leaves the daemons' default) plus "more_users"
    ((name, password, admin), ...) and "own" (a name that keeps an
    instance apart from every other configuration, e.g. one whose tests
    run fork bombs). lease() hands one out; give_back() shares it again
    only if it was left as found (no test failed on it, every daemon up
    and healthy, the same users); otherwise it stops it, so the next
    lease starts afresh. At most KEEP idle instances stay running, the
    least recently given back stopped first."""

    KEEP = 4

    def __init__(self):
        self.idle = {}      # key -> (Hostgate, users when leased first)
        self.started = 0
        self.leases = 0
        self.retired = []   # why an instance was not shared again

    @staticmethod
    def key(mode, config):
        return (mode, tuple(sorted((k, repr(v)) for k, v in
                                   (config or {}).items())))

    def lease(self, mode, config=None):
        """(key, a running hostgate with this configuration)."""
        config = dict(config or {})
        key = self.key(mode, config)
        self.leases += 1
        if key in self.idle:
            return key, self.idle.pop(key)[0]
        name = config.pop("own", None) or "pool"
        more = config.pop("more_users", ())
        hg = start_configured(mode, name, config, more)
        hg.pool_users = self.users(hg)
        self.started += 1
        return key, hg

    @staticmethod
    def users(hg):
        """What a test must leave as it found it: the users and the
        agent tokens (a login session is every test's own)."""
        return (sorted((u["name"], u["role"]) for u in
                       hg.hgctl_json("user", "list")),
                sorted(t["id"] for t in hg.hgctl_json("token", "list")))

    def give_back(self, key, hg):
        """Keep hg for the next lease of key if it is as it was leased;
        else stop it (raising what its clean-up found)."""
        why = None
        if any(k == "own" for k, _ in key[1]):
            why = "its configuration is one module's own"
        elif hg.failed:
            why = "a test failed on it"
        elif not all(hg.alive(n) for n in DAEMONS) or not hg.healthy():
            why = "a daemon is down"
        elif self.users(hg) != hg.pool_users:
            why = "its users or tokens changed"
        if why is not None:
            self.retired.append(why)
            hg.cleanup()
            return why
        self.idle[key] = (hg, hg.pool_users)
        while len(self.idle) > self.KEEP:
            oldest = next(iter(self.idle))
            self.idle.pop(oldest)[0].cleanup()
        return None

    def close(self):
        """Stop every idle instance; raises what their clean-ups found."""
        errors = []
        while self.idle:
            hg = self.idle.popitem()[1][0]
            try:
                hg.cleanup()
            except AssertionError as e:
                errors.append(str(e))
        assert not errors, "\n".join(errors)


def start_configured(mode, name, env=None, more_users=()):
    """A running hostgate with the limits lifted (LIFTED_ENV, then env; a
    None value leaves that variable at the daemons' default) and users
    alice (admin) and bob, plus more_users ((name, password, admin),
    ...). On failure it is cleaned up, its logs printed, and the error
    raised."""
    full = dict(LIFTED_ENV)
    full.update({k: str(v) for k, v in (env or {}).items()
                 if v is not None})
    hg = Hostgate(mode, env=full, name=name)
    for k, v in (env or {}).items():
        if v is None:
            hg.env.pop(k, None)
    try:
        hg.start_all()
        hg.add_user(*ADMIN, admin=True)
        hg.add_user(*USER)
        for user, password, admin in more_users:
            hg.add_user(user, password, admin=admin)
    except BaseException:
        hg.failed = True
        print(hg.logs())
        try:
            hg.cleanup()
        except AssertionError:
            pass
        raise
    return hg


def insecure_client_context():
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


def make_cert(directory, owner=None):
    """A self-signed certificate and key for localhost, made with openssl."""
    cert = os.path.join(directory, "cert.pem")
    key = os.path.join(directory, "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec",
                    "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-keyout", key, "-out", cert, "-days", "2",
                    "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
                   check=True, capture_output=True)
    os.chmod(cert, 0o644)
    os.chmod(key, 0o600)
    if owner:
        os.chown(key, *owner)
        os.chown(cert, *owner)
    return cert, key


def proc_status(pid):
    """/proc/PID/status as a dict of name -> value string."""
    out = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            k, _, v = line.partition(":")
            out[k] = v.strip()
    return out


def pids_of(binary):
    """The processes running this very file (a hostgate's own copy)."""
    out = []
    for pid in os.listdir("/proc"):
        try:
            if pid.isdigit() and os.readlink("/proc/%s/exe" % pid) == binary:
                out.append(int(pid))
        except OSError:
            pass
    return out


def stop_binary(binary, what):
    """SIGTERM every process running binary (a daemon started without -d
    is no child of the test) and wait until none is left."""
    for pid in pids_of(binary):
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    wait_for(lambda: not pids_of(binary), what=what + " gone")


def private_mounts(script, *args):
    """A start prefix: sh -c script args... in a private mount namespace
    of its own (script ends by exec'ing "$@", the daemon)."""
    return ["unshare", "-m", "--propagation", "private", "sh", "-c",
            script] + list(args)


class DatagramSink:
    """A unix datagram socket bound at path (mode 0666), read all along by
    a thread as syslogd or journald reads theirs (a full queue would block
    the senders); .got holds parse(datagram) of each, in order."""

    def __init__(self, path, parse=lambda d: d.decode("latin-1")):
        import threading
        self.got = []
        self._done = threading.Event()
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        try:
            self._sock.bind(path)
            os.chmod(path, 0o666)
        except OSError:
            self._sock.close()
            raise
        self._sock.settimeout(0.1)

        def reader():
            while not self._done.is_set():
                try:
                    data = self._sock.recv(1 << 20)
                except socket.timeout:
                    continue
                self.got.append(parse(data))
        self._thread = threading.Thread(target=reader, daemon=True)
        self._thread.start()

    def close(self):
        self._done.set()
        self._thread.join()
        self._sock.close()


# -- IPC probes ------------------------------------------------------------

def hello(role, version=1):
    return json.dumps({"type": "hello", "version": version,
                       "role": role}).encode()


def ipc_decode(data):
    """One datagram of the IPC protocol as a dict. A raw-body reply
    (docs/protocol.md, Framing: envelope, NUL, the result's text) becomes
    the envelope with its body parsed as "result"."""
    env, nul, body = data.partition(b"\0")
    msg = json.loads(env)
    if nul:
        msg["result"] = json.loads(body)
    return msg


class SandboxClient:
    """brokerd's end of sandbox.sock, for tests that talk to sandboxd
    alone: connected as brokerd's uid (SO_PEERCRED is taken at connect),
    the hello exchanged, then requests and their replies (with fds).
    sandboxd's own requests (proc_exited...) are answered {} on the way."""

    def __init__(self, hg, timeout=SLOW, sock=SOCK_SANDBOX, role="brokerd"):
        """role's end of sock (brokerd's of sandbox.sock by default;
        frontd's of SOCK_FRONT, say), as role's uid."""
        path = os.path.join(hg.run, sock)
        if hg.mode == "root":
            uid, gid = account(SERVICE_USERS[role])
        elif hg.run_as:
            uid, gid = hg.run_as
        else:
            uid, gid = os.geteuid(), os.getegid()

        # sandboxd binds, sets the socket's owner and mode, then listens:
        # until then a connect is refused.
        def connected():
            s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            s.settimeout(timeout)
            if uid != os.geteuid():
                os.setegid(gid)
                os.seteuid(uid)
            try:
                s.connect(path)
            except (FileNotFoundError, ConnectionRefusedError):
                s.close()
                return None
            finally:
                if os.geteuid() != os.getuid():
                    os.seteuid(os.getuid())
                    os.setegid(os.getgid())
            return s
        self.s = wait_for(connected, what="%s listening" % path)
        self.s.send(hello(role))
        data, fds, _, _ = socket.recv_fds(self.s, 65536, 8)
        for fd in fds:
            os.close(fd)
        assert json.loads(data).get("type") == "hello"
        self.next_id = 1

    def send(self, type_, fds=(), **fields):
        """Send one request; its id."""
        rid = self.next_id
        self.next_id += 1
        msg = json.dumps(dict(fields, type=type_, id=rid)).encode()
        if fds:
            socket.send_fds(self.s, [msg], list(fds))
        else:
            self.s.send(msg)
        return rid

    def wait(self, rid):
        """(result, error, fds) of the reply to request rid."""
        while True:
            data, got, _, _ = socket.recv_fds(self.s, 1 << 20, 8)
            m = ipc_decode(data)
            if m.get("type") is not None:
                for fd in got:
                    os.close(fd)
                if "id" in m:
                    self.s.send(json.dumps({"id": m["id"],
                                            "result": {}}).encode())
                continue
            if m.get("id") == rid:
                return m.get("result"), m.get("error"), got
            for fd in got:
                os.close(fd)

    def call_fds(self, type_, fds=(), **fields):
        """(result, error, fds) of one request."""
        return self.wait(self.send(type_, fds, **fields))

    def call(self, type_, **fields):
        """(result, error) of one request, its fds closed."""
        res, err, got = self.call_fds(type_, **fields)
        for fd in got:
            os.close(fd)
        return res, err

    def close(self):
        self.s.close()



@contextlib.contextmanager
def sandboxd_alone(mode, name, env=None, prepare=None, timeout=SLOW):
    """sandboxd started alone (prepare(hg) first, when given), and
    brokerd's end of its socket: yields (hg, SandboxClient)."""
    hg = Hostgate(mode, name=name, env=env)
    try:
        if prepare is not None:
            prepare(hg)
        hg.start("sandboxd")
        fb = SandboxClient(hg, timeout=timeout)
    except BaseException:
        hg.cleanup()
        raise
    try:
        yield hg, fb
    finally:
        fb.close()
        hg.cleanup()

def run_as(uid_gid, fn, timeout=SLOW):
    """Run fn() in a forked child with the given (uid, gid) (None: as we
    are); returns its JSON-able result or raises what it raised."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            if uid_gid is not None and (uid_gid[0] != os.geteuid()
                                        or uid_gid[1] != os.getegid()):
                os.setgroups([])
                os.setresgid(uid_gid[1], uid_gid[1], uid_gid[1])
                os.setresuid(uid_gid[0], uid_gid[0], uid_gid[0])
            res = {"ok": fn()}
        except BaseException as e:
            res = {"exc": "%s: %s" % (type(e).__name__, e)}
        try:
            os.write(w, json.dumps(res).encode())
        finally:
            os._exit(0)
    os.close(w)
    chunks = []
    deadline = time.monotonic() + timeout
    try:
        while True:
            data = os.read(r, 65536)
            if not data:
                break
            chunks.append(data)
            if time.monotonic() > deadline:
                break
    finally:
        os.close(r)
        os.waitpid(pid, 0)
    res = json.loads(b"".join(chunks) or b'{"exc": "child died"}')
    if "exc" in res:
        raise AssertionError("probe as uid %s: %s" % (uid_gid, res["exc"]))
    return res["ok"]


def seqpacket_probe(path, steps, wait=2.0, until=None):
    """Connect to a SOCK_SEQPACKET socket and perform steps, a list of
    ("send", bytes) / ("send_fd", bytes) / ("big", n). Then read until the
    peer closes, until(message) is true for a message received, or wait
    seconds pass. Returns a dict:
      connect: "ok" or the errno name; closed: bool; after: seconds;
      messages: the JSON messages received (hello included)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        try:
            s.connect(path)
        except OSError as e:
            return {"connect": errno_name(e), "closed": True, "after": 0,
                    "messages": []}
        t0 = time.monotonic()
        sent_err = None
        for kind, data in steps:
            try:
                if kind == "send":
                    s.send(data)
                elif kind == "send_fd":
                    fd = os.open("/dev/null", os.O_RDONLY)
                    try:
                        socket.send_fds(s, [data], [fd])
                    finally:
                        os.close(fd)
                elif kind == "big":
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 20)
                    payload = b'{"type":"hello","version":1,"pad":"' + \
                        b"x" * data + b'"}'
                    s.send(payload)
            except OSError as e:
                sent_err = errno_name(e)
                break
        msgs = []
        closed = False
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            s.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                d = s.recv(70000)
            except socket.timeout:
                break
            except ConnectionResetError:
                closed = True
                break
            if not d:
                closed = True
                break
            try:
                msgs.append(ipc_decode(d))
            except ValueError:
                msgs.append({"raw": d[:200].decode("latin-1")})
            if until is not None and until(msgs[-1]):
                break
        return {"connect": "ok", "closed": closed,
                "after": round(time.monotonic() - t0, 3), "messages": msgs,
                "send_error": sent_err}
    finally:
        s.close()


def errno_name(e):
    """The symbolic name of an OSError's errno."""
    return errno.errorcode.get(e.errno, str(e.errno)) if e.errno else str(e)
