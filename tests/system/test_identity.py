"""Each user's identity and what brokerd tells sandboxd of it: a uid and
gid per user from HOSTGATE_UID_RANGE (or a mapped Unix account), kept in
store.db across restarts and given to the users of an earlier release's
users.json as they are taken in; the uid, gid and a direct grant's
deadline with every spawn; a "grant" at
each grant, renewal and link-up; a grant ended by logout; a deleted
user's processes killed; and the limits, usage and containment of
/api/status, the admin sessions view and hgctl status."""

import json
import os
import pwd
import re
import sqlite3

import hglib
import policylib as pl
import sandboxlib as sl

RANGE = (1879050000, 1879050009)
DEFAULT_RANGE = (1879048192, 1879113727)


def users_by_name(hg):
    return {u["name"]: u for u in hg.hgctl_json("user", "list")}


def stored_users(hg):
    """store.db's users rows, brokerd stopped (it holds the file)."""
    db = sqlite3.connect(os.path.join(hg.state, "store.db"))
    try:
        rows = db.execute("SELECT name, admin, hash, created FROM users "
                          "ORDER BY name").fetchall()
    finally:
        db.close()
    return rows


def start_brokerd(hg):
    hg.start("brokerd")
    hglib.wait_for(lambda: not hg.alive("brokerd") or hg.healthy(),
                   what="brokerd back")
    assert hg.alive("brokerd"), hg.log_text("brokerd")[-2000:]


def lines_of(hg, name, pattern):
    return re.findall(pattern, hg.log_text(name))


# -- uids ---------------------------------------------------------------------

def test_uids_distinct_in_range_and_kept(hostgate_factory):
    """The lowest free uid of the range for each user, gid == uid; the
    same after a brokerd restart; a deleted user's uid is free again."""
    hg = pl.own(hostgate_factory, "ids", carol=True,
                HOSTGATE_UID_RANGE="%d-%d" % RANGE)
    users = users_by_name(hg)
    assert [users[n]["uid"] for n in ("alice", "bob", "carol")] == \
        [RANGE[0], RANGE[0] + 1, RANGE[0] + 2], users
    for u in users.values():
        assert u["gid"] == u["uid"] and u["unix_user"] is None, u
    rec = pl.audit_records(hg, action="user_added", user="bob")[-1]
    assert rec["detail"]["uid"] == RANGE[0] + 1, rec

    assert hg.stop("brokerd") == 0
    db = sqlite3.connect(os.path.join(hg.state, "store.db"))
    try:
        stored = dict((n, (uid, gid)) for n, uid, gid in db.execute(
            "SELECT name, uid, gid FROM users"))
    finally:
        db.close()
    assert stored == {n: (u["uid"], u["gid"]) for n, u in users.items()}
    start_brokerd(hg)
    assert users_by_name(hg) == users

    hg.hgctl_ok("user", "del", "bob")
    hg.add_user("dave", "dave-password-1")
    assert users_by_name(hg)["dave"]["uid"] == RANGE[0] + 1
    text = hg.hgctl_ok("user", "list").stdout.splitlines()
    assert text[0] == "NAME\tROLE\tUID\tGID\tUNIX_USER\tCREATED", text
    assert any(l.startswith("dave\tuser\t%d\t%d\t-\t" % ((RANGE[0] + 1,) * 2))
               for l in text), text


def test_users_json_of_earlier_release_migrated_once(hostgate_factory):
    """A state directory of the previous release (users.json, written
    before uids, no users in store.db): brokerd takes the users into
    store.db at start, with uids, renames the file users.json.migrated, and
    the same passwords log in; a second start does not take it in again."""
    hg = pl.own(hostgate_factory, "oldids")
    assert hg.stop("brokerd") == 0
    rows = stored_users(hg)
    doc = {"version": 1, "users": [
        {"name": n, "role": "admin" if a else "user", "hash": h,
         "created": c} for n, a, h, c in rows]}
    st = os.stat(os.path.join(hg.state, "store.db"))
    for name in ("store.db", "store.db-wal"):
        if os.path.exists(os.path.join(hg.state, name)):
            os.unlink(os.path.join(hg.state, name))
    path = os.path.join(hg.state, "users.json")
    with open(path, "w") as f:
        json.dump(doc, f)
    os.chown(path, st.st_uid, st.st_gid)
    os.chmod(path, 0o600)
    start_brokerd(hg)
    assert not os.path.exists(path)
    assert os.path.exists(path + ".migrated")
    users = users_by_name(hg)
    uids = sorted(u["uid"] for u in users.values())
    assert uids == [DEFAULT_RANGE[0], DEFAULT_RANGE[0] + 1], users
    assert all(u["gid"] == u["uid"] for u in users.values()), users
    hg.login(*pl.USER)
    hg.login(*pl.ADMIN)
    assert "users moved to store.db" in hg.log_text("brokerd")

    # Changed in the store; the old file back (a crash before the rename):
    # not read again, renamed unread.
    hg.hgctl_ok("user", "passwd", pl.USER[0], "--password-stdin",
                input="new-bob-password\n")
    assert hg.stop("brokerd") == 0
    os.rename(path + ".migrated", path)
    start_brokerd(hg)
    assert not os.path.exists(path)
    assert "already in the store, renaming it" in hg.log_text("brokerd")
    hg.login(pl.USER[0], "new-bob-password")
    assert users_by_name(hg) == users


