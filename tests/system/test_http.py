"""HTTP edge cases: routing, bad input, size limits. After each, the chain
must still answer /healthz 200.

Mode-independent (MODE_INDEPENDENT): run in one mode only, root as root,
because frontd's HTTP parser and router do the same whoever runs it."""

import socket
import time

import pytest

import hglib

MODE_INDEPENDENT = True


def assert_alive(hg):
    r = hg.health()
    assert r.status == 200, r
    for name in hglib.DAEMONS:
        assert hg.alive(name), "%s exited" % name


def assert_json_error(r, status, code=None):
    assert r.status == status, r
    assert (r.header("Content-Type") or "").startswith("application/json"), \
        r.headers
    err = r.error()
    if code:
        assert err["code"] == code, err
    return err


@pytest.mark.parametrize("path", ["/api/nope", "/api/statusx", "/api/login/x",
                                  "/api/", "/api"])
def test_unknown_api_path_404(hg, path):
    assert_json_error(hg.get(path), 404, "not_found")
    assert_alive(hg)


def panel_or_not_built(r):
    """Paths outside /api/ belong to the web panel, which routes on the
    client: they get its index.html, or a 503 when it is not built."""
    if r.status == 503:
        assert "panel" in r.error()["message"], r
        return
    assert r.status == 200, r
    assert (r.header("Content-Type") or "").startswith("text/html"), r.headers


@pytest.mark.parametrize("path", ["/nope", "/healthz/x", "/login"])
def test_other_paths_are_the_panel(hg, path):
    panel_or_not_built(hg.get(path))
    assert_alive(hg)


@pytest.mark.parametrize("target", [b"/../etc/passwd", b"/api/../healthz/..",
                                    b"/%2e%2e/etc/passwd", b"/..%2fetc/passwd",
                                    b"/assets/../../etc/passwd", b"*",
                                    b"http://x/"])
def test_odd_targets_never_escape(hg, target):
    out = hg.raw(b"GET " + target + b" HTTP/1.1\r\nHost: x\r\n\r\n")
    status, headers, body = hglib.parse_raw(out)
    assert b"root:" not in body, out[:300]
    if status not in (400, 404):
        panel_or_not_built(hglib.Response(status, list(headers.items()),
                                          body))
    assert_alive(hg)


@pytest.mark.parametrize("method,path", [
    ("GET", "/api/login"), ("PUT", "/api/login"), ("DELETE", "/api/login"),
    ("GET", "/api/logout"), ("POST", "/healthz"), ("DELETE", "/healthz"),
])
def test_wrong_method_405(hg, method, path):
    r = hg.request(method, path)
    assert_json_error(r, 405)
    assert_alive(hg)


def test_keep_alive(hg):
    conn = hg.connection()
    try:
        for _ in range(3):
            conn.request("GET", "/healthz")
            r = conn.getresponse()
            r.read()
            assert r.status == 200
    finally:
        conn.close()


@pytest.mark.parametrize("body", [
    b"{not json", b"{", b'{"username": "alice", "password": }', b"",
    b"\xff\xfe garbage", b'{"username": "alice", "password": "x"} trailing',
], ids=["unclosed", "brace", "missing-value", "empty", "binary", "trailing"])
def test_login_malformed_json_400(hg, body):
    assert_json_error(hg.post("/api/login", body), 400, "bad_request")
    assert_alive(hg)


@pytest.mark.parametrize("body", [b"[]", b'"alice"', b"5", b"null", b"true",
                                  b'[{"username": "alice"}]'])
def test_login_non_object_400(hg, body):
    assert_json_error(hg.post("/api/login", body), 400, "bad_request")
    assert_alive(hg)


@pytest.mark.parametrize("doc,field", [
    ({"username": 5, "password": "alice-password-1"}, "username"),
    ({"username": None, "password": "alice-password-1"}, "username"),
    ({"username": ["alice"], "password": "alice-password-1"}, "username"),
    ({"password": "alice-password-1"}, "username"),
    ({"username": "alice", "password": 5}, "password"),
    ({"username": "alice", "password": {"a": 1}}, "password"),
    ({"username": "alice"}, "password"),
])
def test_login_bad_fields_400(hg, doc, field):
    err = assert_json_error(hg.post("/api/login", doc), 400, "bad_request")
    assert field in err["message"], err
    assert_alive(hg)


@pytest.mark.parametrize("doc", [
    pytest.param({"username": "al\u0000ice", "password": "alice-password-1"},
                 id="nul-in-username"),
    pytest.param({"username": "alice\u0000", "password": "alice-password-1"},
                 id="nul-after-username"),
    pytest.param({"username": "alice",
                  "password": "alice-password-1\u0000tail"},
                 id="nul-then-tail-in-password"),
    pytest.param({"username": "alice", "password": "alice-password-1\u0000"},
                 id="nul-after-password"),
])
def test_login_nul_byte_is_not_a_terminator(hg, doc):
    """JSON strings may hold NUL; a C string must not silently cut them,
    or "secret\\u0000junk" logs in as the owner of "secret"."""
    r = hg.post("/api/login", doc)
    assert r.status in (400, 401), r
    assert r.cookie() is None
    assert_alive(hg)


@pytest.mark.parametrize("doc", [
    pytest.param({"username": "a" * 5000, "password": "x"},
                 id="long-username"),
    pytest.param({"username": "alice", "password": "x" * 100000},
                 id="password-over-64KiB"),
    pytest.param({"username": "\u00e9\u4e2d\U0001f600", "password": "x"},
                 id="non-ascii-username"),
])
def test_login_odd_values_refused(hg, doc):
    r = hg.post("/api/login", doc)
    assert r.status in (400, 401, 413), r
    assert r.cookie() is None
    assert_alive(hg)


