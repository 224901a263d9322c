"""Disk quotas (docs/sandbox.md, "Disk quotas"): in root mode each user's
workspace is the mount point of their own btrfs image, whose qgroup limit
is HOSTGATE_USER_DISK_MAX; a write past it fails with EDQUOT ("Disk quota
exceeded") while other users write on. sandboxd's disk helper mounts the
image on the user's first spawn and unmounts it when sandboxd stops or
dies, so that no mount and no loop device outlives the daemons. Rootless,
no quota can be had: sandboxd says so at start."""

import json
import os
import signal

import pytest

import hglib
import policylib as pl

M = 1 << 20
LIMIT = 64 * M


def mounts_under(path):
    """(mount point, fstype, source, options) of every mount below path."""
    out = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            fields = left.split()
            mnt = fields[4].encode().decode("unicode_escape")
            if mnt == path or mnt.startswith(path.rstrip("/") + "/"):
                fstype, source = right.split()[:2]
                out.append((mnt, fstype, source, fields[5]))
    return out


def loops_of(path):
    """Loop devices whose backing file lies below path."""
    out = []
    for dev in os.listdir("/sys/block"):
        if not dev.startswith("loop"):
            continue
        try:
            with open("/sys/block/%s/loop/backing_file" % dev) as f:
                back = f.read().strip()
        except (FileNotFoundError, OSError):
            continue
        if back.startswith(path.rstrip("/") + "/"):
            out.append((dev, back))
    return out


def image(hg, user):
    return os.path.join(hg.state, "disks", user + ".img")


def workspace(hg, user):
    return os.path.join(pl.workspace_root(hg), user)


def quota_hg(factory, name="quota", limit="64M"):
    if factory.mode != "root":
        pytest.skip("disk quotas need root mode")
    return pl.own(factory, name, HOSTGATE_USER_DISK_MAX=limit)


def write(session, mib, name="big"):
    """Write mib MiB into the workspace; the command's result."""
    return pl.run(session, "dd if=/dev/zero of=%s bs=1M count=%d; "
                  "echo rc=$?; sync" % (name, mib))


def nothing_left(hg):
    return not mounts_under(hg.dir) and not loops_of(hg.dir)


def status(session):
    r = session.get("/api/status")
    assert r.status == 200, r
    return r.json()


def test_write_past_the_limit_fails_with_edquot(hostgate_factory):
    hg = quota_hg(hostgate_factory)
    alice = hg.login(*pl.ADMIN)
    bob = hg.login(*pl.USER)
    res = write(alice, 100)
    assert "Disk quota exceeded" in res["stderr"], res
    assert "rc=0" not in res["stdout"], res
    # What alice's writes cost the host: the blocks of her image, at most
    # the limit and btrfs's own few MiB (free space of the host's disk
    # moves with every other process on it; the image's does not).
    used = os.stat(image(hg, "alice")).st_blocks * 512
    assert used <= LIMIT + 16 * M, used
    # bob's workspace is another filesystem: he writes on.
    res = write(bob, 20)
    assert "rc=0" in res["stdout"], res
    # alice, once she deletes, writes again.
    res = pl.run(alice, "rm big; sync; dd if=/dev/zero of=small bs=1M "
                 "count=10; echo rc=$?")
    assert "rc=0" in res["stdout"], res


def test_workspace_is_its_own_filesystem(hostgate_factory):
    hg = quota_hg(hostgate_factory, "quotamnt")
    alice = hg.login(*pl.ADMIN)
    res = pl.run(alice, "id -u; stat -c '%u %a' .")
    ws = workspace(hg, "alice")
    mnts = [m for m in mounts_under(ws) if m[0] == ws]
    assert len(mnts) == 1, mounts_under(hg.dir)
    _, fstype, source, opts = mnts[0]
    assert fstype == "btrfs" and source.startswith("/dev/loop"), mnts
    assert "nosuid" in opts.split(",") and "nodev" in opts.split(","), opts
    # The workspace is the user's, whichever uid the user's spawns run as.
    uid, owner, perm = res["stdout"].split()
    assert owner == uid and perm == "700", res
    assert uid != "0"
    st = os.stat(image(hg, "alice"))
    assert st.st_uid == 0 and (st.st_mode & 0o777) == 0o600, st
    assert (os.stat(os.path.dirname(image(hg, "alice"))).st_mode
            & 0o777) == 0o700
    # A second spawn mounts nothing more.
    pl.run(alice, "true")
    assert len([m for m in mounts_under(hg.dir) if m[0] == ws]) == 1


