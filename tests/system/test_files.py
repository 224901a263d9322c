"""The workspace file API, /api/files/...: uploads (PUT, spooled by frontd
into a memfd), downloads (GET and HEAD, sent from the fd sandboxd opened),
listings, mkdir and DELETE; the paths refused before anything else, the
permission, the audit, and hostile symlinks planted in the workspace that
must never let a read or a write leave it."""

import json
import os
import shutil
import socket
import stat
import tempfile
import time
import urllib.parse
from email.utils import parsedate_to_datetime

import pytest

import hglib
import policylib as pl

MiB = 1024 * 1024
CAP = 4 * MiB           # HOSTGATE_MAX_UPLOAD_BYTES of these tests
READ_ONLY = ("this session's permission is read-only: the workspace cannot "
             "be changed; ask an admin to switch the session to "
             "workspace-write")


# The configuration of `hg` (conftest.py): pooled per mode.
HOSTGATE = pl.config(HOSTGATE_MAX_UPLOAD_BYTES=str(CAP))


@pytest.fixture(scope="module")
def alice(hg):
    return hg.login(*pl.ADMIN)


@pytest.fixture
def outside(hg):
    """A directory outside every workspace that the sandboxed user could
    write to if a path escaped (mode 0777), with a file in it."""
    d = tempfile.mkdtemp(prefix="hg-outside-")
    os.chmod(d, 0o777)
    with open(os.path.join(d, "secret.txt"), "w") as f:
        f.write("outside secret\n")
    os.chmod(os.path.join(d, "secret.txt"), 0o666)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def url(path):
    return "/api/files/" + path


def put(s, path, data, **kw):
    headers = {"Content-Type": "application/octet-stream"}
    headers.update(kw.pop("headers", {}))
    return s.request("PUT", url(path), body=data, headers=headers,
                     timeout=kw.pop("timeout", hglib.SLOW), **kw)


def get(s, path, **kw):
    return s.request("GET", url(path), timeout=kw.pop("timeout", hglib.SLOW),
                     **kw)


def delete(s, path, **kw):
    return s.request("DELETE", url(path), **kw)


def sh(s, command):
    """Run a command in the user's workspace; asserts exit code 0."""
    res = pl.run(s, command)
    assert res["exit_code"] == 0, res
    return res["stdout"]


def listing(s, path=""):
    r = get(s, path)
    assert r.status == 200, r
    assert r.header("Content-Type") == "application/json", r.headers
    return r.json()


def names(doc):
    return [e["name"] for e in doc["entries"]]


def frontd_pid(hg):
    """The pid of frontd proper (the child of its jail keeper, if any)."""
    pid = hg.pid("frontd")
    try:
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            kids = [int(k) for k in f.read().split()]
    except OSError:
        kids = []
    return kids[0] if kids else pid


def rss_kib(pid):
    return int(hglib.proc_status(pid)["VmRSS"].split()[0])


def raw_head(hg, s, method, path, extra=b""):
    return (b"%s %s HTTP/1.1\r\nHost: x\r\nCookie: hg_session=%s\r\n"
            b"X-CSRF-Token: %s\r\n%s\r\n" % (method.encode(), path.encode(),
                                             s.cookie.encode(),
                                             s.csrf.encode(), extra))


def read_responses(sock, n, timeout=hglib.SLOW):
    """n complete HTTP responses from sock: [(status, headers, body)]."""
    out = []
    buf = b""
    deadline = time.monotonic() + timeout
    while len(out) < n:
        while True:
            head, sep, rest = buf.partition(b"\r\n\r\n")
            if not sep:
                break
            status, headers, _ = hglib.parse_raw(head + b"\r\n\r\n")
            clen = int(headers.get("content-length", "0"))
            if status == 100:
                buf = rest
                continue
            if len(rest) < clen:
                break
            out.append((status, headers, rest[:clen]))
            buf = rest[clen:]
            if len(out) == n:
                return out
        assert time.monotonic() < deadline, "timed out: %r" % buf[:300]
        sock.settimeout(max(0.1, deadline - time.monotonic()))
        chunk = sock.recv(65536)
        assert chunk, "closed after %d responses: %r" % (len(out), buf[:300])
        buf += chunk
    return out


# -- paths refused before anything else -------------------------------------

BAD_PATHS = [
    "..", "../etc/passwd", "a/../b", "a/..", ".", "./a", "a/./b",
    "%2e%2e/x", "a/%2E%2E", "a//b", "a%2F%2Fb", "%00", "a%00b", "a/%00",
    "%2Fetc/passwd", "/etc/passwd", "%zz", "a%2", "a%0Ab",
    "x" * 256, "a/" + "y" * 256 + "/b", "/".join(["d" * 200] * 21),
]


