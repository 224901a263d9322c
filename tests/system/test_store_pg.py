"""brokerd's users, sessions and tokens in a PostgreSQL store shared by
several hosts (HOSTGATE_STORE): two hostgates, each with its own state and
run directories, on one real PostgreSQL server (pglib). A login, a token, a
logout, a revocation, a user added or deleted on one host is seen on the
other at once (a miss asks the store) or within a second (notifications);
hgctl store status, migrate and copy; and the refusals of a bad store."""

import base64
import hashlib
import json
import os
import subprocess
import time

import pytest

import hglib
import pglib
import sandboxlib as sl

pytestmark = pytest.mark.skipif(pglib.available() is not None,
                                reason=str(pglib.available()))

ADMIN_NAME, ADMIN_PW = hglib.ADMIN[0], hglib.ADMIN[1]
USER_NAME, USER_PW = hglib.USER[0], hglib.USER[1]


# One audit key per store: its hosts append to one chain.
KEYS = {}


def host(factory, url, name, users=False, env=None):
    """A hostgate on the store url (its own state and run directories,
    the store's audit key)."""
    full = {"HOSTGATE_STORE": url, "HOSTGATE_HOST_ID": name}
    full.update(env or {})
    hg = factory(env=full, name=name, start=False)
    hg.give_audit_key(KEYS.setdefault(url.split("?")[0], os.urandom(32)))
    hg.start_all()
    if users:
        hg.add_user(*hglib.ADMIN, admin=True)
        hg.add_user(*hglib.USER)
    return hg


def hgctl_env(hg, *args, env=None, input=None):
    """hgctl with hg's directories and the extra variables env."""
    argv = hg.wrap([hg.binary("hgctl")] + list(args),
                   (0, 0) if hg.mode == "root" else None)
    full = {"PATH": hg.env["PATH"], "LANG": "C.UTF-8",
            "HOSTGATE_RUN_DIR": hg.run, "HOSTGATE_STATE_DIR": hg.state,
            "HOSTGATE_ENV_FILE": hg.envfile}
    if "HOSTGATE_STORE" in hg.env:
        full["HOSTGATE_STORE"] = hg.env["HOSTGATE_STORE"]
    full.update(env or {})
    return subprocess.run(argv, input=input, capture_output=True, text=True,
                          env=full, timeout=hglib.SLOW, cwd=hg.dir)


def session_ids(hg):
    return {s["id"] for s in hg.hgctl_json("session", "list")}


def status_of(hg, path, cookie=None, bearer=None):
    return hg.get(path, cookie=cookie, bearer=bearer).status


def wait_status(hg, path, want, cookie=None, bearer=None, what=""):
    """Poll until path answers want (the change reached hg)."""
    hglib.wait_for(lambda: status_of(hg, path, cookie, bearer) == want,
                   what=what or "%s %d on %s" % (path, want, hg.dir))


def mint(session):
    """A token bound to session (POST /api/session/tokens): the bearer
    and its id."""
    r = session.post("/api/session/tokens")
    assert r.status in (200, 201), r
    doc = r.json()
    return doc["token"], doc["id"]


@pytest.fixture
def pair(hostgate_factory, store):
    """Two hosts, a and b, on one store; alice and bob added through a."""
    a = host(hostgate_factory, store, "a", users=True)
    b = host(hostgate_factory, store, "b")
    return a, b


def test_login_on_a_works_on_b(pair):
    a, b = pair
    s = a.login(USER_NAME, USER_PW)
    # At once: b has not seen the session, and asks the store.
    r = b.get("/api/status", cookie=s.cookie)
    assert r.status == 200, r
    assert r.json()["user"] == USER_NAME
    # And the user, added through a, logs in on b.
    s2 = b.login(USER_NAME, USER_PW)
    assert a.get("/api/status", cookie=s2.cookie).status == 200


def secret():
    """A cookie or bearer value as brokerd makes them (base64url)."""
    return base64.urlsafe_b64encode(os.urandom(32)).decode().rstrip("=")


def sha(text):
    return hashlib.sha256(text.encode()).hexdigest()


