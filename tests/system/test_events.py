"""GET /api/events: server-sent events for a login session or a token, each
stream getting only its own session's events and its user's; numbered with
"id:" lines and resumed with Last-Event-ID.

Mode-independent (MODE_INDEPENDENT): run in one mode only, root as root,
because which events a stream gets is brokerd's logic, not its
privileges."""


import pytest

import policylib as pl

MODE_INDEPENDENT = True


# The configuration of `hg` (conftest.py): pooled per mode.
HOSTGATE = pl.config(HOST_EXECUTION_DIRECT_TTL_SECONDS=30)


@pytest.fixture
def alice(hg):
    s = hg.login(*pl.ADMIN)
    yield s
    pl.set_mode(s, "sandbox")


def stream(hg, **kw):
    es = pl.EventStream(hg, **kw)
    assert es.status == 200, (es.status, es.body)
    return es


def test_stream_headers(hg, alice):
    es = stream(hg, cookie=alice.cookie)
    try:
        assert es.headers["content-type"].startswith("text/event-stream")
        assert es.headers["cache-control"] == "no-store", es.headers
        assert es.headers["x-content-type-options"] == "nosniff"
        assert "content-length" not in es.headers, es.headers
    finally:
        es.close()


@pytest.mark.parametrize("creds", ["none", "bad-cookie", "bad-token"])
def test_stream_needs_credentials(hg, creds):
    kw = {}
    if creds == "bad-cookie":
        kw["cookie"] = "0" * 64
    elif creds == "bad-token":
        kw["bearer"] = "hgt_" + "0" * 40
    es = pl.EventStream(hg, **kw)
    assert es.status == 401, (es.status, es.body)
    assert es.error()["code"] == "unauthorized"


def test_mode_events_and_ids(hg, alice):
    es = stream(hg, cookie=alice.cookie)
    try:
        g = pl.grant(alice)
        ch = es.wait("mode_changed")
        assert ch["data"] == g, (ch, g)
        ex = es.wait("mode_expiring")
        assert set(ex["data"]) >= {"expires_at", "remaining_seconds"}, ex
        assert pl.set_mode(alice, "sandbox").status == 200
        rv = es.wait("mode_reverted")
        assert rv["data"]["reason"] == "manual", rv
        assert rv["data"]["execution_mode"]["mode"] == "sandbox", rv
        ids = [int(e["id"]) for e in es.events]
        assert all(b > a for a, b in zip(ids, ids[1:])), ids
    finally:
        es.close()


def test_permission_changed(hg):
    bob = hg.login(*pl.USER)
    es = stream(hg, cookie=bob.cookie)
    try:
        r = bob.post("/api/permission", {"permission": "read-only"})
        assert r.status == 200, r
        ev = es.wait("permission_changed")
        assert ev["data"]["permission"] == "read-only", ev
    finally:
        es.close()


def test_streams_see_only_their_own(hg, alice):
    """A grant reaches the streams of that session (cookie, or a token
    bound to it), not another session of the same admin, nor bob."""
    other = hg.login(*pl.ADMIN)
    bob = hg.login(*pl.USER)
    tok = pl.mint_token(alice)
    mine = stream(hg, cookie=alice.cookie)
    by_token = stream(hg, bearer=tok)
    theirs = stream(hg, cookie=other.cookie)
    bobs = stream(hg, cookie=bob.cookie)
    try:
        pl.grant(alice)
        mine.wait("mode_changed")
        by_token.wait("mode_changed")
        pl.set_mode(alice, "sandbox")
        mine.wait("mode_reverted")
        by_token.wait("mode_reverted")
        for es in (theirs, bobs):
            es.drain(0.5)
            assert not es.events, es.events
    finally:
        for es in (mine, by_token, theirs, bobs):
            es.close()


def test_terminal_exited_reaches_every_stream_of_the_user(hg):
    bob = hg.login(*pl.USER)
    bob2 = hg.login(*pl.USER)
    tok = hg.hgctl_ok("token", "create", pl.USER[0]).stdout.strip()
    alice = hg.login(*pl.ADMIN)
    streams = [stream(hg, cookie=bob.cookie), stream(hg, cookie=bob2.cookie),
               stream(hg, bearer=tok)]
    alices = stream(hg, cookie=alice.cookie)
    try:
        r = bob.post("/api/terminals", {})
        assert r.status == 201, r
        tid = r.json()["id"]
        assert bob.request("DELETE", "/api/terminals/" + tid).status == 200
        for es in streams:
            ev = es.wait("terminal_exited",
                         pred=lambda e: e["data"]["id"] == tid)
            assert ev["data"]["id"] == tid
        alices.drain(0.3)
        assert not [e for e in alices.events
                    if e["event"] == "terminal_exited"], alices.events
    finally:
        for es in streams + [alices]:
            es.close()


