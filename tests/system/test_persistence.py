"""What brokerd keeps on disk: users (users.json) and sessions and tokens
(store.db, SQLite) survive its restart, even a SIGKILL right after an
answer; the files are private and hold no secret a client could replay; a
sessions.json of the former store is migrated once; a broken store stops
brokerd with a message saying what to do."""

import hashlib
import json
import os
import pwd
import sqlite3
import stat
import time

import pytest

import hglib

ADMIN, USER = hglib.ADMIN, hglib.USER
FIXTURE = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                       "fixtures", "sessions-v1.json")


def read(path):
    with open(path, "rb") as f:
        return f.read()


def assert_private(path, uid):
    st = os.stat(path)
    assert stat.S_IMODE(st.st_mode) == 0o600, "%s mode %o" % (path, st.st_mode)
    assert st.st_uid == uid, "%s owned by %d, not %d" % (path, st.st_uid, uid)


def broker_uid(hg):
    """The uid brokerd runs as (its service user in root mode)."""
    if hg.mode == "root":
        return pwd.getpwnam(hglib.SERVICE_USERS["brokerd"]).pw_uid
    return hg.daemon_uid


def store_path(hg):
    return os.path.join(hg.state, "store.db")


def store_rows(hg, sql, args=(), timeout=5.0):
    """Rows of a query on the store (brokerd stopped: it holds it locked);
    timeout: how long SQLite waits for a lock."""
    db = sqlite3.connect("file:%s?mode=ro" % store_path(hg), uri=True,
                         timeout=timeout)
    try:
        return db.execute(sql, args).fetchall()
    finally:
        db.close()


def refused_start(hg):
    """Start brokerd on a broken state; it must exit non-zero: its log."""
    before = len(hg.log_text("brokerd"))
    rc = hg.start("brokerd").wait(hglib.SLOW)
    log = hg.log_text("brokerd")[before:]
    assert rc != 0, log
    return log


def test_sessions_survive_brokerd_restart(hostgate_factory):
    hg = hostgate_factory()
    s = hg.login(*USER)
    admin = hg.login(*ADMIN)
    tok = s.post("/api/session/tokens").json()["token"]
    standalone = hg.hgctl_ok("token", "create", ADMIN[0]).stdout.strip()
    dead = hg.login(*USER)
    assert dead.post("/api/logout").status == 200

    # While brokerd runs, the store and its WAL are its own, and locked:
    # nothing else can change what brokerd holds in memory. (The lock is
    # brokerd's for its lifetime: no wait for it to go.)
    store = store_path(hg)
    assert_private(store, broker_uid(hg))
    assert_private(store + "-wal", broker_uid(hg))
    assert not os.path.exists(store + "-shm")
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        store_rows(hg, "SELECT count(*) FROM tokens", timeout=0)

    assert hg.stop("brokerd") == 0
    hg.wait_status(503)

    assert not os.path.exists(os.path.join(hg.state, "users.json"))
    assert_private(store, broker_uid(hg))
    assert not os.path.exists(store + "-wal")    # checkpointed at exit
    assert not os.path.exists(os.path.join(hg.state, "sessions.json"))
    data = read(store)
    for secret in (s.cookie, s.csrf, admin.cookie, admin.csrf, tok,
                   tok[4:], standalone[4:], dead.cookie):
        assert secret.encode() not in data, "store.db holds a secret"
    assert ADMIN[1].encode() not in data and USER[1].encode() not in data
    # What it holds instead: hashes, one table per kind, a versioned schema.
    assert store_rows(hg, "PRAGMA user_version") == [(3,)]
    assert store_rows(hg, "PRAGMA journal_mode") == [("wal",)]
    h = hashlib.sha256(tok.encode()).hexdigest()
    assert store_rows(hg, "SELECT user FROM tokens WHERE hash = ?",
                      (h,)) == [(USER[0],)]
    h = hashlib.sha256(s.cookie.encode()).hexdigest()
    assert store_rows(hg, "SELECT user FROM sessions WHERE token_hash = ?",
                      (h,)) == [(USER[0],)]

    hg.start("brokerd")
    hg.wait_healthy()
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


