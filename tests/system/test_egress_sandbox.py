"""sandboxd's side of the allowlist profiles (workspace-write+allowlist,
read-only+allowlist), with sandboxd alone: the test speaks brokerd's side
of sandbox.sock and plays egressd on RUN_DIR/egress/sandbox.sock, so that
no proxy is needed. With no egressd linked an allowlist spawn fails at once
and nothing runs; with one, each spawn's listening socket reaches it in
`egress_listen`, a curl inside the sandbox gets through the bridge to it,
and `egress_close` follows the spawn's end. Inside: loopback alone, no
resolver configuration, the proxy variables, the command keeps its pid and
exit status, and the bridge goes with the command. The real proxy's end to
end tests are elsewhere (test_egress*.py)."""

import errno
import json
import os
import shlex
import socket
import stat
import subprocess
import threading

import pytest

import hglib
import policylib as pl
import sandboxlib as sl

RANGE0 = 1879048192
UID = RANGE0 + 4301
ALLOW = "workspace-write+allowlist"
RO_ALLOW = "read-only+allowlist"
UNAVAILABLE = ("the %s profile is unavailable: the egress proxy (egressd) "
               "is not running")
CANNED = b"through the bridge\n"


def plant_stale_socket(hg):
    """What a previous sandboxd left in RUN_DIR/proxy (swept at start),
    and in root mode the run directory as systemd-tmpfiles makes it."""
    mode = hg.mode
    d = os.path.join(hg.run, "proxy")
    os.mkdir(d)
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(os.path.join(d, "0123456789abcdef.sock"))
    stale.close()
    owner = hglib.account(hglib.SERVICE_USERS["sandboxd"]) \
        if mode == "root" else (hg.daemon_uid, hg.run_as[1] if hg.run_as
                                else os.getegid())
    for p in (d, os.path.join(d, "0123456789abcdef.sock")):
        os.chown(p, *owner)
    os.chmod(d, 0o711 if mode == "root" else 0o700)
    if mode == "root":
        # The run directory as systemd-tmpfiles makes it: brokerd's, the
        # front group's, others may pass through (not list).
        os.chown(hg.run, *(hglib.account(hglib.SERVICE_USERS["brokerd"])[:1]
                           + hglib.account(hglib.SERVICE_USERS["frontd"])[1:]))
        os.chmod(hg.run, 0o1771)


@pytest.fixture(scope="module")
def box(mode):
    """sandboxd alone, and brokerd's side of its socket."""
    with hglib.sandboxd_alone(mode, "egress-sbx",
                              prepare=plant_stale_socket) as box:
        yield box


def ids(hg):
    """The uid and gid brokerd would send (the range's, in root mode)."""
    return {"uid": UID, "gid": UID} if hg.mode == "root" else {}


def spawn_uid(hg):
    return UID if hg.mode == "root" else hg.daemon_uid


def egress_account(hg):
    """Who egressd runs as: hostgate-egress, or the daemons' own uid."""
    if hg.mode == "root":
        return hglib.account("hostgate-egress")
    return hg.run_as or (os.geteuid(), os.getegid())


def stream_connect(path):
    """What connect(2) to a spawn's proxy socket gives: "connected" or
    the errno's name."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(path)
        return "connected"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))
    finally:
        s.close()


def connect_as(path, who, through_fd=False):
    """A SOCK_SEQPACKET connection to path made as who (uid, gid); with
    through_fd, by way of an fd of its directory opened first (egressd's
    jail binds RUN_DIR/egress: it never passes through RUN_DIR itself)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.settimeout(hglib.SLOW)
    uid, gid = who
    dfd = None
    if through_fd:
        dfd = os.open(os.path.dirname(path), os.O_PATH | os.O_DIRECTORY)
        path = "/proc/self/fd/%d/%s" % (dfd, os.path.basename(path))
    if uid != os.geteuid():
        os.setegid(gid)
        os.seteuid(uid)
    try:
        s.connect(path)
    finally:
        if os.geteuid() != os.getuid():
            os.seteuid(os.getuid())
            os.setegid(os.getgid())
        if dfd is not None:
            os.close(dfd)
    return s


