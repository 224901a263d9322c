"""Egress by allowlist, brokerd's and hgctl's side: the allowlist profiles
(workspace-write+allowlist, read-only+allowlist) chosen by any user even
under HOSTGATE_NETWORK_ADMIN_ONLY=1; an admin's additions per user
(users.json) and per login session (store.db) through hgctl egress
show/allow/revoke, checked (a bad pattern changes nothing), audited
(egress_allow), kept across a restart of brokerd and gone with their user
or session; /api/status's egress object and the agent prompt. A second
hostgate whose sandboxd the test plays (brokerd's end of sandbox.sock is
brokerd's own) shows what brokerd tells sandboxd: the additions a spawn
carries, egress_update on each change, the proxy's state from health,
and turns egressd's egress_log into egress and egress_summary records."""

import json
import os
import socket
import threading
import time

import pytest

import hglib
import policylib as pl

GLOBAL = ["pypi.org", "*.pythonhosted.org"]
ENV = {
    "HOSTGATE_EGRESS_ALLOW": "pypi.org, *.pythonhosted.org",
    "HOSTGATE_EGRESS_DENY": "evil.example",
    "HOSTGATE_EGRESS_PORTS": "443,80",
    "HOSTGATE_NETWORK_ADMIN_ONLY": "1",
}
ALLOWLIST = ("workspace-write+allowlist", "read-only+allowlist")


# The configuration of `hg` (conftest.py): pooled per mode.
HOSTGATE = pl.config(carol=True, **ENV)


def show(hg):
    return hg.hgctl_json("egress", "show")


def set_profile(session, profile):
    r = session.post("/api/permission", {"permission": profile})
    assert r.status == 200 and r.json()["permission"] == profile, r
    return r


def egress_records(hg, action="egress_allow"):
    return [json.loads(line) for line in hg.hgctl_ok(
        "audit", "show", "--action", action, "--limit", "0",
        "--json").stdout.splitlines() if line.strip()]


def test_profiles_not_reserved_to_admins(hg):
    bob = hg.login(*pl.USER)
    for profile in ALLOWLIST:
        set_profile(bob, profile)
        r = bob.get("/api/permission")
        assert r.status == 200 and r.json()["permission"] == profile, r
    # The wide profile stays an admin's under the same setting.
    r = bob.post("/api/permission", {"permission": "workspace-write+network"})
    assert r.status == 403, r
    r = bob.post("/api/permission", {"permission": "allowlist"})
    assert r.status == 400, r
    for profile in ALLOWLIST:
        assert profile in r.error()["message"], r
    assert bob.get("/api/permission").json()["permission"] == ALLOWLIST[-1]
    set_profile(bob, "workspace-write")


def test_read_only_allowlist_keeps_the_workspace_read_only(hg):
    bob = hg.login(*pl.USER)
    set_profile(bob, "read-only+allowlist")
    r = bob.request("PUT", "/api/files/egress-ro.txt", body="x")
    assert r.status == 403 and "read-only" in r.error()["message"], r


def test_allow_revoke_show(hg):
    assert show(hg) == {"allow": GLOBAL, "deny": ["evil.example"],
                        "ports": [443, 80],
                        "deny_nets": show(hg)["deny_nets"],
                        "allow_nets": [], "users": {}, "sessions": {}}
    assert show(hg)["deny_nets"], "the special ranges are denied by default"
    out = hg.hgctl_ok("egress", "allow", "--user", "bob", "Example.COM",
                      "*.docs.example.org", "example.com").stdout
    assert "example.com, *.docs.example.org" in out, out
    assert show(hg)["users"] == {"bob": ["example.com", "*.docs.example.org"]}
    hg.hgctl_ok("egress", "allow", "--user", "bob", "api.example.net")
    hg.hgctl_ok("egress", "revoke", "--user", "bob", "example.com")
    assert show(hg)["users"]["bob"] == ["*.docs.example.org",
                                        "api.example.net"]
    text = hg.hgctl_ok("egress", "show").stdout
    assert "pypi.org, *.pythonhosted.org" in text, text
    assert "user\tbob\t*.docs.example.org, api.example.net" in text, text
    hg.hgctl_ok("egress", "revoke", "--user", "bob", "*.docs.example.org",
                "api.example.net")
    assert show(hg)["users"] == {}, "an empty list is no additions"
    assert "no additions" in hg.hgctl_ok("egress", "show").stdout


