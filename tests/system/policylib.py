"""Helpers for the execution-mode policy tests: private hostgates with a
short direct-mode TTL, a server-sent event client, the audit log on disk,
many requests at once, and a hand-made frontd on brokerd's front socket.
Standard library only."""

import calendar
import json
import os
import re
import socket
import threading
import time

import hglib

ADMIN, USER = hglib.ADMIN, hglib.USER
HEX64 = re.compile(r"[0-9a-f]{64}")
ISO = "%Y-%m-%dT%H:%M:%SZ"
MODE_KEYS = {"mode", "default", "available", "reason", "expires_at",
             "remaining_seconds", "ttl_seconds"}


CAROL = ("carol", "carol-password-3")     # a second admin

def _env(env):
    """hglib.LIFTED_ENV updated with env; a None value leaves that
    variable at the daemons' default."""
    full = dict(hglib.LIFTED_ENV)
    full.update({k: str(v) for k, v in env.items()})
    return full


def _unset_none(hg, env):
    for k, v in env.items():
        if v is None:
            hg.env.pop(k, None)


def own(factory, name="policy", carol=False, healthy=True, **env):
    """A running private hostgate (hostgate_factory) with alice (admin),
    bob, and carol (a second admin) when asked; env values may be ints,
    None leaves a variable at its default. With healthy false, /healthz
    may answer 503 (e.g. docker without an engine)."""
    hg = factory(env=_env(env), name=name, start=False)
    _unset_none(hg, env)
    hg.start_all(wait=healthy)
    if not healthy:
        hg.wait_chain()
        hg.wait_control()
    hg.add_user(*ADMIN, admin=True)
    hg.add_user(*USER)
    if carol:
        hg.add_user(*CAROL, admin=True)
    return hg


def config(carol=False, **env):
    """A configuration of conftest's pooled `hg` (a module's HOSTGATE):
    env over hglib.LIFTED_ENV (values may be ints, None leaves a
    variable at its default), with carol (a second admin) when asked."""
    conf = {k: (None if v is None else str(v)) for k, v in env.items()}
    if carol:
        conf["more_users"] = (CAROL + (True,),)
    return conf


def module_hostgate(mode, name, carol=False, **env):
    """Like own(), for a module-scoped fixture (see hglib.running)."""
    return hglib.running(mode, name, env,
                         more_users=[CAROL + (True,)] if carol else ())


def iso_secs(text):
    """Unix seconds of an ISO 8601 UTC time like 2026-11-29T17:20:13Z."""
    return calendar.timegm(time.strptime(text, ISO))


def mode_of(session):
    """GET /api/execution-mode of a session (asserts 200)."""
    r = session.get("/api/execution-mode")
    assert r.status == 200, r
    doc = r.json()
    assert set(doc) >= MODE_KEYS, doc
    return doc


def set_mode(session, mode, **kw):
    return session.post("/api/execution-mode", {"mode": mode}, **kw)


def grant(session):
    """Turn direct mode on for an admin session; returns the mode object."""
    r = set_mode(session, "direct")
    assert r.status == 200, "direct mode refused: %r" % r
    doc = r.json()
    assert doc["mode"] == "direct", doc
    return doc


def mint_token(session):
    r = session.post("/api/session/tokens")
    assert r.status == 201, r
    return r.json()["token"]


def run(session, command, **kw):
    """POST /api/run_command; returns the JSON answer (asserts 200)."""
    r = session.post("/api/run_command", {"command": command,
                                          "timeout": int(hglib.SLOW)},
                     timeout=2 * hglib.SLOW, **kw)
    assert r.status == 200, "run_command %r: %r" % (command, r)
    return r.json()


def assert_error(r, status, code=None, message=None):
    """r is an error reply with this status (and code, and a message
    containing message)."""
    assert r.status == status, "want %d, got %r" % (status, r)
    err = r.error()
    if code is not None:
        assert err["code"] == code, err
    if message is not None:
        assert message in err["message"], err
    return err


def spawn_uid(hg, user=ADMIN[0]):
    """(uid, gid) that a hostgate user's commands run as: the user's own
    (hgctl user list) in root mode, the daemons' user otherwise."""
    if hg.mode == "root":
        for u in hg.hgctl_json("user", "list"):
            if u["name"] == user:
                return u["uid"], u["gid"]
        raise KeyError(user)
    if hg.run_as:
        return hg.run_as
    return os.geteuid(), os.getegid()


def front_uid(hg):
    """(uid, gid) of frontd: the one allowed on front/broker.sock."""
    if hg.mode == "root":
        return hglib.account(hglib.SERVICE_USERS["frontd"])
    if hg.run_as:
        return hg.run_as
    return os.geteuid(), os.getegid()


def workspace_root(hg):
    return hg.env.get("HOSTGATE_WORKSPACE_ROOT",
                      os.path.join(hg.state, "workspaces"))


# -- server-sent events -------------------------------------------------------

