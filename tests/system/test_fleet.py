"""A fleet end to end (issue 14, point 7): three hostgates on one real
PostgreSQL behind a real HAProxy (fleetlib). A login through the balancer
works on every host; a grant made on one host is honoured on the others
with the same deadline and ends everywhere; a revoke on any host ends the
session's direct spawns on all of them; the mode-change bucket holds
fleet-wide under 200 concurrent requests over the three hosts; a host
killed with kill -9 costs only its own terminals; the store stopped and
started gives 503s then recovery; and after all of it the one audit chain
of the fleet verifies. The tests run in this order on one fleet per mode:
the later ones kill a host and stop the store."""

import math
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
import uuid

import pytest

import fleetlib
import hglib
import policylib as pl
import sandboxlib as sl

pytestmark = pytest.mark.skipif(fleetlib.missing() is not None,
                                reason=fleetlib.missing() or "")

N = 7           # mode changes a minute (and the bucket's size)
FLOOD = 200
TTL = 8         # direct mode's TTL, seconds
LOST = 3        # HOSTGATE_HOST_LOST_SECONDS
CAROL = ("carol", "carol-password-3")
DAVE = ("dave", "dave-password-44")
ERIN = ("erin", "erin-password-555")
TERM_ID = re.compile(r"(h[0-9]+)\.[0-9a-f]{16}")


# Three hosts of four daemons each: in the mode deployments run (as root,
# separate users and cgroups) only, which keeps make check's time; the
# two-host tests of test_store_pg, test_audit_pg and test_hosts_pg run in
# both modes.
@pytest.fixture(scope="module", params=hglib.MODES[:1])
def mode(request):
    return request.param


@pytest.fixture(scope="module")
def fleet(mode, request):
    failed = request.session.testsfailed
    with fleetlib.running(mode, n=3, name="fleet", host_lost=LOST, env={
            "HOSTGATE_MODE_RATE_PER_MINUTE": N,
            "HOST_EXECUTION_DIRECT_TTL_SECONDS": TTL}) as f:
        for user in (CAROL, DAVE, ERIN):
            f.hosts[0].add_user(*user, admin=True)
        yield f
        # A test of this fleet failed: keep its directories and logs.
        if request.session.testsfailed > failed:
            f.failed = True


@pytest.fixture(scope="module")
def lb(fleet):
    return fleet.lb


def alive_ids(fleet):
    return [h for h, hg in zip(fleet.ids, fleet.hosts)
            if hg.alive("brokerd")]


def status_of(session):
    r = session.get("/api/status")
    assert r.status == 200, r
    return r


def direct_shells(hg):
    """Shells sandboxd started without a sandbox (its own children)."""
    return set(sl.children_of(hg.pid("sandboxd"), "bash"))


def wait_mode(session, hosts, want, expires_at=None, timeout=hglib.SLOW):
    """Wait until each host says the session's mode is want (and its
    deadline expires_at)."""
    for h in hosts:
        def seen():
            doc = pl.mode_of(session.on(h))
            return doc["mode"] == want and (
                expires_at is None or doc["expires_at"] == expires_at)
        hglib.wait_for(seen, timeout, what="mode %s on %s" % (want, h))


def audit_show(fleet, *args, host=0):
    return pl.audit_show(fleet.hosts[host], *args)


class Term:
    """A terminal through the balancer: its WebSocket goes to the host its
    id names, whatever the HGHOST cookie says."""

    PROMPT = b"__HGPS__ "

    def __init__(self, session):
        r = session.post("/api/terminals", {"cols": 120, "rows": 40})
        assert r.status == 201, "terminal create: %r" % r
        self.id = r.json()["id"]
        self.mode = r.json()["mode"]
        m = TERM_ID.fullmatch(self.id)
        assert m, "terminal id %r does not name its host" % self.id
        self.host = m.group(1)
        assert fleetlib.served_by(r) == self.host, (r.headers, self.id)
        self.session = session
        self.ws = None

    def attach(self):
        st, h, body, ws = sl.ws_handshake(self.session.hg,
                                          sl.ws_path(self.id),
                                          cookie=self.session.cookie)
        assert st == 101, "attach %s: %d %r" % (self.id, st, body)
        self.ws = ws
        ws.send_binary(b"PS1='__HG''PS__ '\n")
        ws.read_until(re.escape(self.PROMPT))
        return self

    def echo(self):
        """A line typed and its output read back: the shell serves."""
        tag = uuid.uuid4().hex[:10]
        self.ws.send_binary(('M=__HG; echo "${M}_%s__"\n' % tag).encode())
        self.ws.read_until(rb"__HG_%s__" % tag.encode())

    def close(self):
        if self.ws is not None:
            self.ws.close()
            self.ws = None


