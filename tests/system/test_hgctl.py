"""hgctl: users, exit codes, who may use the control socket, help, tables
and JSON, status, config and the environment it runs in."""

import hashlib
import json
import os
import re
import stat
import subprocess
import time

import pytest

import hglib
import policylib as pl


def test_user_list_json(hg):
    users = hg.hgctl_json("user", "list")
    byname = {u["name"]: u for u in users}
    assert byname[hglib.ADMIN[0]]["role"] == "admin", users
    assert byname[hglib.USER[0]]["role"] == "user", users
    for u in users:
        assert set(u) >= {"name", "role", "created"}, u
        assert "argon2" not in json.dumps(u), "user list shows hashes: %r" % u


def test_user_list_plain(hg):
    r = hg.hgctl_ok("user", "list")
    assert hglib.ADMIN[0] in r.stdout and hglib.USER[0] in r.stdout
    assert "argon2" not in r.stdout


def test_user_add_login_passwd_del(hg):
    name, pw, pw2 = "carol", "carol-password-1", "carol-password-2"
    hg.add_user(name, pw)
    s = hg.login(name, pw)
    assert s.role == "user"

    # Adding her again fails, and leaves her as she was.
    r = hg.hgctl("user", "add", name, "--admin", "--password-stdin",
                 input="other-password-9\n")
    assert r.returncode == 1, r
    assert r.stderr.strip(), "no message on stderr"
    assert hg.login(name, pw).role == "user"

    hg.hgctl_ok("user", "passwd", name, "--password-stdin",
                input=pw2 + "\n")
    assert hg.post("/api/login", {"username": name,
                                  "password": pw}).status == 401
    hg.login(name, pw2)

    hg.hgctl_ok("user", "del", name)
    assert hg.post("/api/login", {"username": name,
                                  "password": pw2}).status == 401
    # Deleting a user ends her sessions.
    assert s.get("/api/status").status == 401
    assert name not in [u["name"] for u in hg.hgctl_json("user", "list")]


def test_user_del_kills_tokens(hg):
    name, pw = "dave", "dave-password-1"
    hg.add_user(name, pw)
    tok = hg.hgctl_ok("token", "create", name).stdout.strip()
    assert hg.get("/api/status", bearer=tok).status == 200
    hg.hgctl_ok("user", "del", name)
    assert hg.get("/api/status", bearer=tok).status == 401


def test_admin_flag(hg):
    hg.add_user("erin", "erin-password-1", admin=True)
    assert hg.login("erin", "erin-password-1").role == "admin"
    hg.hgctl_ok("user", "del", "erin")


def test_password_stdin_reads_one_line(hg):
    hg.hgctl_ok("user", "add", "frank", "--password-stdin",
                input="frank-password-1\nsecond-line-ignored\n")
    hg.login("frank", "frank-password-1")
    hg.hgctl_ok("user", "del", "frank")


def test_password_hash_stdin(hg):
    """A given argon2id hash is stored: the password it was made from
    logs in, another does not."""
    hg.hgctl_ok("user", "add", "gina", "--password-hash-stdin",
                input=hglib.HASHES[hglib.USER] + "\n")
    try:
        assert hg.login("gina", hglib.USER[1]).role == "user"
        assert hg.post("/api/login", {"username": "gina",
                                      "password": "gina-password-1"}
                           ).status == 401
    finally:
        hg.hgctl_ok("user", "del", "gina")


