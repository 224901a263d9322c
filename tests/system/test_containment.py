"""Containment the kernel enforces: each an attack tried for real against
the running daemons. Nothing a direct-mode spawn started (a `cmd &` job,
a setsid child, a double-forked daemon, a terminal's background job)
outlives its grant's expiry, a manual revert, a logout, or a kill -9 of
sandboxd or brokerd; a user's memory bomb is stopped at their memory
limit and a fork bomb at their pids limit while another user's spawns go
on; from direct mode no other user's files or processes and no daemon
are reachable (root mode: a uid per user); rootless, a direct spawn can
see neither the state nor the run directory and can neither ptrace a
daemon nor read its memory; a workspace write past the quota fails with
EDQUOT.

Processes are found on the host by a marker unique to the test in their
argv (argv[0] set with bash's `exec -a`); every wait polls /proc or the
API for the condition itself, with a generous timeout."""

import json
import os
import signal
import subprocess
import threading
import time
import uuid

import pytest

import hglib
import policylib as pl
import sandboxlib as sl

MiB = 1 << 20
GONE = hglib.SLOW       # seconds for a kill to take effect (generous)
LONG_TTL = 600          # a grant that does not end by itself in a test
SHORT_TTL = 10          # a grant whose expiry a test waits for


def tag():
    return uuid.uuid4().hex[:10]


def prefix(t):
    return "hgc-" + t


def marked(t):
    """A predicate on argv: a process of this test (any argument starts
    with the marker)."""
    p = prefix(t)
    return lambda argv: any(a.startswith(p) for a in argv)


def survivors(t):
    return sl.host_processes(marked(t))


def kinds(t):
    """The argv[0] of the marked processes alive now."""
    return {argv[0] for _, _, argv in survivors(t)}


def reap(t):
    """SIGKILL whatever a failed test left (as root), so that no test's
    processes outlive it on the machine."""
    for pid, _, _ in survivors(t):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def assert_gone(t, timeout=GONE, what=""):
    left = sl.wait_gone(marked(t), timeout)
    assert not left, "%d processes survive %s: %r" % (
        len(left), what, [(pid, uid, argv[0]) for pid, uid, argv in left])


def own(factory, name, **env):
    """A private hostgate (alice admin, bob) with these settings."""
    return pl.own(factory, name, **env)


def containment(hg, session):
    """The "containment" object /api/status (or /healthz) reports, or {}
    when this build reports none."""
    st = session.get("/api/status").json()
    for doc in (st, st.get("sandboxd") or {}, hg.health().json(),
                hg.health().json().get("sandboxd") or {}):
        c = doc.get("containment") if isinstance(doc, dict) else None
        if isinstance(c, dict):
            return c
    return {}


def why(c, key):
    """The reason containment gives for not enforcing key."""
    return (c.get("not_enforced") or {}).get(key) or "%s is null" % key


def need_kill(hg, session):
    """Skip in rootless mode where no cgroup carries membership and kill
    (this machine gives an unprivileged sandboxd no delegated subtree)."""
    if hg.mode == "root":
        return
    c = containment(hg, session)
    if not c.get("kill"):
        pytest.skip("rootless here: no cgroup to kill through (%s)"
                    % why(c, "kill"))


def users_json(hg):
    return {u["name"]: u for u in hg.hgctl_json("user", "list")}


def user_ids(hg, name):
    """(uid, gid) brokerd gave a user, or None when it has none."""
    u = users_json(hg).get(name) or {}
    if isinstance(u.get("uid"), int):
        return u["uid"], u.get("gid")
    return None


def workspace(hg, user):
    return os.path.join(pl.workspace_root(hg), user)


def sandboxd_exe(hg):
    return os.path.realpath(hg.binary("sandboxd"))


def daemon_pids(hg):
    """{name: pid} of the daemons and of every other process running
    sandboxd's binary (the per-user spawners)."""
    out = {n: hg.pid(n) for n in hglib.DAEMONS}
    exe = sandboxd_exe(hg)
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == out["sandboxd"]:
            continue
        try:
            if os.path.realpath("/proc/%s/exe" % name) == exe:
                out["spawner-" + name] = int(name)
        except OSError:
            continue
    return out


