"""Helpers for the sandbox, terminal and docker system tests: a minimal
WebSocket client (standard library only, able to send hostile frames), a
terminal driver, one way to run a shell snippet or Python code through each
channel a user has (run_command, run_python, a terminal), and host-side
checks (processes, listeners)."""

import base64
import contextlib
import hashlib
import json
import os
import re
import socket
import struct
import subprocess
import time
import uuid

import hglib

WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

OP_CONT, OP_TEXT, OP_BINARY = 0x0, 0x1, 0x2
OP_CLOSE, OP_PING, OP_PONG = 0x8, 0x9, 0xA

CHANNELS = ("command", "python", "terminal")

class WSClosed(Exception):
    """The server closed the WebSocket (close frame or EOF)."""

    def __init__(self, how, data=b""):
        super().__init__("WebSocket closed (%s); before: %r"
                         % (how, data[-300:]))
        self.how = how
        self.data = data


class WebSocket:
    """A client WebSocket over a plain TCP socket (RFC 6455). Every field of
    a frame can be chosen, so tests can send what no library would."""

    def __init__(self, sock, buf=b""):
        self.sock = sock
        self.buf = buf
        self.close_code = None

    # -- raw I/O -----------------------------------------------------------

    def _fill(self, n, deadline):
        """Read until buf holds n bytes; False on EOF; TimeoutError."""
        while len(self.buf) < n:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no WebSocket data in time")
            self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(65536)
            except socket.timeout:
                raise TimeoutError("no WebSocket data in time") from None
            except (ConnectionResetError, BrokenPipeError):
                return False
            if not chunk:
                return False
            self.buf += chunk
        return True

    def _take(self, n):
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def recv_frame(self, timeout=5):
        """(fin, opcode, payload) of the next frame, None on EOF."""
        deadline = time.monotonic() + timeout
        if not self._fill(2, deadline):
            return None
        b0, b1 = self.buf[0], self.buf[1]
        n = b1 & 0x7F
        hdr = 2
        if n == 126:
            hdr = 4
        elif n == 127:
            hdr = 10
        masked = b1 & 0x80
        if masked:
            hdr += 4
        if not self._fill(hdr, deadline):
            return None
        if n == 126:
            n = struct.unpack(">H", self.buf[2:4])[0]
        elif n == 127:
            n = struct.unpack(">Q", self.buf[2:10])[0]
        assert not masked, "the server sent a masked frame"
        assert n <= 16 << 20, "the server announced a %d-byte frame" % n
        if not self._fill(hdr + n, deadline):
            return None
        self._take(hdr)
        return bool(b0 & 0x80), b0 & 0x0F, self._take(n)

    def send_raw(self, data):
        self.sock.sendall(data)

    def frame(self, opcode, payload=b"", fin=True, mask=True, rsv=0,
              length=None):
        """The bytes of one frame; length overrides the announced size."""
        if isinstance(payload, str):
            payload = payload.encode()
        n = len(payload) if length is None else length
        b0 = (0x80 if fin else 0) | (rsv & 7) << 4 | (opcode & 0x0F)
        mbit = 0x80 if mask else 0
        if n < 126:
            head = struct.pack(">BB", b0, mbit | n)
        elif n < 1 << 16:
            head = struct.pack(">BBH", b0, mbit | 126, n)
        else:
            head = struct.pack(">BBQ", b0, mbit | 127, n)
        if not mask:
            return head + payload
        key = os.urandom(4)
        masked = bytes(b ^ key[i & 3] for i, b in enumerate(payload)) \
            if len(payload) < 4096 else _mask_fast(payload, key)
        return head + key + masked

    def send_frame(self, opcode, payload=b"", **kw):
        self.sock.sendall(self.frame(opcode, payload, **kw))

    def send_binary(self, data):
        self.send_frame(OP_BINARY, data)

    def send_text(self, text):
        self.send_frame(OP_TEXT, text)

    def send_close(self, code=1000, reason=b""):
        self.send_frame(OP_CLOSE, struct.pack(">H", code) + reason)

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    # -- messages ----------------------------------------------------------

    def read_data(self, timeout=5):
        """The payload of the next data frame; answers pings; raises
        WSClosed on a close frame or EOF, TimeoutError when none comes."""
        deadline = time.monotonic() + timeout
        while True:
            f = self.recv_frame(max(0.01, deadline - time.monotonic()))
            if f is None:
                raise WSClosed("eof")
            fin, op, payload = f
            if op == OP_PING:
                self.send_frame(OP_PONG, payload)
                continue
            if op == OP_PONG:
                continue
            if op == OP_CLOSE:
                self.close_code = struct.unpack(">H", payload[:2])[0] \
                    if len(payload) >= 2 else 1005
                raise WSClosed("close %d" % self.close_code)
            return payload

    def read_until(self, pattern, timeout=10, data=b""):
        """Collect terminal output until the regex pattern (bytes) matches
        it with \\r\\n turned into \\n; returns (match, all output)."""
        rx = re.compile(pattern, re.S)
        deadline = time.monotonic() + timeout
        while True:
            text = data.replace(b"\r\n", b"\n")
            m = rx.search(text)
            if m:
                return m, text
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError("terminal output never matched %r; "
                                     "got %r" % (pattern, text[-2000:]))
            try:
                data += self.read_data(left)
            except TimeoutError:
                continue
            except WSClosed as e:
                raise WSClosed(e.how, data) from None

    def wait_closed(self, timeout=2.0):
        """How the server ended the connection within timeout: "close N"
        (a close frame), "eof", or None when it is still open. Data frames
        that come first are read and dropped."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            try:
                self.read_data(left)
            except WSClosed as e:
                return e.how
            except TimeoutError:
                return None
            except OSError:
                return "eof"


def _mask_fast(payload, key):
    """XOR a long payload with the 4-byte key, fast."""
    n = len(payload)
    k = int.from_bytes(key * ((n + 3) // 4), "big") >> (8 * ((-n) % 4))
    return (int.from_bytes(payload, "big") ^ k).to_bytes(n, "big")


def ws_key():
    return base64.b64encode(os.urandom(16)).decode()


def ws_handshake(hg, path, cookie=None, bearer=None, origin=None,
                 version="13", key=None, drop=(), extra=None, timeout=5):
    """Send a WebSocket upgrade for path. Returns (status, headers dict
    lower-cased, body, WebSocket or None): the WebSocket when the server
    switched protocols, with its Sec-WebSocket-Accept checked."""
    key = key or ws_key()
    host = "127.0.0.1:%d" % hg.port
    h = [("Host", host), ("Upgrade", "websocket"), ("Connection", "Upgrade"),
         ("Sec-WebSocket-Version", version), ("Sec-WebSocket-Key", key)]
    if origin:
        h.append(("Origin", origin))
    if cookie:
        h.append(("Cookie", "hg_session=" + cookie))
    if bearer:
        h.append(("Authorization", "Bearer " + bearer))
    h += list((extra or {}).items())
    h = [(k, v) for k, v in h if k not in drop]
    req = "GET %s HTTP/1.1\r\n" % path + "".join(
        "%s: %s\r\n" % kv for kv in h) + "\r\n"
    s = socket.create_connection(("127.0.0.1", hg.port), timeout=timeout)
    ok = False
    try:
        s.sendall(req.encode())
        data = b""
        deadline = time.monotonic() + timeout
        while b"\r\n\r\n" not in data:
            s.settimeout(max(0.01, deadline - time.monotonic()))
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
        head, sep, rest = data.partition(b"\r\n\r\n")
        assert sep, "no HTTP response to the upgrade: %r" % data[:300]
        status, headers, _ = hglib.parse_raw(head + b"\r\n\r\n")
        if status != 101:
            n = int(headers.get("content-length", "0"))
            while len(rest) < n:
                s.settimeout(max(0.01, deadline - time.monotonic()))
                chunk = s.recv(65536)
                if not chunk:
                    break
                rest += chunk
            return status, headers, rest, None
        want = base64.b64encode(hashlib.sha1(
            (key + WS_GUID).encode()).digest()).decode()
        assert headers.get("sec-websocket-accept") == want, headers
        assert headers.get("upgrade", "").lower() == "websocket", headers
        ok = True
        return status, headers, b"", WebSocket(s, rest)
    finally:
        if not ok:
            s.close()


def ws_path(term_id):
    return "/api/terminals/%s/ws" % term_id


# -- terminals ----------------------------------------------------------------

class Terminal:
    """A terminal of a session, driven over its WebSocket."""

    PROMPT = b"__HGPS__ "

    def __init__(self, session, cols=200, rows=50):
        self.session = session
        r = session.post("/api/terminals", {"cols": cols, "rows": rows},
                         timeout=15)
        assert r.status == 201, "terminal create: %r" % r
        self.id = r.json()["id"]
        # HOST.HEX16 in a fleet (a PostgreSQL store), else HEX16.
        assert re.fullmatch(r"([a-z0-9][a-z0-9-]{0,31}\.)?[0-9a-f]{16}",
                            self.id), self.id
        self.ws = None

    def attach(self, ready=True):
        """Attach (a new WebSocket replaces self.ws); with ready, wait for
        the shell and give it a recognisable prompt."""
        st, h, body, ws = ws_handshake(self.session.hg, ws_path(self.id),
                                       cookie=self.session.cookie)
        assert st == 101, "attach %s: %d %r" % (self.id, st, body)
        self.ws = ws
        if ready:
            # Typed as PS1='__HG''PS__ ': only the prompt itself matches.
            ws.send_binary(b"PS1='__HG''PS__ '\n")
            ws.read_until(re.escape(self.PROMPT), timeout=15)
        return ws

    def run(self, cmdline, timeout=20):
        """Type cmdline into the shell; returns (output, exit status).
        The markers are built by the shell, so the echo of the typed line
        never matches them."""
        tag = uuid.uuid4().hex[:10]
        line = ('M=__HG; echo "${M}_B_%s__"; %s; echo "${M}_E_%s_$?__"\n'
                % (tag, cmdline, tag))
        self.ws.send_binary(line.encode())
        m, _ = self.ws.read_until(
            rb"__HG_B_%s__\n(.*?)__HG_E_%s_(\d+)__\n.*?%s" % (
                tag.encode(), tag.encode(), re.escape(self.PROMPT)),
            timeout=timeout)
        return m.group(1).decode("utf-8", "replace"), int(m.group(2))

    def delete(self):
        r = self.session.request("DELETE", "/api/terminals/" + self.id,
                                 timeout=15)
        return r

    def close(self):
        if self.ws:
            self.ws.close()
            self.ws = None
        self.delete()


@contextlib.contextmanager
def terminal(session, cols=200, rows=50, attach=True):
    t = Terminal(session, cols, rows)
    try:
        if attach:
            t.attach()
        yield t
    finally:
        t.close()


def terminal_listed(session, term_id):
    """The entry of term_id in GET /api/terminals, or None."""
    r = session.get("/api/terminals")
    assert r.status == 200, r
    for t in r.json()["terminals"]:
        if t["id"] == term_id:
            return t
    return None


# -- one snippet through each channel -----------------------------------------

class Result:
    """What a user sees of a snippet: the output (stdout and stderr
    merged) and the exit status."""

    def __init__(self, output, exit, raw=None):
        self.output = output
        self.exit = exit
        self.raw = raw

    def __repr__(self):
        return "<exit %r output %r>" % (self.exit, self.output[-1500:])


def _b64(text):
    return base64.b64encode(text.encode()).decode()


def _api_result(r):
    assert r.status == 200, "spawn refused: %r" % r
    doc = r.json()
    assert doc["mode"] == "sandbox", doc
    return Result(doc["stdout"] + doc["stderr"], doc["exit_code"], doc)


def run_shell(session, channel, snippet, timeout=20):
    """Run a bash snippet through channel; returns a Result."""
    if channel == "command":
        r = session.post("/api/run_command",
                         {"command": "{ %s\n} 2>&1" % snippet,
                          "timeout": timeout}, timeout=timeout + 10)
        return _api_result(r)
    if channel == "python":
        code = ("import subprocess, sys\n"
                "r = subprocess.run(['/bin/bash', '-c', %r], "
                "stderr=subprocess.STDOUT)\n"
                "sys.exit(r.returncode if r.returncode >= 0 "
                "else 128 - r.returncode)\n" % snippet)
        r = session.post("/api/run_python", {"code": code,
                                             "timeout": timeout},
                         timeout=timeout + 10)
        return _api_result(r)
    if channel == "terminal":
        with terminal(session) as t:
            out, rc = t.run('bash -c "$(printf %%s %s | base64 -d)" 2>&1'
                            % _b64(snippet), timeout=timeout)
        return Result(out, rc)
    raise ValueError(channel)


def run_py(session, channel, code, timeout=20):
    """Run Python code through channel; returns a Result."""
    if channel == "command":
        r = session.post("/api/run_command",
                         {"command": "/usr/bin/python3 - 2>&1",
                          "stdin": code, "timeout": timeout},
                         timeout=timeout + 10)
        return _api_result(r)
    if channel == "python":
        r = session.post("/api/run_python", {"code": code,
                                             "timeout": timeout},
                         timeout=timeout + 10)
        return _api_result(r)
    if channel == "terminal":
        with terminal(session) as t:
            out, rc = t.run('/usr/bin/python3 -c "$(printf %%s %s | '
                            'base64 -d)" 2>&1' % _b64(code), timeout=timeout)
        return Result(out, rc)
    raise ValueError(channel)


def py_json(session, channel, code, timeout=20):
    """Run Python code that prints one line 'RESULT <json>'; returns the
    decoded JSON (asserting the line is there)."""
    res = run_py(session, channel, code, timeout)
    m = re.search(r"^RESULT (.*)$", res.output, re.M)
    assert m, "no RESULT line from %s: %r" % (channel, res)
    return json.loads(m.group(1))


# Python that defines sc(nr, *args) -> "ok" or the errno name, and a way to
# report results; prepended to the probes the tests send.
PY_PRELUDE = r'''
import ctypes, errno, json, os, socket, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def sc(nr, *args):
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args])
    if r == -1:
        return errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno()))
    return "ok"
def oserr(fn):
    try:
        fn()
        return "ok"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e))
def report(d):
    sys.stdout.flush()
    print("RESULT " + json.dumps(d))
'''


# -- the host's side ----------------------------------------------------------

def host_processes(pred):
    """[(pid, uid, argv)] of host processes whose argv satisfies pred."""
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % name, "rb") as f:
                argv = [a.decode("utf-8", "replace")
                        for a in f.read().split(b"\0") if a]
            uid = os.stat("/proc/%s" % name).st_uid
        except OSError:
            continue
        if argv and pred(argv):
            out.append((int(name), uid, argv))
    return out


def children_of(ppid, name):
    """Pids of host processes named name (comm) whose parent is ppid."""
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % pid) as f:
                stat = f.read()
        except OSError:
            continue
        comm = stat[stat.index("(") + 1:stat.rindex(")")]
        parent = int(stat[stat.rindex(")") + 2:].split()[1])
        if comm == name and parent == ppid:
            out.append(int(pid))
    return out


def wait_gone(pred, timeout=6):
    """Wait until no host process satisfies pred; returns the survivors
    (an empty list when they are gone)."""
    deadline = time.monotonic() + timeout
    while True:
        left = host_processes(pred)
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.1)


class Listener:
    """A TCP server on the host's 127.0.0.1 that counts connections."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]

    def accepted(self, timeout=0.0):
        """Number of connections waiting to be accepted (all taken)."""
        n = 0
        self.sock.settimeout(timeout)
        while True:
            try:
                c, _ = self.sock.accept()
            except (socket.timeout, BlockingIOError):
                return n
            c.close()
            n += 1
            self.sock.settimeout(0.0)

    def close(self):
        self.sock.close()


