"""Spawn records that say what ran, and no record, no action.

Every spawn writes an allow record ("spawn", "terminal_open") with what
will run BEFORE it starts, and an end record ("spawn_end",
"terminal_opened" then "terminal_exited") with how it went. With the state
directory's file system full, nothing is started, logins and other state
changes are refused with 503, and /healthz answers 503 naming the audit
log; once space is back, all of it works again. The full file system is a
real one: a 2 MiB tmpfs mounted as the state directory's parent."""

import contextlib
import hashlib
import json
import os
import shutil
import subprocess

import pytest

import hglib
import policylib as pl
import sandboxlib as sl


def records(hg, action, **match):
    return pl.audit_records(hg, action=action, **match)


def one_after(hg, action, seq, **match):
    """The first record of action after seq matching match."""
    got = [r for r in records(hg, action, **match) if r["seq"] > seq]
    assert got, "no %s record after %d matching %r" % (action, seq, match)
    return got[0]


# The configuration of `hg` (conftest.py): pooled per mode.
HOSTGATE = pl.config(HOST_EXECUTION_DIRECT_TTL_SECONDS=2,
                    HOSTGATE_MAX_TERMINALS_PER_USER=2)


# -- what ran ------------------------------------------------------------------

def test_command_allow_record_precedes_the_spawn_and_says_what_runs(hg):
    alice = hg.login(*pl.ADMIN)
    before = pl.audit_records(hg)[-1]["seq"]
    r = alice.post("/api/run_command", {"command": "printf abc; exit 3",
                                        "env": {"SECRET_X": "hunter2"},
                                        "timeout": int(hglib.SLOW)})
    assert r.status == 200, r
    out = r.json()
    assert out["exit_code"] == 3 and out["stdout"] == "abc", out
    allow = one_after(hg, "spawn", before, user="alice")
    end = one_after(hg, "spawn_end", before, user="alice")
    assert allow["seq"] < end["seq"], (allow, end)
    d = allow["detail"]
    assert allow["allowed"] is True, allow
    assert d["command"] == "printf abc; exit 3", d
    assert d["command_bytes"] == len("printf abc; exit 3"), d
    assert d["argv"] == ["/bin/bash", "-c"], d
    assert d["kind"] == "command" and d["lang"] == "bash", d
    assert d["cwd"] is None and d["timeout_s"] == int(hglib.SLOW), d
    assert d["mode"] == "sandbox" and d["permission"], d
    # Variable names are recorded, never their values.
    assert d["env"] == ["SECRET_X"], d
    assert "hunter2" not in open(pl.audit_path(hg)).read()
    assert d["request_id"] == r.header("X-Request-Id"), (d, r.headers)
    assert allow["reason"] == "printf abc; exit 3", allow

    e = end["detail"]
    assert end["allowed"] is True and end["reason"] == "exit 3", end
    assert e["spawn_seq"] == allow["seq"], (allow, end)
    assert e["request_id"] == d["request_id"], e
    assert len(e["id"]) == 16 and e["exit_code"] == 3, e
    assert e["signal"] is None and e["timed_out"] is False, e
    assert e["oom"] is False, e     # from its cgroup's memory events
    assert e["stdout_bytes"] == 3 and e["stderr_bytes"] == 0, e
    assert e["truncated"] is False, e
    assert isinstance(e["duration_ms"], int) and e["duration_ms"] >= 0, e
    assert e["uid"] == hg.daemon_uid if hg.mode == "user" else \
        isinstance(e["uid"], int), e
    assert e["cgroup"] is None or e["cgroup"].startswith("/sys/fs/cgroup"), e
    assert e["cwd"].startswith(pl.workspace_root(hg)), e
    assert pl.HEX64.fullmatch(e["sha256"]) and e["backend"], e


def test_hgctl_audit_show_shows_the_command(hg):
    alice = hg.login(*pl.ADMIN)
    pl.run(alice, "echo shown-in-hgctl-7361")
    r = hg.hgctl("audit", "show", "--action", "spawn")
    assert r.returncode == 0, r
    assert "echo shown-in-hgctl-7361" in r.stdout, r.stdout


