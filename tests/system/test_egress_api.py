"""The egress allowlist's HTTP API: GET /api/admin/egress and PUT
/api/admin/egress/{users/NAME,sessions/ID} (an admin's login session, and
its CSRF token for PUT), their refusals (anonymous, a user, an agent
token, no CSRF token, bad bodies, hostile paths) that change nothing, and
the round trip: what an admin puts shows in GET, in the user's
/api/status egress object, in the MCP status tool and in the audit log.

Mode-independent (MODE_INDEPENDENT): run in one mode only, root as root,
because the allowlist API is brokerd's logic; egress traffic in each
mode is test_egress_sandbox's."""

import json

import pytest

import policylib as pl

MODE_INDEPENDENT = True

GLOBAL = ["pypi.org", "*.pythonhosted.org"]
MODERN = "2026-07-28"


# The configuration of `hg` (conftest.py): pooled per mode.
HOSTGATE = pl.config(HOSTGATE_EGRESS_ALLOW=" ".join(GLOBAL),
                    HOSTGATE_EGRESS_DENY="evil.example.com")


@pytest.fixture(scope="module")
def alice(hg):
    return hg.login(*pl.ADMIN)


@pytest.fixture(scope="module")
def bob(hg):
    return hg.login(*pl.USER)


@pytest.fixture(scope="module")
def bob_sid(hg, bob):
    """The public id of bob's login session (its login record's)."""
    return pl.audit_records(hg, action="login", user=bob.user)[-1]["session"]


def put(session, path, body, **kw):
    return session.request("PUT", path, body=body, **kw)


def egress(admin):
    r = admin.get("/api/admin/egress")
    assert r.status == 200, r
    return r.json()


def unchanged(admin, before):
    """The lists are as they were (a refused request changed nothing)."""
    after = egress(admin)
    assert after == before, (before, after)


def test_get_shape(alice):
    doc = egress(alice)
    assert set(doc) >= {"allow", "deny", "ports", "deny_nets", "allow_nets",
                        "users", "sessions"}, doc
    assert doc["allow"] == GLOBAL, doc
    assert doc["deny"] == ["evil.example.com"], doc
    assert doc["ports"] == [443, 80], doc
    assert isinstance(doc["users"], dict), doc
    assert isinstance(doc["sessions"], dict), doc


def test_refusals(hg, alice, bob, bob_sid):
    before = egress(alice)
    body = {"allow": ["api.example.com"]}
    paths = ["/api/admin/egress/users/bob",
             "/api/admin/egress/sessions/" + bob_sid]
    # Nobody.
    pl.assert_error(hg.get("/api/admin/egress"), 401)
    for p in paths:
        pl.assert_error(hg.request("PUT", p, body=body), 401)
    # A user's session.
    pl.assert_error(bob.get("/api/admin/egress"), 403)
    for p in paths:
        pl.assert_error(put(bob, p, body), 403)
    # An admin's agent token: never the admin API.
    token = pl.mint_token(alice)
    pl.assert_error(hg.get("/api/admin/egress", bearer=token), 403)
    for p in paths:
        pl.assert_error(hg.request("PUT", p, body=body, bearer=token), 403)
    # An admin's session without its CSRF token, or with a wrong one.
    for p in paths:
        err = pl.assert_error(put(alice, p, body, csrf=False), 403)
        assert "csrf" in err["message"].lower(), err
        pl.assert_error(put(alice, p, body, csrf=False,
                            headers={"X-CSRF-Token": "0" * 64}), 403)
    # Only GET and PUT.
    r = alice.post(paths[0], body)
    assert r.status == 405 and r.header("Allow") == "PUT", r
    r = alice.post("/api/admin/egress", body)
    assert r.status == 405 and r.header("Allow") == "GET", r
    unchanged(alice, before)


@pytest.mark.parametrize("raw,why", [
    (b"", "required"),
    (b"{", "malformed"),
    (b'{"allow": ["a.example.com"]} x', "malformed"),
    (b"[]", "object"),
    (b'"allow"', "object"),
    (b"{}", "allow"),
    (b'{"allow": null}', "allow"),
    (b'{"allow": "api.example.com"}', "allow"),
    (b'{"allow": {"a": 1}}', "allow"),
    (b'{"allow": [1]}', "allow"),
    (b'{"allow": [["a.example.com"]]}', "allow"),
    (b'{"allow": [""]}', "allow"),
    (b'{"allow": ["a\\u0000.example.com"]}', "allow"),
    (json.dumps({"allow": ["x" * 300 + ".com"]}).encode(), "allow"),
    (json.dumps({"allow": ["h%d.example.com" % i
                           for i in range(65)]}).encode(), "64"),
    # Patterns brokerd refuses: not a name, a bare "*", a URL, a space.
    (b'{"allow": ["*"]}', None),
    (b'{"allow": ["http://a.example.com/"]}', None),
    (b'{"allow": ["a example.com"]}', None),
    (b'{"allow": ["*.*.example.com"]}', None),
    (b'{"allow": ["a.example.com:443"]}', None),
])
def test_bad_bodies(hg, alice, bob_sid, raw, why):
    before = egress(alice)
    for path in ("/api/admin/egress/users/bob",
                 "/api/admin/egress/sessions/" + bob_sid):
        r = put(alice, path, raw)
        err = pl.assert_error(r, 400, "bad_request")
        if why is not None:
            assert why in err["message"], err
    unchanged(alice, before)