# -- what direct mode leaves behind -------------------------------------------

# A direct-mode command that leaves a background job, a setsid child and
# a double-forked daemon, then stays (its own process becomes M-main).
ORPHANS = r'''M=%(m)s
(exec -a $M-bg sleep 1000) </dev/null >/dev/null 2>&1 &
setsid bash -c "exec -a $M-setsid sleep 1000" </dev/null >/dev/null 2>&1 &
/usr/bin/python3 -c 'import os, sys
if os.fork():
    sys.exit(0)
os.setsid()
if os.fork():
    os._exit(0)
os.execvp("sleep", [sys.argv[1], "1000"])' $M-daemon </dev/null >/dev/null 2>&1
%(tail)s'''
COMMAND_KINDS = ("bg", "setsid", "daemon")


class DirectCommand:
    """ORPHANS run through POST /api/run_command in a thread (the request
    returns only when the command is killed)."""

    def __init__(self, session, t, tail=None):
        self.box = {}
        tail = tail if tail is not None else "exec -a $M-main sleep 1000"
        cmd = ORPHANS % {"m": prefix(t), "tail": tail}

        def go():
            try:
                self.box["r"] = session.post(
                    "/api/run_command", {"command": cmd, "timeout": 500},
                    timeout=520)
            except Exception as e:      # noqa: BLE001 -- the daemon died
                self.box["e"] = e
        self.thread = threading.Thread(target=go, daemon=True)
        self.thread.start()

    def join(self, timeout=GONE):
        self.thread.join(timeout)
        return self.box.get("r")


def direct_terminal(session, t):
    """A direct-mode terminal with background jobs: a plain `sleep &` job
    and one in its own session. Returns the Terminal."""
    term = sl.Terminal(session)
    assert sl.terminal_listed(session, term.id)["mode"] == "direct"
    term.attach()
    out, rc = term.run("(exec -a %s-term sleep 1000) & "
                       "setsid bash -c 'exec -a %s-termsid sleep 1000' "
                       "</dev/null >/dev/null 2>&1 & echo started"
                       % (prefix(t), prefix(t)))
    assert rc == 0 and "started" in out, out
    return term


def start_direct(hg, session, t, terminal=True):
    """Direct mode for session, a DirectCommand and (terminal) a direct
    terminal, until every marked process is on the host. Returns the
    DirectCommand and the Terminal (or None)."""
    g = pl.grant(session)
    assert g["mode"] == "direct", g
    cmd = DirectCommand(session, t)
    term = direct_terminal(session, t) if terminal else None
    want = {prefix(t) + "-" + k for k in COMMAND_KINDS + ("main",)}
    if terminal:
        want |= {prefix(t) + "-term", prefix(t) + "-termsid"}
    hglib.wait_for(lambda: want <= kinds(t),
                   what="the direct-mode processes %s" % sorted(want))
    return cmd, term


def start_direct_live(hg, session, tags, tries=3):
    """start_direct, again (a new tag each time, appended to tags) while
    the grant ended before everything was up (a slow machine against a
    short TTL). Returns the DirectCommand, the Terminal and the grant."""
    for _ in range(tries):
        t = tag()
        tags.append(t)
        cmd, term = start_direct(hg, session, t)
        g = pl.mode_of(session)
        if g["mode"] == "direct":
            return cmd, term, g
        print("the grant ended before its processes were up; again")
        term.ws.close()
        reap(t)
        cmd.join()
    raise AssertionError("the machine was too slow to start everything "
                         "within a %s s grant, %d times" % (g.get(
                             "ttl_seconds"), tries))


