"""The contract of brokerd's store interface (struct store_ops) against a
real PostgreSQL: tests/unit/test_store.c's tests, which make check runs
against the embedded store in memory, run here with HG_TEST_PG_URL naming
a fresh database of pglib's server at the current schema, so that the
PostgreSQL store (brokerd/store_pg.c) meets the same contract."""

import os
import subprocess

import pytest

import hglib
import pglib

pytestmark = pytest.mark.skipif(pglib.available() is not None,
                                reason=str(pglib.available()))


def test_contract_on_postgresql(store):
    """Every contract test passes on both stores; none is skipped on
    PostgreSQL (each ran against it)."""
    binary = os.path.join(hglib.BUILD, "tests", "test_store")
    assert os.access(binary, os.X_OK), "make unit builds %s" % binary
    r = subprocess.run([binary], env=dict(os.environ, HG_TEST_PG_URL=store),
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=hglib.SLOW)
    assert r.returncode == 0, r.stdout[-6000:]
    groups = r.stdout.split("[==========] Running ")
    assert len(groups) == 3, r.stdout[-3000:]
    embedded, postgresql = groups[1], groups[2]
    # The embedded store has no fleet: its one fleet-only test skips.
    assert embedded.count("[  SKIPPED ] test_") <= 2, embedded
    assert "[  SKIPPED ]" not in postgresql, postgresql
    assert "[  PASSED  ] 10 test(s)." in postgresql, postgresql
