"""Direct-mode grants and rate limits across hosts: three full hostgates
(each its own daemons, state, run directory and port) on one real
PostgreSQL store, talked to directly (no balancer). A grant made on one
host is honoured on the others with the same deadline; a revoke, a logout
or the expiry made on any host ends the session's direct processes (on
its user's home host, the one that runs them), and the expiry is recorded
once; the mode-change and login buckets are the
fleet's, so that 200 concurrent requests spread over the hosts admit
exactly what one bucket allows."""

import contextlib
import hashlib
import os
import secrets
import threading
import time

import pytest

import hglib
import pglib
import policylib as pl
import sandboxlib

LONG_TTL = 600          # no grant ends by itself in the grant/revoke tests
SHORT_TTL = 8           # the expiry test's grant
RATE = 20               # mode changes: per minute, and the burst
# Logins: a smaller bucket, as each admitted one costs brokerd an argon2
# verification (tens of milliseconds, one at a time): a burst of 20 on a
# loaded machine would keep later requests past frontd's patience.
LOGIN_RATE = 6
LOGIN_BURST = 6
N_HOSTS = 3
DAVE = ("dave", "dave-password-4")     # the login burst's user
CAROL = pl.CAROL                        # the mode burst's admin

pytestmark = pytest.mark.skipif(pglib.available() is not None,
                                reason=str(pglib.available()))


# Three hosts of four daemons each: in the mode deployments run (as root,
# separate users and cgroups) only, which keeps make check's time; the
# two-host tests of test_store_pg, test_audit_pg and test_hosts_pg run in
# both modes.
@pytest.fixture(scope="module", params=hglib.MODES[:1])
def mode(request):
    return request.param



class Fleet:
    """N hostgates on one database; hosts[0] made the users."""

    def __init__(self, mode, pg, name, env, n=N_HOSTS):
        self.pg = pg
        self.url = pg.database()
        pg.migrate(self.url)
        self.ids = ["h%d" % (i + 1) for i in range(n)]
        self.hosts = []
        key = secrets.token_bytes(32)   # the fleet's one audit key
        full = dict(hglib.LIFTED_ENV)
        full.update({k: str(v) for k, v in env.items()})
        for hid in self.ids:
            hg = hglib.Hostgate(mode, name="%s-%s" % (name, hid),
                                env=dict(full, HOSTGATE_STORE=self.url,
                                         HOSTGATE_HOST_ID=hid))
            self.hosts.append(hg)
            # hgctl reads its configuration from the env file only.
            with open(hg.envfile, "w") as f:
                f.write("HOSTGATE_STORE=%s\nHOSTGATE_HOST_ID=%s\n"
                        % (self.url, hid))
            hg.give_audit_key(key)

    def start(self):
        for hg in self.hosts:
            hg.start_all()
        first = self.hosts[0]
        first.add_user(*pl.ADMIN, admin=True)
        first.add_user(*pl.USER)
        first.add_user(*CAROL, admin=True)
        first.add_user(*DAVE)
        return self

    def cleanup(self, failed=False):
        errors = []
        for hg in self.hosts:
            hg.failed = hg.failed or failed
            try:
                hg.cleanup()
            except AssertionError as e:
                errors.append(str(e))
        if errors and not failed:
            raise AssertionError("\n".join(errors))

    def logs(self):
        return "\n".join("######## %s\n%s" % (hid, hg.logs()[-6000:])
                         for hid, hg in zip(self.ids, self.hosts))

    def sql(self, query):
        return self.pg.psql(self.url, query)


@contextlib.contextmanager
def running_fleet(mode, pg, name, n=N_HOSTS, **env):
    f = Fleet(mode, pg, name, env, n)
    try:
        f.start()
    except BaseException:
        print(f.logs())
        f.cleanup(failed=True)
        raise
    try:
        yield f
    except BaseException:
        print(f.logs())
        f.cleanup(failed=True)
        raise
    f.cleanup()