@pytest.mark.parametrize("stdin", [
    "gina-password-1\n",
    "$argon2i$v=19$m=19456,t=2,p=1$aGdsaWItYm9iLXNhbHQtMQ$"
    "ATYQoEuYst7BNdDp8g8jvhbO+OZoC5HC9bZu/iKxnd8\n",
    "$argon2id$v=19$m=19456,t=0,p=1$aGdsaWItYm9iLXNhbHQtMQ$"
    "ATYQoEuYst7BNdDp8g8jvhbO+OZoC5HC9bZu/iKxnd8\n",
    "$argon2id$v=19$m=19456,t=2,p=1$aGdsaWItYm9iLXNhbHQtMQ$AT=\n",
    "",
], ids=["password", "argon2i", "t0", "bad-base64", "empty"])
def test_password_hash_stdin_refuses_other_input(hg, stdin):
    """Anything but an argon2id encoded hash: exit 1, a reason, no user."""
    before = hg.hgctl_json("user", "list")
    r = hg.hgctl("user", "add", "gina", "--password-hash-stdin",
                 input=stdin)
    assert r.returncode == 1, r
    assert "argon2id" in r.stderr or "no hash" in r.stderr, r.stderr
    assert hg.hgctl_json("user", "list") == before


def test_password_hash_stdin_and_password_stdin_exclusive(hg):
    r = hg.hgctl("user", "add", "gina", "--password-stdin",
                 "--password-hash-stdin", input="gina-password-1\n")
    assert r.returncode == 2, r
    assert "one of" in r.stderr, r.stderr
    assert "gina" not in [u["name"] for u in hg.hgctl_json("user",
                                                           "list")]


@pytest.mark.parametrize("args,stdin", [
    (["user", "del", "nosuchuser"], None),
    (["user", "passwd", "nosuchuser", "--password-stdin"], "long-enough-1\n"),
    (["user", "add", "shorty", "--password-stdin"], "short\n"),
    (["user", "add", "bad/name", "--password-stdin"], "long-enough-1\n"),
    (["user", "add", "", "--password-stdin"], "long-enough-1\n"),
    (["token", "create", "nosuchuser"], None),
    (["token", "revoke", "0000000000000000"], None),
])
def test_errors_exit_1(hg, args, stdin):
    r = hg.hgctl(*args, input=stdin)
    assert r.returncode == 1, (args, r)
    assert r.stderr.strip(), "no message on stderr for %r" % args
    assert "shorty" not in [u["name"] for u in hg.hgctl_json("user", "list")]


@pytest.mark.parametrize("args", [
    [], ["frobnicate"], ["user"], ["user", "frob"], ["user", "add"],
    ["user", "del"], ["token", "revoke"], ["token", "create"],
    ["user", "list", "--bogus"],
])
def test_usage_exit_2(hg, args):
    r = hg.hgctl(*args)
    assert r.returncode == 2, (args, r)
    assert r.stderr.strip(), "no usage message for %r" % args


def test_root_may_use_control_socket_in_user_mode(hg):
    if hg.mode != "user" or not hglib.IS_ROOT:
        pytest.skip("user mode as root only")
    r = hg.hgctl("user", "list", "--json", as_user=(0, 0))
    assert r.returncode == 0, r
    assert hglib.ADMIN[0] in r.stdout


def test_broker_user_may_use_control_socket_in_root_mode(hg):
    if hg.mode != "root":
        pytest.skip("root mode only")
    r = hg.hgctl("user", "list", "--json", as_user="hostgate-broker")
    assert r.returncode == 0, r
    assert hglib.ADMIN[0] in r.stdout


def test_other_users_may_not_use_control_socket(hg):
    if not hglib.IS_ROOT:
        pytest.skip("needs root to switch users")
    others = ["hostgate-front", "hostgate-sandbox", "hostgate-egress"]
    if hg.mode == "root":
        others.append(hglib.TEST_USER)
    else:
        others.append("hostgate-broker")
    for who in others:
        t0 = time.monotonic()
        r = hg.hgctl("user", "add", "mallory", "--admin",
                     "--password-stdin", input="mallory-password\n",
                     as_user=who)
        assert r.returncode == 1, (who, r)
        assert r.stderr.strip(), who
        # Refused, not given up on: hgctl waits 10 s for an answer
        # (HGCTL_TIMEOUT_MS), and says so when it does.
        assert "timed out" not in r.stderr, (who, r.stderr)
        assert time.monotonic() - t0 < 10, "hgctl waited as %s" % who
    assert "mallory" not in [u["name"]
                             for u in hg.hgctl_json("user", "list")]