@pytest.mark.parametrize("data,statuses", [
    pytest.param(b"GARBAGE\r\n\r\n", (400,), id="one-word"),
    pytest.param(b"\x00\x01\x02\x03\r\n\r\n", (400,), id="binary"),
    pytest.param(b"GET  HTTP/1.1\r\n\r\n", (400,), id="no-target"),
    pytest.param(b"GET /healthz HTTP/1.1 extra\r\n\r\n", (400,),
                 id="four-words"),
    pytest.param(b"GET /healthz HTTP/1.1\r\nno colon here\r\n\r\n", (400,),
                 id="header-without-colon"),
    pytest.param(b"GET /healthz HTTP/1.1\r\n: empty-name\r\n\r\n", (400,),
                 id="empty-header-name"),
    pytest.param(b"GET /healthz HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
                 (400,), id="negative-length"),
    pytest.param(b"GET /healthz HTTP/1.1\r\nContent-Length: 1x\r\n\r\n",
                 (400,), id="bad-length"),
    pytest.param(b"GET /healthz HTTP/1.1\r\nContent-Length: 1\r\n"
                 b"Content-Length: 2\r\n\r\n", (400,), id="two-lengths"),
    pytest.param(b"GET /healthz HTTP/7.0\r\n\r\n", (400, 505),
                 id="version-7"),
    pytest.param(b"GET /" + b"a" * 20000 + b" HTTP/1.1\r\n\r\n", (414, 431),
                 id="target-20KiB"),
])
def test_garbage_request(hg, data, statuses):
    out = hg.raw(data)
    status, _, _ = hglib.parse_raw(out)
    assert status in statuses, out[:300]
    assert_alive(hg)


def test_huge_header_431(hg):
    data = (b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 17000
            + b"\r\n\r\n")
    status, _, _ = hglib.parse_raw(hg.raw(data))
    assert status == 431
    assert_alive(hg)


def test_many_headers_431(hg):
    lines = b"".join(b"X-H%d: %s\r\n" % (i, b"b" * 100) for i in range(200))
    data = b"GET /healthz HTTP/1.1\r\nHost: x\r\n" + lines + b"\r\n"
    status, _, _ = hglib.parse_raw(hg.raw(data))
    assert status == 431
    assert_alive(hg)


def test_header_just_under_limit_ok(hg):
    data = (b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 15000
            + b"\r\n\r\n")
    status, _, _ = hglib.parse_raw(hg.raw(data))
    assert status == 200


def test_chunked_501(hg):
    data = (b"POST /api/login HTTP/1.1\r\nHost: x\r\n"
            b"Content-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n"
            b"5\r\n{\"a\":\r\n0\r\n\r\n")
    status, headers, body = hglib.parse_raw(hg.raw(data))
    assert status == 501, body
    assert_alive(hg)


def test_head_in_pieces(hg):
    """A head split over several TCP segments is still one request."""
    s = socket.create_connection(("127.0.0.1", hg.port), timeout=3)
    try:
        for part in (b"GET /hea", b"lthz HTTP/1.1\r\nHo", b"st: x\r\n", b"\r\n"):
            s.sendall(part)
            time.sleep(0.05)
        out = b""
        while b"\r\n\r\n" not in out:
            chunk = s.recv(4096)
            if not chunk:
                break
            out += chunk
    finally:
        s.close()
    assert out.startswith(b"HTTP/1.1 200"), out[:200]


def test_client_vanishes_mid_request(hg):
    for data in (b"POST /api/login HTTP/1.1\r\nContent-Length: 100\r\n\r\n{",
                 b"GET /heal"):
        s = socket.create_connection(("127.0.0.1", hg.port), timeout=3)
        s.sendall(data)
        s.close()
    assert_alive(hg)


# -- body limit: a private hostgate with a small HOSTGATE_MAX_BODY_BYTES ----

@pytest.fixture(scope="module")
def small_body(mode):
    hg = hglib.Hostgate(mode, env={"HOSTGATE_MAX_BODY_BYTES": "2048"},
                        name="body")
    try:
        hg.start_all()
        yield hg
    finally:
        hg.cleanup()


def test_body_over_limit_413_at_once(small_body):
    """The 413 comes on the head alone: the rest of the body is never
    sent, so a frontd that waited for it would never answer (the wait is
    the suite's bound, no clock)."""
    hg = small_body
    s = socket.create_connection(("127.0.0.1", hg.port), timeout=hglib.SLOW)
    try:
        s.sendall(b"POST /api/login HTTP/1.1\r\nHost: x\r\n"
                  b"Content-Type: application/json\r\n"
                  b"Content-Length: 100000\r\n\r\n{\"username\":")
        out = b""
        while not (b"\r\n\r\n" in out and hglib._complete(out)):
            chunk = s.recv(65536)
            if not chunk:
                break
            out += chunk
    finally:
        s.close()
    status, headers, body = hglib.parse_raw(out)
    assert status == 413, out[:300]
    assert b"too_large" in body, body
    assert_alive(hg)


def test_body_over_limit_sent_whole_413(small_body):
    doc = {"username": "nobody", "password": "x" * 3000}
    r = small_body.post("/api/login", doc, source="127.0.0.9")
    assert_json_error(r, 413, "too_large")
    assert_alive(small_body)


def test_body_under_limit_accepted(small_body):
    doc = {"username": "nobody", "password": "x" * 1900}
    r = small_body.post("/api/login", doc, source="127.0.0.9")
    assert r.status == 401, r
