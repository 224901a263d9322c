"""Hosts of a fleet on one PostgreSQL store (HOSTGATE_STORE, pglib's real
server): each host's row in the hosts table (up, its heartbeat, stopped at
a clean exit), terminal ids that name their host (HOST.HEX16), 421 from a
host asked for another's terminal and 410 once that host is lost; a host
killed with SIGKILL declared lost by the other within
HOSTGATE_HOST_LOST_SECONDS, one host_lost record naming its terminal and
running command; /api/status's host and hosts. Also, without a store:
HOSTGATE_TRUSTED_PROXIES, the client address from X-Forwarded-For and the
URLs' scheme and host from X-Forwarded-Proto and -Host only when the peer
is a trusted proxy."""

import contextlib
import http.client
import json
import os
import re
import signal
import threading
import time

import pytest

import hglib
import pglib
import policylib
import sandboxlib as sl

LOST = 2        # HOSTGATE_HOST_LOST_SECONDS in these tests
ID_RE = re.compile(r"^[0-9a-f]{16}$")

needs_pg = pytest.mark.skipif(pglib.available() is not None,
                              reason=str(pglib.available()))


def users_of(hg):
    return {u["name"] for u in hg.hgctl_json("user", "list")}



def share_key(src, hg):
    """Give hg, before it starts, src's audit key, as an operator copies
    the fleet's (one audit chain in the store needs one key)."""
    with open(os.path.join(src.state, "audit.key"), "rb") as f:
        hg.give_audit_key(f.read())


def host(factory, url, name, key_of=None):
    """A hostgate on the store url as host name (with key_of's audit key),
    with alice and bob (once: a store that holds the users shares them)."""
    hg = factory(env={"HOSTGATE_STORE": url, "HOSTGATE_HOST_ID": name,
                      "HOSTGATE_HOST_LOST_SECONDS": str(LOST)},
                 name=name, start=False)
    if key_of is not None:
        share_key(key_of, hg)
    hg.start_all()
    have = users_of(hg)
    if hglib.ADMIN[0] not in have:
        hg.add_user(*hglib.ADMIN, admin=True)
    if hglib.USER[0] not in have:
        hg.add_user(*hglib.USER)
    return hg


def rows(pg, url, sql):
    return pg.psql(url, sql)


def host_state(pg, url, name):
    got = rows(pg, url, "SELECT state, lost_by FROM hosts WHERE id = '%s'"
               % name)
    return tuple(got[0]) if got else None


def kill_all(hg):
    """SIGKILL to every daemon of hg, by pid, brokerd first (a brokerd
    that outlived sandboxd would end its spawns' live rows itself, as it
    does when only sandboxd dies); then reap them."""
    for name in sorted(hg.procs, key=lambda n: n != "brokerd"):
        if hg.procs[name].poll() is None:
            hg.procs[name].send_signal(signal.SIGKILL)
    for p in hg.procs.values():
        p.wait()
    # What ran there dies with the host, as with a machine gone: without
    # cgroups (rootless) a sandbox's bwrap may outlive its sandboxd.
    for pid in spawns_of(hg):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def spawns_of(hg):
    """The processes whose command line names hg's directory (its spawns'
    bwrap), by pid."""
    out = []
    mark = (hg.dir + "/").encode()
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                if mark in f.read():
                    out.append(int(pid))
        except OSError:
            pass
    return out


def ws_status(hg, s, tid):
    """The status of a WebSocket upgrade for terminal tid (101: attached,
    and closed again)."""
    st, _, body, ws = sl.ws_handshake(hg, sl.ws_path(tid), cookie=s.cookie)
    if ws:
        ws.close()
    return st, body


def start_sleeper(s):
    """A run_command that keeps running (until its host dies): the thread
    whose request waits for it."""
    def run():
        try:
            s.post("/api/run_command", {"command": "sleep 590",
                                        "timeout": 600}, timeout=620)
        except (OSError, http.client.HTTPException):
            pass        # its host was killed under it
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