def test_users_store_mode_and_content(hg):
    """The users are in store.db (0600): hashes, never a password."""
    path = os.path.join(hg.state, "store.db")
    st = os.stat(path)
    assert stat.S_IMODE(st.st_mode) == 0o600, oct(st.st_mode)
    data = b""
    for p in (path, path + "-wal"):     # not checkpointed yet: the WAL
        if os.path.exists(p):
            with open(p, "rb") as f:
                data += f.read()
    assert hglib.ADMIN[1].encode() not in data
    assert hglib.USER[1].encode() not in data
    assert b"$argon2id$" in data, "no slow hash in store.db"
    assert hglib.ADMIN[0].encode() in data
    assert not os.path.exists(os.path.join(hg.state, "users.json"))


def test_session_revoke(hg):
    s = hg.login(*hglib.USER)
    tok = s.post("/api/session/tokens").json()["token"]
    other = hg.login(*hglib.USER)
    before = {x["id"] for x in hg.hgctl_json("session", "list")}
    # The session just made is the one whose id is not in an older listing.
    s2 = hg.login(*hglib.USER)
    new = [x["id"] for x in hg.hgctl_json("session", "list")
           if x["id"] not in before]
    assert len(new) == 1, new
    tok2 = s2.post("/api/session/tokens").json()["token"]
    hg.hgctl_ok("session", "revoke", new[0])
    assert s2.get("/api/status").status == 401
    assert hg.get("/api/status", bearer=tok2).status == 401
    # The others are untouched.
    assert s.get("/api/status").status == 200
    assert other.get("/api/status").status == 200
    assert hg.get("/api/status", bearer=tok).status == 200
    assert new[0] not in [x["id"] for x in hg.hgctl_json("session", "list")]
    r = hg.hgctl("session", "revoke", new[0])
    assert r.returncode == 1 and r.stderr.strip(), r


# -- help, version, usage -----------------------------------------------------

# Every command, as (group, name); group None for a command on its own.
COMMANDS = [("user", "add"), ("user", "del"), ("user", "passwd"),
            ("user", "list"), ("token", "create"), ("token", "list"),
            ("token", "revoke"), ("session", "list"), ("session", "revoke"),
            ("session", "revert"), ("audit", "verify"), ("audit", "show"),
            ("audit", "archive"),
            (None, "status"), (None, "config")]
GROUPS = ["user", "token", "session", "audit"]
# Every list and show, with --json.
JSON_COMMANDS = [["user", "list"], ["token", "list"], ["session", "list"],
                 ["audit", "show"], ["audit", "verify"], ["status"],
                 ["config"]]


def words(group, name):
    return [group, name] if group else [name]


def bare_hgctl(hg, *args, env=None):
    """hgctl with nothing but env: no HOSTGATE_RUN_DIR, no brokerd needed."""
    e = {"PATH": hg.env["PATH"], "LANG": "C.UTF-8"}
    e.update(env or {})
    return subprocess.run([hg.binary("hgctl")] + list(args), env=e,
                          capture_output=True, text=True, timeout=hglib.SLOW,
                          cwd=hg.dir)


def help_invocations():
    out = [["--help"], ["-h"], ["help"], ["help", "help"]]
    for g in GROUPS:
        out += [["help", g], [g, "--help"], [g, "-h"]]
    for g, n in COMMANDS:
        out += [["help"] + words(g, n), words(g, n) + ["--help"],
                words(g, n) + ["-h"]]
    # Help wins over what else is on the line, and needs no argument.
    out += [["user", "add", "--help", "--admin"],
            ["audit", "show", "--limit", "x", "--help"]]
    return out