@pytest.mark.parametrize("end", ["expiry", "revert", "logout"])
def test_direct_grant_end_leaves_nothing(hostgate_factory, end):
    """A direct grant ends (expiry, manual revert, logout): none of what
    its command and its terminal forked, setsid'd or daemonized is left."""
    ttl = SHORT_TTL if end == "expiry" else LONG_TTL
    hg = own(hostgate_factory, "cont-" + end,
             HOST_EXECUTION_DIRECT_TTL_SECONDS=ttl)
    alice = hg.login(*pl.ADMIN)
    need_kill(hg, alice)
    tags = []
    try:
        # Everything is up while the grant still runs: its end is what
        # has to end them.
        cmd, term, _ = start_direct_live(hg, alice, tags)
        t = tags[-1]
        if end == "expiry":
            assert_gone(t, ttl + GONE, "the grant's expiry")
            # sandboxd's timer and brokerd's end the grant at the same
            # deadline, in either order.
            hglib.wait_for(lambda: pl.mode_of(alice)["mode"] == "sandbox",
                           GONE, what="the API to say sandbox again")
        elif end == "revert":
            r = pl.set_mode(alice, "sandbox")
            assert r.status == 200 and r.json()["mode"] == "sandbox", r
            assert_gone(t, what="a manual revert")
        else:
            r = alice.post("/api/logout")
            assert r.status == 200, r
            assert_gone(t, what="logout")
        res = cmd.join()
        assert res is not None, "the direct command's request did not end"
        if res.status == 200:
            assert res.json()["exit_code"] != 0, res.json()
        term.ws.close()
        # The next spawn of a new session is sandboxed and works.
        again = hg.login(*pl.ADMIN)
        doc = pl.run(again, "echo ok")
        assert doc["mode"] == "sandbox" and doc["stdout"] == "ok\n", doc
    finally:
        for t in tags:
            reap(t)


def test_direct_command_end_leaves_nothing(hostgate_factory):
    """A direct-mode command that returns at once: what it left running
    (job, setsid child, double-forked daemon) dies with its spawn."""
    hg = own(hostgate_factory, "cont-end",
             HOST_EXECUTION_DIRECT_TTL_SECONDS=LONG_TTL)
    alice = hg.login(*pl.ADMIN)
    need_kill(hg, alice)
    t = tag()
    try:
        pl.grant(alice)
        doc = pl.run(alice, ORPHANS % {"m": prefix(t), "tail": "echo done"})
        assert doc["mode"] == "direct" and doc["stdout"] == "done\n", doc
        assert_gone(t, what="the end of their command")
        assert pl.mode_of(alice)["mode"] == "direct"
    finally:
        reap(t)


@pytest.mark.parametrize("when", ["restarted", "down"])
def test_sandboxd_kill9_leaves_nothing(hostgate_factory, when):
    """kill -9 of sandboxd while direct-mode processes run: none is left
    once sandboxd is back (their output and pty went with the old one:
    restarted at once, its sweep must find them), and none even while it
    is down (the spawns die with the sandboxd that owned them)."""
    hg = own(hostgate_factory, "cont-sbkill",
             HOST_EXECUTION_DIRECT_TTL_SECONDS=LONG_TTL)
    alice = hg.login(*pl.ADMIN)
    need_kill(hg, alice)
    t = tag()
    try:
        cmd, term = start_direct(hg, alice, t)
        hg.kill("sandboxd")
        if when == "down":
            assert_gone(t, what="a kill -9 of sandboxd, while it is down")
            assert not hg.alive("sandboxd")
        hg.start("sandboxd")
        assert_gone(t, what="a kill -9 of sandboxd and its restart")
        hg.wait_chain()
        cmd.join()
        term.ws.close()
        # The new sandboxd serves everyone, the user whose spawns it just
        # killed too, in direct mode and sandboxed.
        assert pl.mode_of(alice)["mode"] == "direct"
        doc = pl.run(alice, "echo ok")
        assert doc["stdout"] == "ok\n" and doc["mode"] == "direct", doc
        doc = pl.run(hg.login(*pl.USER), "echo ok")
        assert doc["stdout"] == "ok\n", doc
    finally:
        reap(t)


