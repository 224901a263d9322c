"""frontd under abuse: a flood of connections from one address, connection
limits (shedding the oldest idle connection, else 503 with Retry-After),
the request head timeout, bare LF/CR in a head, half-closed requests, the
WebSocket Origin check, and a client that floods a terminal that does not
read. Another client must be served throughout.

Mode-independent (MODE_INDEPENDENT): run in one mode only, root as root,
because frontd's connection limits, timeouts and head parsing do not
depend on who runs the daemons."""

import contextlib
import os
import resource
import select
import socket
import ssl
import threading

import pytest

import hglib
import sandboxlib as sl
from sandboxlib import OP_BINARY

MODE_INDEPENDENT = True

MiB = 1 << 20


@pytest.fixture(scope="module")
def hg(mode):
    """This module's own hostgate, at the default connection limits."""
    with hglib.running(mode, "abuse", env={
            "HOSTGATE_MAX_CONNECTIONS_PER_ADDRESS": None}) as h:
        yield h


@pytest.fixture(scope="module")
def bob(hg):
    return hg.login(*hglib.USER)


@pytest.fixture(scope="module", autouse=True)
def _many_files():
    """Room for a flood's sockets in this process."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = hard if hard == resource.RLIM_INFINITY else min(hard, 65536)
    assert want == resource.RLIM_INFINITY or want >= 4096, \
        "RLIMIT_NOFILE hard limit %d is too low for the flood" % hard
    resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    yield
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def connect(hg, source="127.0.0.1", timeout=hglib.SLOW):
    """A plain TCP connection to frontd from source."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.bind((source, 0))
    s.connect(("127.0.0.1", hg.port))
    return s


def read_all(s, timeout=hglib.SLOW):
    """Everything s receives until the server closes (or resets)."""
    s.settimeout(timeout)
    out = b""
    while True:
        try:
            chunk = s.recv(65536)
        except (ConnectionResetError, ssl.SSLError):
            break
        if not chunk:
            break
        out += chunk
    return out


def closed_by_server(s):
    """Whether the server has closed s (it reads as end of stream)."""
    p = select.poll()		# select() stops at descriptor 1024
    p.register(s, select.POLLIN)
    if not p.poll(0):
        return False
    try:
        return s.recv(65536, socket.MSG_PEEK) == b""
    except ConnectionResetError:
        return True


def busy(hg, source):
    """A connection in the middle of a request: its head has been read
    (frontd says 100 Continue) and its body has not come."""
    s = connect(hg, source)
    s.sendall(b"POST /api/login HTTP/1.1\r\nHost: x\r\n"
              b"Content-Type: application/json\r\nContent-Length: 100\r\n"
              b"Expect: 100-continue\r\n\r\n")
    got = b""
    while b"\r\n\r\n" not in got:
        chunk = s.recv(4096)
        assert chunk, "closed instead of 100 Continue: %r" % got
        got += chunk
    assert got.startswith(b"HTTP/1.1 100 Continue\r\n"), got
    return s


def assert_503(data):
    status, headers, body = hglib.parse_raw(data)
    assert status == 503, data[:300]
    assert headers.get("retry-after") == "5", headers
    assert headers.get("connection") == "close", headers
    assert b"too many connections" in body, body


def assert_others_served(hg):
    """Another client, from 127.0.0.1: login, a command, /healthz."""
    s = hg.login(*hglib.ADMIN)
    r = s.post("/api/run_command", {"command": "echo served-$((6*7))"})
    assert r.status == 200, r
    assert r.json()["stdout"] == "served-42\n", r.json()
    assert hg.health().status == 200


def warnings_for(hg, text):
    return [line for line in hg.log_text("frontd").splitlines()
            if "WARN" in line and text in line]


# -- a flood from one address -------------------------------------------------

def test_idle_flood_from_one_address_spares_others(hg):
    """1,500 idle connections from 127.0.0.2: past its 64, each new one
    sheds that address's oldest; 127.0.0.1 is served meanwhile."""
    flood = []
    try:
        for _ in range(1500):
            flood.append(connect(hg, "127.0.0.2"))
        # frontd has taken them all in once it has shed all but 64.
        hglib.wait_for(lambda: sum(map(closed_by_server, flood)) >= 1436,
                       what="1436 idle connections shed")
        assert_others_served(hg)
        assert sum(map(closed_by_server, flood)) == 1436
    finally:
        for s in flood:
            s.close()
    warned = warnings_for(hg, "client 127.0.0.2 has 64 connections")
    assert len(warned) == 1, warned


