"""Login, logout, cookies, CSRF, /api/status and agent tokens.

Mode-independent (MODE_INDEPENDENT): run in one mode only, root as root,
because logins, cookies, CSRF and tokens are brokerd's and frontd's
logic, the same whoever runs them."""

import statistics
import time

import hglib

MODE_INDEPENDENT = True

ADMIN, USER = hglib.ADMIN, hglib.USER


def login_raw(hg, username, password, **kw):
    return hg.post("/api/login", {"username": username, "password": password},
                   **kw)


def test_login_admin(hg):
    r = login_raw(hg, *ADMIN)
    assert r.status == 200, r
    doc = r.json()
    assert doc["user"] == ADMIN[0]
    assert doc["role"] == "admin"
    assert isinstance(doc["csrf_token"], str) and len(doc["csrf_token"]) >= 16
    value, attrs = r.cookie()
    assert len(value) >= 16, value
    assert attrs.get("path") == "/", attrs
    assert "httponly" in attrs, attrs
    assert attrs.get("samesite", "").lower() == "strict", attrs
    assert "secure" not in attrs, "Secure cookie over plain HTTP: %r" % attrs
    assert doc["csrf_token"] != value


def test_login_user_role(hg):
    s = hg.login(*USER)
    assert (s.user, s.role) == (USER[0], "user")


def test_each_login_gets_new_cookie_and_csrf(hg):
    a = hg.login(*USER)
    b = hg.login(*USER)
    assert a.cookie != b.cookie
    assert a.csrf != b.csrf


def test_wrong_password_and_unknown_user_look_the_same(hg):
    wrong = login_raw(hg, ADMIN[0], "not-the-password")
    unknown = login_raw(hg, "nosuchuser", "not-the-password")
    assert wrong.status == 401, wrong
    assert unknown.status == 401, unknown
    assert wrong.json() == {"error": {"code": "unauthorized",
                                      "message": "invalid username or password"}}
    assert wrong.body == unknown.body
    assert wrong.cookie() is None and unknown.cookie() is None


def test_unknown_user_takes_as_long_as_wrong_password(hg):
    """No user enumeration by timing: an unknown name is hashed too."""
    times = {"known": [], "unknown": []}
    for i in range(7):
        for kind, name in (("known", ADMIN[0]), ("unknown", "ghost%d" % i)):
            t0 = time.monotonic()
            r = login_raw(hg, name, "wrong-password-%d" % i)
            times[kind].append(time.monotonic() - t0)
            assert r.status == 401, r
    known = statistics.median(times["known"])
    unknown = statistics.median(times["unknown"])
    assert 0.5 < unknown / known < 2, times


def test_password_is_case_sensitive_and_exact(hg):
    for pw in (ADMIN[1].upper(), ADMIN[1] + " ", ADMIN[1][:-1], ""):
        r = login_raw(hg, ADMIN[0], pw)
        assert r.status in (400, 401), (pw, r)
        assert r.cookie() is None or not r.cookie()[0]


def test_status_with_cookie(hg):
    s = hg.login(*ADMIN)
    r = s.get("/api/status")
    assert r.status == 200, r
    doc = r.json()
    assert doc["user"] == ADMIN[0]
    assert doc["role"] == "admin"
    assert doc["runtime"] == "host"
    b = doc["backend"]
    assert set(b) >= {"name", "ok", "reason"}, b
    assert b["name"] == "bwrap" and b["ok"] is True, b
    em = doc["execution_mode"]
    assert em["mode"] == "sandbox", em
    assert em["default"] == "sandbox", em
    assert em["available"] is True, em
    assert "reason" in em, em
    assert em["expires_at"] is None and em["remaining_seconds"] is None, em
    assert em["ttl_seconds"] == 600, em
    assert doc["permission"] == "workspace-write", doc


def test_status_of_plain_user_has_no_direct_mode(hg):
    s = hg.login(*USER)
    doc = s.get("/api/status").json()
    assert doc["user"] == USER[0] and doc["role"] == "user", doc
    em = doc["execution_mode"]
    assert em["mode"] == "sandbox", em
    assert em["available"] is False, em
    assert isinstance(em["reason"], str) and em["reason"], em


def test_status_needs_credentials(hg):
    for kw in ({}, {"cookie": "bogus"}, {"cookie": ""},
               {"bearer": "hgt_bogus"}, {"bearer": "bogus"},
               {"headers": {"Authorization": "Basic YWxpY2U6eA=="}}):
        r = hg.get("/api/status", **kw)
        assert r.status == 401, (kw, r)
        assert r.error()["code"] == "unauthorized", (kw, r)


def test_logout(hg):
    s = hg.login(*USER)
    other = hg.login(*USER)
    assert s.get("/api/status").status == 200
    r = s.post("/api/logout")
    assert r.status == 200, r
    c = r.cookie()
    assert c is not None, "logout does not clear the cookie: %r" % r.headers
    value, attrs = c
    assert value == "" or attrs.get("max-age") == "0", c
    assert s.get("/api/status").status == 401
    # Only that session ended.
    assert other.get("/api/status").status == 200
    # Logging out again with the dead cookie is refused.
    assert s.post("/api/logout").status == 401


def test_csrf_required_on_cookie_posts(hg):
    s = hg.login(*USER)
    for headers in ({}, {"X-CSRF-Token": "wrong"}, {"X-CSRF-Token": ""},
                    {"X-CSRF-Token": s.csrf + "x"}):
        for path in ("/api/logout", "/api/session/tokens"):
            r = s.post(path, csrf=False, headers=headers)
            assert r.status == 403, (path, headers, r)
            assert r.error()["code"] == "forbidden", (path, headers, r)
    # The session is untouched by the refused logouts.
    assert s.get("/api/status").status == 200