def test_brokerd_kill9_deadline_held_by_sandboxd(hostgate_factory):
    """kill -9 of brokerd during a grant: sandboxd holds the deadline and
    ends every direct-mode process at it, brokerd still down."""
    hg = own(hostgate_factory, "cont-brkill",
             HOST_EXECUTION_DIRECT_TTL_SECONDS=SHORT_TTL)
    alice = hg.login(*pl.ADMIN)
    need_kill(hg, alice)
    tags = []
    try:
        cmd, term, g = start_direct_live(hg, alice, tags)
        t = tags[-1]
        deadline = pl.iso_secs(g["expires_at"])
        hg.kill("brokerd")
        assert_gone(t, max(0, deadline - time.time()) + GONE,
                    "the grant's deadline with brokerd down")
        assert not hg.alive("brokerd")
        cmd.join()
        term.ws.close()
        hg.start("brokerd")
        hg.wait_healthy()
    finally:
        for t in tags:
            reap(t)


# -- limits: memory and pids --------------------------------------------------

# Holds some memory, says so in a file, waits for the test's go, then
# allocates far past the limit (bounded: 1 GiB, then it says it was not
# stopped).
MEMORY_BOMB = r'''
import os, time
hold = [b"\1" * (16 << 20)]
open("bomb-ready", "w").close()
while not os.path.exists("bomb-go"):
    time.sleep(0.02)
for i in range(64):
    hold.append(b"\1" * (16 << 20))
print("NOT-STOPPED %d MiB" % (16 * len(hold)))
'''


def test_memory_bomb_stopped_at_user_limit(hostgate_factory):
    """A non-admin user's command allocates far past
    HOSTGATE_USER_MEMORY_MAX: it is OOM-killed, its result and the audit
    say "oom": true, and another user's commands run meanwhile."""
    hg = own(hostgate_factory, "cont-mem", HOSTGATE_USER_MEMORY_MAX="64M",
             HOSTGATE_USER_DISK_MAX="0")
    alice, bob = hg.login(*pl.ADMIN), hg.login(*pl.USER)
    if hg.mode != "root":
        c = containment(hg, bob)
        if not c.get("memory"):
            pytest.skip("rootless here: no memory limit (%s)"
                        % why(c, "memory"))
    ws = workspace(hg, "bob")
    doc = pl.run(bob, "rm -f bomb-ready bomb-go; echo clean")
    assert doc["stdout"] == "clean\n", doc
    box = {}
    th = threading.Thread(target=lambda: box.update(r=bob.post(
        "/api/run_command", {"command": "/usr/bin/python3 -",
                             "stdin": MEMORY_BOMB,
                             "timeout": int(2 * hglib.SLOW)},
        timeout=3 * hglib.SLOW)), daemon=True)
    th.start()
    try:
        hglib.wait_for(lambda: os.path.exists(os.path.join(ws, "bomb-ready"))
                       or not th.is_alive(), what="the bomb's first block")
        assert th.is_alive(), box
        # Another user's command while the bomb holds its memory.
        doc = pl.run(alice, "echo alive")
        assert doc["stdout"] == "alive\n" and doc["exit_code"] == 0, doc
        with open(os.path.join(ws, "bomb-go"), "w"):
            pass
        th.join(3 * hglib.SLOW)
        assert not th.is_alive(), "the bomb's request did not end"
    finally:
        th.join(3 * hglib.SLOW)
    r = box["r"]
    assert r.status == 200, r
    res = r.json()
    assert "NOT-STOPPED" not in res["stdout"], res
    assert res.get("oom") is True, res
    assert res["exit_code"] != 0, res
    rec = pl.wait_audit(hg, action="spawn_end", user="bob", detail_oom=True)
    assert rec[-1]["detail"]["oom"] is True, rec[-1]
    # Both users go on: alice at once, bob with his next command.
    doc = pl.run(alice, "echo alive")
    assert doc["stdout"] == "alive\n", doc
    doc = pl.run(bob, "rm -f bomb-ready bomb-go; echo back")
    assert doc["stdout"] == "back\n" and doc.get("oom") is False, doc