@pytest.mark.parametrize("bad", [
    "*", "*.", "http://example.com", "example.com/path", "exa mple.com",
    "a..b", "a-.example", "127.0.0.1", "[::1]", "*example.com",
    "x.*.example.com", "a" * 64 + ".example",
])
def test_bad_pattern_changes_nothing(hg, bad):
    hg.hgctl_ok("egress", "allow", "--user", "carol", "good.example")
    before = show(hg)
    r = hg.hgctl("egress", "allow", "--user", "carol", "other.example", bad)
    assert r.returncode == 1, r
    assert "is not a domain pattern" in r.stderr and \
        "nothing was changed" in r.stderr, r.stderr
    assert show(hg) == before
    hg.hgctl_ok("egress", "revoke", "--user", "carol", "good.example")


def test_refusals(hg):
    r = hg.hgctl("egress", "allow", "--user", "nobody", "a.example")
    assert r.returncode == 1 and "no such user nobody" in r.stderr, r
    r = hg.hgctl("egress", "allow", "--session", "0" * 32, "a.example")
    assert r.returncode == 1 and "no live login session" in r.stderr, r
    r = hg.hgctl("egress", "revoke", "--user", "bob", "never.example")
    assert r.returncode == 1 and "not among" in r.stderr, r
    r = hg.hgctl("egress", "allow", "a.example")
    assert r.returncode == 2 and "--user NAME or --session ID" in r.stderr, r
    r = hg.hgctl("egress", "allow", "--user", "bob")
    assert r.returncode == 2 and "missing argument" in r.stderr, r
    r = hg.hgctl("egress", "allow", "--user", "bob", "--session", "0" * 32,
                 "a.example")
    assert r.returncode == 2, r
    assert show(hg)["users"] == {} and show(hg)["sessions"] == {}


def test_audited(hg):
    n = len(egress_records(hg))
    hg.hgctl_ok("egress", "allow", "--user", "carol", "audit.example")
    hg.hgctl_ok("egress", "revoke", "--user", "carol", "audit.example")
    recs = egress_records(hg)[n:]
    assert [r["detail"]["allow"] for r in recs] == [["audit.example"], []]
    for r in recs:
        assert r["user"] == "carol" and r["allowed"] is True, r
        d = r["detail"]
        assert (d["by"], d["scope"], d["target"]) == \
            ("hgctl", "user", "carol"), r
    # A refused change writes nothing.
    hg.hgctl("egress", "allow", "--user", "carol", "*")
    assert len(egress_records(hg)) == n + 2


def test_status_and_prompt(hg):
    bob, sid = sole_login(hg, pl.USER)
    hg.hgctl_ok("egress", "allow", "--user", "bob", "user.example")
    hg.hgctl_ok("egress", "allow", "--session", sid, "*.session.example")
    try:
        # Twice: the second answer is printed from the usage kept.
        for _ in range(2):
            r = bob.get("/api/status")
            assert r.status == 200, r
            e = r.json()["egress"]
            assert {k: e[k] for k in ("allow", "user", "session", "deny",
                                      "ports")} == {
                "allow": GLOBAL, "user": ["user.example"],
                "session": ["*.session.example"], "deny": ["evil.example"],
                "ports": [443, 80]}, e
            assert set(e["proxy"]) == {"ok", "reason"}, e
        assert show(hg)["sessions"] == {sid: ["*.session.example"]}
        # Another session of bob's has the user's additions only.
        other = hg.login(*pl.USER)
        assert other.get("/api/status").json()["egress"]["session"] == []

        set_profile(bob, "workspace-write+allowlist")
        doc = bob.get("/api/sandbox/prompt").json()
        assert doc["network"] == "allowlist", doc
        text = doc["prompt"]
        assert "{{" not in text, text
        assert "only through an HTTP proxy" in text, text
        assert "pypi.org, *.pythonhosted.org, user.example, " \
            "*.session.example" in text, text
        assert "Egress refused" in text and "403" in text, text
        assert "an admin can allow it" in text, text
        set_profile(bob, "read-only+allowlist")
        doc = bob.get("/api/sandbox/prompt").json()
        assert doc["network"] == "allowlist", doc
        assert "read-only" in doc["prompt"], doc
        # The other profiles say nothing of a proxy.
        set_profile(bob, "workspace-write")
        doc = bob.get("/api/sandbox/prompt").json()
        assert doc["network"] is False and "proxy" not in doc["prompt"], doc
    finally:
        hg.hgctl_ok("egress", "revoke", "--user", "bob", "user.example")
        bob.post("/api/logout")