@pytest.mark.parametrize("args", help_invocations(), ids=" ".join)
def test_help_on_stdout_exit_0(hg, args):
    # No socket to talk to: help never needs brokerd, nor a password.
    r = bare_hgctl(hg, *args, env={"HOSTGATE_RUN_DIR": "/nonexistent"})
    assert r.returncode == 0, (args, r)
    assert r.stdout.startswith("usage:"), r.stdout
    assert r.stderr == "", r.stderr


def test_help_names_every_command(hg):
    text = bare_hgctl(hg, "--help").stdout
    for g, n in COMMANDS:
        assert "hgctl %s" % " ".join(words(g, n)) in text, (g, n)
    assert "--version" in text and "--json" in text
    # One command's help has its synopsis and what it does.
    text = bare_hgctl(hg, "user", "add", "--help").stdout
    assert text.splitlines()[:2] == [
        "usage: hgctl user add NAME [--admin] [--password-stdin | "
        "--password-hash-stdin]",
        "    [--unix-user UNIXNAME]"], text
    assert "--password-stdin" in text
    text = bare_hgctl(hg, "help", "status").stdout
    assert "degraded" in text and "3" in text, text


@pytest.mark.parametrize("args,hint", [
    ([], "see hgctl help\n"),
    (["frobnicate"], "see hgctl help\n"),
    (["user"], "see hgctl help user\n"),
    (["user", "frob"], "see hgctl help user\n"),
    (["user", "add"], "see hgctl help user add\n"),
    (["user", "list", "--bogus"], "see hgctl help user list\n"),
    (["token", "revoke", "--admin", "x"], "see hgctl help token revoke\n"),
    (["status", "extra"], "see hgctl help status\n"),
    (["audit", "show", "--limit"], "see hgctl help audit show\n"),
    (["audit", "show", "--limit", "-1"], "see hgctl help audit show\n"),
    (["help", "frob"], "see hgctl help\n"),
    (["--json", "user", "list"], "see hgctl help\n"),
])
def test_usage_error_hint(hg, args, hint):
    r = hg.hgctl(*args)
    assert r.returncode == 2, (args, r)
    assert r.stdout == "", r.stdout
    assert r.stderr.startswith("hgctl: "), r.stderr
    assert r.stderr.endswith(hint), r.stderr
    assert "usage: " in r.stderr or "usage:\n" in r.stderr, r.stderr


def project_version():
    with open(os.path.join(hglib.REPO, "common", "common.h")) as f:
        m = re.search(r'#define HG_VERSION "([^"]+)"', f.read())
    assert m, "no HG_VERSION in common/common.h"
    return m.group(1)


def test_version(hg):
    r = bare_hgctl(hg, "--version")
    assert r.returncode == 0, r
    assert r.stdout == "hgctl (hostgate) %s\n" % project_version(), r.stdout
    assert r.stderr == ""


# -- tables and JSON ----------------------------------------------------------

@pytest.mark.parametrize("args,header", [
    (["user", "list"], "NAME\tROLE\tUID\tGID\tUNIX_USER\tCREATED"),
    (["token", "list"], "ID\tUSER\tSESSION\tCREATED"),
    (["session", "list"], "ID\tUSER\tMODE\tDIRECT_UNTIL\tDIRECT_LEFT\t"
                          "CREATED\tLAST_SEEN\tEXPIRES"),
    (["audit", "show"], "TIME\tSEQ\tACTION\tUSER\tRESULT\tREASON\tDETAIL"),
])
def test_tables_have_headers(hg, args, header):
    hg.login(*hglib.USER)
    hg.hgctl_ok("token", "create", hglib.USER[0])
    lines = hg.hgctl_ok(*args).stdout.splitlines()
    assert lines[0] == header, lines
    assert len(lines) > 1, "no rows under the header: %r" % lines
    n = header.count("\t")
    assert all(l.count("\t") == n for l in lines), lines


