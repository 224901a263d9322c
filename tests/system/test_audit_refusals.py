"""Refused requests are audited: a CSRF failure, an unknown or forged
cookie, a forged or revoked bearer token, a login over the rate limit,
each with the client's address and the request id. They are aggregated
so that a flood cannot fill the disk: the first per (client address,
reason) in HOSTGATE_AUDIT_REFUSAL_INTERVAL_SECONDS is written at once,
the repeats are counted and written as one record ("repeats": N) when
the interval ends, when the table is full, at shutdown, or on `hgctl
audit flush`.

Mode-independent (MODE_INDEPENDENT): run in one mode only, root as root,
because which refusals are recorded and how they are aggregated is
brokerd's logic, not its privileges."""

import json

import pytest

import hglib
import policylib as pl

MODE_INDEPENDENT = True


def refusals(hg, source, **match):
    return [r for r in pl.audit_records(hg, **match)
            if r["detail"].get("client") == source]


def total(recs):
    """Refusals a list of records stands for."""
    return sum(r["detail"].get("repeats", 1) for r in recs)


# The configuration of `hg` (conftest.py): pooled per mode. An interval
# no test outlasts: only flushes end it.
HOSTGATE = pl.config(HOSTGATE_AUDIT_REFUSAL_INTERVAL_SECONDS=86400,
                    HOSTGATE_LOGIN_RATE_PER_MINUTE=1,
                    HOSTGATE_LOGIN_BURST=2)


@pytest.fixture(scope="module")
def alice(hg):
    """One login: logins are rate limited hard here, per user too."""
    return hg.login(*pl.ADMIN, source="127.0.1.9")


def test_csrf_failure_is_recorded(hg, alice):
    r = alice.post("/api/session/tokens", csrf=False, source="127.0.1.1")
    assert r.status == 403, r
    rec = pl.wait_audit(hg, action="csrf_refused", user="alice")[-1]
    assert rec["allowed"] is False and rec["reason"] == "missing CSRF token"
    assert rec["detail"]["client"] == "127.0.1.1", rec
    assert rec["detail"]["request_id"] == r.header("X-Request-Id"), rec
    assert rec["session"] and rec["session"] != alice.cookie, rec
    r = alice.post("/api/session/tokens", csrf=False, source="127.0.1.2",
                   headers={"X-CSRF-Token": "forged"})
    assert r.status == 403, r
    rec = refusals(hg, "127.0.1.2", action="csrf_refused")
    assert [x["reason"] for x in rec] == ["invalid CSRF token"], rec


def test_forged_cookie_is_recorded(hg):
    r = hg.get("/api/execution-mode", cookie="f" * 64, source="127.0.2.1")
    assert r.status == 401, r
    recs = refusals(hg, "127.0.2.1", action="auth_refused")
    assert len(recs) == 1, recs
    rec = recs[0]
    assert rec["reason"] == "unknown or expired session cookie", rec
    assert rec["user"] is None and rec["allowed"] is False, rec
    assert rec["detail"]["request_id"] == r.header("X-Request-Id"), rec


def test_forged_bearer_is_recorded(hg):
    r = hg.get("/api/execution-mode", bearer="hgt_" + "0" * 40,
               source="127.0.3.1")
    assert r.status == 401, r
    recs = refusals(hg, "127.0.3.1", action="auth_refused")
    assert [x["reason"] for x in recs] == ["invalid or revoked token"], recs
    assert recs[0]["detail"]["request_id"] == r.header("X-Request-Id")


def test_revoked_token_is_recorded(hg):
    doc = hg.hgctl_json("token", "create", "bob")
    assert hg.get("/api/execution-mode", bearer=doc["token"],
                  source="127.0.4.1").status == 200
    hg.hgctl_ok("token", "revoke", doc["id"])
    r = hg.get("/api/execution-mode", bearer=doc["token"],
               source="127.0.4.1")
    assert r.status == 401, r
    recs = refusals(hg, "127.0.4.1", action="auth_refused")
    assert [x["reason"] for x in recs] == ["invalid or revoked token"], recs
    assert recs[0]["detail"]["request_id"] == r.header("X-Request-Id")


