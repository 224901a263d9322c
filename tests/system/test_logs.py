"""Logs people can use: RFC 3339 timestamps on stderr, one access line per
HTTP request, a request id from X-Request-Id through frontd's, brokerd's
and sandboxd's lines to the audit record, sessions by one short form,
native journal entries under systemd, and a daemon without -d that still
logs when there is no syslog."""

import json
import os
import re
import shutil
import socket
import struct
import subprocess
import tempfile

import pytest

import hglib
import policylib as pl
import sandboxlib as sl

RID = re.compile(r"[0-9a-f]{16}")
LINE = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z) "
                  r"(DEBUG|INFO|WARN|FATAL) (%s): (.*)"
                  % "|".join(hglib.DAEMONS))
ACCESS = re.compile(r"\[([0-9a-f]{16})\] access (\S+) (\S+) "
                    r"\"(\S+) (\S+)\" (\d{3}) (\d+) (\d+)ms")


# The configuration of `hg` (conftest.py): pooled per mode.
HOSTGATE = pl.config()


@pytest.fixture(scope="module")
def alice(hg):
    return hg.login(*pl.ADMIN)


def rid_of(r):
    rid = r.header("X-Request-Id")
    assert rid is not None and RID.fullmatch(rid), r.headers
    return rid


def run(session, command):
    """POST /api/run_command; the response (asserts 200)."""
    r = session.post("/api/run_command", {"command": command,
                                          "timeout": int(hglib.SLOW)})
    assert r.status == 200, r
    return r


def access_lines(hg, *want):
    """frontd's access lines, parsed: {request id: fields}. frontd writes
    a request's line just after its answer, so with want (request ids)
    this waits until the line of each is there."""
    if want:
        return hglib.wait_for(
            lambda: (lambda a: a if all(r in a for r in want) else None)(
                access_lines(hg)),
            what="frontd's access lines of " + ", ".join(want))
    out = {}
    for line in hg.log_text("frontd").splitlines():
        m = LINE.fullmatch(line)
        a = ACCESS.fullmatch(m.group(4)) if m else None
        if a:
            out[a.group(1)] = {
                "level": m.group(2), "client": a.group(2),
                "user": a.group(3), "method": a.group(4),
                "path": a.group(5), "status": int(a.group(6)),
                "bytes": int(a.group(7)), "ms": int(a.group(8))}
    return out


def lines_with(hg, name, rid):
    return [line for line in hg.log_text(name).splitlines()
            if "[%s] " % rid in line]


def lines_saying(hg, name, rid, text):
    """The lines of daemon name about request rid, once one says text (a
    daemon may log a step just after passing its result on)."""
    return hglib.wait_for(
        lambda: (lambda b: b if any(text in ln for ln in b) else None)(
            lines_with(hg, name, rid)),
        what="%s saying %r about %s" % (name, text, rid))


def test_every_line_has_a_timestamp(hg, alice):
    """Each line a daemon writes to stderr is "TIME LEVEL daemon: ..."."""
    pl.run(alice, "true")
    for name in hglib.DAEMONS:
        lines = [ln for ln in hg.log_text(name).splitlines()
                 if not ln.startswith("---- start ")]
        assert lines, name
        bad = [ln for ln in lines if not (LINE.fullmatch(ln) and
                                          LINE.fullmatch(ln).group(3) == name)]
        assert not bad, (name, bad[:5])
    first = LINE.fullmatch([ln for ln in hg.log_text("frontd").splitlines()
                            if "listening" in ln][0])
    assert first.group(2) == "INFO", first.group(0)


def raw_head(hg, data):
    """Status and lower-cased headers of what frontd answers to raw bytes."""
    out = hg.raw(data)
    head = out.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
    hdrs = {}
    for h in head[1:]:
        k, _, v = h.partition(":")
        hdrs[k.strip().lower()] = v.strip()
    return int(head[0].split()[1]), hdrs