def test_miss_asks_the_store(pair, pg, store):
    """Rows written with the store's triggers off, so that no host is told
    of them: a host finds them only by asking the store on a miss."""
    a, b = pair
    cookie, bearer = secret(), "hgt_" + secret()
    sid, tid, now = os.urandom(16).hex(), os.urandom(8).hex(), int(time.time())
    pg.psql(store, "ALTER TABLE users DISABLE TRIGGER USER; "
            "ALTER TABLE sessions DISABLE TRIGGER USER; "
            "ALTER TABLE tokens DISABLE TRIGGER USER; "
            "INSERT INTO users (name, admin, hash, created, uid, gid) "
            "SELECT 'zed', false, hash, created, uid + 1000, gid + 1000 "
            "FROM users WHERE name = '%s'; "
            "INSERT INTO sessions (id, token_hash, csrf_hash, \"user\", "
            "created, last_seen, expires) VALUES ('%s', '%s', '%s', 'zed', "
            "%d, %d, %d); "
            "INSERT INTO tokens (id, hash, \"user\", session_id, created) "
            "VALUES ('%s', '%s', 'zed', '%s', %d); "
            "ALTER TABLE users ENABLE TRIGGER USER; "
            "ALTER TABLE sessions ENABLE TRIGGER USER; "
            "ALTER TABLE tokens ENABLE TRIGGER USER" % (
                USER_NAME, sid, sha(cookie), sha(secret()), now, now,
                now + 3600, tid, sha(bearer), sid, now), user="postgres")
    r = b.get("/api/status", cookie=cookie)
    assert r.status == 200 and r.json()["user"] == "zed", r
    assert a.get("/api/status", bearer=bearer).status == 200
    # zed has bob's password hash: a login on b, a host that never heard
    # of zed, asks the store for the name.
    b.login("zed", USER_PW)
    assert "user zed: read from the store" in b.log_text("brokerd")
    # Unknown values stay unknown after asking.
    assert b.get("/api/status", cookie=secret()).status == 401
    assert b.get("/api/status", bearer="hgt_" + secret()).status == 401


def test_token_minted_on_a_works_on_b(pair):
    a, b = pair
    s = a.login(USER_NAME, USER_PW)
    bearer, tid = mint(s)
    assert b.get("/api/status", bearer=bearer).status == 200
    # hgctl's standalone token, minted through b, works on a.
    out = b.hgctl_json("token", "create", USER_NAME)
    assert a.get("/api/status", bearer=out["token"]).status == 200


def test_logout_and_revoke_reach_the_other_host(pair):
    a, b = pair
    s = a.login(USER_NAME, USER_PW)
    bearer, tid = mint(s)
    before = session_ids(a)
    other = a.login(USER_NAME, USER_PW)
    (sid,) = session_ids(a) - before
    obearer, otid = mint(other)
    # b has both in memory now.
    assert b.get("/api/status", cookie=s.cookie).status == 200
    assert b.get("/api/status", bearer=obearer).status == 200
    # A token revoked on a is refused on b (notified, no second lookup).
    r = other.request("DELETE", "/api/session/tokens/" + otid)
    assert r.status in (200, 204), r
    wait_status(b, "/api/status", 401, bearer=obearer,
                what="the token revoked on a refused on b")
    assert b.get("/api/status", cookie=other.cookie).status == 200
    # A logout on a ends the session and its token on b.
    assert s.post("/api/logout").status in (200, 204)
    wait_status(b, "/api/status", 401, cookie=s.cookie,
                what="the session ended on a refused on b")
    assert b.get("/api/status", bearer=bearer).status == 401
    # hgctl session revoke through b ends a's copy.
    b.hgctl_ok("session", "revoke", sid)
    wait_status(a, "/api/status", 401, cookie=other.cookie,
                what="the session revoked through b refused on a")


def test_user_add_and_delete_across_hosts(pair):
    a, b = pair
    a.add_user("carol", "carol-password-1")
    s = b.login("carol", "carol-password-1")
    sa = a.login("carol", "carol-password-1")
    assert a.get("/api/status", cookie=s.cookie).status == 200
    # Deleted through b: its sessions end on a too.
    b.hgctl_ok("user", "del", "carol")
    wait_status(a, "/api/status", 401, cookie=sa.cookie,
                what="carol's session on a ended")
    assert a.get("/api/status", cookie=s.cookie).status == 401
    r = a.post("/api/login", {"username": "carol",
                              "password": "carol-password-1"})
    assert r.status == 401, r
    names = [u["name"] for u in a.hgctl_json("user", "list")]
    assert "carol" not in names
    # Added twice (a then b): the second is refused, by name.
    a.add_user("dave", "dave-password-1")
    r = b.hgctl("user", "add", "dave", "--password-stdin",
                input="dave-password-2\n")
    assert r.returncode != 0 and "exists" in r.stderr, r


