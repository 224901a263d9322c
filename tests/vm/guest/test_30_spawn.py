"""Spawns through the installed units, as users would: a command and a
terminal over WebSocket, each as its user's own uid, each in a cgroup of
its own under hostgate-sandboxd.service that carries its user's limits."""

import os
import re

import pytest

import hgvm as h

USERS = ("admin", "bob")


@pytest.mark.parametrize("user", USERS)
def test_command_as_own_uid(user):
    s = h.SHARED["sessions"][user]
    st = s.status()
    doc = s.run("id -u; id -g")
    assert doc["mode"] == "sandbox" and doc["backend"] == "bwrap", doc
    uid, gid = doc["stdout"].split()
    assert int(uid) == st["uid"], (doc, st["uid"])
    h.SHARED.setdefault("uids", {})[user] = st["uid"]


def test_uids_differ():
    uids = h.SHARED["uids"]
    assert len(set(uids.values())) == len(USERS), uids
    assert all(u >= 65536 for u in uids.values()), uids


@pytest.mark.parametrize("user", USERS)
def test_terminal_cgroup(user):
    """A terminal's shell: its uid, and the cgroup it was born in, with the
    user's memory.max, pids.max and cpu.weight in the cgroup above it."""
    s = h.SHARED["sessions"][user]
    st = s.status()
    t = s.terminal()
    try:
        t.send("echo UID-$(id -u)-END\n")
        m = t.expect(rb"UID-(\d+)-END")
        assert int(m.group(1)) == st["uid"]
        marker = "hgvm-term-%s" % user
        t.send("exec sh -c 'sleep 1000; : %s'\n" % marker)
        procs = h.wait_for(lambda: h.shells(marker), 120, marker)
        pid, uid, _ = procs[0]
        assert uid == st["uid"]
        cg = h.cgroup_of(pid)
        assert re.fullmatch(re.escape(h.SANDBOXD_CG) + "/u-%s/s-[0-9a-f]+"
                            % user, cg), cg
        ucg = os.path.dirname(cg)
        lim = st["limits"]
        assert h.read(ucg + "/memory.max") == str(lim["memory_max"])
        assert h.read(ucg + "/pids.max") == str(lim["pids_max"])
        assert h.read(ucg + "/cpu.weight") == str(lim["cpu_weight"])
        assert int(h.read(ucg + "/memory.swap.max")) == lim["swap_max"]
        r = s.req("DELETE", "/api/terminals/" + t.id)
        assert r.status == 200, r
        h.wait_for(lambda: not h.processes(marker), 120,
                   "the terminal's end")
        h.wait_for(lambda: not os.path.exists(cg), 120,
                   "its cgroup removed")
    finally:
        t.close()