@pytest.fixture(scope="module")
def fleet(mode, pg):
    with running_fleet(mode, pg, "policy",
                       HOST_EXECUTION_DIRECT_TTL_SECONDS=LONG_TTL,
                       HOSTGATE_MODE_RATE_PER_MINUTE=RATE,
                       HOSTGATE_LOGIN_RATE_PER_MINUTE=LOGIN_RATE,
                       HOSTGATE_LOGIN_BURST=LOGIN_BURST) as f:
        yield f


# -- helpers -------------------------------------------------------------------

_sources = iter(range(10, 250))


def login_everywhere(fleet, who=pl.ADMIN):
    """One login session (made on the first host, from an address of its
    own so that the per-address bucket is this test's): the same cookie
    as a Session on each host."""
    first = fleet.hosts[0].login(*who, source="127.0.9.%d" % next(_sources))
    return [hglib.Session(hg, first.user, first.role, first.cookie,
                          first.csrf) for hg in fleet.hosts]


def on_home(fleet, ss, user=pl.ADMIN[0]):
    """Of a session's copies on each host, the one on its user's home
    host: the only host that runs the user's spawns (every user has one,
    placed when hosts[0] added them)."""
    home = {u["name"]: u["home"] for u in fleet.hosts[0].hgctl_json(
        "user", "list")}[user]
    return ss[fleet.ids.index(home)]


def session_id(fleet, session):
    """The session's id, from its row (token_hash: sha256 of the cookie)."""
    h = hashlib.sha256(session.cookie.encode()).hexdigest()
    rows = fleet.sql("SELECT id FROM sessions WHERE token_hash = '%s'" % h)
    assert len(rows) == 1, rows
    return rows[0][0]


def wait_mode(session, want, timeout=hglib.SLOW):
    """The session's mode object on its host, once its mode is want."""
    def check():
        doc = pl.mode_of(session)
        return doc if doc["mode"] == want else None
    return hglib.wait_for(check, timeout, what="mode %s on %s" % (
        want, session.hg.env["HOSTGATE_HOST_ID"]))


def audit_count(fleet, action, session):
    """Records of action for session: the store's table and every host's
    file (one of the two keeps the chain)."""
    rows = fleet.sql("SELECT count(*) FROM audit WHERE action = '%s' AND "
                     "session = '%s'" % (action, session))
    n = int(rows[0][0])
    for hg in fleet.hosts:
        if os.path.exists(pl.audit_path(hg)):
            n += len(pl.audit_records(hg, action=action, session=session))
    return n


def ancestors(pid):
    """[(pid, comm)] from pid's parent up to pid 1."""
    out = []
    while pid > 1:
        try:
            with open("/proc/%d/stat" % pid) as f:
                stat = f.read()
        except OSError:
            break
        pid = int(stat[stat.rindex(")") + 2:].split()[1])
        try:
            with open("/proc/%d/stat" % pid) as f:
                s2 = f.read()
            out.append((pid, s2[s2.index("(") + 1:s2.rindex(")")]))
        except OSError:
            break
    return out


