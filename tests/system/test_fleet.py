"""A fleet end to end (issue 14, point 7): three hostgates on one real
PostgreSQL behind a real HAProxy (fleetlib). A login through the balancer
works on every host; a grant made on one host is honoured on the others
with the same deadline and ends everywhere; a revoke on any host ends the
session's direct spawns on all of them; the mode-change bucket holds
fleet-wide under 200 concurrent requests over the three hosts; a host
killed with kill -9 costs only its own terminals; the store stopped and
started gives 503s then recovery; and after all of it the one audit chain
of the fleet verifies. Each user has a home host holding their workspace
(issue 24): users are placed on the least loaded hosts that are up, a
token names its user's home and HAProxy routes it there, so a token
client sees one workspace; another host answers 421 naming the home, or
503 while the home is down. The tests run in this order on one fleet per mode:
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
from test_mcp_sdk import drivers, mcp_dir  # noqa: F401 (fixtures)

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


def homes(fleet, host=0):
    """{user: home host} as hgctl user list --json shows it."""
    return {u["name"]: u["home"]
            for u in fleet.hosts[host].hgctl_json("user", "list")}


def placement(fleet, up):
    """Where the next user goes by the rule, from the store's rows: of the
    hosts up, the fewest live spawns, then the fewest users, then the id."""
    rows = fleet.psql("SELECT h.id, (SELECT count(*) FROM live l WHERE "
                      "l.host = h.id), (SELECT count(*) FROM users u WHERE "
                      "u.home = h.id) FROM hosts h")
    rows = [r for r in rows if r[0] in up]
    return min(rows, key=lambda r: (int(r[1]), int(r[2]), r[0]))[0]


def file_names(r):
    assert r.status == 200, r
    return {e["name"] for e in r.json()["entries"]}


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
        seen.add(t.served)
        # Whoever answered, the HGHOST cookie names bob's home.
        assert t.host == homes(fleet)["bob"], (t.host, t.served)
        other = fleet.ids[(fleet.ids.index(t.served) + 1) % len(fleet.ids)]
        assert status_of(t.on(other)).json()["user"] == "bob"
    assert seen == set(fleet.ids), seen
    # A token minted through one host works on another (asked directly:
    # through HAProxy it goes to its user's home).
    r = s.on("h2").post("/api/session/tokens")
    assert r.status == 201, r
    tok = r.json()["token"]
    r = fleet.host("h3").get("/api/status", bearer=tok)
    assert r.status == 200 and r.json()["host"]["id"] == "h3", r
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
    # The token names bob's home: the session was made there.
    assert tok.startswith("hgt_%s." % homes(fleet)["bob"]), tok[:12]
    assert host == homes(fleet)["bob"], (host, homes(fleet))
    # Its id presented to another host itself (past HAProxy): 404, as the
    # MCP spec says of an unknown session, never served there.
    for other in fleet.ids:
        if other == host:
            continue
        r = mcp.post(fleet.host(other), mcp.rpc(200, "tools/list"), tok,
                     {"Mcp-Session-Id": s.sid,
                      "MCP-Protocol-Version": s.version})
        assert r.status == 404, (other, r)
    r = s.send(mcp.rpc(300, "tools/list"))
    assert r.status == 200 and fleetlib.served_by(r) == host, r


# -- one workspace per user: the home host --------------------------------------

def test_users_placed_on_the_least_loaded_hosts(fleet, lb):
    """Each user added gets the least loaded host that is up as home (the
    fewest live spawns, then the fewest users, then the id): new users
    spread over the hosts; hgctl user list shows the homes."""
    have = homes(fleet)
    assert set(have.values()) <= set(fleet.ids), have
    assert None not in have.values(), have
    added = []
    for i in range(len(fleet.ids)):
        name = "placed%d" % i
        want = placement(fleet, fleet.ids)
        r = fleet.hosts[i].hgctl("user", "add", name, "--password-stdin",
                                 input="placed-password-%d\n" % i)
        assert r.returncode == 0, r
        assert "home host %s" % want in r.stdout, (want, r.stdout)
        assert homes(fleet, host=i)[name] == want
        # Another host learns it from the store's notification.
        hglib.wait_for(lambda: homes(fleet, host=(i + 1) % len(
            fleet.ids)).get(name) == want, what="%s's home elsewhere" % name)
        added.append(want)
    # Three users on three hosts that carried the same load.
    assert sorted(added) == fleet.ids, added
    text = fleet.hosts[0].hgctl("user", "list").stdout.splitlines()
    assert text[0].split("\t")[:3] == ["NAME", "ROLE", "HOME"], text[0]
    row = [x.split("\t") for x in text if x.startswith("placed0\t")][0]
    assert row[2] == added[0], row


def test_user_without_home_claimed_by_the_first_host(fleet, lb):
    """A user of an earlier release has no home: the first host that
    logs them in claims them (one UPDATE ... WHERE home IS NULL), and the
    login's HGHOST names it."""
    fleet.psql("UPDATE users SET home = NULL WHERE name = 'placed0'")
    for i in range(len(fleet.ids)):
        hglib.wait_for(lambda: homes(fleet, host=i)["placed0"] is None,
                       what="placed0 without a home on %s" % fleet.ids[i])
    s = lb.login("placed0", "placed-password-0", host="h2")
    assert s.served == "h2" and s.host == "h2", (s.served, s.host)
    assert fleet.psql("SELECT home FROM users WHERE name = 'placed0'") == \
        [["h2"]]
    for i in range(len(fleet.ids)):
        hglib.wait_for(lambda: homes(fleet, host=i)["placed0"] == "h2",
                       what="placed0's home h2 seen on %s" % fleet.ids[i])
    # Another host's login keeps it.
    s = lb.login("placed0", "placed-password-0", host="h3")
    assert s.served == "h3" and s.host == "h2", (s.served, s.host)