def test_usage_reflects_the_writes(hostgate_factory):
    hg = quota_hg(hostgate_factory, "quotause")
    alice = hg.login(*pl.ADMIN)
    write(alice, 20)
    doc = status(alice)
    if "usage" not in doc or "containment" not in doc:
        pytest.skip("this build's /api/status has no usage yet")
    assert doc["containment"]["disk_quota"] is True, doc["containment"]

    def grown():
        disk = (status(alice).get("usage") or {}).get("disk")
        return disk if disk and (disk.get("used") or 0) >= 20 * M else None
    disk = hglib.wait_for(grown, what="disk usage >= 20 MiB")
    assert disk["max"] == LIMIT, disk
    assert disk["used"] < LIMIT, disk


def test_raising_the_limit_lets_more_in(hostgate_factory):
    hg = quota_hg(hostgate_factory, "quotaraise")
    alice = hg.login(*pl.ADMIN)
    res = write(alice, 100)
    assert "Disk quota exceeded" in res["stderr"], res
    small = os.stat(image(hg, "alice")).st_size
    hg.stop("sandboxd")
    hglib.wait_for(lambda: nothing_left(hg), what="unmounted")
    hg.env["HOSTGATE_USER_DISK_MAX"] = "160M"
    hg.start("sandboxd")
    hg.wait_healthy()
    res = write(alice, 60, name="more")
    assert "rc=0" in res["stdout"], res
    assert os.stat(image(hg, "alice")).st_size > small
    # Lowered again below what is there: nothing more goes in.
    hg.stop("sandboxd")
    hglib.wait_for(lambda: nothing_left(hg), what="unmounted")
    hg.env["HOSTGATE_USER_DISK_MAX"] = "64M"
    hg.start("sandboxd")
    hg.wait_healthy()
    res = write(alice, 1, name="one")
    assert "Disk quota exceeded" in res["stderr"], res
    res = pl.run(alice, "ls")
    assert {"big", "more"} <= set(res["stdout"].split()), res


def test_nothing_left_after_the_daemons_stop(hostgate_factory):
    hg = quota_hg(hostgate_factory, "quotastop")
    alice = hg.login(*pl.ADMIN)
    bob = hg.login(*pl.USER)
    pl.run(alice, "echo a > f")
    pl.run(bob, "echo b > f")
    assert len(mounts_under(hg.dir)) == 2 and len(loops_of(hg.dir)) == 2
    for name in hglib.DAEMONS:
        assert hg.stop(name) == 0
    hglib.wait_for(lambda: nothing_left(hg),
                   what="no mount or loop device left")


def test_kill9_of_sandboxd_leaves_no_mount(hostgate_factory):
    hg = quota_hg(hostgate_factory, "quotakill")
    alice = hg.login(*pl.ADMIN)
    pl.run(alice, "echo kept > f; sync")
    assert mounts_under(hg.dir)
    hg.kill("sandboxd")
    hglib.wait_for(lambda: nothing_left(hg),
                   what="the helper unmounting after sandboxd died")
    # A new sandboxd mounts the same image again, once.
    hg.start("sandboxd")
    hg.wait_healthy()
    res = pl.run(alice, "cat f")
    assert res["stdout"] == "kept\n", res
    ws = workspace(hg, "alice")
    assert len([m for m in mounts_under(hg.dir) if m[0] == ws]) == 1


def test_restart_right_after_kill9_mounts_once(hostgate_factory):
    """The old helper may still be unmounting when the new one wants the
    image: the image's lock makes the new one wait, never mount twice."""
    hg = quota_hg(hostgate_factory, "quotarace")
    alice = hg.login(*pl.ADMIN)
    pl.run(alice, "echo kept > f")
    hg.kill("sandboxd")
    hg.start("sandboxd")
    hg.wait_healthy()
    res = pl.run(alice, "cat f")
    assert res["stdout"] == "kept\n", res
    ws = workspace(hg, "alice")
    assert len([m for m in mounts_under(hg.dir) if m[0] == ws]) == 1
    assert len(loops_of(hg.dir)) == 1, loops_of(hg.dir)