# -- one identity across the hosts ---------------------------------------------

def test_login_through_the_balancer_works_on_every_host(fleet, lb):
    s = lb.login(*hglib.ADMIN)
    assert s.host in fleet.ids, s.host
    for h in fleet.ids:
        r = status_of(s.on(h))
        assert fleetlib.served_by(r) == h, r.headers
        doc = r.json()
        assert doc["user"] == "alice", doc
        assert doc["host"] == {"id": h, "store": "postgresql"}, doc["host"]
        assert sorted(x["id"] for x in doc["hosts"]) == fleet.ids, doc
    # Without a cookie, logins go round the hosts; each one's session works
    # on the others.
    seen = set()
    for _ in range(2 * len(fleet.ids)):
        t = lb.login(*hglib.USER)
        seen.add(t.host)
        other = fleet.ids[(fleet.ids.index(t.host) + 1) % len(fleet.ids)]
        assert status_of(t.on(other)).json()["user"] == "bob"
    assert seen == set(fleet.ids), seen
    # A token minted through one host works through another.
    r = s.on("h2").post("/api/session/tokens")
    assert r.status == 201, r
    tok = r.json()["token"]
    r = lb.get("/api/status", bearer=tok, host="h3")
    assert r.status == 200 and fleetlib.served_by(r) == "h3", r
    assert r.json()["auth"] == "token", r.json()
    # Revoked on h3, it is refused on h1.
    r = s.on("h3").request("DELETE", "/api/session/tokens/" +
                           s.on("h2").get("/api/session/tokens").json()
                           ["tokens"][0]["id"])
    assert r.status == 200, r
    hglib.wait_for(lambda: lb.get("/api/status", bearer=tok,
                                  host="h1").status == 401,
                   what="the revoked token refused on h1")
    # A logout on h3 ends the session on h1 and h2.
    assert s.on("h3").post("/api/logout").status == 200
    for h in ("h1", "h2"):
        hglib.wait_for(lambda: s.on(h).get("/api/status").status == 401,
                       what="the session ended on %s" % h)


def test_mcp_session_stays_on_its_host(fleet, lb):
    """An MCP session lives in its host's memory: its id names the host
    and HAProxy sends each of its requests there, whatever the cookie."""
    import test_mcp_http as mcp
    tok = fleet.hosts[0].hgctl_json("token", "create", "bob")["token"]
    s = mcp.Legacy(lb, tok)
    host, _, hexid = s.sid.partition(".")
    assert host in fleet.ids and len(hexid) == 32, s.sid
    for i, other in enumerate(fleet.ids * 2):
        r = s.send(mcp.rpc(100 + i, "tools/list"),
                   {"Cookie": "HGHOST=" + other})
        assert r.status == 200, (other, r)
        assert fleetlib.served_by(r) == host, (other, r.headers)


def test_client_address_from_the_balancer(fleet, lb):
    """frontd takes the client's address from the X-Forwarded-For HAProxy
    appends (its peer, 127.0.0.1, is trusted), not from one the client
    sent itself: a failed login from 127.0.0.2 is recorded as from there."""
    r = lb.post("/api/login", {"username": "bob", "password": "wrong"},
                headers={"X-Forwarded-For": "203.0.113.9"}, host="h1",
                source="127.0.0.2")
    assert r.status == 401, r
    recs = [x for x in audit_show(fleet, "--action", "login_failed",
                                  "--user", "bob")
            if x.get("host") == "h1"]
    assert recs, "no login_failed record of h1"
    assert recs[-1]["detail"]["client"] == "127.0.0.2", recs[-1]


