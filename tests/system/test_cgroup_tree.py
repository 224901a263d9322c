"""sandboxd's cgroups and direct deadlines, with sandboxd alone: the test
speaks brokerd's side of sandbox.sock itself, so that "brokerd down" is
the normal case here. A direct grant's deadline ends its spawns, whatever
they setsid'd; so do kill_session and kill_user; a sandboxd killed with
SIGKILL and started again kills what the old one left; a past deadline and
bad ids are refused; health and usage say what enforces what.

Whole-cgroup kills need sandboxd's cgroups (root here; rootless on this
machine there is no delegated cgroup): where health says there are none,
only the process group dies, and the setsid'd orphan is checked to be
reported, not killed.
"""

import os
import random
import subprocess
import time

import pytest

import hglib
import sandboxlib as sl

RANGE0 = 1879048192


@pytest.fixture
def box(mode):
    """sandboxd alone, and brokerd's side of its socket."""
    with hglib.sandboxd_alone(mode, "cgtree") as box:
        yield box


def tag():
    return "%08x" % random.getrandbits(32)


def session():
    return "%032x" % random.getrandbits(128)


def containment(fb):
    res, err = fb.call("health")
    assert err is None, err
    return res["containment"]


def ids(hg):
    """The uid and gid brokerd would send (the range's, in root mode)."""
    if hg.mode == "root":
        return {"uid": RANGE0 + 4242, "gid": RANGE0 + 4242}
    return {}


def spawn_direct(hg, fb, t, sess=None, deadline=None, user="alice"):
    """A direct terminal whose shell leaves a setsid'd orphan; both carry
    the tag in their argv. Returns (result, error)."""
    script = ("setsid sh -c 'sleep 1000; : hgcg-%s-orphan' </dev/null "
              ">/dev/null 2>&1 & exec sh -c 'sleep 1000; : hgcg-%s-main'"
              % (t, t))
    req = dict(kind="terminal", mode="direct", permission="workspace-write",
               user=user, argv=["/bin/sh", "-c", script], env=[],
               timeout_ms=600000, output_cap=4096, cols=80, rows=24,
               term="xterm", **ids(hg))
    if sess is not None:
        req["session"] = sess
    if deadline is not None:
        req["deadline_ms"] = deadline
    return fb.call("spawn", **req)


def procs(t, which):
    return sl.host_processes(
        lambda a: any("hgcg-%s-%s" % (t, which) in x for x in a))


def wait_running(t):
    hglib.wait_for(lambda: procs(t, "main") and procs(t, "orphan"),
                   what="the spawn and its setsid'd orphan")


def now_ms():
    return int(time.time() * 1000)


def check_orphan(fb, t, timeout=hglib.SLOW):
    """The orphan dies with its cgroup; without cgroups it is killed here
    (and its survival is what health reports)."""
    if containment(fb)["kill"] is not None:
        assert sl.wait_gone(lambda a: any("hgcg-%s-orphan" % t in x
                                          for x in a), timeout) == []
    else:
        # its own session and group (setsid): the sleep inside goes too
        for pid, _, _ in procs(t, "orphan"):
            try:
                os.killpg(os.getpgid(pid), 9)
            except ProcessLookupError:
                pass


def test_health_containment(box):
    hg, fb = box
    c = containment(fb)
    for key in ("uid", "membership", "kill", "memory", "pids", "cpu", "io",
                "disk_quota", "not_enforced"):
        assert key in c, c
    # root: workspace images with a quota (HOSTGATE_USER_DISK_MAX's default)
    assert c["disk_quota"] is (hg.mode == "root"), c
    if hg.mode == "root":
        assert c["uid"] == "per-user", c
        assert c["membership"].startswith("cgroup v2"), c
        assert c["kill"] == "cgroup v2 cgroup.kill", c
        # limits through v1 on this machine, said so
        assert c["memory"] == "cgroup v1 memory.limit_in_bytes", c
        assert c["pids"] == "cgroup v1 pids.max", c
        assert c["spawn_memory"] is None and "v1" in \
            c["not_enforced"]["spawn_memory"], c
    else:
        assert c["uid"] == "shared", c
        assert c["membership"] is None, c
        assert c["not_enforced"]["membership"], c
        assert c["not_enforced"]["uid"], c
    log = hg.log_text("sandboxd")
    assert "containment: " in log, log
    for key, why in c["not_enforced"].items():
        if key not in ("uid", "disk_quota"):
            assert "NOT ENFORCED: " + why in log, (key, log)


