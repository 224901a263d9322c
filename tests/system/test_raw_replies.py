"""Raw-body replies (PM_RAW in the protocol table, docs/protocol.md's
Framing): brokerd sends the result of frontd's hot GET requests as an
envelope, a NUL and the result's JSON text, which frontd writes to the
client unparsed. The bodies still hold what docs/api.md documents; a
hostile brokerd's malformed raw replies get a clear error from frontd,
which lives on.

Mode-independent (MODE_INDEPENDENT): run in one mode only, root as root,
because frontd's handling of raw replies is the same whoever runs it;
which uid the hostile brokerd stand-in takes is plumbing, and privilege
separation is test_privsep's."""

import json
import os
import re
import shutil
import socket
import tempfile
import threading

import pytest

import hglib
import policylib as pl

MODE_INDEPENDENT = True

STATUS_KEYS = {"user", "role", "auth", "runtime", "backend",
               "execution_mode", "permission", "uid", "limits", "egress",
               "usage", "usage_age_ms", "usage_reason", "containment",
               "host"}


BIG = bytes(range(256)) * 1200     # a 300 KiB static file


@pytest.fixture(scope="module")
def hg(mode):
    web = tempfile.mkdtemp(prefix="hg-rawweb-")
    os.chmod(web, 0o755)
    for name, data in (("index.html", b"<!doctype html>"), ("big.js", BIG)):
        with open(os.path.join(web, name), "wb") as f:
            f.write(data)
        os.chmod(os.path.join(web, name), 0o644)
    try:
        with pl.module_hostgate(mode, "raw", HOSTGATE_WEB_DIR=web) as h:
            yield h
    finally:
        shutil.rmtree(web)


def test_status_printed_alike_both_ways(hg):
    """brokerd prints a status whose usage it keeps by hand (straight into
    one buffer), else as a json-c tree once sandboxd has answered: the two
    have the same members in the same order, the same values but for the
    usage figures, and the same bytes but for those."""
    s = hg.login(*pl.ADMIN)
    first = s.get("/api/status")       # usage not kept yet: waits for it
    assert first.status == 200, first
    again = s.get("/api/status")       # kept for a second: printed by hand
    assert again.status == 200, again
    a = json.loads(first.body, object_pairs_hook=list)
    b = json.loads(again.body, object_pairs_hook=list)
    assert [k for k, _ in a] == [k for k, _ in b], (a, b)
    assert set(k for k, _ in a) == STATUS_KEYS, a
    da, db = dict(a), dict(b)
    for k in STATUS_KEYS - {"usage", "usage_age_ms", "execution_mode"}:
        assert da[k] == db[k], k
    assert set(dict(db["usage"])) == set(dict(da["usage"])), (da, db)

    def cut(body):
        """The body without the usage and its age (they may change)."""
        head, _, rest = body.partition(b',"usage":')
        _, _, tail = rest.partition(b',"usage_reason":')
        return head + tail

    assert cut(first.body) == cut(again.body)


def test_hot_get_bodies_as_documented(hg):
    """GET /api/status and the other raw GETs answer a JSON object with
    docs/api.md's members, its Content-Length the body's; a token's status
    says so; an error (no credentials) is still a plain JSON error."""
    s = hg.login(*pl.USER)
    r = s.get("/api/status")
    assert r.status == 200, r
    assert r.header("Content-Type").startswith("application/json"), r
    assert int(r.header("Content-Length")) == len(r.body)
    doc = json.loads(r.body)
    assert set(doc) == STATUS_KEYS, doc
    assert doc["user"] == pl.USER[0] and doc["auth"] == "session", doc
    assert set(doc["backend"]) >= {"name", "ok", "reason"}, doc
    assert set(doc["execution_mode"]) >= pl.MODE_KEYS, doc
    for path, keys in (("/api/execution-mode", pl.MODE_KEYS),
                       ("/api/permission", {"permission"}),
                       ("/api/terminals", {"terminals"})):
        r = s.get(path)
        assert r.status == 200, (path, r)
        assert int(r.header("Content-Length")) == len(r.body)
        assert set(json.loads(r.body)) >= keys, (path, r)
    tok = s.post("/api/session/tokens", {})
    assert tok.status == 201, tok
    r = hg.get("/api/status", bearer=tok.json()["token"])
    assert r.status == 200 and r.json()["auth"] == "token", r
    r = hg.get("/api/status")
    assert r.status == 401, r
    assert r.json()["error"]["code"] == "unauthorized", r


