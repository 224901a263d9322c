"""hostgate's benchmarks: each figure beside a reference measured in the same
run, and their ratio. Figures only, never pass/fail. Started by run.sh
(`make bench`), which checks the tools and builds bpfdump first.

    /usr/bin/python3 tests/bench/bench.py --bpfdump PATH
        [--policy-bench PATH] [--store-bench PATH] [--mode user|root]
        [--out FILE]
        [--only spawn|http|mcp|egress]

1. GET /api/status through frontd and brokerd with wrk, against nginx
   serving a static file on another loopback port;
2. (a) POST /api/run_command {"command": "true"}, median wall time, against
   the same bwrap command line (taken from sandboxd's debug log) spawned
   directly with the same seccomp BPF on fd 3;
   (b) terminal throughput: cat of a 64 MiB file read over the WebSocket,
   against cat of the same file to a plain pty;
   (c) VmRSS of each daemon idle and with 100 attached terminals;
   (d) spawn ratios (issue 9): `true` through the API against the same
   bwrap line run directly, isolated (one every 500 ms) and back to back,
   runs interleaved; and another user's `true` latency during 20
   concurrent network-profile spawns against its idle latency;
   (e) tools/call run_command `true` through /mcp (a 2025-11-25 session
   and 2026-07-28 requests) beside POST /api/run_command with the same
   agent token, runs interleaved (issue 12);
   (f) curl of a 64 MiB file inside a workspace-write+allowlist sandbox,
   through the egress proxy, beside curl from the host straight to the
   same server in a network namespace of the benchmark's own, HTTP and
   HTTPS, runs interleaved (issue 13; root only);
3. bench_policy's figures (brokerd's decision beside an IPC round trip),
   when given;
4. bench_store's figures (mint, revoke, login, logout and lookups with 100
   and with 100,000 tokens stored), when given.

docs/performance.md describes the method and the figures.

Only loopback addresses are used, and for (f) the addresses of the
benchmark's own network namespace; every loop is bounded in count and time.
"""

import argparse
import base64
import hashlib
import http.client
import json
import os
import platform
import re
import select
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "system"))
import hglib  # noqa: E402
import egresslib  # noqa: E402

BENCH_USER = ("bench", "bench-password-1")
OTHER_USER = ("bench2", "bench2-password-1")   # the user beside the load
WRK_SECONDS = int(os.environ.get("BENCH_WRK_SECONDS", "10"))
WRK_ARGS = ["-t2", "-c32", "-d%ds" % WRK_SECONDS, "--latency"]
WRK_ARGS_256 = ["-t2", "-c256", "-d%ds" % WRK_SECONDS, "--latency"]
WRK_ROUNDS = int(os.environ.get("BENCH_WRK_ROUNDS", "3"))
RUNS, WARMUP = 50, 5
ISO_RUNS, ISO_GAP = 30, 0.5     # isolated spawns: one every 500 ms
NET_SPAWNS = 20                 # concurrent network-profile spawns
LAT_RUNS = 20                   # the other user's `true`, idle and loaded
BIG_BYTES = 64 * 1024 * 1024
CAT_ROUNDS = 5
TERMINALS = 100
STATIC_BYTES = 100
DEADLINE_SECONDS = 600          # the whole run stops itself after this
MARK_TYPED = b"END$((6*7))END"   # what the shell echoes as typed ...
MARK = b"END42END"               # ... and what it prints: never the same


class BenchError(Exception):
    pass


def log(msg):
    print("bench: " + msg, flush=True)


# Failures retried, for the report: the daemons' uid may be shared with
# other hostgates on the machine (system tests), whose processes count
# against the same RLIMIT_NPROC as ours.
RETRIED = []


def retrying(what, fn, tries=3):
    """fn() again after a BenchError, up to tries times in all; each retry
    is logged and reported."""
    for i in range(tries):
        try:
            return fn()
        except BenchError as e:
            if i == tries - 1:
                raise
            RETRIED.append("%s: %s" % (what, e))
            log("warning: %s failed, retrying: %s" % (what, e))
            time.sleep(0.5)


# -- HTTP ------------------------------------------------------------------

