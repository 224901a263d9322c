"""The admin API (an admin's login session only): every session with its
mode, deadline and terminals; reverting another session's direct mode;
killing any user's terminal; the debug view with secrets masked. And the
same from hgctl: session list and session revert."""

import re

import pytest

import policylib as pl
import sandboxlib as sl

SECRET = "admin-password-not-to-be-shown-42"


# The configuration of `hg` (conftest.py): pooled per mode.
HOSTGATE = pl.config(carol=True,
                    HOST_EXECUTION_DIRECT_TTL_SECONDS=30,
                    HOSTGATE_ADMIN_PASSWORD=SECRET)


@pytest.fixture
def alice(hg):
    return hg.login(*pl.ADMIN)


@pytest.fixture
def bob(hg):
    return hg.login(*pl.USER)


@pytest.fixture
def carol(hg):
    s = hg.login(*pl.CAROL)
    yield s
    pl.set_mode(s, "sandbox")


def sessions(admin):
    r = admin.get("/api/admin/sessions")
    assert r.status == 200, r
    doc = r.json()
    assert doc["runtime"] == "host", doc
    return {s["id"]: s for s in doc["sessions"]}


def own_id(hg, sess):
    """The public id of a session: that of the newest login of its user
    (each test logs in afresh)."""
    return pl.audit_records(hg, action="login", user=sess.user)[-1]["session"]


def test_sessions_view(hg, alice, bob, carol):
    g = pl.grant(carol)
    r = bob.post("/api/terminals", {})
    assert r.status == 201, r
    tid = r.json()["id"]
    try:
        listed = sessions(alice)
        bid = own_id(hg, bob)
        cid = own_id(hg, carol)
        assert re.fullmatch(r"[0-9a-f]{32}", bid), bid
        b = listed[bid]
        assert set(b) >= {"id", "user", "created", "last_seen", "mode",
                          "expires_at", "remaining_seconds", "permission",
                          "terminals"}, b
        assert b["user"] == "bob" and b["mode"] == "sandbox", b
        assert b["expires_at"] is None and b["remaining_seconds"] is None
        assert b["permission"] == "workspace-write", b
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", b["created"])
        assert b["last_seen"] >= b["created"], b
        t = [t for t in b["terminals"] if t["id"] == tid]
        assert t and t[0]["running"] is True and t[0]["user"] == "bob", b
        c = listed[cid]
        assert c["user"] == "carol" and c["mode"] == "direct", c
        assert c["expires_at"] == g["expires_at"], (c, g)
        assert 1 <= c["remaining_seconds"] <= 30, c
        # Never a session's secrets.
        text = alice.get("/api/admin/sessions").body.decode()
        for s in (bob, carol):
            assert s.cookie not in text and s.csrf not in text
    finally:
        bob.request("DELETE", "/api/terminals/" + tid)


def test_revert_another_session(hg, alice, carol):
    cid = own_id(hg, carol)
    es = pl.EventStream(hg, cookie=carol.cookie)
    try:
        pl.grant(carol)
        r = alice.post("/api/admin/sessions/%s/revert" % cid)
        assert r.status == 200, r
        ev = es.wait("mode_reverted")
        assert ev["data"]["reason"] == "admin", ev
    finally:
        es.close()
    assert pl.mode_of(carol)["mode"] == "sandbox"
    assert sessions(alice)[cid]["mode"] == "sandbox"
    rec = pl.wait_audit(hg, action="admin_revert", user="alice")
    assert rec[-1]["reason"] == cid, rec
    rec = pl.wait_audit(hg, action="mode_reverted", session=cid)
    assert rec[-1]["reason"] == "admin" and \
        rec[-1]["detail"]["by"] == "alice", rec
    # Reverting a sandboxed session is harmless.
    r = alice.post("/api/admin/sessions/%s/revert" % cid)
    assert r.status == 200, r


@pytest.mark.parametrize("sid", ["0" * 32, "f" * 32])
def test_revert_unknown_session(hg, alice, sid):
    r = alice.post("/api/admin/sessions/%s/revert" % sid)
    pl.assert_error(r, 404, "not_found")


@pytest.mark.parametrize("path", [
    "/api/admin/sessions/xyz/revert",
    "/api/admin/sessions/%s/revert" % ("A" * 32),
    "/api/admin/sessions/%s/revert" % ("0" * 31),
    "/api/admin/sessions/%s/revert" % ("0" * 33),
    "/api/admin/sessions/%s0/revert" % ("0" * 32),
])
def test_revert_malformed_id(hg, alice, path):
    r = alice.post(path)
    assert r.status in (400, 404), r


def test_kill_any_users_terminal(hg, alice, bob):
    es = pl.EventStream(hg, cookie=bob.cookie)
    try:
        r = bob.post("/api/terminals", {})
        assert r.status == 201, r
        tid = r.json()["id"]
        r = alice.request("DELETE", "/api/admin/terminals/" + tid)
        assert r.status == 200, r
        ev = es.wait("terminal_exited", pred=lambda e: e["data"]["id"] == tid)
        assert ev["data"]["id"] == tid
    finally:
        es.close()
    assert sl.terminal_listed(bob, tid)["running"] is False
    rec = pl.wait_audit(hg, action="admin_kill", user="alice")
    assert rec[-1]["reason"] == tid, rec


@pytest.mark.parametrize("tid", ["0" * 16, "abcdefabcdefabcd"])
def test_kill_unknown_terminal(hg, alice, tid):
    r = alice.request("DELETE", "/api/admin/terminals/" + tid)
    pl.assert_error(r, 404, "not_found")


