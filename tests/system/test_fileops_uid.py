"""Workspace file operations as sandboxd does them (the "file" message),
with sandboxd alone: the test speaks brokerd's side of sandbox.sock. In root
mode the operation runs as the user's own uid, so a file it writes is the
user's, a file only the user may read is read, one only root may read is
refused, and no path, link or user name reaches another user's workspace.
Rootless, the uid is sandboxd's own. The escapes themselves are tested in
tests/unit/test_fileops.c; here, that they hold behind sandboxd too."""

import json
import os
import re
import signal
import socket
import stat

import pytest

import hglib
import policylib as pl
import sandboxlib as sl

RANGE0 = 1879048192
UIDS = {"alice": RANGE0 + 4242, "bob": RANGE0 + 4243}


@pytest.fixture
def box(mode):
    """sandboxd alone, and brokerd's side of its socket."""
    with hglib.sandboxd_alone(mode, "fileops") as box:
        yield box


def ids(hg, user):
    """The uid and gid brokerd would send (the range's, in root mode)."""
    if hg.mode == "root":
        return {"uid": UIDS[user], "gid": UIDS[user]}
    return {}


def user_uid(hg, user):
    """Who the user's files belong to: their own uid, or sandboxd's."""
    return UIDS[user] if hg.mode == "root" else hg.daemon_uid


def op(hg, fb, user, what, path, data=None):
    """(result, error, text of the fd or None) of one file operation."""
    fields = dict(op=what, user=user, path=path, **ids(hg, user))
    fds = ()
    if data is not None:
        mfd = os.memfd_create("content")
        os.write(mfd, data)
        fields["size"] = len(data)
        fds = (mfd,)
    try:
        res, err, got = fb.call_fds("file", fds=fds, **fields)
    finally:
        for fd in fds:
            os.close(fd)
    text = None
    for fd in got:
        os.lseek(fd, 0, os.SEEK_SET)
        chunks = []
        while True:
            b = os.read(fd, 1 << 16)
            if not b:
                break
            chunks.append(b)
        text = b"".join(chunks)
        os.close(fd)
    return res, err, text


def workspace(hg, user):
    return os.path.join(pl.workspace_root(hg), user)


def test_write_is_the_users(box):
    """A write makes the file and its parents as the user: their uid, the
    spawns' umask (0600 and 0700)."""
    hg, fb = box
    res, err, _ = op(hg, fb, "alice", "write", "docs/new/a.txt", b"hello")
    assert err is None, err
    assert res["created"] is True and res["size"] == 5, res
    ws = workspace(hg, "alice")
    st = os.lstat(os.path.join(ws, "docs/new/a.txt"))
    assert st.st_uid == user_uid(hg, "alice"), st
    assert stat.S_IMODE(st.st_mode) == 0o600, oct(st.st_mode)
    st = os.lstat(os.path.join(ws, "docs/new"))
    assert st.st_uid == user_uid(hg, "alice"), st
    assert stat.S_IMODE(st.st_mode) == 0o700, oct(st.st_mode)
    # replaced, and read back
    res, err, _ = op(hg, fb, "alice", "write", "docs/new/a.txt", b"bye")
    assert err is None and res["created"] is False, (res, err)
    res, err, text = op(hg, fb, "alice", "read", "docs/new/a.txt")
    assert err is None and text == b"bye" and res["size"] == 3, (res, err)
    res, err, text = op(hg, fb, "alice", "list", "docs/new/")
    assert err is None and res["count"] == 1, (res, err)
    listing = json.loads(text)
    assert listing["path"] == "docs/new/" and not listing["truncated"]
    assert [e["name"] for e in listing["entries"]] == ["a.txt"]
    assert listing["entries"][0]["type"] == "file"
    res, err, _ = op(hg, fb, "alice", "mkdir", "docs/more/")
    assert err is None and res["created"] is True, (res, err)
    res, err, _ = op(hg, fb, "alice", "delete", "docs/new")
    assert err["code"] == "conflict", err
    res, err, _ = op(hg, fb, "alice", "delete", "docs/new/a.txt")
    assert err is None and res["deleted"] is True, (res, err)
    assert not os.path.exists(os.path.join(ws, "docs/new/a.txt"))