def test_sigkill_after_mint_keeps_the_token(hostgate_factory):
    """A mint, a revocation and a logout that were answered are on disk
    (synchronous=FULL): a SIGKILL right after each loses none of them."""
    hg = hostgate_factory()
    s = hg.login(*USER)
    tok = s.post("/api/session/tokens").json()["token"]
    hg.kill("brokerd")
    hg.start("brokerd")
    hg.wait_healthy()
    assert hg.get("/api/status", bearer=tok).status == 200

    standalone = hg.hgctl_ok("token", "create", ADMIN[0]).stdout.strip()
    hg.kill("brokerd")
    hg.start("brokerd")
    hg.wait_healthy()
    assert hg.get("/api/status", bearer=standalone).status == 200

    tid = [t["id"] for t in hg.hgctl_json("token", "list")
           if t["user"] == ADMIN[0]]
    assert len(tid) == 1, tid
    hg.hgctl_ok("token", "revoke", tid[0])
    assert s.post("/api/logout").status == 200
    hg.kill("brokerd")
    hg.start("brokerd")
    hg.wait_healthy()
    assert hg.get("/api/status", bearer=standalone).status == 401
    assert s.get("/api/status").status == 401
    assert hg.get("/api/status", bearer=tok).status == 401


def fixture_sessions_json(hg):
    """The fixture's sessions.json (written by the former brokerd), its
    sessions' expiry moved an hour ahead, installed as brokerd's."""
    with open(FIXTURE) as f:
        fix = json.load(f)
    doc = json.loads(fix["sessions_json"])
    for sess in doc["sessions"]:
        sess["expires"] = int(time.time()) + 3600
    path = os.path.join(hg.state, "sessions.json")
    with open(path, "w") as f:
        json.dump(doc, f, indent=2)
    os.chmod(path, 0o600)
    os.chown(path, broker_uid(hg), -1)
    return fix["secrets"], doc


def test_sessions_json_migrated_once(hostgate_factory):
    """A sessions.json written by the former brokerd: its sessions (with
    their CSRF tokens and profiles) and tokens work after the upgrade; the
    file is renamed aside and never read again."""
    hg = hostgate_factory()
    assert hg.stop("brokerd") == 0
    sec, doc = fixture_sessions_json(hg)
    hg.start("brokerd")
    hg.wait_healthy()
    migrated = os.path.join(hg.state, "sessions.json.migrated")
    assert not os.path.exists(os.path.join(hg.state, "sessions.json"))
    assert os.path.exists(migrated)
    assert "2 sessions and 2 tokens moved to store.db" in \
        hg.log_text("brokerd")

    bob = hglib.Session(hg, USER[0], "user", sec["bob_cookie"],
                        sec["bob_csrf"])
    alice = hglib.Session(hg, ADMIN[0], "admin", sec["alice_cookie"],
                          sec["alice_csrf"])
    dead = hglib.Session(hg, USER[0], "user", sec["dead_cookie"], "x")

    def works():
        r = bob.get("/api/status")
        assert r.status == 200 and r.json()["user"] == USER[0], r
        r = alice.get("/api/permission")
        assert r.status == 200, r
        assert r.json()["permission"] == "read-only", r.json()
        assert hg.get("/api/status", bearer=sec["bob_token"]).status == 200
        r = hg.get("/api/status", bearer=sec["alice_standalone"])
        assert r.status == 200 and r.json()["user"] == ADMIN[0], r
        assert dead.get("/api/status").status == 401
        ids = sorted(t["id"] for t in hg.hgctl_json("token", "list"))
        assert ids == sorted(t["id"] for t in doc["tokens"]), ids

    works()
    # Restarted: read from the store; the renamed file is never read.
    assert hg.stop("brokerd") == 0
    with open(migrated, "w") as f:
        f.write("not even JSON")
    hg.start("brokerd")
    hg.wait_healthy()
    works()
    # The CSRF token migrated with its session: a logout with it works.
    assert bob.post("/api/logout").status == 200
    assert hg.get("/api/status", bearer=sec["bob_token"]).status == 401