class FakeBroker:
    """A brokerd on broker-front.sock that answers frontd's "status"
    requests with the datagrams it is given, one per request, and every
    other request with an empty result."""

    def __init__(self, hg, path):
        # The directory and the listener as brokerd would make them: a
        # rootless frontd, jailed in a user namespace where root has no
        # uid, takes only a listener of its own uid.
        owner = hglib.TEST_USER if hg.mode == "user" else \
            hglib.SERVICE_USERS["brokerd"]
        uid, gid = hglib.account(owner)
        front_gid = gid if hg.mode == "user" else \
            hglib.account(hglib.SERVICE_USERS["frontd"])[1]
        d = os.path.dirname(path)
        os.makedirs(d, exist_ok=True)
        os.chown(d, uid, front_gid)
        os.chmod(d, 0o700 if hg.mode == "user" else 0o711)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        if hg.mode == "user":
            os.setegid(gid)
            os.seteuid(uid)
        try:
            self.sock.bind(path)
            os.chmod(path, 0o666)
            self.sock.listen(4)
        finally:
            os.seteuid(0)
            os.setegid(0)
        self.replies = []
        self.default = b'{"id":ID,"body":2}\0{}'
        self.lock = threading.Lock()
        self.connections = 0
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            with self.lock:
                self.connections += 1
            c.send(hglib.hello("brokerd"))
            threading.Thread(target=self.talk, args=(c,),
                             daemon=True).start()

    def talk(self, c):
        while True:
            try:
                data = c.recv(70000)
            except OSError:
                return
            if not data:
                c.close()
                return
            m = json.loads(data)
            if "id" not in m or m.get("type") == "hello":
                continue
            if m.get("type") == "status":
                with self.lock:
                    dgram = self.replies.pop(0) if self.replies else \
                        self.default
                c.send(dgram.replace(b"ID", str(m["id"]).encode()))
            else:
                c.send(json.dumps({"id": m["id"], "result": {}}).encode())

    def close(self):
        # Wake the accept first and wait for its thread: closed under a
        # thread still polling it, the descriptor's number could go to the
        # next test's listener and this thread take its connections.
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.thread.join(hglib.SLOW)
        assert not self.thread.is_alive(), "the fake brokerd's accept hangs"
        self.sock.close()


@pytest.fixture
def lone_front(mode):
    """frontd alone, its brokerd played by the test."""
    hg = hglib.Hostgate(mode, name="rawfront")
    fake = FakeBroker(hg, os.path.join(hg.run, hglib.SOCK_FRONT))
    try:
        hg.start("frontd")
        hglib.wait_for(lambda: fake.connections > 0,
                       what="frontd's link to the fake brokerd")
        yield hg, fake
    finally:
        fake.close()
        hg.cleanup()


def test_hostile_raw_replies(lone_front):
    """A good raw reply is sent byte for byte; a wrong length, a body that
    is no object or holds a NUL, an envelope with more in it or without
    its length, a bad user name: 500 "invalid reply from a daemon", logged;
    a raw body on a request: frontd drops the link (503) and connects
    again. frontd lives through all of them."""
    hg, fake = lone_front
    body = b'{"user":"bob","note":"as brokerd wrote it"}'
    good = b'{"id":ID,"body":%d,"user":"bob"}\0' % len(body) + body
    bad = [
        b'{"id":ID,"body":%d}\0' % (len(body) + 1) + body,
        b'{"id":ID,"body":%d}\0' % (len(body) - 1) + body,
        b'{"id":ID,"body":4}\0[12]',
        b'{"id":ID,"body":5}\0{"\0"}',
        b'{"id":ID,"body":2,"result":{}}\0{}',
        b'{"id":ID}\0{}',
        b'{"id":ID,"body":2,"user":"Not A User"}\0{}',
        b'{"id":ID,"body":99999}\0{}',
    ]
    fake.replies = [good] + bad + [good]
    r = hg.get("/api/status", cookie="0" * 64)
    assert r.status == 200, r
    assert r.body == body, r
    assert r.header("Content-Type").startswith("application/json"), r
    for dgram in bad:
        r = hg.get("/api/status", cookie="0" * 64)
        assert r.status == 500, (dgram, r)
        assert r.json()["error"]["code"] == "internal", (dgram, r)
        assert "invalid reply" in r.json()["error"]["message"], (dgram, r)
        assert hg.alive("frontd")
    assert fake.connections == 1
    r = hg.get("/api/status", cookie="0" * 64)
    assert r.status == 200 and r.body == body, r
    log = hg.log_text("frontd")
    assert log.count('invalid reply from brokerd to "status"') == len(bad)
    for why in ("raw body of", "not a JSON object", "holds a NUL",
                "envelope holds only", "\"body\""):
        assert why in log, why

    # A NUL in a message that is no reply: the link is dropped.
    fake.replies = [b'{"type":"front_info","id":ID}\0{}']
    r = hg.get("/api/status", cookie="0" * 64)
    assert r.status == 503, r
    assert "a raw body on a message that is not a reply" in \
        hg.log_text("frontd")
    hglib.wait_for(lambda: fake.connections == 2,
                   what="frontd connecting again")
    fake.default = good
    hglib.wait_for(lambda: hg.get("/api/status", cookie="0" * 64).body
                   == body, what="status through the new link")
    assert hg.alive("frontd")


