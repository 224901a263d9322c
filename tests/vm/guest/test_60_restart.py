"""Daemons killed and restarted under systemd. sandboxd killed with
SIGKILL while a command runs: systemd starts it again and no process of
the old spawns survives, whatever it setsid'd (whether systemd's kill
reaches the whole unit or sandboxd alone, which leaves the spawns to the
new sandboxd's sweep). brokerd restarted: login sessions and direct-mode
grants survive."""

import threading

import pytest

import hgvm as h

SANDBOXD = "hostgate-sandboxd.service"


@pytest.mark.parametrize("whom", ["all", "main"])
def test_sandboxd_killed(whom):
    s = h.SHARED["sessions"]["bob"]
    marker = "hgvm-crash-" + whom
    cmd = ("setsid sh -c 'sleep 1000; : %s-orphan' </dev/null >/dev/null "
           "2>&1 & sh -c 'sleep 1000; : %s-main'" % (marker, marker))
    result = {}

    def run():
        try:
            result["r"] = s.post("/api/run_command",
                                 {"command": cmd, "timeout": 300},
                                 timeout=600)
        except Exception as e:      # the connection may go with it
            result["r"] = e

    th = threading.Thread(target=run, daemon=True)
    th.start()
    def running():
        assert "r" not in result, result      # it must not have ended
        return h.shells(marker + "-main") and h.shells(marker + "-orphan")
    h.wait_for(running, 120, "the command and its setsid'd child")
    old = h.main_pid(SANDBOXD)
    restarts = int(h.unit_prop(SANDBOXD, "NRestarts"))
    h.sh("systemctl", "kill", "--kill-whom=" + whom, "-s", "KILL", SANDBOXD)
    h.wait_for(lambda: int(h.unit_prop(SANDBOXD, "NRestarts")) > restarts
               and h.unit_prop(SANDBOXD, "ActiveState") == "active", 180,
               "systemd restarting sandboxd")
    assert h.main_pid(SANDBOXD) != old
    h.wait_for(lambda: not h.processes(marker), 120,
               "no process of the old spawns left")
    th.join(300)
    assert not th.is_alive()
    h.wait_healthy()
    assert s.run("echo alive")["stdout"] == "alive\n"


def test_brokerd_restart_keeps_sessions_and_grants():
    admin = h.SHARED["sessions"]["admin"]
    bob = h.SHARED["sessions"]["bob"]
    assert admin.mode("direct")["mode"] == "direct"
    old = h.main_pid("hostgate-brokerd.service")
    h.sh("systemctl", "restart", "hostgate-brokerd.service")
    h.wait_healthy()
    assert h.main_pid("hostgate-brokerd.service") != old
    r = admin.get("/api/execution-mode")
    assert r.status == 200 and r.json()["mode"] == "direct", r
    assert bob.status()["user"] == "bob"
    assert admin.run("echo direct")["mode"] == "direct"
    assert admin.mode("sandbox")["mode"] == "sandbox"