def test_only_the_user_may_read(box, mode):
    """A file only the user may read is read; one only root may read, and
    another user's workspace, are not (the operation has the user's uid
    and nothing more)."""
    if mode != "root":
        pytest.skip("one uid for all without root")
    hg, fb = box
    # both workspaces made as a spawn would (their image, owner, mode)
    for user in ("alice", "bob"):
        res, err, _ = op(hg, fb, user, "mkdir", "")
        assert err is None, err
    ws, other = workspace(hg, "alice"), workspace(hg, "bob")
    mine = os.path.join(ws, "mine.txt")
    with open(mine, "w") as f:
        f.write("alice only")
    os.chown(mine, UIDS["alice"], UIDS["alice"])
    os.chmod(mine, 0o400)
    rootonly = os.path.join(ws, "root.txt")
    with open(rootonly, "w") as f:
        f.write("root only")
    os.chmod(rootonly, 0o600)
    secret = os.path.join(other, "secret.txt")
    with open(secret, "w") as f:
        f.write("bob's")
    os.chown(secret, UIDS["bob"], UIDS["bob"])
    os.chmod(secret, 0o600)
    os.symlink(secret, os.path.join(ws, "abs"))
    os.symlink("../bob/secret.txt", os.path.join(ws, "rel"))
    os.symlink("..", os.path.join(ws, "up"))

    res, err, text = op(hg, fb, "alice", "read", "mine.txt")
    assert err is None and text == b"alice only", (res, err)
    res, err, text = op(hg, fb, "alice", "read", "root.txt")
    assert err["code"] == "forbidden" and text is None, (res, err)
    for path in ("abs", "rel", "up/bob/secret.txt"):
        res, err, text = op(hg, fb, "alice", "read", path)
        assert err["code"] == "forbidden", (path, res, err)
        assert "leaves the workspace" in err["message"], err
        assert text is None
        res, err, _ = op(hg, fb, "alice", "write", path, b"x")
        assert err["code"] == "forbidden", (path, res, err)
        res, err, _ = op(hg, fb, "alice", "delete", path + "x")
        assert err["code"] in ("forbidden", "not_found"), (path, err)
    res, err, _ = op(hg, fb, "alice", "read", "../bob/secret.txt")
    assert err["code"] == "bad_request", err
    res, err, _ = op(hg, fb, "alice", "list", "up/")
    assert err["code"] == "forbidden", err
    with open(secret) as f:
        assert f.read() == "bob's"
    # bob's own request reads it: his uid
    res, err, text = op(hg, fb, "bob", "read", "secret.txt")
    assert err is None and text == b"bob's", (res, err)
    # a uid of alice's that is not bob's: bob's file is not read
    fields = dict(op="read", user="bob", path="secret.txt",
                  uid=UIDS["alice"], gid=UIDS["alice"])
    res, err, got = fb.call_fds("file", **fields)
    assert err is not None and not got, (res, err)