def test_python_code_is_recorded_as_text(hg):
    alice = hg.login(*pl.ADMIN)
    before = pl.audit_records(hg)[-1]["seq"]
    code = "import sys\nprint('py-rec')\n"
    r = alice.post("/api/run_python", {"code": code})
    assert r.status == 200 and r.json()["stdout"] == "py-rec\n", r
    d = one_after(hg, "spawn", before, user="alice")["detail"]
    assert d["lang"] == "python" and d["code"] == code, d
    assert d["argv"] == ["/usr/bin/python3", "-"], d
    rec = one_after(hg, "spawn", before, user="alice")
    assert "\n" not in rec["reason"], rec
    assert rec["reason"].startswith("python3: import sys"), rec


def test_long_command_is_recorded_by_hash_and_size(hg):
    alice = hg.login(*pl.ADMIN)
    before = pl.audit_records(hg)[-1]["seq"]
    command = "true " + "x" * 5000
    pl.run(alice, command)
    rec = one_after(hg, "spawn", before, user="alice")
    d = rec["detail"]
    assert "command" not in d, d
    assert d["command_bytes"] == len(command), d
    assert d["command_sha256"] == \
        hashlib.sha256(command.encode()).hexdigest(), d
    assert len(rec["reason"]) < 200, rec


def test_timeout_is_in_the_end_record(hg):
    alice = hg.login(*pl.ADMIN)
    before = pl.audit_records(hg)[-1]["seq"]
    r = alice.post("/api/run_command", {"command": "sleep 30", "timeout": 1})
    assert r.status == 200 and r.json()["timed_out"] is True, r
    e = one_after(hg, "spawn_end", before, user="alice")
    assert e["detail"]["timed_out"] is True, e
    assert e["detail"]["signal"] is not None, e
    assert "timed out" in e["reason"], e


def test_terminal_open_and_close_records(hg):
    bob = hg.login(*pl.USER)
    before = pl.audit_records(hg)[-1]["seq"]
    r = bob.post("/api/terminals", {"cols": 100, "rows": 30})
    assert r.status in (200, 201), r
    tid = r.json()["id"]
    allow = one_after(hg, "terminal_open", before, user="bob")
    opened = one_after(hg, "terminal_opened", before, user="bob")
    assert allow["seq"] < opened["seq"], (allow, opened)
    a = allow["detail"]
    assert a["argv"] == ["/bin/bash", "-i"] and a["cols"] == 100, a
    assert a["rows"] == 30 and a["mode"] == "sandbox" and a["permission"], a
    o = opened["detail"]
    assert o["id"] == tid and o["open_seq"] == allow["seq"], o
    assert isinstance(o["uid"], int) and "cgroup" in o, o
    assert bob.request("DELETE", "/api/terminals/" + tid).status in (200,
                                                                      204)
    ex = pl.wait_audit(hg, action="terminal_exited", detail_id=tid)[0]
    d = ex["detail"]
    assert d["reason"] == "kill" and ex["reason"] == "kill", ex
    assert d["open_seq"] == allow["seq"], d
    assert isinstance(d["duration_ms"], int), d
    closed = one_after(hg, "terminal_closed", before, user="bob")
    assert closed["detail"]["id"] == tid, closed


def test_direct_terminal_ends_by_expiry(hg):
    """A grant of 2 s: its direct terminal is killed when it ends."""
    alice = hg.login(*pl.ADMIN)
    pl.grant(alice)
    r = alice.post("/api/terminals", {})
    assert r.status in (200, 201) and r.json()["mode"] == "direct", r
    tid = r.json()["id"]
    ex = pl.wait_audit(hg, action="terminal_exited",
                       detail_id=tid)[0]
    assert ex["reason"] == "expiry" and ex["detail"]["mode"] == "direct", ex
    opened = pl.audit_records(hg, action="terminal_opened", detail_id=tid)
    assert opened[0]["detail"]["backend"] == "direct", opened


# -- no record, no action -----------------------------------------------------

STATE_FS_SIZE = "2m"