def test_debug_view(hg, alice):
    r = alice.get("/api/admin/debug")
    assert r.status == 200, r
    doc = r.json()
    assert set(doc) >= {"versions", "uptime_seconds", "backend", "config",
                        "counters"}, doc
    v = doc["versions"]
    assert set(v) >= {"hostgate", "protocol", "libevent", "json-c"}, v
    assert isinstance(doc["uptime_seconds"], int) and \
        doc["uptime_seconds"] >= 0, doc
    assert set(doc["backend"]) >= {"name", "ok", "reason"}, doc["backend"]
    assert doc["backend"]["name"] == "bwrap" and doc["backend"]["ok"], doc
    cfg = doc["config"]
    assert cfg["HOSTGATE_ADMIN_PASSWORD"] == "***", cfg
    assert cfg["HOST_EXECUTION_DIRECT_TTL_SECONDS"] == 30, cfg
    assert cfg["HOSTGATE_STATE_DIR"] == hg.state, cfg
    assert SECRET not in r.body.decode()
    c = doc["counters"]
    assert set(c) >= {"logins", "logins_failed", "spawns", "spawns_refused",
                      "grants", "refusals"}, c
    assert all(isinstance(n, int) and n >= 0 for n in c.values()), c
    assert c["logins"] >= 1
    logins = c["logins"]
    hg.login(*pl.USER)
    assert alice.get("/api/admin/debug").json()["counters"]["logins"] == \
        logins + 1


@pytest.mark.parametrize("path", [
    "/api/admin/sessions", "/api/admin/audit", "/api/admin/debug"])
def test_every_admin_call_is_recorded(hg, alice, path):
    sid = own_id(hg, alice)
    before = len(pl.audit_records(hg, session=sid))
    assert alice.get(path).status == 200
    recs = pl.audit_records(hg, session=sid)
    assert len(recs) == before + 1, recs[before:]
    assert recs[-1]["user"] == "alice" and \
        recs[-1]["action"].startswith("admin_"), recs[-1]


# -- who may ------------------------------------------------------------------

ADMIN_CALLS = [
    ("GET", "/api/admin/sessions"),
    ("POST", "/api/admin/sessions/%s/revert" % ("0" * 32)),
    ("DELETE", "/api/admin/terminals/%s" % ("0" * 16)),
    ("GET", "/api/admin/audit"),
    ("GET", "/api/admin/debug"),
]


@pytest.mark.parametrize("method,path", ADMIN_CALLS)
def test_non_admin_refused(hg, bob, method, path):
    before = len(pl.audit_records(hg, action="admin_refused", user="bob"))
    r = bob.request(method, path)
    pl.assert_error(r, 403, "forbidden")
    assert len(pl.audit_records(hg, action="admin_refused",
                                user="bob")) == before + 1


@pytest.mark.parametrize("method,path", ADMIN_CALLS)
@pytest.mark.parametrize("kind", ["session-token", "hgctl-token"])
def test_admin_token_refused(hg, alice, method, path, kind):
    if kind == "session-token":
        tok = pl.mint_token(alice)
    else:
        tok = hg.hgctl_ok("token", "create", pl.ADMIN[0]).stdout.strip()
    r = hg.request(method, path, bearer=tok)
    pl.assert_error(r, 403, "forbidden")


@pytest.mark.parametrize("method,path", ADMIN_CALLS)
def test_no_credentials(hg, method, path):
    pl.assert_error(hg.request(method, path), 401, "unauthorized")


@pytest.mark.parametrize("method,path", [c for c in ADMIN_CALLS
                                         if c[0] != "GET"])
def test_admin_changes_need_csrf(hg, alice, method, path):
    r = alice.request(method, path, csrf=False)
    pl.assert_error(r, 403, "forbidden", "CSRF")


def test_revert_needs_csrf(hg, alice, carol):
    cid = own_id(hg, carol)
    pl.grant(carol)
    r = alice.post("/api/admin/sessions/%s/revert" % cid, csrf=False)
    pl.assert_error(r, 403, "forbidden")
    assert pl.mode_of(carol)["mode"] == "direct"


# -- hgctl --------------------------------------------------------------------

def test_hgctl_sessions_and_revert(hg, carol):
    cid = own_id(hg, carol)
    g = pl.grant(carol)
    items = {s["id"]: s for s in hg.hgctl_json("session", "list")}
    assert items[cid]["mode"] == "direct", items[cid]
    assert items[cid]["expires_at"] == g["expires_at"], items[cid]
    es = pl.EventStream(hg, cookie=carol.cookie)
    try:
        r = hg.hgctl_ok("session", "revert", cid)
        ev = es.wait("mode_reverted")
        assert ev["data"]["reason"] == "admin", ev
    finally:
        es.close()
    assert pl.mode_of(carol)["mode"] == "sandbox"
    items = {s["id"]: s for s in hg.hgctl_json("session", "list")}
    assert items[cid]["mode"] == "sandbox", items[cid]
    r = hg.hgctl("session", "revert", "0" * 32)
    assert r.returncode != 0, r.stdout
    text = hg.hgctl_ok("session", "list").stdout
    assert cid in text, text


def test_sessions_view_under_docker(hostgate_factory):
    hg = pl.own(hostgate_factory, "admindocker", healthy=False,
                HOSTGATE_RUNTIME="docker")
    alice = hg.login(*pl.ADMIN)
    hg.login(*pl.USER)
    r = alice.get("/api/admin/sessions")
    assert r.status == 200, r
    doc = r.json()
    assert doc["runtime"] == "docker", doc
    # Each session says how its user's container stands (null until
    # sandboxd has reported on it).
    assert len(doc["sessions"]) == 2, doc
    for s in doc["sessions"]:
        assert "container" in s, s
