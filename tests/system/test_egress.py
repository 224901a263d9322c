"""Egress by allowlist (the workspace-write+allowlist profile): inside the
sandbox, curl, pip and git reach the allowed test hosts through egressd
and nothing else gets out; every attempt through the proxy is audited; an
admin's addition reaches a live sandbox; with egressd stopped, a spawn
under the profile fails and nothing runs. The servers are real, in a
network namespace of the test's own (egresslib.py)."""

import json
import os
import re
import threading
import uuid

import pytest

import egresslib as el
import hglib
import policylib as pl

PROFILE = "workspace-write+allowlist"
PROXY = "http://127.0.0.1:3128"


@pytest.fixture(scope="module")
def net():
    if not hglib.IS_ROOT:
        pytest.skip("the egress tests make a network namespace: root only")
    with el.egress_net() as n:
        yield n


@pytest.fixture(scope="module")
def hg(mode, net):
    with hglib.running(mode, "egress", env=net.env()) as h:
        yield h


@pytest.fixture(scope="module")
def bob(hg):
    """bob's session on the allowlist profile, with its public id."""
    s = hg.login(*hglib.USER)
    r = s.post("/api/permission", {"permission": PROFILE})
    assert r.status == 200, r
    assert r.json().get("permission") == PROFILE, r
    rec = pl.wait_audit(hg, action="permission_changed", user="bob")[-1]
    s.public_id = rec["session"]
    assert re.fullmatch(r"[0-9a-f]{16,64}", s.public_id or ""), rec
    hg.wait_egress(s)
    return s


# -- helpers ----------------------------------------------------------------

PRELUDE = r"""set -u
d="$HOME/egress-%(tag)s"; mkdir -p "$d"; cd "$d"
cat > ca.pem <<'HGCA'
%(ca)sHGCA
t() { tag=$1; shift; echo "@@BEGIN $tag"; "$@" 2>&1; echo "@@END $tag $?"; }
"""


def script(net, body, **kw):
    """A shell script: the CA written into a fresh directory of the
    workspace, then body; every `t TAG CMD...` prints its output framed."""
    vals = dict(tag=uuid.uuid4().hex[:8], ca=net.ca_pem, ip=net.ip,
                private=net.private_ip, proxy=PROXY)
    vals.update(kw)
    return (PRELUDE + body) % vals


def run(session, command, timeout=int(hglib.SLOW)):
    """POST /api/run_command; (document, spawn id) with the spawn id from
    the spawn_end audit record of its request."""
    r = session.post("/api/run_command", {"command": command,
                                          "timeout": timeout},
                     timeout=timeout + hglib.SLOW)
    assert r.status == 200, "run_command: %r" % r
    rid = r.header("X-Request-Id")
    rec = pl.wait_audit(session.hg, action="spawn_end",
                        detail_request_id=rid)[-1]
    return r.json(), rec["detail"]["id"]


def framed(doc):
    """{tag: (exit status, output)} of the script's `t` lines."""
    out = {}
    text = doc["stdout"]
    for m in re.finditer(r"^@@BEGIN (\S+)\n(.*?)^@@END \1 (\d+)$", text,
                         re.M | re.S):
        out[m.group(1)] = (int(m.group(3)), m.group(2))
    # A script that did not get as far as its first check: say why (the
    # whole of stderr, which pytest would otherwise cut from the dict).
    assert out, "the script printed no check: exit %r, signal %r; stdout " \
        "%r; stderr %r" % (doc.get("exit_code"), doc.get("signal"),
                           doc.get("stdout", "")[-2000:],
                           doc.get("stderr", "")[-2000:])
    return out


def status_lines(verbose):
    """The `< HTTP/1.x NNN reason` lines of curl -v output."""
    return re.findall(r"^< (HTTP/1\.[01] \d{3}[^\r\n]*)", verbose, re.M)


def field(rec, name):
    """A member of an egress audit record: in detail, else top level
    (whose "host" is the brokerd's host id, not the destination)."""
    detail = rec.get("detail") or {}
    if name in detail:
        return detail[name]
    return rec.get(name) if name != "detail" else None


def egress_records(hg, spawn):
    """The egress audit records of one spawn."""
    return [r for r in pl.audit_records(hg, action="egress")
            if field(r, "spawn") == spawn]


