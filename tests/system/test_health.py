"""GET /healthz, start order, and what clients see while a daemon is down."""

import os
import socket
import time

import pytest

import hglib


def assert_healthy_doc(doc):
    assert doc["ok"] is True, doc
    for part in ("frontd", "brokerd", "sandboxd"):
        assert doc[part]["ok"] is True, (part, doc)
    assert doc["backend"] == {"name": "bwrap", "ok": True, "reason": None}, doc


def assert_down(r, daemon):
    """A 503 /healthz naming daemon as the part that is down."""
    assert r.status == 503, r
    assert (r.header("Content-Type") or "").startswith("application/json"), \
        r.headers
    doc = r.json()
    assert doc["ok"] is False, doc
    assert doc["frontd"]["ok"] is True, doc
    assert doc[daemon]["ok"] is False, doc
    assert isinstance(doc[daemon].get("reason"), str) and doc[daemon]["reason"]
    err = r.error()
    assert err["code"] == "unavailable", err
    assert daemon in err["message"], err
    return doc


def test_healthz_ok(hg):
    r = hg.health()
    assert r.status == 200, r
    assert (r.header("Content-Type") or "").startswith("application/json")
    assert_healthy_doc(r.json())


def test_healthz_needs_no_credentials_and_ignores_bad_ones(hg):
    r = hg.get("/healthz", cookie="bogus", bearer="hgt_bogus")
    assert r.status == 200, r


def test_start_order_does_not_matter(hostgate_factory):
    """frontd first, then sandboxd, then brokerd: all link up on their own."""
    hg = hostgate_factory(start=False)
    hg.start("frontd")
    r = hglib.wait_for(lambda: hg.health(), what="frontd listening")
    assert_down(r, "brokerd")
    hg.start("sandboxd")
    hg.start("brokerd")
    hg.wait_healthy()
    assert_healthy_doc(hg.health().json())


def test_healthy_without_egressd(hostgate_factory):
    """egressd is not part of /healthz's chain: with it stopped at start-up
    (its hosts file is missing), /healthz says 200 and a command runs under
    the default profile."""
    if "egressd" not in hglib.DAEMONS:
        pytest.skip("no egressd in this build")
    hg = hostgate_factory(env={"HOSTGATE_EGRESS_HOSTS": "/nonexistent/h"})
    assert hg.procs["egressd"].wait(hglib.SLOW) == 1, hg.log_text("egressd")
    assert "HOSTGATE_EGRESS_HOSTS=/nonexistent/h" in hg.log_text("egressd")
    assert_healthy_doc(hg.wait_chain().json())
    r = hg.login(*hglib.ADMIN).post("/api/run_command",
                                    {"command": "echo ok"})
    assert r.status == 200 and r.json()["stdout"] == "ok\n", r


# A request that waited for a brokerd that never answers would be answered
# at frontd's deadline for it (API_BROKER_TIMEOUT_MS, frontd/api.c): one
# answered before it did not wait. Links retry at most a second apart
# (BACKOFF_MAX_MS, common/ipc.c).
BROKER_TIMEOUT = 5.0
BACKOFF_MAX = 1.0


def accepts(path):
    """True when a daemon listens on the Unix socket at path."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        s.connect(path)
        return True
    except OSError:
        return False
    finally:
        s.close()


def restart_and_relink(hg, daemon, sock):
    """Start daemon again and wait for /healthz 200. Asserts that the
    chain relinked within a retry interval of the daemon listening on
    sock, with room for ten /healthz round trips timed here and now."""
    hg.start(daemon)
    path = os.path.join(hg.run, sock)
    hglib.wait_for(lambda: accepts(path), what="%s listening" % daemon)
    t0 = time.monotonic()
    hg.wait_healthy()
    relink = time.monotonic() - t0
    t1 = time.monotonic()
    assert hg.health().status == 200
    trip = time.monotonic() - t1
    assert relink < BACKOFF_MAX + 10 * trip + 0.5, \
        "relinked %.2fs after %s listened (a /healthz: %.3fs)" % (
            relink, daemon, trip)


def test_sandboxd_killed_and_restarted(hostgate_factory):
    hg = hostgate_factory()
    s = hg.login(*hglib.ADMIN)
    hg.kill("sandboxd")
    doc = assert_down(hg.wait_status(503), "sandboxd")
    assert doc["brokerd"]["ok"] is True, doc
    # Authentication lives in brokerd, which is still up.
    assert s.get("/api/status").status == 200
    restart_and_relink(hg, "sandboxd", hglib.SOCK_SANDBOX)
    assert_healthy_doc(hg.health().json())
    assert hg.alive("frontd") and hg.alive("brokerd")


def test_brokerd_killed_and_restarted(hostgate_factory):
    hg = hostgate_factory()
    s = hg.login(*hglib.ADMIN)
    hg.kill("brokerd")
    assert_down(hg.wait_status(503), "brokerd")

    # Requests that need brokerd fail fast with 503, never hang or 401.
    t0 = time.monotonic()
    r = hg.post("/api/login", {"username": hglib.ADMIN[0],
                               "password": hglib.ADMIN[1]})
    assert r.status == 503, r
    assert r.error()["code"] == "unavailable"
    r = s.get("/api/status")
    assert r.status == 503, r
    assert time.monotonic() - t0 < BROKER_TIMEOUT, \
        "the two requests waited for brokerd: %.2fs" % (time.monotonic() - t0)

    restart_and_relink(hg, "brokerd", hglib.SOCK_FRONT)
    assert_healthy_doc(hg.health().json())
    assert s.get("/api/status").status == 200
    assert hg.alive("frontd") and hg.alive("sandboxd")


def test_frontd_killed_and_restarted(hostgate_factory):
    hg = hostgate_factory()
    s = hg.login(*hglib.USER)
    hg.kill("frontd")
    hg.start("frontd")
    hg.wait_healthy()
    assert s.get("/api/status").status == 200
    assert hg.alive("brokerd") and hg.alive("sandboxd")


def test_daemons_survive_repeated_peer_restarts(hostgate_factory):
    hg = hostgate_factory(users=False)
    for _ in range(3):
        hg.kill("brokerd")
        hg.start("brokerd")
        hg.kill("sandboxd")
        hg.start("sandboxd")
    hg.wait_healthy()
    assert hg.alive("frontd")


def test_brokerd_sigterm_exits_cleanly(hostgate_factory):
    hg = hostgate_factory(users=False)
    assert hg.stop("brokerd") == 0, hg.log_text("brokerd")
    assert_down(hg.wait_status(503), "brokerd")
    for name in ("frontd", "sandboxd"):
        assert hg.stop(name) == 0, hg.log_text(name)


# Exec the rest with SIGTERM blocked and already pending: the signal a
# daemon gets while it is still starting up.
TERM_PENDING = [
    "/usr/bin/python3", "-c",
    "import os, signal, sys\n"
    "signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGTERM])\n"
    "os.kill(os.getpid(), signal.SIGTERM)\n"
    "os.execvp(sys.argv[1], sys.argv[1:])\n"]


@pytest.mark.parametrize("name", hglib.DAEMONS)
def test_sigterm_during_start_up_exits_cleanly(hostgate_factory, name):
    """A SIGTERM that arrives while a daemon is still starting up waits
    for its handler, then ends the daemon the clean way (exit 0, its
    exit line), never by the signal's default action half set up."""
    hg = hostgate_factory(start=False)
    p = hg.start(name, prefix=TERM_PENDING)
    assert p.wait(hglib.SLOW) == 0, hg.log_text(name)
    assert "signal 15, exiting" in hg.log_text(name), hg.log_text(name)
