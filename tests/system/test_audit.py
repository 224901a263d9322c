"""The audit log: a record of every decision (allowed or refused, with the
reason), chained and signed; `hgctl audit verify` finds an edited, deleted,
inserted, reordered or truncated record and names the first bad sequence
number; `hgctl audit show` and GET /api/admin/audit read it with filters."""

import hashlib
import hmac
import json
import os
import re
import stat

import pytest

import hglib
import policylib as pl

HMAC_SUFFIX = 75        # ,"hmac":"<64 hex>"}


# The configuration of `hg` (conftest.py): pooled per mode.
# A grant lasts 2 s; one terminal per user, so that a second is a
# refused spawn.
HOSTGATE = pl.config(HOST_EXECUTION_DIRECT_TTL_SECONDS=2,
                    HOSTGATE_MAX_TERMINALS_PER_USER=1)


@pytest.fixture(scope="module")
def story(hg):
    """Every kind of decision once, in order; returns what the tests need
    to find their records."""
    out = {}
    alice = hg.login(*pl.ADMIN)
    bob = hg.login(*pl.USER)
    out["alice"], out["bob"] = alice, bob
    assert hg.post("/api/login", {"username": "bob",
                                  "password": "wrong-password"}).status == 401
    assert hg.post("/api/login", {"username": "nobody-here",
                                  "password": "whatever-1"}).status == 401
    assert pl.set_mode(bob, "direct").status == 403
    tok = pl.mint_token(alice)
    assert hg.post("/api/execution-mode", {"mode": "direct"},
                   bearer=tok).status == 403
    es = pl.EventStream(hg, cookie=alice.cookie)
    g = pl.set_mode(alice, "direct")
    assert g.status == 200, g
    # On disk before the answer: read at once, no polling.
    out["granted_at_once"] = pl.audit_records(hg, action="mode_granted",
                                              user="alice")
    out["direct_cmd"] = "echo audit-probe-%d" % os.getpid()
    res = pl.run(alice, out["direct_cmd"])
    assert res["mode"] == "direct", res
    t = alice.post("/api/terminals", {})
    assert t.status == 201 and t.json()["mode"] == "direct", t
    out["direct_term"] = t.json()["id"]
    es.wait("mode_reverted")
    es.close()
    pl.grant(alice)
    assert pl.set_mode(alice, "sandbox").status == 200
    res = pl.run(bob, "echo sandboxed")
    assert res["mode"] == "sandbox", res
    t = bob.post("/api/terminals", {})
    assert t.status == 201, t
    out["bob_term"] = t.json()["id"]
    r = bob.post("/api/terminals", {})
    pl.assert_error(r, 429, "rate_limited")
    assert alice.get("/api/admin/debug").status == 200
    assert bob.get("/api/admin/sessions").status == 403
    r = alice.request("DELETE", "/api/admin/terminals/" + out["bob_term"])
    assert r.status == 200, r
    doc = hg.hgctl_json("token", "create", "bob")
    hg.hgctl_ok("token", "revoke", doc["id"])
    out["revoked_token"] = doc["id"]
    assert bob.post("/api/permission",
                    {"permission": "read-only"}).status == 200
    # Nothing more is on its way: the killed terminal's end is recorded.
    pl.wait_audit(hg, action="terminal_exited", user="bob")
    return out


def one(hg, **match):
    recs = pl.wait_audit(hg, **match)
    return recs[-1]


def test_record_shape_and_files(hg, story):
    path = pl.audit_path(hg)
    st = os.stat(path)
    assert stat.S_IMODE(st.st_mode) == 0o600, oct(st.st_mode)
    key = os.path.join(hg.state, "audit.key")
    kst = os.stat(key)
    assert stat.S_IMODE(kst.st_mode) == 0o600, oct(kst.st_mode)
    assert kst.st_size == 32
    if hg.mode == "root":
        uid = hglib.account(hglib.SERVICE_USERS["brokerd"])[0]
        assert st.st_uid == uid and kst.st_uid == uid
    with open(path, "rb") as f:
        lines = f.read().split(b"\n")
    assert lines[-1] == b"", "the log does not end with a newline"
    keys = ["seq", "time", "host", "action", "user", "session", "allowed",
            "reason", "detail", "prev", "hmac"]
    for line in lines[:-1]:
        rec = json.loads(line)
        assert list(rec) == keys, rec
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z",
                            rec["time"]), rec
        assert isinstance(rec["allowed"], bool), rec
        assert isinstance(rec["detail"], dict), rec