def alive(pid):
    """Whether pid is a live process (not gone, not a zombie)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            stat = f.read()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2:].split()[0] != "Z"


def wait_settled(fleet, sid, timeout=hglib.SLOW):
    """Wait until every host has ended the session's grant, as its log
    says: the one that recorded it ("direct mode ended (expired)") and the
    others ("... ended on another host"); past that no host writes."""
    def settled():
        return all("session %s of alice: direct mode ended" % sid[:8]
                   in hg.log_text("brokerd") for hg in fleet.hosts)
    hglib.wait_for(settled, timeout, what="every host to end the grant")


class DirectSleep:
    """A long `sleep` run_command on one host with the session's cookie,
    in a thread; pid is the host process once it runs, checked to be a
    direct spawn of that host's sandboxd (no bwrap between them)."""

    def __init__(self, session):
        self.session = session
        self.hg = session.hg
        self.arg = "%d.%06d" % (3000 + secrets.randbelow(1000),
                                secrets.randbelow(10 ** 6))
        self.reply = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        self.pid = hglib.wait_for(self._find, what="sleep %s on %s" % (
            self.arg, self.hg.env["HOSTGATE_HOST_ID"]))
        up = ancestors(self.pid)
        sandboxd = self.hg.pid("sandboxd")
        assert sandboxd in [p for p, _ in up], \
            "sleep %d is not sandboxd %d's: %r" % (self.pid, sandboxd, up)
        below = [c for p, c in up[:[p for p, _ in up].index(sandboxd)]]
        assert "bwrap" not in below, "sandboxed, not direct: %r" % up

    def _run(self):
        try:
            self.reply = self.session.post(
                "/api/run_command", {"command": "sleep " + self.arg,
                                     "timeout": 600}, timeout=120)
        except Exception as e:          # noqa: BLE001 -- kept for the test
            self.reply = e

    def _find(self):
        for pid, _, _ in sandboxlib.host_processes(
                lambda a: a == ["sleep", self.arg]):
            return pid
        return None

    def wait_gone(self, timeout=hglib.SLOW):
        hglib.wait_for(lambda: not alive(self.pid), timeout,
                       what="sleep %d on %s to end" % (
                           self.pid, self.hg.env["HOSTGATE_HOST_ID"]))
        self.thread.join(hglib.SLOW)
        return self.reply

    def kill(self):
        with contextlib.suppress(OSError):
            if alive(self.pid):
                os.kill(self.pid, 9)


def burst_bounds(elapsed, burst=RATE, rate=RATE):
    """What one bucket of burst refilled at rate a minute can admit in
    elapsed seconds: at least the burst, at most the burst and what
    refilled meanwhile."""
    return burst, burst + int(elapsed * rate / 60.0)


# -- grants --------------------------------------------------------------------

def test_grant_honoured_on_every_host_with_one_deadline(fleet):
    """A grant made on h1 is direct mode on h2 and h3 too, with the same
    absolute deadline in /api/execution-mode and the admin view; a command
    on the user's home host runs direct; the revert on h1 is seen
    everywhere."""
    ss = login_everywhere(fleet)
    home = on_home(fleet, ss)
    sid = session_id(fleet, ss[0])
    for s in ss:
        assert pl.mode_of(s)["mode"] == "sandbox"
    es = pl.EventStream(fleet.hosts[2], cookie=ss[2].cookie)
    assert es.status == 200, es.body
    try:
        g = pl.grant(ss[0])
        assert g["ttl_seconds"] == LONG_TTL, g
        for s in ss[1:]:
            doc = wait_mode(s, "direct")
            assert doc["expires_at"] == g["expires_at"], (doc, g)
            assert 0 < doc["remaining_seconds"] <= LONG_TTL, doc
            st = s.get("/api/status")
            assert st.status == 200, st
            em = st.json()["execution_mode"]
            assert em["mode"] == "direct", em
            assert em["expires_at"] == g["expires_at"], em
        assert pl.run(home, "true")["mode"] == "direct"
        ch = es.wait("mode_changed")
        assert ch["data"]["mode"] == "direct", ch
        assert ch["data"]["expires_at"] == g["expires_at"], ch
        # The admin view of another host shows the same deadline.
        r = ss[1].get("/api/admin/sessions")
        assert r.status == 200, r
        mine = [x for x in r.json()["sessions"] if x["id"] == sid]
        assert mine and mine[0]["mode"] == "direct", r.json()
        assert mine[0]["expires_at"] == g["expires_at"], mine

        r = pl.set_mode(ss[0], "sandbox")
        assert r.status == 200 and r.json()["mode"] == "sandbox", r
        for s in ss[1:]:
            wait_mode(s, "sandbox")
        rv = es.wait("mode_reverted")
        assert rv["data"]["reason"] == "other_host", rv
        assert pl.run(home, "true")["mode"] == "sandbox"
    finally:
        es.close()
    # Granted and reverted once each, by h1 alone.
    assert audit_count(fleet, "mode_granted", sid) == 1
    assert audit_count(fleet, "mode_reverted", sid) == 1