def wait_records(hg, spawn, want):
    """Wait until the spawn has an egress record for each (host, port,
    verdict) in want; returns {(host, port, verdict): record}."""
    def got():
        recs = egress_records(hg, spawn)
        found = {}
        for r in recs:
            key = (field(r, "host"), field(r, "port"), field(r, "verdict"))
            found.setdefault(key, r)
        return found if all(k in found for k in want) else None
    try:
        return hglib.wait_for(got, what="egress records %r" % (want,))
    except AssertionError:
        have = [(field(r, "host"), field(r, "port"), field(r, "verdict"))
                for r in egress_records(hg, spawn)]
        raise AssertionError("spawn %s: want %r, audited %r"
                             % (spawn, want, have)) from None


def bypass_records(hg, spawn):
    """The egress_bypass audit records of one spawn."""
    return [r for r in pl.audit_records(hg, action="egress_bypass")
            if field(r, "spawn") == spawn]


def check_record(rec, session, addr=None):
    """The members the issue asks for, with their types."""
    assert rec["user"] == "bob", rec
    assert rec["session"] == session.public_id, rec
    for k in ("bytes_up", "bytes_down", "duration_ms"):
        v = field(rec, k)
        assert isinstance(v, int) and v >= 0, (k, rec)
    if addr is not None:
        assert field(rec, "addr") == addr, rec


# -- allowed ------------------------------------------------------------------

ALLOWED = r"""
echo "@@ENV $HTTP_PROXY $HTTPS_PROXY $http_proxy $https_proxy ${NO_PROXY-unset} ${no_proxy-unset} ${HOSTGATE_EGRESS-unset}"
[ -e /etc/resolv.conf ] && echo "@@RESOLV present" || echo "@@RESOLV absent"
t http curl -fsS --max-time 20 http://files.test/small.txt
t https curl -fsS --max-time 20 --cacert ca.pem https://files.test/small.txt
t whoami curl -fsS --max-time 20 --cacert ca.pem https://pkg.test/whoami
t suffix curl -fsS --max-time 20 --cacert ca.pem https://other.pkg.test/whoami
t pip env PIP_CONFIG_FILE=/dev/null python3 -m pip install -q --no-cache-dir --disable-pip-version-check --no-input --index-url https://pkg.test/simple/ --cert ca.pem --target pipdir hgdemo
t import env PYTHONPATH=pipdir python3 -c 'import hgdemo; print(hgdemo.VALUE)'
t git env GIT_SSL_CAINFO="$d/ca.pem" git clone -q https://files.test/repo.git clone
t readme cat clone/README
python3 -c 'import socket, json; print("@@IFACES " + json.dumps([n for _, n in socket.if_nameindex()]))'
"""


def test_allowed_hosts_reached(hg, net, bob):
    doc, spawn = run(bob, script(net, ALLOWED))
    out = framed(doc)
    env = re.search(r"^@@ENV (.*)$", doc["stdout"], re.M)
    assert env, doc
    assert env.group(1).split() == [PROXY] * 4 + [
        "localhost,127.0.0.1,::1"] * 2 + ["proxy"], env.group(1)
    assert "@@RESOLV absent" in doc["stdout"], doc
    # Loopback only: nothing but the proxy leads out.
    assert '@@IFACES ["lo"]' in doc["stdout"], doc
    assert out.get("http") == (0, el.SMALL_TEXT), doc
    assert out.get("https") == (0, el.SMALL_TEXT), doc
    # The server saw the host's end of the veth: the request came through
    # egressd, with the name it was asked for.
    assert out.get("whoami") == (0, "https %s pkg.test\n" % net.host_ip), doc
    assert out.get("suffix") == (0, "https %s other.pkg.test\n"
                                 % net.host_ip), doc
    assert out.get("pip", (1,))[0] == 0, doc
    assert out.get("import") == (0, el.DEMO_VALUE + "\n"), doc
    assert out.get("git", (1,))[0] == 0, doc
    assert out.get("readme") == (0, "cloned over dumb HTTP\n"), doc

    recs = wait_records(hg, spawn, [("files.test", 80, "allowed"),
                                    ("files.test", 443, "allowed"),
                                    ("pkg.test", 443, "allowed"),
                                    ("other.pkg.test", 443, "allowed")])
    for key, rec in recs.items():
        if key[2] != "allowed":
            continue
        check_record(rec, bob, addr=net.ip)
        assert field(rec, "bytes_up") > 0 and field(rec, "bytes_down") > 0, rec
    plain = recs[("files.test", 80, "allowed")]
    assert field(plain, "bytes_down") > len(el.SMALL_TEXT), plain
    # Only the allowed names reached the servers.
    hosts = {h.split(":")[0] for _, _, h, _ in net.requests()}
    assert hosts <= {"files.test", "pkg.test", "other.pkg.test", "-",
                     "extra.test"}, hosts