def test_request_id_on_every_response(hg, alice):
    """X-Request-Id on successes, errors, 404, a malformed head, the
    WebSocket upgrade and the event stream; never the same twice."""
    seen = []
    for r in (hg.get("/healthz"), hg.get("/api/no/such/thing"),
              hg.get("/api/status"), alice.get("/api/status"),
              hg.post("/api/login", "not json"),
              hg.request("PUT", "/api/status")):
        seen.append(rid_of(r))
    st, h = raw_head(hg, b"GARBAGE\r\n\r\n")
    assert st == 400 and RID.fullmatch(h.get("x-request-id", "")), h
    seen.append(h["x-request-id"])

    # The event stream: read its head only.
    s = socket.create_connection(("127.0.0.1", hg.port), timeout=hglib.SLOW)
    try:
        s.sendall(("GET /api/events HTTP/1.1\r\nHost: x\r\nCookie: "
                   "hg_session=%s\r\n\r\n" % alice.cookie).encode())
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = s.recv(4096)
            assert chunk, data
            data += chunk
    finally:
        s.close()
    m = re.search(rb"\r\nX-Request-Id: ([0-9a-f]{16})\r\n", data)
    assert data.startswith(b"HTTP/1.1 200") and m, data
    seen.append(m.group(1).decode())

    with sl.terminal(alice, attach=False) as t:
        st, hdrs, body, ws = sl.ws_handshake(hg, sl.ws_path(t.id),
                                             cookie=alice.cookie)
        try:
            assert st == 101, (st, body)
            assert RID.fullmatch(hdrs.get("x-request-id", "")), hdrs
            seen.append(hdrs["x-request-id"])
        finally:
            if ws:
                ws.close()
    assert len(set(seen)) == len(seen), seen

    access = access_lines(hg, *seen)
    for rid in seen:
        assert rid in access, (rid, hg.log_text("frontd")[-3000:])
    assert access[seen[1]]["status"] == 404
    assert access[seen[2]]["status"] == 401
    assert access[seen[-2]]["status"] == 200    # the event stream
    assert access[seen[-1]]["status"] == 101    # the WebSocket


def test_access_line(hg, alice):
    """One line per request at info: client, user, method, the path
    without its query string, status, body bytes, milliseconds."""
    r = alice.get("/api/status?secret=hunter2")
    assert r.status == 200
    a = access_lines(hg, rid_of(r))[rid_of(r)]
    assert a == dict(a, level="INFO", client="127.0.0.1", user="alice",
                     method="GET", path="/api/status", status=200,
                     bytes=len(r.body)), a
    assert "hunter2" not in hg.log_text("frontd")

    r = hg.get("/api/status")
    a = access_lines(hg, rid_of(r))[rid_of(r)]
    assert (a["user"], a["status"], a["bytes"]) == ("-", 401, len(r.body))

    # A path that needs escaping stays one field on one line.
    r = hg.get('/api/a"b%0A\\c')
    a = access_lines(hg, rid_of(r))[rid_of(r)]
    assert a["path"] == '/api/a\\"b%0A\\\\c' and a["status"] == 404, a

    r = alice.request("HEAD", "/api/status")
    a = access_lines(hg, rid_of(r))[rid_of(r)]
    assert a["method"] == "HEAD" and a["bytes"] == 0, a
    rids = [rid_of(alice.get("/api/status")) for _ in range(3)]
    access_lines(hg, *rids)
    for rid in rids:
        assert len([ln for ln in hg.log_text("frontd").splitlines()
                    if "[%s] access " % rid in ln]) == 1, rid