def test_empty_list_prints_nothing(hostgate_factory):
    # scripts/run.sh creates the first admin when `hgctl user list` prints
    # nothing; --json says [].
    hg = hostgate_factory(name="empty", users=False)
    for args in (["user", "list"], ["token", "list"], ["session", "list"]):
        r = hg.hgctl_ok(*args)
        assert r.stdout == "", (args, r.stdout)
        assert hg.hgctl_json(*args) == [], args


@pytest.mark.parametrize("args", JSON_COMMANDS, ids=" ".join)
def test_json_parses(hg, args):
    if args == ["audit", "show"]:
        # JSON Lines: one record a line.
        assert pl.audit_show(hg), "no records"
        return
    doc = hg.hgctl_json(*args)
    assert isinstance(doc, (list, dict)) and doc is not None, doc


def test_json_lists_are_arrays(hg):
    tok = hg.hgctl_json("token", "create", hglib.USER[0])
    assert set(tok) == {"id", "token", "user"}, tok
    tokens = hg.hgctl_json("token", "list")
    assert tok["id"] in [t["id"] for t in tokens], tokens
    hg.login(*hglib.USER)
    for s in hg.hgctl_json("session", "list"):
        assert set(s) >= {"id", "user", "mode", "expires_at",
                          "remaining_seconds", "created", "last_seen"}, s
    assert pl.audit_show(hg, "--limit", "2")[-1]["seq"] > 0


# -- status -------------------------------------------------------------------

@pytest.fixture(scope="module")
def own(mode):
    """A hostgate of this module's own: direct mode and stopped daemons
    would disturb the shared one."""
    with hglib.running(mode, "hgctl-status") as hg:
        yield hg


def test_status_running(own):
    r = own.hgctl("status", "--json")
    assert r.returncode == 0, r
    doc = json.loads(r.stdout)
    assert doc["state"] == "running" and doc["problems"] == [], doc
    version = project_version()
    for name in ("brokerd", "sandboxd", "frontd"):
        d = doc["daemons"][name]
        assert d["up"] is True and d["version"] == version, (name, d)
        assert isinstance(d["uptime_seconds"], int) and \
            d["uptime_seconds"] >= 0, d
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ",
                            d["started"]), d
    assert doc["daemons"]["brokerd"]["pid"] == own.pid("brokerd")
    # egressd as sandboxd sees it: up, without a version of its own.
    assert doc["daemons"]["egressd"]["up"] is True, doc
    assert doc["daemons"]["egressd"]["reason"] is None, doc
    assert doc["backend"]["name"] == "bwrap" and doc["backend"]["ok"], doc
    assert doc["runtime"] == "host"
    last = pl.audit_show(own, "--limit", "1")[-1]
    assert doc["audit"]["seq"] >= last["seq"] > 0, (doc, last)
    assert re.fullmatch(r"[0-9a-f]{64}", doc["audit"]["hash"]), doc
    text = own.hgctl_ok("status").stdout
    assert text.startswith("state: running\n"), text
    for header in ("DAEMON\tUP\tVERSION\tSTARTED\tUPTIME\tREASON",
                   "BACKEND\tOK\tREASON",
                   "SESSION\tUSER\tDIRECT_UNTIL\tDIRECT_LEFT",
                   "AUDIT_SEQ\tAUDIT_HASH"):
        if header.startswith("SESSION"):
            assert "\nno session in direct mode\n" in text, text
        else:
            assert "\n" + header + "\n" in text, text
    assert "\nsandboxd\tyes\t%s\t" % version in text, text


def test_status_frontd_after_another_frontd_link_went(own):
    """A second link of frontd's uid that tells brokerd of itself and goes
    (test_privsep's jailed probe does) leaves frontd's own link the one
    hgctl status shows: up, its version."""
    gone = "frontd disconnected"
    before = own.log_text("brokerd").count(gone)
    other = hglib.SandboxClient(own, sock=hglib.SOCK_FRONT, role="frontd")
    try:
        other.s.send(json.dumps({"type": "front_info", "version": "probe",
                                 "started": 1}).encode())
        # Answered after the one-way message: brokerd has taken it.
        res, err = other.call("health")
        assert err is None, err
    finally:
        other.close()
    hglib.wait_for(lambda: own.log_text("brokerd").count(gone) > before,
                   what="brokerd saw the other link go")
    d = own.hgctl_json("status")["daemons"]["frontd"]
    assert d["up"] is True and d["version"] == project_version(), d


