"""Login rate limits: a token bucket per username and per client address.

frontd listens on 127.0.0.1; clients connect from other 127/8 addresses to
appear as distinct client addresses.

Mode-independent (MODE_INDEPENDENT): run in one mode only, root as root,
because brokerd's token buckets count the same whoever runs it."""

import time

import pytest

import hglib

MODE_INDEPENDENT = True

ADMIN, USER = hglib.ADMIN, hglib.USER
DEFAULT_BURST = 5
DEFAULT_RATE = 10       # per minute


@pytest.fixture(scope="module")
def limited(mode):
    """A hostgate on the default limits (burst 5, 10 per minute)."""
    hg = hglib.Hostgate(mode, name="ratelimit")
    try:
        hg.start_all()
        hg.add_user(*ADMIN, admin=True)
        hg.add_user(*USER)
        yield hg
    finally:
        hg.cleanup()


def attempt(hg, user, password, source):
    return hg.post("/api/login", {"username": user, "password": password},
                   source=source)


def assert_429(r):
    assert r.status == 429, r
    err = r.error()
    assert err["code"] == "rate_limited", err
    ra = r.header("Retry-After")
    assert ra is not None and ra.isdigit() and int(ra) >= 1, r.headers
    return int(ra)


def drain(hg, attempts, burst, rate):
    """Make attempts (a list of (user, password, source)) until one gets
    429; check that no fewer than burst and no more than burst plus what
    the bucket refilled meanwhile got through. Returns the 429 reply."""
    t0 = time.monotonic()
    passed = 0
    for user, pw, src in attempts:
        r = attempt(hg, user, pw, src)
        if r.status == 429:
            allowed = burst + int((time.monotonic() - t0) * rate / 60.0) + 1
            assert burst <= passed <= allowed, (passed, burst, allowed)
            return r
        assert r.status in (200, 401), r
        passed += 1
    raise AssertionError("no 429 after %d attempts" % passed)


def test_per_username(limited):
    hg = limited
    # Each attempt from its own address: only the username bucket applies.
    # Right and wrong passwords both count.
    attempts = []
    for i in range(12):
        pw = ADMIN[1] if i % 2 else "wrong-password"
        attempts.append((ADMIN[0], pw, "127.0.1.%d" % (i + 1)))
    assert_429(drain(hg, attempts, DEFAULT_BURST, DEFAULT_RATE))
    # Even the right password, from a fresh address, is refused now.
    assert_429(attempt(hg, ADMIN[0], ADMIN[1], "127.0.1.100"))
    # Another user is not affected.
    assert attempt(hg, USER[0], USER[1], "127.0.1.101").status == 200


def test_per_address(limited):
    hg = limited
    src = "127.0.2.1"
    attempts = [("nobody%d" % i, "wrong-password", src) for i in range(12)]
    r = drain(hg, attempts, DEFAULT_BURST, DEFAULT_RATE)
    assert_429(r)
    # A right password for a fresh user from that address: still refused.
    assert_429(attempt(hg, USER[0], USER[1], src))
    # The same user from another address gets in.
    assert attempt(hg, USER[0], USER[1], "127.0.2.2").status == 200


def test_limited_answer_is_the_same_for_known_and_unknown(limited):
    hg = limited
    src = "127.0.3.1"
    drain(hg, [("ghost%d" % i, "wrong-password", src) for i in range(12)],
          DEFAULT_BURST, DEFAULT_RATE)
    a = attempt(hg, ADMIN[0], "wrong-password", src)
    b = attempt(hg, "ghost-x", "wrong-password", src)
    assert_429(a)
    assert_429(b)
    assert a.json() == b.json()


def test_custom_limits_and_retry_after(hostgate_factory):
    hg = hostgate_factory(env={"HOSTGATE_LOGIN_RATE_PER_MINUTE": "60",
                               "HOSTGATE_LOGIN_BURST": "2"})
    src = "127.0.4.1"
    attempts = [(USER[0], "wrong-password", src) for _ in range(8)]
    wait = assert_429(drain(hg, attempts, 2, 60))
    assert wait <= 2, "Retry-After %d for a 1/s refill" % wait
    # After Retry-After seconds a login goes through.
    time.sleep(wait)
    r = attempt(hg, USER[0], USER[1], src)
    assert r.status == 200, r
