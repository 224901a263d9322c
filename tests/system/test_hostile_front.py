"""A hostile frontd: a client on brokerd's front socket under frontd's own
uid, sending hand-made requests. brokerd trusts nothing it says beyond the
secrets it forwards: without an admin session's cookie and CSRF token it
gets no direct mode; it cannot spawn as another user, read the audit log
or use the admin API with a non-admin's credentials, nor use hgctl's
requests."""

import fcntl
import json
import os
import socket

import pytest

import hglib
import policylib as pl


# The configuration of `hg` (conftest.py): pooled per mode.
HOSTGATE = pl.config(HOST_EXECUTION_DIRECT_TTL_SECONDS=30)


@pytest.fixture
def alice(hg):
    s = hg.login(*pl.ADMIN)
    yield s
    pl.set_mode(s, "sandbox")


@pytest.fixture
def bob(hg):
    return hg.login(*pl.USER)


def talk(hg, *requests):
    """Send requests as a frontd; returns (replies in order, result)."""
    res = pl.front_talk(hg, list(requests))
    assert res["hello"] is not None and res["hello"].get("role") == \
        "brokerd", res
    replies = [res["replies"].get(1001 + i) for i in range(len(requests))]
    assert all(r is not None for r in replies), res
    return replies, res


def code(reply):
    assert "error" in reply, "not refused: %r" % reply
    return reply["error"]["code"]


def test_front_socket_speaks_to_frontds_uid(hg, alice):
    """The probe works at all: a real admin's cookie and CSRF token get
    direct mode through the socket, as through frontd."""
    (r,), _ = talk(hg, {"type": "mode_get", "auth": pl.auth_of(alice)})
    assert r["result"]["mode"] == "sandbox", r
    (r,), _ = talk(hg, {"type": "mode_set", "mode": "direct",
                        "auth": pl.auth_of(alice)})
    assert r["result"]["mode"] == "direct", r


def test_no_direct_mode_without_an_admin_session(hg, alice, bob):
    tok = pl.mint_token(alice)
    standalone = hg.hgctl_ok("token", "create", "alice").stdout.strip()
    bob_as_admin = dict(pl.auth_of(bob), user="alice", role="admin")
    cases = [
        ({}, "unauthorized"),
        ({"auth": {}}, "unauthorized"),
        ({"auth": {"csrf": alice.csrf}}, "unauthorized"),
        ({"auth": {"cookie": "0" * 43, "csrf": alice.csrf}}, "unauthorized"),
        ({"auth": {"bearer": tok}}, "forbidden"),
        ({"auth": {"bearer": standalone}}, "forbidden"),
        ({"auth": {"bearer": tok, "cookie": alice.cookie,
                   "csrf": alice.csrf}}, "forbidden"),
        ({"auth": pl.auth_of(bob)}, "forbidden"),
        ({"auth": bob_as_admin, "user": "alice", "admin": True,
          "role": "admin", "session": "x"}, "forbidden"),
        ({"auth": pl.auth_of(alice, csrf=False)}, "forbidden"),
        ({"auth": {"cookie": alice.cookie, "csrf": "x" * 40}}, "forbidden"),
        ({"auth": {"cookie": alice.cookie, "csrf": bob.csrf}}, "forbidden"),
        # Ill-typed credentials are refused by the protocol table itself.
        ({"auth": "alice"}, "bad_request"),
        ({"auth": {"cookie": 1234, "csrf": alice.csrf}}, "bad_request"),
    ]
    granted = len(pl.audit_records(hg, action="mode_granted"))
    reqs = [dict(extra, type="mode_set", mode="direct")
            for extra, _ in cases]
    replies, res = talk(hg, *reqs)
    assert res["open"], "brokerd closed the connection"
    got = [code(r) for r in replies]
    assert got == [want for _, want in cases], list(zip(got, cases))
    assert pl.mode_of(alice)["mode"] == "sandbox"
    assert pl.mode_of(bob)["mode"] == "sandbox"
    assert len(pl.audit_records(hg, action="mode_granted")) == granted