def test_no_bypass_no_record(hg, net, bob):
    """A spawn whose every connection goes through the proxy has no
    egress_bypass record (brokerd writes that record with spawn_end,
    which run() waited for)."""
    doc, spawn = run(bob, script(net, "t http curl -fsS --max-time 20 "
                                 "http://files.test/small.txt\n"))
    assert framed(doc).get("http") == (0, el.SMALL_TEXT), doc
    assert bypass_records(hg, spawn) == [], bypass_records(hg, spawn)


# -- refused ------------------------------------------------------------------

REFUSED = r"""
v() { tag=$1; shift; t "$tag" curl -fsS -v --max-time 20 --cacert ca.pem "$@"; }
v name http://extra.test/small.txt
v name_tls https://extra.test/small.txt
v denied https://blocked.pkg.test/small.txt
v literal http://%(ip)s/small.txt
v literal_tls https://%(ip)s/small.txt
t literal6 env -u NO_PROXY -u no_proxy curl -fsS -v --max-time 20 -g 'http://[::1]/'
t decimal env -u NO_PROXY -u no_proxy curl -fsS -v --max-time 20 http://2130706433/
v port https://pkg.test:22/
v port_http http://pkg.test:8080/small.txt
v loop http://loop.test/small.txt
v loop6 https://loop6.test/small.txt
v private https://private.test/small.txt
t nodns env -u HTTP_PROXY -u http_proxy curl -sS --max-time 5 http://files.test/small.txt
t getent getent hosts files.test
python3 - <<'HGPY'
import json, socket
def ask(req):
    s = socket.create_connection(("127.0.0.1", 3128), timeout=20)
    try:
        s.sendall(req.encode())
        data = b""
        while b"\r\n\r\n" not in data:
            c = s.recv(4096)
            if not c:
                break
            data += c
        return data.split(b"\r\n", 1)[0].decode("latin-1")
    finally:
        s.close()
def err(fn):
    try:
        return "ok: %%r" %% (fn(),)
    except OSError as e:
        return "%%s: %%s" %% (type(e).__name__, e)
def tcp():
    s = socket.socket()
    s.settimeout(5)
    try:
        s.connect(("%(ip)s", 80))
    finally:
        s.close()
def tcp6():
    s = socket.socket(socket.AF_INET6)
    s.settimeout(5)
    try:
        s.connect(("2001:db8::1", 80))
    finally:
        s.close()
def udp():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(2)
    try:
        s.sendto(b"ping", ("%(ip)s", 53))
        return s.recvfrom(100)
    finally:
        s.close()
out = {
    "raw_v6": ask("CONNECT [::1]:443 HTTP/1.1\r\nHost: [::1]:443\r\n\r\n"),
    "raw_decimal": ask("GET http://2130706433/ HTTP/1.1\r\nHost: 2130706433\r\n\r\n"),
    "raw_decimal_tls": ask("CONNECT 2130706433:443 HTTP/1.1\r\nHost: 2130706433:443\r\n\r\n"),
    "raw_hex": ask("GET http://0x7f.1/ HTTP/1.1\r\nHost: 0x7f.1\r\n\r\n"),
    "tcp": err(tcp),
    "tcp6": err(tcp6),
    "udp": err(udp),
    "dns": err(lambda: socket.getaddrinfo("files.test", 80)),
}
print("@@JSON " + json.dumps(out))
HGPY
"""

# tag: (host, port, what the reason phrase says)
REFUSALS = {
    "name": ("extra.test", 80, "is not on this sandbox's allowlist"),
    "name_tls": ("extra.test", 443, "is not on this sandbox's allowlist"),
    "denied": ("blocked.pkg.test", 443, "denylist"),
    "literal": (None, 80, "IP literal"),
    "literal_tls": (None, 443, "IP literal"),
    "literal6": (None, 80, "IP literal"),
    "decimal": (None, 80, "IP literal"),
    "port": ("pkg.test", 22, "port 22 is not allowed"),
    "port_http": ("pkg.test", 8080, "port 8080 is not allowed"),
    "loop": ("loop.test", 80, "127.0.0.1"),
    "loop6": ("loop6.test", 443, "::1"),
    "private": ("private.test", 443, None),
}