def test_renewal_elsewhere_moves_the_deadline_everywhere(fleet):
    """Renewed on h2, the later deadline reaches h1 and h3."""
    ss = login_everywhere(fleet)
    first = pl.grant(ss[0])
    for s in ss[1:]:
        wait_mode(s, "direct")
    # The deadline is to the second: renew once a renewal's is later.
    later = pl.iso_secs(first["expires_at"]) + 1 - LONG_TTL
    hglib.wait_for(lambda: time.time() >= later, what="the next second")
    again = pl.grant(ss[1])
    assert again["expires_at"] > first["expires_at"], (again, first)
    for s in (ss[0], ss[2]):
        hglib.wait_for(lambda: pl.mode_of(s)["expires_at"] ==
                       again["expires_at"], what="the renewed deadline")
    r = pl.set_mode(ss[2], "sandbox")
    assert r.status == 200, r
    for s in ss[:2]:
        wait_mode(s, "sandbox")


@pytest.mark.parametrize("how", ["revert", "admin_revert", "logout",
                                 "revoke"])
def test_end_on_one_host_kills_direct_processes_on_all(fleet, how):
    """A long direct sleep on the user's home host (h1, where the
    session's spawns run); the grant ended on h2 (by its user, by an admin
    on h3's admin API, or by logging out on h2): the home host kills it,
    and the end is recorded once. Revoked (hgctl on h3), the session goes
    with its grant."""
    ss = login_everywhere(fleet)
    sid = session_id(fleet, ss[0])
    pl.grant(ss[0])
    for s in ss[1:]:
        wait_mode(s, "direct")
    sleeps = []
    try:
        assert on_home(fleet, ss) is ss[0]
        sleeps.append(DirectSleep(ss[0]))
        if how == "revert":
            r = pl.set_mode(ss[1], "sandbox")
            action, reason = "mode_reverted", "manual"
        elif how == "admin_revert":
            other = login_everywhere(fleet, CAROL)[2]
            r = other.post("/api/admin/sessions/%s/revert" % sid)
            action, reason = "mode_reverted", "admin"
        elif how == "logout":
            r = ss[1].post("/api/logout")
            action, reason = "mode_reverted", "logout"
        else:
            fleet.hosts[2].hgctl_ok("session", "revoke", sid)
            r = None
            action, reason = "mode_reverted", "admin"
        assert r is None or r.status == 200, r
        for sl in sleeps:
            reply = sl.wait_gone()
            assert not isinstance(reply, Exception), reply
            if how in ("revert", "admin_revert"):
                assert reply.status == 200, reply
                assert reply.json()["mode"] == "direct", reply.json()
        if how in ("revert", "admin_revert"):
            for s in ss:
                wait_mode(s, "sandbox")
    finally:
        for sl in sleeps:
            sl.kill()
    n = audit_count(fleet, action, sid)
    assert n == 1, "%d %s records for one end" % (n, action)
    rows = fleet.sql("SELECT line::json->>'reason' FROM audit WHERE "
                     "action = '%s' AND session = '%s'" % (action, sid))
    files = [r["reason"] for hg in fleet.hosts
             if os.path.exists(pl.audit_path(hg))
             for r in pl.audit_records(hg, action=action, session=sid)]
    assert [r[0] for r in rows] + files == [reason], (rows, files)
    assert int(fleet.sql("SELECT direct_until FROM sessions WHERE id = "
                         "'%s' UNION ALL SELECT 0 LIMIT 1" % sid)[0][0]) == 0