@pytest.mark.parametrize("path", BAD_PATHS,
                         ids=lambda p: p if len(p) < 20 else "long%d" % len(p))
def test_bad_paths_refused(hg, alice, path):
    for method in ("GET", "HEAD", "PUT", "DELETE"):
        r = alice.request(method, url(path),
                          body=b"x" if method == "PUT" else None)
        assert r.status == 400, (method, path, r)
        if method != "HEAD":
            pl.assert_error(r, 400, "bad_request")


def test_bad_path_before_auth(hg):
    """No credentials: the path is refused first, as docs/api.md says."""
    r = hg.get(url("a/../b"))
    pl.assert_error(r, 400, "bad_request")
    r = hg.get(url("ok.txt"))
    pl.assert_error(r, 401, "unauthorized")


def test_root_cannot_be_put_or_deleted(hg, alice):
    pl.assert_error(put(alice, "", b""), 400, "bad_request")
    pl.assert_error(delete(alice, ""), 400, "bad_request")


def test_other_methods(hg, alice):
    r = alice.request("POST", url("a.txt"), body=b"x")
    assert r.status == 405, r
    assert r.header("Allow") == "GET, HEAD, PUT, DELETE", r.headers


# -- authentication -----------------------------------------------------------

def test_auth_required(hg, alice):
    pl.assert_error(hg.request("GET", url("")), 401, "unauthorized")
    pl.assert_error(hg.request("PUT", url("x.txt"), body=b"x"), 401,
                    "unauthorized")
    pl.assert_error(hg.request("DELETE", url("x.txt")), 401,
                    "unauthorized")


def test_csrf_required_for_cookie_writes(hg, alice):
    r = alice.request("PUT", url("csrf.txt"), body=b"x", csrf=False)
    pl.assert_error(r, 403, "forbidden", "CSRF")
    r = alice.request("DELETE", url("csrf.txt"), csrf=False)
    pl.assert_error(r, 403, "forbidden", "CSRF")
    assert get(alice, "csrf.txt").status == 404


def test_bearer_token(hg, alice):
    tok = pl.mint_token(alice)
    r = hg.request("PUT", url("tok/by-token.txt"), body=b"from a token",
                   bearer=tok)
    assert r.status == 201, r
    r = hg.request("GET", url("tok/by-token.txt"), bearer=tok)
    assert r.status == 200 and r.body == b"from a token", r
    r = hg.request("DELETE", url("tok/by-token.txt"), bearer=tok)
    assert r.status == 200, r


# -- 411, 413, 100-continue, keep-alive ----------------------------------------

def test_length_required(hg, alice):
    data = raw_head(hg, alice, "PUT", url("nolen.txt"))
    status, _, body = hglib.parse_raw(hg.raw(data))
    assert status == 411, body
    assert get(alice, "nolen.txt").status == 404


def test_chunked_refused(hg, alice):
    data = raw_head(hg, alice, "PUT", url("chunked.txt"),
                    b"Transfer-Encoding: chunked\r\n") + b"1\r\nx\r\n0\r\n\r\n"
    status, _, body = hglib.parse_raw(hg.raw(data))
    assert status in (411, 501), body


def test_too_large_before_the_body(hg, alice):
    """Over the cap: 413 at once, though not one byte of the body came."""
    data = raw_head(hg, alice, "PUT", url("big.txt"),
                    b"Content-Length: %d\r\n" % (CAP + 1))
    status, _, body = hglib.parse_raw(hg.raw(data))
    assert status == 413, body
    assert json.loads(body)["error"]["code"] == "too_large"
    assert str(CAP) in json.loads(body)["error"]["message"]
    assert get(alice, "big.txt").status == 404


def test_at_the_cap(hg, alice):
    data = os.urandom(CAP)
    r = put(alice, "cap.bin", data)
    assert r.status == 201, r
    r = get(alice, "cap.bin")
    assert r.status == 200 and r.body == data
    assert delete(alice, "cap.bin").status == 200


def test_expect_continue(hg, alice):
    body = b"after the 100\n"
    s = socket.create_connection(("127.0.0.1", hg.port), timeout=hglib.SLOW)
    try:
        s.sendall(raw_head(hg, alice, "PUT", url("cont.txt"),
                           b"Content-Length: %d\r\nExpect: 100-continue\r\n"
                           % len(body)))
        got = b""
        while b"\r\n\r\n" not in got:
            chunk = s.recv(4096)
            assert chunk, got
            got += chunk
        assert got.startswith(b"HTTP/1.1 100 Continue\r\n"), got
        s.sendall(body)
        (status, _, rbody), = read_responses(s, 1)
        assert status == 201, rbody
    finally:
        s.close()
    assert get(alice, "cont.txt").body == body


