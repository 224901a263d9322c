"""make run (scripts/run.sh) for real: "up" only once /healthz answers 200,
the first admin's password only then, a daemon that fails named with its
last log line, and SIGTERM stopping all the daemons.

run.sh runs from a copy in the hostgate's private directory (so that the
daemons' users need not reach the checkout), with HG_BUILD naming the
copied binaries and explicit state and run directories in that directory.
"""

import http.client
import os
import queue
import re
import shutil
import signal
import socket
import subprocess
import threading
import time

import pytest

import hglib

UP = re.compile(r"^run: hostgate is up on (https?)://127\.0\.0\.1:(\d+)/ ")
PASSWORD = re.compile(r"^run: created user admin, password: (\S+)$")


class Run:
    """scripts/run.sh started for hg, in a session of its own, with its
    output (stdout and stderr) read line by line."""

    def __init__(self, hg, env=None):
        self.hg = hg
        scripts = os.path.join(hg.dir, "scripts")
        if not os.path.isdir(scripts):
            os.mkdir(scripts)
            os.chmod(scripts, 0o755)
            for f in ("run.sh", "users.sh"):
                dst = os.path.join(scripts, f)
                shutil.copy(os.path.join(hglib.REPO, "scripts", f), dst)
                os.chmod(dst, 0o755)
        full = dict(hg.env)
        full["HG_BUILD"] = hg.bindir
        full.update(env or {})
        # As root in "user" mode, run.sh itself runs as the test user.
        argv = hg.wrap([os.path.join(scripts, "run.sh")])
        self.p = subprocess.Popen(argv, env=full, cwd=hg.dir,
                                  stdin=subprocess.DEVNULL,
                                  stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT,
                                  start_new_session=True)
        self.lines = []
        self.q = queue.Queue()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for raw in self.p.stdout:
            self.q.put(raw.decode("utf-8", "replace").rstrip("\n"))
        self.q.put(None)

    def next_line(self, deadline):
        """The next line of output, or None at its end or past deadline."""
        try:
            line = self.q.get(timeout=max(0.01, deadline - time.monotonic()))
        except queue.Empty:
            return None
        if line is not None:
            self.lines.append(line)
        return line

    def until(self, pattern, timeout=hglib.SLOW):
        """Read until a line matches pattern; returns the match, or None
        when the output ends first."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = self.next_line(deadline)
            if line is None:
                return None
            m = pattern.search(line)
            if m:
                return m
        raise AssertionError("no line matching %r within %.0fs:\n%s"
                             % (pattern.pattern, timeout, self.output()))

    def finish(self, timeout=hglib.SLOW):
        """Wait for run.sh to exit and for the end of its output; returns
        its exit status."""
        try:
            self.p.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError("run.sh did not exit within %.0fs:\n%s"
                                 % (timeout, self.output()))
        deadline = time.monotonic() + timeout
        while self.next_line(deadline) is not None:
            pass
        return self.p.returncode

    def output(self):
        return "\n".join(self.lines)

    def members(self):
        """(pid, argv) of the processes in run.sh's session."""
        out = []
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                if os.getsid(int(pid)) == self.p.pid:
                    with open("/proc/%s/cmdline" % pid, "rb") as f:
                        argv = f.read().decode("utf-8", "replace")
                    out.append((int(pid), argv.split("\0")[:-1]))
            except (ProcessLookupError, FileNotFoundError, PermissionError):
                pass
        return out

    def left(self):
        """Command lines still in run.sh's session (daemons, tail)."""
        return [" ".join(argv) for _, argv in self.members()]

    def settled(self, timeout=hglib.SLOW):
        """left() once the session has emptied, or what is still in it
        after timeout: a process that run.sh saw end may still be in the
        kernel's exit path (a zombie, argv already empty) for a moment."""
        deadline = time.monotonic() + timeout
        while True:
            left = self.left()
            if not left or time.monotonic() >= deadline:
                return left
            time.sleep(0.05)

    def kill(self):
        """Whatever is left of the session, killed (teardown only)."""
        if self.p.poll() is not None and not self.left():
            return      # the group is gone; its id may be another's now
        try:
            os.killpg(self.p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            self.p.wait(hglib.SLOW)
        except subprocess.TimeoutExpired:
            pass


@pytest.fixture
def run(hostgate_factory):
    """A function starting run.sh on a fresh, unstarted hostgate."""
    started = []

    def start(env=None, hg=None):
        hg = hg or hostgate_factory(start=False, name="run")
        r = Run(hg, env)
        started.append(r)
        return r
    yield start
    for r in started:
        r.kill()


def health_on(port):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=hglib.SLOW)
    try:
        conn.request("GET", "/healthz")
        return conn.getresponse().status
    finally:
        conn.close()


