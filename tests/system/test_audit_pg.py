"""One audit chain for a fleet: with a PostgreSQL store (a real server,
pglib.py) every brokerd appends to the store's audit table under one
advisory lock, so that two hosts writing at once never fork the chain;
`hgctl audit verify` checks the table and names a tampered row's seq; a
host with another audit.key refuses to start; a host that loses the store
refuses state changes with 503 (no record, no action), says so on
/healthz, keeps its open terminals, and recovers by itself with a
store_back record."""

import contextlib
import hashlib
import hmac
import json
import os

import pytest

import hglib
import pglib
import policylib as pl
import sandboxlib as sl

pytestmark = pytest.mark.skipif(pglib.available() is not None,
                                reason=pglib.available() or "")

HMAC_SUFFIX = 75        # ,"hmac":"<64 hex>"}


def host_env(url, host):
    env = dict(hglib.LIFTED_ENV)
    env.update({"HOSTGATE_STORE": url, "HOSTGATE_HOST_ID": host,
                "HOSTGATE_STORE_TIMEOUT_SECONDS": "2"})
    return env



def put_key(hg, key):
    """Give hg's state directory the audit key (bytes) before it starts."""
    hg.give_audit_key(key)


def read_key(hg):
    with open(os.path.join(hg.state, "audit.key"), "rb") as f:
        return f.read()


def add_users(hg):
    """alice (admin) and bob; a user the store already has (made on
    another host) is fine."""
    for (name, password), admin in ((hglib.ADMIN, True),
                                    (hglib.USER, False)):
        args = ["user", "add", name] + (["--admin"] if admin else []) + \
            ["--password-stdin"]
        r = hg.hgctl(*args, input=password + "\n")
        assert r.returncode == 0 or "exists" in r.stderr, r.stderr


@contextlib.contextmanager
def fleet(mode, url, n=2, key=None):
    """n hosts h1.. on the store at url, sharing h1's audit key (or key)."""
    hosts = []
    try:
        for i in range(n):
            hg = hglib.Hostgate(mode, env=host_env(url, "h%d" % (i + 1)),
                                name="apg%d" % (i + 1))
            hosts.append(hg)
            if i > 0 or key is not None:
                put_key(hg, key if key is not None else read_key(hosts[0]))
            hg.start_all()
            add_users(hg)
        yield hosts
    except BaseException:
        for hg in hosts:
            hg.failed = True
            print(hg.logs())
        raise
    finally:
        for hg in hosts:
            with contextlib.suppress(AssertionError):
                hg.cleanup()


def rows(pg, url, where="true"):
    """The audit table's rows by seq: (seq, host, action, user, hash,
    line)."""
    got = pg.psql(url, "SELECT seq, host, action, coalesce(\"user\", ''), "
                  "hash, line FROM audit WHERE %s ORDER BY seq" % where)
    return [(int(r[0]), r[1], r[2], r[3], r[4], r[5]) for r in got]


def check_chain(table, key):
    """Check the rows in Python, as docs/audit.md says anyone can: seqs
    1..N with no gap, each prev the SHA-256 of the line before, each HMAC
    under key, the hash column the line's SHA-256, host the line's."""
    prev = "0" * 64
    for i, (seq, host, action, user, h, line) in enumerate(table, 1):
        raw = line.encode()
        rec = json.loads(line)
        assert seq == i and rec["seq"] == i, (i, seq, rec)
        assert rec["prev"] == prev, (i, rec)
        assert rec["host"] == host and rec["action"] == action, (rec, host)
        want = hmac.new(key, raw[:-HMAC_SUFFIX] + b"}",
                        hashlib.sha256).hexdigest()
        assert rec["hmac"] == want, (i, rec)
        prev = hashlib.sha256(raw).hexdigest()
        assert h == prev, (i, h)