def test_request_id_end_to_end(hg, alice):
    """The id of a run_command is in frontd's access line, brokerd's and
    sandboxd's lines about it and the audit record of the spawn."""
    r = run(alice, "echo logged")
    rid = rid_of(r)
    recs = [x for x in pl.audit_records(hg, action="spawn_end")
            if x["detail"].get("request_id") == rid]
    assert len(recs) == 1, pl.audit_records(hg, action="spawn_end")
    spawn_id = recs[0]["detail"]["id"]
    assert access_lines(hg, rid)[rid]["path"] == "/api/run_command"
    lines_saying(hg, "brokerd", rid, "command %s of alice ran" % spawn_id)
    s = lines_saying(hg, "sandboxd", rid,
                     "command %s of alice: exit 0" % spawn_id)
    assert any("spawn %s " % spawn_id in ln for ln in s), s
    # hgctl shows it as well.
    shown = pl.audit_show(hg, "--action", "spawn")
    assert any(x["detail"].get("request_id") == rid for x in shown), shown


def test_audit_records_of_requests(hg):
    """Login, token mint and permission changes name their request."""
    r = hg.post("/api/login", {"username": pl.USER[0],
                               "password": pl.USER[1]})
    assert r.status == 200
    rid = rid_of(r)
    rec = pl.audit_records(hg, action="login", user="bob")[-1]
    assert rec["detail"]["request_id"] == rid, rec
    assert lines_with(hg, "brokerd", rid), hg.log_text("brokerd")[-2000:]
    bob = hg.login(*pl.USER)
    r = bob.post("/api/session/tokens", {})
    assert r.status == 201, r
    rec = pl.audit_records(hg, action="token_minted", user="bob")[-1]
    assert rec["detail"]["request_id"] == rid_of(r), rec
    # Records of no request (a timer, hgctl) have none.
    hg.hgctl_ok("user", "add", "dave", "--password-stdin", input="pw-dave-1\n")
    rec = pl.audit_records(hg, action="user_added")[-1]
    assert "request_id" not in rec["detail"], rec


def test_sessions_logged_short(hg):
    """Session ids appear in logs as the first 8 digits of their public
    id, never whole, never the cookie."""
    s = hg.login(*pl.USER)
    assert s.get("/api/status").status == 200
    assert s.post("/api/permission", {"permission": "read-only"}).status \
        == 200
    assert s.post("/api/permission",
                  {"permission": "workspace-write"}).status == 200
    full = pl.audit_records(hg, action="login", user="bob")[-1]["session"]
    assert re.fullmatch(r"[0-9a-f]{32}", full), full
    text = hg.log_text("brokerd")
    assert "session %s" % full[:8] in text, text[-2000:]
    for name in hglib.DAEMONS:
        t = hg.log_text(name)
        assert full not in t, name
        assert s.cookie not in t and s.csrf not in t, name


def test_hostile_request_id_is_replaced(hg, alice):
    """brokerd does not take a malformed request_id from frontd: it logs
    it escaped, serves the request under an id of its own, and that id is
    what the audit record and sandboxd see."""
    evil = "x\n2026-01-01T00:00:00.000Z INFO brokerd: forged"
    res = pl.front_talk(hg, [
        {"type": "status", "auth": pl.auth_of(alice), "request_id": evil},
        {"type": "token_mint", "auth": pl.auth_of(alice),
         "request_id": "0123456789ABCDEF"},
        {"type": "run", "command": "true", "auth": pl.auth_of(alice),
         "request_id": 42},
        {"type": "token_mint", "auth": pl.auth_of(alice),
         "request_id": "00112233aabbccdd"},
    ])
    replies = [res["replies"].get(1001 + i) for i in range(4)]
    assert all(r is not None and "result" in r for r in replies), replies
    assert all(r.get("user") == "alice" for r in replies), replies
    text = hg.log_text("brokerd")
    assert "forged" not in "".join(ln for ln in text.splitlines()
                                   if not LINE.fullmatch(ln))
    assert "\\n2026-01-01T00:00:00.000Z INFO brokerd: forged" in text, \
        text[-2000:]
    warned = re.findall(r"malformed request_id .* it is ([0-9a-f]{16})", text)
    assert len(warned) >= 3, text[-3000:]
    minted = pl.audit_records(hg, action="token_minted")
    assert minted[-2]["detail"]["request_id"] in warned, (minted, warned)
    # A well-formed one is kept.
    assert minted[-1]["detail"]["request_id"] == "00112233aabbccdd", minted
    assert "0123456789ABCDEF" not in json.dumps(minted)
    spawn = pl.audit_records(hg, action="spawn")[-1]
    assert spawn["detail"]["request_id"] in warned, (spawn, warned)
    assert lines_with(hg, "sandboxd", spawn["detail"]["request_id"])


