"""egressd alone, the test playing sandboxd: it listens on
RUN_DIR/egress/sandbox.sock, takes egressd's link (hello as sandboxd),
passes a spawn's listening Unix socket in egress_listen and speaks HTTP
proxy requests to it, reaching test servers on 127.0.0.1 (exempted from
the denied networks by HOSTGATE_EGRESS_ALLOW_NETS=127.0.0.0/8) under names
pinned in HOSTGATE_EGRESS_HOSTS. Checks what the agent sees (the proxy's
answers and refusals) and what sandboxd is told (egress_log)."""

import contextlib
import hashlib
import http.server
import json
import os
import shutil
import socket
import threading

import pytest

import hglib

SPAWN_A = "0123456789abcdef"
SPAWN_B = "fedcba9876543210"
SPAWN_C = "0000000000000c0c"
SPAWN_D = "0000000000000d0d"
SPAWN_E = "0000000000000e0e"
SESSION = "ab" * 16


class Upstream(http.server.BaseHTTPRequestHandler):
    """A test server: answers every request with its own request line and
    headers as JSON (HTTP/1.0: it closes after the answer)."""

    def do_GET(self):
        body = json.dumps({"line": self.requestline,
                           "headers": dict(self.headers.items())}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_POST = do_GET

    def log_message(self, *args):
        pass


class Sandboxd:
    """The test's sandboxd end of egressd's link."""

    def __init__(self, hg):
        path = os.path.join(hg.run, "egress", "sandbox.sock")
        # Bound and listening as sandboxd's uid: egressd checks the
        # listener's SO_PEERCRED (taken at listen) against it.
        if hg.mode == "root":
            uid, gid = hglib.account("hostgate-sandbox")
        elif hg.run_as:
            uid, gid = hg.run_as
        else:
            uid, gid = os.geteuid(), os.getegid()
        self.srv = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        os.setegid(gid)
        os.seteuid(uid)
        try:
            self.srv.bind(path)
            os.chmod(path, 0o666)
            self.srv.listen(4)
        finally:
            os.seteuid(os.getuid())
            os.setegid(os.getgid())
        self.srv.settimeout(hglib.SLOW)
        self.conn = None
        self.pending = []

    def accept(self):
        """Take egressd's (re)connection and exchange the hellos."""
        self.conn, _ = self.srv.accept()
        self.conn.settimeout(hglib.SLOW)
        got = json.loads(self.conn.recv(65536))
        assert got == {"type": "hello", "version": 1, "role": "egressd"}, got
        self.conn.send(hglib.hello("sandboxd"))

    def send(self, type_, fds=(), **fields):
        msg = json.dumps(dict(fields, type=type_)).encode()
        if fds:
            socket.send_fds(self.conn, [msg], list(fds))
        else:
            self.conn.send(msg)

    def log(self, pred=lambda m: True):
        """The next egress_log record matching pred (earlier ones kept)."""
        for i, m in enumerate(self.pending):
            if pred(m):
                return self.pending.pop(i)
        while True:
            m = hglib.ipc_decode(self.conn.recv(65536))
            assert m.get("type") == "egress_log", m
            if pred(m):
                return m
            self.pending.append(m)

    def close(self):
        if self.conn is not None:
            self.conn.close()
        self.srv.close()


def bulk_serve(srv):
    """An upstream for bulk transfers, one connection at a time: read a
    head and then the body until the client's half-close, answer with an
    HTTP head, the body's sha256 and 16 MiB of its own, then close."""
    while True:
        try:
            conn, _ = srv.accept()
        except OSError:
            return
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                b = conn.recv(65536)
                if not b:
                    break
                data += b
            body = [data.partition(b"\r\n\r\n")[2]]
            while True:
                b = conn.recv(1 << 20)
                if not b:
                    break
                body.append(b)
            digest = hashlib.sha256(b"".join(body)).hexdigest().encode()
            blob = hashlib.sha256(digest).digest() * (1 << 19)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n"
                         % (len(digest) + 1 + len(blob)) + digest + b"\n")
            conn.sendall(blob)