def test_hostile_entries(box):
    """A fifo does not hang the operation; a link to /etc is refused;
    malformed requests change nothing."""
    hg, fb = box
    res, err, _ = op(hg, fb, "alice", "mkdir", "")
    assert err is None, err
    ws = workspace(hg, "alice")
    os.mkfifo(os.path.join(ws, "fifo"))
    os.symlink("/etc/passwd", os.path.join(ws, "x"))
    os.symlink("/proc/self/root", os.path.join(ws, "root"))
    res, err, text = op(hg, fb, "alice", "read", "fifo")
    assert err["code"] == "conflict" and text is None, (res, err)
    for path in ("x", "root/etc/passwd"):
        res, err, text = op(hg, fb, "alice", "read", path)
        assert err["code"] == "forbidden" and text is None, (path, err)
    res, err, _ = op(hg, fb, "alice", "write", "x", b"pwned")
    assert err["code"] == "forbidden", err
    res, err, text = op(hg, fb, "alice", "list", "")
    assert err is None, err
    types = {e["name"]: e["type"] for e in json.loads(text)["entries"]}
    assert types == {"fifo": "other", "x": "symlink", "root": "symlink"}
    for path in ("/etc/passwd", "a//b", "..", "a/../b"):
        res, err, _ = op(hg, fb, "alice", "read", path)
        assert err["code"] == "bad_request", (path, err)
    res, err, _ = op(hg, fb, "alice", "chmod", "x")
    assert err["code"] == "bad_request", err
    # a write without its content, and a read with one
    res, err, _ = fb.call_fds("file", op="write", user="alice", path="w",
                          size=3, **ids(hg, "alice"))
    assert err["code"] == "bad_request", err
    mfd = os.memfd_create("content")
    try:
        res, err, _ = fb.call_fds("file", fds=(mfd,), op="read", user="alice",
                              path="x", **ids(hg, "alice"))
    finally:
        os.close(mfd)
    assert err["code"] == "bad_request", err
    assert not os.path.exists(os.path.join(ws, "w"))
    with open("/etc/passwd", "rb") as f:
        assert b"pwned" not in f.read()


# The file operations' timeout of test_hung_operation_times_out's sandboxd
# (HOSTGATE_FILE_TIMEOUT_SECONDS): the test waits it out once.
HUNG_TIMEOUT = 5


@pytest.fixture
def hung_box(mode):
    """box, with a file operation timeout of HUNG_TIMEOUT seconds."""
    with hglib.sandboxd_alone(mode, "fileops-hung", env={
            "HOSTGATE_FILE_TIMEOUT_SECONDS": str(HUNG_TIMEOUT)}) as box:
        yield box


def replies(fb, want):
    """The replies to the request ids in want, in the order they come:
    [(id, result, error, fds)] (sandboxd's own requests answered)."""
    out = []
    while len(out) < len(want):
        data, got, _, _ = socket.recv_fds(fb.s, 1 << 20, 8)
        m = hglib.ipc_decode(data)
        if m.get("type") is not None:
            for fd in got:
                os.close(fd)
            if "id" in m:
                fb.s.send(json.dumps({"id": m["id"], "result": {}}).encode())
            continue
        if m.get("id") in want:
            out.append((m["id"], m.get("result"), m.get("error"), got))
        else:
            for fd in got:
                os.close(fd)
    return out


def test_hung_operation_times_out(hung_box):
    """A file operation that cannot go on (here: the user's spawner is
    stopped, as a hung file system would hold it) delays itself alone:
    sandboxd answers other requests meanwhile, and at the timeout
    (HOSTGATE_FILE_TIMEOUT_SECONDS, short here) brokerd gets "unavailable"
    naming the limit; the child that starts late is killed, and the next
    operation works."""
    hg, fb = hung_box
    res, err, _ = op(hg, fb, "alice", "write", "f.txt", b"content")
    assert err is None, err
    spawners = sl.children_of(hg.pid("sandboxd"), "hg-spawner")
    assert len(spawners) == 1, spawners
    fb.s.settimeout(120)
    os.kill(spawners[0], signal.SIGSTOP)
    try:
        rid = fb.send("file", op="read", user="alice", path="f.txt",
                      **ids(hg, "alice"))
        # the loop is free: another request is answered before the
        # hung one's timeout
        hid = fb.send("health")
        (first, hres, herr, _), (_, res, err, got) = replies(fb, {rid, hid})
        assert first == hid, "the hung operation held up health"
        assert herr is None and "backend" in hres, (hres, herr)
        assert not got and err["code"] == "unavailable", (res, err)
        assert "timed out" in err["message"], err
        assert "its limit %d ms" % (HUNG_TIMEOUT * 1000) in err["message"], \
            err
        took = int(re.search(r"after (\d+) ms", err["message"]).group(1))
        assert took >= HUNG_TIMEOUT * 1000, err
    finally:
        os.kill(spawners[0], signal.SIGCONT)
    res, err, text = op(hg, fb, "alice", "read", "f.txt")
    assert err is None and text == b"content", (res, err)
    hglib.wait_for(lambda: "file read: the file operation timed out" in
                   hg.log_text("sandboxd"), what="the timeout logged")