def network_profile_missing():
    """Why the workspace-write+network profile cannot run on this machine
    (a skip reason), or None. slirp4netns runs as the sandbox's user and
    opens /dev/net/tun, which Debian's udev makes 0666
    (/lib/udev/rules.d/50-udev-default.rules). The tests change no
    device's mode: a machine without udev that left it 0600 skips them,
    saying so, and a spawn that fails where it is 0666 fails them."""
    if not os.access("/usr/bin/slirp4netns", os.X_OK):
        return "slirp4netns is not installed (Debian package slirp4netns)"
    try:
        st = os.stat("/dev/net/tun")
    except OSError as e:
        return "no /dev/net/tun here: %s" % e.strerror
    if st.st_mode & 0o006 != 0o006:
        return ("/dev/net/tun is mode %04o, not 0666 as Debian's udev makes "
                "it: slirp4netns cannot open it as the sandbox's user (as "
                "root: chmod 0666 /dev/net/tun)" % (st.st_mode & 0o7777))
    return None


def unprivileged(argv):
    """argv as an unprivileged host user (hostgate-test as root), for
    control runs of a probe outside the sandbox."""
    if hglib.IS_ROOT:
        uid, gid = hglib.account(hglib.TEST_USER)
        return ["setpriv", "--reuid=%d" % uid, "--regid=%d" % gid,
                "--clear-groups", "--"] + list(argv)
    return list(argv)


def host_py_json(code, timeout=20):
    """Run probe code (PY_PRELUDE style, printing RESULT) on the host as an
    unprivileged user, outside any sandbox; the decoded RESULT."""
    r = subprocess.run(unprivileged(["/usr/bin/python3", "-c", code]),
                       capture_output=True, text=True, timeout=timeout,
                       cwd="/")
    m = re.search(r"^RESULT (.*)$", r.stdout, re.M)
    assert m, "control probe: %r %r" % (r.stdout, r.stderr)
    return json.loads(m.group(1))