def listener(hg, name):
    """A spawn's listening socket (what sandboxd would make): path, fd."""
    path = os.path.join(hg.dir, name + ".sock")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(path)
    s.listen(128)
    return path, s


def ask(path, data, timeout=hglib.SLOW):
    """Send raw bytes to a listener; everything it answers until EOF (or
    the reset of a close that left some of them unread). egressd may
    answer and close before all is sent (a refusal at accept)."""
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c.settimeout(timeout)
    c.connect(path)
    with c:
        try:
            c.sendall(data)
        except BrokenPipeError:
            pass
        out = b""
        while True:
            try:
                b = c.recv(65536)
            except ConnectionResetError:
                return out
            if not b:
                return out
            out += b


def parse(raw):
    """(status, reason, headers lower-cased, body) of an HTTP answer."""
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    _, status, reason = lines[0].split(" ", 2)
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip()
    return int(status), reason, headers, body


@pytest.fixture(scope="module")
def proxy(mode):
    """egressd on a private run directory, linked to the test's sandboxd,
    serving spawn A; two upstream servers and a port that refuses. Spawn A
    logs 20 connect records a minute one by one: the tests that read its
    records stay below that (the rest use their own spawn)."""
    servers = []
    for _ in range(2):
        s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Upstream)
        threading.Thread(target=s.serve_forever, daemon=True).start()
        servers.append(s)
    # Bound, never listening: a connect to it is refused.
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    bulk = socket.socket()
    bulk.bind(("127.0.0.1", 0))
    bulk.listen(8)
    threading.Thread(target=bulk_serve, args=(bulk,), daemon=True).start()
    bport = bulk.getsockname()[1]
    port, port2 = (s.server_address[1] for s in servers)
    cport = closed.getsockname()[1]
    hg = hglib.Hostgate(mode, name="egressd")
    shutil.copy(os.path.join(hglib.BUILD, "egressd"), hg.binary("egressd"))
    os.chmod(hg.binary("egressd"), 0o755)
    hosts = os.path.join(hg.dir, "egress.hosts")
    with open(hosts, "w") as f:
        f.write("# pinned names of the test\n"
                "127.0.0.1 allowed.test good.wild.test user-added.test\n"
                "127.0.0.1 other.test closed.test   # a comment\n"
                "::ffff:10.9.9.9 private.test\n"
                "127.0.0.1 multi.test\n"
                "192.168.7.7 multi.test\n")
    os.chmod(hosts, 0o644)
    hg.env.update({
        "HOSTGATE_EGRESS_USER": "hostgate-egress",
        "HOSTGATE_EGRESS_HOSTS": hosts,
        "HOSTGATE_EGRESS_ALLOW": "allowed.test, *.wild.test private.test "
                                 "multi.test closed.test",
        "HOSTGATE_EGRESS_DENY": "bad.wild.test",
        "HOSTGATE_EGRESS_ALLOW_NETS": "127.0.0.0/8",
        "HOSTGATE_EGRESS_PORTS": "443,80,%d,%d,%d,%d" % (port, port2, cport,
                                                         bport),
    })
    # sandboxd's directory for egressd, as sandboxd makes it.
    d = os.path.join(hg.run, "egress")
    os.mkdir(d)
    if mode == "root":
        os.chown(d, hglib.account("hostgate-sandbox")[0],
                 hglib.account("hostgate-egress")[1])
        os.chmod(d, 0o711)
    else:
        if hg.run_as:
            os.chown(d, *hg.run_as)
        os.chmod(d, 0o700)
    sbx = Sandboxd(hg)
    try:
        hg.start("egressd")
        sbx.accept()
        path, ls = listener(hg, "a")
        sbx.send("egress_listen", [ls.fileno()], spawn=SPAWN_A, user="bob",
                 session=SESSION, allow_user=["user-added.test"],
                 allow_session=[])
        ls.close()
        yield dict(hg=hg, sbx=sbx, path=path, port=port, port2=port2,
                   cport=cport, bport=bport, servers=servers)
    except BaseException:
        hg.failed = True
        print(hg.logs())
        raise
    finally:
        sbx.close()
        closed.close()
        bulk.close()
        for s in servers:
            s.shutdown()
            s.server_close()
        hg.cleanup()