def test_csrf_token_of_another_session_is_refused(hg):
    a = hg.login(*USER)
    b = hg.login(*USER)
    r = a.post("/api/session/tokens", csrf=False,
               headers={"X-CSRF-Token": b.csrf})
    assert r.status == 403, r


def test_session_token(hg):
    s = hg.login(*USER)
    r = s.post("/api/session/tokens")
    assert r.status == 201, r
    doc = r.json()
    tok = doc["token"]
    assert tok.startswith("hgt_") and len(tok) > 20, doc
    assert "id" in doc, doc
    st = hg.get("/api/status", bearer=tok)
    assert st.status == 200, st
    assert st.json()["user"] == USER[0]
    assert st.json()["role"] == "user"
    # A bearer token cannot mint tokens, even without any CSRF rule.
    r = hg.post("/api/session/tokens", bearer=tok)
    assert r.status == 403, r
    assert r.error()["code"] == "forbidden"
    # Nor can a bearer token pass itself off as a cookie.
    assert hg.get("/api/status", cookie=tok).status == 401
    assert hg.get("/api/status", bearer=s.cookie).status == 401


def test_session_token_dies_with_its_session(hg):
    s = hg.login(*USER)
    t1 = s.post("/api/session/tokens").json()["token"]
    t2 = s.post("/api/session/tokens").json()["token"]
    assert t1 != t2
    for t in (t1, t2):
        assert hg.get("/api/status", bearer=t).status == 200
    assert s.post("/api/logout").status == 200
    for t in (t1, t2):
        r = hg.get("/api/status", bearer=t)
        assert r.status == 401, r


def test_token_of_admin_keeps_admin_identity(hg):
    s = hg.login(*ADMIN)
    tok = s.post("/api/session/tokens").json()["token"]
    doc = hg.get("/api/status", bearer=tok).json()
    assert (doc["user"], doc["role"]) == (ADMIN[0], "admin"), doc


def test_standalone_token_and_revoke(hg):
    doc = hg.hgctl_json("token", "create", USER[0])
    assert set(doc) >= {"id", "token", "user"}, doc
    assert doc["user"] == USER[0]
    assert doc["token"].startswith("hgt_")
    r = hg.get("/api/status", bearer=doc["token"])
    assert r.status == 200, r
    assert r.json()["user"] == USER[0]

    # Not bound to any login session: a logout elsewhere leaves it alone.
    s = hg.login(*USER)
    assert s.post("/api/logout").status == 200
    assert hg.get("/api/status", bearer=doc["token"]).status == 200

    listed = hg.hgctl_json("token", "list")
    mine = [t for t in listed if str(t["id"]) == str(doc["id"])]
    assert len(mine) == 1, listed
    assert set(mine[0]) >= {"id", "user", "session_id", "created"}, mine
    assert mine[0]["user"] == USER[0]
    assert not mine[0]["session_id"], mine
    assert doc["token"] not in str(listed), "token list shows the secret"

    hg.hgctl_ok("token", "revoke", str(doc["id"]))
    r = hg.get("/api/status", bearer=doc["token"])
    assert r.status == 401, r
    listed = hg.hgctl_json("token", "list")
    assert not [t for t in listed if str(t["id"]) == str(doc["id"])], listed


def test_plain_token_create_prints_only_the_token(hg):
    r = hg.hgctl_ok("token", "create", USER[0])
    tok = r.stdout.strip()
    assert r.stdout.count("\n") <= 1 and tok.startswith("hgt_"), r.stdout
    assert hg.get("/api/status", bearer=tok).status == 200


def test_session_token_listed_with_its_session(hg):
    s = hg.login(*USER)
    doc = s.post("/api/session/tokens").json()
    listed = hg.hgctl_json("token", "list")
    mine = [t for t in listed if str(t["id"]) == str(doc["id"])]
    assert len(mine) == 1, (doc, listed)
    assert mine[0]["user"] == USER[0]
    assert mine[0]["session_id"], mine
    sessions = hg.hgctl_json("session", "list")
    ids = [x["id"] for x in sessions if x["user"] == USER[0]]
    assert mine[0]["session_id"] in ids, (mine, sessions)
    assert s.cookie not in str(sessions), "session list shows the cookie"
    assert s.csrf not in str(sessions), "session list shows the CSRF token"
    assert doc["token"] not in str(listed)
    # Logging out removes the session and its token from the lists.
    assert s.post("/api/logout").status == 200
    sessions = hg.hgctl_json("session", "list")
    assert mine[0]["session_id"] not in [x["id"] for x in sessions], sessions
    listed = hg.hgctl_json("token", "list")
    assert str(doc["id"]) not in [str(t["id"]) for t in listed], listed


def test_longest_user_name_logs_in(hostgate_factory):
    """A user of the longest name users.json holds (32 bytes) gets a
    session and a token like any other (the store once took 31 at most:
    the login failed with "cannot store the session")."""
    hg = hostgate_factory()
    name, password = "abcdefghijklmnopqrstuvwxyz_.-012", "long name pw"
    assert len(name) == 32
    hg.add_user(name, password)
    s = hg.login(name, password)
    assert s.user == name
    r = s.get("/api/status")
    assert r.status == 200 and r.json()["user"] == name, r
    tok = hg.hgctl_ok("token", "create", name).stdout.strip()
    r = hg.get("/api/status", bearer=tok)
    assert r.status == 200 and r.json()["user"] == name, r