# -- through the HTTP API (frontd, brokerd, sandboxd) ----------------------

@pytest.fixture(scope="module")
def web(mode):
    with pl.module_hostgate(mode, "fileops-http") as h:
        yield h


def api_put(s, path, data):
    return s.request("PUT", "/api/files/" + path, body=data,
                     headers={"Content-Type": "application/octet-stream"})


def api_get(s, path):
    return s.request("GET", "/api/files/" + path)


def test_api_put_is_the_users(web):
    """A PUT makes a file of the user's uid (their own in root mode), the
    owner a command of theirs sees too."""
    hg = web
    alice = hg.login(*pl.ADMIN)
    r = api_put(alice, "put/owned.txt", b"data")
    assert r.status == 201, r
    uid, gid = pl.spawn_uid(hg, "alice")
    st = os.lstat(os.path.join(workspace(hg, "alice"), "put/owned.txt"))
    assert (st.st_uid, st.st_gid) == (uid, gid), st
    assert stat.S_IMODE(st.st_mode) == 0o600, oct(st.st_mode)
    if hg.mode == "root":
        assert uid != hglib.account(hglib.SERVICE_USERS["sandboxd"])[0]
    res = pl.run(alice, "stat -c %u put/owned.txt")
    assert res["exit_code"] == 0 and res["stdout"].strip() == str(uid), res


def test_api_reads_as_the_user(web):
    """Through the API, a file only its user may read is read for them;
    one only root may read is refused; another user's workspace is out of
    reach by every path a user can give."""
    hg = web
    if hg.mode != "root":
        pytest.skip("one uid for all without root")
    alice, bob = hg.login(*pl.ADMIN), hg.login(*pl.USER)
    assert api_put(alice, "a.txt", b"a").status in (200, 201)
    assert api_put(bob, "b.txt", b"b").status in (200, 201)
    ws, other = workspace(hg, "alice"), workspace(hg, "bob")
    auid, agid = pl.spawn_uid(hg, "alice")
    mine = os.path.join(ws, "only-alice.txt")
    with open(mine, "w") as f:
        f.write("for alice's eyes")
    os.chown(mine, auid, agid)
    os.chmod(mine, 0o400)
    # sandboxd's own uid could not have read it: the read is alice's
    sbx = hglib.account(hglib.SERVICE_USERS["sandboxd"])
    assert hglib.run_as(sbx, lambda: os.access(mine, os.R_OK)) is False
    r = api_get(alice, "only-alice.txt")
    assert r.status == 200 and r.body == b"for alice's eyes", r
    rootonly = os.path.join(ws, "root-only.txt")
    with open(rootonly, "w") as f:
        f.write("root's")
    os.chmod(rootonly, 0o600)
    pl.assert_error(api_get(alice, "root-only.txt"), 403, "forbidden")
    # bob, by links planted in his workspace and by relative paths
    os.symlink(mine, os.path.join(other, "abs"))
    os.symlink("../alice/only-alice.txt", os.path.join(other, "rel"))
    os.symlink("..", os.path.join(other, "up"))
    for path in ("abs", "rel", "up/alice/only-alice.txt"):
        pl.assert_error(api_get(bob, path), 403, "forbidden",
                        "leaves the workspace")
        pl.assert_error(api_put(bob, path, b"bob was here"), 403,
                        "forbidden")
    pl.assert_error(api_get(bob, "up/"), 403, "forbidden")
    assert api_get(bob, "..%2Falice%2Fonly-alice.txt").status == 400
    with open(mine) as f:
        assert f.read() == "for alice's eyes"
    assert api_get(bob, "only-alice.txt").status == 404