@pytest.mark.skipif(not hglib.EGRESSD, reason="egressd is not built")
def test_proxy_state_of_the_real_chain(hg):
    """/api/status's egress.proxy follows sandboxd's link to egressd: up,
    down with a reason once egressd stops, up again once it is back."""
    bob = hg.login(*pl.USER)
    doc = hg.wait_egress(bob)
    assert doc["egress"]["proxy"] == {"ok": True, "reason": None}, doc
    hg.stop("egressd")
    try:
        def down():
            hg.health()         # asks sandboxd afresh
            p = bob.get("/api/status").json()["egress"]["proxy"]
            return p if not p["ok"] else None
        p = hglib.wait_for(down, what="the proxy reported down")
        assert isinstance(p["reason"], str) and p["reason"], p
    finally:
        hg.start("egressd")

    def up():
        hg.health()
        p = bob.get("/api/status").json()["egress"]["proxy"]
        return p if p["ok"] else None
    assert hglib.wait_for(up, what="the proxy reported up again") == \
        {"ok": True, "reason": None}


@pytest.mark.skipif(not hglib.EGRESSD, reason="egressd is not built")
def test_refusal_audited_through_the_chain(hg):
    """A refused attempt inside an allowlist sandbox, through the bridge,
    egressd and sandboxd: brokerd writes its egress record, with the
    spawn's user and session (no network needed: refused by name)."""
    bob, sid = sole_login(hg, pl.USER)
    set_profile(bob, "workspace-write+allowlist")
    hg.wait_egress(bob)
    try:
        res = pl.run(bob, "curl -sS -o /dev/null -w '%{http_code}' "
                     "http://refused.example/x")
        assert res["stdout"] == "403", res
        recs = hglib.wait_for(lambda: [
            r for r in egress_records(hg, "egress")
            if r["detail"]["host"] == "refused.example"],
            what="the egress record of refused.example")
        r = recs[-1]
        assert (r["user"], r["session"], r["allowed"]) == \
            ("bob", sid, False), r
        assert r["reason"] == "refused.example:80: not on the allowlist", r
        d = r["detail"]
        assert (d["port"], d["verdict"], d["reason"], d["bytes_up"]) == \
            (80, "refused", "not on the allowlist", 0), r
        assert len(d["spawn"]) == 16, r
    finally:
        set_profile(bob, "workspace-write")


def sole_login(hg, user):
    """A login session of user, the only live one it has (the others are
    revoked first), and its public id."""
    for it in hg.hgctl_json("session", "list"):
        if it["user"] == user[0]:
            hg.hgctl_ok("session", "revoke", it["id"])
    session = hg.login(*user)
    ids = [it["id"] for it in hg.hgctl_json("session", "list")
           if it["user"] == user[0]]
    assert len(ids) == 1, ids
    return session, ids[0]


def test_persist_across_restart_and_go_with_owner(hg):
    carol, sid = sole_login(hg, pl.CAROL)
    hg.hgctl_ok("egress", "allow", "--user", "carol", "kept.example")
    hg.hgctl_ok("egress", "allow", "--session", sid, "kept-session.example")
    assert hg.stop("brokerd") == 0
    hg.start("brokerd")
    hg.wait_control()
    got = show(hg)
    assert got["users"] == {"carol": ["kept.example"]}, got
    assert got["sessions"] == {sid: ["kept-session.example"]}, got
    hglib.wait_for(lambda: carol.get("/api/status").status == 200,
                   what="frontd back on brokerd")
    e = carol.get("/api/status").json()["egress"]
    assert (e["user"], e["session"]) == (["kept.example"],
                                         ["kept-session.example"]), e

    # The session's additions end with it.
    assert carol.post("/api/logout").status == 200
    assert show(hg)["sessions"] == {}
    # The user's with the user: a new carol starts with none.
    hg.hgctl_ok("user", "del", "carol")
    assert show(hg)["users"] == {}
    hg.add_user(*pl.CAROL)
    assert show(hg)["users"] == {}
    assert hg.stop("brokerd") == 0
    hg.start("brokerd")
    hg.wait_control()
    assert show(hg)["users"] == {} and show(hg)["sessions"] == {}


# -- brokerd and a sandboxd played by the test ---------------------------------

