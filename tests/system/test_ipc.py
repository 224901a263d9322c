"""The three IPC sockets: the right peer is let in, the wrong uid is shut out
at once, and bad input closes that one connection while the daemon lives on.
"""

import json
import os
import socket
import time

import pytest

import hglib

# socket name -> (role a client claims, role the server answers with,
#                 a role the socket must refuse)
SOCKETS = {
    hglib.SOCK_FRONT: ("frontd", "brokerd", "hgctl"),
    hglib.SOCK_CONTROL: ("hgctl", "brokerd", "frontd"),
    hglib.SOCK_SANDBOX: ("brokerd", "sandboxd", "frontd"),
}


@pytest.fixture(scope="module")
def ipc(mode):
    hg = hglib.Hostgate(mode, name="ipc")
    try:
        hg.start_all()
        yield hg
    finally:
        hg.cleanup()


def allowed(hg, sock):
    """(uid, gid) that the socket must accept."""
    if hg.mode == "root":
        if sock == hglib.SOCK_FRONT:
            return hglib.account("hostgate-front")
        if sock == hglib.SOCK_SANDBOX:
            return hglib.account("hostgate-broker")
        return (0, 0)
    if hg.run_as:
        return hg.run_as
    return (os.geteuid(), os.getegid())


def refused(hg, sock):
    """Users that the socket must refuse (needs root to become them)."""
    if not hglib.IS_ROOT:
        return []
    ids = [(0, 0), hglib.account("hostgate-front"),
           hglib.account("hostgate-broker"), hglib.account("hostgate-sandbox"),
           hglib.account("hostgate-egress"),
           hglib.account(hglib.TEST_USER)]
    ok = {allowed(hg, sock)[0]}
    if sock == hglib.SOCK_CONTROL:
        ok |= {0}
        if hg.mode == "root":
            ok.add(hglib.account("hostgate-broker")[0])
    return [i for i in ids if i[0] not in ok]


def probe(hg, sock, steps, who=None, wait=hglib.SLOW):
    path = os.path.join(hg.run, sock)
    assert os.path.exists(path), path
    return hglib.run_as(who or allowed(hg, sock),
                        lambda: hglib.seqpacket_probe(path, steps, wait))


# A request each socket serves its peer, and its id.
REQUEST = {
    hglib.SOCK_FRONT: "health",
    hglib.SOCK_CONTROL: "status",
    hglib.SOCK_SANDBOX: "health",
}
REQUEST_ID = 7


def served_probe(path, client, request, wait):
    """As a well-behaved peer: hello, then one request. Reads until its
    reply, the peer's close or wait seconds (only a failure waits them
    out). Returns {closed, messages (hello included), answered: the reply
    or None}."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        s.settimeout(wait)
        s.connect(path)
        s.send(hglib.hello(client))
        s.send(json.dumps({"type": request, "id": REQUEST_ID}).encode())
        out = {"closed": False, "messages": [], "answered": None}
        deadline = time.monotonic() + wait
        while not out["answered"] and time.monotonic() < deadline:
            s.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                d = s.recv(70000)
            except socket.timeout:
                break
            except ConnectionResetError:
                d = b""
            if not d:
                out["closed"] = True
                break
            m = hglib.ipc_decode(d)
            out["messages"].append(m)
            if m.get("type") is None and m.get("id") == REQUEST_ID:
                out["answered"] = m
        return out
    finally:
        s.close()


def served(hg, sock, wait=hglib.SLOW):
    """served_probe of sock as the peer it expects; asserts that its
    request got a result."""
    path = os.path.join(hg.run, sock)
    client = SOCKETS[sock][0]
    res = hglib.run_as(allowed(hg, sock), lambda: served_probe(
        path, client, REQUEST[sock], wait))
    assert not res["closed"], "a well-behaved peer closed: %r" % res
    assert res["answered"] and "result" in res["answered"], \
        "%s after the hello not served: %r" % (REQUEST[sock], res)
    return res


def assert_alive(hg):
    for name in hglib.DAEMONS:
        assert hg.alive(name), "%s exited" % name
    r = hg.health()
    assert r.status == 200, r


@pytest.mark.parametrize("sock", list(SOCKETS))
def test_hello_answered(ipc, sock):
    """A valid hello is answered by the server's, and the connection
    serves the next request instead of closing."""
    client, server, _ = SOCKETS[sock]
    res = served(ipc, sock)
    hellos = [m for m in res["messages"] if m.get("type") == "hello"]
    assert hellos, res
    assert hellos[0].get("version") == 1, hellos
    assert hellos[0].get("role") == server, hellos
    assert_alive(ipc)


def cases(client, wrong):
    h = hglib.hello(client)
    return {
        "garbage": [("send", b"\x00\xffgarbage{{{")],
        "json_array": [("send", b"[1, 2, 3]")],
        "version_999": [("send", hglib.hello(client, 999))],
        "wrong_role": [("send", hglib.hello(wrong))],
        "oversized": [("big", 70000)],
        "hello_with_fd": [("send_fd", h)],
        "request_before_hello": [("send", b'{"type": "status", "id": 1}')],
        "garbage_after_hello": [("send", h), ("send", b"not json at all")],
        "oversized_after_hello": [("send", h), ("big", 70000)],
    }


CASES = list(cases("x", "y"))


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("sock", list(SOCKETS))
def test_bad_input_closes_connection(ipc, sock, case):
    client, _, wrong = SOCKETS[sock]
    steps = cases(client, wrong)[case]
    res = probe(ipc, sock, steps)
    assert res["connect"] == "ok", res
    assert res["send_error"] is None, res
    assert res["closed"], "%s on %s left the connection open: %r" % (
        case, sock, res)
    assert_alive(ipc)
    # And the socket still serves a well-behaved peer.
    served(ipc, sock)


@pytest.mark.parametrize("sock", list(SOCKETS))
def test_wrong_uid_closed_at_once(ipc, sock):
    who = refused(ipc, sock)
    if not who:
        pytest.skip("needs root to become another user")
    for ids in who:
        res = probe(ipc, sock, [], who=ids)
        # Closed though nothing was sent: only the check at accept closes
        # a silent connection (no daemon has a hello deadline).
        assert res["closed"], (ids, res)
        assert not res["messages"], (ids, res)
        # Even a valid hello gets nothing back.
        client = SOCKETS[sock][0]
        res = probe(ipc, sock, [("send", hglib.hello(client))], who=ids)
        assert res["closed"] and not res["messages"], (ids, res)
    assert_alive(ipc)


def test_socket_files_not_world_writable(ipc):
    for sock in SOCKETS:
        st = os.stat(os.path.join(ipc.run, sock))
        assert not st.st_mode & 0o002, "%s is world-writable" % sock