# Forks children that block on a pipe until fork fails or 300 are up;
# writes the count, waits for go, then lets them all go.
FORK_BOMB = r'''
import os, time
r, w = os.pipe()
n, err = 0, "none"
while n < 300:
    try:
        pid = os.fork()
    except OSError as e:
        err = e.__class__.__name__
        break
    if pid == 0:
        os.close(w)
        os.read(r, 1)
        os._exit(0)
    n += 1
with open("fork-count.tmp", "w") as f:
    f.write("%d %s" % (n, err))
os.rename("fork-count.tmp", "fork-count")
while not os.path.exists("fork-go"):
    time.sleep(0.02)
print("FORKED %d %s" % (n, err))
'''
PIDS_MAX = 40


def test_fork_bomb_stopped_at_user_pids_limit(hostgate_factory):
    """A fork bomb fills HOSTGATE_USER_PIDS_MAX of its user and no more;
    meanwhile another user's spawns work."""
    hg = own(hostgate_factory, "cont-pids", HOSTGATE_USER_PIDS_MAX=PIDS_MAX,
             HOSTGATE_USER_DISK_MAX="0")
    alice, bob = hg.login(*pl.ADMIN), hg.login(*pl.USER)
    if hg.mode != "root":
        c = containment(hg, bob)
        if not c.get("pids"):
            pytest.skip("rootless here: no pids limit (%s)" % why(c, "pids"))
    ws = workspace(hg, "bob")
    pl.run(bob, "rm -f fork-count fork-go")
    box = {}
    th = threading.Thread(target=lambda: box.update(r=bob.post(
        "/api/run_command", {"command": "/usr/bin/python3 -",
                             "stdin": FORK_BOMB,
                             "timeout": int(2 * hglib.SLOW)},
        timeout=3 * hglib.SLOW)), daemon=True)
    th.start()
    count = os.path.join(ws, "fork-count")
    try:
        hglib.wait_for(lambda: os.path.exists(count) or not th.is_alive(),
                       what="the fork bomb at its ceiling")
        assert th.is_alive(), box
        with open(count) as f:
            n, err = f.read().split()
        assert err == "BlockingIOError", \
            "fork never failed: %s processes (limit %d)" % (n, PIDS_MAX)
        assert int(n) < PIDS_MAX, (n, PIDS_MAX)
        # The user's budget is full: another user's spawns still work.
        for _ in range(3):
            doc = pl.run(alice, "echo alive")
            assert doc["stdout"] == "alive\n", doc
        with sl.terminal(alice) as term:
            out, rc = term.run("echo term-$((6*7))")
            assert rc == 0 and "term-42" in out, out
        with open(os.path.join(ws, "fork-go"), "w"):
            pass
        th.join(3 * hglib.SLOW)
    finally:
        th.join(3 * hglib.SLOW)
    res = box["r"].json()
    assert res["stdout"].startswith("FORKED "), res
    doc = pl.run(bob, "rm -f fork-count fork-go; echo back")
    assert doc["stdout"] == "back\n", doc


# -- identity: a uid per user, and direct mode as the user's own -------------

# Tries every reach across users and into the daemons; ARGS is JSON:
# {"ws": [dirs], "files": [paths], "pids": {name: pid}, "sockets": [paths],
#  "procroot": [pids]}. Each result is "ok" or the errno name.
REACH = sl.PY_PRELUDE + r'''
P = json.loads(%r)
res = {"uid": os.getuid(), "gid": os.getgid()}
def seq(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        s.connect(path)
    finally:
        s.close()
for d in P["ws"]:
    res["list " + d] = oserr(lambda: os.listdir(d))
for f in P["files"]:
    res["open " + f] = oserr(lambda: open(f, "rb").close())
for name, pid in P["pids"].items():
    res["kill %%s %%d" %% (name, pid)] = oserr(lambda: os.kill(pid, 0))
for pid in P["procroot"]:
    res["root %%d" %% pid] = oserr(
        lambda: os.listdir("/proc/%%d/root/" %% pid))
    res["cwd %%d" %% pid] = oserr(lambda: os.listdir("/proc/%%d/cwd/" %% pid))
for s in P["sockets"]:
    res["connect " + s] = oserr(lambda: seq(s))
report(res)
'''


