"""Terminals over WebSocket: what a user sees (echo, resize, reattach,
close), who may attach, and hostile frames that must only ever cost the
sender its connection."""

import json
import re
import struct
import time

import pytest

import hglib
import policylib as pl
import sandboxlib as sl
from sandboxlib import OP_BINARY, OP_CLOSE, OP_CONT, OP_PING, OP_PONG, OP_TEXT

MiB = 1 << 20


# The configuration of `hg` (conftest.py): an instance of this module's
# own ("own": never shared with another module), so that its fork bombs
# and runaway writers stay away from the other modules' instances.
HOSTGATE = {"own": "terminal"}


@pytest.fixture(scope="module")
def bob(hg):
    return hg.login(*hglib.USER)


@pytest.fixture(scope="module")
def alice(hg):
    return hg.login(*hglib.ADMIN)


@pytest.fixture(scope="module")
def bob_term(bob):
    """One terminal of bob's for the tests that only attach to it."""
    t = sl.Terminal(bob)
    yield t
    t.close()


def round_trip(ws, word="hg"):
    """Type an echo whose output differs from its input; see the output."""
    ws.send_binary(b"echo %s-$((6*7))-ok\n" % word.encode())
    ws.read_until(rb"%s-42-ok" % re.escape(word.encode()))


# -- what a user sees ---------------------------------------------------------

def test_echo_round_trip(hg, bob):
    with sl.terminal(bob) as t:
        round_trip(t.ws)
        out, rc = t.run("echo $HOSTGATE_MODE; tty -s && echo is-a-tty")
        assert out.split() == ["sandbox", "is-a-tty"], out
        assert rc == 0


def test_terminal_listed_for_its_owner_only(hg, alice, bob):
    with sl.terminal(bob, attach=False) as t:
        entry = sl.terminal_listed(bob, t.id)
        assert entry is not None, "terminal %s not listed" % t.id
        assert entry["user"] == "bob" and entry["running"] is True, entry
        assert entry["mode"] == "sandbox" and entry["backend"] == "bwrap"
        assert sl.terminal_listed(alice, t.id) is None


def test_initial_size_and_resize(hg, bob):
    with sl.terminal(bob, cols=100, rows=30) as t:
        out, _ = t.run("stty size")
        assert out.split() == ["30", "100"], out
        t.ws.send_text(json.dumps({"type": "resize", "cols": 123,
                                   "rows": 45}))
        out, _ = t.run("stty size")
        assert out.split() == ["45", "123"], out
        # Nonsense control messages change nothing and cost nothing.
        for bad in ('{"type":"resize","cols":0,"rows":10}',
                    '{"type":"resize","cols":5000,"rows":10}',
                    '{"type":"resize","cols":"80","rows":"24"}',
                    '{"type":"nope"}', "[1,2]", "not json", "{" * 5000):
            t.ws.send_text(bad)
        out, _ = t.run("stty size")
        assert out.split() == ["45", "123"], out


def test_delete_kills_the_shell(hg, bob):
    t = sl.Terminal(bob)
    try:
        ws = t.attach()
        round_trip(ws)
        r = t.delete()
        assert r.status == 200, r
        how = ws.wait_closed(hglib.SLOW)
        assert how is not None, "the WebSocket stayed open after DELETE"

        def ended():
            e = sl.terminal_listed(bob, t.id)
            return e is None or e["running"] is False
        hglib.wait_for(ended, what="the terminal gone or not running")
        # Attaching to it again is refused.
        st, _, _, w2 = sl.ws_handshake(hg, sl.ws_path(t.id),
                                       cookie=bob.cookie)
        if w2:
            w2.close()
        assert st in (404, 409), st
    finally:
        if t.ws:
            t.ws.close()


def test_shell_exit_closes_with_1000(hg, bob):
    t = sl.Terminal(bob)
    try:
        ws = t.attach()
        ws.send_binary(b"exit\n")
        assert ws.wait_closed(hglib.SLOW) == "close 1000"

        def ended():
            e = sl.terminal_listed(bob, t.id)
            return e is None or e["running"] is False
        hglib.wait_for(ended, what="the terminal not running")
    finally:
        t.close()


def read_to_close(ws, timeout=hglib.SLOW):
    """Every frame until the server's close: (pty output with \\r\\n as
    \\n, the JSON text messages, close code, close reason). Output after
    a text message fails: the exit message comes after the last byte."""
    out, texts = b"", []
    deadline = time.monotonic() + timeout
    while True:
        f = ws.recv_frame(max(0.01, deadline - time.monotonic()))
        assert f is not None, "EOF without a close frame; got %r, %r" % (
            out[-300:], texts)
        _, op, payload = f
        if op == OP_PING:
            ws.send_frame(OP_PONG, payload)
        elif op == OP_BINARY:
            assert not texts, "output after the exit message: %r" % payload
            out += payload
        elif op == OP_TEXT:
            texts.append(json.loads(payload))
        elif op == OP_CLOSE:
            code = struct.unpack(">H", payload[:2])[0]
            return (out.replace(b"\r\n", b"\n"), texts, code,
                    payload[2:].decode())


