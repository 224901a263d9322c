"""GET /api/status on its fast path: brokerd answers it from the usage
sandboxd last reported for the user, at most a second old and with its
age (usage_age_ms), asked again in the background; a change of the
user's usage shows up after a refresh; without sandboxd there is no
usage, and with it back the usage returns. frontd keeps nothing: every
request still goes to brokerd, which refuses a bad or ended session."""

import re
import time

import hglib
import policylib as pl

MAX_AGE_MS = 1000       # SANDBOX_USAGE_MAX_MS in brokerd/brokerd.h


def status(s):
    r = s.get("/api/status")
    assert r.status == 200, r
    return r.json()


def check_kept(doc):
    """A usage object with its age, within the bound, and no reason."""
    assert isinstance(doc["usage"], dict), doc
    assert isinstance(doc["usage_age_ms"], int), doc
    assert 0 <= doc["usage_age_ms"] <= MAX_AGE_MS, doc
    assert doc["usage_reason"] is None, doc


def test_usage_kept_refreshed_and_lost(hostgate_factory):
    hg = pl.own(hostgate_factory, "usage-kept")
    bob = hg.login(*pl.USER)
    first = status(bob)
    check_kept(first)
    for _ in range(20):
        check_kept(status(bob))

    # A shell of bob's adds processes to his cgroup: where sandboxd counts
    # them, a later status shows more.
    if isinstance(first["containment"].get("pids"), str):
        before = first["usage"]["pids"]["current"] or 0
        r = bob.post("/api/terminals", {"cols": 80, "rows": 24})
        assert r.status == 201, r

        def grown():
            doc = status(bob)
            check_kept(doc)
            cur = doc["usage"]["pids"]["current"]
            return cur is not None and cur > before
        hglib.wait_for(grown, what="bob's pids usage to grow")

    # Without sandboxd: no usage, no age, and why.
    assert hg.stop("sandboxd") == 0
    doc = status(bob)
    assert doc["usage"] is None and doc["usage_age_ms"] is None, doc
    assert "unreachable" in doc["usage_reason"], doc

    # sandboxd back: its usage again (nothing kept from before).
    hg.start("sandboxd")
    hglib.wait_for(lambda: status(bob)["usage"] is not None,
                   what="usage after sandboxd's restart")
    check_kept(status(bob))


def test_usage_asked_once_for_many_statuses(hostgate_factory):
    """brokerd asks sandboxd once for a burst of statuses, not once each:
    sandboxd's debug log has a line per usage request it serves."""
    hg = hostgate_factory(env={"HOSTGATE_LOG_LEVEL": "debug"},
                          name="usage-once", start=False)
    hg.start_all()
    hg.add_user(*pl.USER)
    bob = hg.login(*pl.USER)
    status(bob)
    t0 = time.monotonic()
    for _ in range(30):
        check_kept(status(bob))
    elapsed_ms = (time.monotonic() - t0) * 1000
    asked = len(re.findall(r"\busage of bob\b", hg.log_text("sandboxd")))
    # The first, then at most one refresh per half second of the burst
    # (without the kept usage: 31).
    assert 1 <= asked <= 2 + elapsed_ms // 500, (asked, elapsed_ms)


def test_status_still_refused_by_brokerd(hostgate_factory):
    """Nothing is answered from a copy in frontd: a bad cookie, and the
    cookie of a session that has ended, are refused by brokerd."""
    hg = pl.own(hostgate_factory, "usage-auth")
    bob = hg.login(*pl.USER)
    assert bob.get("/api/status").status == 200
    r = hg.get("/api/status", cookie="not-a-session")
    assert r.status == 401, r
    assert r.error()["code"] == "unauthorized", r
    cookie = bob.cookie
    r = bob.post("/api/logout")
    assert r.status == 200, r
    r = hg.get("/api/status", cookie=cookie)
    assert r.status == 401, r
    assert r.error()["code"] == "unauthorized", r


def test_status_reply_head(hostgate_factory):
    """The reply's head as built in place: its length, the request id, no
    caching, keep-alive; a login reply still carries its Set-Cookie."""
    hg = pl.own(hostgate_factory, "usage-head")
    bob = hg.login(*pl.USER)
    r = bob.get("/api/status")
    assert r.status == 200, r
    assert int(r.header("Content-Length")) == len(r.body), r
    assert re.fullmatch(r"[0-9a-f]{16}", r.header("X-Request-Id")), r
    assert r.header("Cache-Control") == "no-store", r
    assert r.header("Content-Type") == "application/json", r
    assert r.header("X-Frame-Options") == "DENY", r
    raw = hg.raw(b"GET /api/status HTTP/1.1\r\nHost: x\r\nCookie: hg_session="
                 + bob.cookie.encode() + b"\r\n\r\n")
    assert raw.startswith(b"HTTP/1.1 200 OK\r\n"), raw[:200]
    assert b"\r\nConnection: keep-alive\r\n" in raw, raw[:400]
    r = hg.post("/api/login", {"username": pl.USER[0],
                               "password": pl.USER[1]})
    assert r.status == 200, r
    c = r.cookie()
    assert c and c[0] and "httponly" in c[1], r
