"""The per-user spawner: spawns run as their user's own uid (root mode),
in their cgroups; what a spawn forked, setsid'd or daemonized is gone once
it ends; kill -9 of sandboxd leaves no spawn running; a network-profile
spawn held up at its start delays no other user's spawn; network
readiness never reads /proc/PID/syscall."""

import glob
import os
import re
import signal
import threading
import uuid

import pytest

import hglib
import policylib as pl
import sandboxlib as sl


# The configuration of `hg` (conftest.py): pooled per mode.
HOSTGATE = pl.config(carol=True,
                    HOST_EXECUTION_DIRECT_TTL_SECONDS=120,
                    HOSTGATE_MAX_COMMANDS_PER_USER=32)


def tagged(tag):
    """Pids of host processes whose command line holds tag."""
    out = []
    for path in glob.glob("/proc/[0-9]*/cmdline"):
        try:
            with open(path, "rb") as f:
                if tag.encode() in f.read():
                    out.append(int(path.split("/")[2]))
        except OSError:
            pass
    return out


def daemonize(tag, seconds=1000):
    """Shell that leaves a setsid'd, daemonized sleep named tag behind and
    says RUNNING once it is there (it polls for it: no fixed wait)."""
    return ("setsid bash -c 'exec -a %s sleep %d' </dev/null >/dev/null "
            "2>&1 & for i in $(seq 200); do pgrep -f %s >/dev/null && "
            "{ echo RUNNING; break; }; sleep 0.05; done" %
            (tag, seconds, tag))


def spawners(hg):
    return set(sl.children_of(hg.pid("sandboxd"), "hg-spawner"))


# -- identity -----------------------------------------------------------------

def test_spawns_run_as_their_users_uid(hg):
    """Root mode: `id -u` in a sandboxed and in a direct command is the
    user's own uid, different for two users, never 0 or sandboxd's; the
    workspace belongs to it."""
    if hg.mode != "root":
        pytest.skip("one uid for everything without root")
    sandboxd_uid = hglib.account(hglib.SERVICE_USERS["sandboxd"])[0]
    uids = {}
    for who in (pl.ADMIN, pl.CAROL):
        s = hg.login(*who)
        boxed = int(pl.run(s, "id -u; id -g")["stdout"].split()[0])
        pl.grant(s)
        try:
            res = pl.run(s, "id -u")
            assert res["mode"] == "direct", res
            direct = int(res["stdout"])
        finally:
            pl.set_mode(s, "sandbox")
        assert boxed == direct, (who, boxed, direct)
        ws = os.path.join(pl.workspace_root(hg), who[0])
        assert os.stat(ws).st_uid == boxed, (ws, os.stat(ws))
        uids[who[0]] = boxed
    bob = int(pl.run(hg.login(*pl.USER), "id -u")["stdout"])
    uids["bob"] = bob
    assert len(set(uids.values())) == 3, uids
    for u in uids.values():
        assert u not in (0, sandboxd_uid, os.getuid()), uids


# -- nothing outlives its spawn -----------------------------------------------

@pytest.mark.parametrize("mode_", ["sandbox", "direct"])
def test_daemonized_grandchild_dies_with_its_command(hg, mode_):
    """A setsid'd, daemonized grandchild is gone once its command ended
    (control: it ran while the command did)."""
    if mode_ == "direct" and hg.mode != "root":
        pytest.skip("no cgroup of its own for sandboxd without root here")
    s = hg.login(*pl.ADMIN)
    tag = "hg-tag-" + uuid.uuid4().hex[:12]
    if mode_ == "direct":
        pl.grant(s)
    try:
        res = pl.run(s, daemonize(tag))
    finally:
        if mode_ == "direct":
            pl.set_mode(s, "sandbox")
    assert res["mode"] == mode_, res
    assert "RUNNING" in res["stdout"], res
    hglib.wait_for(lambda: not tagged(tag),
                   what="the daemonized grandchild gone")


def test_kill9_of_sandboxd_leaves_no_spawn(hostgate_factory, mode):
    """kill -9 of sandboxd while a direct and a sandboxed command (each
    with a daemonized grandchild) run: none of them survives, nor the
    spawner."""
    if mode != "root":
        pytest.skip("direct spawns without a cgroup survive (no root)")
    hg = pl.own(hostgate_factory, "spawner-kill",
                HOST_EXECUTION_DIRECT_TTL_SECONDS=120)
    s = hg.login(*pl.ADMIN)
    tags = ["hg-tag-" + uuid.uuid4().hex[:12] for _ in range(4)]
    threads = []

    def run(session, cmd):
        th = threading.Thread(target=lambda: session.post(
            "/api/run_command", {"command": cmd, "timeout": 600}))
        th.daemon = True
        th.start()
        threads.append(th)

    run(s, daemonize(tags[0]) + "; exec -a %s sleep 1000" % tags[1])
    hglib.wait_for(lambda: tagged(tags[0]) and tagged(tags[1]),
                   what="the sandboxed command and its daemon")
    d = hg.login(*pl.ADMIN)
    pl.grant(d)
    run(d, daemonize(tags[2]) + "; exec -a %s sleep 1000" % tags[3])
    hglib.wait_for(lambda: all(tagged(t) for t in tags),
                   what="every spawn running")
    spawner = spawners(hg)
    assert spawner, "no spawner"
    hg.kill("sandboxd")
    hglib.wait_for(lambda: not any(tagged(t) for t in tags),
                   what="every spawn gone after kill -9 of sandboxd")
    hglib.wait_for(lambda: not any(os.path.exists("/proc/%d" % p)
                                   for p in spawner),
                   what="the spawner gone")
    for th in threads:
        th.join(hglib.SLOW)