def numbers(out):
    """The lines of output that are numbers alone, as ints (the shell's
    escape sequences, e.g. bracketed paste's, and carriage returns
    count as nothing)."""
    out = re.sub(rb"\x1b\[[0-9;?]*[A-Za-z]", b"", out).replace(b"\r", b"\n")
    return [int(n) for n in re.findall(rb"^(\d+)$", out, re.M)]


@pytest.mark.parametrize("n", [2000, 100000])
def test_exit_sends_every_byte_then_the_status(hg, bob, n):
    """The output written just before the shell exits all arrives, then
    one exit message with the status, then a close with it in words."""
    t = sl.Terminal(bob)
    try:
        ws = t.attach()
        ws.send_binary(b"seq 1 %d; exit 3\n" % n)
        out, texts, code, reason = read_to_close(ws)
        got = numbers(out)
        assert got == list(range(1, n + 1)), (
            "%d numbers, the last %r" % (len(got), got[-3:]))
        assert texts == [{"type": "exit", "reason": "exit", "exit_code": 3,
                          "signal": None, "signal_name": None,
                          "message": "exited with status 3"}], texts
        assert (code, reason) == (1000, "exited with status 3")
    finally:
        t.close()


def test_recorded_exit_sends_every_byte(hg):
    """A direct terminal is recorded (HOSTGATE_RECORD_TERMINALS=direct):
    its output passes through the recording relay, which must hand on
    all of it before it leaves."""
    admin = hg.login(*hglib.ADMIN)
    pl.grant(admin)
    try:
        t = sl.Terminal(admin)
        try:
            ws = t.attach()
            ws.send_binary(b"seq 1 100000; exit 3\n")
            out, texts, code, reason = read_to_close(ws)
            got = numbers(out)
            assert got == list(range(1, 100001)), (
                "%d numbers, the last %r" % (len(got), got[-3:]))
            assert [m["exit_code"] for m in texts] == [3], texts
            assert (code, reason) == (1000, "exited with status 3")
        finally:
            t.close()
    finally:
        pl.set_mode(admin, "sandbox")


def test_kill_by_signal_says_the_signal(hg):
    """A shell killed by a signal: the close says which. In direct mode,
    where the shell is sandboxd's own child (under bwrap, bwrap passes a
    signal on as status 128 + its number)."""
    admin = hg.login(*hglib.ADMIN)
    pl.grant(admin)
    try:
        t = sl.Terminal(admin)
        try:
            ws = t.attach()
            ws.send_binary(b"echo before-$((6*7)); kill -KILL $$\n")
            out, texts, code, reason = read_to_close(ws)
            assert b"before-42" in out, out[-300:]
            assert texts == [{"type": "exit", "reason": "exit",
                              "exit_code": None, "signal": 9,
                              "signal_name": "SIGKILL",
                              "message": "killed by signal SIGKILL"}], texts
            assert (code, reason) == (1000, "killed by signal SIGKILL")
        finally:
            t.close()
    finally:
        pl.set_mode(admin, "sandbox")


def test_kill_by_signal_in_the_sandbox(hg, bob):
    """Sandboxed, the shell's parent is bwrap, which passes a signal on as
    status 128 + its number: that is what the viewer is told."""
    t = sl.Terminal(bob)
    try:
        ws = t.attach()
        ws.send_binary(b"echo before-$((6*7)); kill -KILL $$\n")
        out, texts, code, reason = read_to_close(ws)
        assert b"before-42" in out, out[-300:]
        assert [(m["exit_code"], m["signal"]) for m in texts] == \
            [(128 + 9, None)], texts
        assert (code, reason) == (1000, "exited with status 137")
    finally:
        t.close()


def test_admin_kill_says_so(hg, alice, bob):
    """An admin's kill: the viewer is told who ended the shell."""
    t = sl.Terminal(bob)
    try:
        ws = t.attach()
        round_trip(ws)
        r = alice.request("DELETE", "/api/admin/terminals/" + t.id)
        assert r.status == 200, r
        _, texts, code, reason = read_to_close(ws)
        assert [m["reason"] for m in texts] == ["admin_kill"], texts
        assert (code, reason) == (1000, "killed by an admin")
    finally:
        t.close()