def test_check_config(proxy):
    """egressd -n reads the configuration and the hosts file and stops."""
    hg = proxy["hg"]
    out = hglib.subprocess.run([hg.binary("egressd"), "-n"], env=hg.env,
                               capture_output=True, text=True,
                               timeout=hglib.SLOW)
    assert out.returncode == 0, out.stderr
    assert "configuration OK (8 pinned names" in out.stderr, out.stderr


def test_bad_hosts_file(proxy, tmp_path):
    """A bad line of HOSTGATE_EGRESS_HOSTS stops egressd -n with its line."""
    hg = proxy["hg"]
    bad = tmp_path / "bad.hosts"
    bad.write_text("127.0.0.1 fine.test\nnot-an-address name.test\n")
    env = dict(hg.env, HOSTGATE_EGRESS_HOSTS=str(bad))
    out = hglib.subprocess.run([hg.binary("egressd"), "-n"], env=env,
                               capture_output=True, text=True,
                               timeout=hglib.SLOW)
    assert out.returncode != 0
    assert "line 2: not-an-address is not a numeric" in out.stderr, out.stderr


def test_connect_tunnel(proxy):
    """CONNECT to an allowed name: 200, then bytes both ways; logged with
    the address it resolved to and the bytes."""
    port = proxy["port"]
    raw = ask(proxy["path"], b"CONNECT allowed.test:%d HTTP/1.1\r\n"
              b"Host: allowed.test:%d\r\n\r\n"
              b"GET /through HTTP/1.0\r\n\r\n" % (port, port))
    assert raw.startswith(b"HTTP/1.1 200 Connection established\r\n\r\n"), raw
    inner = raw.split(b"\r\n\r\n", 1)[1]
    status, _, _, body = parse(inner)
    assert status == 200
    assert json.loads(body)["line"] == "GET /through HTTP/1.0"
    m = proxy["sbx"].log(lambda m: m["host"] == "allowed.test"
                         and m["verdict"] == "allowed")
    assert m["kind"] == "connect" and m["count"] == 1
    assert m["spawn"] == SPAWN_A and m["user"] == "bob"
    assert m["session"] == SESSION and m["port"] == port
    assert m["addr"] == "127.0.0.1"
    assert m["bytes_up"] == len(b"GET /through HTTP/1.0\r\n\r\n")
    assert m["bytes_down"] == len(inner)
    assert "reason" not in m


def test_absolute_form(proxy):
    """An absolute-form request goes upstream in origin form, Host from
    the URL, without the Proxy-* and hop-by-hop headers, Connection: close
    (and the answer comes back with Connection: close)."""
    port = proxy["port2"]
    raw = ask(proxy["path"],
              b"GET http://Allowed.test:%d/p/a?q=1 HTTP/1.1\r\n"
              b"Host: elsewhere.example\r\n"
              b"Proxy-Authorization: Basic c2VjcmV0\r\n"
              b"Proxy-Connection: keep-alive\r\n"
              b"Connection: keep-alive\r\nKeep-Alive: 5\r\n"
              b"X-Kept: yes\r\n\r\n" % port)
    status, _, headers, body = parse(raw)
    assert status == 200, raw
    assert headers["connection"] == "close"
    seen = json.loads(body)
    assert seen["line"] == "GET /p/a?q=1 HTTP/1.1"
    h = {k.lower(): v for k, v in seen["headers"].items()}
    assert h["host"] == "allowed.test:%d" % port
    assert h["connection"] == "close" and h["x-kept"] == "yes"
    assert not [k for k in h if k.startswith("proxy-") or k == "keep-alive"]
    m = proxy["sbx"].log(lambda m: m["port"] == port)
    assert m["verdict"] == "allowed" and m["host"] == "allowed.test"