def test_chain_checks_independently(hg, story):
    """prev is the SHA-256 of the previous line, hmac the HMAC-SHA256 of
    the line without its hmac member, under audit.key: checked here in
    Python, as docs/audit.md says anyone can."""
    with open(os.path.join(hg.state, "audit.key"), "rb") as f:
        key = f.read()
    with open(pl.audit_path(hg), "rb") as f:
        lines = f.read().split(b"\n")[:-1]
    prev = "0" * 64
    for i, line in enumerate(lines, 1):
        rec = json.loads(line)
        assert rec["seq"] == i, (i, rec)
        assert rec["prev"] == prev, (i, rec)
        assert line[-HMAC_SUFFIX:-66] == b',"hmac":"', line[-80:]
        want = hmac.new(key, line[:-HMAC_SUFFIX] + b"}",
                        hashlib.sha256).hexdigest()
        assert rec["hmac"] == want, (i, rec)
        prev = hashlib.sha256(line).hexdigest()


def test_logins(hg, story):
    rec = one(hg, action="login", user="alice")
    assert rec["allowed"] is True and rec["session"], rec
    assert rec["detail"]["client"] == "127.0.0.1", rec
    rec = one(hg, action="login_failed", user="bob")
    assert rec["allowed"] is False, rec
    assert rec["reason"] == "invalid username or password", rec
    assert rec["session"] is None, rec
    # An unknown name is refused the same way, and recorded.
    recs = [r for r in pl.audit_records(hg, action="login_failed")
            if r["user"] in (None, "nobody-here")]
    assert recs, pl.audit_records(hg, action="login_failed")


def test_mode_decisions(hg, story):
    alice = story["alice"]
    recs = pl.audit_records(hg, action="mode_requested", user="bob")
    assert recs and recs[-1]["detail"]["mode"] == "direct", recs
    rec = one(hg, action="mode_refused", user="bob")
    assert rec["allowed"] is False, rec
    assert rec["reason"] == "direct mode needs an admin session", rec
    rec = one(hg, action="mode_refused", user="alice")
    assert rec["allowed"] is False, rec
    assert rec["reason"] == "agent tokens cannot change the execution mode"
    grants = pl.audit_records(hg, action="mode_granted", user="alice")
    assert len(grants) == 2, grants
    assert all(g["allowed"] and g["detail"]["ttl_seconds"] == 2
               for g in grants), grants
    assert story["granted_at_once"], "mode_granted not on disk at the reply"
    exp = pl.audit_records(hg, action="mode_expired", user="alice")
    assert exp and exp[0]["reason"] == "expired", exp
    assert exp[0]["session"] == grants[0]["session"], (exp, grants)
    assert exp[0]["detail"]["processes"] == "terminated", exp
    rev = pl.audit_records(hg, action="mode_reverted", user="alice")
    assert rev and rev[-1]["reason"] == "manual", rev
    assert rev[-1]["detail"]["by"] == "alice", rev
    # A session's requests are recorded with its public id, never its
    # cookie.
    text = open(pl.audit_path(hg)).read()
    assert alice.cookie not in text and alice.csrf not in text