def test_login_flood_is_counted(hg):
    src = "127.0.5.1"
    got = [hg.post("/api/login", {"username": "bob", "password": "no-%d" % i},
                   source=src).status for i in range(20)]
    assert got.count(429) >= 17, got
    limited = refusals(hg, src, action="login_failed", reason="rate limited")
    assert len(limited) == 1 and "repeats" not in limited[0]["detail"], \
        limited
    hg.hgctl_ok("audit", "flush")
    limited = refusals(hg, src, action="login_failed", reason="rate limited")
    assert len(limited) == 2, limited
    assert total(limited) == got.count(429), limited
    summary = limited[1]
    assert summary["detail"]["repeats"] == got.count(429) - 1, summary
    assert summary["user"] == "bob", summary
    assert summary["detail"]["first"] <= summary["detail"]["last"], summary


def test_flood_of_forged_requests_is_bounded(hg):
    src = "127.0.6.1"
    before = len(pl.audit_records(hg))
    for i in range(2000):
        r = hg.get("/api/execution-mode", cookie="%064x" % i, source=src)
        assert r.status == 401, r
    last_rid = r.header("X-Request-Id")
    mid = pl.audit_records(hg)
    assert len(mid) - before == 1, mid[before:]
    out = hg.hgctl_ok("audit", "flush", "--json").stdout
    assert '"records":1' in out.replace(" ", ""), out
    recs = refusals(hg, src, action="auth_refused")
    assert len(recs) == 2, recs
    assert total(recs) == 2000, recs
    assert recs[1]["detail"]["repeats"] == 1999, recs[1]
    # The last repeat's request id is kept.
    assert recs[1]["detail"]["request_id"] == last_rid, recs[1]
    # A second flush has nothing to write; the chain is whole.
    assert '"records":0' in hg.hgctl_ok(
        "audit", "flush", "--json").stdout.replace(" ", "")
    assert pl.verify(hg)[0] == 0