def test_unix_user_mapping(hostgate_factory):
    """--unix-user takes an existing account's uid and primary gid;
    refused (with the reason, nothing stored) for root, a daemon's user,
    an account another user is mapped to, and an unknown name."""
    hg = pl.own(hostgate_factory, "map")
    nobody = hglib.account("nobody")

    def add(name, unix):
        return hg.hgctl("user", "add", name, "--password-stdin",
                        "--unix-user", unix, input="some-password-1\n")

    r = add("mapped", "nobody")
    assert r.returncode == 0, r.stderr
    assert "uid %d" % nobody[0] in r.stdout, r.stdout
    u = users_by_name(hg)["mapped"]
    assert (u["uid"], u["gid"], u["unix_user"]) == \
        (nobody[0], nobody[1], "nobody"), u
    rec = pl.audit_records(hg, action="user_added", user="mapped")[-1]
    assert rec["detail"]["unix_user"] == "nobody", rec

    daemon = hglib.SERVICE_USERS["sandboxd"]
    for name, unix, why in (("again", "nobody", "already user mapped's"),
                            ("rooted", "root", "root"),
                            ("daemon", daemon,
                             "sandboxd's service user " + daemon),
                            ("ghost", "no-such-account", "no Unix user")):
        r = add(name, unix)
        assert r.returncode == 1, (name, r)
        assert why in r.stderr, (name, r.stderr)
    if hg.mode == "user":
        # Here the daemons all run as the test user: not a user's either.
        r = add("self", hglib.TEST_USER)
        assert r.returncode == 1 and "brokerd's own" in r.stderr, r.stderr
    assert set(users_by_name(hg)) == {"alice", "bob", "mapped"}

    assert hg.stop("brokerd") == 0
    start_brokerd(hg)
    assert users_by_name(hg)["mapped"]["unix_user"] == "nobody"
    hg.login("mapped", "some-password-1")


# -- what brokerd sends sandboxd ------------------------------------------------

SPAWN_LINE = (r"command for %s: uid (\d+) gid (\d+), (sandbox|direct), "
              r"deadline_ms (\d+)")
GRANT_LINE = r"session (\w{8}) of alice: grant until (\d+) told to sandboxd"
# sandboxd's, once it holds the deadline.
HELD_LINE = r"direct grant of session (\w{8}) ends at (\d+)"


def test_spawn_carries_ids_and_deadline(hostgate_factory):
    """Every spawn has the user's uid and gid; a direct one the grant's
    absolute end (the deadline the API shows), renewed with the grant."""
    hg = pl.own(hostgate_factory, "spawnids",
                HOST_EXECUTION_DIRECT_TTL_SECONDS=600)
    users = users_by_name(hg)
    bob = hg.login(*pl.USER)
    pl.run(bob, "true")
    got = lines_of(hg, "brokerd", SPAWN_LINE % "bob")
    assert got[-1] == (str(users["bob"]["uid"]), str(users["bob"]["gid"]),
                       "sandbox", "0"), got

    alice = hg.login(*pl.ADMIN)
    g = pl.grant(alice)
    assert pl.run(alice, "true")["mode"] == "direct"
    uid, gid, mode, deadline = lines_of(hg, "brokerd",
                                        SPAWN_LINE % "alice")[-1]
    assert (int(uid), int(gid), mode) == \
        (users["alice"]["uid"], users["alice"]["gid"], "direct")
    assert int(deadline) // 1000 == pl.iso_secs(g["expires_at"]), \
        (deadline, g)
    grants = lines_of(hg, "brokerd", GRANT_LINE)
    assert grants and grants[-1][1] == deadline, grants
    hglib.wait_for(lambda: grants[-1] in lines_of(hg, "sandboxd", HELD_LINE),
                   what="sandboxd holding the deadline")

    # A renewal tells sandboxd the later deadline.
    hglib.wait_for(lambda: pl.mode_of(alice)["remaining_seconds"] < 600,
                   what="a second of the grant to pass")
    again = pl.grant(alice)
    later = lines_of(hg, "brokerd", GRANT_LINE)
    assert len(later) == len(grants) + 1, later
    assert int(later[-1][1]) > int(deadline), (later, deadline)
    assert int(later[-1][1]) // 1000 == pl.iso_secs(again["expires_at"])
    hglib.wait_for(lambda: later[-1] in lines_of(hg, "sandboxd", HELD_LINE),
                   what="sandboxd holding the renewed deadline")