def test_spawns(hg, story):
    # How a spawn went is its spawn_end record (test_audit_spawn.py has
    # the allow record written before it starts).
    spawns = pl.audit_records(hg, action="spawn_end", user="alice")
    direct = [s for s in spawns if s["detail"].get("mode") == "direct"]
    assert direct, spawns
    d = direct[0]["detail"]
    assert d["backend"] == "direct", d
    assert pl.HEX64.fullmatch(d["sha256"]), d
    # The hash of the exact command line run: bash -c COMMAND, quoted.
    line = "/bin/bash -c '%s'" % story["direct_cmd"]
    assert d["sha256"] == hashlib.sha256(line.encode()).hexdigest(), d
    rec = one(hg, action="spawn_end", user="bob")
    assert rec["detail"]["mode"] == "sandbox", rec
    assert rec["detail"]["backend"] == "bwrap", rec
    assert pl.HEX64.fullmatch(rec["detail"]["sha256"]), rec
    # The same hash as the command line sandboxd ran (its debug log).
    m = re.search(r"spawn %s: (.*)" % rec["detail"]["id"],
                  hg.log_text("sandboxd"))
    assert m, "no debug line for spawn %s" % rec["detail"]["id"]
    assert hashlib.sha256(m.group(1).encode()).hexdigest() == \
        rec["detail"]["sha256"], m.group(1)
    refused = one(hg, action="spawn_refused", user="bob")
    assert refused["allowed"] is False and refused["reason"], refused
    assert refused["detail"]["kind"] == "terminal", refused
    assert refused["detail"]["mode"] == "sandbox", refused


def test_terminals(hg, story):
    opened = pl.audit_records(hg, action="terminal_opened", user="alice")
    assert opened and opened[0]["detail"]["mode"] == "direct", opened
    assert opened[0]["detail"]["backend"] == "direct", opened
    assert opened[0]["detail"]["id"] == story["direct_term"], opened
    ex = one(hg, action="terminal_exited", user="alice")
    assert ex["detail"]["id"] == story["direct_term"], ex
    opened = pl.audit_records(hg, action="terminal_opened", user="bob")
    assert opened and opened[0]["detail"]["backend"] == "bwrap", opened


def test_terminal_opened_has_the_command_line_hash(hg, story):
    for user in ("alice", "bob"):
        for rec in pl.audit_records(hg, action="terminal_opened", user=user):
            assert isinstance(rec["detail"]["sha256"], str) and \
                pl.HEX64.fullmatch(rec["detail"]["sha256"]), rec


def test_admin_actions(hg, story):
    assert one(hg, action="admin_debug", user="alice")["allowed"] is True
    rec = one(hg, action="admin_refused", user="bob")
    assert rec["allowed"] is False, rec
    rec = one(hg, action="admin_kill", user="alice")
    assert rec["reason"] == story["bob_term"], rec
    rec = one(hg, action="token_revoked")
    assert rec["detail"].get("token") == story["revoked_token"], rec
    assert pl.audit_records(hg, action="token_minted", user="bob")
    assert pl.audit_records(hg, action="user_added", user="alice")
    rec = one(hg, action="permission_changed", user="bob")
    assert rec["reason"] == "read-only", rec


def test_verify_passes(hg, story):
    n = len(pl.audit_records(hg))
    r = hg.hgctl("audit", "verify")
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert "audit log OK" in r.stdout, r.stdout
    rc, doc = pl.verify(hg)
    assert rc == 0 and doc["ok"] is True, doc
    assert doc["records"] == n and doc["last_seq"] == n, (doc, n)
    assert doc["bad_seq"] is None and doc["error"] is None, doc


# -- tampering ----------------------------------------------------------------

def _edit_byte(lines, k):
    """Change one digit of record k's time: valid JSON, a different
    record."""
    line = lines[k - 1]
    i = line.index(b'"time":"') + len(b'"time":"2026-11-29T18:00:0')
    c = line[i:i + 1]
    lines[k - 1] = line[:i] + (b"1" if c != b"1" else b"2") + line[i + 1:]
    return lines


def _edit_hmac(lines, k):
    line = lines[k - 1]
    c = line[-3:-2]
    lines[k - 1] = line[:-3] + (b"0" if c != b"0" else b"1") + line[-2:]
    return lines


def _edit_user(lines, k):
    """A record's user renamed, same length."""
    line = lines[k - 1]
    assert b'"user":"alice"' in line or b'"user":"bob"' in line, line
    lines[k - 1] = line.replace(b'"user":"alice"', b'"user":"alicf"', 1) \
        .replace(b'"user":"bob"', b'"user":"bib"', 1)
    return lines


def _delete(lines, k):
    del lines[k - 1]
    return lines


def _swap(lines, k):
    lines[k - 1], lines[k] = lines[k], lines[k - 1]
    return lines


def _duplicate(lines, k):
    lines.insert(k, lines[k - 1])
    return lines


def _cut_end(lines, k):
    return lines[:-2]


