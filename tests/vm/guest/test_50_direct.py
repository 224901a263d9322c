"""Direct mode under systemd: an admin session's direct terminal leaves a
setsid'd child, which dies when the session is reverted and when the grant
expires (HOST_EXECUTION_DIRECT_TTL_SECONDS), its cgroup with it."""

import hgvm as h

TTL = 30


def direct_orphan(s, marker):
    """A direct terminal whose shell starts a setsid'd child; returns the
    terminal once the child runs."""
    st = s.mode("direct")
    assert st["mode"] == "direct", st
    t = s.terminal()
    t.send("setsid sh -c 'sleep 1000; : %s' </dev/null >/dev/null 2>&1 &\n"
           % marker)
    h.wait_for(lambda: h.shells(marker), 120, marker)
    return t


def test_revert_kills_setsid_child():
    s = h.SHARED["sessions"]["admin"]
    t = direct_orphan(s, "hgvm-direct-revert")
    try:
        assert s.mode("sandbox")["mode"] == "sandbox"
        h.wait_for(lambda: not h.shells("hgvm-direct-revert"), 120,
                   "the setsid'd child killed at revert")
    finally:
        t.close()


def test_no_spurious_warning():
    """The session's cgroup, killed and removed at revert, is no spawn
    whose cgroup could not be killed."""
    out = h.journal("hostgate-sandboxd.service")
    assert "killed 1 direct-mode spawns" in out
    assert "cannot kill its cgroup" not in out, out[-3000:]


def test_expiry_kills_setsid_child():
    h.configure(HOST_EXECUTION_DIRECT_TTL_SECONDS=TTL)
    s = h.SHARED["sessions"]["admin"]
    t = direct_orphan(s, "hgvm-direct-ttl")
    try:
        h.wait_for(lambda: not h.shells("hgvm-direct-ttl"), TTL + 180,
                   "the setsid'd child killed at the grant's expiry")
        r = s.get("/api/execution-mode")
        assert r.status == 200 and r.json()["mode"] == "sandbox", r
        assert "cannot kill its cgroup" not in \
            h.journal("hostgate-sandboxd.service")
    finally:
        t.close()