@pytest.fixture(scope="module")
def full(mode):
    """A hostgate whose state directory lives on a 2 MiB tmpfs (and its
    workspaces outside it); yields (hg, fill path)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    full_env = dict(hglib.LIFTED_ENV)
    # No workspace image: a state tmpfs this small cannot hold one (the
    # refusal that would give is test_quota's).
    full_env["HOSTGATE_USER_DISK_MAX"] = "0"
    hg = hglib.Hostgate(mode, env=full_env, name="audit-full")
    mnt = os.path.join(hg.dir, "statefs")
    os.mkdir(mnt, 0o755)
    opts = "size=%s,mode=0755" % STATE_FS_SIZE
    subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "hg-audit-full",
                    mnt], check=True)
    try:
        hg.state = os.path.join(mnt, "state")
        ws = os.path.join(hg.dir, "workspaces")
        hg.env["HOSTGATE_STATE_DIR"] = hg.state
        hg.env["HOSTGATE_WORKSPACE_ROOT"] = ws
        if hg.run_as:
            for d in (hg.state, ws):
                os.mkdir(d, 0o700)
                os.chown(d, *hg.run_as)
        hg.start_all()
        hg.add_user(*pl.ADMIN, admin=True)
        hg.add_user(*pl.USER)
        yield hg, os.path.join(mnt, "fill")
    finally:
        with contextlib.suppress(Exception):
            hg.cleanup()
        subprocess.run(["umount", mnt], check=False)
        shutil.rmtree(hg.dir, ignore_errors=True)


def fill_up(path):
    """Write path until the file system says it is full."""
    chunk = b"\0" * 65536
    with open(path, "wb", buffering=0) as f:
        while True:
            try:
                f.write(chunk)
            except OSError:
                break
        # The last partial page, byte by byte in 4 KiB steps.
        for n in (4096, 512, 1):
            while True:
                try:
                    f.write(b"\0" * n)
                except OSError:
                    break
    st = os.statvfs(os.path.dirname(path))
    assert st.f_bavail == 0, st


def healthz(hg):
    r = hg.get("/healthz")
    return r.status, r.json()


def test_full_state_fs_stops_everything_with_503(full):
    hg, fill = full
    alice = hg.login(*pl.ADMIN)
    ws = os.path.join(pl.workspace_root(hg), "alice")
    pl.run(alice, "true")       # the workspace exists
    assert healthz(hg)[0] == 200
    status, doc = healthz(hg)
    assert doc["audit"]["ok"] is True and doc["audit"]["reason"] is None, doc
    marker = os.path.join(ws, "ran-while-full")
    seq = pl.audit_records(hg)[-1]["seq"]

    fill_up(fill)
    try:
        for _ in range(5):
            r = alice.post("/api/run_command",
                           {"command": "touch ran-while-full"})
            pl.assert_error(r, 503, "unavailable")
            assert "audit" in r.error()["message"], r
        r = alice.post("/api/run_python", {"code": "print(1)"})
        pl.assert_error(r, 503, "unavailable")
        r = alice.post("/api/terminals", {})
        pl.assert_error(r, 503, "unavailable")
        assert not os.path.exists(marker)
        r = hg.post("/api/login", {"username": "bob",
                                   "password": pl.USER[1]})
        pl.assert_error(r, 503, "unavailable")
        assert r.cookie() is None, r
        status, doc = healthz(hg)
        assert status == 503, doc
        assert doc["ok"] is False and doc["audit"]["ok"] is False, doc
        assert "audit" in doc["audit"]["reason"], doc
        assert doc["error"]["message"] == doc["audit"]["reason"], doc
        # Nothing was started, so nothing was recorded as started.
        assert not [x for x in pl.audit_records(hg) if x["seq"] > seq
                    and x["action"] in ("spawn", "spawn_end",
                                        "terminal_opened")]
    finally:
        os.unlink(fill)

    status, doc = healthz(hg)
    assert status == 200 and doc["audit"]["ok"] is True, doc
    pl.run(alice, "touch ran-after-space")
    assert os.path.exists(os.path.join(ws, "ran-after-space"))
    assert not os.path.exists(marker)
    assert hg.login(*pl.USER).user == "bob"
    rc, v = pl.verify(hg)
    assert rc == 0, v


def test_terminal_exited_counts_resizes(hg):
    bob = hg.login(*pl.USER)
    t = sl.Terminal(bob, cols=80, rows=24)
    try:
        t.attach()
        for cols, rows in ((90, 30), (100, 31), (111, 32)):
            t.ws.send_text(json.dumps({"type": "resize", "cols": cols,
                                       "rows": rows}))
        # Refused sizes are not counted.
        t.ws.send_text('{"type":"resize","cols":0,"rows":10}')
        # The shell sees the last size: frontd has applied all of them,
        # and told brokerd before the DELETE that follows on the same link.
        out, rc = t.run("stty size")
        assert rc == 0 and out.strip() == "32 111", out
    finally:
        t.close()
    ex = pl.wait_audit(hg, action="terminal_exited", detail_id=t.id)[0]
    assert ex["detail"]["resizes"] == 3, ex