def read_head(sock, timeout=hglib.SLOW):
    """The first response head that comes on sock (and what follows)."""
    got = b""
    deadline = time.monotonic() + timeout
    while b"\r\n\r\n" not in got:
        assert time.monotonic() < deadline, "no response: %r" % got
        sock.settimeout(max(0.1, deadline - time.monotonic()))
        chunk = sock.recv(65536)
        assert chunk, "closed without a response: %r" % got
        got += chunk
    return got


def unauth_head(path, length, extra=b""):
    return (b"PUT %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n%s\r\n"
            % (url(path).encode(), length, extra))


def test_unauthenticated_never_gets_100(hg, alice):
    """The credentials are checked before the body is asked for: a client
    that waits for a 100 without them gets 401 (and Connection: close),
    never a 100, and nothing is written."""
    s = socket.create_connection(("127.0.0.1", hg.port), timeout=hglib.SLOW)
    try:
        s.sendall(unauth_head("nocont.txt", 1000,
                              b"Expect: 100-continue\r\n"))
        got = read_head(s)
        assert got.startswith(b"HTTP/1.1 401 "), got
        status, headers, body = hglib.parse_raw(got)
        assert headers["connection"] == "close", headers
        assert json.loads(body)["error"]["code"] == "unauthorized"
    finally:
        s.close()
    assert get(alice, "nocont.txt").status == 404


def test_unauthenticated_bodies_hold_no_memory(hg, alice):
    """Unauthenticated uploads that declare the whole budget of uploads in
    progress (1 GiB) and send their bytes slowly are refused at their
    head, reserve nothing, and an authorized upload at the cap still
    goes through while they are open."""
    n = (1 << 30) // CAP
    socks = []
    try:
        for i in range(n):
            s = socket.create_connection(("127.0.0.1", hg.port),
                                         timeout=hglib.SLOW)
            socks.append(s)
            s.sendall(unauth_head("slow/%d" % i, CAP) + b"x")
        for s in socks:
            status, headers, _ = hglib.parse_raw(read_head(s))
            assert status == 401, headers
            assert headers["connection"] == "close", headers
        for s in socks:
            try:
                s.sendall(b"y")     # still trickling
            except OSError:
                pass
        data = os.urandom(CAP)
        r = put(alice, "slow/authorized.bin", data)
        assert r.status == 201, r
    finally:
        for s in socks:
            s.close()
    assert get(alice, "slow/authorized.bin").body == data
    assert get(alice, "slow/0").status == 404


def test_refused_small_body_is_drained(hg, alice):
    """A small body refused unread is dropped and the connection kept: a
    request pipelined after it is answered in turn."""
    body = b"0123456789"
    s = socket.create_connection(("127.0.0.1", hg.port), timeout=hglib.SLOW)
    try:
        s.sendall(unauth_head("small.txt", len(body)) + body +
                  raw_head(hg, alice, "GET", url("")))
        (st1, h1, _), (st2, _, b2) = read_responses(s, 2)
        assert st1 == 401 and h1["connection"] == "keep-alive", h1
        assert st2 == 200 and "entries" in json.loads(b2), b2
    finally:
        s.close()
    assert get(alice, "small.txt").status == 404


def test_refused_body_then_close(hg, alice):
    """A body refused unread on a connection that is not kept (Connection:
    close) is drained a while before the close, so that its reply arrives
    whole rather than lost to a reset."""
    body = b"z" * 1000
    data = unauth_head("closing.txt", len(body), b"Connection: close\r\n")
    status, headers, rbody = hglib.parse_raw(hg.raw(data + body))
    assert status == 401 and headers["connection"] == "close", headers
    assert json.loads(rbody)["error"]["code"] == "unauthorized"


def test_read_only_refused_before_the_body(hg):
    """Under read-only a PUT gets its 403 while the client has sent only
    the head, audited once as file_refused."""
    bob = hg.login(*pl.USER)
    assert bob.post("/api/permission",
                    {"permission": "read-only"}).status == 200
    s = socket.create_connection(("127.0.0.1", hg.port), timeout=hglib.SLOW)
    try:
        s.sendall(raw_head(hg, bob, "PUT", url("ro-head.txt"),
                           b"Content-Length: %d\r\n" % MiB))
        got = read_head(s)
        status, headers, body = hglib.parse_raw(got)
        assert status == 403, got
        assert json.loads(body)["error"]["message"] == READ_ONLY
        assert headers["connection"] == "close", headers
        rid = headers["x-request-id"]
    finally:
        s.close()
        assert bob.post("/api/permission",
                        {"permission": "workspace-write"}).status == 200
    recs = pl.wait_audit(hg, action="file_refused", user="bob",
                         detail_path="ro-head.txt")
    assert len(recs) == 1 and recs[0]["reason"] == READ_ONLY, recs
    assert recs[0]["detail"]["size"] == MiB, recs
    assert pl.audit_records(hg, detail_request_id=rid) == recs
    r = put(bob, "ro-head.txt", b"now")
    assert r.status == 201, r
    rid = r.header("X-Request-Id")
    recs = pl.wait_audit(hg, detail_request_id=rid)
    assert [x["action"] for x in recs] == ["file_write"], recs


