"""Rate limits: token buckets for execution-mode changes (per session and per
user), spawns (per user) and logins (per name and per client address).
Exact under concurrency: 200 requests at once, each on its own
connection, against a bucket of N let exactly N through; the rest get 429
with Retry-After. One user's flood does not stop another's requests."""

import os
import subprocess
import threading
import time

import pytest

import hglib
import policylib as pl

N = 7
FLOOD = 200


def assert_429s(results):
    for r in results:
        if r.status == 429:
            assert r.error()["code"] == "rate_limited", r
            ra = r.header("Retry-After")
            assert ra is not None and ra.isdigit() and int(ra) >= 1, r.headers


def test_mode_changes_exact_under_concurrency(hostgate_factory):
    hg = pl.own(hostgate_factory, "modeflood", HOSTGATE_MODE_RATE_PER_MINUTE=N)
    alice = hg.login(*pl.ADMIN)
    res = pl.at_once(FLOOD, lambda i: pl.set_mode(alice, "sandbox"))
    got = pl.statuses(res)
    assert got == {200: N, 429: FLOOD - N}, got
    assert_429s(res)
    refused = pl.audit_records(hg, action="mode_refused", user="alice",
                               reason="rate limited")
    assert len(refused) == FLOOD - N, len(refused)
    # The user's bucket is empty too: another session of alice's waits...
    other = hg.login(*pl.ADMIN)
    r = pl.set_mode(other, "direct")
    pl.assert_error(r, 429, "rate_limited")
    assert pl.mode_of(other)["mode"] == "sandbox"
    # ...but another user does not.
    bob = hg.login(*pl.USER)
    r = pl.set_mode(bob, "sandbox")
    assert r.status == 200, r


def test_mode_changes_per_user_across_sessions(hostgate_factory):
    hg = pl.own(hostgate_factory, "modeuser", HOSTGATE_MODE_RATE_PER_MINUTE=N)
    s1 = hg.login(*pl.ADMIN)
    s2 = hg.login(*pl.ADMIN)
    for _ in range(4):
        assert pl.set_mode(s1, "sandbox").status == 200
    for _ in range(N - 4):
        assert pl.set_mode(s2, "sandbox").status == 200
    # s2's own bucket still holds 4, the user's is empty.
    pl.assert_error(pl.set_mode(s2, "direct"), 429, "rate_limited")
    pl.assert_error(pl.set_mode(s1, "direct"), 429, "rate_limited")


def test_mode_changes_default_six_a_minute(hostgate_factory):
    hg = pl.own(hostgate_factory, "modedefault",
                HOSTGATE_MODE_RATE_PER_MINUTE=None,
                HOST_EXECUTION_DIRECT_TTL_SECONDS=60)
    alice = hg.login(*pl.ADMIN)
    for i in range(6):
        r = pl.set_mode(alice, "direct" if i % 2 == 0 else "sandbox")
        assert r.status == 200, (i, r)
    r = pl.set_mode(alice, "direct")
    pl.assert_error(r, 429, "rate_limited")
    assert 1 <= int(r.header("Retry-After")) <= 10, r.headers
    assert pl.mode_of(alice)["mode"] == "sandbox"


def test_spawns_exact_under_concurrency_and_others_unaffected(
        hostgate_factory):
    hg = pl.own(hostgate_factory, "spawnflood",
                HOSTGATE_SPAWN_RATE_PER_MINUTE=1, HOSTGATE_SPAWN_BURST=N,
                HOSTGATE_MAX_COMMANDS_PER_USER=1000)
    alice = hg.login(*pl.ADMIN)
    bob = hg.login(*pl.USER)
    bob_results = []
    go = threading.Event()

    def bob_works():
        go.wait(hglib.SLOW)
        for _ in range(5):
            bob_results.append(bob.post("/api/run_command",
                                        {"command": "echo bob-ok"}))

    t = threading.Thread(target=bob_works, daemon=True)
    t.start()

    def flood(i):
        if i == 0:
            go.set()
        return alice.post("/api/run_command", {"command": "true"})

    res = pl.at_once(FLOOD, flood)
    t.join(hglib.SLOW)
    got = pl.statuses(res)
    assert got == {200: N, 429: FLOOD - N}, got
    assert_429s(res)
    assert all(r.json()["exit_code"] == 0 for r in res if r.status == 200)
    assert [r.status for r in bob_results] == [200] * 5, bob_results
    assert all(r.json()["stdout"] == "bob-ok\n" for r in bob_results)
    refused = pl.audit_records(hg, action="spawn_refused", user="alice")
    assert len(refused) == FLOOD - N, len(refused)
    assert not pl.audit_records(hg, action="spawn_refused", user="bob")
    # Terminals draw on the same bucket.
    pl.assert_error(alice.post("/api/terminals", {}), 429, "rate_limited")