def test_two_hosts_one_chain(mode, pg, store):
    """Logins and mode requests on both hosts at once: one chain, seqs
    contiguous, every record chained to the one before (no two share a
    prev: no fork), both hosts in it; verify says OK on each host, and
    each host's show reads the other's records."""
    with fleet(mode, store) as (h1, h2):
        key = read_key(h1)
        assert read_key(h2) == key
        [v] = pg.psql(store, "SELECT value FROM meta WHERE key = "
                      "'audit_key_id'")
        kid = int(v[0]) & ((1 << 64) - 1)
        assert "%016x" % kid == hashlib.sha256(key).hexdigest()[:16]
        before = len(rows(pg, store))

        # Sessions made beforehand: a login costs an argon2 hash, and the
        # point is many appends at once, not many hashes at once.
        sessions = [(h1, h2)[i % 2].login(*hglib.ADMIN) for i in range(8)]

        def one(i):
            if i < 8:
                return (h1, h2)[i % 2].login(*hglib.USER).role == "user"
            r = sessions[i % 8].post("/api/execution-mode",
                                     {"mode": "sandbox"})
            return r.status == 200 or r
        results = pl.at_once(88, one)
        assert results == [True] * 88, results

        table = rows(pg, store)
        check_chain(table, key)
        new = table[before:]
        assert len([r for r in new if r[2] == "login"]) == 16
        assert len([r for r in new if r[2] == "mode_requested"]) == 80
        assert {r[1] for r in new if r[2] == "mode_requested"} == \
            {"h1", "h2"}
        assert {r[1] for r in new if r[2] == "login"} == {"h1", "h2"}
        [[dup]] = pg.psql(store, "SELECT count(*) - count(DISTINCT "
                          "substring(line from '\"prev\":\"([0-9a-f]{64})\"'))"
                          " FROM audit")
        assert dup == "0"
        for hg in (h1, h2):
            rc, doc = pl.verify(hg)
            assert rc == 0 and doc["ok"] is True, doc
            assert doc["records"] == len(table) == doc["last_seq"], doc
        # One chain: h2 shows h1's logins, filtered by the columns.
        logins = pl.audit_show(h2, "--action", "login", "--limit", "0")
        assert {r["host"] for r in logins} == {"h1", "h2"}
        assert len(logins) == 16
        # And the admin view, by the columns: a user, a decision, a time.
        alice = h2.login(*hglib.ADMIN)
        r = alice.get("/api/admin/audit?action=login&decision=allowed"
                      "&since=2000-01-01&limit=5")
        assert r.status == 200, r
        recs = r.json()["records"]
        assert len(recs) == 5 and all(x["action"] == "login" for x in recs)
        assert [x["seq"] for x in recs] == sorted(x["seq"] for x in recs)
        assert recs[-1]["host"] == "h2", recs[-1]   # alice's, just now
        r = alice.get("/api/admin/audit?user=bob&action=login")
        assert r.status == 200, r
        assert len(r.json()["records"]) == 8, r
        assert {x["user"] for x in r.json()["records"]} == {"bob"}
        r = alice.get("/api/admin/audit?user=bob&action=mode_requested")
        assert r.status == 200 and r.json()["records"] == [], r
        r = alice.get("/api/admin/audit?action=login&until=2000-01-01")
        assert r.status == 200 and r.json()["records"] == [], r
        text = h1.hgctl("status").stdout
        assert "STORE" in text and "postgresql" in text, text
        # No audit.log beside the table.
        assert not os.path.exists(os.path.join(h1.state, "audit.log"))
        # Nothing to archive in a table: refused, and nothing written.
        n = len(rows(pg, store))
        r = h1.hgctl("audit", "archive", "--before", "2100-01-01")
        assert r.returncode == 1, r
        assert "not in rotated files" in r.stderr, r.stderr
        assert len(rows(pg, store)) == n


def test_tampered_row_found(mode, pg, store):
    """A row edited with psql: verify fails at its seq, on any host."""
    with fleet(mode, store, n=1) as (h1,):
        for _ in range(3):
            h1.login(*hglib.USER)
        seq = rows(pg, store, "action = 'login'")[1][0]
        pg.psql(store, "UPDATE audit SET line = replace(line, "
                "'\"user\":\"bob\"', '\"user\":\"eve\"') WHERE seq = %d"
                % seq)
        rc, doc = pl.verify(h1)
        assert rc == 1 and doc["ok"] is False, doc
        assert doc["bad_seq"] == seq, doc
        assert "HMAC does not match" in doc["error"], doc
        assert "audit table, seq %d" % seq in doc["error"], doc
        r = h1.hgctl("audit", "verify")
        assert r.returncode == 1
        assert "first bad record at seq %d" % seq in r.stdout + r.stderr