def test_grants_sent_again_when_sandboxd_comes_back(hostgate_factory):
    """A restarted sandboxd hears of every live grant at link-up."""
    hg = pl.own(hostgate_factory, "relink",
                HOST_EXECUTION_DIRECT_TTL_SECONDS=600)
    alice = hg.login(*pl.ADMIN)
    pl.grant(alice)
    n = len(lines_of(hg, "brokerd", GRANT_LINE))
    hg.stop("sandboxd")
    held = len(lines_of(hg, "sandboxd", HELD_LINE))
    hg.start("sandboxd")
    hg.wait_healthy()
    hglib.wait_for(lambda: len(lines_of(hg, "brokerd", GRANT_LINE)) > n,
                   what="the grant sent again")
    hglib.wait_for(lambda: len(lines_of(hg, "sandboxd", HELD_LINE)) > held,
                   what="the new sandboxd holding the deadline")


def test_keep_on_expiry_sends_no_deadline(hostgate_factory):
    """With HOSTGATE_DIRECT_ON_EXPIRY=keep a grant's end kills nothing:
    no deadline goes with a spawn, no grant to sandboxd."""
    hg = pl.own(hostgate_factory, "keepids",
                HOSTGATE_DIRECT_ON_EXPIRY="keep")
    alice = hg.login(*pl.ADMIN)
    pl.grant(alice)
    assert pl.run(alice, "true")["mode"] == "direct"
    assert lines_of(hg, "brokerd", SPAWN_LINE % "alice")[-1][2:] == \
        ("direct", "0")
    assert not lines_of(hg, "brokerd", GRANT_LINE)


def test_logout_ends_the_grant_and_its_processes(hostgate_factory):
    """Logging out of a session in direct mode ends its grant: audited
    with reason logout, its direct terminal killed."""
    hg = pl.own(hostgate_factory, "logout",
                HOST_EXECUTION_DIRECT_TTL_SECONDS=600)
    alice = hg.login(*pl.ADMIN)
    pl.grant(alice)
    before = set(sl.children_of(hg.pid("sandboxd"), "bash"))
    term = alice.post("/api/terminals", {})
    assert term.status == 201 and term.json()["mode"] == "direct", term
    tid = term.json()["id"]
    hglib.wait_for(lambda: set(sl.children_of(hg.pid("sandboxd"), "bash"))
                   - before, what="the direct terminal's shell")
    r = alice.post("/api/logout")
    assert r.status == 200, r
    rec = pl.wait_audit(hg, action="mode_reverted", reason="logout")
    assert rec[-1]["detail"]["processes"] == "terminated", rec
    pl.wait_audit(hg, action="terminal_exited", detail_id=tid)
    hglib.wait_for(lambda: not (set(sl.children_of(hg.pid("sandboxd"),
                                                    "bash")) - before),
                   what="the direct shell's end")


def test_user_delete_kills_their_processes(hostgate_factory):
    """hgctl user del: sandboxd hears of it (kill_user) and kills what is
    left of the user; the record says so."""
    hg = pl.own(hostgate_factory, "userdel")
    hg.hgctl_ok("user", "del", "bob")
    rec = pl.audit_records(hg, action="user_deleted", user="bob")[-1]
    assert rec["detail"]["processes"] == "terminated", rec
    hglib.wait_for(lambda: lines_of(hg, "sandboxd", r"user bob deleted: "
                                    r"killed \d+ spawns"),
                   what="sandboxd killing bob's processes")


# -- limits, usage, containment -------------------------------------------------