def test_spawns_default_burst(hostgate_factory):
    hg = pl.own(hostgate_factory, "spawndefault",
                HOSTGATE_SPAWN_RATE_PER_MINUTE=None,
                HOSTGATE_SPAWN_BURST=None,
                HOSTGATE_MAX_COMMANDS_PER_USER=1000)
    bob = hg.login(*pl.USER)
    t0 = time.monotonic()
    res = pl.at_once(40, lambda i: bob.post("/api/run_command",
                                            {"command": "true"}))
    took = time.monotonic() - t0
    got = pl.statuses(res)
    # A burst of 30, and the bucket refills at 2 a second meanwhile.
    refill = int(took * 2) + 1
    assert 30 <= got[200] <= 30 + refill, (got, took)
    assert got[200] + got.get(429, 0) == 40, got
    assert_429s(res)


def test_logins_exact_under_concurrency(hostgate_factory):
    hg = pl.own(hostgate_factory, "loginflood",
                HOSTGATE_LOGIN_RATE_PER_MINUTE=1, HOSTGATE_LOGIN_BURST=N)
    source = "127.0.0.9"

    def attempt(i):
        return hg.post("/api/login", {"username": "bob",
                                      "password": "wrong-%d" % i},
                       source=source)

    res = pl.at_once(FLOOD, attempt)
    got = pl.statuses(res)
    assert got == {401: N, 429: FLOOD - N}, got
    assert_429s(res)
    # Even the right password waits now, from there or as bob...
    r = hg.post("/api/login", {"username": "bob", "password": pl.USER[1]},
                source=source)
    pl.assert_error(r, 429, "rate_limited")
    r = hg.post("/api/login", {"username": "bob", "password": pl.USER[1]},
                source="127.0.0.10")
    pl.assert_error(r, 429, "rate_limited")
    # ...but alice, from elsewhere, logs in.
    assert hg.login(*pl.ADMIN, source="127.0.0.11").user == "alice"
    # Refusals are aggregated per address and reason: the first at once,
    # the repeats as one record with their count once flushed.
    hg.hgctl_ok("audit", "flush")
    failed = pl.audit_records(hg, action="login_failed", user="bob",
                              reason="rate limited")
    assert sum(f["detail"].get("repeats", 1) for f in failed) == \
        FLOOD - N + 2, failed[-3:]
    assert len(failed) <= 4, failed


@pytest.mark.parametrize("var,value", [
    ("HOSTGATE_MODE_RATE_PER_MINUTE", "0"),
    ("HOSTGATE_SPAWN_RATE_PER_MINUTE", "0"),
    ("HOSTGATE_SPAWN_BURST", "0"),
    ("HOSTGATE_MODE_RATE_PER_MINUTE", "many"),
])
def test_bad_limits_stop_brokerd(tmp_path, var, value):
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8",
           "HOSTGATE_ENV_FILE": "/dev/null",
           "HOSTGATE_STATE_DIR": str(tmp_path / "state"),
           "HOSTGATE_RUN_DIR": str(tmp_path / "run"),
           "HOSTGATE_PROFILES_DIR": hglib.PROFILES, var: value}
    r = subprocess.run([os.path.join(hglib.BUILD, "brokerd"), "-n"],
                       env=env, capture_output=True, text=True,
                       timeout=hglib.SLOW)
    assert r.returncode != 0 and var in r.stderr, (r.returncode, r.stderr)