def test_status_audit_head_is_the_last_record(own):
    # Nothing is audited between these two calls of this test's own.
    doc = own.hgctl_json("status")
    with open(pl.audit_path(own), "rb") as f:
        line = f.read().splitlines()[-1]
    rec = json.loads(line)
    assert doc["audit"]["seq"] == rec["seq"], (doc["audit"], rec)
    # The chain hash: the SHA-256 of the last line, the next one's "prev".
    assert doc["audit"]["hash"] == hashlib.sha256(line).hexdigest(), doc


def test_status_direct_session(own):
    alice = own.login(*hglib.ADMIN)
    granted = pl.grant(alice)
    try:
        doc = own.hgctl_json("status")
        direct = [d for d in doc["direct_sessions"]
                  if d["user"] == hglib.ADMIN[0]]
        assert len(direct) == 1, doc["direct_sessions"]
        d = direct[0]
        assert 0 < d["remaining_seconds"] <= granted["ttl_seconds"], d
        assert pl.iso_secs(d["expires_at"]) > 0, d
        mine = [s for s in own.hgctl_json("session", "list")
                if s["id"] == d["session"]]
        assert mine and mine[0]["mode"] == "direct", mine
        text = own.hgctl_ok("status").stdout
        assert "\n%s\t%s\t%s\t" % (d["session"], hglib.ADMIN[0],
                                   d["expires_at"]) in text, text
        rows = own.hgctl_ok("session", "list").stdout
        assert "\t%s\tdirect\t" % hglib.ADMIN[0] in rows, rows
    finally:
        own.hgctl_ok("session", "revert",
                     [s["id"] for s in own.hgctl_json("session", "list")
                      if s["mode"] == "direct"][0])
    assert own.hgctl_json("status")["direct_sessions"] == []


def test_status_degraded_and_down(hostgate_factory):
    hg = hostgate_factory(name="degraded")
    def status():
        return json.loads(hg.hgctl("status", "--json").stdout)

    # egressd stopped: the +allowlist profiles have no way out.
    hg.stop("egressd")
    hglib.wait_for(lambda: not status()["daemons"]["egressd"]["up"],
                   what="sandboxd to see egressd gone")
    r = hg.hgctl("status", "--json")
    assert r.returncode == 1, r
    doc = json.loads(r.stdout)
    assert doc["state"] == "degraded", doc
    assert any(p.startswith("egressd: ") for p in doc["problems"]), doc
    assert doc["daemons"]["egressd"]["reason"], doc
    r = hg.hgctl("status")
    assert r.returncode == 1 and "state: degraded\nproblem: egressd: " \
        in r.stdout, r
    assert "\negressd\tno\t" in r.stdout, r.stdout

    hg.stop("frontd")
    hglib.wait_for(lambda: not status()["daemons"]["frontd"]["up"],
                   what="brokerd to see frontd gone")
    r = hg.hgctl("status", "--json")
    assert r.returncode == 1, r
    doc = json.loads(r.stdout)
    assert doc["state"] == "degraded", doc
    assert any(p.startswith("frontd: ") for p in doc["problems"]), doc
    assert doc["daemons"]["sandboxd"]["up"] is True, doc
    r = hg.hgctl("status")
    assert r.returncode == 1 and r.stdout.startswith("state: degraded\n") \
        and "\nproblem: frontd: " in r.stdout, r

    hg.stop("sandboxd")
    hglib.wait_for(lambda: not status()["daemons"]["sandboxd"]["up"],
                   what="brokerd to see sandboxd gone")
    r = hg.hgctl("status", "--json")
    doc = json.loads(r.stdout)
    assert r.returncode == 1, r
    assert doc["daemons"]["sandboxd"]["up"] is False, doc
    assert doc["daemons"]["sandboxd"]["reason"], doc
    assert any(p.startswith("sandboxd: ") for p in doc["problems"]), doc

    hg.stop("brokerd")
    sock = os.path.join(hg.run, "broker-control.sock")
    r = hg.hgctl("status")
    assert r.returncode == 3, r
    assert r.stdout.startswith("state: down\n"), r.stdout
    assert "cannot connect to %s" % sock in r.stderr, r.stderr
    assert "(HOSTGATE_RUN_DIR from the environment)" in r.stderr, r.stderr
    assert "is brokerd running?" in r.stderr, r.stderr
    r = hg.hgctl("status", "--json")
    assert r.returncode == 3 and json.loads(r.stdout)["state"] == "down", r

    # config falls back to hgctl's own, and says so.
    r = hg.hgctl("config", "--json")
    assert r.returncode == 0, r
    doc = json.loads(r.stdout)
    assert doc["source"] == "hgctl" and "cannot connect" in doc["error"], doc
    assert doc["config"]["HOSTGATE_RUN_DIR"] == hg.run, doc
    r = hg.hgctl("config")
    assert r.stdout.startswith("# hgctl's own configuration"), r.stdout
    assert "showing hgctl's own configuration" in r.stderr, r.stderr