@needs_pg
def test_two_hosts_lost_and_back(hostgate_factory, pg, store):
    a = host(hostgate_factory, store, "ha")
    b = host(hostgate_factory, store, "hb", key_of=a)
    # Both rows up, each host says who it is and on which store.
    assert host_state(pg, store, "ha") == ("up", "")
    assert host_state(pg, store, "hb") == ("up", "")
    sa = a.login(*hglib.USER)
    st = sa.get("/api/status").json()
    assert st["host"] == {"id": "ha", "store": "postgresql"}, st
    assert "hosts" not in st, st                # not an admin
    ad = b.login(*hglib.ADMIN)
    hosts = {h["id"]: h for h in ad.get("/api/status").json()["hosts"]}
    assert set(hosts) >= {"ha", "hb"}, hosts
    assert hosts["ha"]["state"] == "up" and hosts["ha"]["version"], hosts
    assert {"seen", "started", "terminals", "commands"} <= set(hosts["ha"])
    first = policylib.audit_show(a, "--action", "host_up")
    assert any((r.get("detail") or {}).get("host") == "ha" for r in first)

    # A terminal on A: its id names A; its live row is there.
    r = sa.post("/api/terminals", {"cols": 80, "rows": 24})
    assert r.status == 201, r
    tid = r.json()["id"]
    hostpart, _, hexpart = tid.partition(".")
    assert hostpart == "ha" and ID_RE.match(hexpart), tid
    listed = sa.get("/api/terminals").json()["terminals"]
    assert [(t["id"], t["host"]) for t in listed] == [(tid, "ha")], listed
    # Attached by either form of its id on its own host.
    assert ws_status(a, sa, tid)[0] == 101
    assert ws_status(a, sa, hexpart)[0] == 101
    assert rows(pg, store, "SELECT kind, \"user\" FROM live WHERE id = "
                "'%s'" % tid) == [["terminal", hglib.USER[0]]]
    # And a command still running there.
    start_sleeper(sa)
    cmd = hglib.wait_for(lambda: rows(pg, store, "SELECT id FROM live "
                                      "WHERE host = 'ha' AND kind = "
                                      "'command'"),
                         what="the command's live row")[0][0]
    assert cmd.startswith("ha.") and ID_RE.match(cmd[3:]), cmd

    # The same login session through B (the store shares it): B lists
    # the session's terminal on A, with its host and that host's state;
    # an admin on B sees where the session logged in and the terminal.
    via_b = hglib.Session(b, sa.user, sa.role, sa.cookie, sa.csrf)
    listed = via_b.get("/api/terminals").json()["terminals"]
    assert [(t["id"], t["host"], t["state"]) for t in listed] == \
        [(tid, "ha", "up")], listed
    view = {x["id"]: x for x in ad.get("/api/admin/sessions").json()[
        "sessions"]}
    mine = [x for x in view.values() if [t["id"] for t in x["terminals"]]
            == [tid]]
    assert len(mine) == 1 and mine[0]["host"] == "ha", view
    assert view[[k for k in view if view[k]["user"] == hglib.ADMIN[0]][0]][
        "host"] == "hb", view

    # Asked of B: it is A's (421, the text says whose).
    sb = b.login(*hglib.USER)
    r = sb.request("DELETE", "/api/terminals/" + tid)
    assert r.status == 421, r
    assert r.error()["message"] == \
        "terminal %s is served by host ha" % tid, r
    st, body = ws_status(b, sb, tid)
    assert st == 421 and json.loads(body)["error"]["message"] == \
        "terminal %s is served by host ha" % tid, (st, body)
    # A host no one knows: no such terminal.
    assert sb.request("DELETE", "/api/terminals/zz." + hexpart).status \
        == 404

    # A dies at once, all its daemons: B declares it lost.
    kill_all(a)
    hglib.wait_for(lambda: host_state(pg, store, "ha") == ("lost", "hb"),
                   LOST + hglib.SLOW, what="ha declared lost by hb")
    recs = hglib.wait_for(lambda: policylib.audit_show(
        b, "--action", "host_lost"), what="host_lost record")
    assert len(recs) == 1, recs
    d = recs[0]["detail"]
    assert d["host"] == "ha" and d["lost_by"] == "hb", d
    assert d["terminals"] == [tid] and d["commands"] == [cmd], d
    # The session, now served by B, still sees its terminal, as lost.
    assert [(t["id"], t["host"], t["state"]) for t in via_b.get(
        "/api/terminals").json()["terminals"]] == [(tid, "ha", "lost")]
    # Its terminal is gone with it: 410, with when.
    r = sb.request("DELETE", "/api/terminals/" + tid)
    assert r.status == 410, r
    assert re.match(r"^terminal %s was lost with host ha at "
                    r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$" % re.escape(tid),
                    r.error()["message"]), r
    assert ws_status(b, sb, tid)[0] == 410
    hosts = {h["id"]: h for h in ad.get("/api/status").json()["hosts"]}
    assert hosts["ha"]["state"] == "lost", hosts
    assert hosts["ha"]["lost_by"] == "hb", hosts
    # bob's workspace is on A (his home: the one host up when he was
    # added): B never serves it from its own copy, and says why.
    r = sb.post("/api/run_command", {"command": "echo still"})
    assert r.status == 503 and r.error()["code"] == "host_down", r
    assert re.match(r"^host ha is down since \d{4}-\d\d-\d\dT\d\d:\d\d:"
                    r"\d\d(\.\d+)?Z \(lost: no heartbeat\); user bob's "
                    r"workspace is there$", r.error()["message"]), r
    # B works on: a user added now is placed on B (A is down), and served.
    b.add_user("carol", "carol-password-1")
    assert {u["name"]: u["home"] for u in b.hgctl_json(
        "user", "list")}["carol"] == "hb"
    sc = b.login("carol", "carol-password-1")
    r = sc.post("/api/run_command", {"command": "echo still"})
    assert r.status == 200 and r.json()["stdout"] == "still\n", r
    assert host_state(pg, store, "hb") == ("up", "")

    # A restarted comes back up; its old terminal is its own again (404
    # there, 421 from B), and no second host_lost record.
    a.start_all()
    assert host_state(pg, store, "ha") == ("up", "")
    assert rows(pg, store, "SELECT id FROM live WHERE host = 'ha'") == []
    assert via_b.get("/api/terminals").json()["terminals"] == []
    assert sb.request("DELETE", "/api/terminals/" + tid).status == 421
    assert len(policylib.audit_show(b, "--action", "host_lost")) == 1
    sa = a.login(*hglib.USER)
    assert sa.request("DELETE", "/api/terminals/" + tid).status == 404
    # A clean stop: stopped, and recorded; B answers 404 for it then.
    assert a.shutdown() == []
    assert host_state(pg, store, "ha") == ("stopped", "")
    # Its record: in the fleet's chain (shown by B) or, with the chain
    # per host, in A's file.
    stopped = policylib.audit_show(b, "--action", "host_stopped")
    if os.path.exists(policylib.audit_path(a)):
        stopped += policylib.audit_records(a, action="host_stopped")
    assert any((rec.get("detail") or {}).get("host") == "ha"
               for rec in stopped), stopped
    assert sb.request("DELETE", "/api/terminals/" + tid).status == 404


