"""Each running daemon has dropped what it does not need: seccomp filter,
no_new_privs, no capabilities, and in root mode its own service user."""

import os

import pytest

import hglib


@pytest.mark.parametrize("daemon", hglib.DAEMONS)
def test_daemon_is_confined(hg, daemon):
    st = hglib.proc_status(hg.pid(daemon))
    assert st["Seccomp"] == "2", st["Seccomp"]
    assert st["NoNewPrivs"] == "1", st["NoNewPrivs"]
    # sandboxd started as root keeps what per-user uids need, nothing more:
    # CAP_CHOWN, CAP_FOWNER, CAP_KILL, CAP_SETGID, CAP_SETUID
    kept = 0
    if daemon == "sandboxd" and hg.mode == "root":
        kept = (1 << 0) | (1 << 3) | (1 << 5) | (1 << 6) | (1 << 7)
    assert int(st["CapEff"], 16) == kept, st["CapEff"]
    assert int(st["CapPrm"], 16) == kept, st["CapPrm"]
    assert int(st["CapAmb"], 16) == 0, st["CapAmb"]
    assert int(st["CapInh"], 16) == 0, st["CapInh"]


@pytest.mark.parametrize("daemon", hglib.DAEMONS)
def test_daemon_runs_as_its_user(hg, daemon):
    st = hglib.proc_status(hg.pid(daemon))
    if hg.mode == "root":
        uid, gid = hglib.account(hglib.SERVICE_USERS[daemon])
    else:
        uid, gid = hg.daemon_uid, (hg.run_as[1] if hg.run_as
                                   else os.getegid())
    uids = [int(x) for x in st["Uid"].split()]
    gids = [int(x) for x in st["Gid"].split()]
    assert uids == [uid] * 4, (daemon, st["Uid"], uid)
    assert gids == [gid] * 4, (daemon, st["Gid"], gid)
    if hglib.IS_ROOT:
        groups = [int(g) for g in st["Groups"].split()]
        assert 0 not in groups, (daemon, groups)
        assert set(groups) <= {gid}, (daemon, groups)


def test_daemons_have_distinct_users_in_root_mode(hg):
    if hg.mode != "root":
        pytest.skip("root mode only")
    uids = {hglib.proc_status(hg.pid(d))["Uid"].split()[0]
            for d in hglib.DAEMONS}
    assert len(uids) == len(hglib.DAEMONS), uids


@pytest.mark.parametrize("daemon", hglib.DAEMONS)
def test_no_stray_fds_to_state_or_home(hg, daemon):
    """A daemon holds no open file outside what it needs."""
    if not hglib.IS_ROOT and hg.daemon_uid != os.geteuid():
        pytest.skip("cannot read another user's fds")
    fd_dir = "/proc/%d/fd" % hg.pid(daemon)
    targets = []
    for fd in os.listdir(fd_dir):
        try:
            targets.append(os.readlink(os.path.join(fd_dir, fd)))
        except FileNotFoundError:
            pass
    # The copied binaries and the repository's files are not held open.
    for t in targets:
        assert not t.startswith(hglib.REPO + "/"), (daemon, t)
        assert "store.db" not in t or daemon == "brokerd", (daemon, t)
        assert "key.pem" not in t, (daemon, t)


def test_frontd_cannot_fork(hg):
    """frontd never forks: RLIMIT_NPROC is 0."""
    with open("/proc/%d/limits" % hg.pid("frontd")) as f:
        for line in f:
            if line.startswith("Max processes"):
                soft = line.split()[2]
                assert soft == "0", line
                return
    raise AssertionError("no Max processes line")