# -- config -------------------------------------------------------------------

def parse_env_listing(text):
    """NAME -> value of each line; masked ones ("# NAME=...") left out."""
    lines = text.splitlines()
    assert lines[0].startswith("# "), lines[0]
    out = {}
    for line in lines[1:]:
        if line.startswith("# "):
            continue
        name, _, value = line.partition("=")
        out[name] = value
    return out


def test_config_is_brokerds_with_secrets_masked(hostgate_factory):
    hg = hostgate_factory(name="config", tls=True, users=False,
                          env={"HOSTGATE_ADMIN_PASSWORD": "S3cret-pw-42",
                               "HOSTGATE_COMMAND_TIMEOUT_SECONDS": "77"})
    r = hg.hgctl("config", "--json")
    assert r.returncode == 0, r
    assert "S3cret-pw-42" not in r.stdout + r.stderr
    doc = json.loads(r.stdout)
    assert doc["source"] == "brokerd" and doc["error"] is None, doc
    assert doc["pid"] == hg.pid("brokerd"), doc
    c = doc["config"]
    assert c["HOSTGATE_ADMIN_PASSWORD"] == "***", c
    # Paths are not secrets.
    assert c["HOSTGATE_TLS_KEY"] == hg.keyfile, c
    assert c["HOSTGATE_TLS_CERT"] == hg.certfile, c
    # brokerd's value, which hgctl's own environment does not hold.
    assert c["HOSTGATE_COMMAND_TIMEOUT_SECONDS"] == 77, c
    assert c["HOSTGATE_LISTEN"] == hg.env["HOSTGATE_LISTEN"], c

    r = hg.hgctl("config")
    assert r.returncode == 0, r
    assert "S3cret-pw-42" not in r.stdout
    assert r.stdout.startswith("# the configuration of the running brokerd "
                               "(pid %d)" % hg.pid("brokerd")), r.stdout
    listing = parse_env_listing(r.stdout)
    # Masked, and a comment: loaded back, "***" would be the password.
    assert "\n# HOSTGATE_ADMIN_PASSWORD='***'  (masked: not shown)\n" in \
        r.stdout, r.stdout
    assert listing["HOSTGATE_TLS_KEY"] == hg.keyfile, listing
    assert listing["HOSTGATE_COMMAND_TIMEOUT_SECONDS"] == "77", listing
    assert listing["HOSTGATE_SPAWN_MEMORY_MAX"] == "max", listing
    assert re.fullmatch(r"\d+-\d+", listing["HOSTGATE_UID_RANGE"]), listing
    assert set(listing) | {"HOSTGATE_ADMIN_PASSWORD"} == set(c), \
        set(listing) ^ set(c)

    # The listing loads back as an environment file, to the same values.
    saved = os.path.join(hg.dir, "saved.env")
    with open(saved, "w") as f:
        f.write(r.stdout)
    hg.stop("brokerd")
    r2 = bare_hgctl(hg, "config", env={"HOSTGATE_ENV_FILE": saved})
    assert r2.returncode == 0 and r2.stdout.startswith(
        "# hgctl's own configuration"), r2
    again = parse_env_listing(r2.stdout)
    assert again.pop("HOSTGATE_ENV_FILE") == saved, again
    listing.pop("HOSTGATE_ENV_FILE")
    assert again == listing, {k: (listing.get(k), again.get(k))
                              for k in set(listing) | set(again)
                              if listing.get(k) != again.get(k)}