class FakeEgressd:
    """egressd's side of RUN_DIR/egress/sandbox.sock: the hello, then the
    messages sandboxd sends (with their fds)."""

    def __init__(self, hg, who=None):
        path = os.path.join(hg.run, hglib.SOCK_SANDBOX_EGRESS)
        self.s = connect_as(path, who or egress_account(hg),
                            through_fd=True)
        self.s.send(hglib.hello("egressd"))
        data, fds, _, _ = socket.recv_fds(self.s, 65536, 4)
        assert json.loads(data).get("type") == "hello", data

    def recv(self):
        """(message, fds) of the next message; (None, []) at EOF."""
        data, fds, _, _ = socket.recv_fds(self.s, 1 << 17, 4)
        if not data:
            return None, []
        return hglib.ipc_decode(data), fds

    def expect(self, type_):
        """The next message, which must be of type_, and its fds."""
        m, fds = self.recv()
        assert m is not None and m.get("type") == type_, m
        return m, fds

    def send(self, **msg):
        self.s.send(json.dumps(msg).encode())

    def close(self):
        self.s.close()


def egress_health(fb):
    res, err = fb.call("health")
    assert err is None, err
    return res["egress"]


def linked(fb, up):
    """Wait until sandboxd's health says the egressd link is up (or down)."""
    return hglib.wait_for(lambda: egress_health(fb)["ok"] is up,
                          what="egress ok %s" % up)


@pytest.fixture
def egressd(box):
    """A fake egressd, linked; unlinked again afterwards."""
    hg, fb = box
    fake = FakeEgressd(hg)
    linked(fb, True)
    try:
        yield fake
    finally:
        fake.close()
        linked(fb, False)


def spawn(hg, fb, script, perm=ALLOW, **kw):
    """(result, error, stdout, stderr) of one command run through sandboxd."""
    fields = dict(kind="command", mode="sandbox", permission=perm,
                  user="alice", argv=["/bin/sh", "-c", script],
                  timeout_ms=20000, **ids(hg))
    fields.update(kw)
    res, err, got = fb.call_fds("spawn", **fields)
    out = []
    for fd in got:
        os.lseek(fd, 0, os.SEEK_SET)
        out.append(os.read(fd, 1 << 20).decode("utf-8", "replace"))
        os.close(fd)
    out += ["", ""]
    return res, err, out[0], out[1]


def proxy_dir(hg):
    return os.path.join(hg.run, "proxy")


def workspace(hg):
    return os.path.join(pl.workspace_root(hg), "alice")


def test_no_egressd_fails_closed(box):
    """No egressd linked: the spawn fails at once with the reason, nothing
    runs, no socket is left; health says why."""
    hg, fb = box
    h = egress_health(fb)
    assert h == {"ok": False, "reason": "the egress proxy (egressd) is not "
                 "running"}
    marker = "ran-%d" % os.getpid()
    for perm in (ALLOW, RO_ALLOW):
        res, err, _, _ = spawn(hg, fb, "touch %s" % marker, perm=perm)
        assert res is None
        assert err == {"code": "unavailable", "message": UNAVAILABLE % perm}
    assert not os.path.exists(os.path.join(workspace(hg), marker))
    # Nothing made, and the stale socket of the fixture swept at start.
    assert os.listdir(proxy_dir(hg)) == []
    assert "removed 1 stale spawn sockets" in hg.log_text("sandboxd")
    # The other profiles are not affected.
    res, err, out, _ = spawn(hg, fb, "echo plain", perm="workspace-write")
    assert err is None and out == "plain\n"