def test_token_client_sees_one_workspace(fleet, lb):
    """A token client has no cookie: its token names its user's home and
    HAProxy sends it there. A file uploaded is in each of 10 listings."""
    home = homes(fleet)["bob"]
    tok = fleet.hosts[0].hgctl_json("token", "create", "bob")["token"]
    assert tok.startswith("hgt_%s." % home), tok[:12]
    r = lb.request("PUT", "/api/files/token-home.txt", body=b"at home\n",
                   headers={"Content-Type": "application/octet-stream"},
                   bearer=tok)
    assert r.status in (200, 201), r
    assert fleetlib.served_by(r) == home, r.headers
    for _ in range(10):
        r = lb.get("/api/files/", bearer=tok)
        assert "token-home.txt" in file_names(r), r
        assert fleetlib.served_by(r) == home, r.headers
    # A token minted by a login session names the home too.
    s = lb.login(*hglib.USER)
    r = s.on(s.served).post("/api/session/tokens")
    assert r.status == 201, r
    assert r.json()["token"].startswith("hgt_%s." % home), r.json()
    assert "token-home.txt" in file_names(lb.get("/api/files/",
                                                 bearer=r.json()["token"]))


def test_workspace_requests_elsewhere_are_misdirected(fleet, lb):
    """Another host never serves a user's workspace from its own copy:
    421 naming the home host; what needs no workspace works anywhere."""
    home = homes(fleet)["bob"]
    tok = fleet.hosts[0].hgctl_json("token", "create", "bob")["token"]
    s = lb.login(*hglib.USER)
    want = "user bob's workspace is on host %s; " % home
    for other in fleet.ids:
        if other == home:
            continue
        direct = fleet.host(other)
        for r in (direct.get("/api/files/", bearer=tok),
                  direct.post("/api/run_command", {"command": "true"},
                              bearer=tok),
                  direct.post("/api/terminals", {"cols": 80, "rows": 24},
                              bearer=tok),
                  s.on(other).get("/api/files/"),
                  s.on(other).post("/api/run_command", {"command": "true"})):
            pl.assert_error(r, 421, message=want)
        # A browser sent elsewhere (its home was down a while) is sent
        # home again: the 421 sets HGHOST to the home.
        r = s.on(other).get("/api/files/")
        assert r.status == 421 and r.cookie("HGHOST")[0] == home, r.headers
        assert direct.get("/api/status", bearer=tok).status == 200
        assert status_of(s.on(other)).json()["user"] == "bob"
        # The prompt (the MCP instructions) names the home host.
        doc = direct.get("/api/sandbox/prompt", bearer=tok).json()
        assert doc["home"] == home, doc
        assert "on host %s of a fleet" % home in doc["prompt"], doc
    r = s.get("/api/files/")
    assert r.status == 200 and fleetlib.served_by(r) == home, r


