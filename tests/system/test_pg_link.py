"""brokerd's link to a PostgreSQL store (brokerd/pg.c), against a real
server: the schema's version checked at start, hgctl store migrate, a
store that cannot be reached, the link lost and connected again by itself.
"""

import os
import subprocess
import tempfile
import threading

import pytest

import hglib
import pglib

pytestmark = pytest.mark.skipif(pglib.available() is not None,
                                reason=str(pglib.available()))


def hgctl(env, *args):
    full = dict(os.environ, HOSTGATE_ENV_FILE="/dev/null")
    full.update(env)
    return subprocess.run([os.path.join(hglib.BUILD, "hgctl")] + list(args),
                          env=full, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True,
                          timeout=hglib.SLOW)


def brokerd_log(hg):
    with open(hg.log_path("brokerd")) as f:
        return f.read()


def start_refused(mode, env):
    """Start a brokerd that must refuse to start: its FATAL line."""
    hg = hglib.Hostgate(mode, env=env, name="pglink")
    try:
        p = hg.start("brokerd")
        assert p.wait(timeout=hglib.SLOW) != 0
        fatal = [line for line in brokerd_log(hg).splitlines()
                 if "FATAL" in line]
        assert fatal, brokerd_log(hg)
        return fatal[-1]
    finally:
        hg.shutdown()
        hg.cleanup()


def test_migrate_creates_then_keeps_the_schema(pg):
    url = pg.database()
    r = hgctl({"HOSTGATE_STORE": url}, "store", "migrate")
    assert r.returncode == 0, r.stdout
    assert "schema version 0 -> 2" in r.stdout
    r = hgctl({"HOSTGATE_STORE": url}, "store", "migrate")
    assert r.returncode == 0 and "schema version 2, up to date" in r.stdout
    assert pg.psql(url, "SELECT value FROM meta WHERE key = 'schema'") == \
        [["2"]]
    tables = {row[0] for row in pg.psql(
        url, "SELECT tablename FROM pg_tables WHERE schemaname = 'public'")}
    assert tables == {"meta", "users", "sessions", "tokens", "ratelimits",
                      "audit", "hosts", "live"}


def test_concurrent_migrations_take_turns(pg):
    """Four hosts migrating one empty store at once: one creates the
    schema, the others find it done; none fails on a half-made one."""
    url = pg.database()
    out = [None] * 4

    def run(i):
        out[i] = hgctl({"HOSTGATE_STORE": url}, "store", "migrate")

    threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(r.returncode == 0 for r in out), [r.stdout for r in out]
    assert sum("0 -> 2" in r.stdout for r in out) == 1
    assert sum("up to date" in r.stdout for r in out) == 3


def test_migrate_with_the_embedded_store_does_nothing(tmp_path):
    r = hgctl({"HOSTGATE_STATE_DIR": str(tmp_path)}, "store", "migrate")
    assert r.returncode == 0
    assert "embedded store needs no migration" in r.stdout
    assert os.listdir(tmp_path) == []


def test_migrate_names_an_unreachable_store(tmp_path):
    url = "postgresql:///hg?host=%s&user=hostgate" % tmp_path
    r = hgctl({"HOSTGATE_STORE": url, "HOSTGATE_STORE_TIMEOUT_SECONDS": "2"},
              "store", "migrate")
    assert r.returncode == 1
    assert r.stdout.startswith("hgctl: postgresql:///hg?host=")
    assert "No such file or directory" in r.stdout, r.stdout


def test_migrate_refuses_a_newer_schema(pg):
    url = pg.database()
    pg.migrate(url)
    pg.psql(url, "UPDATE meta SET value = 99 WHERE key = 'schema'")
    r = hgctl({"HOSTGATE_STORE": url}, "store", "migrate")
    assert r.returncode == 1
    assert "schema version 99, but this hostgate knows versions up to 2 " \
        "(a newer hostgate's store?)" in r.stdout


def test_config_masks_the_password():
    r = hgctl({"HOSTGATE_STORE": "postgresql://hg:s3cret@db.example/hg"},
              "config")
    assert "HOSTGATE_STORE='postgresql://hg:***@db.example/hg'" in r.stdout
    assert "s3cret" not in r.stdout


@pytest.mark.parametrize("mode", hglib.MODES)
def test_unmigrated_store_refused_at_start(pg, mode):
    url = pg.database()
    line = start_refused(mode, {"HOSTGATE_STORE": url})
    assert "HOSTGATE_STORE: the store at " in line
    assert "is at schema version 0; this hostgate needs 2: run hgctl " \
        "store migrate" in line