def reach(session, args):
    """Run REACH with args through session's run_command (the session's
    current mode); returns its RESULT and the spawn's mode."""
    r = session.post("/api/run_command", {
        "command": "/usr/bin/python3 - 2>&1",
        "stdin": REACH % json.dumps(args), "timeout": int(hglib.SLOW)})
    assert r.status == 200, r
    doc = r.json()
    out = doc["stdout"]
    line = [ln for ln in out.splitlines() if ln.startswith("RESULT ")]
    assert line, "no RESULT from the probe: %r" % doc
    return json.loads(line[-1][7:]), doc["mode"]


def state_targets(hg):
    """The state directory's secrets and the run directory's sockets."""
    files = [os.path.join(hg.state, f) for f in
             ("users.json", "audit.key", "store.db", "sessions.json",
              "audit.log")]
    files = [f for f in files if os.path.exists(f)]
    socks = [os.path.join(hg.run, f) for f in sorted(os.listdir(hg.run))
             if f.endswith(".sock")] + [os.path.join(hg.run, hglib.SOCK_FRONT)]
    assert len(files) >= 3 and len(socks) >= 3, (files, socks)
    return files, socks


@pytest.fixture
def two_users(hostgate_factory):
    """A hostgate with bob's workspace holding a secret and bob's sandboxed
    terminal running a marked process; yields (hg, alice, bob, the marked
    pid, the marker's tag)."""
    hg = own(hostgate_factory, "cont-id",
             HOST_EXECUTION_DIRECT_TTL_SECONDS=LONG_TTL)
    alice, bob = hg.login(*pl.ADMIN), hg.login(*pl.USER)
    t = tag()
    doc = pl.run(bob, "echo %s-secret > secret.txt; echo ok" % prefix(t))
    assert doc["stdout"] == "ok\n", doc
    assert os.path.exists(os.path.join(workspace(hg, "bob"), "secret.txt"))
    # alice's first spawn: her spawner runs too (a target below).
    assert pl.run(alice, "true")["exit_code"] == 0
    term = sl.Terminal(bob)
    try:
        term.attach()
        out, rc = term.run("(exec -a %s-bob sleep 1000) & echo started"
                           % prefix(t))
        assert rc == 0 and "started" in out, out
        found = hglib.wait_for(lambda: [p for p, _, a in survivors(t)
                                        if a[0] == prefix(t) + "-bob"],
                               what="bob's sandboxed process on the host")
        yield hg, alice, bob, found[0], t
    finally:
        term.close()
        reap(t)