def test_peer_checks(box):
    """Only egressd's uid may link (root mode), and a new egressd replaces
    the one linked before."""
    hg, fb = box
    st = os.stat(os.path.join(hg.run, "egress"))
    sock = os.stat(os.path.join(hg.run, hglib.SOCK_SANDBOX_EGRESS))
    pst = os.stat(proxy_dir(hg))
    if hg.mode == "root":
        assert stat.S_IMODE(st.st_mode) == 0o711
        assert stat.S_IMODE(sock.st_mode) == 0o660
        assert sock.st_gid == hglib.account("hostgate-egress")[1]
        assert stat.S_IMODE(pst.st_mode) == 0o711
        path = os.path.join(hg.run, hglib.SOCK_SANDBOX_EGRESS)
        # brokerd's uid may not even reach the socket file...
        with pytest.raises(PermissionError):
            connect_as(path, hglib.account("hostgate-broker"))
        # ...and root, past the file's mode, is not egressd's uid: closed.
        s = connect_as(path, (0, 0))
        try:
            s.send(hglib.hello("egressd"))
            assert s.recv(65536) == b""
        except (BrokenPipeError, ConnectionResetError):
            pass        # closed before the hello: refused all the same
        s.close()
        assert egress_health(fb)["ok"] is False
        assert "refused egressd connection from uid 0" in \
            hg.log_text("sandboxd")
    else:
        assert stat.S_IMODE(sock.st_mode) == 0o600
    first = FakeEgressd(hg)
    linked(fb, True)
    second = FakeEgressd(hg)
    # The first one's link is closed by sandboxd.
    m, _ = first.recv()
    assert m is None
    assert egress_health(fb)["ok"] is True
    first.close()
    second.close()
    linked(fb, False)


def test_run_dir_closed(box, egressd):
    """A run directory the spawns' uids cannot pass through (an old
    tmpfiles.d's 1770): allowlist spawns fail at once, saying why, and
    health says it too; nothing is left in RUN_DIR/proxy."""
    hg, fb = box
    if hg.mode != "root":
        pytest.skip("one uid for everything: the run directory is its own")
    os.chmod(hg.run, 0o1770)
    try:
        h = egress_health(fb)
        res, err, _, _ = spawn(hg, fb, "true")
    finally:
        os.chmod(hg.run, 0o1771)
    why = ("the run directory %s is mode 1770: the spawns' uids cannot "
           "reach their sockets in %s/proxy (give it o+x, as tmpfiles.d's "
           "1771)" % (hg.run, hg.run))
    assert h == {"ok": False, "reason": why}
    assert res is None and err == {
        "code": "unavailable",
        "message": "the %s profile is unavailable: %s" % (ALLOW, why)}
    assert os.listdir(proxy_dir(hg)) == []
    assert egress_health(fb) == {"ok": True, "reason": None}


def serve_one(fake, hits):
    """egressd's part of one spawn: take its listener, accept the bridge's
    connection, read a request, answer it; record what was seen."""
    try:
        m, fds = fake.expect("egress_listen")
        hits["listen"] = m
        assert len(fds) == 1
        lsock = socket.socket(fileno=fds[0])
        hits["sock_family"] = (lsock.family, lsock.type & 0xf)
        lsock.settimeout(hglib.SLOW)
        conn, _ = lsock.accept()
        creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                12)
        hits["bridge_pid"] = int.from_bytes(creds[:4], "little")
        conn.settimeout(hglib.SLOW)
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = conn.recv(4096)
            if not chunk:
                break
            data += chunk
        hits["request"] = data
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n"
                     b"Connection: close\r\n\r\n%s" % (len(CANNED), CANNED))
        conn.close()
        lsock.close()
        m, _ = fake.expect("egress_close")
        hits["close"] = m
    except BaseException as e:  # reported by the main thread
        hits["error"] = repr(e)


def test_curl_through_bridge(box, egressd):
    """A spawn's socket reaches egressd with its fd; curl inside goes
    through the bridge to it; egress_close and the file's removal follow
    the spawn's end; the bridge is gone with the command."""
    hg, fb = box
    hits = {}
    t = threading.Thread(target=serve_one, args=(egressd, hits))
    t.start()
    script = ("curl -sS --max-time 15 http://example.test/where; "
              "echo \" exit $?\"")
    res, err, out, errout = spawn(
        hg, fb, script, egress_user=["a.example"],
        egress_session=["*.b.example"])
    t.join(hglib.SLOW)
    assert "error" not in hits, (hits, err, out, errout)
    assert err is None, err
    assert out == CANNED.decode() + " exit 0\n", (out, errout)
    assert res["exit_code"] == 0
    listen = hits["listen"]
    assert listen["spawn"] == res["id"]
    assert listen["user"] == "alice"
    assert listen["allow_user"] == ["a.example"]
    assert listen["allow_session"] == ["*.b.example"]
    assert hits["sock_family"] == (socket.AF_UNIX, socket.SOCK_STREAM)
    # curl used the proxy: the absolute form of the URL reached egressd.
    assert hits["request"].startswith(
        b"GET http://example.test/where HTTP/1.1\r\n"), hits["request"]
    assert hits["close"] == {"type": "egress_close", "spawn": res["id"]}
    assert os.listdir(proxy_dir(hg)) == []
    # The bridge's relay, the peer of the connection, went with the spawn.
    pid = hits["bridge_pid"]
    assert pid > 0
    hglib.wait_for(lambda: not os.path.exists("/proc/%d" % pid),
                   what="the bridge %d to go" % pid)