class FakeSandboxd:
    """sandboxd's end of sandbox.sock: listens as sandboxd's uid (the
    SO_PEERCRED brokerd checks is the listener's), answers brokerd's
    requests as sandboxd would (health with the egress member the test
    sets, spawns refused) and keeps every message; sends egress_log."""

    def __init__(self, hg):
        self.path = os.path.join(hg.run, hglib.SOCK_SANDBOX)
        if hg.mode == "root":
            uid, gid = hglib.account(hglib.SERVICE_USERS["sandboxd"])
        else:
            uid, gid = hg.run_as or (os.geteuid(), os.getegid())
        self.egress = None
        self.msgs = []
        self.cond = threading.Condition()
        self.conn = None
        self.ls = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.ls.bind(self.path)
        os.chmod(self.path, 0o666)
        # The credentials a client sees are the listener's at listen().
        if uid != os.geteuid():
            os.setegid(gid)
            os.seteuid(uid)
        try:
            self.ls.listen(4)
        finally:
            if os.geteuid() != os.getuid():
                os.seteuid(os.getuid())
                os.setegid(os.getgid())
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        while True:
            try:
                c, _ = self.ls.accept()
            except OSError:
                return
            threading.Thread(target=self.peer, args=(c,), daemon=True).start()

    def peer(self, c):
        try:
            c.recv(65536)
            c.send(hglib.hello("sandboxd"))
            with self.cond:
                self.conn = c
                self.cond.notify_all()
            while True:
                data, fds, _, _ = socket.recv_fds(c, 1 << 20, 8)
                for fd in fds:
                    os.close(fd)
                if not data:
                    return
                m = json.loads(data)
                with self.cond:
                    self.msgs.append(m)
                    self.cond.notify_all()
                if "id" in m and m.get("type"):
                    c.send(json.dumps(self.answer(m)).encode())
        except OSError:
            return

    def answer(self, m):
        t = m["type"]
        if t == "health":
            res = {"backend": {"name": "bwrap", "ok": True, "reason": None}}
            if self.egress is not None:
                res["egress"] = self.egress
            return {"id": m["id"], "result": res}
        if t == "spawn":
            return {"id": m["id"], "error": {
                "code": "unavailable", "message": "played sandboxd"}}
        if t in ("kill_session", "kill_user"):
            return {"id": m["id"], "result": {"killed": 0}}
        if t == "list":
            return {"id": m["id"], "result": {"procs": []}}
        return {"id": m["id"], "result": {}}

    def wait(self, pred, what, timeout=hglib.SLOW):
        """The first message kept so far or to come that pred accepts."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                for m in self.msgs:
                    if pred(m):
                        return m
                left = deadline - time.monotonic()
                assert left > 0, "sandboxd never got %s: %r" % (
                    what, [x.get("type") for x in self.msgs])
                self.cond.wait(left)

    def connected(self):
        with self.cond:
            while self.conn is None:
                self.cond.wait(10)
            return self.conn

    def send(self, **msg):
        self.connected().send(json.dumps(msg).encode())

    def close(self):
        self.ls.close()
        if self.conn is not None:
            self.conn.close()


@pytest.fixture(scope="module")
def played(mode):
    hg = hglib.Hostgate(mode, env=dict(hglib.LIFTED_ENV, **ENV),
                        name="egress-played")
    fake = None
    try:
        fake = FakeSandboxd(hg)
        hg.start("brokerd")
        hg.wait_control()
        hg.start("frontd")
        hg.add_user(*pl.ADMIN, admin=True)
        hg.add_user(*pl.USER)
        fake.connected()
        yield hg, fake
    except BaseException:
        hg.failed = True
        print(hg.logs())
        raise
    finally:
        if fake is not None:
            fake.close()
        hg.cleanup()


def test_spawn_carries_the_additions(played):
    hg, fake = played
    bob, sid = sole_login(hg, pl.USER)
    set_profile(bob, "workspace-write+allowlist")
    hg.hgctl_ok("egress", "allow", "--user", "bob", "u.example")
    hg.hgctl_ok("egress", "allow", "--session", sid, "s.example")
    bob.post("/api/run_command", {"command": "echo allowlist"})
    m = fake.wait(lambda m: m.get("type") == "spawn" and
                  "echo allowlist" in json.dumps(m), "the allowlist spawn")
    assert m["permission"] == "workspace-write+allowlist", m
    assert (m["egress_user"], m["egress_session"]) == \
        (["u.example"], ["s.example"]), m
    # Another profile's spawn carries none.
    set_profile(bob, "workspace-write")
    bob.post("/api/run_command", {"command": "echo plain"})
    m = fake.wait(lambda m: m.get("type") == "spawn" and
                  "echo plain" in json.dumps(m), "the plain spawn")
    assert "egress_user" not in m and "egress_session" not in m, m


def test_changes_reach_live_sandboxes(played):
    hg, fake = played
    bob, sid = sole_login(hg, pl.USER)
    hg.hgctl_ok("egress", "allow", "--user", "bob", "live.example")
    m = fake.wait(lambda m: m.get("type") == "egress_update" and
                  "live.example" in m["allow"], "the user's update")
    assert m == {"type": "egress_update", "user": "bob", "scope": "user",
                 "allow": m["allow"]} and "id" not in m, m
    hg.hgctl_ok("egress", "allow", "--session", sid, "live-s.example")
    m = fake.wait(lambda m: m.get("type") == "egress_update" and
                  m.get("session") == sid, "the session's update")
    assert (m["user"], m["scope"], m["allow"]) == \
        ("bob", "session", ["live-s.example"]), m
    # Its end takes them away from its sandboxes too.
    assert bob.post("/api/logout").status == 200
    fake.wait(lambda m: m.get("type") == "egress_update" and
              m.get("session") == sid and m["allow"] == [],
              "the ended session's update")


def test_proxy_state_from_health(played):
    hg, fake = played
    bob = hg.login(*pl.USER)
    r = bob.get("/api/status")
    assert r.json()["egress"]["proxy"] == {
        "ok": False, "reason": "sandboxd did not report the egress proxy"}, r
    # /healthz asks sandboxd's health afresh: kept at once.
    fake.egress = {"ok": True, "reason": None}
    hg.health()
    assert bob.get("/api/status").json()["egress"]["proxy"] == \
        {"ok": True, "reason": None}
    # Without it, status asks in the background once its copy is older
    # than a second: a later status sees the change.
    fake.egress = {"ok": False, "reason": "egressd is not connected"}
    hglib.wait_for(lambda: bob.get("/api/status").json()["egress"][
        "proxy"] == {"ok": False, "reason": "egressd is not connected"},
        what="the proxy reported down")


def test_egress_log_is_audited(played):
    hg, fake = played
    sid = "ab" * 16
    fake.send(type="egress_log", kind="connect", spawn="0123456789abcdef",
              user="bob", session=sid, host="pypi.org", port=443,
              addr="10.0.0.7", verdict="allowed", bytes_up=517,
              bytes_down=40961, duration_ms=83, count=1)
    fake.send(type="egress_log", kind="connect", spawn="0123456789abcdef",
              user="bob", host="evil.example", port=443,
              verdict="refused", reason="on the denylist",
              bytes_up=0, bytes_down=0, duration_ms=0, count=1)
    fake.send(type="egress_log", kind="summary", spawn="0123456789abcdef",
              user="bob", session=sid, host="other.example", port=80,
              verdict="refused", reason="not on the allowlist", bytes_up=0,
              bytes_down=0, duration_ms=0, count=57, since_ms=1764600000000)
    recs = hglib.wait_for(lambda: egress_records(hg, "egress") if len(
        egress_records(hg, "egress")) >= 2 else None,
        what="two egress records")
    ok, no = recs[-2:]
    assert (ok["user"], ok["session"], ok["allowed"], ok["reason"]) == \
        ("bob", sid, True, "pypi.org:443"), ok
    assert ok["detail"] == {
        "spawn": "0123456789abcdef", "host": "pypi.org", "port": 443,
        "addr": "10.0.0.7", "verdict": "allowed", "reason": None,
        "bytes_up": 517, "bytes_down": 40961, "duration_ms": 83}, ok
    assert (no["session"], no["allowed"], no["reason"]) == \
        (None, False, "evil.example:443: on the denylist"), no
    assert no["detail"]["reason"] == "on the denylist", no
    assert no["detail"]["addr"] is None and \
        no["detail"]["verdict"] == "refused", no
    sums = hglib.wait_for(lambda: egress_records(hg, "egress_summary"),
                          what="the summary record")
    s = sums[-1]
    assert (s["user"], s["session"], s["allowed"], s["reason"]) == \
        ("bob", sid, False, "other.example:80: not on the allowlist"), s
    assert s["detail"] == {
        "spawn": "0123456789abcdef", "host": "other.example", "port": 80,
        "verdict": "refused", "count": 57, "bytes_up": 0, "bytes_down": 0,
        "since": "2025-12-01T14:40:00.000Z"}, s
    # The chain holds them like any record.
    assert hg.hgctl("audit", "verify").returncode == 0