def test_reattach_reaches_the_same_shell(hg, bob):
    with sl.terminal(bob) as t:
        out, _ = t.run("hgv=abc$((1+1)); echo $$")
        pid = out.strip()
        assert pid.isdigit(), out
        # A page reload: the old WebSocket goes away, a new one comes.
        t.ws.send_close(1001)
        t.ws.close()
        t.attach()
        out, _ = t.run('echo "[$hgv] $$"')
        assert out.strip() == "[abc2] %s" % pid, out


def test_new_attach_replaces_the_old_viewer(hg, bob):
    with sl.terminal(bob) as t:
        old = t.ws
        t.attach()
        assert old.wait_closed(hglib.SLOW) is not None, \
            "two viewers on one terminal"
        old.close()
        round_trip(t.ws)


def test_terminals_per_user_limited(hg):
    s = hg.login(*hglib.ADMIN)
    made = []
    try:
        for t in s.get("/api/terminals").json()["terminals"]:
            s.request("DELETE", "/api/terminals/" + t["id"])
        for _ in range(8):
            r = s.post("/api/terminals", {"cols": 80, "rows": 24})
            assert r.status == 201, r
            made.append(r.json()["id"])
        r = s.post("/api/terminals", {"cols": 80, "rows": 24})
        assert r.status == 429, r
        assert r.error()["code"] == "rate_limited" and \
            r.header("Retry-After"), r
        # Closing one makes room again.
        assert s.request("DELETE", "/api/terminals/" + made.pop()).status \
            == 200

        def room():
            r = s.post("/api/terminals", {"cols": 80, "rows": 24})
            if r.status == 201:
                made.append(r.json()["id"])
                return True
            return False
        hglib.wait_for(room, interval=0.2, what="room for a terminal")
    finally:
        for tid in made:
            s.request("DELETE", "/api/terminals/" + tid)


def test_other_user_cannot_touch_a_terminal(hg, alice, bob, bob_term):
    r = alice.request("DELETE", "/api/terminals/" + bob_term.id)
    assert r.status == 404, r
    assert sl.terminal_listed(bob, bob_term.id)["running"] is True


def test_bearer_token_attaches(hg, bob, bob_term):
    r = bob.post("/api/session/tokens")
    assert r.status in (200, 201), r
    token = r.json()["token"]
    st, _, body, ws = sl.ws_handshake(hg, sl.ws_path(bob_term.id),
                                      bearer=token)
    assert st == 101, (st, body)
    try:
        round_trip(ws, "tok")
    finally:
        ws.close()


# -- refused handshakes -------------------------------------------------------

def _host(hg):
    return "127.0.0.1:%d" % hg.port


HANDSHAKES = [
    ("wrong-version", lambda hg, bob: {"version": "8"}, 400),
    ("no-version", lambda hg, bob: {"drop": ("Sec-WebSocket-Version",)}, 400),
    ("missing-key", lambda hg, bob: {"drop": ("Sec-WebSocket-Key",)}, 400),
    ("short-key", lambda hg, bob: {"key": "c2hvcnQ="}, 400),
    ("no-upgrade", lambda hg, bob: {"drop": ("Upgrade",)}, 400),
    ("cross-site-origin",
     lambda hg, bob: {"origin": "http://evil.example"}, 403),
    ("origin-other-port",
     lambda hg, bob: {"origin": "http://127.0.0.1:%d" % (hg.port + 1)}, 403),
    ("same-origin", lambda hg, bob: {"origin": "http://" + _host(hg)}, 101),
    ("no-credentials", lambda hg, bob: {"cookie": None}, 401),
    ("bad-cookie", lambda hg, bob: {"cookie": "x" * 43}, 401),
]


@pytest.mark.parametrize("case,kw,status", HANDSHAKES,
                         ids=[h[0] for h in HANDSHAKES])
def test_handshake(hg, bob, bob_term, case, kw, status):
    args = {"cookie": bob.cookie}
    args.update(kw(hg, bob))
    st, headers, body, ws = sl.ws_handshake(hg, sl.ws_path(bob_term.id),
                                            **args)
    if ws:
        ws.close()
    assert st == status, (case, st, body)
    if status != 101:
        assert json.loads(body)["error"]["code"], body
    if case == "wrong-version":
        assert headers.get("sec-websocket-version") == "13", headers


def test_handshake_other_users_terminal(hg, alice, bob_term):
    st, _, body, ws = sl.ws_handshake(hg, sl.ws_path(bob_term.id),
                                      cookie=alice.cookie)
    if ws:
        ws.close()
    assert st == 404, (st, body)


@pytest.mark.parametrize("tid", ["0123456789abcdef", "0123456789ABCDEF",
                                 "../../healthz", "0123"])