def test_hostile_user_name_reaches_no_path(hostgate_factory):
    """sandboxd refuses a spawn for a user name that is no name; nothing
    is made under the state directory or the workspace root. (The helper
    refuses such names too: tests/unit/test_workspace.c.)"""
    hg = quota_hg(hostgate_factory, "quotaname")
    path = os.path.join(hg.run, hglib.SOCK_SANDBOX)
    before = sorted(os.listdir(os.path.join(hg.state, "disks"))) \
        if os.path.isdir(os.path.join(hg.state, "disks")) else []
    ws_before = sorted(os.listdir(pl.workspace_root(hg)))
    for name in ("../../x", "a/b", "..", "x" * 40, "Root"):
        req = {"type": "spawn", "id": 7, "kind": "command",
               "mode": "sandbox", "permission": "workspace-write",
               "user": name, "argv": ["true"]}
        res = hglib.run_as(hglib.account("hostgate-broker"),
                           lambda: hglib.seqpacket_probe(path, [
                               ("send", hglib.hello("brokerd")),
                               ("send", json.dumps(req).encode())],
                               hglib.SLOW, until=lambda m: m.get("id") == 7))
        replies = [m for m in res["messages"] if m.get("id") == 7]
        assert replies and "error" in replies[0], res
    after = sorted(os.listdir(os.path.join(hg.state, "disks"))) \
        if os.path.isdir(os.path.join(hg.state, "disks")) else []
    assert after == before
    assert sorted(os.listdir(pl.workspace_root(hg))) == ws_before
    assert not mounts_under(hg.dir)
    assert hg.alive("sandboxd")


def test_no_quota_without_root(hostgate_factory):
    if hostgate_factory.mode != "user":
        pytest.skip("rootless mode only")
    hg = pl.own(hostgate_factory, "quotauser", HOSTGATE_USER_DISK_MAX="64M")
    alice = hg.login(*pl.ADMIN)
    res = write(alice, 1)
    assert "rc=0" in res["stdout"], res
    assert "disk quota: not enforced: sandboxd does not run as root" \
        in hg.log_text("sandboxd")
    assert not mounts_under(hg.dir)
    doc = status(alice)
    if "containment" in doc:
        assert doc["containment"]["disk_quota"] is False, doc
        assert doc["usage"]["disk"] is None, doc


def test_zero_means_no_quota(hostgate_factory):
    if hostgate_factory.mode != "root":
        pytest.skip("root mode only")
    hg = pl.own(hostgate_factory, "quotazero", HOSTGATE_USER_DISK_MAX="0")
    alice = hg.login(*pl.ADMIN)
    res = write(alice, 1)
    assert "rc=0" in res["stdout"], res
    assert not mounts_under(hg.dir)
    assert not os.path.exists(os.path.join(hg.state, "disks"))
    assert "disk quota: none (HOSTGATE_USER_DISK_MAX is 0)" \
        in hg.log_text("sandboxd")


def helper_pid(hg):
    """The pid of sandboxd's disk helper (its child "sandboxd-disk")."""
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            st = hglib.proc_status(int(d))
        except (FileNotFoundError, ProcessLookupError):
            continue
        if st.get("Name") == "sandboxd-disk" and \
                int(st["PPid"]) == hg.pid("sandboxd"):
            return int(d)
    return None


def test_helper_keeps_only_what_it_needs(hostgate_factory):
    hg = quota_hg(hostgate_factory, "quotacaps")
    pid = hglib.wait_for(lambda: helper_pid(hg), what="the disk helper")
    st = hglib.proc_status(pid)
    # CAP_CHOWN (0), CAP_DAC_OVERRIDE (1), CAP_SYS_ADMIN (21); nothing
    # inheritable or ambient, and the bounding set holds no more either.
    want = (1 << 0) | (1 << 1) | (1 << 21)
    assert int(st["CapEff"], 16) == want, st["CapEff"]
    assert int(st["CapPrm"], 16) == want, st["CapPrm"]
    assert int(st["CapBnd"], 16) == want, st["CapBnd"]
    assert int(st["CapInh"], 16) == 0 and int(st["CapAmb"], 16) == 0, st
    assert st["NoNewPrivs"] == "1" and st["Seccomp"] == "2", st
    assert st["Uid"].split() == ["0"] * 4, st["Uid"]
    # Only its socket to sandboxd, the log and the standard fds are open.
    fds = os.listdir("/proc/%d/fd" % pid)
    socks = [f for f in fds
             if os.readlink("/proc/%d/fd/%s" % (pid, f)).startswith("socket:")]
    assert len(socks) == 1, [os.readlink("/proc/%d/fd/%s" % (pid, f))
                             for f in fds]