def test_refused_and_bypasses(hg, net, bob):
    before = len(net.requests())
    doc, spawn = run(bob, script(net, REFUSED))
    out = framed(doc)
    for tag, (host, port, says) in REFUSALS.items():
        assert tag in out, (tag, doc)
        rc, text = out[tag]
        assert rc != 0, (tag, text)
        lines = status_lines(text)
        assert lines and " 403 " in lines[-1] + " ", (tag, text)
        assert "Egress refused" in lines[-1], (tag, lines)
        if says:
            assert says in lines[-1], (tag, lines)
        hdr = re.search(r"^< X-Hostgate-Egress: refused; host=(\S+)", text,
                        re.M | re.I)
        assert hdr, (tag, text)
        if host:
            assert hdr.group(1) == host, (tag, hdr.group(0))
    assert "an admin can allow it" in status_lines(out["name"][1])[-1], out
    assert "inside a denied network" in \
        status_lines(out["private"][1])[-1], out
    assert net.private_ip in status_lines(out["private"][1])[-1], out
    # Without the proxy, no name resolves and no address is reachable.
    assert out["nodns"][0] != 0 and "resolve" in out["nodns"][1], out
    assert out["getent"][0] != 0, out
    m = re.search(r"^@@JSON (.*)$", doc["stdout"], re.M)
    assert m, doc
    raw = json.loads(m.group(1))
    for k in ("raw_v6", "raw_decimal", "raw_decimal_tls", "raw_hex"):
        assert re.match(r"HTTP/1\.[01] 403 Egress refused", raw[k]), (k, raw)
    for k in ("tcp", "tcp6", "udp", "dns"):
        assert not raw[k].startswith("ok"), (k, raw)
    for k in ("tcp", "tcp6", "udp"):
        assert "Network is unreachable" in raw[k], (k, raw)
    # Nothing of it reached the servers.
    assert net.requests()[before:] == [], net.requests()[before:]

    want = [(h, p, "refused") for h, p, _ in REFUSALS.values() if h]
    recs = wait_records(hg, spawn, want)
    for h, p, _ in want:
        check_record(recs[(h, p, "refused")], bob)
        assert field(recs[(h, p, "refused")], "reason"), recs[(h, p,
                                                               "refused")]
    # The addresses the names resolved to, where they resolved.
    assert field(recs[("loop.test", 80, "refused")], "addr") == "127.0.0.1"
    assert field(recs[("private.test", 443, "refused")], "addr") == \
        net.private_ip
    # IP literals and the raw requests: each one audited, refused.
    literal_ports = sorted(p for h, p, _ in REFUSALS.values() if not h)
    lits = [r for r in egress_records(hg, spawn)
            if field(r, "verdict") == "refused" and field(r, "host") not in
            {h for h, _, _ in REFUSALS.values()}]
    assert len(lits) >= len(literal_ports) + 4, lits
    # The operator's view: hgctl audit show finds the same records.
    shown = pl.audit_show(hg, "--action", "egress", "--session",
                          bob.public_id, "--decision", "refused",
                          "--limit", "0")
    mine = [r for r in shown if field(r, "spawn") == spawn]
    assert len(mine) == len([r for r in egress_records(hg, spawn)
                             if field(r, "verdict") == "refused"]), shown
    assert len(mine) >= len(REFUSALS) + 4, mine
    # The bypasses never reached egressd: the kernel counted them in the
    # sandbox's network namespace, and sandboxd read that when it ended.
    # TCP and UDP to the test's address and TCP to 2001:db8::1 had no
    # route; getaddrinfo and getent asked 127.0.0.1:53, where nothing
    # listens.
    byp = bypass_records(hg, spawn)
    assert len(byp) == 1, byp
    rec = byp[0]
    assert rec["user"] == "bob" and rec["session"] == bob.public_id, rec
    assert rec["allowed"] is False, rec
    assert field(rec, "ipv4_no_route") >= 2, rec
    assert field(rec, "ipv6_no_route") >= 1, rec
    assert field(rec, "udp_no_ports") >= 1, rec
    shown = pl.audit_show(hg, "--action", "egress_bypass", "--session",
                          bob.public_id, "--limit", "0")
    assert [r["seq"] for r in shown if field(r, "spawn") == spawn] == \
        [rec["seq"]], shown