def test_terminal_origin_is_the_balancers(fleet, lb):
    """Issue 24: a browser behind HAProxy sends HAProxy's address as its
    Origin. Every host has it as HOSTGATE_PUBLIC_URL, so a terminal of h2
    (not the first host) upgrades through the balancer with that Origin
    (101, and the shell answers) and refuses any other (403): another
    site, the other scheme, h1's own address. /mcp checks the same Origin,
    and the MCP metadata of every host names the balancer, even asked
    directly."""
    s = lb.login(*hglib.USER, host="h2")
    t = Term(s)
    assert t.host == "h2", t.id
    path = sl.ws_path(t.id)
    try:
        st, h, body, ws = sl.ws_handshake(lb, path, cookie=s.cookie,
                                          origin=lb.url)
        assert st == 101, "attach with Origin %s: %d %r" % (lb.url, st, body)
        t.ws = ws
        ws.send_binary(b"PS1='__HG''PS__ '\n")
        ws.read_until(re.escape(Term.PROMPT))
        t.echo()
        t.close()
        for origin in ("http://evil.example", lb.url.replace("http:", "https:"),
                       "http://127.0.0.1:%d" % fleet.host("h1").port,
                       "http://localhost:%d" % lb.port):
            st, h, body, ws = sl.ws_handshake(lb, path, cookie=s.cookie,
                                              origin=origin)
            assert st == 403 and ws is None, (origin, st, body)
        # /mcp: the balancer's Origin passes (then the token is asked for).
        r = lb.post("/mcp", {}, headers={"Origin": lb.url}, host="h2")
        assert r.status == 401 and fleetlib.served_by(r) == "h2", r
        assert r.header("WWW-Authenticate") == (
            'Bearer resource_metadata="%s/.well-known/oauth-protected-'
            'resource/mcp"' % lb.url), r.headers
        r = lb.post("/mcp", {}, headers={"Origin": "http://evil.example"},
                    host="h2")
        assert r.status == 403, r
        for hg in fleet.hosts:
            # Even asked directly, with another Host: the public URL.
            r = hg.get("/.well-known/oauth-protected-resource/mcp")
            assert r.status == 200, r
            assert r.json()["resource"] == lb.url + "/mcp", r.json()
    finally:
        t.close()
        assert s.request("DELETE", "/api/terminals/" + t.id).status == 200


# -- one policy across the hosts -------------------------------------------------

def test_grant_on_one_host_honoured_on_the_others(fleet, lb):
    a = lb.login(*hglib.ADMIN, host="h1")
    g = pl.grant(a)
    wait_mode(a, fleet.ids, "direct", g["expires_at"])
    out = pl.run(a.on("h3"), "true")
    assert out["mode"] == "direct" and out["backend"] == "direct", out
    # Reverted on h2: sandboxed on all three.
    r = pl.set_mode(a.on("h2"), "sandbox")
    assert r.status == 200 and r.json()["mode"] == "sandbox", r
    wait_mode(a, fleet.ids, "sandbox")
    assert pl.run(a.on("h1"), "true")["mode"] == "sandbox"
    # A grant left to expire: every host reverts at the same deadline and
    # exactly one writes the expiry record.
    g = pl.grant(a.on("h3"))
    sid = [x for x in audit_show(fleet, "--action", "mode_granted", "--user",
                                 "alice")][-1]["session"]
    wait_mode(a, fleet.ids, "direct", g["expires_at"])
    wait_mode(a, fleet.ids, "sandbox", timeout=TTL + 10)

    def expired():
        return [x for x in audit_show(fleet, "--action", "mode_expired",
                                      "--session", sid)]
    recs = hglib.wait_for(expired, what="the mode_expired record")
    # Every host has reverted (above); one record for the fleet.
    assert len(expired()) == 1, expired()
    assert recs[0]["host"] in fleet.ids, recs[0]