def test_pipelined(hg, alice):
    """Two uploads and a download on one connection, sent at once: the
    answers come in order, each body framed."""
    a, b = b"first body", os.urandom(70000)
    req = (raw_head(hg, alice, "PUT", url("pipe/a.txt"),
                    b"Content-Length: %d\r\n" % len(a)) + a +
           raw_head(hg, alice, "PUT", url("pipe/b.bin"),
                    b"Content-Length: %d\r\n" % len(b)) + b +
           raw_head(hg, alice, "GET", url("pipe/b.bin")) +
           raw_head(hg, alice, "GET", url("pipe/a.txt")))
    s = socket.create_connection(("127.0.0.1", hg.port), timeout=hglib.SLOW)
    try:
        s.sendall(req)
        out = read_responses(s, 4)
    finally:
        s.close()
    assert [o[0] for o in out] == [201, 201, 200, 200], out
    assert out[2][2] == b and out[3][2] == a


# -- round trips -----------------------------------------------------------------

@pytest.mark.parametrize("name,data", [
    ("hello.txt", b"hello, workspace\n"),
    ("empty.txt", b""),
    ("bin/random.bin", os.urandom(64 * 1024)),
    ("bin/zeros-and-ff.bin", b"\x00\xff" * 5000),
    ("deep/er/and/deeper/t.md", "h\u00e9llo \u2603\n".encode()),
])
def test_round_trip(hg, alice, name, data):
    r = put(alice, name, data)
    assert r.status in (200, 201), r
    doc = r.json()
    assert doc["path"] == name and doc["size"] == len(data), doc
    assert isinstance(doc["mtime"], int) and isinstance(doc["created"], bool)
    r = get(alice, name)
    assert r.status == 200, r
    assert r.body == data
    assert int(r.header("Content-Length")) == len(data)
    # Written where the user's commands see it.
    out = sh(alice, "wc -c < %s" % name)
    assert int(out) == len(data)


def test_few_mib(hg, alice):
    data = os.urandom(3 * MiB + 17)
    r = put(alice, "mib.bin", data)
    assert r.status == 201, r
    r = get(alice, "mib.bin")
    assert r.status == 200 and r.body == data
    assert sh(alice, "sha256sum < mib.bin").split()[0] == \
        __import__("hashlib").sha256(data).hexdigest()


def test_created_then_replaced(hg, alice):
    r = put(alice, "rep.txt", b"one")
    assert r.status == 201 and r.json()["created"] is True, r
    r = put(alice, "rep.txt", b"two, longer")
    assert r.status == 200 and r.json()["created"] is False, r
    assert r.json()["size"] == 11
    assert get(alice, "rep.txt").body == b"two, longer"


def test_head(hg, alice):
    assert put(alice, "head.txt", b"12345").status in (200, 201)
    r = alice.request("HEAD", url("head.txt"))
    assert r.status == 200 and r.body == b""
    assert r.header("Content-Length") == "5"


def test_download_headers(hg, alice):
    name = "h\u00e9llo w\u00f6rld.txt"
    enc = urllib.parse.quote(name)
    before = int(time.time()) - 1
    assert put(alice, enc, b"text").status in (200, 201)
    r = get(alice, enc)
    assert r.status == 200, r
    assert r.header("Content-Type") == "text/plain; charset=utf-8"
    assert r.header("Content-Disposition") == \
        "attachment; filename*=UTF-8''" + urllib.parse.quote(name, safe="")
    assert r.header("X-Content-Type-Options") == "nosniff"
    assert r.header("Content-Security-Policy") == "sandbox"
    lm = parsedate_to_datetime(r.header("Last-Modified")).timestamp()
    assert before <= lm <= time.time() + 1, r.header("Last-Modified")
    for n, ctype in (("a.bin", "application/octet-stream"),
                     ("noext", "application/octet-stream"),
                     ("p.png", "image/png"),
                     ("page.html", "text/html; charset=utf-8"),
                     ("d.json", "application/json; charset=utf-8")):
        assert put(alice, "types/" + n, b"x").status in (200, 201)
        r = get(alice, "types/" + n)
        assert r.header("Content-Type") == ctype, (n, r.headers)
        # Never a page of the panel's origin, whatever the type.
        assert r.header("Content-Security-Policy") == "sandbox"
        assert r.header("Content-Disposition").startswith("attachment;")