# -- the environment ----------------------------------------------------------

def test_hostgate_mode_in_environment_is_accepted(hg):
    env = {"HOSTGATE_RUN_DIR": hg.run, "HOSTGATE_ENV_FILE": hg.envfile,
           "HOSTGATE_MODE": "sandbox"}
    r = subprocess.run(hg.wrap([hg.binary("hgctl"), "user", "list"],
                               (0, 0) if hg.mode == "root" else None),
                       env=dict(env, PATH=hg.env["PATH"]),
                       capture_output=True, text=True, timeout=hglib.SLOW)
    assert r.returncode == 0, r
    assert r.stderr == "", r.stderr
    assert hglib.ADMIN[0] in r.stdout


def test_unknown_variable_warns_with_suggestion(hg):
    env = {"HOSTGATE_RUN_DIR": hg.run, "HOSTGATE_ENV_FILE": hg.envfile,
           "HOSTGATE_RUN_DRI": "/elsewhere", "PATH": hg.env["PATH"]}
    r = subprocess.run(hg.wrap([hg.binary("hgctl"), "user", "list"],
                               (0, 0) if hg.mode == "root" else None),
                       env=env, capture_output=True, text=True,
                       timeout=hglib.SLOW)
    assert r.returncode == 0, r
    assert "hgctl: WARN: unknown variable HOSTGATE_RUN_DRI in the " \
        "environment, ignored (did you mean HOSTGATE_RUN_DIR?)" in r.stderr, \
        r.stderr
    assert hglib.ADMIN[0] in r.stdout


def test_connection_error_names_the_file_and_line(hostgate_factory):
    hg = hostgate_factory(name="connerr", start=False)
    path = os.path.join(hg.dir, "ops.env")
    nowhere = os.path.join(hg.dir, "no-run")
    with open(path, "w") as f:
        f.write("# ops\n\nHOSTGATE_RUN_DIR=%s\n" % nowhere)
    r = bare_hgctl(hg, "user", "list", env={"HOSTGATE_ENV_FILE": path})
    assert r.returncode == 1, r
    assert r.stderr == "hgctl: cannot connect to %s/broker-control.sock: No " \
        "such file or directory (HOSTGATE_RUN_DIR from %s line 3); is " \
        "brokerd running?\n" % (nowhere, path), r.stderr
    # An unknown name in the file is an error with the file and line.
    with open(path, "w") as f:
        f.write("HOSTGATE_RUN_DIR=%s\nHOSTGATE_RUNDIR=/x\n" % nowhere)
    r = bare_hgctl(hg, "user", "list", env={"HOSTGATE_ENV_FILE": path})
    assert r.returncode == 1, r
    assert r.stderr == "hgctl: %s:2: unknown variable HOSTGATE_RUNDIR (did " \
        "you mean HOSTGATE_RUN_DIR?)\n" % path, r.stderr