def test_socket_owner_and_inside(box, egressd):
    """While a spawn runs its socket is its uid's, 0600; inside there is
    no route out, no resolver, the proxy environment; the command keeps
    pid 2 (bwrap's init is 1) and its exit status; read-only twin."""
    hg, fb = box
    seen = {}

    def watch():
        try:
            m, fds = egressd.expect("egress_listen")
            path = os.path.join(proxy_dir(hg), m["spawn"] + ".sock")
            st = os.stat(path)
            seen["mode"] = stat.S_IMODE(st.st_mode)
            seen["uid"] = st.st_uid
            seen["sock"] = stat.S_ISSOCK(st.st_mode)
            if hg.mode == "root":
                # Another user's process: the socket is not theirs.
                seen["other"] = hglib.run_as((UID + 1, UID + 1),
                                             lambda: stream_connect(path))
            for fd in fds:
                os.close(fd)
            seen["close"], _ = egressd.expect("egress_close")
        except BaseException as e:
            seen["error"] = repr(e)

    t = threading.Thread(target=watch)
    t.start()
    probe = r"""
import errno, json, os, socket
r = {}
def conn(addr, fam=socket.AF_INET):
    s = socket.socket(fam, socket.SOCK_STREAM)
    s.settimeout(5)
    try:
        s.connect(addr)
        return "connected"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e))
    finally:
        s.close()
r["direct"] = conn(("192.0.2.1", 80))
r["direct6"] = conn(("2001:db8::1", 80), socket.AF_INET6)
r["resolv"] = os.path.exists("/etc/resolv.conf")
r["hosts"] = os.path.exists("/etc/hosts")
r["env"] = {k: os.environ.get(k) for k in ("HTTP_PROXY", "HTTPS_PROXY",
    "http_proxy", "https_proxy", "NO_PROXY", "no_proxy", "HOSTGATE_EGRESS")}
r["ifaces"] = sorted(n for _, n in socket.if_nameindex())
r["bridge"] = conn(("127.0.0.1", 3128))
r["ppid"] = os.getppid()
try:
    open(os.path.join(os.environ["HOME"], "w"), "w").close()
    r["write"] = "ok"
except OSError as e:
    r["write"] = errno.errorcode[e.errno]
print(json.dumps(r))
"""
    script = "echo pid $$; python3 -c '%s'; exit 7" % probe.replace(
        "'", "'\\''")
    res, err, out, errout = spawn(hg, fb, script, perm=RO_ALLOW)
    t.join(hglib.SLOW)
    assert "error" not in seen, seen
    assert err is None, err
    assert res["exit_code"] == 7, (out, errout)
    first, _, rest = out.partition("\n")
    assert first == "pid 2"
    r = json.loads(rest)
    assert r["direct"] == "ENETUNREACH", r
    assert r["direct6"] in ("ENETUNREACH", "EADDRNOTAVAIL"), r
    assert r["resolv"] is False and r["hosts"] is False
    assert r["env"] == {
        "HTTP_PROXY": "http://127.0.0.1:3128",
        "HTTPS_PROXY": "http://127.0.0.1:3128",
        "http_proxy": "http://127.0.0.1:3128",
        "https_proxy": "http://127.0.0.1:3128",
        "NO_PROXY": "localhost,127.0.0.1,::1",
        "no_proxy": "localhost,127.0.0.1,::1",
        "HOSTGATE_EGRESS": "proxy",
    }
    assert r["ifaces"] == ["lo"]
    # The bridge listens (the test's egressd answers nothing here).
    assert r["bridge"] == "connected"
    # The shell was bwrap's child: the bridge exec'd it, no extra parent.
    assert r["ppid"] == 2
    assert r["write"] in ("EROFS", "EACCES")
    assert seen["sock"] and seen["mode"] == 0o600
    assert seen["uid"] == spawn_uid(hg)
    if hg.mode == "root":
        assert seen["other"] == "EACCES", seen
    assert seen["close"]["spawn"] == res["id"]
    assert os.listdir(proxy_dir(hg)) == []