# -- listings, mkdir, delete -----------------------------------------------------

def test_listing(hg, alice):
    sh(alice, "rm -rf ls && mkdir -p ls/sub && printf abc > ls/b.txt && "
              "printf 12345 > ls/a.txt && ln -s a.txt ls/link && "
              "mkfifo ls/pipe")
    doc = listing(alice, "ls/")
    assert doc["path"] == "ls/" and doc["truncated"] is False, doc
    assert names(doc) == ["a.txt", "b.txt", "link", "pipe", "sub"], doc
    by = {e["name"]: e for e in doc["entries"]}
    assert by["a.txt"]["type"] == "file" and by["a.txt"]["size"] == 5
    assert by["b.txt"]["size"] == 3
    assert by["sub"]["type"] == "dir"
    assert by["link"]["type"] == "symlink"
    assert by["pipe"]["type"] == "other"
    assert all(isinstance(e["mtime"], int) and e["mtime"] > 1600000000
               for e in doc["entries"]), doc
    root = listing(alice, "")
    assert root["path"] == "" and "ls" in names(root), root


def test_directory_without_slash(hg, alice):
    sh(alice, "mkdir -p dironly")
    r = get(alice, "dironly")
    pl.assert_error(r, 409, "conflict", "/")


def test_mkdir(hg, alice):
    r = put(alice, "made/a/b/", b"")
    assert r.status == 201, r
    assert r.json() == {"path": "made/a/b/", "created": True}, r.json()
    r = put(alice, "made/a/b/", b"")
    assert r.status == 200 and r.json()["created"] is False, r
    assert listing(alice, "made/a/")["entries"][0]["type"] == "dir"
    pl.assert_error(put(alice, "made/x/", b"not empty"), 400, "bad_request")


def test_delete(hg, alice):
    assert put(alice, "del/f.txt", b"x").status == 201
    assert put(alice, "del/empty/", b"").status == 201
    assert put(alice, "del/full/inner.txt", b"y").status == 201
    r = delete(alice, "del/f.txt")
    assert r.status == 200 and r.json() == {"path": "del/f.txt",
                                            "deleted": True}, r
    assert get(alice, "del/f.txt").status == 404
    assert delete(alice, "del/empty").status == 200
    pl.assert_error(delete(alice, "del/full"), 409, "conflict")
    assert get(alice, "del/full/inner.txt").body == b"y"
    pl.assert_error(delete(alice, "del/nothing"), 404, "not_found")
    # A symlink is deleted itself, not what it points to.
    sh(alice, "ln -sf full/inner.txt del/l")
    assert delete(alice, "del/l").status == 200
    assert get(alice, "del/full/inner.txt").body == b"y"


def test_not_found(hg, alice):
    pl.assert_error(get(alice, "no/such/file"), 404, "not_found")
    pl.assert_error(get(alice, "nosuchdir/"), 404, "not_found")


def test_fifo_does_not_hang(hg, alice):
    sh(alice, "rm -f fifo && mkfifo fifo")
    r = get(alice, "fifo")
    pl.assert_error(r, 409, "conflict")
    r = put(alice, "fifo", b"into a fifo")
    assert r.status in (200, 201, 409), r
    assert hg.health().status == 200


# -- hostile symlinks ------------------------------------------------------------

def test_symlink_inside_is_followed(hg, alice):
    sh(alice, "mkdir -p inside && printf in > inside/t.txt && "
              "ln -sfn inside inlink && ln -sf inside/t.txt tlink")
    assert get(alice, "tlink").body == b"in"
    assert get(alice, "inlink/t.txt").body == b"in"