def test_run_says_up_after_healthz_200_then_the_password(run):
    r = run()
    up = r.until(UP)
    assert up, "run.sh ended without saying up:\n%s" % r.output()
    before = r.output()
    assert "password" not in before, before
    # The URL names the port frontd really got (HOSTGATE_LISTEN=...:0),
    # and the whole chain answers there.
    port = int(up.group(2))
    assert hglib.read_listen(r.hg.run) == ("127.0.0.1", port)
    assert health_on(port) == 200
    if hglib.EGRESSD:
        # It says so once egressd has linked to sandboxd.
        assert "(the egress proxy is linked: the +allowlist profiles are " \
            "available; Ctrl-C stops it)" in up.string, up.string
    pw = r.until(PASSWORD)
    assert pw, r.output()
    hg = r.hg
    hg.port = port
    s = hg.login("admin", pw.group(1))
    assert s.role == "admin"
    # Each daemon's stderr is kept in RUN_DIR/NAME.log.
    logs = {}
    for d in hglib.DAEMONS:
        with open(os.path.join(hg.run, d + ".log")) as f:
            logs[d] = f.read()
        assert d in logs[d], (d, logs[d])
    assert "listening on 127.0.0.1:%d" % port in logs["frontd"], \
        logs["frontd"]

    r.p.send_signal(signal.SIGTERM)
    assert r.finish() == 0, r.output()
    assert r.settled() == []
    assert "run: stopping hostgate" in r.output()
    assert not os.path.exists(hg.listen_path())


def test_second_start_shows_no_password(run, hostgate_factory):
    """The admin exists after the first start: no new one, no password."""
    hg = hostgate_factory(start=False, name="run")
    r = run(hg=hg)
    assert r.until(UP), r.output()
    r.p.send_signal(signal.SIGTERM)
    assert r.finish() == 0, r.output()
    r = run(hg=hg)
    assert r.until(UP), r.output()
    r.p.send_signal(signal.SIGTERM)
    assert r.finish() == 0, r.output()
    assert "password" not in r.output(), r.output()


def test_run_fails_on_a_held_port_and_names_frontd(run):
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen(1)
        port = held.getsockname()[1]
        r = run({"HOSTGATE_LISTEN": "127.0.0.1:%d" % port})
        rc = r.finish()
    out = r.output()
    assert rc != 0, out
    named = [line for line in out.splitlines() if line.startswith("run: ")
             and "frontd" in line and "Address already in use" in line]
    assert named, out
    assert "is up" not in out and "password" not in out, out
    assert r.settled() == []


def test_run_fails_when_healthz_stays_503(run):
    """A backend that never works (the docker runtime without an engine):
    never "up", never a password, and the admin it created is gone again,
    so that the next start makes a new one and shows its password."""
    docker = shutil.which("docker", path="/usr/sbin:/usr/bin:/sbin:/bin")
    if docker and subprocess.run([docker, "info"], capture_output=True,
                                 timeout=hglib.SLOW).returncode == 0:
        pytest.skip("a docker engine answers on this host")
    r = run({"HOSTGATE_RUNTIME": "docker", "HG_RUN_TIMEOUT": "3"})
    rc = r.finish()
    out = r.output()
    assert rc == 1, out
    assert any(line.startswith("run: sandboxd is not healthy after 3s "
                               "(/healthz 503:") for line in
               out.splitlines()), out
    assert "is up" not in out and "password" not in out, out
    assert r.settled() == []
    hg = r.hg
    hg.start("brokerd")
    hg.wait_control()
    assert hg.hgctl_ok("user", "list").stdout == ""


def test_run_checks_egressd_configuration_first(run):
    """egressd's own configuration (its hosts file) is checked with the
    others' before anything starts: its message, no daemon started."""
    missing = "/nonexistent/egress-hosts"
    r = run({"HOSTGATE_EGRESS_HOSTS": missing})
    assert r.finish() == 1, r.output()
    assert "HOSTGATE_EGRESS_HOSTS=%s" % missing in r.output(), r.output()
    assert not os.path.exists(os.path.join(r.hg.run, "sandboxd.log")), \
        r.output()
    assert "is up" not in r.output()
    assert r.settled() == []


def test_run_refuses_a_bad_timeout(run):
    r = run({"HG_RUN_TIMEOUT": "soon"})
    assert r.finish() == 2, r.output()
    assert "HG_RUN_TIMEOUT=soon" in r.output()
    assert r.settled() == []


def test_a_daemon_that_dies_takes_the_others_down(run):
    r = run()
    assert r.until(UP), r.output()
    sandboxd = [pid for pid, argv in r.members()
                if argv and argv[0].endswith("/sandboxd")]
    assert len(sandboxd) == 1, r.members()
    os.kill(sandboxd[0], signal.SIGKILL)
    assert r.finish() == 1, r.output()
    named = [line for line in r.output().splitlines()
             if line.startswith("run: sandboxd exited (status 137)")]
    assert named, r.output()
    assert r.settled() == []


def test_run_over_tls(run, hostgate_factory):
    """With a certificate, the health check and the URL are https."""
    hg = hostgate_factory(start=False, name="run", tls=True)
    r = run(hg=hg)
    up = r.until(UP)
    assert up and up.group(1) == "https", r.output()
    hg.port = int(up.group(2))
    assert hg.health().status == 200
    r.p.send_signal(signal.SIGTERM)
    assert r.finish() == 0, r.output()