def test_a_killed_helper_refuses_spawns_and_its_mounts_are_swept(
        hostgate_factory):
    hg = quota_hg(hostgate_factory, "quotahelper")
    alice = hg.login(*pl.ADMIN)
    bob = hg.login(*pl.USER)
    pl.run(alice, "echo kept > f")
    pid = helper_pid(hg)
    os.kill(pid, signal.SIGKILL)
    # No new workspace without its quota: bob's spawn is refused, with why.
    def refused():
        r = bob.post("/api/run_command", {"command": "true"})
        return r if r.status != 200 else None
    r = hglib.wait_for(refused, what="bob's spawn refused")
    assert "disk quota helper exited" in r.error()["message"], r
    assert not os.path.exists(workspace(hg, "bob")) or \
        workspace(hg, "bob") not in [m[0] for m in mounts_under(hg.dir)]
    # alice's mount outlived its helper; the next sandboxd's helper
    # unmounts it at start and mounts her image again, once.
    assert mounts_under(workspace(hg, "alice"))
    assert hg.stop("sandboxd") == 0
    hg.start("sandboxd")
    hg.wait_healthy()
    res = pl.run(alice, "cat f")
    assert res["stdout"] == "kept\n", res
    ws = workspace(hg, "alice")
    assert len([m for m in mounts_under(hg.dir) if m[0] == ws]) == 1
    assert len(loops_of(hg.dir)) == 1, loops_of(hg.dir)
    assert "left by an earlier helper" in hg.log_text("sandboxd")


def test_turning_quotas_off_gives_plain_workspaces_again(hostgate_factory):
    hg = quota_hg(hostgate_factory, "quotaoff")
    alice = hg.login(*pl.ADMIN)
    pl.run(alice, "echo in-image > f")
    hg.stop("sandboxd")
    hglib.wait_for(lambda: nothing_left(hg), what="unmounted")
    hg.env["HOSTGATE_USER_DISK_MAX"] = "0"
    hg.start("sandboxd")
    hg.wait_healthy()
    res = pl.run(alice, "ls; echo plain > g; id -u; stat -c '%u %a' .")
    uid, owner, perm = res["stdout"].split()
    assert owner == uid and perm == "700", res
    assert not mounts_under(hg.dir)
    assert os.path.exists(image(hg, "alice"))


def test_no_room_for_an_image_says_why_and_leaves_nothing(hostgate_factory):
    """A state directory too full for a new image: the spawn is refused
    with mkfs.btrfs's reason, and no half-made image stays behind."""
    if hostgate_factory.mode != "root":
        pytest.skip("root mode only")
    import subprocess
    hg = hostgate_factory(env=dict(hglib.LIFTED_ENV,
                                   HOSTGATE_USER_DISK_MAX="64M"),
                          name="quotafull", start=False)
    mnt = os.path.join(hg.dir, "statefs")
    os.mkdir(mnt, 0o755)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m,mode=0755",
                    "hg-quota-full", mnt], check=True)
    try:
        hg.state = os.path.join(mnt, "state")
        hg.env["HOSTGATE_STATE_DIR"] = hg.state
        hg.env["HOSTGATE_WORKSPACE_ROOT"] = os.path.join(hg.dir, "ws")
        hg.start_all()
        hg.add_user(*pl.ADMIN, admin=True)
        alice = hg.login(*pl.ADMIN)
        r = alice.post("/api/run_command", {"command": "true"})
        err = pl.assert_error(r, 400)
        assert "mkfs.btrfs failed" in err["message"], err
        assert os.listdir(os.path.join(hg.state, "disks")) == []
        assert not [m for m in mounts_under(hg.dir) if m[1] == "btrfs"]
        hg.cleanup()
    finally:
        subprocess.run(["umount", "-l", mnt], check=False)