def bulk_check(raw, body):
    """The bulk upstream's answer to body, byte for byte: its length."""
    status, _, headers, rest = parse(raw)
    assert status == 200
    digest = hashlib.sha256(body).hexdigest().encode()
    blob = hashlib.sha256(digest).digest() * (1 << 19)
    assert int(headers["content-length"]) == len(rest)
    assert rest == digest + b"\n" + blob, "the bytes down differ"
    return len(raw)


@pytest.mark.parametrize("tunnel", [True, False], ids=["connect", "absolute"])
def test_bulk_both_ways(proxy, tunnel):
    """8 MiB up, then the client's half-close, then 16 MiB down, through a
    CONNECT tunnel and an absolute-form request: every byte arrives in
    order each way, the half-close reaches upstream (which answers only
    then), and the record counts the bytes exactly."""
    hg, sbx, bport = proxy["hg"], proxy["sbx"], proxy["bport"]
    path, ls = listener(hg, "d" + str(tunnel))
    sbx.send("egress_listen", [ls.fileno()], spawn=SPAWN_D, user="dave",
             allow_user=[], allow_session=[])
    ls.close()
    body = os.urandom(8 << 20)
    inner = b"POST /bulk HTTP/1.1\r\nHost: allowed.test\r\n\r\n"
    if tunnel:
        head = (b"CONNECT allowed.test:%d HTTP/1.1\r\n\r\n" % bport) + inner
    else:
        head = (b"POST http://allowed.test:%d/bulk HTTP/1.1\r\n"
                b"Content-Length: %d\r\n\r\n" % (bport, len(body)))
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c.settimeout(hglib.SLOW)
    c.connect(path)
    with c:
        c.sendall(head + body)
        c.shutdown(socket.SHUT_WR)
        got = []
        while True:
            b = c.recv(1 << 20)
            if not b:
                break
            got.append(b)
    raw = b"".join(got)
    ok = b"HTTP/1.1 200 Connection established\r\n\r\n"
    if tunnel:
        assert raw.startswith(ok), raw[:200]
        down = bulk_check(raw[len(ok):], body)
    else:
        down = bulk_check(raw, body)
    m = sbx.log(lambda m: m["spawn"] == SPAWN_D)
    assert m["verdict"] == "allowed" and "reason" not in m, m
    assert m["bytes_down"] == down
    if tunnel:
        assert m["bytes_up"] == len(inner) + len(body)
    else:
        assert m["bytes_up"] > len(body)
    sbx.send("egress_close", spawn=SPAWN_D)


def refused(proxy, request, status=403):
    """The answer to a refused request: its text (reason phrase and body
    agree), checked against the header naming the host."""
    code, reason, headers, body = parse(ask(proxy["path"], request))
    assert code == status, (code, reason)
    assert body.decode().rstrip("\n") == reason
    assert headers["connection"] == "close"
    assert headers["content-type"].startswith("text/plain")
    return reason, headers


def test_not_allowed(proxy):
    """A name off the allowlist: 403 saying so and how to get it allowed."""
    reason, headers = refused(proxy, b"CONNECT other.test:443 HTTP/1.1\r\n\r\n")
    assert reason == ("Egress refused: other.test is not on this sandbox's "
                      "allowlist; an admin can allow it (hostgate panel or "
                      "hgctl egress allow)")
    assert headers["x-hostgate-egress"] == "refused; host=other.test"
    m = proxy["sbx"].log(lambda m: m["host"] == "other.test")
    assert m["verdict"] == "refused" and m["reason"] == "not on the allowlist"
    assert m["bytes_up"] == 0 and m["bytes_down"] == 0 and "addr" not in m


