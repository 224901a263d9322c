"""The user limits, small, through the env file and a restart: a memory
bomb is OOM-killed at the user's memory.max (and audited with oom: true),
a fork bomb stops at pids.max, a write past the workspace quota fails with
EDQUOT."""

import hgvm as h

MEMORY = 96 * 1024 * 1024
PIDS = 48

BOMB = """
b = []
while True:
    b.append(bytearray(1 << 20))
"""

FORKS = """
import os, time
n = 0
try:
    while n < 400:
        if os.fork() == 0:
            time.sleep(600)
            os._exit(0)
        n += 1
    print("forked", n)
except OSError as e:
    print("stopped", n, e.errno)
"""

FILL = """
import os
f = open("fill", "wb")
n = 0
try:
    while n < 400:
        f.write(b"x" * (1 << 20))
        f.flush()
        os.fsync(f.fileno())
        n += 1
    print("wrote", n)
except OSError as e:
    print("stopped", n, e.errno)
"""


def test_configure_small_limits():
    h.configure(HOSTGATE_USER_MEMORY_MAX="96M", HOSTGATE_USER_PIDS_MAX=PIDS,
                HOSTGATE_USER_DISK_MAX="64M")
    # the sessions survive the restart
    for u in ("admin", "bob"):
        lim = h.SHARED["sessions"][u].status()["limits"]
        assert lim["memory_max"] == MEMORY and lim["pids_max"] == PIDS, lim


def test_memory_bomb_oom():
    s = h.SHARED["sessions"]["bob"]
    doc = s.run("python3 -c '%s'" % BOMB.replace("'", "'\\''"), ok=False,
                timeout=300)
    assert doc["oom"] is True, doc
    assert doc["signal"] == 9 or doc["exit_code"] != 0, doc
    admin = h.SHARED["sessions"]["admin"]
    recs = [r for r in h.audit(admin, user="bob", action="spawn_end")
            if r["detail"].get("oom")]
    assert recs, h.audit(admin, user="bob", action="spawn_end")[-3:]
    # its anchor is in the journal
    out = h.sh("journalctl", "--no-pager", "-o", "cat",
               "SYSLOG_IDENTIFIER=hostgate-audit").stdout
    assert "audit seq=%d hash=" % recs[-1]["seq"] in out, out[-3000:]


def test_fork_bomb_stopped():
    s = h.SHARED["sessions"]["bob"]
    doc = s.run("python3 -c '%s'" % FORKS, timeout=300)
    words = doc["stdout"].split()
    assert words[0] == "stopped" and int(words[2]) == 11, doc
    assert int(words[1]) < PIDS, doc


def test_disk_quota_edquot():
    s = h.SHARED["sessions"]["bob"]
    doc = s.run("python3 -c '%s'; rm -f fill" % FILL, timeout=300)
    words = doc["stdout"].split()
    assert words[0] == "stopped" and int(words[2]) == 122, doc
    assert int(words[1]) <= 64, doc
