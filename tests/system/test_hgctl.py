"""hgctl: users, exit codes, who may use the control socket."""

import json
import os
import stat
import time

import pytest

import hglib


def test_user_list_json(shared):
    users = shared.hgctl_json("user", "list")
    byname = {u["name"]: u for u in users}
    assert byname[hglib.ADMIN[0]]["role"] == "admin", users
    assert byname[hglib.USER[0]]["role"] == "user", users
    for u in users:
        assert set(u) >= {"name", "role", "created"}, u
        assert "argon2" not in json.dumps(u), "user list shows hashes: %r" % u


def test_user_list_plain(shared):
    r = shared.hgctl_ok("user", "list")
    assert hglib.ADMIN[0] in r.stdout and hglib.USER[0] in r.stdout
    assert "argon2" not in r.stdout


def test_user_add_login_passwd_del(shared):
    name, pw, pw2 = "carol", "carol-password-1", "carol-password-2"
    shared.add_user(name, pw)
    s = shared.login(name, pw)
    assert s.role == "user"

    # Adding her again fails, and leaves her as she was.
    r = shared.hgctl("user", "add", name, "--admin", "--password-stdin",
                     input="other-password-9\n")
    assert r.returncode == 1, r
    assert r.stderr.strip(), "no message on stderr"
    assert shared.login(name, pw).role == "user"

    shared.hgctl_ok("user", "passwd", name, "--password-stdin",
                    input=pw2 + "\n")
    assert shared.post("/api/login", {"username": name,
                                      "password": pw}).status == 401
    shared.login(name, pw2)

    shared.hgctl_ok("user", "del", name)
    assert shared.post("/api/login", {"username": name,
                                      "password": pw2}).status == 401
    # Deleting a user ends her sessions.
    assert s.get("/api/status").status == 401
    assert name not in [u["name"] for u in shared.hgctl_json("user", "list")]


def test_user_del_kills_tokens(shared):
    name, pw = "dave", "dave-password-1"
    shared.add_user(name, pw)
    tok = shared.hgctl_ok("token", "create", name).stdout.strip()
    assert shared.get("/api/status", bearer=tok).status == 200
    shared.hgctl_ok("user", "del", name)
    assert shared.get("/api/status", bearer=tok).status == 401


def test_admin_flag(shared):
    shared.add_user("erin", "erin-password-1", admin=True)
    assert shared.login("erin", "erin-password-1").role == "admin"
    shared.hgctl_ok("user", "del", "erin")


def test_password_stdin_reads_one_line(shared):
    shared.hgctl_ok("user", "add", "frank", "--password-stdin",
                    input="frank-password-1\nsecond-line-ignored\n")
    shared.login("frank", "frank-password-1")
    shared.hgctl_ok("user", "del", "frank")


@pytest.mark.parametrize("args,stdin", [
    (["user", "del", "nosuchuser"], None),
    (["user", "passwd", "nosuchuser", "--password-stdin"], "long-enough-1\n"),
    (["user", "add", "shorty", "--password-stdin"], "short\n"),
    (["user", "add", "bad/name", "--password-stdin"], "long-enough-1\n"),
    (["user", "add", "", "--password-stdin"], "long-enough-1\n"),
    (["token", "create", "nosuchuser"], None),
    (["token", "revoke", "0000000000000000"], None),
])
def test_errors_exit_1(shared, args, stdin):
    r = shared.hgctl(*args, input=stdin)
    assert r.returncode == 1, (args, r)
    assert r.stderr.strip(), "no message on stderr for %r" % args
    assert "shorty" not in [u["name"] for u in shared.hgctl_json("user", "list")]


@pytest.mark.parametrize("args", [
    [], ["frobnicate"], ["user"], ["user", "frob"], ["user", "add"],
    ["user", "del"], ["token", "revoke"], ["token", "create"],
    ["user", "list", "--bogus"],
])
def test_usage_exit_2(shared, args):
    r = shared.hgctl(*args)
    assert r.returncode == 2, (args, r)
    assert r.stderr.strip(), "no usage message for %r" % args


def test_root_may_use_control_socket_in_user_mode(shared):
    if shared.mode != "user" or not hglib.IS_ROOT:
        pytest.skip("user mode as root only")
    r = shared.hgctl("user", "list", "--json", as_user=(0, 0))
    assert r.returncode == 0, r
    assert hglib.ADMIN[0] in r.stdout


def test_broker_user_may_use_control_socket_in_root_mode(shared):
    if shared.mode != "root":
        pytest.skip("root mode only")
    r = shared.hgctl("user", "list", "--json", as_user="hostgate-broker")
    assert r.returncode == 0, r
    assert hglib.ADMIN[0] in r.stdout


def test_other_users_may_not_use_control_socket(shared):
    if not hglib.IS_ROOT:
        pytest.skip("needs root to switch users")
    others = ["hostgate-front", "hostgate-sandbox"]
    if shared.mode == "root":
        others.append(hglib.TEST_USER)
    else:
        others.append("hostgate-broker")
    for who in others:
        t0 = time.monotonic()
        r = shared.hgctl("user", "add", "mallory", "--admin",
                         "--password-stdin", input="mallory-password\n",
                         as_user=who)
        assert r.returncode == 1, (who, r)
        assert r.stderr.strip(), who
        assert time.monotonic() - t0 < 5, "hgctl hung as %s" % who
    assert "mallory" not in [u["name"]
                             for u in shared.hgctl_json("user", "list")]


def test_users_file_mode_and_content(shared):
    path = os.path.join(shared.state, "users.json")
    st = os.stat(path)
    assert stat.S_IMODE(st.st_mode) == 0o600, oct(st.st_mode)
    with open(path) as f:
        text = f.read()
    doc = json.loads(text)
    assert hglib.ADMIN[1] not in text and hglib.USER[1] not in text
    assert "argon2id" in text or "scrypt" in text, "no slow hash in users.json"
    assert hglib.ADMIN[0] in text and doc


def test_session_revoke(shared):
    s = shared.login(*hglib.USER)
    tok = s.post("/api/session/tokens").json()["token"]
    other = shared.login(*hglib.USER)
    before = {x["id"] for x in shared.hgctl_json("session", "list")}
    # The session just made is the one whose id is not in an older listing.
    s2 = shared.login(*hglib.USER)
    new = [x["id"] for x in shared.hgctl_json("session", "list")
           if x["id"] not in before]
    assert len(new) == 1, new
    tok2 = s2.post("/api/session/tokens").json()["token"]
    shared.hgctl_ok("session", "revoke", new[0])
    assert s2.get("/api/status").status == 401
    assert shared.get("/api/status", bearer=tok2).status == 401
    # The others are untouched.
    assert s.get("/api/status").status == 200
    assert other.get("/api/status").status == 200
    assert shared.get("/api/status", bearer=tok).status == 200
    assert new[0] not in [x["id"] for x in shared.hgctl_json("session", "list")]
    r = shared.hgctl("session", "revoke", new[0])
    assert r.returncode == 1 and r.stderr.strip(), r