@pytest.mark.parametrize("host", ["127.0.0.1", "[::1]", "2130706433",
                                  "0x7f.1", "0177.0.0.1", "127.1"])
def test_ip_literal(proxy, host):
    """Addresses in every spelling are refused before anything resolves."""
    reason, _ = refused(proxy, b"CONNECT %s:443 HTTP/1.1\r\n\r\n"
                        % host.encode())
    assert reason == "Egress refused: %s is an IP literal (use a name)" % host
    m = proxy["sbx"].log(lambda m: m["host"] == host)
    assert m["reason"] == "IP literal"


def test_port(proxy):
    """A port outside HOSTGATE_EGRESS_PORTS, even for an allowed name."""
    reason, _ = refused(proxy, b"CONNECT allowed.test:25 HTTP/1.1\r\n\r\n")
    assert reason == ("Egress refused: port 25 is not allowed (allowed: 443, "
                      "80, %d, %d, %d, %d)" % (proxy["port"], proxy["port2"],
                                               proxy["cport"],
                                               proxy["bport"]))


def test_denylist_wins(proxy):
    """*.wild.test is allowed, bad.wild.test denied; good.wild.test goes."""
    reason, _ = refused(proxy, b"GET http://bad.wild.test:%d/ HTTP/1.1\r\n\r\n"
                        % proxy["port"])
    assert reason == "Egress refused: bad.wild.test is on the denylist"
    status, _, _, _ = parse(ask(proxy["path"],
                                b"GET http://good.wild.test:%d/ HTTP/1.1"
                                b"\r\n\r\n" % proxy["port"]))
    assert status == 200


@pytest.mark.parametrize("host,addr,net", [
    ("private.test", "::ffff:10.9.9.9", "10.0.0.0/8"),
    ("multi.test", "192.168.7.7", "192.168.0.0/16")])
def test_denied_network(proxy, host, addr, net):
    """A name that resolves into a denied network (any of its addresses) is
    refused after resolution, naming the address and the network."""
    reason, _ = refused(proxy, b"CONNECT %s:443 HTTP/1.1\r\n\r\n"
                        % host.encode())
    assert reason == ("Egress refused: %s resolves to %s inside a denied "
                      "network (%s)" % (host, addr, net))
    m = proxy["sbx"].log(lambda m: m["host"] == host)
    assert m["addr"] == addr and m["reason"] == "denied network %s" % net


def test_upstream_refuses(proxy):
    """An allowed name whose port refuses: 502 with the reason, logged as
    allowed by the policy with the failure."""
    reason, _ = refused(proxy, b"CONNECT closed.test:%d HTTP/1.1\r\n\r\n"
                        % proxy["cport"], status=502)
    assert reason == ("Egress failed: cannot connect to closed.test "
                      "(127.0.0.1): Connection refused")
    m = proxy["sbx"].log(lambda m: m["host"] == "closed.test")
    assert m["verdict"] == "allowed"
    assert m["reason"] == "connect failed: Connection refused"


@pytest.fixture(scope="module")
def spare(proxy):
    """A third spawn's listener, whose log no earlier test has filled (at
    most 20 connect records a minute per spawn)."""
    path, ls = listener(proxy["hg"], "c")
    proxy["sbx"].send("egress_listen", [ls.fileno()], spawn=SPAWN_C,
                      user="dave")
    ls.close()
    return dict(proxy, path=path)


@pytest.mark.parametrize("request_", [
    b"GET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n",
    b"GET https://allowed.test/ HTTP/1.1\r\n\r\n",
    b"CONNECT allowed.test HTTP/1.1\r\n\r\n",
    b"CONNECT allowed.test:443 HTTP/2\r\n\r\n",
    b"GET http://us:pw@allowed.test/ HTTP/1.1\r\n\r\n",
    b"X" * 17000], ids=["origin-form", "https-url", "no-port", "http2",
                        "userinfo", "head-too-large"])
