"""The directory rule: a daemon that creates the state directory or the
workspace root gives it its owner and mode; one that finds it there with
the wrong owner or an unsafe or unusable mode stops, naming the path, what
it found and the command that fixes it, and changes nothing."""

import grp
import os
import pwd
import shutil

import pytest

import hglib


def owner_of(hg, daemon):
    """(name, uid, gid) the daemon runs as in this hostgate."""
    if hg.mode == "root":
        name = hglib.SERVICE_USERS[daemon]
    elif hg.run_as is not None:
        name = hglib.TEST_USER
    else:
        name = pwd.getpwuid(os.geteuid()).pw_name
    pw = pwd.getpwnam(name)
    return name, pw.pw_uid, pw.pw_gid


def want_mode(hg):
    """The state directory's mode: 0711 under separate users, else 0700."""
    return 0o711 if hg.mode == "root" else 0o700


def make_dir(path, mode, uid, gid):
    if os.path.isdir(path):
        shutil.rmtree(path)
    os.mkdir(path)
    os.chmod(path, mode)
    if hglib.IS_ROOT:
        os.chown(path, uid, gid)


def snapshot(path):
    st = os.stat(path)
    return st.st_uid, st.st_gid, st.st_mode, sorted(os.listdir(path))


def refused(hg, daemon, path, found_uid, found_gid, found_mode, want_user,
            mode):
    """Start daemon; it must exit non-zero with the message, path unchanged."""
    before = snapshot(path)
    p = hg.start(daemon)
    rc = p.wait(hglib.SLOW)
    log = hg.log_text(daemon)
    assert rc != 0, log
    what = "state directory" if daemon == "brokerd" else "workspace root"
    msg = ("%s %s is owned by %s:%s mode %04o; want %s, mode %04o: run "
           "chown %s: %s && chmod %04o %s, or remove it"
           % (what, path, pwd.getpwuid(found_uid).pw_name,
              grp.getgrgid(found_gid).gr_name, found_mode, want_user, mode,
              want_user, path, mode, path))
    assert msg in log, log
    assert snapshot(path) == before


@pytest.mark.skipif(not hglib.IS_ROOT, reason="needs a directory of root's")
def test_state_dir_wrong_owner(hostgate_factory):
    hg = hostgate_factory(start=False)
    make_dir(hg.state, want_mode(hg), 0, 0)
    name, _, _ = owner_of(hg, "brokerd")
    refused(hg, "brokerd", hg.state, 0, 0, want_mode(hg), name,
            want_mode(hg))


def test_state_dir_writable_by_others(hostgate_factory):
    hg = hostgate_factory(start=False)
    name, uid, gid = owner_of(hg, "brokerd")
    make_dir(hg.state, 0o777, uid, gid)
    refused(hg, "brokerd", hg.state, uid, gid, 0o777, name, want_mode(hg))


def test_state_dir_group_writable(hostgate_factory):
    hg = hostgate_factory(start=False)
    name, uid, gid = owner_of(hg, "brokerd")
    make_dir(hg.state, 0o771, uid, gid)
    refused(hg, "brokerd", hg.state, uid, gid, 0o771, name, want_mode(hg))


def test_state_dir_closed_to_sandboxd(hostgate_factory, mode):
    """Under separate users sandboxd must pass through: 0700 is unusable."""
    if mode != "root":
        pytest.skip("root mode only: one user needs no x for others")
    hg = hostgate_factory(start=False)
    name, uid, gid = owner_of(hg, "brokerd")
    make_dir(hg.state, 0o700, uid, gid)
    refused(hg, "brokerd", hg.state, uid, gid, 0o700, name, 0o711)


@pytest.mark.skipif(not hglib.IS_ROOT, reason="needs a directory of root's")
def test_workspace_root_wrong_owner(hostgate_factory):
    hg = hostgate_factory(start=False)
    _, buid, bgid = owner_of(hg, "brokerd")
    make_dir(hg.state, want_mode(hg), buid, bgid)
    ws = os.path.join(hg.state, "workspaces")
    make_dir(ws, 0o700, 0, 0)
    name, _, _ = owner_of(hg, "sandboxd")
    refused(hg, "sandboxd", ws, 0, 0, 0o700, name, 0o711)


def test_workspace_root_writable_by_others(hostgate_factory):
    hg = hostgate_factory(start=False)
    _, buid, bgid = owner_of(hg, "brokerd")
    make_dir(hg.state, want_mode(hg), buid, bgid)
    ws = os.path.join(hg.state, "workspaces")
    name, uid, gid = owner_of(hg, "sandboxd")
    make_dir(ws, 0o757, uid, gid)
    refused(hg, "sandboxd", ws, uid, gid, 0o757, name, 0o711)


def test_workspace_root_0700_opened_up(hostgate_factory):
    """A workspace root of sandboxd's left 0700 by an earlier version
    becomes 0711: each user's workspace inside belongs to that user."""
    hg = hostgate_factory(start=False)
    _, buid, bgid = owner_of(hg, "brokerd")
    make_dir(hg.state, want_mode(hg), buid, bgid)
    ws = os.path.join(hg.state, "workspaces")
    _, uid, gid = owner_of(hg, "sandboxd")
    make_dir(ws, 0o700, uid, gid)
    hg.start("sandboxd")
    hglib.wait_for(lambda: os.stat(ws).st_mode & 0o7777 == 0o711,
                   what="sandboxd to open %s to 0711" % ws)
    assert os.stat(ws).st_uid == uid


def test_created_with_owner_and_mode(hostgate_factory):
    """sandboxd first creates the state directory as brokerd would, and
    brokerd then accepts it: the daemons start in any order."""
    hg = hostgate_factory(start=False)
    if os.path.isdir(hg.state):
        os.rmdir(hg.state)
    if hg.run_as is not None:
        # The test user cannot create anything in our directory.
        os.chown(hg.dir, *hg.run_as)
    hg.start("sandboxd")
    ws = os.path.join(hg.state, "workspaces")
    hglib.wait_for(lambda: os.path.isdir(ws) and
                   os.stat(ws).st_mode & 0o777 == 0o711,
                   what="sandboxd to create %s" % ws)
    _, buid, _ = owner_of(hg, "brokerd")
    _, suid, _ = owner_of(hg, "sandboxd")
    st = os.stat(hg.state)
    assert (st.st_uid, st.st_mode & 0o7777) == (buid, want_mode(hg))
    assert os.stat(ws).st_uid == suid
    hg.start("brokerd")
    hglib.wait_for(lambda: hg.hgctl("user", "list").returncode == 0,
                   what="brokerd to answer")
    assert hg.alive("sandboxd") and hg.alive("brokerd"), hg.logs()
    st2 = os.stat(hg.state)
    assert (st2.st_uid, st2.st_mode) == (st.st_uid, st.st_mode)