@pytest.mark.parametrize("how", ["logout", "revert"])
def test_revoke_on_one_host_kills_direct_spawns_on_all(fleet, lb, how):
    user = DAVE if how == "logout" else ERIN
    d = lb.login(*user, host="h1")
    g = pl.grant(d)
    wait_mode(d, fleet.ids, "direct", g["expires_at"])
    shells = {}
    for h, hg in zip(fleet.ids, fleet.hosts):
        before = direct_shells(hg)
        t = Term(d.on(h))
        assert t.mode == "direct" and t.host == h, (t.id, t.mode)
        shells[h] = hglib.wait_for(lambda: direct_shells(hg) - before,
                                   what="the direct shell on %s" % h)
    if how == "logout":
        r = d.on("h2").post("/api/logout")
    else:
        r = pl.set_mode(d.on("h2"), "sandbox")
    assert r.status == 200, r
    for h, hg in zip(fleet.ids, fleet.hosts):
        hglib.wait_for(lambda: not (direct_shells(hg) & shells[h]),
                       what="%s's direct shells gone after the %s on h2"
                       % (h, how))
    if how == "logout":
        for h in fleet.ids:
            hglib.wait_for(lambda: d.on(h).get("/api/status").status == 401,
                           what="the session ended on %s" % h)


def test_mode_changes_limited_fleet_wide(fleet, lb):
    c = lb.login(*CAROL)
    ids = fleet.ids
    t0 = time.monotonic()
    res = pl.at_once(FLOOD, lambda i: pl.set_mode(c.on(ids[i % len(ids)]),
                                                 "sandbox"))
    elapsed = time.monotonic() - t0
    got = pl.statuses(res)
    assert set(got) <= {200, 429}, got
    admitted = got.get(200, 0)
    # The bucket starts full (N) and refills N a minute: at most what the
    # measured time allows beyond that, never fewer than N.
    refills = math.floor(elapsed * N / 60)
    assert N <= admitted <= N + refills, (got, elapsed)
    assert {fleetlib.served_by(r) for r in res} == set(ids)
    for r in res:
        if r.status == 429:
            assert r.error()["code"] == "rate_limited", r
            assert (r.header("Retry-After") or "").isdigit(), r.headers
    refused = audit_show(fleet, "--action", "mode_refused", "--user",
                         "carol", "--limit", "0", host=1)
    assert len(refused) == FLOOD - admitted, len(refused)
    assert {x["host"] for x in refused} == set(ids)


# -- losing a host, losing the store ------------------------------------------

def test_host_killed_costs_only_its_terminals(fleet, lb):
    b = lb.login(*hglib.USER, host="h3")
    lost = Term(b).attach()
    lost.echo()
    assert lost.host == "h3"
    keep = Term(b.on("h1")).attach()
    keep.echo()
    try:
        pids = fleet.kill9("h3")
        assert len(pids) == len(hglib.DAEMONS), pids
        # The client stuck to h3 goes on through the others, at once.
        for _ in range(10):
            r = b.get("/api/status")
            assert r.status == 200, r
            assert fleetlib.served_by(r) in ("h1", "h2"), r.headers
        keep.echo()
        lb.wait_state("h3", "DOWN")
        # h3's terminal: lost with h3, said so by the hosts that remain.
        path = sl.ws_path(lost.id)

        def gone():
            st, _, body, ws = sl.ws_handshake(lb, path, cookie=b.cookie)
            if ws is not None:
                ws.close()
            return (st, body) if st == 410 else None
        st, body = hglib.wait_for(gone, LOST + hglib.SLOW, interval=0.2,
                                  what="410 for %s" % lost.id)
        msg = hglib.Response(st, [], body).error()["message"]
        assert re.fullmatch(r"terminal %s was lost with host h3 at "
                            r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z"
                            % re.escape(lost.id), msg), msg
        recs = hglib.wait_for(lambda: [
            x for x in audit_show(fleet, "--action", "host_lost")
            if (x.get("detail") or {}).get("host") == "h3"],
            what="the host_lost record of h3")
        det = recs[-1]["detail"]
        assert lost.id in det["terminals"], det
        assert det["lost_by"] in ("h1", "h2"), det
        # The session and the others' terminals are untouched.
        keep.echo()
        assert status_of(b.on("h2")).json()["user"] == "bob"
        a = lb.login(*hglib.ADMIN, host="h2")
        hosts = {x["id"]: x for x in status_of(a).json()["hosts"]}
        assert hosts["h3"]["state"] == "lost", hosts
        assert hosts["h1"]["state"] == hosts["h2"]["state"] == "up", hosts
    finally:
        keep.close()
        lost.close()