def test_bad_request(spare, request_):
    """What is not a proxy request of HTTP/1.x: 400, and egressd goes on."""
    proxy = spare
    code, reason, _, _ = parse(ask(proxy["path"], request_))
    assert code == 400 and reason.startswith("Egress refused: bad request: ")
    # Logged too, with no host to name.
    m = proxy["sbx"].log(lambda m: m["host"] == "")
    assert m["port"] == 0 and m["verdict"] == "refused"
    assert m["reason"] == "bad request"


def test_update_and_close(proxy):
    """An admin's addition (allow_user) works, egress_update replaces it;
    the 26 attempts give 20 connect records and, at egress_close (which
    also closes the listener), a summary of the other 6."""
    hg, sbx = proxy["hg"], proxy["sbx"]
    path, ls = listener(hg, "b")
    sbx.send("egress_listen", [ls.fileno()], spawn=SPAWN_B, user="carol",
             allow_user=["user-added.test"])
    ls.close()
    req = b"GET http://user-added.test:%d/ HTTP/1.1\r\n\r\n" % proxy["port"]
    assert parse(ask(path, req))[0] == 200
    sbx.send("egress_update", user="carol", scope="user", allow=[])
    # Events on one link arrive in order: the next request sees the update.
    reason, _ = refused(dict(proxy, path=path), req)
    assert "user-added.test is not on this sandbox's allowlist" in reason
    for _ in range(24):
        ask(path, req)
    sbx.send("egress_close", spawn=SPAWN_B)
    logs = [sbx.log(lambda m: m["spawn"] == SPAWN_B) for _ in range(21)]
    kinds = [m["kind"] for m in logs]
    assert kinds == ["connect"] * 20 + ["summary"], kinds
    assert [m["verdict"] for m in logs[:2]] == ["allowed", "refused"]
    s = logs[-1]
    assert s["count"] == 6 and s["verdict"] == "refused"
    assert s["host"] == "user-added.test" and s["since_ms"] > 0
    assert s["user"] == "carol" and "session" not in s

    def gone():
        try:
            ask(path, req, timeout=2)
        except ConnectionRefusedError:
            return True
        return False
    hglib.wait_for(gone, what="spawn B's listener closed")


def test_session_update(proxy):
    """egress_update of scope session reaches the listeners of that session
    only: spawn A's (session SESSION) and not another's."""
    sbx = proxy["sbx"]
    req = b"GET http://other.test:%d/ HTTP/1.1\r\n\r\n" % proxy["port"]
    sbx.send("egress_update", user="bob", session="cd" * 16,
             scope="session", allow=["other.test"])
    sbx.send("egress_update", user="bob", session=SESSION, scope="session",
             allow=["*.other.test"])
    refused(proxy, req)
    sbx.send("egress_update", user="bob", session=SESSION, scope="session",
             allow=["other.test"])
    assert parse(ask(proxy["path"], req))[0] == 200
    sbx.send("egress_update", user="bob", session=SESSION, scope="session",
             allow=[])
    refused(proxy, req)


def test_connection_limit(spare):
    """A spawn's 65th open connection is refused with 503 at once; the
    others are untouched and egressd serves again once they close."""
    proxy = spare
    held = []
    try:
        for _ in range(64):
            c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            c.connect(proxy["path"])
            held.append(c)
        # The backlog is served in order: all 64 are egressd's by now.
        code, reason, _, _ = parse(ask(proxy["path"], b""))
        assert code == 503
        assert reason == "Egress refused: too many connections (at most 64)"
        m = proxy["sbx"].log(lambda m: m["host"] == "")
        assert m["reason"] == "too many connections"
    finally:
        for c in held:
            c.close()

    def serves():
        raw = ask(proxy["path"], b"CONNECT other.test:443 HTTP/1.1\r\n\r\n")
        return parse(raw)[0] == 403
    hglib.wait_for(serves, what="egressd serving spawn C again")