def test_resume_with_last_event_id(hg, alice):
    es = stream(hg, cookie=alice.cookie)
    try:
        pl.grant(alice)
        es.wait("mode_expiring")
    finally:
        es.close()
    seen = es.events
    last = seen[-1]["id"]
    # While nobody listens: a revert, and a permission change.
    assert pl.set_mode(alice, "sandbox").status == 200
    assert alice.post("/api/permission",
                      {"permission": "read-only"}).status == 200
    es = stream(hg, cookie=alice.cookie, last_event_id=last)
    try:
        es.wait("permission_changed")
        got = [(e["event"], e["id"]) for e in es.events]
        assert [g[0] for g in got] == ["mode_reverted",
                                      "permission_changed"], got
        assert all(int(i) > int(last) for _, i in got), (last, got)
        assert es.events[0]["data"]["reason"] == "manual", es.events
        newest = es.events[-1]["id"]
    finally:
        es.close()
    # From the newest id on, nothing old comes back; new events do.
    es = stream(hg, cookie=alice.cookie, last_event_id=newest)
    try:
        es.drain(0.4)
        assert not es.events, es.events
        assert alice.post("/api/permission",
                          {"permission": "workspace-write"}).status == 200
        ev = es.wait("permission_changed")
        assert ev["data"]["permission"] == "workspace-write", ev
        assert int(ev["id"]) > int(newest)
    finally:
        es.close()


def test_resume_with_another_sessions_id_gets_nothing_of_it(hg, alice):
    """Last-Event-ID replays only what the stream may see."""
    bob = hg.login(*pl.USER)
    pl.grant(alice)
    pl.set_mode(alice, "sandbox")
    es = stream(hg, cookie=bob.cookie, last_event_id=1)
    try:
        es.drain(0.4)
        assert not [e for e in es.events if e["event"].startswith("mode_")], \
            es.events
    finally:
        es.close()


def test_resume_from_too_old_an_id_asks_for_a_resync(hg, alice):
    es = stream(hg, cookie=alice.cookie, last_event_id=1)
    try:
        ev = es.wait("resync")
        assert ev["id"] is None, ev
    finally:
        es.close()


@pytest.mark.parametrize("value", ["abc", "-5", "", "12x",
                                   "9007199254740992", "99999999999999999999"])
def test_malformed_last_event_id_is_a_fresh_stream(hg, alice, value):
    es = stream(hg, cookie=alice.cookie, last_event_id=value)
    try:
        es.drain(0.3)
        assert not es.events, es.events
        pl.grant(alice)
        es.wait("mode_changed")
    finally:
        es.close()


def test_logout_ends_the_stream(hg):
    bob = hg.login(*pl.USER)
    es = stream(hg, cookie=bob.cookie)
    try:
        assert bob.post("/api/logout").status == 200
        assert es.wait_closed(), "the stream stayed open after logout"
    finally:
        es.close()
    again = pl.EventStream(hg, cookie=bob.cookie)
    assert again.status == 401, again.status


def test_logout_sends_session_ended_first(hg):
    bob = hg.login(*pl.USER)
    es = stream(hg, cookie=bob.cookie)
    try:
        assert bob.post("/api/logout").status == 200
        es.wait_closed()
        assert "session_ended" in es.names(), es.events
    finally:
        es.close()


def test_revoked_token_ends_its_streams(hg, alice):
    """Revoking one token ends its event streams at once (token_revoked,
    then the close); the stream of another token of the same login session
    and the session's own stream stay open, are told, and get the next mode
    change."""
    gone = alice.post("/api/session/tokens").json()
    kept = pl.mint_token(alice)
    es = stream(hg, bearer=gone["token"])
    other = stream(hg, bearer=kept)
    panel = stream(hg, cookie=alice.cookie)
    try:
        hg.hgctl_ok("token", "revoke", gone["id"])
        ev = es.wait("token_revoked")
        assert ev["data"] == {"id": gone["id"]}, ev
        assert es.wait_closed(), "the revoked token's stream stayed open"
        for s in (other, panel):
            assert s.wait("token_revoked")["data"]["id"] == gone["id"]
        g = pl.grant(alice)
        for s in (other, panel):
            assert s.wait("mode_changed")["data"] == g
            assert not s.closed
    finally:
        for s in (es, other, panel):
            s.close()


def test_revoked_standalone_token(hg):
    """A standalone token's stream ends when it is revoked; another
    standalone token's of the same user is told and stays open (it hears
    of its own revocation next)."""
    gone = hg.hgctl_json("token", "create", pl.USER[0])
    kept = hg.hgctl_json("token", "create", pl.USER[0])
    es = stream(hg, bearer=gone["token"])
    other = stream(hg, bearer=kept["token"])
    try:
        hg.hgctl_ok("token", "revoke", str(gone["id"]))
        assert es.wait("token_revoked")["data"]["id"] == gone["id"]
        assert es.wait_closed(), "the revoked token's stream stayed open"
        assert other.wait("token_revoked")["data"]["id"] == gone["id"]
        hg.hgctl_ok("token", "revoke", str(kept["id"]))
        ev = other.wait("token_revoked",
                        pred=lambda e: e["data"]["id"] == kept["id"])
        assert ev, other.events
        assert other.wait_closed()
    finally:
        es.close()
        other.close()