LIMIT_KEYS = {"memory_max", "swap_max", "pids_max", "cpu_weight",
              "cpu_max_percent", "io_weight", "disk_max",
              "spawn_memory_max", "spawn_pids_max"}


def check_usage(doc):
    """usage is sandboxd's object, or null with a reason."""
    if doc["usage"] is None:
        assert isinstance(doc["usage_reason"], str) and doc["usage_reason"]
        return
    u = doc["usage"]
    # null: unknown here, or no limit (sandboxd says which in containment).
    for k in ("memory", "pids"):
        for v in (u[k]["current"], u[k]["max"]):
            assert v is None or isinstance(v, int), u
    assert u["disk"] is None or isinstance(u["disk"]["used"], int), u
    assert u["oom_kills"] is None or isinstance(u["oom_kills"], int), u
    assert doc["usage_reason"] is None


def test_status_limits_usage_containment(hostgate_factory):
    hg = pl.own(hostgate_factory, "usage", HOSTGATE_USER_MEMORY_MAX="2G",
                HOSTGATE_USER_PIDS_MAX=300, HOSTGATE_USER_DISK_MAX=0)
    bob = hg.login(*pl.USER)
    st = bob.get("/api/status").json()
    assert set(st["limits"]) == LIMIT_KEYS, st["limits"]
    assert st["limits"]["memory_max"] == 2 << 30
    assert st["limits"]["pids_max"] == 300
    assert st["limits"]["disk_max"] is None
    assert st["limits"]["cpu_max_percent"] is None
    assert isinstance(st["limits"]["cpu_weight"], int)
    assert st["uid"] == users_by_name(hg)["bob"]["uid"]
    assert isinstance(st["containment"], dict) and st["containment"]
    check_usage(st)

    alice = hg.login(*pl.ADMIN)
    r = alice.get("/api/admin/sessions")
    assert r.status == 200, r
    doc = r.json()
    assert set(doc["limits"]) == LIMIT_KEYS
    assert {s["user"] for s in doc["sessions"]} == {"alice", "bob"}
    for s in doc["sessions"]:
        check_usage(s)

    st = hg.hgctl_json("status")
    assert isinstance(st["containment"], dict) and st["containment"], st
    assert set(st["limits"]) == LIMIT_KEYS
    assert "CONTAINMENT\tENFORCED_BY\tREASON" in \
        hg.hgctl("status").stdout.splitlines()

    # Without sandboxd: still an answer, saying why there is no usage.
    hg.stop("sandboxd")
    r = bob.get("/api/status")
    assert r.status == 200, r
    st = r.json()
    assert st["usage"] is None and "unreachable" in st["usage_reason"], st
    assert "unreachable" in st["containment"]["reason"], st


# -- out of memory --------------------------------------------------------------

HOG = "python3 -c \"x = b'x' * (512 << 20); print(len(x))\""


def test_oom_reported_in_results_records_and_events(hostgate_factory):
    """A command or a terminal that its user's memory limit stops says so:
    the HTTP result's and the spawn_end record's oom, the terminal's exit
    event and terminal_exited record with reason oom. Where sandboxd
    cannot enforce memory (rootless), oom is never true."""
    hg = pl.own(hostgate_factory, "oom", HOSTGATE_USER_MEMORY_MAX="96M",
                HOSTGATE_USER_SWAP_MAX=0)
    bob = hg.login(*pl.USER)
    st = bob.get("/api/status").json()
    enforced = isinstance(st["containment"].get("memory"), str)
    r = bob.post("/api/run_command", {"command": "true",
                                      "timeout": int(hglib.SLOW)})
    assert r.status == 200 and r.json()["oom"] in (False, None), r
    r = bob.post("/api/run_command", {"command": HOG,
                                      "timeout": int(hglib.SLOW)})
    assert r.status == 200, r
    res = r.json()
    end = pl.wait_audit(hg, action="spawn_end", user="bob")[-1]
    if not enforced:
        assert res["oom"] in (False, None) and end["detail"]["oom"] in \
            (False, None), (res, end)
        return
    assert res["oom"] is True, res
    assert end["detail"]["oom"] is True, end
    assert "out of memory" in end["reason"], end

    es = pl.EventStream(hg, cookie=bob.cookie)
    try:
        t = sl.Terminal(bob)
        ws = t.attach()
        ws.send_binary(("exec %s\n" % HOG).encode())
        ev = es.wait("terminal_exited",
                     pred=lambda e: e["data"]["id"] == t.id)
        assert ev["data"]["reason"] == "oom", ev
        rec = pl.wait_audit(hg, action="terminal_exited", detail_id=t.id)
        assert rec[-1]["reason"] == "oom", rec
    finally:
        es.close()
    # Another user's commands go on.
    alice = hg.login(*pl.ADMIN)
    assert pl.run(alice, "echo ok")["stdout"] == "ok\n"