def test_hash_column_edited_found(mode, pg, store):
    """The hash column (what the next append chains to) edited alone: the
    line still checks, the row does not."""
    with fleet(mode, store, n=1) as (h1,):
        h1.login(*hglib.USER)
        [[seq]] = pg.psql(store, "SELECT max(seq) - 1 FROM audit")
        pg.psql(store, "UPDATE audit SET hash = repeat('a', 64) WHERE "
                "seq = %s" % seq)
        rc, doc = pl.verify(h1)
        assert rc == 1 and doc["bad_seq"] == int(seq), doc
        assert "hash column does not match its line" in doc["error"], doc


def test_rows_cut_from_the_end(mode, pg, store):
    """The last rows deleted: the host that wrote them says so; after its
    restart a plain verify passes (the known limit, as with the files)
    and one against an anchor (seq and hash column of the old head) does
    not."""
    with fleet(mode, store, n=1) as (h1,):
        for _ in range(3):
            h1.login(*hglib.USER)
        [[seq, digest]] = pg.psql(store, "SELECT seq, hash FROM audit "
                                  "ORDER BY seq DESC LIMIT 1")
        seq = int(seq)
        r = h1.hgctl("audit", "verify", "--head", "%d:%s" % (seq, digest))
        assert r.returncode == 0, (r.stdout, r.stderr)
        pg.psql(store, "DELETE FROM audit WHERE seq > %d" % (seq - 2))
        rc, doc = pl.verify(h1)
        assert rc == 1 and doc["bad_seq"] == seq - 1, doc
        assert "truncated" in doc["error"], doc
        h1.stop("brokerd")
        h1.start("brokerd")
        h1.wait_control()
        # (A record of the start, if any, takes the freed seqs.)
        rc, doc = pl.verify(h1)
        assert rc == 0 and doc["records"] >= seq - 2, doc
        r = h1.hgctl("audit", "verify", "--json", "--head",
                     "%d:%s" % (seq, digest))
        doc = json.loads(r.stdout)
        assert r.returncode == 1 and doc["bad_seq"] in (seq - 1, seq), doc
        assert "truncated" in doc["error"] or \
            "not the anchor's" in doc["error"], doc


def test_other_key_refused(mode, pg, store):
    """A second host with its own audit.key refuses to start, naming both
    key ids and the remedy; without any key it refuses too."""
    with fleet(mode, store, n=1) as (h1,):
        fleet_id = hashlib.sha256(read_key(h1)).hexdigest()[:16]
        other = os.urandom(32)
        other_id = hashlib.sha256(other).hexdigest()[:16]
        for key, want in ((other, [other_id, fleet_id,
                                   "copy audit.key from a host of the fleet"]),
                          (None, ["is missing",
                                  "copy audit.key from another host"])):
            h2 = hglib.Hostgate(mode, env=host_env(store, "h2"),
                                name="apgbad")
            try:
                if key is not None:
                    put_key(h2, key)
                h2.start("brokerd")
                h2.procs["brokerd"].wait(hglib.SLOW)
                assert h2.procs["brokerd"].returncode != 0
                log = h2.log_text("brokerd")
                for w in want:
                    assert w in log, log
            finally:
                h2.cleanup()
        # A store whose chain names no key (copied in, say): the last row
        # must check under this host's key.
        pg.psql(store, "DELETE FROM meta WHERE key = 'audit_key_id'")
        h2 = hglib.Hostgate(mode, env=host_env(store, "h2"), name="apgbad")
        try:
            put_key(h2, other)
            h2.start("brokerd")
            h2.procs["brokerd"].wait(hglib.SLOW)
            assert h2.procs["brokerd"].returncode != 0
            log = h2.log_text("brokerd")
            assert "HMAC does not match" in log, log
            assert "is this the fleet's audit.key?" in log, log
        finally:
            h2.cleanup()
        assert pg.psql(store, "SELECT count(*) FROM meta WHERE key = "
                       "'audit_key_id'") == [["0"]]
        rc, doc = pl.verify(h1)
        assert rc == 0, doc


def health_doc(hg):
    r = hg.health()
    return r.status, r.json()