def test_handshake_unknown_terminal(hg, bob, tid):
    st, _, body, ws = sl.ws_handshake(hg, sl.ws_path(tid),
                                      cookie=bob.cookie)
    if ws:
        ws.close()
    assert st in (400, 404), (st, body)


# -- hostile frames -----------------------------------------------------------

def _send_big(ws, frames):
    """Send frames (bytes); the server may hang up halfway, which is fine."""
    try:
        for f in frames:
            ws.send_raw(f)
    except OSError:
        pass


def hostile_unmasked(ws):
    ws.send_raw(ws.frame(OP_BINARY, b"echo unmasked-$((1+1))\n", mask=False))


def hostile_huge_length(ws):
    ws.send_raw(ws.frame(OP_BINARY, b"", length=1 << 62))


def hostile_huge_length_some_payload(ws):
    ws.send_raw(ws.frame(OP_BINARY, b"", length=1 << 62) + b"x" * 100)


def hostile_2mib_message(ws):
    _send_big(ws, [ws.frame(OP_BINARY, b"#" * (2 * MiB))])


def hostile_2mib_fragmented(ws):
    part = b"#" * (512 * 1024)
    _send_big(ws, [ws.frame(OP_BINARY, part, fin=False)] +
              [ws.frame(OP_CONT, part, fin=False) for _ in range(2)] +
              [ws.frame(OP_CONT, part, fin=True)])


def hostile_opcode_3(ws):
    ws.send_raw(ws.frame(0x3, b"x"))


def hostile_opcode_b(ws):
    ws.send_raw(ws.frame(0xB, b"x"))


def hostile_fragmented_ping(ws):
    ws.send_raw(ws.frame(OP_PING, b"hi", fin=False))


def hostile_long_ping(ws):
    ws.send_raw(ws.frame(OP_PING, b"p" * 200))


def hostile_close_bad_utf8(ws):
    ws.send_raw(ws.frame(OP_CLOSE, struct.pack(">H", 1000) + b"\xff\xfe\xfd"))


def hostile_rsv_bits(ws):
    ws.send_raw(ws.frame(OP_BINARY, b"x", rsv=4))


def hostile_continuation_first(ws):
    ws.send_raw(ws.frame(OP_CONT, b"x"))


def hostile_garbage_http(ws):
    ws.send_raw(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")


def hostile_garbage_ff(ws):
    ws.send_raw(b"\xff" * 64)


def hostile_text_bad_utf8(ws):
    ws.send_raw(ws.frame(OP_TEXT, b'{"type":"resize\xff\xfe"}'))


# Known daemon bugs: each reason names what frontd does wrong (none now).
HOSTILE_XFAIL = {}

HOSTILE = [pytest.param(f, id=n[8:], marks=[pytest.mark.xfail(
               strict=True, reason=HOSTILE_XFAIL[n])] if n in HOSTILE_XFAIL
               else [])
           for n, f in sorted(globals().items()) if n.startswith("hostile_")]


@pytest.mark.parametrize("attack", HOSTILE)
def test_hostile_frames(hg, bob, bob_term, attack):
    ws = bob_term.attach(ready=False)
    try:
        attack(ws)
        how = ws.wait_closed(hglib.SLOW)
        assert how is not None, "%s: connection still open" \
            % attack.__name__
        if how.startswith("close "):
            assert int(how.split()[1]) in (1000, 1002, 1007, 1009), how
    finally:
        ws.close()
    assert hg.health().status == 200
    assert hg.alive("frontd")
    # The terminal is still there and still works.
    ws = bob_term.attach()
    round_trip(ws, "after")
    # Nothing of the attack reached the shell's input.
    out, _ = bob_term.run("fc -ln 1 | grep -c -e 'echo unmask[e]d' "
                          "-e '[#]\\{100\\}'")
    assert out.strip() == "0", out


def test_valid_frames_keep_the_connection(hg, bob, bob_term):
    """Control for the hostile frames: well-formed frames, fragmented data
    and pings between fragments, are served and the connection stays."""
    ws = bob_term.attach()
    try:
        ws.send_frame(OP_PING, b"abc")
        while True:
            f = ws.recv_frame()
            assert f is not None, "EOF instead of a pong"
            if f[1] == 0xA:
                assert f[2] == b"abc", f
                break
        ws.send_frame(OP_BINARY, b"echo frag", fin=False)
        ws.send_frame(OP_PING, b"mid")
        ws.send_frame(OP_CONT, b"-$((2*3))-ok\n", fin=True)
        ws.read_until(rb"frag-6-ok")
        assert ws.wait_closed(0.5) is None
    finally:
        ws.close()