# -- an admin's addition ------------------------------------------------------

LIVE = r"""
v() { tag=$1; shift; t "$tag" curl -fsS -v --max-time 20 --cacert ca.pem "$@"; }
v before https://extra.test/whoami
touch ready
n=0; while [ ! -e go ] && [ $n -lt 600 ]; do sleep 0.05; n=$((n+1)); done
t after curl -fsS --max-time 20 --cacert ca.pem https://extra.test/whoami
"""


def test_admin_addition_reaches_live_session(hg, net, bob):
    """hgctl egress allow --session makes extra.test reachable in a
    sandbox that is already running, without a new login; revoke undoes
    it for the next spawn."""
    tag = uuid.uuid4().hex[:8]
    home = run(bob, 'printf %s "$HOME"')[0]["stdout"]
    work = os.path.join(home, "egress-" + tag)
    box = {}
    th = threading.Thread(target=lambda: box.update(res=run(
        bob, script(net, LIVE, tag=tag))))
    th.start()
    try:
        hglib.wait_for(lambda: os.path.exists(os.path.join(work, "ready")),
                       what="the sandbox's first curl")
        applied = re.compile(r"egress: session bob session %s: additions "
                             r"replaced on [1-9]" % bob.public_id)
        seen = len(applied.findall(hg.log_text("egressd")))
        hg.hgctl_ok("egress", "allow", "--session", bob.public_id,
                    "extra.test")
        # hgctl returns once brokerd has stored it; the live listener has
        # it once egressd says so (brokerd -> sandboxd -> egressd).
        hglib.wait_for(lambda: len(applied.findall(hg.log_text("egressd")))
                       > seen, what="egressd applying the addition")
        st = bob.get("/api/status").json().get("egress") or {}
        assert "extra.test" in (st.get("session") or []), st
        open(os.path.join(work, "go"), "w").close()
    finally:
        th.join(2 * hglib.SLOW)
    assert "res" in box, "the live spawn's run_command did not return"
    doc, spawn = box["res"]
    out = framed(doc)
    assert " 403 " in status_lines(out["before"][1])[-1] + " ", out
    assert out["after"] == (0, "https %s extra.test\n" % net.host_ip), doc
    recs = wait_records(hg, spawn, [("extra.test", 443, "refused"),
                                    ("extra.test", 443, "allowed")])
    check_record(recs[("extra.test", 443, "allowed")], bob, addr=net.ip)
    assert pl.audit_records(hg, action="egress_allow")

    hg.hgctl_ok("egress", "revoke", "--session", bob.public_id, "extra.test")
    doc, _ = run(bob, script(net, 'v() { tag=$1; shift; t "$tag" curl -sS '
                             '-v --max-time 20 --cacert ca.pem "$@"; }\n'
                             'v again https://extra.test/whoami\n'))
    assert " 403 " in status_lines(framed(doc)["again"][1])[-1] + " ", doc


# -- fail closed --------------------------------------------------------------

def proxy_ok(session):
    st = session.get("/api/status")
    assert st.status == 200, st
    return ((st.json().get("egress") or {}).get("proxy") or {}).get("ok")


def test_egressd_down_fails_closed(hg, net, bob):
    """With egressd stopped, a spawn under the profile is refused (503,
    the message says why) and nothing runs; once it is back, spawns
    work again."""
    tag = uuid.uuid4().hex[:8]
    home = run(bob, 'printf %s "$HOME"')[0]["stdout"]
    marker = os.path.join(home, "ran-" + tag)
    hg.stop("egressd")
    try:
        hglib.wait_for(lambda: proxy_ok(bob) is False,
                       what="/api/status egress.proxy.ok false")
        r = bob.post("/api/run_command",
                     {"command": "touch %s; echo ran" % marker})
        assert r.status == 503, r
        err = r.error()
        assert err["code"] == "unavailable", err
        assert "egress proxy (egressd) is not running" in err["message"], err
        assert PROFILE in err["message"], err
        t = bob.post("/api/terminals", {})
        assert t.status == 503, t
        assert not os.path.exists(marker)
    finally:
        hg.start("egressd")
    hg.wait_egress(bob)
    doc, _ = run(bob, script(net, "t back curl -fsS --max-time 20 "
                             "http://files.test/small.txt\n"))
    assert framed(doc).get("back") == (0, el.SMALL_TEXT), doc
    assert not os.path.exists(marker)