class EventStream:
    """A GET /api/events stream read line by line from a plain socket (so
    that a read can time out and the stream go on). events holds every
    event read so far as {"id", "event", "data"}; comments holds the
    comment lines."""

    def __init__(self, hg, cookie=None, bearer=None, last_event_id=None,
                 timeout=hglib.SLOW):
        self.hg = hg
        self.sock = socket.create_connection(("127.0.0.1", hg.port),
                                             timeout=timeout)
        h = ["Host: 127.0.0.1:%d" % hg.port, "Accept: text/event-stream"]
        if cookie:
            h.append("Cookie: hg_session=" + cookie)
        if bearer:
            h.append("Authorization: Bearer " + bearer)
        if last_event_id is not None:
            h.append("Last-Event-ID: %s" % last_event_id)
        self.sock.sendall(("GET /api/events HTTP/1.1\r\n%s\r\n\r\n"
                           % "\r\n".join(h)).encode())
        self.buf = b""
        self.closed = False
        self.events = []
        self.comments = []
        self.retry = None
        head = self._read_until(b"\r\n\r\n", time.monotonic() + timeout)
        assert head is not None, "no answer to GET /api/events"
        self.status, self.headers, _ = hglib.parse_raw(head)
        self.body = b""
        if self.status != 200:
            n = int(self.headers.get("content-length", "0"))
            deadline = time.monotonic() + timeout
            while len(self.buf) < n and self._fill(deadline):
                pass
            self.body = self.buf[:n]
            self.close()

    def _fill(self, deadline):
        """Read more into buf; False on EOF; TimeoutError past deadline."""
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("no event data in time")
        self.sock.settimeout(left)
        try:
            chunk = self.sock.recv(65536)
        except socket.timeout:
            raise TimeoutError("no event data in time") from None
        except ConnectionResetError:
            chunk = b""
        if not chunk:
            self.closed = True
            return False
        self.buf += chunk
        return True

    def _read_until(self, sep, deadline):
        while sep not in self.buf:
            if self.closed or not self._fill(deadline):
                return None
        out, _, self.buf = self.buf.partition(sep)
        return out + sep

    def error(self):
        return json.loads(self.body)["error"]

    def next(self, timeout=5):
        """The next event, or None when the server closed the stream;
        raises TimeoutError when none comes in time."""
        deadline = time.monotonic() + timeout
        while True:
            block = self._read_until(b"\n\n", deadline)
            if block is None:
                return None
            ev = {"id": None, "event": "message", "data": ""}
            data = []
            for line in block.decode().split("\n"):
                if line == "":
                    continue
                if line.startswith(":"):
                    self.comments.append(line)
                    continue
                k, _, v = line.partition(":")
                v = v[1:] if v.startswith(" ") else v
                if k == "data":
                    data.append(v)
                elif k == "id":
                    ev["id"] = v
                elif k == "event":
                    ev["event"] = v
                elif k == "retry":
                    self.retry = v
            if not data:
                continue        # a comment or a retry: not an event
            text = "\n".join(data)
            ev["data"] = json.loads(text) if text.startswith("{") else text
            self.events.append(ev)
            return ev

    def wait_closed(self, timeout=hglib.SLOW):
        """Read (and keep) events until the server closes the stream or
        timeout seconds pass; whether it closed."""
        deadline = time.monotonic() + timeout
        while not self.closed and time.monotonic() < deadline:
            try:
                if self.next(0.2) is None:
                    break
            except TimeoutError:
                pass
        return self.closed

    def wait(self, name, timeout=hglib.SLOW, pred=None):
        """Read events until one named name (and satisfying pred) comes;
        returns it. Events already read count too."""
        for ev in self.events:
            if ev["event"] == name and (pred is None or pred(ev)):
                return ev
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            try:
                ev = self.next(max(0.01, left))
            except TimeoutError:
                ev = False
            if ev is None or ev is False or left <= 0:
                raise AssertionError(
                    "no %s event within %.1fs (%s); got %r"
                    % (name, timeout, "stream closed" if ev is None else
                       "timeout", [(e["event"], e["data"])
                                   for e in self.events]))
            if ev["event"] == name and (pred is None or pred(ev)):
                return ev

    def drain(self, quiet=0.3):
        """Read the events that come until quiet seconds pass with none."""
        while True:
            try:
                if self.next(quiet) is None:
                    return
            except TimeoutError:
                return

    def names(self):
        return [e["event"] for e in self.events]

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


# -- the audit log ------------------------------------------------------------

def audit_path(hg):
    return os.path.join(hg.state, "audit.log")


def audit_records(hg, **match):
    """The records of STATE_DIR/audit.log, parsed, whose members equal
    match (detail members with a "detail_" prefix)."""
    out = []
    with open(audit_path(hg), "rb") as f:
        for line in f:
            if not line.endswith(b"\n"):
                break
            rec = json.loads(line)
            if _matches(rec, match):
                out.append(rec)
    return out


def _matches(rec, match):
    for k, v in match.items():
        if k.startswith("detail_"):
            if (rec.get("detail") or {}).get(k[7:]) != v:
                return False
        elif rec.get(k) != v:
            return False
    return True


