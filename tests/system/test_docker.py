"""The docker runtime (HOSTGATE_RUNTIME=docker): the exact docker command
lines sandboxd runs (checked against a fake docker CLI that logs its argv),
and the failure path with no engine: every spawn fails with a reason that
names docker, and nothing runs on the host instead."""

import json
import os
import shutil
import subprocess

import pytest

import hglib
import sandboxlib as sl

HERE = os.path.dirname(os.path.abspath(__file__))
FAKE = os.path.join(HERE, "fake-docker")
IMAGE = "registry.example/hg-test:1"
# Where sandboxd looks for docker: its PATH, then these (backend.c).
SYSTEM_DIRS = ("/usr/bin", "/bin", "/usr/local/bin", "/usr/sbin", "/sbin")


class FakeDocker:
    """The fake docker CLI of one hostgate: its directory, log and state."""

    def __init__(self, hg, engine="up"):
        self.dir = os.path.join(hg.dir, "fakebin")
        os.mkdir(self.dir)
        os.chmod(self.dir, 0o777)
        self.path = os.path.join(self.dir, "docker")
        shutil.copy(FAKE, self.path)
        os.chmod(self.path, 0o755)
        self.log = os.path.join(self.dir, "docker.log")
        self.state = os.path.join(self.dir, "docker.state")
        open(self.log, "w").close()
        os.chmod(self.log, 0o666)
        self.set_state(engine=engine, containers={})

    def set_state(self, **kw):
        st = self.get_state() if os.path.exists(self.state) else {}
        st.update(kw)
        with open(self.state, "w") as f:
            json.dump(st, f)
        os.chmod(self.state, 0o666)

    def get_state(self):
        with open(self.state) as f:
            return json.load(f)

    def calls(self):
        """The logged calls: [{"argv", "uid", "env"}]."""
        with open(self.log) as f:
            return [json.loads(l) for l in f if l.strip()]

    def argvs(self):
        return [c["argv"] for c in self.calls()]

    def clear(self):
        open(self.log, "w").close()


def docker_hostgate(factory, engine="up"):
    """A hostgate on the docker runtime with the fake docker first on its
    PATH; the users are added once it answers."""
    hg = factory(env={"HOSTGATE_RUNTIME": "docker",
                      "HOSTGATE_DOCKER_IMAGE": IMAGE}, start=False)
    fake = FakeDocker(hg, engine)
    hg.env["PATH"] = fake.dir + ":" + hg.env["PATH"]
    start(hg, 200 if engine == "up" else 503)
    return hg, fake


def start(hg, status):
    """Start the daemons; wait for /healthz to answer status; add users."""
    hg.start_all(wait=False)
    try:
        # The chain linked and the backend's state known: only then does
        # /healthz say what the backend is, and hgctl find brokerd.
        r = hg.wait_chain()
        assert r.status == status, r
        hg.wait_control()
    except AssertionError as e:
        hg.failed = True
        raise AssertionError("%s\n%s" % (e, hg.logs())) from None
    hg.add_user(*hglib.ADMIN, admin=True)
    hg.add_user(*hglib.USER)


def workspace(hg, user):
    return os.path.join(hg.state, "workspaces", user)


def run_argv(ws, user="bob", profile="rw"):
    return ["run", "--detach", "--name", "hostgate-%s-%s" % (user, profile),
            "--label=hostgate.user=%s" % user, "--init", "--cap-drop=ALL",
            "--security-opt=no-new-privileges", "--pids-limit=512",
            "--read-only", "--tmpfs=/tmp:size=256m", "--network=none",
            "--volume=%s:%s:rw" % (ws, ws), "--workdir=%s" % ws, IMAGE,
            "sleep", "infinity"]


def exec_argv(ws, argv, cwd=None, env=(), tty=False, user="bob",
              term="dumb"):
    return (["exec", "--interactive"] + (["--tty"] if tty else []) +
            ["--workdir=%s" % (cwd or ws),
             "--env=PATH=/usr/local/bin:/usr/bin:/bin", "--env=HOME=%s" % ws,
             "--env=TERM=%s" % term, "--env=LANG=C.UTF-8",
             "--env=HOSTGATE_MODE=sandbox"] +
            ["--env=%s" % e for e in env] +
            ["hostgate-%s-rw" % user] + list(argv))


INSPECT = ["inspect", "--format", "{{.State.Status}}"]