# name: (edit, the bad seq for records 1..n with k = 5)
TAMPER = {
    "changed-byte": (_edit_byte, lambda n: 5),
    "changed-hmac": (_edit_hmac, lambda n: 5),
    "renamed-user": (_edit_user, lambda n: 5),
    "deleted-line": (_delete, lambda n: 5),
    "deleted-first-line": (lambda ls, k: _delete(ls, 1), lambda n: 1),
    "swapped-lines": (_swap, lambda n: 5),
    "duplicated-line": (_duplicate, lambda n: 6),
    "truncated-records": (_cut_end, lambda n: n - 1),
}


def rewrite(path, data):
    """Replace the content of path in place (the same inode, which
    brokerd holds open)."""
    with open(path, "r+b") as f:
        f.write(data)
        f.truncate(len(data))


@pytest.fixture
def log_restored(hg, story):
    """The log's bytes; put back after the test, and checked whole."""
    path = pl.audit_path(hg)
    with open(path, "rb") as f:
        orig = f.read()
    yield path, orig
    rewrite(path, orig)
    rc, doc = pl.verify(hg)
    assert rc == 0, doc


@pytest.mark.parametrize("kind", list(TAMPER))
def test_verify_finds_tampering(hg, log_restored, kind):
    path, orig = log_restored
    lines = orig.split(b"\n")[:-1]
    n = len(lines)
    assert n >= 10, n
    edit, bad = TAMPER[kind]
    rewrite(path, b"".join(l + b"\n" for l in edit(list(lines), 5)))
    rc, doc = pl.verify(hg)
    assert rc == 1, doc
    assert doc["ok"] is False and doc["bad_seq"] == bad(n), (kind, doc)
    assert doc["error"], doc
    r = hg.hgctl("audit", "verify")
    assert r.returncode == 1, r.stdout
    assert "first bad record at seq %d" % bad(n) in r.stdout, r.stdout


def test_verify_finds_a_record_cut_short(hg, log_restored):
    path, orig = log_restored
    n = orig.count(b"\n")
    rewrite(path, orig[:-40])
    rc, doc = pl.verify(hg)
    assert rc == 1 and doc["bad_seq"] == n, doc
    assert "truncated" in doc["error"], doc


def test_verify_finds_an_emptied_log(hg, log_restored):
    path, orig = log_restored
    rewrite(path, b"")
    rc, doc = pl.verify(hg)
    assert rc == 1 and doc["bad_seq"] == 1, doc
    assert "truncated" in doc["error"], doc


def test_verify_finds_a_forged_record(hg, log_restored):
    """A record re-chained by someone without the key: right seq and
    prev, made-up hmac."""
    path, orig = log_restored
    lines = orig.split(b"\n")[:-1]
    rec = json.loads(lines[4])
    rec["allowed"] = not rec["allowed"]
    body = json.dumps({k: v for k, v in rec.items() if k != "hmac"},
                      separators=(",", ":")).encode()
    fake = hmac.new(b"not the key", body, hashlib.sha256).hexdigest()
    lines[4] = body[:-1] + b',"hmac":"' + fake.encode() + b'"}'
    rewrite(path, b"".join(l + b"\n" for l in lines))
    rc, doc = pl.verify(hg)
    assert rc == 1 and doc["bad_seq"] == 5, doc
    assert "HMAC" in doc["error"], doc


# -- rotation -----------------------------------------------------------------

def test_rotation_keeps_the_chain(hostgate_factory):
    hg = pl.own(hostgate_factory, "rotate", HOSTGATE_AUDIT_ROTATE_BYTES=4096)
    for i in range(25):
        hg.post("/api/login", {"username": "bob", "password": "bad-%d" % i})
    rotated = sorted(n for n in os.listdir(hg.state)
                     if re.fullmatch(r"audit\.log\.\d+", n))
    assert len(rotated) >= 2, os.listdir(hg.state)
    lines = []
    for name in rotated + ["audit.log"]:
        with open(os.path.join(hg.state, name), "rb") as f:
            data = f.read()
        assert len(data) <= 4096, (name, len(data))
        lines += data.split(b"\n")[:-1]
    prev = "0" * 64
    for i, line in enumerate(lines, 1):
        rec = json.loads(line)
        assert rec["seq"] == i and rec["prev"] == prev, (i, rec)
        prev = hashlib.sha256(line).hexdigest()
    rc, doc = pl.verify(hg)
    assert rc == 0 and doc["records"] == len(lines), doc
    # A record deleted from a rotated file is found.
    first = os.path.join(hg.state, rotated[0])
    with open(first, "rb") as f:
        data = f.read().split(b"\n")
    del data[1]
    with open(first, "wb") as f:
        f.write(b"\n".join(data))
    rc, doc = pl.verify(hg)
    assert rc == 1 and doc["bad_seq"] == 2, doc
    assert rotated[0] in doc["error"], doc