def test_spawn_runs_as_its_credentials_user(hg, alice, bob):
    """There is no field naming the user: whatever else the request
    says, bob's cookie runs as bob, in his workspace, sandboxed."""
    pl.grant(alice)
    aid = pl.audit_records(hg, action="login", user="alice")[-1]["session"]
    req = {"type": "run", "command": "pwd; echo $HOME $USER $HOSTGATE_MODE",
           "auth": pl.auth_of(bob), "user": "alice", "session": aid,
           "mode": "direct", "permission": "workspace-write+network",
           "workspace": pl.workspace_root(hg) + "/alice"}
    (r,), res = talk(hg, req)
    assert "result" in r, r
    assert r["result"]["mode"] == "sandbox", r
    out = res["outputs"][1001][0]
    ws_bob = pl.workspace_root(hg) + "/bob"
    assert out.split() == [ws_bob, ws_bob, "bob", "sandbox"], out
    rec = pl.wait_audit(hg, action="spawn_end", detail_id=r["result"]["id"])
    assert rec[-1]["user"] == "bob", rec


def test_terminal_belongs_to_its_credentials_user(hg, alice, bob):
    req = {"type": "terminal_create", "auth": pl.auth_of(bob),
           "user": "alice"}
    (r,), _ = talk(hg, req)
    assert "result" in r, r
    tid = r["result"]["id"]
    try:
        mine = [t["id"] for t in bob.get("/api/terminals").json()
                ["terminals"]]
        theirs = [t["id"] for t in alice.get("/api/terminals").json()
                  ["terminals"]]
        assert tid in mine and tid not in theirs, (tid, mine, theirs)
    finally:
        bob.request("DELETE", "/api/terminals/" + tid)


def test_another_users_terminal_is_out_of_reach(hg, alice, bob):
    r = alice.post("/api/terminals", {})
    assert r.status == 201, r
    tid = r.json()["id"]
    try:
        replies, _ = talk(
            hg,
            {"type": "terminal_attach", "terminal": tid,
             "auth": pl.auth_of(bob), "user": "alice"},
            {"type": "terminal_delete", "terminal": tid,
             "auth": pl.auth_of(bob), "user": "alice"},
            {"type": "admin_kill", "terminal": tid,
             "auth": pl.auth_of(bob)})
        assert [code(x) for x in replies] == ["not_found", "not_found",
                                              "forbidden"], replies
        t = [t for t in alice.get("/api/terminals").json()["terminals"]
             if t["id"] == tid]
        assert t and t[0]["running"] is True, t
    finally:
        alice.request("DELETE", "/api/terminals/" + tid)


@pytest.mark.parametrize("op", ["admin_audit", "admin_sessions",
                                "admin_debug", "admin_revert", "admin_kill"])
def test_admin_requests_need_an_admin_session(hg, alice, bob, op):
    tok = pl.mint_token(alice)
    extra = {"session": "0" * 32, "terminal": "0" * 16}
    replies, res = talk(
        hg,
        dict(extra, type=op),
        dict(extra, type=op, auth=pl.auth_of(bob), user="alice",
             admin=True),
        dict(extra, type=op, auth={"bearer": tok}),
        dict(extra, type=op, auth={"cookie": "f" * 43}))
    assert [code(r) for r in replies] == ["unauthorized", "forbidden",
                                          "forbidden", "unauthorized"], \
        replies
    assert res["open"]
    for r in replies:
        assert "records" not in str(r) and "sessions" not in r.get(
            "result", {}), r


def test_audit_log_unreadable_without_an_admin(hg, bob):
    """Not by the admin request, nor by hgctl's audit requests."""
    replies, res = talk(
        hg,
        {"type": "admin_audit", "auth": pl.auth_of(bob), "limit": 10000},
        {"type": "audit_show", "auth": pl.auth_of(bob)},
        {"type": "audit_show"},
        {"type": "audit_verify"})
    for r in replies:
        assert "error" in r and "result" not in r, r
    assert res["open"]


def test_unknown_request_keeps_the_connection(hg, alice):
    replies, res = talk(
        hg,
        {"type": "no_such_request", "auth": pl.auth_of(alice)},
        {"type": "spawn", "auth": pl.auth_of(alice), "argv": ["/bin/id"]},
        {"type": "kill_session", "session": "0" * 32},
        {"type": "mode_get", "auth": pl.auth_of(alice)})
    assert code(replies[0]) == "bad_request", replies[0]
    assert code(replies[1]) == "bad_request", replies[1]
    assert code(replies[2]) == "bad_request", replies[2]
    assert replies[3]["result"]["mode"] == "sandbox", replies[3]
    assert res["open"], "brokerd closed the connection"