@needs_pg
def test_restart_after_kill_accounts_for_its_own(hostgate_factory, pg,
                                                  store):
    """A host killed and restarted before any other has looked: at start it
    finds its row still up and records its own lost terminal."""
    a = host(hostgate_factory, store, "hc")
    s = a.login(*hglib.USER)
    r = s.post("/api/terminals", {"cols": 80, "rows": 24})
    assert r.status == 201, r
    tid = r.json()["id"]
    kill_all(a)
    assert host_state(pg, store, "hc") == ("up", "")
    a.start_all()
    assert host_state(pg, store, "hc") == ("up", "")
    recs = policylib.audit_show(a, "--action", "host_lost")
    assert [rec["detail"]["terminals"] for rec in recs] == [[tid]], recs
    assert recs[0]["detail"]["lost_by"] == "hc", recs
    assert rows(pg, store, "SELECT id FROM live WHERE host = 'hc'") == []


def test_embedded_store_host(hg):
    """Without a PostgreSQL store: host {id, store: embedded}, ids as
    before (16 hex digits), each terminal's host; a HOST.HEX16 id of
    another host is no terminal here."""
    s = hg.login(*hglib.USER)
    st = s.get("/api/status").json()
    assert st["host"]["store"] == "embedded", st
    assert re.match(r"^[a-z0-9][a-z0-9-]{0,31}$", st["host"]["id"]), st
    assert "hosts" not in hg.login(*hglib.ADMIN).get(
        "/api/status").json()
    r = s.post("/api/terminals", {"cols": 80, "rows": 24})
    assert r.status == 201, r
    tid = r.json()["id"]
    try:
        assert ID_RE.match(tid), tid
        mine = [t for t in s.get("/api/terminals").json()["terminals"]
                if t["id"] == tid]
        assert mine and mine[0]["host"] == st["host"]["id"], mine
        # Its own host's name in front of it still finds it; another's not.
        assert ws_status(hg, s, "%s.%s" % (st["host"]["id"], tid))[0] \
            == 101
        assert s.request("DELETE", "/api/terminals/zz-other.%s" % tid
                         ).status == 404
        for bad in ("ZZ.%s" % tid, ".%s" % tid, "a..%s" % tid, tid + "0"):
            assert s.request("DELETE", "/api/terminals/" + bad).status \
                == 404, bad
    finally:
        s.request("DELETE", "/api/terminals/" + tid)