def sleepers(marker):
    """The pids of the processes running `sleep MARKER`, anyone's."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if argv[:2] == [b"sleep", marker.encode()]:
            found.append(int(pid))
    return found


def test_user_deleted_elsewhere_loses_its_spawns_here(pair):
    """carol's terminal runs on her home host; deleted through the other,
    she loses it on her home: it kills every spawn of hers (a terminal
    outlives its WebSocket, and her session's end alone would not end
    it)."""
    a, b = pair
    a.add_user("carol", "carol-password-1")
    # Placed on the least loaded host: b (alice and bob are a's).
    home = {u["name"]: u["home"] for u in a.hgctl_json("user", "list")}
    assert home["carol"] == "b", home
    a, b = b, a
    s = a.login("carol", "carol-password-1")
    marker = str(7000000 + os.getpid() % 1000000)
    t = sl.Terminal(s)
    try:
        ws = t.attach()
        ws.send_binary(("sleep %s\n" % marker).encode())
        hglib.wait_for(lambda: sleepers(marker),
                       what="carol's sleep running on a")
        b.hgctl_ok("user", "del", "carol")
        hglib.wait_for(lambda: not sleepers(marker),
                       what="carol's sleep on a killed")
    finally:
        if t.ws:
            t.ws.close()


def test_password_change_across_hosts(pair):
    a, b = pair
    sb = b.login(USER_NAME, USER_PW)
    a.hgctl_ok("user", "passwd", USER_NAME, "--password-stdin",
               input="bob-new-password\n")
    # Its sessions end everywhere; the new hash is b's at once.
    wait_status(b, "/api/status", 401, cookie=sb.cookie,
                what="bob's session on b ended by the change on a")
    r = b.post("/api/login", {"username": USER_NAME, "password": USER_PW})
    assert r.status == 401, r
    b.login(USER_NAME, "bob-new-password")


def test_session_change_reaches_other_host(pair):
    a, b = pair
    s = a.login(USER_NAME, USER_PW)
    r = b.get("/api/permission", cookie=s.cookie)
    assert r.status == 200 and r.json()["permission"] == \
        "workspace-write", r
    r = s.post("/api/permission", {"permission": "read-only"})
    assert r.status == 200, r
    hglib.wait_for(lambda: b.get("/api/permission", cookie=s.cookie).json()
                   ["permission"] == "read-only",
                   what="the profile set on a applied on b")


def test_reconnect_reconciles(hostgate_factory, pg, store):
    """b's link is cut and kept down while a logs out, revokes, deletes a
    user and changes a profile: no notification can reach b. Once its
    link is back, b reloads everything and agrees with the store."""
    db = store.split("///")[1].split("?")[0]
    role = "b_" + db    # roles are the server's, not the database's
    pg.psql(db, "CREATE ROLE %s LOGIN; GRANT ALL ON ALL TABLES IN SCHEMA "
            "public TO %s" % (role, role))
    a = host(hostgate_factory, store, "a", users=True)
    b = host(hostgate_factory, store.replace("user=hostgate", "user=" + role),
             "b")
    gone = a.login(USER_NAME, USER_PW)
    bearer, tid = mint(a.login(USER_NAME, USER_PW))
    kept = a.login(USER_NAME, USER_PW)
    a.add_user("frank", "frank-password-1")
    frank = b.login("frank", "frank-password-1")
    for cookie in (gone.cookie, kept.cookie):
        assert b.get("/api/status", cookie=cookie).status == 200
    assert b.get("/api/status", bearer=bearer).status == 200
    pg.psql(db, "ALTER ROLE %s NOLOGIN" % role)
    pg.psql(db, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE usename = '%s'" % role)
    assert gone.post("/api/logout").status == 200
    a.hgctl_ok("token", "revoke", tid)
    a.hgctl_ok("user", "del", "frank")
    assert kept.post("/api/permission",
                     {"permission": "read-only"}).status == 200
    # Still b's copies: nothing told it.
    assert b.get("/api/status", cookie=gone.cookie).status == 200
    pg.psql(db, "ALTER ROLE %s LOGIN" % role)
    wait_status(b, "/api/status", 401, cookie=gone.cookie,
                what="the session ended while b was cut off, gone on b")
    assert b.get("/api/status", bearer=bearer).status == 401
    assert b.get("/api/status", cookie=frank.cookie).status == 401
    assert b.get("/api/permission", cookie=kept.cookie).json()[
        "permission"] == "read-only"
    assert "sessions reconciled with the store" in b.log_text("brokerd")


def test_uids_stay_unique_across_hosts(pair, pg, store):
    a, b = pair
    # Added on each host in turn, each picks the lowest uid it knows free;
    # b has not been told of a's newest users when it picks.
    for i in range(3):
        a.add_user("ua%d" % i, "password-%d-a" % i)
        b.add_user("ub%d" % i, "password-%d-b" % i)
    rows = pg.psql(store, "SELECT name, uid FROM users")
    uids = [int(r[1]) for r in rows]
    assert len(uids) == len(set(uids)) == 8, rows


def test_uid_taken_meanwhile_picks_again(pair, pg, store):
    """A uid another host took a moment ago, and b has not heard of: its
    INSERT fails on the UNIQUE constraint, and it picks the next one. (The
    row is one b ignores, so that b cannot have heard of it.)"""
    a, b = pair
    uids = sorted(int(r[0]) for r in pg.psql(store,
                                             "SELECT uid FROM users"))
    taken = uids[-1] + 1
    pg.psql(store, "INSERT INTO users (name, admin, hash, created, uid, gid) "
            "VALUES ('ghost', false, 'not-argon2', 0, %d, %d)" %
            (taken, taken))
    b.add_user("carol", "carol-password-1")
    (row,) = pg.psql(store, "SELECT uid FROM users WHERE name = 'carol'")
    assert int(row[0]) == taken + 1
    assert "uid %d was taken on another host; picking again" % taken in \
        b.log_text("brokerd")
    b.login("carol", "carol-password-1")
    # A mapped account's uid is the account's: no other to pick.
    nobody = 65534
    pg.psql(store, "INSERT INTO users (name, admin, hash, created, uid, gid) "
            "VALUES ('ghost2', false, 'not-argon2', 0, %d, %d)" %
            (nobody, nobody))
    r = b.hgctl("user", "add", "dora", "--unix-user", "nobody",
                "--password-stdin", input="dora-password-1\n")
    assert r.returncode == 1, r
    assert "uid %d is another user's in the PostgreSQL store" % nobody in \
        r.stderr, r.stderr
    assert pg.psql(store, "SELECT 1 FROM users WHERE name = 'dora'") == []


def test_restart_keeps_everything(pair, pg, store):
    a, b = pair
    s = a.login(USER_NAME, USER_PW)
    bearer, tid = mint(s)
    a.add_user("erin", "erin-password-1")
    # A token minted on one host as its session ended on another outlives
    # it: deleted at the next start, not a reason to refuse it.
    orphan = os.urandom(8).hex()
    pg.psql(store, "INSERT INTO tokens (id, hash, \"user\", session_id, "
            "created) VALUES ('%s', '%s', 'bob', '%s', 1)" % (
                orphan, sha(secret()), os.urandom(16).hex()))
    for hg in (a, b):
        hg.stop("brokerd")
        hg.start("brokerd")
        hg.wait_control()
    for hg in (a, b):
        hglib.wait_for(lambda: hg.get("/api/status",
                                      cookie=s.cookie).status == 200,
                       what="the session back after a restart")
        assert hg.get("/api/status", bearer=bearer).status == 200
    b.login("erin", "erin-password-1")
    assert pg.psql(store, "SELECT 1 FROM tokens WHERE id = '%s'" %
                   orphan) == []


def test_unmigrated_store_refused(hostgate_factory, pg):
    url = pg.database()
    hg = hostgate_factory(env={"HOSTGATE_STORE": url,
                               "HOSTGATE_HOST_ID": "a"},
                          start=False, name="unmigrated")
    p = hg.start("brokerd")
    p.wait(timeout=hglib.SLOW)
    assert p.returncode != 0
    log = hg.log_text("brokerd")
    assert "is at schema version 0; this hostgate needs 2: run hgctl " \
        "store migrate" in log, log
    # hgctl store migrate then makes it usable; again: up to date.
    r = hgctl_env(hg, "store", "migrate")
    assert r.returncode == 0 and "0 -> 2" in r.stdout, r
    r = hgctl_env(hg, "store", "migrate")
    assert r.returncode == 0 and "up to date" in r.stdout, r
    hg.start_all()
    hg.add_user(*hglib.USER)
    hg.login(USER_NAME, USER_PW)


def test_bad_store_refused(hostgate_factory, pg):
    for value, want in (
            ("postgresql://[", "HOSTGATE_STORE"),
            (pg.url("nosuchdb"), "nosuchdb"),
            ("postgresql:///x?host=/nonexistent-dir", "nonexistent-dir")):
        hg = hostgate_factory(env={"HOSTGATE_STORE": value,
                                   "HOSTGATE_HOST_ID": "a",
                                   "HOSTGATE_STORE_TIMEOUT_SECONDS": "2"},
                              start=False, name="bad")
        p = hg.start("brokerd")
        p.wait(timeout=hglib.SLOW)
        assert p.returncode != 0
        log = hg.log_text("brokerd")
        assert want in log, log
        # Nothing was created for it in the state directory.
        assert not os.path.exists(os.path.join(hg.state, "store.db"))


def test_store_status(pair, store):
    a, b = pair
    a.login(USER_NAME, USER_PW)
    r = hgctl_env(a, "store", "status", "--json")
    assert r.returncode == 0, r
    doc = json.loads(r.stdout)
    assert doc["kind"] == "postgresql"
    assert doc["schema"] == 2
    assert doc["counts"]["users"] == 2
    assert doc["counts"]["sessions"] == 1
    r = hgctl_env(a, "store", "status")
    assert r.returncode == 0 and "postgresql" in r.stdout, r
    # Without HOSTGATE_STORE, hgctl cannot reach brokerd's store: it says
    # so, rather than showing the embedded one of its state directory.
    r = hgctl_env(a, "store", "status", env={"HOSTGATE_STORE": ""})
    assert r.returncode == 1 and "brokerd uses the PostgreSQL store" in \
        r.stderr, r
    # A password in the URI is not shown (the server trusts the socket).
    db, query = store.split("///")[1].split("?")
    secret = "postgresql://hostgate:s3kr1t-pw@/%s?%s" % (
        db, query.replace("&user=hostgate", ""))
    for args in (["store", "status"], ["store", "status", "--json"]):
        r = hgctl_env(a, *args, env={"HOSTGATE_STORE": secret})
        assert r.returncode == 0, r
        assert "s3kr1t" not in r.stdout and "hostgate:***@" in r.stdout, r
    # Another database than brokerd's: said, rather than shown.
    r = hgctl_env(a, "store", "status",
                  env={"HOSTGATE_STORE": store.replace("///%s?" % db,
                                                       "///%sx?" % db)})
    assert r.returncode == 1 and "is not the running brokerd's" in \
        r.stderr, r


def test_store_status_embedded(hostgate_factory):
    hg = hostgate_factory()
    hg.login(USER_NAME, USER_PW)
    r = hgctl_env(hg, "store", "status", "--json")
    assert r.returncode == 0, r
    doc = json.loads(r.stdout)
    assert doc["kind"] == "embedded"
    assert doc["where"].endswith("store.db")
    assert doc["counts"] == {"users": 2, "sessions": 1, "tokens": 0}
    # hgctl's own HOSTGATE_STATE_DIR elsewhere (README's exports set the
    # run directory alone): the running brokerd says where its store is.
    elsewhere = os.path.join(hg.dir, "not-the-state-dir")
    os.makedirs(elsewhere)
    r = hgctl_env(hg, "store", "status", "--json",
                  env={"HOSTGATE_STATE_DIR": elsewhere})
    assert r.returncode == 0, r
    doc = json.loads(r.stdout)
    assert doc["where"] == os.path.join(hg.state, "store.db"), doc
    assert doc["counts"] == {"users": 2, "sessions": 1, "tokens": 0}, doc
    r = hgctl_env(hg, "store", "migrate")
    assert r.returncode == 0 and "needs no migration" in r.stdout, r
    # brokerd stopped: hgctl's own directory, where there is no store.
    hg.stop("frontd")
    hg.stop("brokerd")
    for args in (["store", "status"], ["store", "status", "--json"]):
        r = hgctl_env(hg, *args, env={"HOSTGATE_STATE_DIR": elsewhere})
        assert r.returncode == 1 and r.stdout == "", r
        assert "no store at %s/store.db" % elsewhere in r.stderr, r
    # Its own, stopped: read from the file.
    r = hgctl_env(hg, "store", "status", "--json")
    assert r.returncode == 0, r
    assert json.loads(r.stdout)["counts"]["users"] == 2, r.stdout


def test_store_copy(hostgate_factory, pg):
    # An embedded host with users, sessions, tokens and audit records.
    hg = hostgate_factory(name="emb")
    s = hg.login(USER_NAME, USER_PW)
    bearer, tid = mint(s)
    out = hg.hgctl_json("token", "create", ADMIN_NAME)
    url = pg.database()
    # Unmigrated: refused.
    r = hgctl_env(hg, "store", "copy", "--to", url)
    assert r.returncode != 0 and "migrate" in r.stderr, r
    pg.migrate(url)
    # While brokerd runs: refused (it holds store.db).
    r = hgctl_env(hg, "store", "copy", "--to", url)
    assert r.returncode != 0 and "brokerd" in r.stderr, r
    for name in ("frontd", "brokerd"):
        hg.stop(name)
    with open(os.path.join(hg.state, "audit.log")) as f:
        lines = [line.rstrip("\n") for line in f]
    r = hgctl_env(hg, "store", "copy", "--to", url)
    assert r.returncode == 0, r
    assert "2 users" in r.stdout and "1 sessions" in r.stdout and \
        "2 tokens" in r.stdout and "%d audit records" % len(lines) in \
        r.stdout, r.stdout
    rows = pg.psql(url, "SELECT seq, line, hash FROM audit ORDER BY seq")
    assert [row[1] for row in rows] == lines
    # hgctl (root) left no file of its own beside store.db (a -wal).
    owner = os.stat(os.path.join(hg.state, "store.db")).st_uid
    for name in os.listdir(hg.state):
        if name.startswith("store.db"):
            assert os.stat(os.path.join(hg.state, name)).st_uid == owner, \
                name
    # Again: the target is not empty now.
    r = hgctl_env(hg, "store", "copy", "--to", url)
    assert r.returncode != 0 and "not empty" in r.stderr, r
    assert len(pg.psql(url, "SELECT 1 FROM users")) == 2
    # The host started on PostgreSQL keeps its users and sessions.
    hg.env["HOSTGATE_STORE"] = url
    hg.env["HOSTGATE_HOST_ID"] = "emb"
    hg.start("brokerd")
    hg.wait_control()
    hg.start("frontd")
    hglib.wait_for(lambda: hg.get("/api/status",
                                  cookie=s.cookie).status == 200,
                   what="the copied session")
    assert hg.get("/api/status", bearer=bearer).status == 200
    assert hg.get("/api/status", bearer=out["token"]).status == 200
    hg.login(ADMIN_NAME, ADMIN_PW)


@pytest.mark.parametrize("args", [
    ["store", "copy"],
    ["store", "copy", "--to"],
    ["store", "copy", "--to", "postgresql://["],
    ["store", "status", "--bogus"],
    ["store", "status", "extra"],
])
def test_store_usage_errors(hostgate_factory, args):
    hg = hostgate_factory(start=False, name="usage")
    r = hgctl_env(hg, *args)
    assert r.returncode == 2, r
    assert "see hgctl help store" in r.stderr, r.stderr


def test_store_status_unreachable(hostgate_factory, pg):
    hg = hostgate_factory(start=False, name="unreach",
                          env={"HOSTGATE_STORE": pg.url("nosuchdb")})
    r = hgctl_env(hg, "store", "status")
    assert r.returncode == 1 and "nosuchdb" in r.stderr, r
    # An unmigrated one: its version, and what to do.
    url = pg.database()
    r = hgctl_env(hg, "store", "status", env={"HOSTGATE_STORE": url})
    assert r.returncode == 0 and "run hgctl store migrate" in r.stdout, r


def test_egress_additions_reach_the_other_hosts_sandboxes(pair):
    """An admin's egress addition made through a reaches b's chain too:
    b's brokerd, told by the store, sends egress_update to its sandboxd,
    which hands it to its egressd (whose log says it replaced the
    additions of that user's or session's listeners), so that b's live
    allowlist sandboxes of the user or session take it at once."""
    a, b = pair
    s = b.login(USER_NAME, USER_PW)
    sid = [x["id"] for x in a.hgctl_json("session", "list")
           if x["user"] == USER_NAME][0]
    hglib.wait_for(lambda: "sandboxd connected" in b.log_text("egressd"),
                   what="b's egressd linked")
    a.hgctl_ok("egress", "allow", "--user", USER_NAME, "files.example")
    hglib.wait_for(lambda: "egress: user %s: additions replaced" % USER_NAME
                   in b.log_text("egressd"),
                   what="the user's addition on b's egressd")
    a.hgctl_ok("egress", "allow", "--session", sid, "more.example")
    hglib.wait_for(lambda: "egress: session %s session %s: additions "
                   "replaced" % (USER_NAME, sid) in b.log_text("egressd"),
                   what="the session's addition on b's egressd")
    # And b's own view of the session has it.
    assert "more.example" in json.dumps(
        s.get("/api/status").json()["egress"]), s.get("/api/status").json()
