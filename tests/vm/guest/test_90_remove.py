"""apt-get remove stops hostgate and keeps its state; purge removes it. A
fresh install afterwards starts clean and spawns."""

import os

import hgvm as h


def test_remove_keeps_state():
    h.apt("remove", "hostgate")
    assert os.path.isdir(h.STATE + "/workspaces")
    assert not os.path.exists("/usr/sbin/sandboxd")
    for unit in h.UNITS:
        assert h.unit_prop(unit, "ActiveState") != "active", unit
    for name in h.DAEMON:
        assert not h.processes("/usr/sbin/" + name), name


def test_purge_removes_state():
    h.apt("purge", "hostgate")
    assert not os.path.exists(h.STATE)
    assert not os.path.exists(h.ENV_FILE)


def test_fresh_install():
    h.apt("install", h.deb("new"))
    h.sh("systemctl", "enable", "--now", "hostgate.target")
    h.wait_healthy()
    h.add_user("admin", admin=True)
    s = h.login("admin")
    assert s.run("id -u")["stdout"].strip() == str(s.status()["uid"])