def test_mcp_sdk_client_sees_one_workspace(fleet, lb, drivers):
    """The official MCP SDK client through the balancer, connected five
    times with one token: the same workspace each time."""
    tok = fleet.hosts[0].hgctl_json("token", "create", "bob")["token"]
    seen = []
    for i in range(5):
        d = drivers()
        d.connect(lb, tok)
        if i == 0:
            r = d.call("write_file", path="mcp-home/one.txt",
                       content="one workspace\n")
            assert not r.get("isError"), r
        r = d.call("list_files", path="mcp-home")
        assert not r.get("isError"), r
        seen.append(sorted(e["name"] for e in
                           r["structuredContent"]["entries"]))
        r = d.call("read_file", path="mcp-home/one.txt")
        assert r["structuredContent"]["content"] == "one workspace\n", r
        d.close()
    assert seen == [["one.txt"]] * 5, seen


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
    other = [h for h in fleet.ids if h != a.host][-1]
    g = pl.grant(a.on(other))
    wait_mode(a, fleet.ids, "direct", g["expires_at"])
    # Granted on another host, honoured by the home host's spawns.
    out = pl.run(a, "true")
    assert out["mode"] == "direct" and out["backend"] == "direct", out
    # Reverted on h2: sandboxed on all three.
    r = pl.set_mode(a.on("h2"), "sandbox")
    assert r.status == 200 and r.json()["mode"] == "sandbox", r
    wait_mode(a, fleet.ids, "sandbox")
    assert pl.run(a, "true")["mode"] == "sandbox"
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
    # The user's spawns run on their home host alone.
    home = d.host
    hg = fleet.host(home)
    before = direct_shells(hg)
    t = Term(d)
    assert t.mode == "direct" and t.host == home, (t.id, t.mode)
    shells = hglib.wait_for(lambda: direct_shells(hg) - before,
                            what="the direct shell on %s" % home)
    other = [h for h in fleet.ids if h != home][0]
    if how == "logout":
        r = d.on(other).post("/api/logout")
    else:
        r = pl.set_mode(d.on(other), "sandbox")
    assert r.status == 200, r
    hglib.wait_for(lambda: not (direct_shells(hg) & shells),
                   what="%s's direct shells gone after the %s on %s"
                   % (home, how, other))
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
    """h3 killed with kill -9: its terminals are lost and its users, whose
    workspace is there, get 503 naming it (never another host's copy);
    users homed elsewhere work on, and new users are placed elsewhere."""
    assert homes(fleet)["carol"] == "h3", homes(fleet)
    c = lb.login(*CAROL)
    assert c.host == "h3", c.host
    lost = Term(c).attach()
    lost.echo()
    assert lost.host == "h3"
    b = lb.login(*hglib.USER)
    keep = Term(b).attach()
    keep.echo()
    assert keep.host != "h3", keep.host
    tok = fleet.hosts[0].hgctl_json("token", "create", "carol")["token"]
    assert tok.startswith("hgt_h3."), tok[:10]
    try:
        pids = fleet.kill9("h3")
        assert len(pids) == len(hglib.DAEMONS), pids
        # The client stuck to h3 goes on through the others, at once.
        for _ in range(10):
            r = c.get("/api/status")
            assert r.status == 200, r
            assert fleetlib.served_by(r) in ("h1", "h2"), r.headers
        keep.echo()
        lb.wait_state("h3", "DOWN")
        # h3's terminal: lost with h3, said so by the hosts that remain.
        path = sl.ws_path(lost.id)

        def gone():
            st, _, body, ws = sl.ws_handshake(lb, path, cookie=c.cookie)
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
        # carol's workspace is on h3: 503 naming it and since when, by
        # cookie or by token, never served from another host's copy.
        down = re.compile(r"host h3 is down since \d{4}-\d\d-\d\dT"
                          r"\d\d:\d\d:\d\d(\.\d+)?Z \(lost: no heartbeat\); "
                          r"user carol's workspace is there")
        for r in (c.get("/api/files/"),
                  c.post("/api/run_command", {"command": "true"}),
                  c.post("/api/terminals", {"cols": 80, "rows": 24}),
                  lb.get("/api/files/", bearer=tok),
                  lb.post("/api/run_command", {"command": "true"},
                          bearer=tok)):
            err = pl.assert_error(r, 503, code="host_down")
            assert down.fullmatch(err["message"]), err
            assert fleetlib.served_by(r) in ("h1", "h2"), r.headers
        # What needs no workspace works on for carol.
        assert status_of(c).json()["user"] == "carol"
        # The session and the others' terminals are untouched; bob's and
        # alice's workspaces work on.
        keep.echo()
        assert status_of(b.on("h2")).json()["user"] == "bob"
        r = b.post("/api/run_command", {"command": "echo still"})
        assert r.status == 200 and r.json()["stdout"] == "still\n", r
        a = lb.login(*hglib.ADMIN, host="h2")
        assert a.post("/api/run_command", {"command": "true"}).status == 200
        hosts = {x["id"]: x for x in status_of(a).json()["hosts"]}
        assert hosts["h3"]["state"] == "lost", hosts
        assert hosts["h1"]["state"] == hosts["h2"]["state"] == "up", hosts
        # A host that is down gets no new user.
        for i in range(2):
            want = placement(fleet, ("h1", "h2"))
            r = fleet.hosts[0].hgctl("user", "add", "after%d" % i,
                                     "--password-stdin",
                                     input="after-password-%d\n" % i)
            assert r.returncode == 0, r
            assert homes(fleet)["after%d" % i] == want, homes(fleet)
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
        # The admin was placed on h1, the one host up then: its home.
        assert s.host == "h1", s.host
        t = Term(s)
        assert t.host == "h1"
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