def test_update_and_log_relayed(box, egressd):
    """brokerd's egress_update reaches egressd; egressd's egress_log of a
    spawn reaches brokerd with sandboxd's user and session, and a record
    of a spawn egressd was never given is dropped."""
    hg, fb = box
    upd = {"type": "egress_update", "user": "alice", "scope": "user",
           "allow": ["pypi.org", "*.pythonhosted.org"]}
    fb.s.send(json.dumps(upd).encode())
    m, _ = egressd.expect("egress_update")
    assert {k: m[k] for k in upd} == upd

    session = "ab" * 16
    got = {}

    def serve():
        try:
            m, fds = egressd.expect("egress_listen")
            got["spawn"] = m["spawn"]
            for fd in fds:
                os.close(fd)
            got["close"], _ = egressd.expect("egress_close")
        except BaseException as e:
            got["error"] = repr(e)

    t = threading.Thread(target=serve)
    t.start()
    res, err, _, _ = spawn(hg, fb, "true", session=session)
    t.join(hglib.SLOW)
    assert err is None and "error" not in got, (err, got)
    rec = {"kind": "connect", "host": "evil.example", "port": 443,
           "verdict": "refused", "reason": "not on the allowlist",
           "bytes_up": 0, "bytes_down": 0, "duration_ms": 0, "count": 1}
    # Of no spawn sandboxd gave egressd: dropped.
    egressd.send(type="egress_log", spawn="0" * 16, user="alice", **rec)
    # Egressd's word for the user is not taken.
    egressd.send(type="egress_log", spawn=got["spawn"], user="mallory",
                 **rec)
    fb.s.settimeout(hglib.SLOW)
    while True:
        data, fds, _, _ = socket.recv_fds(fb.s, 1 << 17, 4)
        for fd in fds:
            os.close(fd)
        m = hglib.ipc_decode(data)
        if m.get("type") == "egress_log":
            break
    assert m["spawn"] == got["spawn"]
    assert m["user"] == "alice" and m["session"] == session
    assert m["host"] == "evil.example" and m["verdict"] == "refused"
    assert "id" not in m


def test_socket_unreachable(box, egressd):
    """When nobody accepts on the spawn's socket (egressd dropped it), the
    bridge closes each client's connection: no reply, no way out, and
    the command goes on."""
    hg, fb = box
    got = {}

    def drop():
        try:
            m, fds = egressd.expect("egress_listen")
            for fd in fds:
                os.close(fd)    # the listener is gone: connects refused
            got["close"], _ = egressd.expect("egress_close")
        except BaseException as e:
            got["error"] = repr(e)

    t = threading.Thread(target=drop)
    t.start()
    res, err, out, errout = spawn(
        hg, fb, "curl -sS --max-time 10 http://example.test/; "
        "echo \" exit $?\"")
    t.join(hglib.SLOW)
    assert err is None and "error" not in got, (err, got)
    # 52: empty reply, 56: reset (either is the bridge's close).
    assert out.split()[-1] in ("52", "56"), (out, errout)
    assert res["exit_code"] == 0