def test_direct_mode_reaches_no_other_user_and_no_daemon(two_users):
    """From alice's direct-mode command: bob's workspace cannot be listed
    or read, bob's sandboxed process cannot be signalled (EPERM) nor its
    /proc/PID/root entered, no daemon or spawner can be signalled, the
    state directory's files and the run directory's sockets cannot be
    opened. The same probe as root reaches everything: its targets are
    real."""
    hg, alice, bob, bob_pid, t = two_users
    if hg.mode != "root":
        pytest.skip("a uid per user needs sandboxd started as root")
    files, socks = state_targets(hg)
    ws = workspace(hg, "bob")
    args = {"ws": [ws], "files": [os.path.join(ws, "secret.txt")] + files,
            "pids": dict(daemon_pids(hg), bob=bob_pid),
            "sockets": socks, "procroot": [bob_pid]}
    # The control: the same probe as root on the host, outside any spawn.
    r = subprocess.run(["/usr/bin/python3", "-c", REACH % json.dumps(args)],
                       capture_output=True, text=True, timeout=hglib.SLOW,
                       cwd="/")
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("RESULT ")]
    assert lines, (r.stdout, r.stderr)
    control = json.loads(lines[-1][7:])
    bad = {k: v for k, v in control.items()
           if k not in ("uid", "gid") and v != "ok"}
    assert not bad, "the probe's targets are not reachable even by root: " \
        "%r" % bad

    pl.grant(alice)
    got, mode = reach(alice, args)
    assert mode == "direct", mode
    # Direct mode runs as alice's own uid: no daemon's, not bob's, not 0.
    daemons = {hglib.account(u)[0] for u in hglib.SERVICE_USERS.values()}
    assert got["uid"] != 0 and got["uid"] not in daemons, got
    assert got["uid"] != os.stat(ws).st_uid, got
    ids = user_ids(hg, "alice")
    assert ids is not None, "hgctl user list gives alice no uid"
    assert got["uid"] == ids[0], (got, ids)
    assert bob_pid in [p for p, _, _ in survivors(t)]
    assert os.stat("/proc/%d" % bob_pid).st_uid == user_ids(hg, "bob")[0]
    reached = {k: v for k, v in got.items()
               if k not in ("uid", "gid") and v == "ok"}
    assert not reached, "direct mode reached: %r" % reached
    for k, v in got.items():
        if k.startswith("kill "):
            assert v == "EPERM", (k, v)
        if k.startswith(("list ", "root ", "cwd ")):
            assert v == "EACCES", (k, v)


def test_sandboxed_command_reaches_no_other_user_and_no_daemon(two_users):
    """The same probe from alice's sandboxed command (and bob's): nothing
    of the other user's, of the daemons' or of the state is in reach."""
    hg, alice, bob, bob_pid, t = two_users
    files, socks = state_targets(hg)
    ws_b, ws_a = workspace(hg, "bob"), workspace(hg, "alice")
    pl.run(alice, "true")     # alice's workspace exists
    pids = daemon_pids(hg)
    for session, other, victim in ((alice, ws_b, {"bob": bob_pid}),
                                   (bob, ws_a, {})):
        args = {"ws": [other], "files": files + [os.path.join(ws_b,
                                                              "secret.txt")]
                if session is alice else files,
                "pids": dict(pids, **victim), "sockets": socks,
                "procroot": list(victim.values())}
        got, mode = reach(session, args)
        assert mode == "sandbox", mode
        reached = {k: v for k, v in got.items()
                   if k not in ("uid", "gid") and v == "ok"}
        assert not reached, "%s's sandbox reached: %r" % (session.user,
                                                         reached)


# -- rootless: the mount namespace and non-dumpable daemons -------------------

PTRACE = sl.PY_PRELUDE + r'''
P = json.loads(%r)
res = {}
for d in P["dirs"]:
    try:
        res["list " + d] = sorted(os.listdir(d))
    except OSError as e:
        res["list " + d] = errno.errorcode.get(e.errno, str(e.errno))
for f in P["files"]:
    res["open " + f] = oserr(lambda: open(f, "rb").close())
for s in P["sockets"]:
    def seq():
        c = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            c.connect(s)
        finally:
            c.close()
    res["connect " + s] = oserr(seq)
for name, pid in P["pids"].items():
    res["ptrace %%s" %% name] = sc(101, 16, pid, 0, 0)   # PTRACE_ATTACH
    def mem():
        with open("/proc/%%d/mem" %% pid, "rb") as f:
            f.read(1)
    res["mem %%s" %% name] = oserr(mem)
    res["environ %%s" %% name] = oserr(
        lambda: open("/proc/%%d/environ" %% pid, "rb").read(1))
res["uid"] = os.getuid()
report(res)
'''