@pytest.mark.parametrize("trusted", [False, True])
def test_forwarded_for_only_from_trusted_proxies(hostgate_factory, trusted):
    """X-Forwarded-For names the client (its login rate limit, its
    records), and X-Forwarded-Proto and -Host the base of the URLs built
    for it, only when the TCP peer is in HOSTGATE_TRUSTED_PROXIES; from
    any other peer the headers are ignored."""
    env = {"HOSTGATE_LOGIN_RATE_PER_MINUTE": "1", "HOSTGATE_LOGIN_BURST": "2",
           "HOSTGATE_TRUSTED_PROXIES": "127.0.0.0/8" if trusted
           else "10.0.0.0/8"}
    hg = hostgate_factory(env=env)
    fwd = {"X-Forwarded-For": "198.51.100.1, 203.0.113.9"}

    def bad(n):
        """A wrong login (a user name each: the per-user limit stays out
        of it)."""
        return {"username": "nobody%d" % n, "password": "wrong-password-1"}
    # The burst of one client address, spent through the header.
    for n in range(2):
        assert hg.post("/api/login", bad(n), headers=fwd).status == 401
    r = hg.post("/api/login", bad(2), headers=fwd)
    assert r.status == 429, r
    # Another address named by the header: its own bucket only if trusted.
    r = hg.post("/api/login", bad(3),
                headers={"X-Forwarded-For": "203.0.113.10"})
    assert r.status == (401 if trusted else 429), r
    recs = policylib.audit_show(hg, "--action", "login_failed")
    clients = {json.dumps(rec, sort_keys=True) for rec in recs}
    seen = " ".join(clients)
    if trusted:
        assert "203.0.113.9" in seen and "203.0.113.10" in seen, recs
        assert "198.51.100.1" not in seen, recs   # the client's own entry
    else:
        assert "203.0.113" not in seen and "127.0.0.1" in seen, recs
    # X-Forwarded-Proto and -Host make the URLs built for the client (the
    # MCP metadata, the 401 challenge) only from a trusted proxy; they
    # never allow an Origin.
    own = "http://127.0.0.1:%d" % hg.port
    fwd = {"X-Forwarded-Proto": "http, https",
           "X-Forwarded-Host": "evil.example, hg.example.org"}
    base = "https://hg.example.org" if trusted else own
    r = hg.get("/.well-known/oauth-protected-resource/mcp", headers=fwd)
    assert r.status == 200 and r.json()["resource"] == base + "/mcp", r
    r = hg.post("/mcp", {}, headers=fwd)
    assert r.status == 401, r
    assert r.header("WWW-Authenticate") == (
        'Bearer resource_metadata="%s/.well-known/oauth-protected-resource'
        '/mcp"' % base), r.headers
    r = hg.post("/mcp", {}, headers=dict(fwd, Origin=base))
    assert r.status == (403 if trusted else 401), r


def seen_ms(pg, url, name):
    return int(rows(pg, url, "SELECT seen FROM hosts WHERE id = '%s'"
                    % name)[0][0])


def db_now_ms(pg, url):
    return int(rows(pg, url, "SELECT (floor(extract(epoch FROM "
                    "clock_timestamp()) * 1000))::bigint")[0][0])


