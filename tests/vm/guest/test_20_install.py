"""The installed units under systemd: all four running, sandboxd in the
cgroup subtree systemd delegates to it, the first admin made with hgctl
and a second user, both logging in over HTTP; hgctl's status and config
as root; limits enforced through cgroup v2."""

import os

import hgvm as h


def test_units_active():
    assert h.unit_prop("hostgate.target", "ActiveState") == "active"
    assert h.unit_prop("hostgate.target", "UnitFileState") == "enabled"
    for unit in h.UNITS:
        assert h.unit_prop(unit, "ActiveState") == "active", h.status_text()


def test_sandboxd_delegated():
    assert h.unit_prop("hostgate-sandboxd.service", "Delegate") == "yes"
    pid = h.main_pid("hostgate-sandboxd.service")
    assert h.cgroup_of(pid) == h.SANDBOXD_CG + "/daemon"
    st = os.stat(h.SANDBOXD_CG + "/daemon")
    assert st.st_uid == h.pwd.getpwnam("hostgate-sandbox").pw_uid


def test_users_log_in():
    h.add_user("admin", admin=True)
    h.add_user("bob")
    sessions = {u: h.login(u) for u in ("admin", "bob")}
    assert sessions["admin"].role == "admin"
    assert sessions["bob"].role == "user"
    h.SHARED["sessions"] = sessions


def test_status_cgroup_v2():
    st = h.SHARED["sessions"]["admin"].status()
    c = st["containment"]
    assert c["uid"] == "per-user", c
    assert c["kill"] == "cgroup v2 cgroup.kill", c
    for what in ("memory", "pids", "cpu", "membership"):
        assert c[what].startswith("cgroup v2"), c
    assert c["disk_quota"] is True, c


def test_hgctl_status_config():
    # Every daemon up, egressd too (as sandboxd sees it, once linked).
    def running():
        r = h.sh("hgctl", "status", check=False)
        return r if r.returncode == 0 else None
    out = h.wait_for(running, 60, "hgctl status running").stdout
    assert "cgroup v2" in out, out
    assert "\negressd\tyes\t" in out, out
    out = h.sh("hgctl", "config").stdout
    assert "HOSTGATE_" in out, out