def test_rootless_direct_mode_hides_state_and_daemons(hostgate_factory):
    """Rootless (one uid for all): a direct-mode command cannot see the
    state and run directories (mount namespace: nothing of them but the
    way to its own workspace, no other user's workspace) and can neither
    ptrace any daemon nor read its memory (every daemon non-dumpable)."""
    if hglib.IS_ROOT and hostgate_factory.mode != "user":
        pytest.skip("the rootless case: [user] mode")
    hg = own(hostgate_factory, "cont-rootless",
             HOST_EXECUTION_DIRECT_TTL_SECONDS=LONG_TTL)
    alice = hg.login(*pl.ADMIN)
    # bob's workspace exists: one that must not be in reach.
    assert pl.run(hg.login(*pl.USER), "true")["exit_code"] == 0
    files, socks = state_targets(hg)
    pl.grant(alice)
    assert pl.run(alice, "true")["exit_code"] == 0   # her spawner runs
    pids = daemon_pids(hg)
    wsroot = pl.workspace_root(hg)
    args = {"dirs": [hg.state, hg.run, wsroot], "files": files,
            "sockets": socks, "pids": pids}
    r = alice.post("/api/run_command", {
        "command": "/usr/bin/python3 - 2>&1", "stdin": PTRACE % json.dumps(
            args), "timeout": int(hglib.SLOW)})
    assert r.status == 200, r
    doc = r.json()
    assert doc["mode"] == "direct", doc
    line = [ln for ln in doc["stdout"].splitlines()
            if ln.startswith("RESULT ")]
    assert line, doc
    got = json.loads(line[-1][7:])
    # The same uid as the daemons: only the namespace and the dumpable
    # flag stand in the way.
    assert got["uid"] == hg.daemon_uid, got
    problems = []
    mine = workspace(hg, "alice")
    for d in (hg.state, hg.run, wsroot):
        seen = got["list " + d]
        real = set(os.listdir(d))
        # Only the way to the spawn's own workspace may be there.
        rel = os.path.relpath(mine, d)
        if not rel.startswith(".."):
            real.discard(rel.split(os.sep)[0])
        if isinstance(seen, list) and set(seen) & real:
            problems.append("direct mode sees %s: %r"
                            % (d, sorted(set(seen) & real)))
    reached = {k: v for k, v in got.items()
               if k.startswith(("open ", "connect ", "ptrace ", "mem ",
                                "environ ")) and v == "ok"}
    if reached:
        problems.append("rootless direct mode reached: %r" % reached)
    # The daemons are really non-dumpable: the kernel gives their /proc
    # files to root.
    for name, pid in pids.items():
        if os.stat("/proc/%d/mem" % pid).st_uid != 0:
            problems.append("%s is dumpable" % name)
    assert not problems, "; ".join(problems)


# -- the workspace quota ------------------------------------------------------

QUOTA_WRITER = r'''
import errno, os
n, err = 0, "none"
try:
    for i in range(12):
        with open("fill-%d" % i, "wb") as f:
            for j in range(8):
                f.write(b"\1" * (1 << 20))
                f.flush()
                os.fsync(f.fileno())
                n += 1
except OSError as e:
    err = errno.errorcode.get(e.errno, str(e.errno))
print("WROTE %d %s" % (n, err))
for i in range(12):
    try:
        os.unlink("fill-%d" % i)
    except OSError:
        pass
'''


def test_workspace_write_past_quota_fails_edquot(hostgate_factory):
    """HOSTGATE_USER_DISK_MAX=32M: a write past it fails with EDQUOT."""
    if hostgate_factory.mode != "root":
        pytest.skip("disk quotas need sandboxd started as root")
    hg = own(hostgate_factory, "cont-disk", HOSTGATE_USER_DISK_MAX="32M")
    bob = hg.login(*pl.USER)
    r = bob.post("/api/run_command", {"command": "/usr/bin/python3 - 2>&1",
                                      "stdin": QUOTA_WRITER,
                                      "timeout": int(hglib.SLOW)})
    assert r.status == 200, r
    out = r.json()["stdout"]
    wrote = [ln.split() for ln in out.splitlines() if ln.startswith("WROTE")]
    assert wrote, out
    n, err = int(wrote[-1][1]), wrote[-1][2]
    assert err == "EDQUOT", "write past the quota: %s after %d MiB" % (err, n)
    assert n <= 32, n