def test_deadline_without_brokerd(box):
    """sandboxd ends a direct grant by itself at the deadline it holds."""
    hg, fb = box
    t, s = tag(), session()
    res, err = spawn_direct(hg, fb, t, sess=s, deadline=now_ms() + 600000)
    assert err is None, err
    wait_running(t)
    # the grant is cut short: its new deadline is just ahead
    res, err = fb.call("list")
    assert [g["session"] for g in res["grants"]] == [s], res
    res, err = fb.call("grant", session=s, user="alice",
                       deadline_ms=now_ms() + 300)
    assert err is None, err
    assert sl.wait_gone(lambda a: any("hgcg-%s-main" % t in x
                                      for x in a)) == []
    check_orphan(fb, t)
    hglib.wait_for(lambda: "reached its deadline" in hg.log_text("sandboxd"),
                   what="the deadline's log line")
    res, err = fb.call("list")
    assert not [p for p in res["procs"] if p["running"]], res
    assert res["grants"] == [], res


def test_past_deadline_refused(box):
    hg, fb = box
    t = tag()
    res, err = spawn_direct(hg, fb, t, sess=session(),
                            deadline=now_ms() - 1000)
    assert res is None
    assert err["code"] == "forbidden", err
    assert "deadline" in err["message"], err
    assert procs(t, "main") == [] and procs(t, "orphan") == []
    res, err = fb.call("list")
    assert res["procs"] == [], res


def test_bad_grant_refused(box):
    hg, fb = box
    for bad in ({"session": "x" * 32, "user": "alice", "deadline_ms": 1},
                {"session": "0" * 32, "user": "../a", "deadline_ms": 1},
                {"session": "0" * 32, "user": "alice", "deadline_ms": -5},
                {"session": "0" * 32, "user": "alice"}):
        res, err = fb.call("grant", **bad)
        assert err is not None and err["code"] == "bad_request", (bad, res)
    assert hg.alive("sandboxd")


def test_kill_session_kills_its_cgroup(box):
    hg, fb = box
    t, s = tag(), session()
    res, err = spawn_direct(hg, fb, t, sess=s, deadline=now_ms() + 600000)
    assert err is None, err
    wait_running(t)
    res, err = fb.call("kill_session", session=s, mode="direct")
    assert err is None and res["killed"] == 1, (res, err)
    assert sl.wait_gone(lambda a: any("hgcg-%s-main" % t in x
                                      for x in a)) == []
    check_orphan(fb, t)


def test_kill_user(box):
    hg, fb = box
    t = tag()
    res, err = spawn_direct(hg, fb, t)
    assert err is None, err
    wait_running(t)
    res, err = fb.call("kill_user", user="alice")
    assert err is None and res["killed"] == 1, (res, err)
    assert sl.wait_gone(lambda a: any("hgcg-%s-main" % t in x
                                      for x in a)) == []
    check_orphan(fb, t)
    res, err = fb.call("kill_user", user="../etc")
    assert err["code"] == "bad_request", err


def test_usage(box):
    hg, fb = box
    t = tag()
    if hg.mode == "root":
        res, err = spawn_direct(hg, fb, t)
        assert err is None, err
        wait_running(t)
    res, err = fb.call("usage", user="alice")
    assert err is None, err
    assert set(res) >= {"memory", "pids", "disk", "oom_kills"}, res
    if hg.mode == "root":
        # alice's workspace image, made by her first spawn
        assert res["disk"]["max"] == 10 << 30, res
        assert res["disk"]["used"] >= 0, res
    else:
        assert res["disk"] is None, res
    if hg.mode == "root":
        assert res["memory"]["max"] == 4 << 30, res     # the default
        assert res["memory"]["current"] > 0, res
        assert res["pids"]["max"] == 1024, res
        assert res["pids"]["current"] >= 2, res
        assert res["oom_kills"] == 0, res
        fb.call("kill_user", user="alice")
        sl.wait_gone(lambda a: any("hgcg-%s" % t in x for x in a))
    else:
        assert res["memory"] == {"current": None, "max": None}, res
    res, err = fb.call("usage", user="a/b")
    assert err["code"] == "bad_request", err