def test_oversized_body(hg, alice):
    before = egress(alice)
    body = json.dumps({"allow": ["a.example.com"], "pad": "x" * (1 << 20)})
    r = put(alice, "/api/admin/egress/users/bob", body)
    assert r.status == 413, r
    unchanged(alice, before)


@pytest.mark.parametrize("path,status", [
    ("/api/admin/egress/users/", 400),
    ("/api/admin/egress/users/..", 400),
    ("/api/admin/egress/users/%2e%2e", 400),
    ("/api/admin/egress/users/bob%2Fx", 400),
    ("/api/admin/egress/users/..%2Fusers%2Fbob", 400),
    ("/api/admin/egress/users/bob%00", 400),
    ("/api/admin/egress/users/Bob", 400),
    ("/api/admin/egress/users/" + "a" * 33, 400),
    ("/api/admin/egress/users/bob/x", 404),
    ("/api/admin/egress/users/../users/bob", 404),
    ("/api/admin/egress/sessions/xyz", 400),
    ("/api/admin/egress/sessions/" + "A" * 32, 400),
    ("/api/admin/egress/sessions/" + "0" * 31, 400),
    ("/api/admin/egress/sessions/" + "0" * 33, 400),
    ("/api/admin/egress/sessions/%30" + "0" * 31, 400),
    ("/api/admin/egress/sessions/" + "0" * 32 + "/x", 404),
    ("/api/admin/egress/bob", 404),
])
def test_hostile_paths(hg, alice, path, status):
    before = egress(alice)
    r = put(alice, path, {"allow": ["api.example.com"]})
    pl.assert_error(r, status)
    unchanged(alice, before)


def test_nul_in_request_line(hg, alice):
    before = egress(alice)
    out = hg.raw(b"PUT /api/admin/egress/users/bob\x00 HTTP/1.1\r\n"
                 b"Host: x\r\nContent-Length: 2\r\n\r\n{}")
    assert out.startswith(b"HTTP/1.1 400 "), out[:200]
    unchanged(alice, before)


def test_unknown_targets(hg, alice):
    before = egress(alice)
    pl.assert_error(put(alice, "/api/admin/egress/users/nosuchuser",
                        {"allow": ["api.example.com"]}), 404, "not_found")
    pl.assert_error(put(alice, "/api/admin/egress/sessions/" + "0" * 32,
                        {"allow": ["api.example.com"]}), 404, "not_found")
    unchanged(alice, before)


def mcp_status(hg, token):
    """The MCP status tool's structured content (stateless revision)."""
    msg = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
           "params": {"name": "status", "arguments": {}, "_meta": {
               "io.modelcontextprotocol/protocolVersion": MODERN,
               "io.modelcontextprotocol/clientInfo":
               {"name": "test", "version": "1"},
               "io.modelcontextprotocol/clientCapabilities": {}}}}
    r = hg.request("POST", "/mcp", body=json.dumps(msg), bearer=token,
                   headers={"Accept": "application/json, text/event-stream",
                            "MCP-Protocol-Version": MODERN,
                            "Mcp-Method": "tools/call", "Mcp-Name": "status"})
    assert r.status == 200, r
    text = r.body.decode()
    if r.header("Content-Type").startswith("text/event-stream"):
        text = [ln[5:] for ln in text.splitlines()
                if ln.startswith("data:")][-1]
    res = json.loads(text)["result"]
    assert res["isError"] is False, res
    return res["structuredContent"]


def test_round_trip(hg, alice, bob, bob_sid):
    users = ["api.example.com", "*.example.org"]
    r = put(alice, "/api/admin/egress/users/bob", {"allow": users})
    assert r.status == 200, r
    assert r.json() == {"scope": "user", "target": "bob", "allow": users}, r
    r = put(alice, "/api/admin/egress/sessions/" + bob_sid,
            {"allow": ["docs.example.net"]})
    assert r.status == 200, r
    assert r.json() == {"scope": "session", "target": bob_sid,
                        "allow": ["docs.example.net"]}, r
    try:
        doc = egress(alice)
        assert doc["users"].get("bob") == users, doc
        assert doc["sessions"].get(bob_sid) == ["docs.example.net"], doc
        # bob sees them in his status, each where it comes from.
        st = bob.get("/api/status").json()
        e = st["egress"]
        assert e["allow"] == GLOBAL and e["user"] == users, e
        assert e["session"] == ["docs.example.net"], e
        assert e["deny"] == ["evil.example.com"], e
        assert e["ports"] == [443, 80], e
        assert set(e["proxy"]) == {"ok", "reason"}, e
        # alice's own status has none of bob's additions.
        mine = alice.get("/api/status").json()["egress"]
        assert mine["user"] == [] and mine["session"] == [], mine
        # The MCP status tool says the same to an agent token of bob's.
        sc = mcp_status(hg, pl.mint_token(bob))
        assert sc["egress"]["user"] == users, sc
        assert sc["egress"]["session"] == ["docs.example.net"], sc
        rec = pl.wait_audit(hg, action="egress_allow")
        assert any(json.dumps(x).find("docs.example.net") >= 0
                   for x in rec), rec
    finally:
        # [] takes the additions away again.
        for p in ("users/bob", "sessions/" + bob_sid):
            r = put(alice, "/api/admin/egress/" + p, {"allow": []})
            assert r.status == 200 and r.json()["allow"] == [], r
    e = bob.get("/api/status").json()["egress"]
    assert e["user"] == [] and e["session"] == [], e
    doc = egress(alice)
    assert not doc["users"].get("bob") and not doc["sessions"].get(bob_sid)