class Api:
    """A keep-alive HTTP connection to frontd carrying one session."""

    def __init__(self, port, cookie, csrf):
        self.port = port
        self.cookie = cookie
        self.csrf = csrf
        self.conn = None

    def request(self, method, path, body=None, timeout=30):
        """(status, parsed JSON or raw body) of one request; reconnects
        once when the server closed the kept-alive connection."""
        headers = {"Cookie": "hg_session=" + self.cookie}
        if method in ("POST", "DELETE"):
            headers["X-CSRF-Token"] = self.csrf
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        for attempt in (0, 1):
            if self.conn is None:
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port,
                                                       timeout=timeout)
            try:
                self.conn.request(method, path, body=data, headers=headers)
                r = self.conn.getresponse()
                raw = r.read()
            except (http.client.RemoteDisconnected, BrokenPipeError,
                    ConnectionResetError):
                self.close()
                if attempt:
                    raise
                continue
            except BaseException:
                self.close()
                raise
            if r.getheader("Connection", "").lower() == "close":
                self.close()
            try:
                return r.status, json.loads(raw)
            except ValueError:
                return r.status, raw

    def close(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None


# -- WebSocket -------------------------------------------------------------

WS_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


class WebSocket:
    """A minimal RFC 6455 client for terminal bytes: binary frames out
    (masked), frames in parsed in bulk so that counting tens of MiB is not
    bound by per-frame Python overhead."""

    def __init__(self, port, path, cookie, timeout=10):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        key = base64.b64encode(os.urandom(16))
        req = (b"GET " + path.encode() + b" HTTP/1.1\r\n"
               b"Host: 127.0.0.1:%d\r\n" % port +
               b"Upgrade: websocket\r\nConnection: Upgrade\r\n"
               b"Sec-WebSocket-Key: " + key + b"\r\n"
               b"Sec-WebSocket-Version: 13\r\n"
               b"Cookie: hg_session=" + cookie.encode() + b"\r\n\r\n")
        self.sock.sendall(req)
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise BenchError("WebSocket %s: closed during the handshake: "
                                 "%r" % (path, head[:300]))
            head += chunk
        head, _, rest = head.partition(b"\r\n\r\n")
        if not head.startswith(b"HTTP/1.1 101"):
            raise BenchError("WebSocket %s: %r" % (path, head[:300]))
        want = base64.b64encode(hashlib.sha1(key + WS_GUID).digest())
        if want not in head:
            raise BenchError("WebSocket %s: bad Sec-WebSocket-Accept" % path)
        self.buf = bytearray(rest)
        self.closed = False
        self.close_reason = "connection closed without a close frame"

    def fileno(self):
        return self.sock.fileno()

    def _send(self, opcode, payload):
        mask = os.urandom(4)
        n = len(payload)
        if n < 126:
            head = bytes([0x80 | opcode, 0x80 | n])
        elif n < 65536:
            head = bytes([0x80 | opcode, 0x80 | 126]) + n.to_bytes(2, "big")
        else:
            head = bytes([0x80 | opcode, 0x80 | 127]) + n.to_bytes(8, "big")
        masked = bytes(b ^ mask[i & 3] for i, b in enumerate(payload))
        self.sock.sendall(head + mask + masked)

    def send(self, data):
        self._send(0x2, data)

    def feed(self):
        """Read what the socket has and parse the complete frames: returns
        the list of binary payloads (bytes); sets closed on a close frame
        or EOF."""
        try:
            chunk = self.sock.recv(1 << 18)
        except socket.timeout:
            return []
        if not chunk:
            self.closed = True
            return []
        self.buf += chunk
        out = []
        buf, off, end = self.buf, 0, len(self.buf)
        while end - off >= 2:
            b0, b1 = buf[off], buf[off + 1]
            n, hl = b1 & 0x7f, 2
            if n == 126:
                if end - off < 4:
                    break
                n, hl = int.from_bytes(buf[off + 2:off + 4], "big"), 4
            elif n == 127:
                if end - off < 10:
                    break
                n, hl = int.from_bytes(buf[off + 2:off + 10], "big"), 10
            if b1 & 0x80:
                raise BenchError("WebSocket: the server masked a frame")
            if end - off < hl + n:
                break
            payload = bytes(buf[off + hl:off + hl + n])
            off += hl + n
            op = b0 & 0x0f
            if op in (0x0, 0x2):
                out.append(payload)
            elif op == 0x8:
                self.closed = True
                self.close_reason = "%d %s" % (
                    int.from_bytes(payload[:2], "big") if len(payload) >= 2
                    else 1005, payload[2:].decode("utf-8", "replace"))
            elif op == 0x9:
                self._send(0xa, payload)
            # text frames (JSON control) and pongs carry no terminal bytes
        del self.buf[:off]
        return out

    def close(self):
        try:
            if not self.closed:
                self._send(0x8, b"\x03\xe8")
        except OSError:
            pass
        self.sock.close()


def ws_drain(ws, quiet, limit):
    """Read until nothing arrives for quiet seconds (or limit seconds in all);
    returns the bytes received."""
    got = bytearray()
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline and not ws.closed:
        r, _, _ = select.select([ws], [], [], quiet)
        if not r:
            break
        for p in ws.feed():
            got += p
    return bytes(got)


# -- hostgate --------------------------------------------------------------

def start_hostgate(mode, more_env=None):
    """A hostgate in a private temp dir; sandboxd logs at debug level so
    that the bwrap command line of each spawn is in its log. more_env: the
    egress benchmark's configuration."""
    env = {
        "HOSTGATE_LOG_LEVEL": "warn",
        "HOSTGATE_MAX_TERMINALS_PER_USER": "200",
        "HOSTGATE_MAX_COMMANDS_PER_USER": "64",
        "HOSTGATE_LOGIN_RATE_PER_MINUTE": "10000",
        "HOSTGATE_LOGIN_BURST": "10000",
        "HOSTGATE_SPAWN_RATE_PER_MINUTE": "100000",
        "HOSTGATE_SPAWN_BURST": "100000",
        # wrk opens all its connections (256 at -c256) from one address,
        # which the per-address limit (64 by default) would shed or
        # answer 503: the benchmark measures the request path, not that.
        "HOSTGATE_MAX_CONNECTIONS_PER_ADDRESS": "1024",
    }
    env.update(more_env or {})
    hg = hglib.Hostgate(mode, env=env, name="bench")
    try:
        for name in hglib.DAEMONS:
            extra = {"HOSTGATE_LOG_LEVEL": "debug"} if name == "sandboxd" \
                else None
            hg.start(name, extra_env=extra)
        hg.wait_healthy(20)
        hg.add_user(*BENCH_USER, admin=True)
        hg.add_user(*OTHER_USER)
    except BaseException:
        stop_hostgate(hg, failed=True)
        raise
    return hg


def stop_hostgate(hg, failed=False):
    """Stop the daemons and remove the directory. After a failure, first
    print the end of each daemon's log; BENCH_KEEP=1 keeps the directory."""
    problems = ["%s had exited with status %d before the end" %
                (n, p.returncode) for n, p in hg.procs.items()
                if p.poll() is not None]
    problems += hg.shutdown()
    hglib._LIVE.discard(hg)
    if failed:
        for name in hglib.BINARIES:
            lines = [ln for ln in hg.log_text(name).splitlines()
                     if " DEBUG: " not in ln]
            if lines:
                print("---- %s log, last lines\n%s" % (
                    name, "\n".join(lines[-15:])), file=sys.stderr)
    if failed and os.environ.get("BENCH_KEEP") == "1":
        log("hostgate directory kept (BENCH_KEEP=1): %s" % hg.dir)
    else:
        shutil.rmtree(hg.dir, ignore_errors=True)
    return problems


def sandbox_user(hg, user=BENCH_USER[0]):
    """(uid, gid) that sandboxd spawns the user's commands as, or None for
    ourselves: the references run as that user too. In root mode that is
    the user's own uid (users.json), or sandboxd's where users have none."""
    if hg.mode == "root":
        try:
            with open(os.path.join(hg.state, "users.json")) as f:
                doc = json.load(f)
            users = doc.get("users", doc) if isinstance(doc, dict) else doc
            if isinstance(users, list):
                users = {u.get("name"): u for u in users}
            u = users.get(user) or {}
            if isinstance(u.get("uid"), int):
                return u["uid"], u.get("gid", u["uid"])
        except (OSError, ValueError, AttributeError):
            pass
        return hglib.account(hglib.SERVICE_USERS["sandboxd"])
    return hg.run_as


def containment(api):
    """The containment object of /api/status (what enforces what), or
    None when this build reports none."""
    st, doc = api.request("GET", "/api/status")
    if st != 200 or not isinstance(doc, dict):
        return None
    for d in (doc, doc.get("sandboxd") or {}):
        if isinstance(d.get("containment"), dict):
            return d["containment"]
    return None


def login(hg):
    s = hg.login(*BENCH_USER)
    return Api(hg.port, s.cookie, s.csrf), s.cookie


def rss_kib(pid):
    v = hglib.proc_status(pid).get("VmRSS", "0 kB").split()[0]
    return int(v)


def daemon_rss(hg):
    return {n: rss_kib(hg.pid(n)) for n in hglib.DAEMONS}


def new_terminal(api):
    st, doc = api.request("POST", "/api/terminals", {"cols": 80, "rows": 24})
    if st != 201:
        raise BenchError("POST /api/terminals: %d %r" % (st, doc))
    return doc["id"]


def close_terminal(api, tid):
    st, doc = api.request("DELETE", "/api/terminals/" + tid)
    if st not in (200, 204, 404):
        raise BenchError("DELETE /api/terminals/%s: %d %r" % (tid, st, doc))


def wait_no_terminals(api, limit=20):
    """Wait until none of the user's terminals runs (the shells reaped),
    then drop the exited ones from the list."""
    deadline = time.monotonic() + limit
    while True:
        st, doc = api.request("GET", "/api/terminals")
        if st != 200:
            raise BenchError("GET /api/terminals: %d %r" % (st, doc))
        terms = doc.get("terminals", [])
        if not any(t.get("running") for t in terms):
            break
        if time.monotonic() > deadline:
            log("warning: %d terminals still running after %ds"
                % (sum(1 for t in terms if t.get("running")), limit))
            return
        time.sleep(0.1)
    for t in terms:
        close_terminal(api, t["id"])


# -- 1. HTTP: GET /api/status vs nginx -------------------------------------

def wrk(url, headers=(), args=None):
    argv = ["wrk"] + (args or WRK_ARGS)
    for h in headers:
        argv += ["-H", h]
    argv.append(url)
    r = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        raise BenchError("wrk failed (%d): %s" % (r.returncode, r.stderr))
    return parse_wrk(r.stdout), " ".join(shlex.quote(a) for a in argv)


def parse_wrk(out):
    """requests/s, p50 and p99 in ms, request count and non-2xx count."""
    units = {"us": 0.001, "ms": 1.0, "s": 1000.0, "m": 60000.0}

    def lat(pct):
        m = re.search(r"^\s*%s%%\s+([\d.]+)(us|ms|s|m)\s*$" % pct, out, re.M)
        if not m:
            raise BenchError("no %s%% latency in wrk's output:\n%s"
                             % (pct, out))
        return float(m.group(1)) * units[m.group(2)]

    rps = re.search(r"^Requests/sec:\s+([\d.]+)", out, re.M)
    total = re.search(r"^\s*(\d+) requests in", out, re.M)
    if not rps or not total:
        raise BenchError("cannot read wrk's output:\n" + out)
    bad = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out)
    errs = re.search(r"Socket errors:(.*)$", out, re.M)
    return {"rps": float(rps.group(1)), "p50_ms": lat(50), "p99_ms": lat(99),
            "requests": int(total.group(1)),
            "non2xx": int(bad.group(1)) if bad else 0,
            "socket_errors": errs.group(1).strip() if errs else ""}


def start_nginx(tmp):
    """nginx with its own minimal configuration: one worker, no access
    log, serving STATIC_BYTES bytes from tmp/www on a free loopback port."""
    d = os.path.join(tmp, "nginx")
    www = os.path.join(d, "www")
    os.makedirs(www)
    for p in (d, www):
        os.chmod(p, 0o755)
    with open(os.path.join(www, "static.txt"), "wb") as f:
        f.write(b"x" * (STATIC_BYTES - 1) + b"\n")
    os.chmod(os.path.join(www, "static.txt"), 0o644)
    # Bound here on port 0 and handed to nginx through its inherited-sockets
    # variable (what a binary upgrade uses): no port is picked here and
    # bound later, when another socket may hold it.
    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(511)
    port = lsock.getsockname()[1]
    user = "user nobody nogroup;\n" if os.geteuid() == 0 else ""
    conf = os.path.join(d, "nginx.conf")
    with open(conf, "w") as f:
        f.write("""%sworker_processes 1;
pid %s/nginx.pid;
error_log %s/error.log warn;
events { worker_connections 1024; }
http {
    access_log off;
    client_body_temp_path %s/tmp-body;
    proxy_temp_path %s/tmp-proxy;
    fastcgi_temp_path %s/tmp-fastcgi;
    uwsgi_temp_path %s/tmp-uwsgi;
    scgi_temp_path %s/tmp-scgi;
    default_type text/plain;
    server {
        listen 127.0.0.1:%d;
        root %s;
    }
}
""" % ((user,) + (d,) * 7 + (port, www)))
    env = dict(os.environ, NGINX="%d;" % lsock.fileno())
    try:
        p = subprocess.Popen(["nginx", "-p", d, "-c", conf, "-e",
                              os.path.join(d, "error.log"), "-g",
                              "daemon off;"], env=env,
                             pass_fds=(lsock.fileno(),),
                             stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL,
                             stderr=open(os.path.join(d, "stderr.log"), "wb"))
    finally:
        lsock.close()

    def up():
        if p.poll() is not None:
            raise BenchError("nginx exited %d: %s" % (p.returncode, open(
                os.path.join(d, "stderr.log")).read()))
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
        try:
            c.request("GET", "/static.txt")
            r = c.getresponse()
            return r.status == 200 and len(r.read()) == STATIC_BYTES
        finally:
            c.close()
    try:
        hglib.wait_for(up, 10, what="nginx on port %d" % port)
    except BaseException:
        stop_process(p)
        raise
    return p, port