# -- reading it ---------------------------------------------------------------

def test_hgctl_audit_show_filters(hg, story):
    allrecs = pl.audit_records(hg)
    got = pl.audit_show(hg, "--user", "bob", "--action",
                        "mode_refused", "--limit", "0")
    want = [r for r in allrecs if r["user"] == "bob" and
            r["action"] == "mode_refused"]
    assert [r["seq"] for r in got] == [r["seq"] for r in want], (got, want)
    assert got == want
    got = pl.audit_show(hg, "--action", "spawn", "--limit", "1")
    assert len(got) == 1 and got[0]["seq"] == max(
        r["seq"] for r in allrecs if r["action"] == "spawn"), got
    # Time bounds, to the second, both included.
    t0 = allrecs[0]["time"][:19] + "Z"
    tn = allrecs[-1]["time"][:19] + "Z"
    got = pl.audit_show(hg, "--since", t0, "--until", tn,
                        "--limit", "0")
    assert [r["seq"] for r in got] == [r["seq"] for r in allrecs
                                       if r["seq"] <= got[-1]["seq"]]
    got = pl.audit_show(hg, "--until", "2001-01-01T00:00:00Z")
    assert got == [], got
    got = pl.audit_show(hg, "--since", "2999-01-01")
    assert got == [], got
    # Text: a header, then one tab-separated line per record.
    r = hg.hgctl_ok("audit", "show", "--user", "bob", "--action",
                    "mode_refused")
    lines = r.stdout.splitlines()
    assert lines[0] == "TIME\tSEQ\tACTION\tUSER\tRESULT\tREASON\tDETAIL", lines
    rows = [l.split("\t") for l in lines[1:]]
    assert [int(x[1]) for x in rows] == [w["seq"] for w in want], rows
    assert all(x[2] == "mode_refused" and x[3] == "bob" and
               x[4] == "denied" for x in rows), rows
    assert rows[-1][5] == "direct mode needs an admin session", rows


def test_admin_audit_api(hg, story):
    alice, bob = story["alice"], story["bob"]
    r = alice.get("/api/admin/audit?user=bob&action=mode_refused")
    assert r.status == 200, r
    got = r.json()["records"]
    want = pl.audit_records(hg, user="bob", action="mode_refused")
    assert [g["seq"] for g in got] == [w["seq"] for w in want], got
    r = alice.get("/api/admin/audit?action=spawn&limit=1")
    got = r.json()["records"]
    assert len(got) == 1 and got[0]["action"] == "spawn", got
    t = pl.audit_records(hg)[0]["time"][:19] + "Z"
    r = alice.get("/api/admin/audit?until=%s&limit=10000" % t)
    assert r.status == 200, r
    assert all(g["time"][:19] + "Z" <= t for g in r.json()["records"]), r
    r = alice.get("/api/admin/audit?since=2999-01-01T00:00:00Z")
    assert r.status == 200 and r.json()["records"] == [], r
    for q in ("since=yesterday", "limit=0", "limit=x", "until=2026-13-45T"):
        pl.assert_error(alice.get("/api/admin/audit?" + q), 400,
                        "bad_request")
    # Only an admin's login session.
    pl.assert_error(bob.get("/api/admin/audit"), 403, "forbidden")
    tok = pl.mint_token(alice)
    pl.assert_error(hg.get("/api/admin/audit", bearer=tok), 403, "forbidden")
    pl.assert_error(hg.get("/api/admin/audit"), 401, "unauthorized")