@needs_pg
def test_store_away_loses_no_host(hostgate_factory, pg, store):
    """The store away for longer than HOSTGATE_HOST_LOST_SECONDS: every
    heartbeat in it is old when it is back, yet no host that lives is
    declared lost (each waits a whole lost period linked before it
    judges the others)."""
    a = host(hostgate_factory, store, "hd")
    b = host(hostgate_factory, store, "he", key_of=a)
    pg.stop()
    # The condition itself, not a wait for readiness: no heartbeat can
    # reach the store for longer than the limit.
    time.sleep(LOST + 1)
    pg.start()
    back = db_now_ms(pg, store)
    # Both beating again for more than a lost period: each has looked at
    # the other, whose heartbeat was fresh by then.
    hglib.wait_for(lambda: min(seen_ms(pg, store, "hd"),
                               seen_ms(pg, store, "he"))
                   > back + (LOST + 2) * 1000, LOST + hglib.SLOW,
                   what="both hosts beating again")
    assert host_state(pg, store, "hd") == ("up", "")
    assert host_state(pg, store, "he") == ("up", "")
    for hg in (a, b):
        assert policylib.audit_show(hg, "--action", "host_lost") == []


@needs_pg
def test_stalled_host_declared_lost_comes_back(hostgate_factory, pg, store):
    """A host that stalls (its brokerd stopped) is declared lost like a
    dead one; once it runs again it is up again, with its live rows back
    and a host_up record that says it rejoined."""
    a = host(hostgate_factory, store, "hf")
    b = host(hostgate_factory, store, "hg", key_of=a)
    s = a.login(*hglib.USER)
    r = s.post("/api/terminals", {"cols": 80, "rows": 24})
    assert r.status == 201, r
    tid = r.json()["id"]
    a.send_signal("brokerd", signal.SIGSTOP)
    try:
        hglib.wait_for(lambda: host_state(pg, store, "hf") ==
                       ("lost", "hg"), LOST + hglib.SLOW,
                       what="hf declared lost")
        # Its terminal listed, as lost, to its session served by B.
        via_b = hglib.Session(b, s.user, s.role, s.cookie, s.csrf)
        assert [(t["id"], t["state"]) for t in via_b.get(
            "/api/terminals").json()["terminals"]] == [(tid, "lost")]
    finally:
        a.send_signal("brokerd", signal.SIGCONT)
    hglib.wait_for(lambda: host_state(pg, store, "hf") == ("up", ""),
                   what="hf up again")
    hglib.wait_for(lambda: rows(pg, store, "SELECT id FROM live WHERE "
                                "host = 'hf'") == [[tid]],
                   what="hf's live row back")
    ups = [rec for rec in policylib.audit_show(a, "--action", "host_up")
           if (rec.get("detail") or {}).get("rejoined")]
    assert len(ups) == 1 and ups[0]["detail"]["host"] == "hf", ups
    # Its terminal is its own again.
    sb = b.login(*hglib.USER)
    assert sb.request("DELETE", "/api/terminals/" + tid).status == 421
    assert s.request("DELETE", "/api/terminals/" + tid).status == 200


@needs_pg
def test_live_rows_made_again_after_the_store_is_back(hostgate_factory, pg,
                                                      store):
    """A terminal that ends while the store is away cannot take its live
    row away; once the link is back the host makes its rows again from
    what runs, so the ended one is gone and the running one stays."""
    a = host(hostgate_factory, store, "hh")
    s = a.login(*hglib.USER)
    ended, kept = sl.Terminal(s), sl.Terminal(s)
    try:
        ws = ended.attach()
        assert sorted(r[0] for r in rows(pg, store, "SELECT id FROM live "
                                         "WHERE host = 'hh'")) == \
            sorted([ended.id, kept.id])
        pg.stop()
        ws.send_binary(b"exit\n")
        hglib.wait_for(lambda: not [t for t in s.get("/api/terminals").json()[
            "terminals"] if t["id"] == ended.id and t["running"]],
            what="the shell gone")
        pg.start()
        hglib.wait_for(lambda: rows(pg, store, "SELECT id FROM live WHERE "
                                    "host = 'hh'") == [[kept.id]],
                       what="the live rows made again")
    finally:
        kept.close()
