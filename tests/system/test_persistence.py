"""What brokerd keeps on disk: users and sessions survive its restart, the
files are private and hold no secret a client could replay."""

import json
import os
import stat

import hglib

ADMIN, USER = hglib.ADMIN, hglib.USER


def read(path):
    with open(path, "rb") as f:
        return f.read()


def assert_private(path):
    st = os.stat(path)
    assert stat.S_IMODE(st.st_mode) == 0o600, "%s mode %o" % (path, st.st_mode)


def test_sessions_survive_brokerd_restart(hostgate_factory):
    hg = hostgate_factory()
    s = hg.login(*USER)
    admin = hg.login(*ADMIN)
    tok = s.post("/api/session/tokens").json()["token"]
    standalone = hg.hgctl_ok("token", "create", ADMIN[0]).stdout.strip()
    dead = hg.login(*USER)
    assert dead.post("/api/logout").status == 200

    assert hg.stop("brokerd") == 0
    hg.wait_status(503, timeout=3)

    users = os.path.join(hg.state, "users.json")
    sessions = os.path.join(hg.state, "sessions.json")
    assert_private(users)
    assert_private(sessions)
    data = read(sessions)
    json.loads(data)
    for secret in (s.cookie, s.csrf, admin.cookie, admin.csrf, tok,
                   standalone, dead.cookie):
        assert secret.encode() not in data, "sessions.json holds a secret"
    udata = read(users)
    assert ADMIN[1].encode() not in udata and USER[1].encode() not in udata

    hg.start("brokerd")
    hg.wait_healthy(timeout=5)
    r = s.get("/api/status")
    assert r.status == 200, r
    assert r.json()["user"] == USER[0]
    assert admin.get("/api/status").json()["role"] == "admin"
    assert hg.get("/api/status", bearer=tok).status == 200
    assert hg.get("/api/status", bearer=standalone).status == 200
    # What was logged out stays logged out.
    assert dead.get("/api/status").status == 401
    # CSRF tokens survive too: the old one still works for a logout.
    assert s.post("/api/logout").status == 200
    assert hg.get("/api/status", bearer=tok).status == 401
    # Users survive.
    hg.login(*ADMIN)


def test_brokerd_sigkill_keeps_committed_state(hostgate_factory):
    """A login that was answered is on disk: SIGKILL loses nothing."""
    hg = hostgate_factory()
    hg.add_user("gina", "gina-password-1")
    s = hg.login("gina", "gina-password-1")
    hg.kill("brokerd")
    hg.start("brokerd")
    hg.wait_healthy(timeout=5)
    assert s.get("/api/status").status == 200
    hg.login("gina", "gina-password-1")


def test_user_changes_persist(hostgate_factory):
    hg = hostgate_factory()
    hg.hgctl_ok("user", "passwd", USER[0], "--password-stdin",
                input="new-bob-password\n")
    hg.hgctl_ok("user", "del", ADMIN[0])
    assert hg.stop("brokerd") == 0
    assert_private(os.path.join(hg.state, "users.json"))
    hg.start("brokerd")
    hg.wait_healthy(timeout=5)
    names = [u["name"] for u in hg.hgctl_json("user", "list")]
    assert names == [USER[0]], names
    assert hg.post("/api/login", {"username": USER[0],
                                  "password": USER[1]}).status == 401
    hg.login(USER[0], "new-bob-password")