def test_broken_sessions_json_stops_the_migration(hostgate_factory):
    hg = hostgate_factory()
    assert hg.stop("brokerd") == 0
    path = os.path.join(hg.state, "sessions.json")
    with open(path, "w") as f:
        f.write('{"version": 1, "sessions": [')
    os.chmod(path, 0o600)
    os.chown(path, broker_uid(hg), -1)
    log = refused_start(hg)
    assert "%s: invalid JSON: unexpected end of data (not migrated to store.db)" % path \
        in log, log
    assert os.path.exists(path)


@pytest.mark.parametrize("damage", ["garbage", "page"])
def test_broken_store_stops_brokerd(hostgate_factory, damage):
    """A store.db that is not a database, or has a damaged page: brokerd
    refuses to start and says what to do; nothing is changed."""
    hg = hostgate_factory()
    hg.login(*USER)
    assert hg.stop("brokerd") == 0
    store = store_path(hg)
    data = bytearray(read(store))
    if damage == "garbage":
        data = b"this is not a database " * 200
    else:
        # The root page of a table (page 2): its cells become noise.
        assert len(data) >= 3 * 4096
        data[4096 + 8:4096 + 8 + 2048] = b"\xee" * 2048
    with open(store, "wb") as f:
        f.write(data)
    log = refused_start(hg)
    assert "FATAL brokerd" in log, log
    assert store in log, log
    if damage == "garbage":
        assert "file is not a database" in log, log
    assert "the store is unusable: restore it from a backup, or move it " \
        "and its -wal file aside to start with no users, sessions and " \
        "tokens" in log, log
    assert read(store) == bytes(data)
    # The remedy the message gives works: moved aside, brokerd starts.
    os.rename(store, store + ".broken")
    hg.start("brokerd")
    hg.wait_healthy()
    assert hg.hgctl_json("user", "list") == []
    hg.add_user(*USER)
    hg.login(*USER)


def test_brokerd_sigkill_keeps_committed_state(hostgate_factory):
    """A login that was answered is on disk: SIGKILL loses nothing."""
    hg = hostgate_factory()
    hg.add_user("gina", "gina-password-1")
    s = hg.login("gina", "gina-password-1")
    hg.kill("brokerd")
    hg.start("brokerd")
    hg.wait_healthy()
    assert s.get("/api/status").status == 200
    hg.login("gina", "gina-password-1")


def test_user_changes_persist(hostgate_factory):
    hg = hostgate_factory()
    hg.hgctl_ok("user", "passwd", USER[0], "--password-stdin",
                input="new-bob-password\n")
    hg.hgctl_ok("user", "del", ADMIN[0])
    assert hg.stop("brokerd") == 0
    assert_private(os.path.join(hg.state, "store.db"), broker_uid(hg))
    hg.start("brokerd")
    hg.wait_healthy()
    names = [u["name"] for u in hg.hgctl_json("user", "list")]
    assert names == [USER[0]], names
    assert hg.post("/api/login", {"username": USER[0],
                                  "password": USER[1]}).status == 401
    hg.login(USER[0], "new-bob-password")


def test_store_syscalls_pass_seccomp(hostgate_factory):
    """What SQLite calls (page reads and writes, fsyncs, the checkpoints of
    a WAL past 1000 pages, the WAL's removal at exit) is in brokerd's
    seccomp list: with HOSTGATE_SECCOMP_DEBUG=1 a refused call would name
    itself and end brokerd."""
    hg = hostgate_factory(env={"HOSTGATE_SECCOMP_DEBUG": "1"})
    s = hg.login(*USER)
    toks = []
    for _ in range(400):
        r = s.post("/api/session/tokens")
        assert r.status == 201, r
        toks.append(r.json()["token"])
    assert hg.get("/api/status", bearer=toks[0]).status == 200
    assert s.post("/api/logout").status == 200      # 400 rows deleted
    assert hg.get("/api/status", bearer=toks[-1]).status == 401
    assert hg.stop("brokerd") == 0
    log = hg.log_text("brokerd")
    assert "seccomp: refused" not in log, log
    assert not os.path.exists(store_path(hg) + "-wal")