@pytest.mark.parametrize("mode", hglib.MODES)
def test_newer_store_refused_at_start(pg, mode):
    url = pg.database()
    pg.migrate(url)
    pg.psql(url, "UPDATE meta SET value = 3 WHERE key = 'schema'")
    line = start_refused(mode, {"HOSTGATE_STORE": url})
    assert "is at schema version 3, but this hostgate knows versions up " \
        "to 2 (a newer hostgate's store?)" in line


@pytest.mark.parametrize("mode", hglib.MODES)
def test_unreachable_store_refused_at_start(mode):
    empty = tempfile.mkdtemp(prefix="hg-pg-none-")
    os.chmod(empty, 0o755)
    url = "postgresql:///hg?host=%s&user=hostgate" % empty
    try:
        line = start_refused(mode, {"HOSTGATE_STORE": url})
    finally:
        os.rmdir(empty)
    assert "HOSTGATE_STORE: connection to server on socket" in line
    assert "No such file or directory" in line


@pytest.mark.parametrize("mode", hglib.MODES)
def test_malformed_store_refused_at_start(mode):
    line = start_refused(mode, {"HOSTGATE_STORE": "postgresql://[::1"})
    assert "HOSTGATE_STORE: " in line


@pytest.mark.parametrize("mode", hglib.MODES)
def test_link_lost_and_back_by_itself(pg, mode):
    """The server stopped under a running brokerd: the link is declared
    lost at once (its socket closes) and connected again, with LISTEN,
    once the server is back; brokerd never exits."""
    url = pg.database()
    pg.migrate(url)
    hg = hglib.Hostgate(mode, env={"HOSTGATE_STORE": url,
                                   "HOSTGATE_HOST_ID": "h1"}, name="pglink")
    try:
        hg.start_all()
        hg.add_user(*hglib.ADMIN, admin=True)
        assert "store: PostgreSQL at %s:5432/" % pg.sock in brokerd_log(hg)
        assert "host h1" in brokerd_log(hg)
        pg.stop()
        hglib.wait_for(lambda: "store: link lost" in brokerd_log(hg),
                       what="the link declared lost")
        pg.start()
        hglib.wait_for(lambda: "store: link back after" in brokerd_log(hg),
                       what="the link back")
        hglib.wait_for(lambda: pg.psql(url, "SELECT count(*) FROM "
                                       "pg_stat_activity WHERE "
                                       "application_name = "
                                       "'hostgate-brokerd'") == [["1"]],
                                       what="brokerd's connection")
        # LISTEN is on again: a user another host adds (a row written by
        # psql, its trigger's NOTIFY) is in brokerd's memory, which is
        # what hgctl user list shows, with no lookup asking for it.
        pg.psql(url, "INSERT INTO users SELECT 'zed', admin, hash, "
                "created, uid + 1, gid + 1, NULL, egress_allow FROM users "
                "WHERE name = 'alice'")
        hglib.wait_for(lambda: "zed" in {u["name"] for u in hg.hgctl_json(
            "user", "list")}, what="the notified user in brokerd")
        assert hg.procs["brokerd"].poll() is None
    finally:
        if not pg.running:
            pg.start()
        problems = hg.shutdown()
        hg.cleanup()
    assert problems == []


@pytest.mark.parametrize("mode", hglib.MODES)
def test_mcp_session_ids_name_the_host(pg, mode):
    """In a fleet, an MCP session id is HOST.HEX32, so that the balancer
    can send the session's requests to the host that holds it (frontd
    keeps MCP sessions in memory); the session works under that id."""
    import test_mcp_http as mcp
    url = pg.database()
    pg.migrate(url)
    with hglib.running(mode, "pgmcp", env={"HOSTGATE_STORE": url,
                                           "HOSTGATE_HOST_ID": "h7"}) as hg:
        token = hg.hgctl_json("token", "create", "bob")["token"]
        s = mcp.Legacy(hg, token)
        assert s.sid.startswith("h7.") and len(s.sid) == 35, s.sid
        assert all(c in "0123456789abcdef" for c in s.sid[3:]), s.sid
        tools = s.call("tools/list")["result"]["tools"]
        assert tools
        # Another host's id, or the bare hex part: unknown here.
        r = s.send(mcp.rpc(9, "tools/list"),
                   {"Mcp-Session-Id": "h8." + s.sid[3:]})
        assert r.status == 404, r
        r = s.send(mcp.rpc(9, "tools/list"), {"Mcp-Session-Id": s.sid[3:]})
        assert r.status == 404, r