def test_docker_command_lines(hostgate_factory):
    hg, fake = docker_hostgate(hostgate_factory)
    h = hg.health().json()
    assert h["backend"] == {"name": "docker", "ok": True, "reason": None}, h
    assert fake.argvs() == [["info", "--format", "{{.ServerVersion}}"]]
    fake.clear()

    bob = hg.login(*hglib.USER)
    ws = workspace(hg, "bob")
    cmd = "echo out-$((2+3)); pwd; echo err >&2; mkdir -p sub"
    r = bob.post("/api/run_command", {"command": cmd,
                                      "env": {"HG_X": "1 2"}})
    assert r.status == 200, r
    doc = r.json()
    assert doc["stdout"] == "out-5\n%s\n" % ws, doc
    assert doc["stderr"] == "err\n" and doc["exit_code"] == 0, doc
    assert doc["mode"] == "sandbox" and doc["backend"] == "docker", doc
    # First spawn: the container is missing, so it is created.
    assert fake.argvs() == [
        INSPECT + ["hostgate-bob-rw"],
        run_argv(ws),
        exec_argv(ws, ["/bin/bash", "-c", cmd], env=["HG_X=1 2"]),
    ]
    # The docker CLI gets a clean environment, nothing of the daemons'.
    for c in fake.calls():
        assert c["uid"] != 0, c
        assert sorted(c["env"]) == ["LANG", "PATH"], c["env"]
    fake.clear()

    # Running container: no new one; cwd becomes --workdir.
    r = bob.post("/api/run_command", {"command": "pwd", "cwd": "sub"})
    assert r.status == 200 and r.json()["stdout"] == ws + "/sub\n", r
    assert fake.argvs() == [
        INSPECT + ["hostgate-bob-rw"],
        exec_argv(ws, ["/bin/bash", "-c", "pwd"], cwd=ws + "/sub"),
    ]
    fake.clear()

    # Python: the code on stdin, never in argv.
    r = bob.post("/api/run_python", {"code": "print(6*7)"})
    assert r.status == 200 and r.json()["stdout"] == "42\n", r
    assert fake.argvs()[-1] == exec_argv(ws, ["/usr/bin/python3", "-"])
    fake.clear()

    # A stopped container is started, not created again.
    fake.set_state(containers={"hostgate-bob-rw": "exited"})
    r = bob.post("/api/run_command", {"command": "true"})
    assert r.status == 200, r
    assert fake.argvs() == [
        INSPECT + ["hostgate-bob-rw"],
        ["start", "hostgate-bob-rw"],
        exec_argv(ws, ["/bin/bash", "-c", "true"]),
    ]
    fake.clear()

    # A terminal: exec with a tty, and its pty works end to end.
    with sl.terminal(bob) as t:
        sl_round_trip(t)
    assert fake.argvs()[-1] == exec_argv(ws, ["/bin/bash", "-i"], tty=True,
                                         term="xterm-256color")
    fake.clear()

    # Each user has a container of their own.
    alice = hg.login(*hglib.ADMIN)
    r = alice.post("/api/run_command", {"command": "true"})
    assert r.status == 200, r
    assert fake.argvs()[1] == run_argv(workspace(hg, "alice"), user="alice")


def sl_round_trip(t):
    t.ws.send_binary(b"echo dock-$((6*7))-ok\n")
    t.ws.read_until(rb"dock-42-ok")


def assert_refused(hg, session, fake=None):
    """Every kind of spawn fails with 503 and a reason naming docker, and
    nothing ran: no marker file, no docker exec."""
    marker = "ran-on-host"
    ws = workspace(hg, "bob")
    reasons = []
    for path, body in (("/api/run_command", {"command": "touch " + marker}),
                       ("/api/run_python",
                        {"code": "open(%r, 'w')" % marker}),
                       ("/api/terminals", {"cols": 80, "rows": 24})):
        r = session.post(path, body)
        assert r.status == 503, (path, r)
        err = r.error()
        assert err["code"] == "unavailable", err
        assert "docker" in err["message"].lower(), err
        reasons.append(err["message"])
    for root, dirs, files in os.walk(os.path.join(hg.state, "workspaces")):
        assert marker not in files, root
    if fake:
        assert not [a for a in fake.argvs() if a[0] == "exec"], fake.argvs()
    assert not os.path.exists(os.path.join(ws, marker))
    return reasons


def test_docker_engine_down_at_start(hostgate_factory):
    hg, fake = docker_hostgate(hostgate_factory, engine="down")
    h = hg.health()
    assert h.status == 503, h
    be = h.json()["backend"]
    assert be["name"] == "docker" and be["ok"] is False, be
    assert "docker" in be["reason"] and "Cannot connect" in be["reason"], be
    bob = hg.login(*hglib.USER)
    st = bob.get("/api/status")
    if st.status == 200 and "backend" in st.json():
        assert st.json()["backend"]["ok"] is False, st.json()
    assert_refused(hg, bob, fake)


def test_docker_engine_gone_after_start(hostgate_factory):
    hg, fake = docker_hostgate(hostgate_factory)
    fake.set_state(engine="down")
    bob = hg.login(*hglib.USER)
    reasons = assert_refused(hg, bob, fake)
    assert any("Cannot connect" in r for r in reasons), reasons


def real_docker():
    for d in SYSTEM_DIRS:
        p = os.path.join(d, "docker")
        if os.access(p, os.X_OK):
            return p
    return None


def test_docker_real_cli_without_engine(hostgate_factory):
    docker = real_docker()
    if docker is None:
        pytest.skip("no docker CLI on this host")
    r = subprocess.run([docker, "info", "--format", "{{.ServerVersion}}"],
                       capture_output=True, text=True, timeout=hglib.SLOW,
                       env={"PATH": "/usr/bin:/bin"})
    if r.returncode == 0:
        pytest.skip("a docker engine answers on this host")
    hg = hostgate_factory(env={"HOSTGATE_RUNTIME": "docker"}, start=False)
    start(hg, 503)
    be = hg.health().json()["backend"]
    assert be["name"] == "docker" and be["ok"] is False, be
    assert "docker" in be["reason"], be
    bob = hg.login(*hglib.USER)
    assert_refused(hg, bob)
    assert hg.health().status == 503


def test_docker_cli_missing(hostgate_factory):
    if real_docker() is not None:
        pytest.skip("a docker CLI is installed in %s, where sandboxd also "
                    "looks" % os.path.dirname(real_docker()))
    hg = hostgate_factory(env={"HOSTGATE_RUNTIME": "docker"}, start=False)
    start(hg, 503)
    be = hg.health().json()["backend"]
    assert be["ok"] is False and "docker" in be["reason"], be
    bob = hg.login(*hglib.USER)
    assert_refused(hg, bob)
