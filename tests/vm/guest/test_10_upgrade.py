"""An upgrade from the previous release's package (tests/vm/previous),
data kept: installed offline and started, a user and a login session made
on it, then this package installed over it. The user, the session and the
audit chain survive, and every unit runs the new binaries."""

import os

import hgvm as h


def version(path=None):
    if path:
        return h.sh("dpkg-deb", "-f", path, "Version").stdout.strip()
    return h.sh("dpkg-query", "-W", "-f", "${Version}",
                "hostgate").stdout.strip()


def test_install_previous():
    prev = h.deb("previous")
    h.apt("install", prev)
    assert version() == version(prev)
    h.sh("systemctl", "enable", "--now", "hostgate.target")
    # Its units deny bwrap sethostname(2) (ProtectHostname=): it cannot
    # spawn under systemd, but it runs, and keeps users and sessions.
    h.wait_healthy(backend=False)
    h.add_user("keeper")
    s = h.login("keeper")
    assert s.status()["user"] == "keeper"
    h.SHARED["keeper"] = s
    h.SHARED["old_pids"] = {u: h.main_pid(u) for u in h.UNITS}


def test_upgrade_keeps_data():
    new = h.deb("new")
    assert version(new) != version()
    h.apt("install", new)
    assert version() == version(new)
    h.wait_healthy()
    for unit in h.UNITS:
        assert h.unit_prop(unit, "ActiveState") == "active", h.status_text()
        pid = h.main_pid(unit)
        # restarted, and on the files the package just put there: a
        # process still on the old binary shows it "(deleted)".
        assert pid != h.SHARED["old_pids"][unit], unit
        exe = os.readlink("/proc/%d/exe" % pid)
        name = unit[len("hostgate-"):-len(".service")]
        assert exe == "/usr/sbin/" + name, (unit, exe)
        assert os.stat("/proc/%d/exe" % pid).st_ino == \
            os.stat(exe).st_ino, unit
    assert "keeper" in h.sh("hgctl", "user", "list").stdout
    assert h.SHARED["keeper"].status()["user"] == "keeper"
    h.sh("hgctl", "audit", "verify")