def read_reply(sock, buf):
    """One HTTP reply (with a Content-Length) from sock: (head, body, the
    bytes after it)."""
    while b"\r\n\r\n" not in buf:
        d = sock.recv(65536)
        assert d, "closed before a reply head"
        buf += d
    head, _, rest = buf.partition(b"\r\n\r\n")
    n = int(re.search(rb"(?i)\r\ncontent-length: *(\d+)", head).group(1))
    while len(rest) < n:
        d = sock.recv(65536)
        assert d, "closed inside a reply body"
        rest += d
    return head, rest[:n], rest[n:]


def test_large_reply_then_pipelined_one(hg):
    """frontd writes a keep-alive reply straight to the socket and leaves
    what the socket does not take to its output buffer: a 300 KiB static
    file to a client with a small receive buffer arrives whole, and
    the reply to the request pipelined behind it comes after it, whole."""
    script = b"/big.js"
    whole = hg.get("/big.js")
    assert whole.status == 200 and whole.body == BIG, whole
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.settimeout(hglib.SLOW)
    try:
        s.connect(("127.0.0.1", hg.port))
        s.sendall(b"GET " + script + b" HTTP/1.1\r\nHost: x\r\n\r\n"
                  b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        head, body, rest = read_reply(s, b"")
        assert head.startswith(b"HTTP/1.1 200"), head
        assert body == BIG
        head, body, rest = read_reply(s, rest)
        assert head.startswith(b"HTTP/1.1 200"), head
        assert isinstance(json.loads(body), dict), body
        assert rest == b""
    finally:
        s.close()


def raw_http(hg, head):
    """Send one request head as bytes on a fresh connection; the reply's
    status line and body."""
    s = socket.create_connection(("127.0.0.1", hg.port), timeout=hglib.SLOW)
    try:
        s.sendall(head)
        h, body, _ = read_reply(s, b"")
        return h.split(b"\r\n", 1)[0], body
    finally:
        s.close()


def test_body_less_requests_escape_what_they_forward(hg):
    """frontd prints the requests without a body itself: a bearer token,
    cookie and CSRF token full of quotes, backslashes and JSON reach
    brokerd as the strings they are (a clear 401, no malformed message:
    the link stays up); 15 KiB of quotes (twice as long escaped) reach it
    whole, refused by the table as longer than 512 bytes (400 naming the
    field); control bytes are refused by frontd before (400)."""
    nasty = '"\\},"auth":{"bearer":"x\\u0000\\t\\"'
    r = hg.get("/api/status", bearer=nasty)
    assert r.status == 401, r
    r = hg.get("/api/status", cookie=nasty, headers={"X-CSRF-Token": nasty})
    assert r.status == 401, r
    s = hg.login(*pl.USER)
    r = s.get("/api/status", headers={"X-CSRF-Token": nasty})
    assert r.status == 200 and r.json()["user"] == pl.USER[0], r
    status, body = raw_http(hg, b"GET /api/status HTTP/1.1\r\nHost: x\r\n"
                            b"Authorization: Bearer " + b'"' * 15000 +
                            b"\r\n\r\n")
    assert status.split()[1] == b"400", (status, body)
    assert "bearer" in json.loads(body)["error"]["message"], body
    status, body = raw_http(hg, b"GET /api/status HTTP/1.1\r\nHost: x\r\n"
                            b"Authorization: Bearer \x01\r\n\r\n")
    assert status.split()[1] == b"400", (status, body)
    for d in ("brokerd", "frontd"):
        log = hg.log_text(d)
        assert "malformed message" not in log and "dropping" not in log, d
    assert hg.alive("brokerd") and hg.alive("frontd")
    assert s.get("/api/status").status == 200