def test_store_stopped_then_started(fleet, lb):
    live = alive_ids(fleet)
    a = lb.login(*hglib.ADMIN, host=live[0])
    t = Term(a).attach()
    wrong = []      # state changes not refused with the store's 503
    try:
        fleet.pg.stop()
        for h in live:
            def refused():
                r = a.on(h).post("/api/session/tokens")
                return r if r.status != 201 else None
            r = hglib.wait_for(refused, interval=0.2,
                               what="a mint refused on %s with the store "
                               "down" % h)
            pl.assert_error(r, 503, message="the store is unreachable: ")
            assert fleetlib.served_by(r) == h, r.headers
            hz = fleet.host(h).health()
            assert hz.status == 503, hz
            store = hz.json()["store"]
            assert store["ok"] is False and store["kind"] == "postgresql", \
                store
            assert store["reason"].startswith("the store is unreachable: ")
            # No action without its record: a login, a grant, a spawn
            # neither, each with the same 503.
            for what, fn in (
                    ("login", lambda: lb.post("/api/login", {
                        "username": "bob", "password": hglib.USER[1]},
                        host=h)),
                    ("grant", lambda: pl.set_mode(a.on(h), "direct")),
                    ("run_command", lambda: a.on(h).post(
                        "/api/run_command", {"command": "true"}))):
                r = fn()
                if r.status != 503 or not r.body.count(
                        b"the store is unreachable: "):
                    wrong.append("%s on %s: %d %r" % (what, h, r.status,
                                                      r.body[:120]))
        # HAProxy keeps the hosts in: their 503 says why, and open
        # terminals go on; reads of the sessions in memory too.
        assert all(lb.states()[h] == "UP" for h in live), lb.states()
        t.echo()
        assert a.get("/api/status").status == 200
        fleet.pg.start()
        for h in live:
            hglib.wait_for(lambda: a.on(h).post(
                "/api/session/tokens").status == 201,
                interval=0.2, what="mints on %s back" % h)
            fleet.host(h).wait_status(200)
        t.echo()
        recs = hglib.wait_for(lambda: audit_show(fleet, "--action",
                                                 "store_back"),
                              what="store_back records")
        assert {x["host"] for x in recs} >= set(live), recs
        assert all(x["detail"]["down_ms"] > 0 for x in recs), recs
        # A login after the recovery works on every live host.
        s = lb.login(*hglib.USER)
        for h in live:
            status_of(s.on(h))
    finally:
        t.close()
    assert not wrong, "with the store down, not 503 'the store is " \
        "unreachable': " + "; ".join(wrong)


def test_fleet_audit_chain_verifies(fleet):
    """After all of the above: one chain, records from every host."""
    for hg in fleet.hosts:
        if not hg.alive("brokerd"):
            continue
        rc, doc = pl.verify(hg)
        assert rc == 0, doc
    recs = audit_show(fleet, "--limit", "0")
    assert {x.get("host") for x in recs} >= set(fleet.ids), \
        {x.get("host") for x in recs}
    seqs = [x["seq"] for x in recs]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs))), seqs[:20]


# -- make fleet ------------------------------------------------------------------

def fleet_sh(env, *args, fds=()):
    return subprocess.run([os.path.join(hglib.REPO, "scripts", "fleet.sh")]
                          + list(args), env=env, pass_fds=fds,
                          capture_output=True, text=True, timeout=300,
                          cwd=hglib.REPO)


def alive(pidfile):
    try:
        with open(pidfile) as f:
            os.kill(int(f.read()), 0)
        return True
    except (OSError, ValueError):
        return False