def test_hgctl_requests_are_refused(hg, alice):
    before_tokens = hg.hgctl_json("token", "list")
    replies, res = talk(
        hg,
        {"type": "user_add", "name": "mallory", "password": "m" * 16,
         "admin": True},
        {"type": "user_add", "name": "mallory", "password": "m" * 16,
         "admin": True, "auth": pl.auth_of(alice)},
        {"type": "token_create", "user": "alice"},
        {"type": "token_create", "user": "alice",
         "auth": pl.auth_of(alice)},
        {"type": "user_passwd", "name": "alice", "password": "p" * 16},
        {"type": "user_del", "name": "bob"},
        {"type": "session_list"},
        {"type": "session_revert", "session": "0" * 32},
        {"type": "audit_verify"})
    for r in replies:
        assert "error" in r and "result" not in r, r
    assert res["open"]
    users = [u["name"] for u in hg.hgctl_json("user", "list")]
    assert "mallory" not in users and "bob" in users, users
    assert hg.hgctl_json("token", "list") == before_tokens
    assert hg.login(*pl.ADMIN)      # alice's password is unchanged
    assert not pl.audit_records(hg, action="user_added", user="mallory")


def memfd_with(text, seal):
    fd = os.memfd_create("code", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    os.write(fd, text.encode())
    os.lseek(fd, 0, os.SEEK_SET)
    if seal:
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_WRITE |
                    fcntl.F_SEAL_GROW | fcntl.F_SEAL_SHRINK)
    return fd


def test_code_must_come_sealed(hg, bob):
    """A frontd that keeps its code memfd writable could change the code
    after brokerd recorded it, so that the audit names other code than what
    ran: brokerd refuses an unsealed memfd, and the code never runs."""
    tag = "unsealed-%d" % os.getpid()
    before = len(pl.audit_records(hg, action="spawn"))
    fd = memfd_with("print(%r)" % tag, seal=False)
    try:
        (r,), _ = talk(hg, {"type": "run", "lang": "python", "code": "",
                            "auth": pl.auth_of(bob), "_fds": [fd]})
    finally:
        os.close(fd)
    assert code(r) == "bad_request" and "sealed" in r["error"]["message"], r
    assert len(pl.audit_records(hg, action="spawn")) == before
    # The same, sealed, runs and is recorded as the code it was.
    fd = memfd_with("print(%r)" % tag, seal=True)
    try:
        (r,), res = talk(hg, {"type": "run", "lang": "python", "code": "",
                              "auth": pl.auth_of(bob), "_fds": [fd]})
    finally:
        os.close(fd)
    assert "result" in r, r
    rec = [x for x in pl.audit_records(hg, action="spawn")
           if x["detail"].get("code") == "print(%r)" % tag]
    assert len(rec) == 1, rec


# The protocol table (common/proto.c) checks every field before a handler
# runs: what a hostile peer sends of the wrong kind is bad_request, naming
# the field, and nothing happens.

BAD_ADDRESSES = ["not-an-address\r\n", "", "localhost", "1.2.3", "10.0.0.1 ",
                 "::1%lo", "[::1]", "127.0.0.1:80", "0x7f.0.0.1", 2130706433,
                 ["127.0.0.1"]]


def refused_on(reply, field):
    """A bad_request whose message names the field."""
    assert code(reply) == "bad_request", reply
    assert '"%s"' % field in reply["error"]["message"], reply


def test_login_client_must_be_an_address(hg):
    """A frontd that sends anything but a numeric IPv4 or IPv6 literal as
    the client address is refused before the password is even checked: no
    session, no record, no count against any address's login limit."""
    before = hg.hgctl_json("session", "list")
    records = len(pl.audit_records(hg, action="login")) + \
        len(pl.audit_records(hg, action="login_failed"))
    reqs = [{"type": "login", "username": pl.ADMIN[0],
             "password": pl.ADMIN[1], "client": c} for c in BAD_ADDRESSES]
    reqs.append({"type": "login", "username": pl.ADMIN[0],
                 "password": pl.ADMIN[1]})
    replies, res = talk(hg, *reqs)
    for r in replies:
        refused_on(r, "client")
    assert res["open"]
    assert hg.alive("brokerd")
    assert hg.hgctl_json("session", "list") == before
    assert len(pl.audit_records(hg, action="login")) + \
        len(pl.audit_records(hg, action="login_failed")) == records
    # Numeric addresses of both families are served.
    replies, _ = talk(hg, *[{"type": "login", "username": pl.ADMIN[0],
                             "password": pl.ADMIN[1], "client": c}
                            for c in ("192.0.2.7", "2001:db8::7")])
    for r in replies:
        assert r["result"]["user"] == pl.ADMIN[0], r
        assert r["result"]["cookie"], r