def stop_process(p, timeout=5):
    if p.poll() is None:
        p.terminate()
        try:
            p.wait(timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def median_round(rounds):
    """The median of each figure over wrk rounds; non-2xx added up."""
    out = {k: statistics.median(r[k] for r in rounds)
           for k in ("rps", "p50_ms", "p99_ms")}
    out["requests"] = sum(r["requests"] for r in rounds)
    out["non2xx"] = sum(r["non2xx"] for r in rounds)
    out["socket_errors"] = "; ".join(r["socket_errors"] for r in rounds
                                     if r["socket_errors"])
    out["rounds"] = rounds
    return out


def bench_http(hg, cookie, tmp, res):
    log("1. GET /api/status with wrk %s and -c256, %d rounds alternating "
        "with nginx" % (" ".join(WRK_ARGS), WRK_ROUNDS))
    st, doc = Api(hg.port, cookie, "").request("GET", "/api/status")
    body = json.dumps(doc, separators=(",", ":"))
    if st != 200:
        raise BenchError("GET /api/status: %d %r" % (st, doc))
    nginx, port = start_nginx(tmp)
    hgr, ngr, mdr, hg256, ng256 = [], [], [], [], []
    hg_url = "http://127.0.0.1:%d/api/status" % hg.port
    ng_url = "http://127.0.0.1:%d/static.txt" % port
    auth = ["Cookie: hg_session=" + cookie]
    cpu = {"hostgate": 0.0, "nginx": 0.0}
    pids = [hg.pid(n) for n in ("frontd", "brokerd", "sandboxd")]
    try:
        for i in range(WRK_ROUNDS):
            # Which goes first alternates from round to round.
            pair = [(hgr, hg_url, auth, "hostgate"),
                    (ngr, ng_url, (), "nginx")]
            if i % 2:
                pair.reverse()
            for out, url, hdr, who in pair:
                c0 = proc_cpu(pids if who == "hostgate" else nginx_pids(nginx))
                r, cmd = wrk(url, hdr)
                cpu[who] += proc_cpu(pids if who == "hostgate" else
                                     nginx_pids(nginx)) - c0
                out.append(r)
                if who == "hostgate":
                    cmd_hg = cmd
                else:
                    cmd_ng = cmd
            pair = [(hg256, hg_url, auth), (ng256, ng_url, ())]
            if i % 2:
                pair.reverse()
            for out, url, hdr in pair:
                r, _ = wrk(url, hdr, WRK_ARGS_256)
                out.append(r)
            # The execution-mode policy endpoint (issue 4), same run.
            r, _ = wrk("http://127.0.0.1:%d/api/execution-mode" % hg.port,
                       auth)
            mdr.append(r)
    finally:
        stop_process(nginx)
    res["http_mode"] = median_round(mdr)
    res["http"] = {"hostgate": median_round(hgr), "nginx": median_round(ngr),
                   "hostgate_256": median_round(hg256),
                   "nginx_256": median_round(ng256),
                   "status_bytes": len(body),
                   "cpu_us": {w: cpu[w] * 1e6 / max(1, sum(
                       x["requests"] for x in (hgr if w == "hostgate"
                                               else ngr)))
                              for w in cpu},
                   "cmd_hostgate": cmd_hg.replace(cookie, "$COOKIE"),
                   "cmd_nginx": cmd_ng}
    for who in ("hostgate", "nginx", "hostgate_256", "nginx_256"):
        r = res["http"][who]
        log("   %-12s %9.0f req/s  p50 %.2f ms  p99 %.2f ms  (medians; "
            "req/s by round %s; %d non-2xx%s)"
            % (who, r["rps"], r["p50_ms"], r["p99_ms"],
               ", ".join("%.0f" % x["rps"] for x in r["rounds"]),
               r["non2xx"], ", socket errors: " + r["socket_errors"]
               if r["socket_errors"] else ""))
    log("   CPU per request at -c32 (utime+stime of the servers): hostgate "
        "%.1f us, nginx %.1f us" % (res["http"]["cpu_us"]["hostgate"],
                                    res["http"]["cpu_us"]["nginx"]))


def proc_cpu(pids):
    """User and system CPU seconds used so far by the processes pids."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        try:
            with open("/proc/%d/stat" % pid) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
        except (OSError, IndexError, ValueError):
            pass
    return total / tick


def nginx_pids(p):
    """nginx's master and its workers."""
    out = [p.pid]
    try:
        with open("/proc/%d/task/%d/children" % (p.pid, p.pid)) as f:
            out += [int(x) for x in f.read().split()]
    except OSError:
        pass
    return out


# -- 2a. run_command vs bwrap ----------------------------------------------

def bwrap_line(hg, since):
    """The argv of the last command spawn logged by sandboxd after offset
    since of its log."""
    text = hg.log_text("sandboxd")[since:]
    lines = re.findall(r"DEBUG:? .*?\bspawn [0-9a-f]+: (/\S*bwrap "
                       r".*--new-session.*)$", text, re.M)
    if not lines:
        raise BenchError("no bwrap command line in sandboxd's log (is the "
                         "backend bwrap?)")
    return shlex.split(lines[-1])


class DirectSpawner:
    """A forked worker, switched to sandboxd's user, that runs a bwrap argv
    once per request the way sandboxd does: fork and exec (posix_spawn, no
    shell), stdin /dev/null, stdout and stderr to pipes read to EOF, the BPF
    program on fd 3. Answers each request with the wall time in seconds,
    so that its runs can alternate with hostgate's."""

    def __init__(self, argv, bpf, as_user):
        req_r, self.req_w = os.pipe()
        self.res_r, res_w = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:
            code = 0
            try:
                os.close(self.req_w)
                os.close(self.res_r)
                if as_user is not None and as_user[0] != os.geteuid():
                    os.setgroups([])
                    os.setresgid(as_user[1], as_user[1], as_user[1])
                    os.setresuid(as_user[0], as_user[0], as_user[0])
                while os.read(req_r, 1) == b"r":
                    try:
                        msg = {"t": self._run(argv, bpf)}
                    except Exception as e:
                        msg = {"error": "%s: %s" % (type(e).__name__, e)}
                    os.write(res_w, json.dumps(msg).encode() + b"\n")
            except BaseException:
                code = 1
            finally:
                os._exit(code)
        os.close(req_r)
        os.close(res_w)
        self.res = os.fdopen(self.res_r, "rb")

    @staticmethod
    def _run(argv, bpf):
        env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"}
        t0 = time.perf_counter()
        rout, wout = os.pipe()
        rerr, werr = os.pipe()
        pid = os.posix_spawn(argv[0], argv, env, setpgroup=0, file_actions=[
            (os.POSIX_SPAWN_OPEN, 0, "/dev/null", os.O_RDONLY, 0),
            (os.POSIX_SPAWN_DUP2, wout, 1),
            (os.POSIX_SPAWN_DUP2, werr, 2),
            (os.POSIX_SPAWN_OPEN, 3, bpf, os.O_RDONLY, 0),
        ])
        os.close(wout)
        os.close(werr)
        out = b""
        for fd in (rout, rerr):   # `true` writes nothing: no deadlock
            while True:
                chunk = os.read(fd, 65536)
                if not chunk:
                    break
                out += chunk
            os.close(fd)
        _, status = os.waitpid(pid, 0)
        dt = time.perf_counter() - t0
        code = os.waitstatus_to_exitcode(status)
        if code != 0:
            raise RuntimeError("bwrap exited %d: %r" % (code, out[:500]))
        return dt

    def run(self):
        os.write(self.req_w, b"r")
        line = self.res.readline()
        if not line:
            raise BenchError("the direct-spawn worker died")
        msg = json.loads(line)
        if "error" in msg:
            raise BenchError("bwrap run directly: " + msg["error"])
        return msg["t"]

    def close(self):
        try:
            os.write(self.req_w, b"q")
        except OSError:
            pass
        os.close(self.req_w)
        self.res.close()
        os.waitpid(self.pid, 0)


def bench_run_command(hg, api, bpfdump, tmp, res):
    log("2a. POST /api/run_command {\"command\": \"true\"}: %d runs after %d "
        "warm-up, alternating with the same bwrap command line run "
        "directly" % (RUNS, WARMUP))
    since = len(hg.log_text("sandboxd"))

    durations = []

    def hostgate():
        t0 = time.perf_counter()
        st, doc = api.request("POST", "/api/run_command", {"command": "true"})
        dt = time.perf_counter() - t0
        if st != 200 or doc.get("exit_code") != 0:
            raise BenchError("run_command true: %d %r" % (st, doc))
        durations.append(doc.get("duration_ms", 0))
        return dt

    retrying("run_command", hostgate)
    argv = bwrap_line(hg, since)
    if "--seccomp" not in argv or argv[argv.index("--seccomp") + 1] != "3":
        raise BenchError("expected --seccomp 3 in %r" % argv)
    bpf = os.path.join(tmp, "seccomp.bpf")
    subprocess.run([bpfdump, os.path.join(hg.profiles, "seccomp.policy"),
                    bpf], check=True, timeout=30)
    os.chmod(bpf, 0o644)
    direct = DirectSpawner(argv, bpf, sandbox_user(hg))
    times, ref, itimes, iref = [], [], [], []
    try:
        for i in range(WARMUP + RUNS):
            # Alternate which goes first, so neither always follows the other.
            if i % 2:
                a = retrying("run_command", hostgate)
                b = retrying("bwrap direct", direct.run)
            else:
                b = retrying("bwrap direct", direct.run)
                a = retrying("run_command", hostgate)
            if i >= WARMUP:
                times.append(a)
                ref.append(b)
        log("   isolated: %d of each, one spawn every %d ms, alternating"
            % (ISO_RUNS, ISO_GAP * 1000))
        for i in range(ISO_RUNS):
            first, second = (hostgate, direct.run) if i % 2 else \
                (direct.run, hostgate)
            time.sleep(ISO_GAP)
            x = retrying("isolated spawn", first)
            time.sleep(ISO_GAP)
            y = retrying("isolated spawn", second)
            a, b = (x, y) if i % 2 else (y, x)
            itimes.append(a)
            iref.append(b)
    finally:
        direct.close()
    hm, rm = statistics.median(times), statistics.median(ref)
    ihm, irm = statistics.median(itimes), statistics.median(iref)
    res["run_command"] = {
        "hostgate_ms": hm * 1000, "direct_ms": rm * 1000,
        "hostgate_p90_ms": quantile(times, 0.9) * 1000,
        "direct_p90_ms": quantile(ref, 0.9) * 1000,
        "iso_hostgate_ms": ihm * 1000, "iso_direct_ms": irm * 1000,
        "iso_hostgate_p90_ms": quantile(itimes, 0.9) * 1000,
        "iso_direct_p90_ms": quantile(iref, 0.9) * 1000,
        "argv": " ".join(shlex.quote(a) for a in argv),
        "as": sandbox_user(hg),
    }
    # For context: the HTTP round trip alone (frontd, brokerd, no spawn).
    rtt = []
    for _ in range(200):
        t0 = time.perf_counter()
        st, _ = api.request("GET", "/api/status")
        rtt.append(time.perf_counter() - t0)
    res["run_command"]["status_rtt_ms"] = statistics.median(rtt) * 1000
    res["run_command"]["duration_ms"] = statistics.mean(
        durations[-RUNS:])
    log("   back to back: hostgate median %.2f ms (p90 %.2f), bwrap direct "
        "median %.2f ms (p90 %.2f): ratio %.3f; GET /api/status round trip "
        "%.3f ms" % (hm * 1000, quantile(times, 0.9) * 1000, rm * 1000,
                     quantile(ref, 0.9) * 1000, hm / rm,
                     res["run_command"]["status_rtt_ms"]))
    log("   isolated: hostgate median %.2f ms (p90 %.2f), bwrap direct "
        "median %.2f ms (p90 %.2f): ratio %.3f"
        % (ihm * 1000, quantile(itimes, 0.9) * 1000, irm * 1000,
           quantile(iref, 0.9) * 1000, ihm / irm))


# -- 2e. tools/call run_command through /mcp (issue 12) ----------------------

MCP_RUNS, MCP_WARMUP = 200, 10


class BearerConn:
    """A keep-alive HTTP connection to frontd carrying an agent token."""

    def __init__(self, port, token):
        self.port = port
        self.token = token
        self.conn = None

    def post(self, path, body, headers=None):
        """(status, headers dict lower-cased, body bytes) of one POST."""
        h = {"Authorization": "Bearer " + self.token,
             "Content-Type": "application/json"}
        h.update(headers or {})
        data = json.dumps(body).encode()
        for attempt in (0, 1):
            if self.conn is None:
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port,
                                                       timeout=30)
            try:
                self.conn.request("POST", path, body=data, headers=h)
                r = self.conn.getresponse()
                raw = r.read()
            except (http.client.RemoteDisconnected, BrokenPipeError,
                    ConnectionResetError):
                self.close()
                if attempt:
                    raise
                continue
            except BaseException:
                self.close()
                raise
            hd = {k.lower(): v for k, v in r.getheaders()}
            if hd.get("connection", "").lower() == "close":
                self.close()
            return r.status, hd, raw

    def close(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None


def mcp_message(headers, raw):
    """The JSON-RPC message of a /mcp reply, JSON or an SSE stream."""
    if headers.get("content-type", "").startswith("text/event-stream"):
        for line in raw.decode("utf-8", "replace").splitlines():
            if line.startswith("data:"):
                msg = json.loads(line[5:])
                if "id" in msg:
                    return msg
        raise BenchError("/mcp: no response in the event stream: %r"
                         % raw[:300])
    return json.loads(raw)


class McpClient:
    """tools/call over one keep-alive connection, as a 2025-11-25 session
    (initialize, Mcp-Session-Id) or as 2026-07-28 requests (stateless,
    _meta and the Mcp-Method/Mcp-Name headers)."""

    def __init__(self, port, token, modern):
        self.c = BearerConn(port, token)
        self.modern = modern
        self.next_id = 1
        self.headers = {"Accept": "application/json, text/event-stream"}
        if modern:
            self.headers["MCP-Protocol-Version"] = "2026-07-28"
            return
        st, hd, raw = self.c.post("/mcp", {
            "jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                       "clientInfo": {"name": "bench", "version": "1"}}},
            self.headers)
        if st != 200:
            raise BenchError("/mcp initialize: %d %r" % (st, raw[:300]))
        self.version = mcp_message(hd, raw)["result"]["protocolVersion"]
        self.headers["MCP-Protocol-Version"] = self.version
        if hd.get("mcp-session-id"):
            self.headers["Mcp-Session-Id"] = hd["mcp-session-id"]
        st, hd, raw = self.c.post("/mcp", {
            "jsonrpc": "2.0", "method": "notifications/initialized"},
            self.headers)
        if st != 202:
            raise BenchError("/mcp notifications/initialized: %d %r"
                             % (st, raw[:300]))

    def call(self, name, arguments):
        """The structuredContent of one tools/call (asserts success)."""
        params = {"name": name, "arguments": arguments}
        headers = self.headers
        if self.modern:
            params["_meta"] = {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {}}
            headers = dict(headers, **{"Mcp-Method": "tools/call",
                                       "Mcp-Name": name})
        self.next_id += 1
        st, hd, raw = self.c.post("/mcp", {
            "jsonrpc": "2.0", "id": self.next_id, "method": "tools/call",
            "params": params}, headers)
        msg = mcp_message(hd, raw) if st == 200 else None
        res = (msg or {}).get("result") or {}
        if st != 200 or res.get("isError") or \
                (res.get("structuredContent") or {}).get("exit_code") != 0:
            raise BenchError("/mcp tools/call %s: %d %r" % (name, st,
                                                            raw[:300]))
        return res["structuredContent"]

    def close(self):
        self.c.close()


def bench_mcp(hg, api, res):
    """tools/call run_command `true` through /mcp beside POST
    /api/run_command with the same agent token, runs interleaved."""
    log("2e. tools/call run_command `true` through /mcp (2025-11-25 session"
        " and 2026-07-28 stateless) beside POST /api/run_command with the "
        "same token: %d runs of each after %d warm-up, interleaved, the "
        "order rotating" % (MCP_RUNS, MCP_WARMUP))
    st, doc = api.request("POST", "/api/session/tokens")
    if st != 201:
        raise BenchError("POST /api/session/tokens: %d %r" % (st, doc))
    token = doc["token"]
    http_c = BearerConn(hg.port, token)
    legacy = McpClient(hg.port, token, modern=False)
    modern = McpClient(hg.port, token, modern=True)

    def via_http():
        t0 = time.perf_counter()
        st, hd, raw = http_c.post("/api/run_command", {"command": "true"})
        dt = time.perf_counter() - t0
        if st != 200 or json.loads(raw).get("exit_code") != 0:
            raise BenchError("run_command true: %d %r" % (st, raw[:300]))
        return dt

    def via(client):
        def run():
            t0 = time.perf_counter()
            client.call("run_command", {"command": "true"})
            return time.perf_counter() - t0
        return run

    kinds = [("http", via_http), ("mcp", via(legacy)),
             ("mcp_modern", via(modern))]
    times = {k: [] for k, _ in kinds}
    try:
        for i in range(MCP_WARMUP + MCP_RUNS):
            # Rotate the order so that none always follows another.
            order = kinds[i % 3:] + kinds[:i % 3]
            for k, fn in order:
                t = retrying("%s true" % k, fn)
                if i >= MCP_WARMUP:
                    times[k].append(t)
        # For context: a request each path answers without a spawn.
        rtt = {"http": [], "mcp": []}
        for i in range(200):
            t0 = time.perf_counter()
            st, _, _ = http_c.post("/api/run_command", {})
            rtt["http"].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            legacy.c.post("/mcp", {"jsonrpc": "2.0", "id": 1,
                                   "method": "ping"}, legacy.headers)
            rtt["mcp"].append(time.perf_counter() - t0)
    finally:
        http_c.close()
        legacy.close()
        modern.close()
    m = {k: statistics.median(v) * 1000 for k, v in times.items()}
    p90 = {k: quantile(v, 0.9) * 1000 for k, v in times.items()}
    # Each round's three runs are neighbours in time, under the same load:
    # the median of the rounds' own ratios is the steadier figure.
    paired = {k: statistics.median(a / b for a, b in zip(times[k],
                                                         times["http"]))
              for k in ("mcp", "mcp_modern")}
    res["mcp"] = {
        "http_ms": m["http"], "mcp_ms": m["mcp"],
        "modern_ms": m["mcp_modern"], "http_p90_ms": p90["http"],
        "mcp_p90_ms": p90["mcp"], "modern_p90_ms": p90["mcp_modern"],
        "version": legacy.version, "paired": paired["mcp"],
        "paired_modern": paired["mcp_modern"],
        "http_rtt_ms": statistics.median(rtt["http"]) * 1000,
        "ping_rtt_ms": statistics.median(rtt["mcp"]) * 1000,
    }
    log("   POST /api/run_command median %.2f ms (p90 %.2f); /mcp %s "
        "median %.2f ms (p90 %.2f): ratio %.3f (median of the rounds' "
        "ratios %.3f); /mcp 2026-07-28 median %.2f ms (p90 %.2f): ratio "
        "%.3f (rounds' %.3f); no-spawn round trips: 400 of POST "
        "/api/run_command {} %.3f ms, /mcp ping %.3f ms"
        % (m["http"], p90["http"], legacy.version, m["mcp"], p90["mcp"],
           m["mcp"] / m["http"], paired["mcp"], m["mcp_modern"],
           p90["mcp_modern"], m["mcp_modern"] / m["http"],
           paired["mcp_modern"], res["mcp"]["http_rtt_ms"],
           res["mcp"]["ping_rtt_ms"]))


def mcp_rows(res):
    """The rows of the MCP figures (2e)."""
    x = res["mcp"]
    return [
        ("tools/call run_command `true` through /mcp (%s session), median "
         "of %d" % (x["version"], MCP_RUNS), "%.2f ms" % x["mcp_ms"],
         "%.2f ms (POST /api/run_command, same token)" % x["http_ms"],
         "%.3f (%+.1f %%)" % (x["mcp_ms"] / x["http_ms"],
                              (x["mcp_ms"] / x["http_ms"] - 1) * 100)),
        ("the same, p90", "%.2f ms" % x["mcp_p90_ms"],
         "%.2f ms" % x["http_p90_ms"],
         "%.3f" % (x["mcp_p90_ms"] / x["http_p90_ms"])),
        ("the same, median of the %d rounds' own ratios" % MCP_RUNS, "-",
         "-", "%.3f" % x["paired"]),
        ("tools/call run_command `true` through /mcp (2026-07-28, "
         "stateless), median of %d" % MCP_RUNS, "%.2f ms" % x["modern_ms"],
         "%.2f ms (POST /api/run_command, same token)" % x["http_ms"],
         "%.3f (%+.1f %%)" % (x["modern_ms"] / x["http_ms"],
                              (x["modern_ms"] / x["http_ms"] - 1) * 100)),
        ("the same, p90", "%.2f ms" % x["modern_p90_ms"],
         "%.2f ms" % x["http_p90_ms"],
         "%.3f" % (x["modern_p90_ms"] / x["http_p90_ms"])),
        ("the same, median of the %d rounds' own ratios" % MCP_RUNS, "-",
         "-", "%.3f" % x["paired_modern"]),
    ]


# -- 2d. another user's spawn during network-profile spawns ----------------

def timed_true(api, what):
    """Seconds of one POST /api/run_command `true`."""
    t0 = time.perf_counter()
    st, doc = api.request("POST", "/api/run_command", {"command": "true"},
                          timeout=60)
    dt = time.perf_counter() - t0
    if st != 200 or doc.get("exit_code") != 0:
        raise BenchError("%s: run_command true: %d %r" % (what, st, doc))
    return dt


def other_latency(other, n):
    """n sequential `true` of the other user: their times."""
    return [retrying("other user's true",
                     lambda: timed_true(other, "other user"))
            for _ in range(n)]


def bench_network_load(hg, res):
    """The other user's `true` idle, then while NET_SPAWNS network-profile
    spawns of the bench user run at once (each of NET_SPAWNS threads
    spawning `true` again and again on its own connection), then idle
    again; medians and their ratio."""
    log("2d. another user's `true` (%d runs) idle and during %d concurrent "
        "network-profile spawns" % (LAT_RUNS, NET_SPAWNS))
    s = hg.login(*OTHER_USER)
    other = Api(hg.port, s.cookie, s.csrf)
    b = hg.login(*BENCH_USER)
    net = Api(hg.port, b.cookie, b.csrf)
    st, doc = net.request("POST", "/api/permission",
                          {"permission": "workspace-write+network"})
    if st != 200:
        raise BenchError("POST /api/permission network: %d %r" % (st, doc))
    net.close()
    # One network spawn first: the profile works on this machine.
    first = Api(hg.port, b.cookie, b.csrf)
    retrying("network spawn", lambda: timed_true(first, "network"))
    first.close()
    other_latency(other, 3)                         # warm-up
    idle = other_latency(other, LAT_RUNS // 2)

    stop = threading.Event()
    up = threading.Barrier(NET_SPAWNS + 1)
    done, errors = [], []

    def loader():
        api = Api(hg.port, b.cookie, b.csrf)
        try:
            up.wait(30)
            while not stop.is_set():
                done.append(timed_true(api, "network spawn"))
        except (BenchError, OSError, http.client.HTTPException,
                threading.BrokenBarrierError) as e:
            errors.append(str(e))
        finally:
            api.close()

    threads = [threading.Thread(target=loader, daemon=True)
               for _ in range(NET_SPAWNS)]
    for t in threads:
        t.start()
    try:
        up.wait(30)
        # Until every loader has a spawn under way (the first ones back).
        deadline = time.monotonic() + 30
        while len(done) < NET_SPAWNS and time.monotonic() < deadline \
                and not errors:
            time.sleep(0.05)
        loaded = other_latency(other, LAT_RUNS)
    finally:
        stop.set()
        for t in threads:
            t.join(60)
    if errors:
        raise BenchError("network-profile spawns failed: %s" % errors[0])
    idle += other_latency(other, LAT_RUNS - LAT_RUNS // 2)
    other.close()
    im, lm = statistics.median(idle), statistics.median(loaded)
    res["network_load"] = {
        "idle_ms": im * 1000, "loaded_ms": lm * 1000,
        "idle_p90_ms": quantile(idle, 0.9) * 1000,
        "loaded_p90_ms": quantile(loaded, 0.9) * 1000,
        "net_spawns": len(done),
        "net_ms": statistics.median(done) * 1000 if done else 0.0,
    }
    n = res["network_load"]
    log("   other user's true: idle median %.2f ms (p90 %.2f), during the "
        "network spawns %.2f ms (p90 %.2f): ratio %.3f; %d network spawns, "
        "median %.1f ms each" % (n["idle_ms"], n["idle_p90_ms"],
                                 n["loaded_ms"], n["loaded_p90_ms"],
                                 lm / im, n["net_spawns"], n["net_ms"]))


def quantile(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


# -- 2b. terminal throughput -----------------------------------------------

def make_big(hg, api):
    """A BIG_BYTES file of base64 lines in the bench user's workspace,
    made inside the sandbox; returns its path on the host."""
    st, doc = api.request("POST", "/api/run_command", {
        "command": "base64 -w 76 /dev/urandom | head -c %d > big && "
                   "stat -c %%s big" % BIG_BYTES, "timeout": 120},
        timeout=130)
    if st != 200 or doc.get("exit_code") != 0 or \
            doc.get("stdout", "").strip() != str(BIG_BYTES):
        raise BenchError("making the 64 MiB file: %d %r" % (st, doc))
    path = os.path.join(hg.state, "workspaces", BENCH_USER[0], "big")
    if os.path.getsize(path) != BIG_BYTES:
        raise BenchError("%s: not %d bytes" % (path, BIG_BYTES))
    return path


def cat_websocket(hg, api, cookie):
    """(bytes, seconds) of `cat big` in a terminal, counted as received by
    the WebSocket client until the marker printed after cat arrives."""
    tid = new_terminal(api)
    ws = WebSocket(hg.port, "/api/terminals/%s/ws" % tid, cookie)
    try:
        prompt = ws_drain(ws, 0.5, 10)
        if ws.closed:
            raise BenchError("terminal closed at once (%s): %r"
                             % (ws.close_reason, prompt[-500:]))
        ws.send(b"cat big; echo " + MARK_TYPED + b"\r")
        t0 = time.perf_counter()
        n, tail = 0, b""
        deadline = time.monotonic() + 120
        while True:
            if time.monotonic() > deadline:
                raise BenchError("cat over WebSocket: no marker after 120 s "
                                 "(%d bytes)" % n)
            if ws.closed:
                raise BenchError("cat over WebSocket: closed after %d bytes "
                                 "(%s)" % (n, ws.close_reason))
            r, _, _ = select.select([ws], [], [], 5)
            if not r:
                continue
            chunks = ws.feed()
            if not chunks:
                continue
            for c in chunks:
                n += len(c)
            data = tail + b"".join(chunks)
            if MARK in data:
                break
            tail = data[-len(MARK):]
        dt = time.perf_counter() - t0
    finally:
        ws.close()
        try:
            close_terminal(api, tid)
        except (OSError, http.client.HTTPException, BenchError) as e:
            log("warning: closing terminal %s: %s" % (tid, e))
    return n, dt


def cat_pty(path, as_user):
    """(bytes, seconds) of cat PATH to a plain pty, reading the master until
    EIO (every slave closed), in a child as the given user."""
    def run():
        master, slave = os.openpty()
        t0 = time.perf_counter()
        p = subprocess.Popen(["cat", path], stdin=slave, stdout=slave,
                             stderr=slave, start_new_session=True)
        os.close(slave)
        n = 0
        while True:
            try:
                chunk = os.read(master, 1 << 18)
            except OSError:             # EIO: cat exited, slave closed
                break
            if not chunk:
                break
            n += len(chunk)
        dt = time.perf_counter() - t0
        p.wait()
        os.close(master)
        return [n, dt]
    return hglib.run_as(as_user, run, timeout=180)

EGRESS_ROUNDS, EGRESS_WARMUP = 5, 1
CURL_W = "%{size_download} %{time_total}"


def bench_egress(hg, net, res):
    """curl of the 64 MiB file inside a workspace-write+allowlist sandbox,
    through hg-egress-bridge and egressd, beside the same download by curl
    on the host straight to the server in the namespace; HTTP and HTTPS,
    runs interleaved, each figure curl's own size / time_total."""
    log("2f. egress (issue 13): curl of a %d MiB file through the proxy "
        "inside a workspace-write+allowlist sandbox beside curl from the "
        "host straight to the server, HTTP and HTTPS: %d runs of each after "
        "%d warm-up, interleaved" % (BIG_BYTES >> 20, EGRESS_ROUNDS,
                                     EGRESS_WARMUP))
    s = hg.login(*BENCH_USER)
    r = s.post("/api/permission", {"permission": "workspace-write+allowlist"})
    if r.status != 200:
        raise BenchError("POST /api/permission: %r" % r)
    r = s.post("/api/run_command", {"command": 'cat > ca.pem <<"HGCA"\n%s'
                                    'HGCA\n' % net.ca_pem}, timeout=30)
    if r.status != 200 or r.json().get("exit_code") != 0:
        raise BenchError("writing the CA into the workspace: %r" % r)

    def parse(text, what):
        try:
            size, secs = text.split()
            size, secs = int(size), float(secs)
        except ValueError:
            raise BenchError("%s: curl said %r" % (what, text)) from None
        if size != BIG_BYTES or secs <= 0:
            raise BenchError("%s: %d bytes in %s s" % (what, size, secs))
        return size / secs / (1 << 20)

    egressd = tree_pids(hg.pid("egressd"))
    cpu = {}

    def proxied(url):
        def run():
            cmd = "curl -sS --cacert ca.pem -o /dev/null -w '%s' %s" % (
                CURL_W, url)
            c0 = proc_cpu(egressd)
            r = s.post("/api/run_command", {"command": cmd, "timeout": 120},
                       timeout=140)
            doc = r.json() if r.status == 200 else {}
            if doc.get("exit_code") != 0:
                raise BenchError("sandboxed curl %s: %r" % (url, r))
            v = parse(doc["stdout"], "sandboxed curl " + url)
            cpu.setdefault(url, []).append(proc_cpu(egressd) - c0)
            return v
        return run

    def direct(url):
        def run():
            p = net.curl_host(url, "-o", "/dev/null", "-w", CURL_W,
                              timeout=120)
            if p.returncode != 0:
                raise BenchError("host curl %s: %r" % (url, p.stderr))
            return parse(p.stdout.decode(), "host curl " + url)
        return run

    out = {}
    for scheme in ("http", "https"):
        url = "%s://files.test/big.bin" % scheme
        kinds = [("proxy", proxied(url)), ("direct", direct(url))]
        speeds = {k: [] for k, _ in kinds}
        for i in range(EGRESS_WARMUP + EGRESS_ROUNDS):
            order = kinds if i % 2 == 0 else kinds[::-1]
            for k, fn in order:
                v = retrying("egress %s %s" % (scheme, k), fn)
                if i >= EGRESS_WARMUP:
                    speeds[k].append(v)
        m = {k: statistics.median(v) for k, v in speeds.items()}
        # egressd's CPU (user + system) per MiB relayed, all runs.
        cpu_ms = sum(cpu[url]) * 1000 / (len(cpu[url]) * (BIG_BYTES >> 20))
        out[scheme] = {"proxy_mib_s": m["proxy"], "direct_mib_s": m["direct"],
                       "proxy_all": speeds["proxy"],
                       "direct_all": speeds["direct"],
                       "egressd_cpu_ms_per_mib": cpu_ms}
        log("   %s: through the proxy median %.1f MiB/s (%s), direct %.1f "
            "MiB/s (%s): ratio %.3f; egressd's CPU %.2f ms per MiB"
            % (scheme, m["proxy"], fmt_list(speeds["proxy"]), m["direct"],
               fmt_list(speeds["direct"]), m["proxy"] / m["direct"],
               cpu_ms))
    res["egress"] = out


def tree_pids(pid):
    """pid and its descendants (egressd's jailed child among them)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            with open("/proc/%d/task/%d/children" % (p, p)) as f:
                todo += [int(x) for x in f.read().split()]
        except OSError:
            pass
    return out


def egress_rows(res):
    rows = []
    for scheme, e in sorted(res["egress"].items()):
        rows.append(("curl of a %d MiB file over %s inside a "
                     "workspace-write+allowlist sandbox, through "
                     "hg-egress-bridge and egressd, median of %d"
                     % (BIG_BYTES >> 20, scheme.upper(), EGRESS_ROUNDS),
                     "%.1f MiB/s" % e["proxy_mib_s"],
                     "%.1f MiB/s (curl on the host straight to the server)"
                     % e["direct_mib_s"],
                     "%.3f" % (e["proxy_mib_s"] / e["direct_mib_s"])))
    return rows


def bench_terminal(hg, api, cookie, res):
    log("2b. terminal throughput: cat of a 64 MiB file, %d rounds each"
        % CAT_ROUNDS)
    path = retrying("making the file", lambda: make_big(hg, api))
    wsr, ptr = [], []
    for _ in range(CAT_ROUNDS):
        wsr.append(retrying("cat over WebSocket",
                            lambda: cat_websocket(hg, api, cookie)))
        ptr.append(cat_pty(path, sandbox_user(hg)))
    wait_no_terminals(api)
    ws_rates = [n / dt for n, dt in wsr]
    pt_rates = [n / dt for n, dt in ptr]
    res["terminal"] = {
        "file_bytes": BIG_BYTES,
        "ws_bytes": wsr[0][0], "pty_bytes": ptr[0][0],
        "ws_mib_s": statistics.median(ws_rates) / 2**20,
        "pty_mib_s": statistics.median(pt_rates) / 2**20,
        "ws_all": [r / 2**20 for r in ws_rates],
        "pty_all": [r / 2**20 for r in pt_rates],
    }
    t = res["terminal"]
    log("   WebSocket %.1f MiB/s (rounds %s), plain pty %.1f MiB/s (rounds "
        "%s): ratio %.3f" % (t["ws_mib_s"], fmt_list(t["ws_all"]),
                             t["pty_mib_s"], fmt_list(t["pty_all"]),
                             t["ws_mib_s"] / t["pty_mib_s"]))


def fmt_list(xs):
    return ", ".join("%.1f" % x for x in xs)


# -- 2c. RSS ---------------------------------------------------------------

def bench_rss_terminals(hg, api, cookie, res):
    log("2c. RSS with %d terminals, each attached over a WebSocket"
        % TERMINALS)
    socks, ids = [], []
    t0 = time.perf_counter()
    try:
        def one():
            tid = new_terminal(api)
            ids.append(tid)
            socks.append(WebSocket(hg.port, "/api/terminals/%s/ws" % tid,
                                   cookie))
        for _ in range(TERMINALS):
            retrying("terminal", one)
        setup = time.perf_counter() - t0
        # Every shell has printed its prompt: all are really up. One whose
        # sandbox failed to start (its WebSocket closed) is replaced.
        for _ in range(3):
            pending = list(socks)
            deadline = time.monotonic() + 60
            while pending and time.monotonic() < deadline:
                r, _, _ = select.select(pending, [], [], 1)
                for ws in r:
                    if ws.feed() or ws.closed:
                        pending.remove(ws)
            if pending:
                log("warning: %d terminals printed nothing in 60 s"
                    % len(pending))
            dead = [ws for ws in socks if ws.closed]
            if not dead:
                break
            RETRIED.append("%d of the %d terminals exited at once"
                           % (len(dead), TERMINALS))
            log("warning: " + RETRIED[-1] + "; replacing them")
            for ws in dead:
                socks.remove(ws)
                ws.close()
                retrying("terminal", one)
        res["terminals_live"] = sum(1 for ws in socks if not ws.closed)
        time.sleep(1)
        res["rss_terminals"] = daemon_rss(hg)
        res["terminal_setup_s"] = setup
    finally:
        for ws in socks:
            ws.close()
        try:
            for tid in ids:
                close_terminal(api, tid)
        except (OSError, http.client.HTTPException, BenchError) as e:
            log("warning: closing the terminals: %s" % e)
    wait_no_terminals(api, 30)
    log("   %s (%d live terminals; create and attach: %.1f ms each)" % (
        fmt_rss(res["rss_terminals"]), res["terminals_live"],
        setup * 1000 / TERMINALS))


def fmt_rss(r):
    return ", ".join("%s %d KiB" % (n, r[n]) for n in hglib.DAEMONS)


# -- 3. a policy decision in brokerd ---------------------------------------

def bench_policy(path, res):
    """Run bench_policy (tests/bench/bench_policy.c, built by make bench):
    brokerd's decision for a spawn beside one IPC round trip."""
    log("3. brokerd policy decision vs one IPC round trip (%s)" % path)
    r = subprocess.run([path], capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        raise BenchError("%s exited %d: %s" % (path, r.returncode,
                                                r.stderr.strip()))
    dec = re.search(r"^policy decision.*?: (\d+) /s \(([\d.]+) us each\)",
                    r.stdout, re.M)
    ipc = re.search(r"^IPC round trip.*?: (\d+) /s \(([\d.]+) us each\)",
                    r.stdout, re.M)
    if not dec or not ipc:
        raise BenchError("cannot read %s's output:\n%s" % (path, r.stdout))
    res["policy"] = {"decision_us": float(dec.group(2)),
                     "ipc_us": float(ipc.group(2))}
    for line in r.stdout.strip().splitlines():
        log("   " + line)


# -- 4. the session and token store ---------------------------------------

def bench_store(path, res):
    """Run bench_store (tests/bench/bench_store.c, built by make bench):
    mint, revoke, login, logout and lookups with 100 and with 100,000
    tokens stored, in turns; keeps its table."""
    log("4. session and token store, 100 vs 100000 tokens (%s)" % path)
    r = subprocess.run([path], capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        raise BenchError("%s exited %d: %s" % (path, r.returncode,
                                                r.stderr.strip()))
    worst = re.search(r"^worst ratio.*?: ([\d.]+)", r.stdout, re.M)
    if not worst:
        raise BenchError("cannot read %s's output:\n%s" % (path, r.stdout))
    res["store"] = {"worst": float(worst.group(1)),
                    "table": r.stdout.strip()}
    for line in r.stdout.strip().splitlines():
        log("   " + line)


# -- report ----------------------------------------------------------------

def loadavg():
    with open("/proc/loadavg") as f:
        return f.read().split()[0]


def machine():
    cpu = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return "%d cores (%s), Linux %s, %s" % (os.cpu_count(), cpu,
                                            platform.release(),
                                            platform.freedesktop_os_release()
                                            .get("PRETTY_NAME", "")
                                            if hasattr(platform,
                                                       "freedesktop_os_release")
                                            else "")


def wrk_rounds(r):
    return ", ".join("%.0f/%.2f" % (x["rps"], x["p99_ms"])
                     for x in r["rounds"])


def spawn_rows(res):
    """The rows of the spawn figures (2a, 2d)."""
    rc = res["run_command"]
    rows = [
        ("POST /api/run_command `true`, back to back, median of %d" % RUNS,
         "%.2f ms" % rc["hostgate_ms"],
         "%.2f ms (same bwrap line, spawned directly)" % rc["direct_ms"],
         "%.3f (%+.1f %%)" % (rc["hostgate_ms"] / rc["direct_ms"],
                              (rc["hostgate_ms"] / rc["direct_ms"] - 1)
                              * 100)),
        ("POST /api/run_command `true`, back to back, p90",
         "%.2f ms" % rc["hostgate_p90_ms"], "%.2f ms" % rc["direct_p90_ms"],
         "%.3f" % (rc["hostgate_p90_ms"] / rc["direct_p90_ms"])),
        ("POST /api/run_command `true`, isolated (one every %d ms), median "
         "of %d" % (ISO_GAP * 1000, ISO_RUNS),
         "%.2f ms" % rc["iso_hostgate_ms"],
         "%.2f ms (same bwrap line, spawned directly)" % rc["iso_direct_ms"],
         "%.3f (%+.1f %%)" % (rc["iso_hostgate_ms"] / rc["iso_direct_ms"],
                              (rc["iso_hostgate_ms"] / rc["iso_direct_ms"]
                               - 1) * 100)),
        ("POST /api/run_command `true`, isolated, p90",
         "%.2f ms" % rc["iso_hostgate_p90_ms"],
         "%.2f ms" % rc["iso_direct_p90_ms"],
         "%.3f" % (rc["iso_hostgate_p90_ms"] / rc["iso_direct_p90_ms"])),
    ]
    if "network_load" in res:
        n = res["network_load"]
        rows.append(("another user's `true` during %d concurrent "
                     "network-profile spawns, median of %d"
                     % (NET_SPAWNS, LAT_RUNS),
                     "%.2f ms" % n["loaded_ms"],
                     "%.2f ms (the same, idle)" % n["idle_ms"],
                     "%.3f" % (n["loaded_ms"] / n["idle_ms"])))
        rows.append(("the same, p90", "%.2f ms" % n["loaded_p90_ms"],
                     "%.2f ms" % n["idle_p90_ms"],
                     "%.3f" % (n["loaded_p90_ms"] / n["idle_p90_ms"])))
    return rows


def markdown(res):
    rows = []
    if "http" in res:
        h, n = res["http"]["hostgate"], res["http"]["nginx"]
        h2, n2 = res["http"]["hostgate_256"], res["http"]["nginx_256"]
        cpu = res["http"]["cpu_us"]
        rows += [
            ("GET /api/status, requests/s (wrk %s), median of %d"
             % (" ".join(WRK_ARGS), WRK_ROUNDS),
             "%.0f" % h["rps"], "%.0f (nginx, %d-byte static file)"
             % (n["rps"], STATIC_BYTES), "%.3f" % (h["rps"] / n["rps"])),
            ("GET /api/status, p99 latency (median of rounds)",
             "%.2f ms" % h["p99_ms"], "%.2f ms (nginx)" % n["p99_ms"],
             "%.2f" % (h["p99_ms"] / n["p99_ms"])),
            ("GET /api/status, p50 latency (median of rounds)",
             "%.2f ms" % h["p50_ms"], "%.2f ms (nginx)" % n["p50_ms"],
             "%.2f" % (h["p50_ms"] / n["p50_ms"])),
            ("GET /api/status, requests/s (wrk %s), median of %d"
             % (" ".join(WRK_ARGS_256), WRK_ROUNDS),
             "%.0f" % h2["rps"], "%.0f (nginx)" % n2["rps"],
             "%.3f" % (h2["rps"] / n2["rps"])),
            ("GET /api/status, p99 latency at -c256 (median of rounds)",
             "%.2f ms" % h2["p99_ms"], "%.2f ms (nginx)" % n2["p99_ms"],
             "%.2f" % (h2["p99_ms"] / n2["p99_ms"])),
            ("CPU per request at -c32 (the servers' utime + stime)",
             "%.1f us (frontd, brokerd, sandboxd)" % cpu["hostgate"],
             "%.1f us (nginx)" % cpu["nginx"],
             "%.2f" % (cpu["hostgate"] / cpu["nginx"]
                       if cpu["nginx"] else 0)),
            ("GET /api/execution-mode, requests/s, median of %d"
             % WRK_ROUNDS, "%.0f" % res["http_mode"]["rps"],
             "%.0f (nginx)" % n["rps"],
             "%.3f" % (res["http_mode"]["rps"] / n["rps"])),
            ("GET /api/execution-mode, p99 latency",
             "%.2f ms" % res["http_mode"]["p99_ms"],
             "%.2f ms (nginx)" % n["p99_ms"],
             "%.2f" % (res["http_mode"]["p99_ms"] / n["p99_ms"])),
        ]
    rc = res.get("run_command")
    if rc is not None:
        rows += spawn_rows(res)
    if "mcp" in res:
        rows += mcp_rows(res)
    if "egress" in res:
        rows += egress_rows(res)
    if "terminal" in res:
        t = res["terminal"]
        rows.append(("terminal: cat 64 MiB file, median of %d" % CAT_ROUNDS,
                     "%.1f MiB/s (WebSocket)" % t["ws_mib_s"],
                     "%.1f MiB/s (plain pty)" % t["pty_mib_s"],
                     "%.3f" % (t["ws_mib_s"] / t["pty_mib_s"])))
    if "policy" in res:
        pol = res["policy"]
        rows.append(("brokerd policy decision (session, CSRF, spawn bucket, "
                     "mode), in-process loop",
                     "%.2f us" % pol["decision_us"],
                     "%.2f us (one IPC round trip frontd-brokerd)"
                     % pol["ipc_us"],
                     "%.3f" % (pol["decision_us"] / pol["ipc_us"])))
    if "store" in res:
        rows.append(("session/token store: worst ratio of an op's cost with "
                     "100000 tokens stored to its cost with 100 (bench_store)",
                     "%.2f" % res["store"]["worst"], "1.2 (the bound)",
                     "%.2f" % (res["store"]["worst"] / 1.2)))
    if "rss_terminals" in res:
        ri, rt = res["rss_idle"], res["rss_terminals"]
        for d in hglib.DAEMONS:
            rows.append(("VmRSS %s: idle / %d terminals" % (d, TERMINALS),
                         "%d KiB / %d KiB" % (ri[d], rt[d]), "-",
                         "%.2f" % (rt[d] / ri[d])))
        rows.append(("VmRSS all three: idle / %d terminals" % TERMINALS,
                     "%d KiB / %d KiB" % (sum(ri.values()),
                                          sum(rt.values())),
                     "-", "%.2f" % (sum(rt.values()) / sum(ri.values()))))
    out = ["# hostgate benchmark results", "",
           "- date: %s" % res["date"],
           "- machine: %s" % res["machine"],
           "- load average (1 min) at the start and at the end: %s and %s"
           % (res["load_start"], res["load_end"]),
           "- daemons: %s mode (%s), build `%s`" % (
               res["mode"], res["run_as"], os.environ.get("HG_BUILD",
                                                          "build")),
           "- containment (what enforces what, from /api/status): %s"
           % (json.dumps({k: v for k, v in res["containment"].items()
                          if k != "not_enforced"}, sort_keys=True)
              if res.get("containment") is not None else "not reported"),
           "", "| benchmark | hostgate | reference | ratio |",
           "|---|---|---|---|"]
    out += ["| %s | %s | %s | %s |" % r for r in rows]
    out += ["", "Notes:", ""]
    if "store" in res:
        out += ["- bench_store (medians of interleaved rounds, us):", "",
                "```"] + res["store"]["table"].splitlines() + ["```", ""]
    if "http" in res:
        out.append("- /api/status body: %d bytes of JSON; nginx file: %d "
                   "bytes; non-2xx: hostgate %d, nginx %d; wrk rounds (req/s,"
                   " p99 ms): hostgate %s; nginx %s; at -c256: hostgate %s;"
                   " nginx %s (non-2xx %d and %d%s)."
                   % (res["http"]["status_bytes"], STATIC_BYTES, h["non2xx"],
                      n["non2xx"], wrk_rounds(h), wrk_rounds(n),
                      wrk_rounds(h2), wrk_rounds(n2), h2["non2xx"],
                      n2["non2xx"], "; socket errors: hostgate %s, nginx %s"
                      % (h2["socket_errors"] or "none",
                         n2["socket_errors"] or "none")
                      if h2["socket_errors"] or n2["socket_errors"] else ""))
    if "terminal" in res:
        out.append("- terminal bytes received (file %d bytes, onlcr adds "
                   "CRs): WebSocket %d, plain pty %d; rounds: WebSocket %s "
                   "MiB/s, pty %s MiB/s." % (
                       t["file_bytes"], t["ws_bytes"], t["pty_bytes"],
                       fmt_list(t["ws_all"]), fmt_list(t["pty_all"])))
    if rc is not None:
        out.append("- run_command: the same keep-alive connection; a "
                   "sequential GET /api/status round trip on it takes %.3f "
                   "ms (median of 200); the duration_ms hostgate reports "
                   "(sandboxd's own clock, whole ms) averages %.2f ms. "
                   "sandboxd logs at debug level (one line per spawn) to "
                   "capture the command line. The reference runs as uid %s, "
                   "the uid of the user's spawns."
                   % (rc["status_rtt_ms"], rc["duration_ms"],
                      rc["as"][0] if rc.get("as") else os.geteuid()))
    if "mcp" in res:
        out.append("- /mcp: tools/call run_command `true` as a %s session "
                   "(initialize once, then Mcp-Session-Id) and as "
                   "stateless 2026-07-28 requests (_meta, Mcp-Method and "
                   "Mcp-Name), and POST /api/run_command, all three with "
                   "the same agent token, each on its own keep-alive "
                   "connection, the order rotating each round. Round trips "
                   "without a spawn (median of 200): a 400 of POST "
                   "/api/run_command {} %.3f ms, a /mcp ping %.3f ms."
                   % (res["mcp"]["version"], res["mcp"]["http_rtt_ms"],
                      res["mcp"]["ping_rtt_ms"]))
    if "egress" in res:
        out.append("- egress: the servers are tests/system/egress_server.py "
                   "(Python, sendfile(2) for HTTP) in a network namespace "
                   "of their own behind a veth pair; the 64 MiB file is "
                   "sparse; rounds: %s." % "; ".join(
                       "%s through the proxy %s, direct %s MiB/s, "
                       "egressd's CPU %.2f ms per MiB relayed"
                       % (k, fmt_list(e["proxy_all"]),
                          fmt_list(e["direct_all"]),
                          e["egressd_cpu_ms_per_mib"])
                       for k, e in sorted(res["egress"].items())))
    if "network_load" in res:
        nl = res["network_load"]
        out.append("- network load: %d threads, each on its own connection, "
                   "spawned `true` with the workspace-write+network profile "
                   "(slirp4netns) again and again while the other user ran "
                   "%d `true` one after another; %d network spawns in all, "
                   "median %.1f ms each. Idle: %d runs before and %d after."
                   % (NET_SPAWNS, LAT_RUNS, nl["net_spawns"], nl["net_ms"],
                      LAT_RUNS // 2, LAT_RUNS - LAT_RUNS // 2))
    if "rss_terminals" in res:
        out.append("- %d terminals created and attached in %.1f s (%.1f ms "
                   "each); %d running when the RSS was read."
                   % (TERMINALS, res["terminal_setup_s"],
                      res["terminal_setup_s"] * 1000 / TERMINALS,
                      res["terminals_live"]))
    out.append("- failures retried: %s." % ("; ".join(RETRIED) if RETRIED
                                            else "none"))
    if "http" in res:
        out.append("- commands: `%s`; `%s`" % (res["http"]["cmd_hostgate"],
                                               res["http"]["cmd_nginx"]))
    if rc is not None:
        out.append("- reference bwrap command line (fd 3: the BPF written by "
                   "bpfdump from the same policy): `%s`" % rc["argv"])
    out.append("")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bpfdump", required=True)
    ap.add_argument("--out", default=os.path.join(HERE, "results",
                                                  "latest.md"))
    ap.add_argument("--policy-bench", default=None,
                    help="the bench_policy binary, when built")
    ap.add_argument("--store-bench", default=None,
                    help="the bench_store binary, when built")
    ap.add_argument("--mode", default=os.environ.get("BENCH_MODE", "user"),
                    choices=hglib.MODES)
    ap.add_argument("--only", default=os.environ.get("BENCH_ONLY", ""),
                    choices=("", "spawn", "http", "mcp", "egress"),
                    help="spawn: only the spawn figures (2a, 2d); http: "
                    "only the HTTP figures (1); mcp: only /mcp beside the "
                    "HTTP API (2e); egress: only the egress proxy beside a "
                    "direct download (2f)")
    args = ap.parse_args()

    missing = hglib.missing_binaries()
    if missing:
        raise BenchError("not built: %s (run make)" % ", ".join(missing))

    def stop(signum, frame):
        raise BenchError("stopped by signal %d" % signum)
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGALRM, stop)
    signal.alarm(DEADLINE_SECONDS)

    res = {"date": time.strftime("%Y-%m-%d %H:%M %Z"), "machine": machine(),
           "mode": args.mode, "load_start": loadavg()}
    tmp = tempfile.mkdtemp(prefix="hg-bench-")
    os.chmod(tmp, 0o755)
    hg = None
    net = None
    failed = True
    try:
        t0 = time.monotonic()
        if args.only == "egress" and os.geteuid() != 0:
            raise BenchError("the egress benchmark needs root (it makes a "
                             "network namespace)")
        if args.only in ("", "egress") and os.geteuid() == 0:
            net = egresslib.EgressNet()
        elif not args.only:
            log("2f. egress: skipped (not root: no network namespace)")
        hg = start_hostgate(args.mode, net.env() if net else None)
        res["run_as"] = "as %s" % ("uid %d" % hg.daemon_uid
                                   if args.mode == "user" else
                                   "root, dropping to the service users")
        time.sleep(1)
        res["rss_idle"] = daemon_rss(hg)
        log("2c. idle RSS (started, no session yet): %s"
            % fmt_rss(res["rss_idle"]))
        api, cookie = login(hg)
        res["containment"] = containment(api)
        log("containment: %s" % json.dumps(res["containment"],
                                           sort_keys=True))
        if args.mode == "root" and not (res["containment"] or {}).get(
                "membership"):
            log("warning: root mode, but no cgroup per spawn is reported")
        if args.only in ("", "http"):
            bench_http(hg, cookie, tmp, res)
        if args.only in ("", "spawn"):
            bench_run_command(hg, api, args.bpfdump, tmp, res)
            bench_network_load(hg, res)
        if args.only in ("", "mcp"):
            bench_mcp(hg, api, res)
        if net is not None:
            bench_egress(hg, net, res)
        if not args.only:
            bench_terminal(hg, api, cookie, res)
            bench_rss_terminals(hg, api, cookie, res)
        api.close()
        if args.policy_bench and not args.only:
            bench_policy(args.policy_bench, res)
        if args.store_bench and not args.only:
            bench_store(args.store_bench, res)
        failed = False
    finally:
        signal.alarm(0)
        if hg is not None:
            problems = stop_hostgate(hg, failed=failed)
            if problems:
                log("warning: " + "; ".join(problems))
        if net is not None:
            net.close()
        shutil.rmtree(tmp, ignore_errors=True)
    res["load_end"] = loadavg()
    md = markdown(res)
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        f.write(md)
    print()
    print(md)
    log("done in %.0f s; written to %s" % (time.monotonic() - t0, args.out))


if __name__ == "__main__":
    try:
        main()
    except BenchError as e:
        print("bench: FAILED: %s" % e, file=sys.stderr)
        sys.exit(1)