def test_hostile_symlinks_refused(hg, alice, outside):
    secret = os.path.join(outside, "secret.txt")
    sh(alice, "rm -rf evil && mkdir evil && cd evil && "
              "ln -s /etc/passwd passwd && ln -s .. up && "
              "ln -s ../.. upup && ln -s /proc/self/root root && "
              "ln -s /proc/self/cwd cwd && ln -s %s out && "
              "ln -s %s sec" % (outside, secret))
    reads = ["evil/passwd", "evil/up/evil/passwd", "evil/upup/",
             "evil/upup/etc/passwd", "evil/root/etc/passwd", "evil/root/",
             "evil/cwd/", "evil/out/", "evil/out/secret.txt", "evil/sec"]
    for p in reads:
        r = get(alice, p)
        pl.assert_error(r, 403, "forbidden", "leaves the workspace")
        assert b"root:" not in r.body and b"outside secret" not in r.body
    writes = ["evil/passwd", "evil/out/new.txt", "evil/out/secret.txt",
              "evil/sec", "evil/out/sub/deeper.txt", "evil/root/tmp/x",
              "evil/upup/escaped.txt"]
    for p in writes:
        r = put(alice, p, b"pwned")
        pl.assert_error(r, 403, "forbidden", "leaves the workspace")
    for p in ("evil/out/secret.txt", "evil/upup/etc/passwd",
              "evil/root/etc/hostname", "evil/cwd/x"):
        r = delete(alice, p)
        pl.assert_error(r, 403, "forbidden", "leaves the workspace")
    r = put(alice, "evil/out/made/", b"")
    pl.assert_error(r, 403, "forbidden")
    # Nothing outside was read or changed.
    with open(secret) as f:
        assert f.read() == "outside secret\n"
    assert sorted(os.listdir(outside)) == ["secret.txt"]
    with open("/etc/passwd", "rb") as f:
        assert b"pwned" not in f.read()
    # "up" is the workspace itself: through it, evil/passwd is the link,
    # deleted as a link (/etc/passwd is untouched).
    assert delete(alice, "evil/up/evil/passwd").status == 200
    assert os.path.exists("/etc/passwd")
    # The links themselves are still there, and can be deleted as links.
    assert delete(alice, "evil/out").status == 200
    assert os.path.isdir(outside)


def test_symlink_swapped_parent(hg, alice, outside):
    """A directory of the path replaced by a link that leaves: a PUT
    through it is refused, and nothing is made outside."""
    assert put(alice, "swap/d/f.txt", b"first").status == 201
    sh(alice, "rm -rf swap/d && ln -s %s swap/d" % outside)
    pl.assert_error(put(alice, "swap/d/f.txt", b"second"), 403, "forbidden")
    pl.assert_error(put(alice, "swap/d/new/f.txt", b"x"), 403, "forbidden")
    pl.assert_error(get(alice, "swap/d/secret.txt"), 403, "forbidden")
    assert sorted(os.listdir(outside)) == ["secret.txt"]


# -- permission and audit -----------------------------------------------------

def test_writes_audited(hg, alice):
    r = put(alice, "aud/w.txt", b"12345")
    assert r.status == 201, r
    rid = r.header("X-Request-Id")
    recs = pl.wait_audit(hg, action="file_write", user="alice",
                         detail_path="aud/w.txt", detail_request_id=rid)
    rec = recs[-1]
    assert rec["allowed"] is True and rec["detail"]["size"] == 5, rec
    assert rec["session"], rec
    r = put(alice, "aud/dir/", b"")
    assert r.status == 201, r
    pl.wait_audit(hg, action="file_mkdir", user="alice",
                  detail_path="aud/dir", allowed=True)
    r = delete(alice, "aud/w.txt")
    rid = r.header("X-Request-Id")
    assert r.status == 200
    pl.wait_audit(hg, action="file_delete", user="alice",
                  detail_path="aud/w.txt", allowed=True,
                  detail_request_id=rid)
    assert put(alice, "aud/full/x", b"x").status == 201
    r = delete(alice, "aud/full")
    assert r.status == 409
    rec = pl.wait_audit(hg, action="file_delete", detail_path="aud/full",
                        allowed=False)[-1]
    assert rec["detail"]["error"] == "conflict", rec
    # Reads are not audited.
    get(alice, "aud/full/x")
    assert not pl.audit_records(hg, detail_path="aud/full/x",
                                action="file_read")
    r = pl.verify(hg)


def test_read_only_refuses_changes(hg):
    bob = hg.login(*pl.USER)
    assert put(bob, "ro/kept.txt", b"kept").status == 201
    r = bob.post("/api/permission", {"permission": "read-only"})
    assert r.status == 200, r
    try:
        r = put(bob, "ro/new.txt", b"x")
        err = pl.assert_error(r, 403, "forbidden")
        assert err["message"] == READ_ONLY, err
        err = pl.assert_error(put(bob, "ro/dir/", b""), 403, "forbidden")
        assert err["message"] == READ_ONLY
        err = pl.assert_error(delete(bob, "ro/kept.txt"), 403, "forbidden")
        assert err["message"] == READ_ONLY
        recs = pl.wait_audit(hg, action="file_refused", user="bob",
                             detail_path="ro/new.txt")
        assert recs[-1]["allowed"] is False
        assert recs[-1]["reason"] == READ_ONLY
        pl.wait_audit(hg, action="file_refused", user="bob",
                      detail_path="ro/kept.txt", detail_op="delete")
        # Reads still work; nothing changed.
        assert get(bob, "ro/kept.txt").body == b"kept"
        assert get(bob, "ro/new.txt").status == 404
        assert "kept.txt" in names(listing(bob, "ro/"))
    finally:
        r = bob.post("/api/permission", {"permission": "workspace-write"})
        assert r.status == 200, r