def test_client_address_checked_on_every_request(hg, bob):
    """Not only login: any request that names a client names an address."""
    replies, res = talk(
        hg,
        {"type": "status", "auth": pl.auth_of(bob), "client": "evil\n"},
        {"type": "mode_set", "mode": "direct", "auth": pl.auth_of(bob),
         "client": "x"},
        {"type": "status", "auth": pl.auth_of(bob), "client": "::1"})
    refused_on(replies[0], "client")
    refused_on(replies[1], "client")
    assert replies[2]["result"]["user"] == pl.USER[0], replies[2]
    assert res["open"]


def test_each_field_kind_refused(hg, bob):
    """One hostile case per field kind frontd's requests carry: string,
    int, object (and its members), hex id, path, address; none reaches a
    handler, brokerd lives on and serves the next request."""
    a = pl.auth_of(bob)
    terms = pl.front_talk(hg, [{"type": "terminal_list", "auth": a}])
    cases = [
        ({"type": "mode_set", "mode": "", "auth": a}, "mode"),
        ({"type": "mode_set", "mode": "d" * 33, "auth": a}, "mode"),
        ({"type": "mode_set", "mode": 1, "auth": a}, "mode"),
        ({"type": "mode_set", "auth": a}, "mode"),
        ({"type": "permission_set", "permission": "x" * 65, "auth": a},
         "permission"),
        ({"type": "terminal_create", "cols": "80", "auth": a}, "cols"),
        ({"type": "terminal_create", "rows": 100000, "auth": a}, "rows"),
        ({"type": "events_subscribe", "last_event_id": -1, "auth": a},
         "last_event_id"),
        ({"type": "status", "auth": "bob"}, "auth"),
        ({"type": "status", "auth": {"cookie": ["x"]}}, "cookie"),
        ({"type": "status", "auth": {"bearer": "b" * 600}}, "bearer"),
        ({"type": "run", "command": "id", "env": ["A=1"], "auth": a}, "env"),
        ({"type": "run", "command": "id", "cwd": "a\nb", "auth": a}, "cwd"),
        ({"type": "run", "command": "id", "timeout": 0, "auth": a},
         "timeout"),
        ({"type": "terminal_attach", "terminal": "../../etc", "auth": a},
         "terminal"),
        ({"type": "terminal_delete", "terminal": "0" * 15, "auth": a},
         "terminal"),
        ({"type": "admin_revert", "session": "G" * 32, "auth": a},
         "session"),
        ({"type": "admin_recording", "recording": 7, "auth": a},
         "recording"),
        ({"type": "login", "username": "bob", "password": 5,
          "client": "127.0.0.1"}, "password"),
    ]
    spawns = len(pl.audit_records(hg, action="spawn"))
    replies, res = talk(hg, *[c for c, _ in cases])
    for (req, field), r in zip(cases, replies):
        refused_on(r, field)
    assert res["open"]
    assert hg.alive("brokerd")
    assert len(pl.audit_records(hg, action="spawn")) == spawns
    assert pl.mode_of(bob)["mode"] == "sandbox"
    assert pl.front_talk(hg, [{"type": "terminal_list", "auth": a}])[
        "replies"] == terms["replies"]


def control_talk(hg, requests):
    """Send requests to brokerd's control socket as hgctl would (as root);
    returns the replies in order."""
    path = os.path.join(hg.run, hglib.SOCK_CONTROL)

    def run():
        s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        s.settimeout(hglib.SLOW)
        s.connect(path)
        s.send(hglib.hello("hgctl"))
        for i, r in enumerate(requests):
            s.send(json.dumps(dict(r, id=100 + i)).encode())
        got = {}
        while len(got) < len(requests):
            m = json.loads(s.recv(70000))
            if "id" in m and m.get("type") != "hello":
                got[m["id"]] = m
        s.close()
        return [got[100 + i] for i in range(len(requests))]

    return hglib.run_as(None, run)


