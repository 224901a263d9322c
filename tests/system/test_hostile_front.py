"""A hostile frontd: a client on brokerd's front socket under frontd's own
uid, sending hand-made requests. brokerd trusts nothing it says beyond the
secrets it forwards: without an admin session's cookie and CSRF token it
gets no direct mode; it cannot spawn as another user, read the audit log
or use the admin API with a non-admin's credentials, nor use hgctl's
requests."""

import fcntl
import os

import pytest

import policylib as pl


@pytest.fixture(scope="module")
def hg(mode):
    with pl.module_hostgate(mode, "hostile",
                            HOST_EXECUTION_DIRECT_TTL_SECONDS=30) as h:
        yield h


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
