"""frontd over TLS, and the listen-address rules for plain HTTP."""

import socket
import ssl
import subprocess
import threading
import warnings

import pytest

import hglib


@pytest.fixture(scope="module")
def tls(mode):
    hg = hglib.Hostgate(mode, name="tls", tls=True)
    try:
        hg.start_all()
        hg.add_user(*hglib.USER)
        yield hg
    finally:
        hg.cleanup()


def test_https_healthz(tls):
    r = tls.health()
    assert r.status == 200, r
    assert r.json()["ok"] is True


def test_https_certificate_is_ours(tls):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(tls.certfile)
    with socket.create_connection(("127.0.0.1", tls.port), timeout=5) as raw:
        with ctx.wrap_socket(raw, server_hostname="localhost") as s:
            assert s.version() in ("TLSv1.2", "TLSv1.3"), s.version()


def test_https_login_cookie_secure(tls):
    r = tls.post("/api/login", {"username": hglib.USER[0],
                                "password": hglib.USER[1]})
    assert r.status == 200, r
    value, attrs = r.cookie()
    assert value
    assert "secure" in attrs, attrs
    assert "httponly" in attrs and attrs.get("samesite", "").lower() == "strict"
    st = tls.get("/api/status", cookie=value)
    assert st.status == 200 and st.json()["user"] == hglib.USER[0], st


def test_plain_http_refused_on_tls_port(tls):
    s = socket.create_connection(("127.0.0.1", tls.port), timeout=3)
    try:
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        out = b""
        try:
            while True:
                chunk = s.recv(4096)
                if not chunk:
                    break
                out += chunk
        except (socket.timeout, ConnectionResetError):
            pass
    finally:
        s.close()
    assert not out.startswith(b"HTTP/1.1 200"), out[:200]
    assert b'"ok"' not in out
    assert tls.healthy()


def pin_version(ctx, version):
    """Make ctx speak only version (old ones need security level 0)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        ctx.minimum_version = version
        ctx.maximum_version = version
    if version < ssl.TLSVersion.TLSv1_2:
        ctx.set_ciphers("DEFAULT:@SECLEVEL=0")
    return ctx


def client_ctx(version):
    return pin_version(hglib.insecure_client_context(), version)


def test_tls12_accepted(tls):
    ctx = client_ctx(ssl.TLSVersion.TLSv1_2)
    with socket.create_connection(("127.0.0.1", tls.port), timeout=5) as raw:
        with ctx.wrap_socket(raw) as s:
            assert s.version() == "TLSv1.2"


def local_tls11_works(certfile, keyfile):
    """Whether this machine's OpenSSL can do a TLS 1.1 handshake at all."""
    try:
        sctx = pin_version(ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER),
                           ssl.TLSVersion.TLSv1_1)
        sctx.load_cert_chain(certfile, keyfile)
        cctx = client_ctx(ssl.TLSVersion.TLSv1_1)
    except (ssl.SSLError, ValueError):
        return False
    a, b = socket.socketpair()
    a.settimeout(5)
    b.settimeout(5)
    result = {}

    def serve():
        try:
            with sctx.wrap_socket(a, server_side=True) as s:
                result["server"] = s.version()
        except (ssl.SSLError, OSError) as e:
            result["server"] = e

    t = threading.Thread(target=serve)
    t.start()
    try:
        with cctx.wrap_socket(b) as s:
            ok = s.version() == "TLSv1.1"
    except (ssl.SSLError, OSError):
        ok = False
    t.join(hglib.SLOW)
    a.close()
    b.close()
    return ok


def test_tls11_refused(tls):
    if not local_tls11_works(tls.certfile, tls.keyfile):
        pytest.skip("local OpenSSL cannot make a TLS 1.1 handshake")
    ctx = client_ctx(ssl.TLSVersion.TLSv1_1)
    with socket.create_connection(("127.0.0.1", tls.port), timeout=5) as raw:
        with pytest.raises((ssl.SSLError, ConnectionResetError)):
            with ctx.wrap_socket(raw):
                pass
    assert tls.healthy()


def test_tls_garbage_handshake(tls):
    s = socket.create_connection(("127.0.0.1", tls.port), timeout=3)
    try:
        s.sendall(b"\x16\x03\x01\x00\x05hello" + b"\x00" * 100)
        try:
            s.recv(4096)
        except (socket.timeout, ConnectionResetError):
            pass
    finally:
        s.close()
    assert tls.healthy()


# -- listen address rules --------------------------------------------------

def check(hg, daemon, env):
    """Run `daemon -n` with hg's environment plus env."""
    e = dict(hg.env)
    e.update(env)
    return subprocess.run(hg.wrap([hg.binary(daemon), "-n"]), env=e,
                          capture_output=True, text=True, timeout=hglib.SLOW)


def test_public_listen_without_tls_refused(hostgate_factory):
    hg = hostgate_factory(start=False)
    r = check(hg, "frontd", {"HOSTGATE_LISTEN": "0.0.0.0:0"})
    assert r.returncode == 1, r
    assert "HOSTGATE_LISTEN" in r.stderr, r.stderr


def test_public_listen_with_tls_ok(hostgate_factory):
    hg = hostgate_factory(start=False, tls=True)
    r = check(hg, "frontd", {"HOSTGATE_LISTEN": "0.0.0.0:0"})
    assert r.returncode == 0, r


def test_public_listen_insecure_http_starts_with_warning(hostgate_factory):
    hg = hostgate_factory(start=False, env={
        "HOSTGATE_INSECURE_HTTP": "1",
    })
    hg.env["HOSTGATE_LISTEN"] = "0.0.0.0:0"
    r = check(hg, "frontd", {})
    assert r.returncode == 0, r
    hg.start_all()
    assert hglib.read_listen(hg.run) == ("0.0.0.0", hg.port)
    assert hg.health().status == 200
    warn = [line for line in hg.log_text("frontd").splitlines()
            if "WARN" in line]
    assert any(k in line.lower() for line in warn
               for k in ("insecure", "plain", "tls", "unencrypted")), warn