# -- names: /etc/passwd inside the sandbox --------------------------------------

NAMES = r'''d=$(mktemp -d -p "$HOME" gitXXXXXX)
whoami; id -un; id -gn; echo "$HOME $USER $LOGNAME"
cd "$d" && git init -q && git commit -q --allow-empty -m x &&
git --no-pager log -1 --format='%an <%ae>'; echo "git $?"; rm -rf "$d"'''


def sandboxd_uid(hg):
    if hg.mode == "root":
        return pwd.getpwnam(hglib.SERVICE_USERS["sandboxd"]).pw_uid
    return hg.daemon_uid


def test_sandbox_names_its_user(shared):
    """Inside the sandbox the user's uid and gid have the user's name
    (whoami, id, the prompt), HOME, USER and LOGNAME agree with it, and
    git commits in a fresh repository with the default identity that
    /etc/passwd and /etc/mailname give; the files are sandboxd's, which
    the user cannot write."""
    bob = shared.login(*pl.USER)
    home = os.path.join(shared.state, "workspaces", "bob")
    for channel in ("command", "terminal"):
        r = sl.run_shell(bob, channel, NAMES)
        assert r.exit == 0, r
        lines = r.output.replace("\r", "").splitlines()
        assert lines[:4] == ["bob", "bob", "bob",
                             "%s bob bob" % home], r
        assert lines[-2:] == ["bob <bob@hostgate>", "git 0"], r

    # The prompt Debian's bash.bashrc sets names the user, not "I have
    # no name!".
    with sl.terminal(bob, attach=False) as t:
        t.attach(ready=False)
        _, data = t.ws.read_until(rb"@hostgate:~\$ ")
        # The prompt's line without bash's terminal controls.
        line = re.sub(rb"\x1b\[[0-9;?]*[A-Za-z]", b"", data).split(b"\n")[-1]
        assert line == b"bob@hostgate:~$ ", data

    etc = os.path.join(shared.state, "workspaces", ".etc")
    st = os.stat(etc)
    assert st.st_mode & 0o7777 == 0o711, oct(st.st_mode)
    for name in ("bob.passwd", "bob.group", "mailname"):
        f = os.stat(os.path.join(etc, name))
        assert f.st_mode & 0o7777 == 0o644, (name, oct(f.st_mode))
        assert f.st_uid == st.st_uid == sandboxd_uid(shared), \
            (name, f.st_uid)
    # Written whole: root, the user, nobody, and nothing of the host's.
    uid = users_by_name(shared)["bob"]["uid"] if shared.mode == "root" \
        else sandboxd_uid(shared)
    with open(os.path.join(etc, "bob.passwd")) as f:
        text = f.read()
    assert [l.split(":")[0] for l in text.splitlines()] == \
        ["root", "bob", "nobody"], text
    assert "\nbob:x:%d:" % uid in text, text


def test_direct_names_its_user(shared):
    """A direct spawn gets HOME, USER and LOGNAME of its user too; under
    one uid for everything (user mode) the hider binds the user's
    /etc/passwd and /etc/group, read-only, so whoami names the user there
    as in the sandbox. In root mode a mapped account has the host's own
    entry, and a uid of the range none (docs/sandbox.md, Identity)."""
    alice = shared.login(*pl.ADMIN)
    pl.grant(alice)
    try:
        r = pl.run(alice, 'echo "$HOME $USER $LOGNAME"')
        assert (r["mode"], r["exit_code"]) == ("direct", 0), r
        assert r["stdout"].splitlines() == ["%s alice alice" % os.path.join(
            shared.state, "workspaces", "alice")], r
        if shared.mode == "user":
            r = pl.run(alice, "{ whoami; id -gn; echo x >> /etc/passwd; "
                       "echo $?; } 2>&1")
            lines = r["stdout"].splitlines()
            assert (r["mode"], lines[:2]) == ("direct", ["alice", "alice"]), r
            assert "Read-only file system" in r["stdout"] and \
                lines[-1] == "1", r
    finally:
        pl.set_mode(alice, "sandbox")