def test_a_full_table_flushes_its_oldest(hg):
    first = "127.0.7.1"
    for _ in range(2):
        hg.get("/api/execution-mode", cookie="e" * 64, source=first)
    assert len(refusals(hg, first)) == 1
    # 1024 other addresses fill the table: the oldest entry is written.
    for i in range(1024):
        hg.get("/api/execution-mode", cookie="e" * 64,
               source="127.1.%d.%d" % (i // 200, i % 200 + 1))
    recs = refusals(hg, first)
    assert len(recs) == 2 and recs[1]["detail"]["repeats"] == 1, recs
    hg.hgctl_ok("audit", "flush")


def test_interval_ends_by_the_timer(hostgate_factory):
    hg = pl.own(hostgate_factory, "refusal-timer",
                HOSTGATE_AUDIT_REFUSAL_INTERVAL_SECONDS=1)
    src = "127.0.8.1"
    for _ in range(3):
        hg.get("/api/execution-mode", bearer="hgt_x", source=src)
    # No flush: the timer writes the count once the interval is over.
    recs = hglib.wait_for(lambda: [x for x in refusals(hg, src)
                                   if "repeats" in x["detail"]],
                          what="the timer's count record")
    assert total(refusals(hg, src)) == 3, refusals(hg, src)
    assert recs[0]["detail"]["interval_seconds"] == 1


def test_shutdown_writes_the_counts(hostgate_factory):
    hg = pl.own(hostgate_factory, "refusal-stop",
                HOSTGATE_AUDIT_REFUSAL_INTERVAL_SECONDS=86400)
    src = "127.0.9.1"
    for _ in range(5):
        hg.get("/api/execution-mode", cookie="d" * 64, source=src)
    assert len(refusals(hg, src)) == 1
    hg.stop("brokerd")
    recs = refusals(hg, src)
    assert len(recs) == 2 and total(recs) == 5, recs
    hg.start("brokerd")
    hglib.wait_for(lambda: hg.hgctl("user", "list").returncode == 0,
                   what="brokerd to answer")
    assert pl.verify(hg)[0] == 0


def test_interval_out_of_range_is_refused(hostgate_factory):
    hg = hostgate_factory(env={"HOSTGATE_AUDIT_REFUSAL_INTERVAL_SECONDS":
                               "0"}, name="refusal-bad", start=False)
    import subprocess
    r = subprocess.run(hg.wrap([hg.binary("brokerd"), "-n"]), env=hg.env,
                       capture_output=True, text=True, timeout=hglib.SLOW)
    assert r.returncode != 0, r
    assert "HOSTGATE_AUDIT_REFUSAL_INTERVAL_SECONDS" in r.stderr, r.stderr


# -- querying them: brokerd filters ------------------------------------------

def test_show_filters_session_decision_request_id(hg, alice):
    r = alice.post("/api/session/tokens", csrf=False, source="127.0.10.1")
    assert r.status == 403, r
    rid = r.header("X-Request-Id")
    rec = refusals(hg, "127.0.10.1", action="csrf_refused")[-1]
    sid = rec["session"]
    allrecs = pl.audit_records(hg)
    got = pl.audit_show(hg, "--session", sid, "--limit", "0")
    assert got == [x for x in allrecs if x["session"] == sid], got
    assert {x["action"] for x in got} >= {"login", "csrf_refused"}, got
    got = pl.audit_show(hg, "--request-id", rid, "--limit", "0")
    assert [x["seq"] for x in got] == [rec["seq"]], got
    got = pl.audit_show(hg, "--decision", "refused", "--limit", "0")
    assert got == [x for x in allrecs if not x["allowed"]], got
    got = pl.audit_show(hg, "--decision", "allowed", "--session", sid)
    assert got and all(x["allowed"] for x in got), got
    got = pl.audit_show(hg, "--type", "csrf_refused", "--limit", "0")
    assert got == [x for x in allrecs if x["action"] == "csrf_refused"], got
    # The table's DETAIL column: the detail as compact JSON.
    lines = hg.hgctl_ok("audit", "show", "--request-id",
                        rid).stdout.splitlines()
    assert lines[0].split("\t")[-1] == "DETAIL", lines
    # Plain compact JSON that a JSON reader takes as it is.
    want = json.dumps(rec["detail"], separators=(",", ":"))
    assert lines[1].split("\t")[6] == want, lines
    assert json.loads(lines[1].split("\t")[6]) == rec["detail"], lines


def test_show_json_is_json_lines(hg):
    r = hg.hgctl_ok("audit", "show", "--limit", "3", "--json")
    lines = r.stdout.splitlines()
    assert len(lines) == 3, r.stdout
    recs = [json.loads(line) for line in lines]
    assert recs == sorted(recs, key=lambda x: x["seq"]), recs


@pytest.mark.parametrize("args", [["--decision", "maybe"],
                                  ["--session"], ["--request-id"]])
def test_show_bad_filters(hg, args):
    r = hg.hgctl(*(["audit", "show"] + args))
    assert r.returncode == 2, (r.stdout, r.stderr)


def test_admin_api_filters(hg, alice):
    r = alice.post("/api/session/tokens", csrf=False, source="127.0.11.1")
    rid = r.header("X-Request-Id")
    rec = refusals(hg, "127.0.11.1", action="csrf_refused")[-1]
    q = "/api/admin/audit?request_id=%s&limit=50" % rid
    got = alice.get(q).json()["records"]
    assert [x["seq"] for x in got] == [rec["seq"]], got
    got = alice.get("/api/admin/audit?session=%s&decision=refused&limit=10000"
                    % rec["session"]).json()["records"]
    want = [x for x in pl.audit_records(hg) if x["session"] == rec["session"]
            and not x["allowed"]]
    assert [x["seq"] for x in got] == [x["seq"] for x in want], got
    assert rec["seq"] in [x["seq"] for x in got], got
    got = alice.get("/api/admin/audit?type=csrf_refused&limit=10000").json()
    assert all(x["action"] == "csrf_refused" for x in got["records"]), got
    r = alice.get("/api/admin/audit?decision=maybe")
    pl.assert_error(r, 400, "bad_request")