# -- no spawn waits for another user's ----------------------------------------

def spawner_of(hg, user):
    """The pid of user's live spawner, from sandboxd's log line."""
    pids = [int(p) for p in re.findall(r"spawner (\d+) for %s\n" % user,
                                       hg.log_text("sandboxd"))]
    live = [p for p in pids if p in spawners(hg)]
    assert len(live) == 1, (user, pids, spawners(hg))
    return live[0]


def test_held_network_spawn_delays_no_other_user(hg):
    """alice's network-profile spawn is held at its start (her spawner is
    stopped, so the request waits in its socket): bob's command still
    answers meanwhile, alice's answers once she is released."""
    why = sl.network_profile_missing()
    if why:
        pytest.skip("the network profile cannot run here: " + why)
    alice = hg.login(*pl.ADMIN)
    bob = hg.login(*pl.USER)
    r = alice.post("/api/permission", {"permission": "workspace-write+network"})
    assert r.status == 200, r
    try:
        r = alice.post("/api/run_command", {"command": "true"})
        assert r.status == 200, r
        held = spawner_of(hg, "alice")
        box = {}
        done = threading.Event()

        def alice_net():
            box["r"] = alice.post("/api/run_command",
                                  {"command": "echo net-ok"})
            done.set()

        sent = hg.log_text("sandboxd").count("command for alice")
        os.kill(held, signal.SIGSTOP)
        try:
            th = threading.Thread(target=alice_net)
            th.start()
            # alice's request reached sandboxd (it logs the spawn first).
            hglib.wait_for(lambda: hg.log_text("sandboxd").count(
                "command for alice") > sent, what="alice's spawn sent")
            res = pl.run(bob, "echo bob-ok")
            assert res["stdout"] == "bob-ok\n", res
            assert not done.is_set(), box
        finally:
            os.kill(held, signal.SIGCONT)
        th.join(hglib.SLOW)
        assert box["r"].status == 200, box["r"]
        assert box["r"].json()["stdout"] == "net-ok\n", box["r"].json()
    finally:
        alice.post("/api/permission", {"permission": "workspace-write"})


def test_spawner_death_fails_its_pending_spawn_only(hg):
    """A spawner killed while a request waits in its socket: that spawn
    fails with a reason, sandboxd lives on, and the user's next spawn gets
    a new spawner."""
    bob = hg.login(*pl.USER)
    pl.run(bob, "true")
    old = spawner_of(hg, "bob")
    box = {}
    sent = hg.log_text("sandboxd").count("command for bob")
    os.kill(old, signal.SIGSTOP)
    th = threading.Thread(target=lambda: box.update(r=bob.post(
        "/api/run_command", {"command": "echo never"})))
    th.start()
    hglib.wait_for(lambda: hg.log_text("sandboxd").count(
        "command for bob") > sent, what="bob's spawn sent")
    os.kill(old, signal.SIGKILL)
    th.join(hglib.SLOW)
    assert box["r"].status == 500, box["r"]
    assert "spawner went away" in box["r"].error()["message"], box["r"]
    assert hg.alive("sandboxd")
    res = pl.run(bob, "echo again")
    assert res["stdout"] == "again\n", res
    assert spawner_of(hg, "bob") != old


def test_concurrent_short_spawns_all_reported(hg):
    """Thirty short commands of two users at once (children that exit
    before, or after, their spawner's answer reaches sandboxd): each is
    reaped and answered with its own exit status."""
    sessions = [hg.login(*pl.ADMIN), hg.login(*pl.USER)]

    def one(i):
        r = sessions[i % 2].post("/api/run_command",
                                 {"command": "exit %d" % (i % 7)})
        return r.status, r.json().get("exit_code")

    res = pl.at_once(30, one)
    assert res == [(200, i % 7) for i in range(30)], res


def test_network_readiness_reads_no_proc_syscall():
    """The network profile's readiness depends on no architecture and no
    fd number: nothing in sandboxd reads /proc/PID/syscall."""
    for path in glob.glob(os.path.join(hglib.REPO, "sandboxd", "*.c")):
        with open(path) as f:
            text = f.read()
        assert not re.search(r"/syscall\"", text), path


# -- OOM ----------------------------------------------------------------------

def test_oom_kill_is_reported(hostgate_factory, mode):
    """A command that outgrows its user's memory limit dies of SIGKILL
    (bwrap passes it on as exit status 137) and its result says "oom":
    true; a command that SIGKILLs itself says false; the user's next
    command runs."""
    if mode != "root":
        pytest.skip("no memory cgroup without root")
    hg = pl.own(hostgate_factory, "spawner-oom",
                HOSTGATE_USER_MEMORY_MAX="64M", HOSTGATE_USER_SWAP_MAX="0")
    bob = hg.login(*pl.USER)
    res = pl.run(bob, "kill -9 $$")
    assert res["exit_code"] == 137 and res["oom"] is False, res
    res = pl.run(bob, "python3 -c 'b = bytearray(1 << 30)'")
    assert res["exit_code"] == 137 and res["oom"] is True, res
    res = pl.run(bob, "echo still-ok")
    assert res["stdout"] == "still-ok\n" and res["oom"] is False, res