# -- where lines go -----------------------------------------------------------

def start_logged(hg, name, prefix, argv_tail=("-d",), env=None):
    """Start a daemon with Hostgate.start, behind prefix (a command that
    execs the rest), with more environment computed from its log file."""
    return hg.start(name, extra_env=env, prefix=prefix, args=argv_tail)


needs_root = pytest.mark.skipif(not hglib.IS_ROOT or
                                shutil.which("unshare") is None,
                                reason="mount namespaces need root")


@needs_root
def test_no_syslog_means_stderr(hostgate_factory):
    """Without -d (so daemon(3) points fd 2 at /dev/null) and with nothing
    listening on /dev/log (hidden in a private mount namespace), brokerd
    says so once and goes on logging to the stderr it was started with."""
    hg = hostgate_factory(start=False)
    hide = ("[ ! -e /dev/log ] || mount --bind /dev/null /dev/log; "
            'exec "$@"')
    binary = hg.binary("brokerd")
    hg.start("sandboxd")
    hg.start("frontd")
    p = start_logged(hg, "brokerd", hglib.private_mounts(hide, "sh"),
                     argv_tail=())
    try:
        assert p.wait(hglib.SLOW) == 0      # the parent of daemon(3)
        hg.wait_healthy()
        hg.add_user(*hglib.USER)
        hg.login(*hglib.USER)
        lines = [ln for ln in hg.log_text("brokerd").splitlines()
                 if not ln.startswith("---- start ")]
        assert all(LINE.fullmatch(ln) for ln in lines), lines
        said = [ln for ln in lines if "no syslog daemon listens on "
                "/dev/log: logging to stderr" in ln]
        assert len(said) == 1 and " WARN brokerd: " in said[0], lines
        assert any(" INFO brokerd: brokerd " in ln and " ready " in ln
                   for ln in lines), lines
        assert any("login: user bob" in ln for ln in lines), lines
    finally:
        hglib.stop_binary(binary, "brokerd")


def journal_fields(data):
    """The fields of one native journal protocol datagram: KEY=VALUE\\n,
    or KEY\\n, a 64-bit little-endian length, the value and \\n."""
    out = {}
    i = 0
    while i < len(data):
        nl = data.index(b"\n", i)
        eq = data.find(b"=", i, nl)
        if eq != -1:
            out.setdefault(data[i:eq].decode(), []).append(
                data[eq + 1:nl].decode())
            i = nl + 1
        else:
            key = data[i:nl].decode()
            (n,) = struct.unpack("<Q", data[nl + 1:nl + 9])
            val = data[nl + 9:nl + 9 + n]
            assert data[nl + 9 + n:nl + 10 + n] == b"\n", data
            out.setdefault(key, []).append(val.decode())
            i = nl + 10 + n
    return {k: v[0] if len(v) == 1 else v for k, v in out.items()}


def test_journal_parser_reads_both_forms():
    """The parser the next test relies on, on both encodings."""
    d = (b"MESSAGE=hi\nPRIORITY=6\nMULTI\n" + struct.pack("<Q", 3) +
         b"a\nb\nX=\n")
    assert journal_fields(d) == {"MESSAGE": "hi", "PRIORITY": "6",
                                 "MULTI": "a\nb", "X": ""}


@needs_root
@pytest.mark.skipif(not os.path.isdir("/run/systemd"),
                    reason="no /run/systemd to mount over")
