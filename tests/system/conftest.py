"""Fixtures of hostgate's system tests.

Every test runs in each mode of MODES: "root" (daemons started as root,
each dropping to its own service user) and "user" (all three as one
unprivileged user). Tests that leave the daemons as they found them use
`hg`, an instance with the module's configuration, pooled for the session
per (mode, configuration) (hglib.Pool: an instance is shared again only
if it was left as found). The configuration is the module's HOSTGATE
(environment variables, plus "more_users" and "own", see hglib.Pool),
or a test's own through indirect parametrization:

    @pytest.mark.parametrize("hg", [{"HOSTGATE_X": "1"}], indirect=True)

`shared` is `hg` with the default configuration, for modules that also
have an `hg` of their own. Tests that restart, kill or reconfigure
daemons make their own with `hostgate_factory`.

A module whose behaviour does not depend on who runs the daemons (HTTP
parsing, frontd's limits, the API's semantics) sets MODE_INDEPENDENT =
True, says why in its docstring, and runs in ONE_MODE only: root, the
mode of an installed hostgate, when the suite runs as root (else user,
the only mode there is).
"""

import os
import subprocess

import pytest

import hglib
import pglib


def pytest_report_header(config):
    return "hostgate build: %s; modes: %s" % (hglib.BUILD,
                                              ", ".join(hglib.MODES))


@pytest.fixture(scope="session", autouse=True)
def _prerequisites():
    """Binaries built and, as root, the test users present."""
    missing = hglib.missing_binaries()
    if missing:
        pytest.exit("hostgate binaries missing in %s: %s (run make)"
                    % (hglib.BUILD, ", ".join(missing)), returncode=2)
    if hglib.IS_ROOT:
        users = list(hglib.SERVICE_USERS.values()) + [hglib.TEST_USER]
        try:
            for u in users:
                hglib.account(u)
        except KeyError:
            subprocess.run([os.path.join(hglib.REPO, "scripts", "users.sh")],
                           check=True)


ONE_MODE = hglib.MODES[0]


def pytest_collection_modifyitems(config, items):
    """Deselect the other modes' items of MODE_INDEPENDENT modules."""
    keep, drop = [], []
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        if getattr(item.module, "MODE_INDEPENDENT", False) and \
                params.get("mode", ONE_MODE) != ONE_MODE:
            drop.append(item)
        else:
            keep.append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


@pytest.fixture(scope="session", params=hglib.MODES)
def mode(request):
    return request.param


POOL = hglib.Pool()


@pytest.fixture(scope="session")
def _pool():
    yield POOL
    POOL.close()


def pytest_terminal_summary(terminalreporter):
    """How many pooled instances the leases took, and why any was not
    shared again."""
    if POOL.leases:
        terminalreporter.write_line(
            "hostgate pool: %d leases, %d instances started; not shared "
            "again: %s" % (POOL.leases, POOL.started,
                           ", ".join("%s (%d)" % (w, POOL.retired.count(w))
                                     for w in sorted(set(POOL.retired)))
                           or "none"))


def _leased(pool, mode, config):
    key, hg = pool.lease(mode, config)
    yield hg
    why = pool.give_back(key, hg)
    if why is not None:
        print("\nhostgate %s not shared again: %s" % (hg.dir, why))


@pytest.fixture(scope="module")
def hg(request, mode, _pool):
    """A running hostgate with alice (admin) and bob, configured by the
    test's parameter (indirect parametrization) or the module's HOSTGATE;
    pooled (hglib.Pool)."""
    config = getattr(request, "param", None)
    if config is None:
        config = getattr(request.module, "HOSTGATE", {})
    yield from _leased(_pool, mode, config)


@pytest.fixture(scope="module")
def shared(mode, _pool):
    """`hg` with the default configuration."""
    yield from _leased(_pool, mode, {})


@pytest.fixture(scope="module")
def pg():
    """A real PostgreSQL server for a module's tests (pglib); skipped where
    none can be started."""
    why = pglib.available()
    if why is not None:
        pytest.skip(why)
    with pglib.Postgres() as server:
        yield server


@pytest.fixture
def store(pg):
    """A fresh database of that server at the schema's version: its URI."""
    url = pg.database()
    pg.migrate(url)
    return url


class Factory:
    """Makes private hostgates for one test and cleans them up."""

    def __init__(self, mode):
        self.mode = mode
        self.instances = []

    def __call__(self, env=None, start=True, tls=False, name="own",
                 users=True):
        full = dict(hglib.LIFTED_ENV)
        full.update(env or {})
        hg = hglib.Hostgate(self.mode, env=full, name=name, tls=tls)
        self.instances.append(hg)
        if start:
            hg.start_all()
            if users:
                hg.add_user(*hglib.ADMIN, admin=True)
                hg.add_user(*hglib.USER)
        return hg


@pytest.fixture
def hostgate_factory(mode):
    f = Factory(mode)
    yield f
    errors = []
    for hg in f.instances:
        try:
            hg.cleanup()
        except AssertionError as e:
            errors.append(str(e))
    assert not errors, "\n".join(errors)


def _instances(item):
    found = []
    for v in getattr(item, "funcargs", {}).values():
        if isinstance(v, hglib.Hostgate):
            found.append(v)
        elif isinstance(v, Factory):
            found.extend(v.instances)
    return found


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """On a failure, keep the hostgate's directory and show its logs."""
    outcome = yield
    rep = outcome.get_result()
    if not rep.failed:
        return
    for hg in _instances(item):
        hg.failed = True
        rep.sections.append(("hostgate logs (%s, kept in %s)"
                             % (hg.mode, hg.dir), hg.logs()))