def test_make_fleet_starts_and_stops_it_all(mode):
    """scripts/fleet.sh (make fleet): PostgreSQL, h1 h2 h3 and HAProxy up,
    one admin for the fleet, a session that works on every host and
    outlives a restart of the whole fleet; stop leaves nothing running.
    HAProxy on a socket bound here (HG_FLEET_BIND=fd@N), PostgreSQL on its
    socket alone (HG_FLEET_PG_PORT=0): no port chosen here."""
    if mode != "root":
        pytest.skip("make fleet runs as root (the service users)")
    top = tempfile.mkdtemp(prefix="hg-fleetsh-")
    os.chmod(top, 0o755)
    d = os.path.join(top, "fleet")
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    port = sock.getsockname()[1]
    fd = sock.fileno()
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8",
           "HG_BUILD": hglib.BUILD, "HG_FLEET_DIR": d,
           "HG_FLEET_PORT": str(port), "HG_FLEET_BIND": "fd@%d" % fd,
           "HG_FLEET_PG_PORT": "0"}
    lb = fleetlib.Balancer(d, [])
    lb.port = port
    ok = False
    try:
        # Bad input: refused before anything starts.
        r = fleet_sh(dict(env, HG_FLEET_PORT="80a"), "start")
        assert r.returncode != 0 and "not a port number: 80a" in r.stderr, r
        assert not os.path.exists(os.path.join(d, "pg")), os.listdir(d) \
            if os.path.isdir(d) else None
        # HAProxy's port taken (here by our socket, as make run takes
        # 8080): refused before anything starts, naming the variable.
        nobind = {k: v for k, v in env.items() if k != "HG_FLEET_BIND"}
        r = fleet_sh(nobind, "start")
        assert r.returncode != 0 and "port %d is taken" % port in r.stderr \
            and "HG_FLEET_PORT" in r.stderr, r
        assert not os.path.exists(os.path.join(d, "pg")), os.listdir(d)
        r = fleet_sh(env, "start", fds=(fd,))
        assert r.returncode == 0, r.stderr
        assert "the fleet is up: http://127.0.0.1:%d/" % port in r.stderr
        m = re.search(r"created user admin, password: (\S+)", r.stderr)
        assert m, r.stderr
        pw = m.group(1)
        assert fleet_sh(env, "status").returncode == 0
        s = lb.login("admin", pw)
        for h in ("h1", "h2", "h3"):
            doc = status_of(s.on(h)).json()
            assert doc["host"]["id"] == h and doc["user"] == "admin", doc
        t = Term(s.on("h2"))
        assert t.host == "h2"
        # Its WebSocket through HAProxy, with HAProxy's URL as the Origin
        # a browser sends (HOSTGATE_PUBLIC_URL on every host); no other.
        for origin, want in (("http://127.0.0.1:%d" % port, 101),
                             ("http://evil.example", 403)):
            st, _, body, ws = sl.ws_handshake(lb, sl.ws_path(t.id),
                                              cookie=s.cookie, origin=origin)
            assert st == want, (origin, st, body)
            if ws is not None:
                ws.close()
        # Stopped and started again: the same store, the same session,
        # no second admin.
        r = fleet_sh(env, "stop")
        assert r.returncode == 0, r.stderr
        r = fleet_sh(env, "start", fds=(fd,))
        assert r.returncode == 0, r.stderr
        assert "created user admin" not in r.stderr, r.stderr
        assert status_of(s.on("h3")).json()["user"] == "admin"
        ok = True
    finally:
        r = fleet_sh(env, "stop")
        sock.close()
        pids = [os.path.join(d, h, "run.pid") for h in ("h1", "h2", "h3")]
        left = [p for p in pids if alive(p)]
        if ok:
            assert r.returncode == 0, r.stderr
            st = fleet_sh(env, "status")
            assert st.returncode != 0, st.stderr
            assert "PostgreSQL: stopped" in st.stderr, st.stderr
            assert not left, left
            assert not os.path.exists(os.path.join(d, "pg", "data",
                                                   "postmaster.pid"))
            shutil.rmtree(top, ignore_errors=True)
        else:
            print("fleet.sh directory kept: %s" % top)