@pytest.mark.skipif(not hglib.IS_ROOT, reason="reads another uid's /proc")
def test_jailed(proxy):
    """egressd proper: pid 1 of its own PID namespace under its keeper,
    its seccomp filter on, no capability, its own uid, the host's network
    namespace but its own mount namespace, whose root holds only the
    egress socket directory."""
    hg = proxy["hg"]
    keeper = hg.pid("egressd")
    with open("/proc/%d/task/%d/children" % (keeper, keeper)) as f:
        kids = [int(x) for x in f.read().split()]
    assert len(kids) == 1, kids
    pid = kids[0]
    st = hglib.proc_status(pid)
    assert st["NSpid"].split()[1:] == ["1"], st["NSpid"]
    assert st["Seccomp"] == "2" and st["NoNewPrivs"] == "1", st
    assert int(st["CapEff"], 16) == 0 and int(st["CapPrm"], 16) == 0, st
    uid = (hglib.account("hostgate-egress")[0] if hg.mode == "root"
           else hg.daemon_uid)
    assert st["Uid"].split() == [str(uid)] * 4, st["Uid"]
    for ns, own in (("net", False), ("mnt", True), ("pid", True),
                    ("ipc", True), ("uts", True)):
        differs = os.readlink("/proc/%d/ns/%s" % (pid, ns)) != \
            os.readlink("/proc/self/ns/" + ns)
        assert differs == own, ns
    root = "/proc/%d/root" % pid
    listed = []
    for dirpath, dirs, files in os.walk(root):
        listed += [os.path.join(dirpath, f)[len(root):] for f in files]
    assert listed == [os.path.join(hg.run, "egress", "sandbox.sock")], listed


def test_link_loss_closes_listeners(proxy):
    """When sandboxd's link goes, so do its listeners (A and C; B was
    closed before); egressd reconnects."""
    sbx = proxy["sbx"]
    sbx.conn.close()

    def gone():
        try:
            ask(proxy["path"], b"CONNECT other.test:443 HTTP/1.1\r\n\r\n",
                timeout=2)
        except ConnectionRefusedError:
            return True
        return False
    hglib.wait_for(gone, what="spawn A's listener closed")
    sbx.pending = []
    sbx.accept()
    assert proxy["hg"].alive("egressd")
    text = proxy["hg"].log_text("egressd")
    assert "closed 2 listeners of the sandboxd that went away" in text


def test_record_lost_on_a_dead_link(proxy):
    """A record that cannot be sent (sandboxd stopped reading: EPIPE)
    drops the link from inside the end of the connection that logged it.
    The listeners then close from the event loop, that connection once
    (it was freed twice before: a double free), and egressd links again."""
    hg, sbx = proxy["hg"], proxy["sbx"]
    path, ls = listener(hg, "e")
    sbx.send("egress_listen", [ls.fileno()], spawn=SPAWN_E, user="bob",
             session=SESSION, allow_user=[], allow_session=[])
    ls.close()
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c.settimeout(hglib.SLOW)
    c.connect(path)
    c.sendall(b"CONNECT allowed.test:%d HTTP/1.1\r\n\r\n" % proxy["port"])
    head = b""
    while b"\r\n\r\n" not in head:
        b = c.recv(4096)
        assert b, head
        head += b
    assert head.startswith(b"HTTP/1.1 200"), head
    gone = "listeners of the sandboxd that went away"
    before = hg.log_text("egressd").count(gone)
    sbx.conn.shutdown(socket.SHUT_RD)
    c.close()   # the tunnel ends: its record's send fails
    hglib.wait_for(lambda: hg.log_text("egressd").count(gone) > before or
                   not hg.alive("egressd"),
                   what="the listeners closed after the failed send")
    assert hg.alive("egressd"), hg.log_text("egressd")
    with pytest.raises(ConnectionRefusedError):
        ask(path, b"CONNECT allowed.test:443 HTTP/1.1\r\n\r\n", timeout=2)
    sbx.conn.close()
    sbx.pending = []
    sbx.accept()
    assert hg.alive("egressd"), hg.log_text("egressd")