def relay_sum(fake, hits):
    """egressd's part of a bulk transfer: read the whole request body the
    bridge relays (Content-Length), answer with its SHA-256 and 1 MiB."""
    import hashlib
    try:
        m, fds = fake.expect("egress_listen")
        lsock = socket.socket(fileno=fds[0])
        lsock.settimeout(hglib.SLOW)
        conn, _ = lsock.accept()
        conn.settimeout(hglib.SLOW)
        data = b""
        while b"\r\n\r\n" not in data:
            data += conn.recv(65536)
        head, _, body = data.partition(b"\r\n\r\n")
        length = [int(line.split(b":")[1]) for line in head.split(b"\r\n")
                  if line.lower().startswith(b"content-length:")][0]
        while len(body) < length:
            chunk = conn.recv(65536)
            assert chunk, "the bridge closed early"
            body += chunk
        # The client half-closed after its body? Then EOF arrives now.
        reply = hashlib.sha256(body).hexdigest().encode() + b"\n" + \
            b"x" * (1 << 20)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n"
                     b"Connection: close\r\n\r\n" % len(reply) + reply)
        conn.shutdown(socket.SHUT_WR)
        # The bridge passes the half-close on: the client ends, EOF here.
        hits["eof"] = conn.recv(65536)
        conn.close()
        lsock.close()
        fake.expect("egress_close")
    except BaseException as e:
        hits["error"] = repr(e)


def test_bulk_both_ways(box, egressd):
    """Bounded buffers lose nothing: 3 MiB up, 1 MiB down, byte for byte."""
    hg, fb = box
    hits = {}
    t = threading.Thread(target=relay_sum, args=(egressd, hits))
    t.start()
    script = ("head -c 3145728 /dev/urandom > /tmp/up; sha256sum < /tmp/up;"
              " curl -sS --max-time 15 --data-binary @/tmp/up "
              "http://example.test/up -o /tmp/down; echo exit $?; "
              "head -n1 /tmp/down; tail -n +2 /tmp/down | wc -c")
    res, err, out, errout = spawn(hg, fb, script)
    t.join(hglib.SLOW)
    assert err is None and "error" not in hits, (err, hits)
    lines = out.split("\n")
    assert lines[1] == "exit 0", (out, errout)
    assert lines[0].split()[0] == lines[2]
    assert lines[3].strip() == str(1 << 20)
    assert hits["eof"] == b""


@pytest.fixture(scope="module")
def full(mode):
    """The whole hostgate, egressd included."""
    with hglib.running(mode, "egress-sbx-http") as hg:
        yield hg


def test_http_fails_closed_without_egressd(full):
    """Through frontd: under both allowlist profiles a command runs while
    egressd is linked; with egressd stopped it fails at once with 503 and
    the reason, and runs again once egressd is back."""
    hg = full
    if "egressd" not in hglib.DAEMONS:
        pytest.skip("no egressd in this build")
    alice = hg.login(*hglib.ADMIN)
    hg.wait_egress(alice)
    marker = os.path.join(workspace(hg), "ran-http")
    for perm in (ALLOW, RO_ALLOW):
        r = alice.post("/api/permission", {"permission": perm})
        assert r.status == 200, r
        doc = pl.run(alice, "echo $HOSTGATE_EGRESS")
        assert doc["stdout"] == "proxy\n", doc
    # The real egressd behind the bridge explains its refusal (nothing is
    # allowed here); a terminal keeps its pty through the bridge.
    doc = pl.run(alice, "curl -s -i http://not-allowed.example/")
    assert doc["stdout"].startswith("HTTP/1.1 403 "), doc
    assert "not-allowed.example is not on this sandbox's allowlist" in \
        doc["stdout"], doc
    # Its bypasses (TCP to an address with no route, a DNS-like datagram
    # to 127.0.0.1:53) are audited when the terminal ends: egress_bypass
    # from proc_exited.
    res = sl.run_shell(alice, "terminal", "test -t 0 && test -t 1 && "
                       "echo tty-$HOSTGATE_EGRESS && python3 -c %s"
                       % shlex.quote(BYPASS_PY))
    assert res.exit == 0 and "tty-proxy" in res.output, res
    assert "bypass-failed" in res.output, res
    recs = hglib.wait_for(lambda: pl.audit_records(
        hg, action="egress_bypass", user=hglib.ADMIN[0]) or None,
        what="an egress_bypass record of the terminal")
    term = [r for r in pl.audit_records(hg, action="terminal_opened")
            if r["user"] == hglib.ADMIN[0]][-1]
    assert recs[-1]["detail"]["spawn"] == term["detail"]["id"], (recs, term)
    assert recs[-1]["detail"]["ipv4_no_route"] >= 1, recs
    assert recs[-1]["detail"]["udp_no_ports"] >= 1, recs
    hg.stop("egressd")
    hglib.wait_for(lambda: egress_down(alice),
                   what="/api/status with egress.proxy.ok false")
    for perm in (ALLOW, RO_ALLOW):
        r = alice.post("/api/permission", {"permission": perm})
        assert r.status == 200, r
        r = alice.post("/api/run_command",
                       {"command": "touch %s" % marker, "timeout": 20})
        pl.assert_error(r, 503, "unavailable", UNAVAILABLE % perm)
    assert not os.path.exists(marker)
    hg.start("egressd")
    hg.wait_egress(alice)
    assert pl.run(alice, "echo back")["stdout"] == "back\n"