def test_restart_kills_leftovers(box):
    """kill -9 of sandboxd: whatever is still in its cgroup tree (a spawn's
    setsid'd orphan, or a process put there while sandboxd is down) is
    killed by the next sandboxd before it serves anything."""
    hg, fb = box
    c = containment(fb)
    if c["kill"] is None:
        pytest.skip("no cgroups for sandboxd here: nothing to find again")
    t, s = tag(), session()
    res, err = spawn_direct(hg, fb, t, sess=s, deadline=now_ms() + 600000)
    assert err is None, err
    wait_running(t)
    fb.close()
    hg.kill("sandboxd")
    assert sl.wait_gone(lambda a: any("hgcg-%s-main" % t in x
                                      for x in a)) == []
    # one more leftover for certain: a process in a spawn cgroup of the tree
    cg = os.path.join(c["base"], "u-alice", "s-0123456789abcdef")
    os.makedirs(cg, exist_ok=True)
    # One process, exec'd: a shell's child forked before the shell is
    # moved would stay outside the cgroup and outlive the test.
    planted = subprocess.Popen(["sh", "-c", "exec sleep 1000"],
                               start_new_session=True)
    try:
        with open(os.path.join(cg, "cgroup.procs"), "w") as f:
            f.write("%d\n" % planted.pid)
        hg.start("sandboxd")
        assert planted.wait(hglib.SLOW) == -9
        assert sl.wait_gone(lambda a: any("hgcg-%s-orphan" % t in x
                                          for x in a)) == []
        hglib.wait_for(lambda: "that a previous sandboxd left" in
                       hg.log_text("sandboxd"),
                       what="the sweep's log line")
        hglib.wait_for(lambda: not os.path.exists(cg),
                       what="the swept cgroup removed")
    finally:
        if planted.poll() is None:
            os.killpg(planted.pid, 9)
            planted.wait()


def test_ids_refused_in_root_mode(box):
    hg, fb = box
    if hg.mode != "root":
        pytest.skip("rootless: every spawn runs as sandboxd's own uid")
    t = tag()
    base = dict(kind="command", mode="sandbox", permission="workspace-write",
                user="alice", argv=["/bin/true"], env=[], timeout_ms=10000,
                output_cap=4096, cols=80, rows=24)
    sandbox = hglib.account(hglib.SERVICE_USERS["sandboxd"])
    for bad in ({}, {"uid": 0, "gid": 0}, {"uid": sandbox[0],
                                            "gid": sandbox[1]},
                {"uid": 999, "gid": 999}, {"uid": "x", "gid": 1},
                {"uid": RANGE0 + 1, "gid": 5}):
        res, err = fb.call("spawn", **dict(base, **bad))
        assert err is not None and err["code"] == "bad_request", (bad, res)
    assert procs(t, "main") == []
    assert hg.alive("sandboxd")


def test_a_tree_left_behind_fails_the_clean_up(mode):
    """hglib's clean-up: a process still in an instance's cgroup tree once
    its daemons are gone is reported (which fails the test) and killed,
    and the tree removed, rather than ignored."""
    if not hglib.IS_ROOT:
        pytest.skip("no cgroups of sandboxd's to leave without root")
    hg = hglib.Hostgate(mode, name="cgleft")
    top = [t for t in hg.cgroup_tops(made=False)
           if os.path.isdir(os.path.dirname(t))][0]
    leaf = os.path.join(top, "spawn-left")
    os.makedirs(leaf)
    p = subprocess.Popen(["sleep", "infinity"])
    try:
        with open(os.path.join(leaf, "cgroup.procs"), "w") as f:
            f.write(str(p.pid))
        # Nothing will end it: the short window is the wait's whole point.
        problems = hg.remove_cgroups(timeout=0.5)
        assert len(problems) == 1, problems
        assert "processes left in %s" % top in problems[0], problems
        assert str(p.pid) in problems[0], problems
        assert p.wait(hglib.SLOW) == -9
        assert not os.path.exists(top), "the tree was not removed"
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        hg.failed = False
        hg.cleanup()