def test_expiry_on_every_host_recorded_once(mode, pg):
    """A short grant made on h1, a direct sleep on the user's home host:
    at the deadline it is killed, every host reports sandbox, the stored
    deadline is cleared, and exactly one mode_expired record is written
    (by the host whose UPDATE cleared it)."""
    with running_fleet(mode, pg, "expiry",
                       HOST_EXECUTION_DIRECT_TTL_SECONDS=SHORT_TTL) as fleet:
        ss = login_everywhere(fleet)
        sid = session_id(fleet, ss[0])
        g = pl.grant(ss[0])
        sleeps = []
        try:
            for s in ss[1:]:
                wait_mode(s, "direct")
            sleeps.append(DirectSleep(on_home(fleet, ss)))
            for sl in sleeps:
                reply = sl.wait_gone(SHORT_TTL + hglib.SLOW)
                assert not isinstance(reply, Exception), reply
                assert reply.status == 200, reply
                assert reply.json()["mode"] == "direct", reply.json()
            for s in ss:
                wait_mode(s, "sandbox", SHORT_TTL + 5)
        finally:
            for sl in sleeps:
                sl.kill()
        wait_settled(fleet, sid)
        assert int(fleet.sql("SELECT direct_until FROM sessions WHERE id "
                             "= '%s'" % sid)[0][0]) == 0
        n = audit_count(fleet, "mode_expired", sid)
        assert n == 1, "%d mode_expired records for one grant" % n
        assert audit_count(fleet, "mode_granted", sid) == 1
        # The end is no revert: none of those.
        assert audit_count(fleet, "mode_reverted", sid) == 0
        assert g["expires_at"]


def test_expiry_while_the_store_is_down(mode):
    """The store stopped before a grant's deadline: at the deadline the
    home host kills the direct processes all the same, and no login gets
    in (503 with the store's reason: no record, no attempt); once the store
    is back, every host settles the expiry and exactly one record is
    written."""
    with pglib.Postgres() as own_pg, running_fleet(
            mode, own_pg, "outage", HOST_EXECUTION_DIRECT_TTL_SECONDS=SHORT_TTL,
            HOSTGATE_HOST_LOST_SECONDS=300,
            HOSTGATE_STORE_TIMEOUT_SECONDS=2) as fleet:
        ss = login_everywhere(fleet)
        sid = session_id(fleet, ss[0])
        pl.grant(ss[0])
        sleeps = []
        try:
            for s in ss[1:]:
                wait_mode(s, "direct")
            sleeps.append(DirectSleep(on_home(fleet, ss)))
            own_pg.stop()
            for sl in sleeps:
                sl.wait_gone(SHORT_TTL + hglib.SLOW)
            for i, hg in enumerate(fleet.hosts):
                r = hg.post("/api/login", {"username": DAVE[0],
                                           "password": DAVE[1]},
                            source="127.0.5.%d" % (i + 1))
                # No record can be written: refused before the buckets.
                assert r.status == 503, r
                assert r.json()["error"]["message"].startswith(
                    "the store is unreachable: "), r
        finally:
            for sl in sleeps:
                sl.kill()
            if not own_pg.running:
                own_pg.start()
        wait_settled(fleet, sid, 30)
        n = audit_count(fleet, "mode_expired", sid)
        assert n == 1, "%d mode_expired records for one grant" % n
        assert int(fleet.sql("SELECT direct_until FROM sessions WHERE id "
                             "= '%s'" % sid)[0][0]) == 0


# -- rate limits ---------------------------------------------------------------

def test_full_buckets_swept(mode, pg):
    """A table's full rows go at its first take (then once a minute): a
    bucket idle long enough to be full is deleted, one still refilling
    stays, so does another table's."""
    with running_fleet(mode, pg, "sweep", n=1) as fleet:
        old = "now() - interval '1 hour'"
        soon = "now() + interval '1 hour'"     # refills nothing for now
        fleet.sql("INSERT INTO ratelimits VALUES "
                  "('login_addr', '192.0.2.1', 0, %s), "
                  "('login_addr', '192.0.2.2', 0, %s), "
                  "('mode_user', 'ghost', 0, %s)" % (old, soon, old))
        fleet.hosts[0].login(*pl.USER, source="127.0.4.1")
        rows = fleet.sql("SELECT bucket, key FROM ratelimits WHERE key IN "
                         "('192.0.2.1', '192.0.2.2', 'ghost') "
                         "ORDER BY bucket, key")
        assert rows == [["login_addr", "192.0.2.2"], ["mode_user", "ghost"]], \
            rows