# TCP to an address with no route, a datagram to 127.0.0.1:53: both fail.
BYPASS_PY = ("import socket\n"
             "for f in (lambda: socket.create_connection(\n"
             "              ('192.0.2.1', 80), 5),\n"
             "          lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM)"
             "\n              .sendto(b'q', ('127.0.0.1', 53))):\n"
             "    try: f()\n"
             "    except OSError: pass\n"
             "print('bypass-failed')\n")


def egress_down(session):
    r = session.get("/api/status")
    proxy = (r.json().get("egress") or {}).get("proxy") or {}
    return proxy.get("ok") is False


def bridge_in_netns(args, **kw):
    """hg-egress-bridge ARGS in a network namespace of its own (loopback
    up, nothing else), without bwrap: no pid namespace around it."""
    bridge = os.path.join(hglib.BUILD, "hg-egress-bridge")
    quoted = " ".join("'%s'" % a.replace("'", "'\\''") for a in args)
    return subprocess.Popen(
        ["unshare", "--net", "--", "sh", "-c",
         "ip link set lo up && exec %s %s" % (bridge, quoted)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


@pytest.mark.skipif(not hglib.IS_ROOT, reason="a network namespace: root")
def test_bridge_alone(tmp_path):
    """The bridge by itself: bad arguments and a missing command fail as
    a shell would; the command keeps the bridge's pid and exit status; and
    with no pid namespace to end it, the relay still goes with the
    command (its pidfd)."""
    p = bridge_in_netns(["3128", "/x.sock", "sh"])
    out, err = p.communicate(timeout=hglib.SLOW)
    assert p.returncode == 125 and "usage: hg-egress-bridge" in err
    p = bridge_in_netns(["0", "/x.sock", "--", "true"])
    out, err = p.communicate(timeout=hglib.SLOW)
    assert p.returncode == 125 and "bad port 0" in err
    p = bridge_in_netns(["3128", "/x.sock", "--", "/nonexistent/cmd"])
    out, err = p.communicate(timeout=hglib.SLOW)
    assert p.returncode == 127, err
    assert "hg-egress-bridge: /nonexistent/cmd: No such file" in err

    path = str(tmp_path / "e.sock")
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(4)
    srv.settimeout(hglib.SLOW)
    p = bridge_in_netns(["3128", path, "--", "sh", "-c",
                         "echo $$; curl -s --noproxy '' -x "
                         "http://127.0.0.1:3128 http://example.test/; "
                         "exit 5"])
    conn, _ = srv.accept()
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
    relay = int.from_bytes(creds[:4], "little")
    conn.settimeout(hglib.SLOW)
    data = b""
    while b"\r\n\r\n" not in data:
        data += conn.recv(4096)
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n"
                 b"Connection: close\r\n\r\nok\n")
    conn.close()
    out, err = p.communicate(timeout=hglib.SLOW)
    srv.close()
    assert p.returncode == 5, err
    # unshare execs sh, which execs the bridge, which execs the command:
    # one process all along, the one Popen made.
    assert out == "%d\nok\n" % p.pid, out

    def relay_gone():
        try:
            with open("/proc/%d/stat" % relay) as f:
                return f.read().rpartition(")")[2].split()[0] == "Z"
        except FileNotFoundError:
            return True
    hglib.wait_for(relay_gone, what="the relay %d to go" % relay)