def test_users_are_apart(hg, alice):
    bob = hg.login(*pl.USER)
    assert put(alice, "mine-only.txt", b"alice's").status in (200, 201)
    assert get(bob, "mine-only.txt").status == 404


# -- memory and garbage ---------------------------------------------------------

def test_large_download_memory_bounded(hg, alice):
    """A 1 GiB file downloaded: frontd's resident memory does not grow
    with it (the bytes are read from the fd as the socket drains)."""
    size = 1024 * MiB
    sh(alice, "truncate -s %d huge.bin" % size)
    pid = frontd_pid(hg)
    before = rss_kib(pid)
    peak = before
    conn = hg.connection()
    try:
        conn.request("GET", url("huge.bin"),
                     headers={"Cookie": "hg_session=" + alice.cookie})
        r = conn.getresponse()
        assert r.status == 200, r.read(300)
        assert int(r.getheader("Content-Length")) == size
        got = 0
        while True:
            chunk = r.read(4 * MiB)
            if not chunk:
                break
            assert chunk.count(0) == len(chunk)
            got += len(chunk)
            peak = max(peak, rss_kib(pid))
        assert got == size
    finally:
        conn.close()
    print("frontd RSS %d KiB before, peak %d KiB during a %d MiB download"
          % (before, peak, size // MiB))
    assert peak - before < 32 * 1024, (before, peak)
    sh(alice, "rm -f huge.bin")


def test_large_upload_memory_bounded(hg, alice):
    """An upload at the cap: spooled into a memfd, not frontd's heap."""
    pid = frontd_pid(hg)
    before = int(hglib.proc_status(pid)["RssAnon"].split()[0])
    data = b"\xa5" * CAP
    assert put(alice, "up.bin", data).status in (200, 201)
    after = int(hglib.proc_status(pid)["RssAnon"].split()[0])
    assert after - before < CAP // 1024 // 2, (before, after)


GARBAGE = [
    b"PUT /api/files/x HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
    b"PUT /api/files/x HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n",
    b"PUT /api/files/x HTTP/1.1\r\nContent-Length: 10\r\n\r\nabc",
    b"PUT /api/files/ HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc",
    b"GET /api/files/%ff%fe%00 HTTP/1.1\r\n\r\n",
    b"GET /api/files/%%%%%% HTTP/1.1\r\n\r\n",
    b"DELETE /api/files/a/b/c/d/e/f/g/../../ HTTP/1.1\r\n\r\n",
    b"GET /api/files/" + b"a/" * 3000 + b" HTTP/1.1\r\n\r\n",
    b"PUT /api/files/x HTTP/1.1\r\nContent-Length: 5\r\n"
    b"Expect: 100-continue\r\n\r\n",
    b"PUT /api/files/x HTTP/1.0\r\nContent-Length: 2\r\n\r\nab",
]


def test_garbage_never_crashes(hg, alice):
    for g in GARBAGE:
        hg.raw(g, timeout=2, shut=True)
        with_auth = g.replace(b"\r\n", b"\r\nCookie: hg_session=%s\r\n"
                              b"X-CSRF-Token: %s\r\n"
                              % (alice.cookie.encode(), alice.csrf.encode()),
                              1)
        hg.raw(with_auth, timeout=2, shut=True)
    # Cut off in the middle of an upload.
    s = socket.create_connection(("127.0.0.1", hg.port), timeout=5)
    s.sendall(raw_head(hg, alice, "PUT", url("cut.bin"),
                       b"Content-Length: 1000000\r\n") + b"x" * 5000)
    s.close()
    for d in hglib.DAEMONS:
        assert hg.alive(d), d
    assert hg.health().status == 200
    assert get(alice, "cut.bin").status == 404
    assert put(alice, "after-garbage.txt", b"fine").status in (200, 201)


# -- TLS and quotas, on hostgates of their own ------------------------------------

def test_over_tls(hostgate_factory):
    """Uploads spooled and downloads sent from the fd through TLS too, on
    one keep-alive connection."""
    hg = hostgate_factory(tls=True, name="filestls")
    alice = hg.login(*pl.ADMIN)
    data = os.urandom(2 * MiB + 3)
    r = put(alice, "tls/b.bin", data)
    assert r.status == 201, r
    conn = hg.connection()
    try:
        h = {"Cookie": "hg_session=" + alice.cookie}
        for _ in range(2):
            conn.request("GET", url("tls/b.bin"), headers=h)
            r = conn.getresponse()
            assert r.status == 200 and r.read() == data
        conn.request("GET", url("tls/"), headers=h)
        r = conn.getresponse()
        assert r.status == 200
        assert [e["name"] for e in json.loads(r.read())["entries"]] == \
            ["b.bin"]
    finally:
        conn.close()


def test_quota_full(hostgate_factory):
    """A write past the user's disk quota: 507, and the old file is left
    as it was."""
    if hostgate_factory.mode != "root":
        pytest.skip("disk quotas need root mode")
    hg = pl.own(hostgate_factory, "filesquota", HOSTGATE_USER_DISK_MAX="64M")
    alice = hg.login(*pl.ADMIN)
    assert put(alice, "q/keep.bin", b"old content").status == 201
    r = put(alice, "q/keep.bin", os.urandom(80 * MiB), timeout=120)
    pl.assert_error(r, 507, "no_space")
    assert get(alice, "q/keep.bin").body == b"old content"
    rec = pl.wait_audit(hg, action="file_write", detail_path="q/keep.bin",
                        allowed=False)[-1]
    assert rec["detail"]["error"] == "no_space", rec
    # No temporary file is left behind.
    assert names(listing(alice, "q/")) == ["keep.bin"]


def test_rate_limited(hostgate_factory):
    """File requests count against a per-user rate (the spawns' figures,
    a table of their own): 429 with Retry-After beyond the burst, and a
    refused change is audited."""
    hg = pl.own(hostgate_factory, "filesrate",
                HOSTGATE_SPAWN_RATE_PER_MINUTE=1, HOSTGATE_SPAWN_BURST=3)
    alice = hg.login(*pl.ADMIN)
    bob = hg.login(*pl.USER)
    assert put(alice, "r.txt", b"1").status == 201
    assert get(alice, "r.txt").status == 200
    assert get(alice, "").status == 200
    r = put(alice, "r.txt", b"2")
    pl.assert_error(r, 429, "rate_limited")
    assert int(r.header("Retry-After")) > 0
    pl.wait_audit(hg, action="file_refused", user="alice",
                  detail_path="r.txt")
    pl.assert_error(get(alice, "r.txt"), 429, "rate_limited")
    # Per user: bob is not held back, and a command still runs.
    assert put(bob, "b.txt", b"b").status == 201
    assert pl.run(alice, "cat r.txt")["stdout"] == "1"


def test_direct_mode_is_still_the_workspace(hg, alice):
    """The file API is the workspace in direct mode too, never the host."""
    assert pl.set_mode(alice, "direct").status == 200
    try:
        assert put(alice, "direct-mode.txt", b"in the workspace").status \
            in (200, 201)
        pl.assert_error(get(alice, "%2Fetc/passwd"), 400, "bad_request")
        pl.assert_error(get(alice, "up/etc/passwd"), 404, "not_found")
    finally:
        assert pl.set_mode(alice, "sandbox").status == 200
    assert sh(alice, "cat direct-mode.txt") == "in the workspace"


def test_uploads_held_at_once_are_bounded(hg, alice):
    """Spooled bodies are memory: past 1 GiB reserved by uploads in
    progress, one more is refused with 503 and Retry-After before any of
    it is read, and accepted again once the others have gone."""
    n = (1 << 30) // CAP
    socks = []
    try:
        for i in range(n):
            s = socket.create_connection(("127.0.0.1", hg.port),
                                         timeout=hglib.SLOW)
            socks.append(s)
            s.sendall(raw_head(hg, alice, "PUT", url("held/%d" % i),
                               b"Content-Length: %d\r\n"
                               b"Expect: 100-continue\r\n" % CAP))
        for s in socks:
            got = b""
            while b"\r\n\r\n" not in got:
                chunk = s.recv(4096)
                assert chunk, got
                got += chunk
            assert got.startswith(b"HTTP/1.1 100 Continue"), got
        data = raw_head(hg, alice, "PUT", url("held/one-more"),
                        b"Content-Length: %d\r\n" % CAP)
        status, headers, body = hglib.parse_raw(hg.raw(data))
        assert status == 503, body
        assert int(headers["retry-after"]) > 0
    finally:
        for s in socks:
            s.close()

    def accepted():
        r = put(alice, "held/after.txt", b"room again")
        return r if r.status == 201 else None
    hglib.wait_for(accepted, what="an upload accepted again")
    for d in hglib.DAEMONS:
        assert hg.alive(d), d