def test_mode_changes_limited_fleet_wide(fleet):
    """200 concurrent mode changes of one session spread over the three
    hosts: exactly one bucket's worth is admitted (the per-session and the
    per-user bucket are the fleet's), the rest get 429."""
    ss = login_everywhere(fleet, CAROL)
    n = 200

    def change(i):
        return pl.set_mode(ss[i % N_HOSTS], "direct")

    t0 = time.monotonic()
    results = pl.at_once(n, change)
    elapsed = time.monotonic() - t0
    st = pl.statuses(results)
    assert set(st) <= {200, 429}, (st, [r for r in results
                                        if r.status not in (200, 429)][:3])
    lo, hi = burst_bounds(elapsed)
    assert lo <= st.get(200, 0) <= hi, (st, elapsed)
    # Refused with the bucket's wait: a token comes every 60 / RATE s.
    for r in results:
        if r.status == 429:
            err = r.error()
            assert err["code"] == "rate_limited", err
            assert 1 <= int(r.header("Retry-After")) <= 60 // RATE, r.headers
    rows = fleet.sql("SELECT key FROM ratelimits WHERE bucket = 'mode_user' "
                     "AND key = 'carol'")
    assert rows == [["carol"]], rows
    pl.set_mode(ss[0], "sandbox")


def test_logins_limited_fleet_wide(fleet):
    """200 concurrent logins of one user from one address spread over the
    three hosts: exactly one bucket's worth gets in."""
    n = 200
    src = "127.0.8.%d" % next(_sources)

    def login(i):
        return fleet.hosts[i % N_HOSTS].post(
            "/api/login", {"username": DAVE[0], "password": DAVE[1]},
            source=src)

    t0 = time.monotonic()
    results = pl.at_once(n, login)
    elapsed = time.monotonic() - t0
    st = pl.statuses(results)
    assert set(st) <= {200, 429}, (st, [r for r in results
                                        if r.status not in (200, 429)][:3])
    lo, hi = burst_bounds(elapsed, LOGIN_BURST, LOGIN_RATE)
    assert lo <= st.get(200, 0) <= hi, (st, elapsed)
    assert all(1 <= int(r.header("Retry-After")) <= 60 // LOGIN_RATE
               for r in results if r.status == 429)
    # As many sessions as admitted logins, in the one store.
    assert fleet.sql("SELECT count(*) FROM sessions WHERE \"user\" = '%s'"
                     % DAVE[0]) == [[str(st[200])]]
    # The buckets are rows of the store, keyed by address and by user.
    assert fleet.sql("SELECT count(*) FROM ratelimits WHERE "
                     "(bucket = 'login_addr' AND key = '%s') OR "
                     "(bucket = 'login_user' AND key = '%s')"
                     % (src, DAVE[0])) == [["2"]]


def test_odd_login_names_are_limited_too(fleet):
    """A user name that is not short printable ASCII is a bucket too (its
    row keyed by its SHA-256): attempts from fresh addresses get 401 until
    the per-user bucket is empty, then 429."""
    name = "\u00e9t\u00e9-" + "x" * 200
    key = "sha256:" + hashlib.sha256(name.encode()).hexdigest()
    t0 = time.monotonic()
    passed = 0
    for i in range(LOGIN_BURST * 3):
        r = fleet.hosts[i % N_HOSTS].post(
            "/api/login", {"username": name, "password": "x" * 10},
            source="127.0.6.%d" % (i + 1))
        if r.status == 429:
            break
        assert r.status in (400, 401), r
        passed += 1
    lo, hi = burst_bounds(time.monotonic() - t0, LOGIN_BURST, LOGIN_RATE)
    assert r.status == 429 and lo <= passed <= hi, (r, passed, lo, hi)
    assert fleet.sql("SELECT count(*) FROM ratelimits WHERE bucket = "
                     "'login_user' AND key = '%s'" % key) == [["1"]]