def test_control_field_kinds_refused(hg):
    """The kinds of hgctl's requests, from a client on the control socket:
    user name, bool, hex id, int; nobody is added or changed."""
    users = hg.hgctl_json("user", "list")
    cases = [
        ({"type": "user_add", "name": "Mallory", "password": "m" * 16},
         "name"),
        ({"type": "user_add", "name": "../m", "password": "m" * 16}, "name"),
        ({"type": "user_add", "name": "m" * 33, "password": "m" * 16},
         "name"),
        ({"type": "user_add", "name": "mallory", "password": "m" * 16,
          "admin": "yes"}, "admin"),
        ({"type": "user_add", "name": "mallory", "password": "m" * 16,
          "unix_user": "mallory", "uid": -1, "gid": 0}, "uid"),
        ({"type": "user_passwd", "name": "alice", "password": ""},
         "password"),
        ({"type": "token_revoke", "token": "zz"}, "token"),
        ({"type": "session_revoke", "session": 12}, "session"),
        ({"type": "audit_show", "limit": 0}, "limit"),
        ({"type": "audit_replay", "recording": "0" * 17}, "recording"),
    ]
    replies = control_talk(hg, [c for c, _ in cases])
    for (req, field), r in zip(cases, replies):
        refused_on(r, field)
    assert hg.hgctl_json("user", "list") == users
    assert hg.login(*pl.ADMIN)
    assert hg.alive("brokerd")


@pytest.fixture
def lone(mode):
    """A hostgate of its own: the test plays brokerd on sandboxd's socket,
    which takes the place of the real one's link while it lasts."""
    with pl.module_hostgate(mode, "hostile-sandbox") as h:
        yield h


def broker_uid(hg):
    if hg.mode == "root":
        return hglib.account(hglib.SERVICE_USERS["brokerd"])
    if hg.run_as:
        return hg.run_as
    return os.geteuid(), os.getegid()


def test_sandbox_field_kinds_refused(lone):
    """A hostile brokerd on sandboxd's socket: user names, arrays of
    strings, hex ids, ints and strings of the wrong kind are refused before
    any spawn; sandboxd lives on."""
    path = os.path.join(lone.run, hglib.SOCK_SANDBOX)
    base = {"type": "spawn", "kind": "command", "mode": "sandbox",
            "permission": "read-only", "user": "alice",
            "argv": ["/bin/true"]}
    cases = [
        (dict(base, user="Root"), "user"),
        (dict(base, user="../../etc"), "user"),
        (dict(base, argv="/bin/true"), "argv"),
        (dict(base, argv=["/bin/true", 1]), "argv"),
        (dict(base, argv=["x"] * 65), "argv"),
        (dict(base, env=["A=1"] * 65), "env"),
        (dict(base, session="x" * 32), "session"),
        (dict(base, request_id="not-hex"), "request_id"),
        (dict(base, timeout_ms=0), "timeout_ms"),
        (dict(base, cols=5000), "cols"),
        (dict(base, cwd="a\u0001b"), "cwd"),
        ({"type": "grant", "session": "0" * 32, "user": "alice",
          "deadline_ms": "soon"}, "deadline_ms"),
        ({"type": "kill_user", "user": ""}, "user"),
        ({"type": "usage"}, "user"),
        ({"type": "recording", "recording": "0" * 15}, "recording"),
    ]

    def run():
        s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        s.settimeout(hglib.SLOW)
        s.connect(path)
        s.send(hglib.hello("brokerd"))
        for i, (r, _) in enumerate(cases):
            s.send(json.dumps(dict(r, id=100 + i)).encode())
        got = {}
        while len(got) < len(cases):
            m = json.loads(s.recv(70000))
            if "id" in m and m.get("type") != "hello":
                got[m["id"]] = m
        s.close()
        return [got[100 + i] for i in range(len(cases))]

    replies = hglib.run_as(broker_uid(lone), run)
    for (req, field), r in zip(cases, replies):
        refused_on(r, field)
    assert lone.alive("sandboxd")