def test_store_lost_and_back(mode, pg, store):
    """The store stopped: /healthz 503 naming it; a login and a mode change
    get 503 with the store's reason and do nothing; an open terminal keeps
    working. Started again: the host recovers by itself, a store_back
    record is in the chain, and the chain verifies."""
    with fleet(mode, store, n=1) as (h1,):
        status, doc = health_doc(h1)
        assert status == 200 and doc["store"] == {
            "ok": True, "reason": None, "kind": "postgresql"}, doc
        st = h1.hgctl_json("status")
        assert st["store"]["kind"] == "postgresql" and st["store"]["ok"]
        alice = h1.login(*hglib.ADMIN)
        term = sl.Terminal(alice)
        try:
            ws = term.attach()
            ws.send_binary(b"echo before-$((6*7))\n")
            ws.read_until(rb"before-42")
            sessions = {x["id"] for x in h1.hgctl_json("session", "list")}
            files = pl.run(alice, "ls -A")["stdout"]
            rows_before = len(rows(pg, store))

            pg.stop()
            lost = hglib.wait_for(
                lambda: (lambda s_d: s_d if s_d[0] == 503 else None)(
                    health_doc(h1)), what="/healthz 503")
            _, doc = lost
            assert doc["store"]["ok"] is False, doc
            assert doc["store"]["kind"] == "postgresql"
            assert doc["store"]["reason"].startswith(
                "the store is unreachable: "), doc
            assert doc["error"]["message"] == doc["store"]["reason"], doc

            r = h1.post("/api/login", {"username": hglib.USER[0],
                                       "password": hglib.USER[1]})
            pl.assert_error(r, 503, "unavailable")
            assert r.error()["message"].startswith(
                "the store is unreachable: "), r
            assert r.cookie() is None, r
            r = pl.set_mode(alice, "direct")
            assert r.status == 503, r
            # In the workspace (the spawn's directory) it would stay.
            r = alice.post("/api/run_command", {
                "command": "touch never-ran", "timeout": 20})
            pl.assert_error(r, 503, "unavailable",
                            "not started: the store is unreachable: ")
            r = alice.post("/api/terminals", {})
            pl.assert_error(r, 503, "unavailable",
                            "the store is unreachable: ")
            assert pl.mode_of(alice)["mode"] == "sandbox"
            st = h1.hgctl("status", "--json")
            sdoc = json.loads(st.stdout)
            assert sdoc["store"]["ok"] is False, sdoc
            assert any(p.startswith("store: the store is unreachable")
                       for p in sdoc["problems"]), sdoc
            # The open terminal is the host's own: it goes on.
            ws.send_binary(b"echo during-$((6*7))\n")
            ws.read_until(rb"during-42")

            pg.start()
            hglib.wait_for(lambda: health_doc(h1)[0] == 200,
                           what="/healthz 200 once the store is back")
            back = hglib.wait_for(lambda: [r for r in rows(pg, store)
                                           if r[2] == "store_back"],
                                  what="a store_back record")
            rec = json.loads(back[0][5])
            assert rec["host"] == "h1" and rec["allowed"] is True, rec
            assert rec["detail"]["down_ms"] > 0, rec
            assert rec["detail"]["reason"], rec
            # Nothing was written while it was down but what came after.
            assert back[0][0] == rows_before + 1, (back, rows_before)
            ws.send_binary(b"echo after-$((6*7))\n")
            ws.read_until(rb"after-42")
            # The refused spawn never ran; the refused login made no session.
            assert pl.run(alice, "ls -A")["stdout"] == files
            assert {x["id"] for x in h1.hgctl_json("session",
                                                    "list")} == sessions
        finally:
            term.close()
        h1.login(*hglib.USER)
        rc, doc = pl.verify(h1)
        assert rc == 0, doc
        check_chain(rows(pg, store), read_key(h1))


def test_embedded_store_link(mode):
    """Without HOSTGATE_STORE: /healthz's store link is the embedded one,
    and the file chain's records carry the host id too."""
    with hglib.running(mode, "apgemb",
                       env={"HOSTGATE_HOST_ID": "solo-1"}) as hg:
        status, doc = health_doc(hg)
        assert status == 200, doc
        assert doc["store"] == {"ok": True, "reason": None,
                                "kind": "embedded"}, doc
        hg.login(*hglib.USER)
        recs = pl.audit_records(hg, action="login")
        assert recs and all(r["host"] == "solo-1" for r in recs), recs
        assert list(recs[0])[:3] == ["seq", "time", "host"], recs[0]
