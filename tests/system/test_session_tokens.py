"""A login session's own agent tokens: GET /api/session/tokens lists them
(ids and times, never a secret), DELETE /api/session/tokens/{id} revokes
one; only the session's own ids, only with its cookie and CSRF token.

Mode-independent (MODE_INDEPENDENT): run in one mode only, root as root,
because the API's rules on a session's tokens are brokerd's logic, not
its privileges."""

import re

import hglib
import policylib as pl

MODE_INDEPENDENT = True

USER, ADMIN = hglib.USER, hglib.ADMIN
ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")


def mint(session):
    r = session.post("/api/session/tokens")
    assert r.status == 201, r
    return r.json()


def listed(session):
    r = session.get("/api/session/tokens")
    assert r.status == 200, r
    return r


def delete(session, tid, **kw):
    return session.request("DELETE", "/api/session/tokens/" + tid, **kw)


def test_list_shows_ids_and_no_secret(hg):
    s = hg.login(*USER)
    r = listed(s)
    assert r.json() == {"tokens": []}, r
    a, b = mint(s), mint(s)
    r = listed(s)
    doc = r.json()
    assert sorted(t["id"] for t in doc["tokens"]) == \
        sorted([a["id"], b["id"]]), doc
    for t in doc["tokens"]:
        assert set(t) == {"id", "created"}, t
        assert ISO.match(t["created"]), t
    for secret in (a["token"], b["token"], "hgt_", s.cookie, s.csrf):
        assert secret.encode() not in r.body, (secret, r.body)


def test_list_is_this_sessions_only(hg):
    s = hg.login(*USER)
    other = hg.login(*USER)
    mint(s)
    theirs = mint(other)
    ids = [t["id"] for t in listed(s).json()["tokens"]]
    assert theirs["id"] not in ids and len(ids) == 1, ids
    assert [t["id"] for t in listed(other).json()["tokens"]] == \
        [theirs["id"]]


def test_revoke_kills_the_token(hg):
    s = hg.login(*USER)
    keep, gone = mint(s), mint(s)
    assert hg.get("/api/status", bearer=gone["token"]).status == 200
    r = delete(s, gone["id"])
    assert r.status == 200, r
    assert r.json() == {"id": gone["id"], "revoked": True}, r
    r = hg.get("/api/status", bearer=gone["token"])
    assert r.status == 401, r
    assert [t["id"] for t in listed(s).json()["tokens"]] == [keep["id"]]
    assert hg.get("/api/status", bearer=keep["token"]).status == 200
    # Once revoked, the id is unknown.
    pl.assert_error(delete(s, gone["id"]), 404, "not_found")
    # The session itself lives on.
    assert s.get("/api/status").status == 200


def test_another_sessions_token_is_not_found(hg):
    s = hg.login(*USER)
    other = hg.login(*USER)
    admin = hg.login(*ADMIN)
    for owner in (other, admin):
        theirs = mint(owner)
        r = delete(s, theirs["id"])
        pl.assert_error(r, 404, "not_found", "no such token")
        assert hg.get("/api/status", bearer=theirs["token"]).status \
            == 200
        assert theirs["id"] in [t["id"] for t in
                                listed(owner).json()["tokens"]]
    # A standalone token (hgctl) is no session's: not found either.
    alone = hg.hgctl_json("token", "create", USER[0])
    pl.assert_error(delete(s, alone["id"]), 404, "not_found")
    assert hg.get("/api/status", bearer=alone["token"]).status == 200
    # An id that is no token at all, or not an id, looks the same.
    unknown = delete(s, "0123456789abcdef")
    pl.assert_error(unknown, 404, "not_found", "no such token")
    for bad in ("xyz", "0123456789ABCDEF", "0123456789abcdef0",
                "0123456789abcde", "0123456789abcdef/x"):
        pl.assert_error(delete(s, bad), 404, "not_found")
    hg.hgctl_ok("token", "revoke", alone["id"])


def test_agent_token_cannot_list_or_revoke(hg):
    s = hg.login(*USER)
    t = mint(s)
    for r in (hg.get("/api/session/tokens", bearer=t["token"]),
              hg.request("DELETE", "/api/session/tokens/" + t["id"],
                         bearer=t["token"])):
        pl.assert_error(r, 403, "forbidden")
    assert hg.get("/api/status", bearer=t["token"]).status == 200
    # Without any credential: 401.
    assert hg.get("/api/session/tokens").status == 401
    r = hg.request("DELETE", "/api/session/tokens/" + t["id"])
    assert r.status == 401, r


def test_revoke_needs_csrf(hg):
    s = hg.login(*USER)
    other = hg.login(*USER)
    t = mint(s)
    for headers in ({}, {"X-CSRF-Token": "wrong"},
                    {"X-CSRF-Token": other.csrf}):
        r = delete(s, t["id"], csrf=False, headers=headers)
        pl.assert_error(r, 403, "forbidden")
    assert hg.get("/api/status", bearer=t["token"]).status == 200
    assert [x["id"] for x in listed(s).json()["tokens"]] == [t["id"]]
    # Listing is a read: no CSRF token needed.
    assert s.get("/api/session/tokens", csrf=False).status == 200


def test_methods(hg):
    s = hg.login(*USER)
    t = mint(s)
    r = s.request("PUT", "/api/session/tokens")
    assert r.status == 405, r
    assert "GET" in r.header("Allow") and "POST" in r.header("Allow"), r
    r = s.post("/api/session/tokens/" + t["id"])
    assert r.status == 405, r


def test_revoke_is_audited_like_the_mint(hg):
    s = hg.login(*USER)
    t = mint(s)
    r = delete(s, t["id"])
    assert r.status == 200, r
    minted = pl.wait_audit(hg, action="token_minted",
                           detail_token=t["id"])[-1]
    rec = pl.wait_audit(hg, action="token_revoked",
                        detail_token=t["id"])[-1]
    assert rec["user"] == USER[0], rec
    assert rec["allowed"] is True, rec
    assert rec.get("session") == minted.get("session") is not None, rec
    assert set(rec["detail"]) == set(minted["detail"]), (rec, minted)
    assert rec["detail"]["request_id"] == r.header("X-Request-Id"), rec
    # A refused revoke (not this session's) changes nothing: no record.
    other = hg.login(*USER)
    theirs = mint(other)
    pl.assert_error(delete(s, theirs["id"]), 404, "not_found")
    assert not pl.audit_records(hg, action="token_revoked",
                                detail_token=theirs["id"])


def test_revoke_ends_the_tokens_streams(hg):
    """A revoke by the session (as the panel makes it) ends that token's
    event stream at once, as hgctl's does; the session's other token and
    the session's own stream stay open and are told."""
    s = hg.login(*USER)
    gone, kept = mint(s), mint(s)
    streams = [pl.EventStream(hg, bearer=gone["token"]),
               pl.EventStream(hg, bearer=kept["token"]),
               pl.EventStream(hg, cookie=s.cookie)]
    es, other, panel = streams
    try:
        for x in streams:
            assert x.status == 200, (x.status, x.body)
        assert delete(s, gone["id"]).status == 200
        ev = es.wait("token_revoked")
        assert ev["data"] == {"id": gone["id"]}, ev
        assert "token" not in ev, ev
        assert es.wait_closed(), "the revoked token's stream stayed open"
        for x in (other, panel):
            assert x.wait("token_revoked")["data"]["id"] == gone["id"]
            assert not x.closed
    finally:
        for x in streams:
            x.close()