def test_journal_fields(hostgate_factory):
    """Started as systemd would (JOURNAL_STREAM naming its stderr), each
    daemon sends native entries to /run/systemd/journal/socket: a real
    datagram socket here, bound over /run/systemd in each daemon's private
    mount namespace. Nothing of it goes to stderr."""
    hg = hostgate_factory(start=False)
    jdir = tempfile.mkdtemp(prefix="hg-journal-")
    sink = None
    try:
        os.chmod(jdir, 0o755)
        os.mkdir(os.path.join(jdir, "journal"), 0o755)
        sink = hglib.DatagramSink(os.path.join(jdir, "journal", "socket"),
                                  parse=journal_fields)
        entries = sink.got
        mount = 'mount --bind "$0" /run/systemd && exec "$@"'

        def stream(st):
            return {"JOURNAL_STREAM": "%d:%d" % (st.st_dev, st.st_ino)}
        for name in hglib.DAEMONS:
            start_logged(hg, name, hglib.private_mounts(mount, jdir),
                         env=stream)
        hg.wait_healthy()
        hg.add_user(*hglib.ADMIN, admin=True)
        alice = hg.login(*hglib.ADMIN)
        r = run(alice, "echo journal")
        rid = rid_of(r)
        session = pl.audit_records(hg, action="login")[-1]["session"]


        def all_arrived():
            about = [e for e in entries if e.get("HOSTGATE_REQUEST_ID") == rid]
            return (any(e.get("SYSLOG_IDENTIFIER") == "sandboxd" and
                        "exit 0" in e.get("MESSAGE", "") for e in about) and
                    any(e.get("SYSLOG_IDENTIFIER") == "brokerd"
                        for e in about) and
                    any(e.get("SYSLOG_IDENTIFIER") == "frontd" and
                        e.get("MESSAGE", "").startswith("access ")
                        for e in about))
        # The three daemons' datagrams reach the socket in any order, and
        # the reader takes them one by one: wait for each daemon's.
        hglib.wait_for(all_arrived, what="each daemon's journal entry")
    finally:
        if sink is not None:
            sink.close()
        shutil.rmtree(jdir, ignore_errors=True)

    for name in hglib.DAEMONS:
        mine = [e for e in entries if e.get("SYSLOG_IDENTIFIER") == name]
        assert mine, (name, entries[:5])
        assert all(re.fullmatch(r"[0-7]", e["PRIORITY"]) and e["MESSAGE"]
                   for e in mine), mine
        assert mine[0]["MESSAGE"] == "logging to the systemd journal", mine
        text = [ln for ln in hg.log_text(name).splitlines()
                if not ln.startswith("---- start ")]
        assert text == [], (name, text)
    front = [e for e in entries if e.get("HOSTGATE_REQUEST_ID") == rid and
             e["SYSLOG_IDENTIFIER"] == "frontd"]
    assert len(front) == 1 and front[0]["MESSAGE"].startswith(
        "access 127.0.0.1 alice \"POST /api/run_command\" 200 "), front
    assert front[0]["PRIORITY"] == "6" and \
        front[0]["HOSTGATE_USER"] == "alice", front
    broker = [e for e in entries if e.get("HOSTGATE_REQUEST_ID") == rid and
              e["SYSLOG_IDENTIFIER"] == "brokerd"]
    assert broker and all(e.get("HOSTGATE_USER") == "alice" and
                          e.get("HOSTGATE_SESSION") == session[:8]
                          for e in broker), broker
    sandbox = [e for e in entries if e.get("HOSTGATE_REQUEST_ID") == rid and
               e["SYSLOG_IDENTIFIER"] == "sandboxd"]
    assert sandbox and all(e.get("HOSTGATE_SESSION") == session[:8] and
                           e.get("HOSTGATE_USER") == "alice"
                           for e in sandbox), sandbox
    # The message itself does not repeat the request id.
    assert all("[%s]" % rid not in e["MESSAGE"] for e in entries)