def test_busy_flood_from_one_address_gets_503(hg):
    """64 connections from 127.0.0.3 in the middle of a request cannot be
    shed: the next ones from there are answered 503 with Retry-After, never
    closed silently; 127.0.0.1 is served meanwhile."""
    held = []
    try:
        for _ in range(64):
            held.append(busy(hg, "127.0.0.3"))
        for _ in range(200):
            s = connect(hg, "127.0.0.3")
            try:
                assert_503(read_all(s))
            finally:
                s.close()
        assert_others_served(hg)
        assert not any(map(closed_by_server, held))
    finally:
        for s in held:
            s.close()
    warned = warnings_for(hg, "client 127.0.0.3 has 64 connections")
    assert len(warned) == 1, warned
    assert "refusing with 503" in warned[0], warned


def test_global_limit(hostgate_factory):
    """At HOSTGATE_MAX_CONNECTIONS, a connection from anywhere sheds the
    oldest idle one; with none idle it is answered 503."""
    hg = hostgate_factory(env={"HOSTGATE_MAX_CONNECTIONS": "16",
                               "HOSTGATE_MAX_CONNECTIONS_PER_ADDRESS": "16"})
    assert "connections: at most 16, 16 per client address" in \
        hg.log_text("frontd")
    idle = [connect(hg, "127.0.0.4") for _ in range(16)]
    try:
        # 127.0.0.1's request takes the place of 127.0.0.4's oldest.
        assert hg.health().status == 200
        assert closed_by_server(idle[0])
        assert not any(map(closed_by_server, idle[1:]))
    finally:
        for s in idle:
            s.close()
    assert len(warnings_for(hg, "16 connections open, the limit")) == 1
    # Once they are closed, the episode ends with its summary.
    hglib.wait_for(lambda: "back under 16 connections (1 idle shed, 0 "
                   "refused with 503)" in hg.log_text("frontd"),
                   what="the end of the episode")
    held = [busy(hg, "127.0.0.5") for _ in range(16)]
    try:
        assert_503(hg.raw(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"))
    finally:
        for s in held:
            s.close()
    hg.wait_healthy()
    assert len(warnings_for(hg, "16 connections open, the limit")) == 2


def test_limit_kept_below_descriptors(hostgate_factory):
    """frontd raises its soft descriptor limit to the hard one and keeps
    the connection limit below it, less a reserve: a flood from many
    addresses is shed before accept() can run out of descriptors."""
    hg = hostgate_factory(start=False, env={
        "HOSTGATE_MAX_CONNECTIONS_PER_ADDRESS": "64"})
    for name in hglib.DAEMONS:
        hg.start(name, prefix=["prlimit", "--nofile=300:512", "--"]
                 if name == "frontd" else ())
    hg.wait_healthy()
    log = hg.log_text("frontd")
    assert "connections: at most 256, 64 per client address, 10 s for a " \
        "request head (descriptor limit 512)" in log, log
    assert "HOSTGATE_MAX_CONNECTIONS=1024 is above the descriptor limit " \
        "512 less 256: using 256" in log, log
    flood = []
    try:
        for i in range(400):
            flood.append(connect(hg, "127.0.1.%d" % (i // 8 + 1)))
        hglib.wait_for(lambda: sum(map(closed_by_server, flood)) >= 144,
                       what="144 idle connections shed")
        assert hg.health().status == 200
    finally:
        for s in flood:
            s.close()
    assert "Too many open files" not in hg.log_text("frontd")


# -- the request head timeout -------------------------------------------------

def test_head_timeout_408(hostgate_factory):
    hg = hostgate_factory(env={"HOSTGATE_HEADER_TIMEOUT_SECONDS": "1"},
                          users=False)
    # A head that never completes.
    s = connect(hg)
    s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
    out = read_all(s)
    s.close()
    status, headers, body = hglib.parse_raw(out)
    assert status == 408, out
    assert headers.get("connection") == "close", headers
    assert b"no complete request head within 1 s" in body, body
    # Nothing at all.
    s = connect(hg)
    out = read_all(s)
    s.close()
    assert hglib.parse_raw(out)[0] == 408, out
    # The next request of a keep-alive connection has its own limit.
    s = connect(hg)
    s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    first = b""
    while not hglib._complete(first) or b"\r\n\r\n" not in first:
        chunk = s.recv(65536)
        assert chunk, first
        first += chunk
    assert hglib.parse_raw(first)[0] in (200, 503), first
    s.sendall(b"GET /healthz HTTP/1.1\r\n")
    out = read_all(s)
    s.close()
    assert hglib.parse_raw(out)[0] == 408, out
    assert hg.health().status == 200


# -- strict heads -------------------------------------------------------------

@pytest.mark.parametrize("sep", [b"\n", b"\r"], ids=["bare-LF", "bare-CR"])
def test_bare_line_end_in_head_400(hg, sep):
    """Honoured, the bare line end would make the second request the
    first one's body (request smuggling)."""
    smuggled = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
    data = (b"POST /api/login HTTP/1.1\r\nHost: x\r\nX-A: a" + sep +
            b"Content-Length: %d\r\n\r\n" % len(smuggled) + smuggled)
    out = hg.raw(data)
    status, headers, body = hglib.parse_raw(out)
    assert status == 400, out
    assert b"bare" in body, body
    assert headers.get("connection") == "close", headers
    assert out.count(b"HTTP/1.1 ") == 1, out
    assert hg.health().status == 200


# -- half-closed requests -----------------------------------------------------

def half_closed(hg, bob):
    """A request sent, then the write side shut: its answer."""
    s = connect(hg)
    s.sendall(b"GET /api/status HTTP/1.1\r\nHost: x\r\n"
              b"Cookie: hg_session=%s\r\n\r\n" % bob.cookie.encode())
    s.shutdown(socket.SHUT_WR)
    out = read_all(s)
    s.close()
    return out


def test_half_closed_requests_answered_idle(hg, bob):
    answered = [half_closed(hg, bob) for _ in range(100)]
    lost = [a for a in answered if not a.startswith(b"HTTP/1.1 200 ")]
    assert not lost, "%d of 100 not answered: %r" % (len(lost), lost[:3])


def test_half_closed_requests_answered_under_load(hg, bob):
    stop = threading.Event()
    errors = []

    def load():
        while not stop.is_set():
            try:
                r = hg.get("/api/status", cookie=bob.cookie)
                if r.status != 200:
                    errors.append(r)
            except OSError as e:
                errors.append(e)

    threads = [threading.Thread(target=load) for _ in range(6)]
    for t in threads:
        t.start()
    try:
        answered = [half_closed(hg, bob) for _ in range(100)]
    finally:
        stop.set()
        for t in threads:
            t.join()
    lost = [a for a in answered if not a.startswith(b"HTTP/1.1 200 ")]
    assert not lost, "%d of 100 not answered: %r" % (len(lost), lost[:3])
    assert not errors, errors[:3]


def test_half_closed_requests_answered_tls(hostgate_factory):
    """Under TLS too: the client's FIN comes without close_notify."""
    hg = hostgate_factory(tls=True)
    bob = hg.login(*hglib.USER)
    lost = []
    for _ in range(20):
        s = hglib.insecure_client_context().wrap_socket(connect(hg))
        s.sendall(b"GET /api/status HTTP/1.1\r\nHost: x\r\n"
                  b"Cookie: hg_session=%s\r\n\r\n" % bob.cookie.encode())
        # The TCP socket's shutdown, under the TLS layer.
        with socket.socket(fileno=os.dup(s.fileno())) as raw:
            raw.shutdown(socket.SHUT_WR)
        out = read_all(s)
        s.close()
        if not out.startswith(b"HTTP/1.1 200 "):
            lost.append(out)
    assert not lost, "%d of 20 not answered: %r" % (len(lost), lost[:3])


# -- the WebSocket Origin check -----------------------------------------------

def upgrade(hg, session, term_id, origin, host=None):
    """The status of a WebSocket upgrade with this Origin (None: none)."""
    host = host or "127.0.0.1:%d" % hg.port
    lines = [b"GET %s HTTP/1.1" % sl.ws_path(term_id).encode(),
             b"Host: " + host.encode(), b"Upgrade: websocket",
             b"Connection: Upgrade", b"Sec-WebSocket-Version: 13",
             b"Sec-WebSocket-Key: %s" % sl.ws_key().encode(),
             b"Cookie: hg_session=%s" % session.cookie.encode()]
    if origin is not None:
        lines.append(b"Origin: " + origin.encode())
    out = hg.raw(b"\r\n".join(lines) + b"\r\n\r\n")
    return hglib.parse_raw(out)[0]


ORIGINS = [
    ("same", "http://127.0.0.1:{port}", 101),
    ("localhost", "http://localhost:{port}", 101),
    ("upper-case-host", "http://LOCALHOST:{port}", 101),
    ("none", None, 101),
    ("https-scheme", "https://127.0.0.1:{port}", 403),
    ("evil-scheme", "evil://127.0.0.1:{port}", 403),
    ("no-scheme", "127.0.0.1:{port}", 403),
    ("default-port", "http://127.0.0.1", 403),
    ("other-port", "http://127.0.0.1:{other}", 403),
    ("other-host", "http://127.0.0.2:{port}", 403),
    ("with-path", "http://127.0.0.1:{port}/", 403),
    ("null", "null", 403),
]


@pytest.fixture(scope="module")
def bob_term(bob):
    t = sl.Terminal(bob)
    yield t
    t.close()


@pytest.mark.parametrize("case,origin,status", ORIGINS,
                         ids=[o[0] for o in ORIGINS])
def test_ws_origin(hg, bob, bob_term, case, origin, status):
    if origin is not None:
        origin = origin.format(port=hg.port, other=hg.port + 1)
    assert upgrade(hg, bob, bob_term.id, origin) == status, (case, origin)


def test_ws_allowed_origins(hostgate_factory):
    hg = hostgate_factory(env={"HOSTGATE_ALLOWED_ORIGINS":
                               "https://hg.example.org,http://[::1]:8443"})
    bob = hg.login(*hglib.USER)
    t = sl.Terminal(bob)
    try:
        for origin, status in [("https://hg.example.org", 101),
                               ("https://HG.example.org:443", 101),
                               ("http://[::1]:8443", 101),
                               ("http://hg.example.org", 403),
                               ("https://hg.example.org:444", 403),
                               ("https://evil.example.org", 403),
                               ("http://127.0.0.1:%d" % hg.port, 101)]:
            assert upgrade(hg, bob, t.id, origin) == status, origin
    finally:
        t.close()


def test_ws_public_url(hostgate_factory):
    """HOSTGATE_PUBLIC_URL (a balancer's address): its origin may open a
    terminal and use /mcp, as frontd's own may; every other is refused as
    before; and the MCP URLs handed to clients name it, whatever the Host
    or a proxy's (here untrusted) forwarded headers say."""
    hg = hostgate_factory(env={"HOSTGATE_PUBLIC_URL":
                               "https://hg.example.org:8443/"})
    bob = hg.login(*hglib.USER)
    t = sl.Terminal(bob)
    try:
        for origin, status in [("https://hg.example.org:8443", 101),
                               ("http://127.0.0.1:%d" % hg.port, 101),
                               ("https://hg.example.org", 403),
                               ("http://hg.example.org:8443", 403),
                               ("https://evil.example.org:8443", 403)]:
            assert upgrade(hg, bob, t.id, origin) == status, origin
    finally:
        t.close()
    r = hg.post("/mcp", {}, headers={"Origin": "https://hg.example.org:8443"})
    assert r.status == 401, r
    assert r.header("WWW-Authenticate") == (
        'Bearer resource_metadata="https://hg.example.org:8443/.well-known/'
        'oauth-protected-resource/mcp"'), r.headers
    assert hg.post("/mcp", {}, headers={"Origin": "https://evil.example"}
                   ).status == 403
    r = hg.get("/.well-known/oauth-protected-resource/mcp",
               headers={"X-Forwarded-Host": "evil.example"})
    assert r.json()["resource"] == "https://hg.example.org:8443/mcp", r


@pytest.mark.parametrize("value,why", [
    ("https://hg.example.org/hostgate", "has a path"),
    ("hg.example.org", "not an http:// or https:// URL"),
    ("https://u@hg.example.org", "has user information")])
def test_public_url_validated(hostgate_factory, value, why):
    hg = hostgate_factory(start=False)
    hg.env["HOSTGATE_PUBLIC_URL"] = value
    p = hg.start("frontd")
    assert p.wait(timeout=hglib.SLOW) != 0
    assert "HOSTGATE_PUBLIC_URL=%s: %s" % (value, why) in \
        hg.log_text("frontd"), hg.log_text("frontd")


def test_ws_origin_wildcard_listen(hostgate_factory):
    """Listening on 0.0.0.0, the own origin is the Host asked for, on the
    listen port, with frontd's scheme."""
    hg = hostgate_factory(env={"HOSTGATE_LISTEN": "0.0.0.0:0",
                               "HOSTGATE_INSECURE_HTTP": "1"})
    bob = hg.login(*hglib.USER)
    t = sl.Terminal(bob)
    here = "127.0.0.1:%d" % hg.port
    named = "hg.example.org:%d" % hg.port
    try:
        for origin, host, status in [
                ("http://" + here, here, 101),
                ("http://" + named, named, 101),
                ("http://" + named, here, 403),
                ("https://" + here, here, 403),
                ("http://hg.example.org:1", "hg.example.org:1", 403),
                ("http://localhost:%d" % hg.port, here, 403)]:
            assert upgrade(hg, bob, t.id, origin, host) == status, \
                (origin, host)
    finally:
        t.close()


def test_ws_origin_under_tls(hostgate_factory):
    """Under TLS the own origin is https://."""
    hg = hostgate_factory(tls=True)
    bob = hg.login(*hglib.USER)
    t = sl.Terminal(bob)
    try:
        assert upgrade(hg, bob, t.id, "https://127.0.0.1:%d" % hg.port) == 101
        assert upgrade(hg, bob, t.id, "http://127.0.0.1:%d" % hg.port) == 403
    finally:
        t.close()


@pytest.mark.parametrize("value", ["hg.example.org", "ftp://hg.example.org",
                                   "https://hg.example.org/",
                                   "https://hg.example.org:0",
                                   "https://hg.example.org:65536",
                                   "https://a,,https://b", "https://a,",
                                   "https://[::1", "https://a b"])
def test_allowed_origins_validated(hostgate_factory, value):
    hg = hostgate_factory(start=False)
    hg.env["HOSTGATE_ALLOWED_ORIGINS"] = value
    p = hg.start("frontd")
    assert p.wait(timeout=hglib.SLOW) != 0
    assert "HOSTGATE_ALLOWED_ORIGINS" in hg.log_text("frontd")
    assert "not a list of web origins" in hg.log_text("frontd")


# -- a terminal flooded with input it does not read ---------------------------

def vm_rss_kib(pid):
    return int(hglib.proc_status(pid)["VmRSS"].split()[0])


def test_ws_input_flood_bounded(hg, bob):
    """64 MiB typed into a terminal whose program never reads: frontd stops
    reading the WebSocket instead of buffering it, its memory stays
    bounded, and another client is served meanwhile."""
    pid = hg.pid("frontd")
    with sl.terminal(bob) as t:
        # Raw mode: a full line discipline then holds input back (in
        # canonical mode it would drop it). Typed as SLEEP''ING: only
        # sh's output matches, not the echo.
        t.ws.send_binary(b"exec sh -c 'stty raw -echo; echo SLEEP''ING; exec sleep 1000'\n")
        t.ws.read_until(rb"SLEEPING")
        before = vm_rss_kib(pid)
        chunk = t.ws.frame(OP_BINARY, b"x" * (64 * 1024))
        total = 64 * MiB
        sent = 0
        sock = t.ws.sock
        sock.setblocking(False)
        with contextlib.suppress(BlockingIOError):
            while sent < total:
                view = memoryview(chunk)
                while view:
                    try:
                        n = sock.send(view)
                    except BlockingIOError:
                        # frontd has stopped reading: nothing more goes.
                        p = select.poll()
                        p.register(sock, select.POLLOUT)
                        if not p.poll(5000):
                            raise
                        continue
                    view = view[n:]
                    sent += n
        after = vm_rss_kib(pid)
        figures = "frontd grew by %d KiB (from %d KiB), %d MiB sent" % (
            after - before, before, sent // MiB)
        assert sent < total, "frontd read it all: " + figures
        assert after - before < 16 * 1024, figures
        assert hg.health().status == 200
        assert bob.get("/api/status").status == 200
        print("ws input flood: %.1f MiB sent before frontd stopped reading,"
              " frontd RSS %d -> %d KiB" % (sent / MiB, before, after))