def wait_audit(hg, timeout=hglib.SLOW, **match):
    """The matching records, once there is at least one."""
    return hglib.wait_for(lambda: audit_records(hg, **match), timeout,
                          what="audit record %r" % match)


def audit_show(hg, *args):
    """hgctl audit show ARGS --json: the records (JSON Lines, one a line)."""
    r = hg.hgctl_ok(*(["audit", "show"] + list(args) + ["--json"]))
    try:
        return [json.loads(line) for line in r.stdout.splitlines()]
    except ValueError:
        raise AssertionError("hgctl audit show --json: not JSON Lines: %r"
                             % r.stdout)


def verify(hg):
    """hgctl audit verify --json: (exit status, document)."""
    r = hg.hgctl("audit", "verify", "--json")
    try:
        doc = json.loads(r.stdout)
    except ValueError:
        raise AssertionError("hgctl audit verify --json: %d %r %r"
                             % (r.returncode, r.stdout, r.stderr))
    return r.returncode, doc


# -- many requests at once ----------------------------------------------------

def at_once(n, fn, timeout=hglib.SLOW):
    """Call fn(i) in n threads released together; returns the n results
    (an exception instance for a call that raised)."""
    barrier = threading.Barrier(n)
    results = [None] * n

    def worker(i):
        try:
            barrier.wait(timeout)
            results[i] = fn(i)
        except Exception as e:          # noqa: BLE001 -- reported as a result
            results[i] = e

    threads = [threading.Thread(target=worker, args=(i,), daemon=True)
               for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout)
    assert not any(t.is_alive() for t in threads), "requests hung"
    return results


def statuses(results):
    """{status: count} of a list of Responses; exceptions are a failure."""
    errors = [r for r in results if isinstance(r, Exception)]
    assert not errors, "%d requests failed: %r" % (len(errors), errors[:3])
    out = {}
    for r in results:
        out[r.status] = out.get(r.status, 0) + 1
    return out


# -- a hand-made frontd -------------------------------------------------------

def front_talk(hg, requests, who=None, wait=hglib.SLOW):
    """Connect to RUN_DIR/front/broker.sock as frontd's uid (or who), say
    hello as frontd and send each request (a dict; "id" is added when
    missing). Returns {"hello", "replies": {id: reply}, "open": whether
    the connection was still open at the end, "outputs": {id: [text of
    each fd received]}}. Events brokerd broadcasts are skipped. A request's
    "_fds" member (a list of fds) is sent with it by SCM_RIGHTS."""
    path = os.path.join(hg.run, hglib.SOCK_FRONT)
    msgs = []
    for i, req in enumerate(requests, 1):
        req = dict(req)
        req.setdefault("id", 1000 + i)
        msgs.append(req)

    def talk():
        s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        s.settimeout(wait)
        s.connect(path)
        s.send(hglib.hello("frontd"))
        out = {"hello": None, "replies": {}, "outputs": {}, "open": True}
        want = {str(m["id"]) for m in msgs if isinstance(m.get("id"), int)}
        for m in msgs:
            m = dict(m)
            fds = m.pop("_fds", None)
            if fds:
                socket.send_fds(s, [json.dumps(m).encode()], fds)
            else:
                s.send(json.dumps(m).encode())
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline and (
                out["hello"] is None or not want <= set(out["replies"])):
            s.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                data, fds, flags, _ = socket.recv_fds(s, 70000, 4)
            except socket.timeout:
                break
            except ConnectionResetError:
                out["open"] = False
                break
            if not data:
                out["open"] = False
                break
            texts = []
            for fd in fds:
                try:
                    texts.append(os.pread(fd, 1 << 20, 0).decode(
                        "utf-8", "replace"))
                except OSError:
                    texts.append(None)
                finally:
                    os.close(fd)
            msg = hglib.ipc_decode(data)
            if msg.get("type") == "hello":
                out["hello"] = msg
            elif msg.get("type") == "event":
                continue
            elif "id" in msg:
                out["replies"][str(msg["id"])] = msg
                if texts:
                    out["outputs"][str(msg["id"])] = texts
        if out["open"]:
            # Still open? A health request must be answered.
            s.settimeout(max(0.5, wait / 2))
            s.send(json.dumps({"type": "health", "id": 1}).encode())
            try:
                while True:
                    data = s.recv(70000)
                    if not data:
                        out["open"] = False
                        break
                    msg = hglib.ipc_decode(data)
                    if msg.get("id") == 1:
                        break
            except (socket.timeout, ConnectionResetError):
                out["open"] = False
        s.close()
        return out

    res = hglib.run_as(who or front_uid(hg), talk, timeout=wait * 3 + 5)
    res["replies"] = {int(k): v for k, v in res["replies"].items()}
    res["outputs"] = {int(k): v for k, v in res["outputs"].items()}
    return res


def auth_of(session, csrf=True):
    """The "auth" object frontd would forward for a cookie session."""
    a = {"cookie": session.cookie}
    if csrf:
        a["csrf"] = session.csrf
    return a
