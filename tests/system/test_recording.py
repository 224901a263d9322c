"""Terminal recordings: a direct-mode terminal is recorded as asciicast v2
by default, its sha256 and size go into the audit chain when it closes,
`hgctl audit replay` gives the cast back; sandboxed terminals only when
configured (HOSTGATE_RECORD_USERS here); the size cap's marker; hostile
ids; retention pruning at sandboxd's start."""

import hashlib
import json
import os
import re
import time
import uuid

import pytest

import hglib
import policylib as pl
import sandboxlib as sl


# The configuration of `hg` (conftest.py): pooled per mode.
HOSTGATE = pl.config()


def recordings_dir(hg):
    return os.path.join(hg.state, "recordings")


def recording_record(hg, tid, timeout=hglib.SLOW):
    """The audit record of terminal tid's recording (waits for it)."""
    return hglib.wait_for(
        lambda: (pl.audit_records(hg, action="recording",
                                  detail_recording=tid) or [None])[0],
        timeout, what="the recording record of %s" % tid)


def parse_cast(text):
    """(header, events) of an asciicast v2 text; asserts its shape."""
    lines = text.split("\n")
    assert lines[-1] == "", "a cast ends with a newline"
    header = json.loads(lines[0])
    assert header["version"] == 2, header
    assert isinstance(header["width"], int) and \
        isinstance(header["height"], int), header
    assert isinstance(header["timestamp"], int), header
    assert isinstance(header["env"], dict), header
    events = [json.loads(l) for l in lines[1:-1]]
    last = 0
    for ev in events:
        assert len(ev) == 3 and ev[1] in ("o", "r"), ev
        assert isinstance(ev[2], str), ev
        assert ev[0] >= last, "times go forward: %r" % ev
        last = ev[0]
    return header, events


def relays(hg):
    """sandboxd's children that are sandboxd: recording relays."""
    return sl.children_of(hg.pid("sandboxd"), "sandboxd")


def test_direct_terminal_is_recorded(hg):
    alice = hg.login(*pl.ADMIN)
    pl.grant(alice)
    tag = uuid.uuid4().hex[:8]
    t = sl.Terminal(alice, cols=80, rows=24)
    try:
        t.attach()
        assert relays(hg), "a recorded terminal has a relay"
        out, code = t.run("echo REC-$((6 * 7))-%s" % tag)
        assert out.strip() == "REC-42-%s" % tag and code == 0, out
        t.ws.send_text(json.dumps({"type": "resize", "cols": 101,
                                   "rows": 31}))
        out, _ = t.run("stty size")
        assert out.split() == ["31", "101"], out
        out, _ = t.run("printf 'caf\\303\\251 \\033[1mbold\\033[0m\\n'")
    finally:
        t.close()
    rec = recording_record(hg, t.id)
    d = rec["detail"]
    assert rec["user"] == "alice" and rec["allowed"] is True, rec
    assert d["terminal"] == t.id and d["file"] == t.id + ".cast", d
    assert d["truncated"] is False, d
    path = os.path.join(recordings_dir(hg), d["file"])
    st = os.stat(path)
    assert st.st_mode & 0o777 == 0o600, oct(st.st_mode)
    assert os.stat(recordings_dir(hg)).st_mode & 0o777 == 0o700
    with open(path, "rb") as f:
        data = f.read()
    assert d["bytes"] == len(data), (d, len(data))
    assert d["sha256"] == hashlib.sha256(data).hexdigest(), d
    # The relay went with its terminal.
    assert hglib.wait_for(lambda: not relays(hg), what="relay gone")

    r = hg.hgctl_ok("audit", "replay", t.id)
    assert r.stdout.encode() == data
    header, events = parse_cast(r.stdout)
    assert (header["width"], header["height"]) == (80, 24), header
    output = "".join(e[2] for e in events if e[1] == "o")
    assert "REC-42-%s" % tag in output, output
    assert "caf\u00e9 \x1b[1mbold\x1b[0m" in output, output
    assert ["r", "101x31"] in [e[1:] for e in events], events
    # The typed line's echo is output; keystrokes are not events.
    assert all(e[1] != "i" for e in events)
    hg.hgctl_ok("audit", "verify")

    # The admin API gives the same text in pages.
    got, off = b"", 0
    while True:
        r = alice.get("/api/admin/recordings/%s?offset=%d" % (t.id, off))
        assert r.status == 200, r
        page = r.json()
        if page["eof"]:
            break
        got += page["data"].encode()
        assert page["next"] == len(got), page
        off = page["next"]
    assert got == data
    bob = hg.login(*pl.USER)
    r = bob.get("/api/admin/recordings/" + t.id)
    assert r.status == 403, r


def test_recorded_after_another_brokerd_link_went(hg):
    """A second link of brokerd's uid to sandboxd that says hello and goes
    (test_privsep's control probe does, user mode; a brokerd restarted
    while the old one lingers) leaves brokerd's own link the one told of a
    terminal's end: the recording record still comes."""
    gone = "brokerd disconnected"
    before = hg.log_text("sandboxd").count(gone)
    other = hglib.SandboxClient(hg)
    try:
        res, err = other.call("health")
        assert err is None and "backend" in res, (res, err)
    finally:
        other.close()
    hglib.wait_for(lambda: hg.log_text("sandboxd").count(gone) > before,
                   what="sandboxd saw the other link go")
    alice = hg.login(*pl.ADMIN)
    pl.grant(alice)
    with sl.terminal(alice) as t:
        assert relays(hg), "a recorded terminal has a relay"
        out, _ = t.run("echo AFTER-LINK-$((3 * 3))")
        assert out.strip() == "AFTER-LINK-9", out
    d = recording_record(hg, t.id)["detail"]
    path = os.path.join(recordings_dir(hg), d["file"])
    with open(path, "rb") as f:
        assert d["sha256"] == hashlib.sha256(f.read()).hexdigest(), d
    assert pl.wait_audit(hg, action="terminal_exited", detail_id=t.id)


@pytest.mark.parametrize("path", [
    "/api/admin/recordings/..%2faudit.log", "/api/admin/recordings/../audit",
    "/api/admin/recordings/0123456789abcdeg",
    "/api/admin/recordings/0123456789ABCDEF",
    "/api/admin/recordings/0123456789abcdef/x",
    "/api/admin/recordings/0123456789abcdef0",
    "/api/admin/recordings/%2e%2e%2f%2e%2e%2fetc%2fpasswd",
    "/api/admin/recordings/0000000000000000",
    "/api/admin/recordings/0000000000000000?offset=-1",
])
def test_admin_api_refuses_hostile_ids(hg, path):
    alice = hg.login(*pl.ADMIN)
    r = alice.get(path)
    assert r.status in (400, 404), (path, r)


def test_sandboxed_terminal_not_recorded_by_default(hg):
    bob = hg.login(*pl.USER)
    with sl.terminal(bob) as t:
        assert not relays(hg)
        t.run("echo plain")
    hglib.wait_for(lambda: pl.audit_records(hg, action="terminal_exited",
                                            detail_id=t.id),
                   what="terminal_exited")
    assert not pl.audit_records(hg, action="recording",
                                detail_recording=t.id)
    assert not os.path.exists(os.path.join(recordings_dir(hg),
                                           t.id + ".cast"))
    r = hg.hgctl("audit", "replay", t.id)
    assert r.returncode != 0 and "no such recording" in r.stderr, r


@pytest.mark.parametrize("bad", [
    "../audit.log", "..%2faudit.log", "0123456789abcdeg", "0123456789ABCDEF",
    "0123456789abcde", "0123456789abcdef0", "/etc/passwd", "",
    "0123456789abcdef/../x", "0123456789abcde\n",
])
def test_replay_refuses_hostile_ids(hg, bad):
    r = hg.hgctl("audit", "replay", bad)
    assert r.returncode != 0, r
    assert "16 lower-case hex digits" in r.stderr, r.stderr
    assert r.stdout == ""


def test_replay_of_unknown_id(hg):
    r = hg.hgctl("audit", "replay", "0" * 16)
    assert r.returncode != 0 and "no such recording" in r.stderr, r


def test_per_user_setting_and_cap(hostgate_factory):
    """HOSTGATE_RECORD_USERS: bob's sandboxed terminals are recorded,
    alice's direct ones are not; the cap ends a recording with a marker."""
    cap = 8192
    hg = pl.own(hostgate_factory, "recording-users",
                HOSTGATE_RECORD_USERS="bob,-alice",
                HOSTGATE_RECORDING_MAX_BYTES=cap)
    bob = hg.login(*pl.USER)
    with sl.terminal(bob) as t:
        out, _ = t.run("echo BOB-$((2 + 3))")
        assert out.strip() == "BOB-5", out
        # Past the cap the terminal still works; the recording stops.
        out, code = t.run("head -c 30000 /dev/zero | tr '\\0' x | "
                          "fold -w 100")
        assert out.split() == ["x" * 100] * 300 and code == 0, out[-300:]
        out, _ = t.run("echo AFTER-$((1 + 1))")
        assert out.strip() == "AFTER-2", out
    d = recording_record(hg, t.id)["detail"]
    assert d["truncated"] is True, d
    path = os.path.join(recordings_dir(hg), d["file"])
    with open(path, "rb") as f:
        data = f.read()
    assert len(data) <= cap and d["bytes"] == len(data), (len(data), d)
    assert d["sha256"] == hashlib.sha256(data).hexdigest()
    header, events = parse_cast(data.decode())
    output = "".join(e[2] for e in events if e[1] == "o")
    assert "BOB-5" in output and "AFTER-2" not in output
    last = events[-1]
    assert last[1] == "o" and re.search(
        r"\[hostgate: recording cut at \d+ bytes\]", last[2]), last

    alice = hg.login(*pl.ADMIN)
    pl.grant(alice)
    with sl.terminal(alice) as t2:
        assert not relays(hg)
        t2.run("echo direct")
    hglib.wait_for(lambda: pl.audit_records(hg, action="terminal_exited",
                                            detail_id=t2.id),
                   what="terminal_exited")
    assert not pl.audit_records(hg, action="recording",
                                detail_recording=t2.id)


def test_all_records_sandboxed_terminals(hostgate_factory):
    hg = pl.own(hostgate_factory, "recording-all",
                HOSTGATE_RECORD_TERMINALS="all")
    bob = hg.login(*pl.USER)
    with sl.terminal(bob) as t:
        t.run("echo ALL-$((4 * 4))")
    d = recording_record(hg, t.id)["detail"]
    out = hg.hgctl_ok("audit", "replay", t.id).stdout
    assert "ALL-16" in out and d["bytes"] == len(out.encode())


def test_none_records_nothing(hostgate_factory):
    hg = pl.own(hostgate_factory, "recording-none",
                HOSTGATE_RECORD_TERMINALS="none")
    alice = hg.login(*pl.ADMIN)
    pl.grant(alice)
    with sl.terminal(alice) as t:
        assert not relays(hg)
        t.run("echo none")
    assert not os.path.exists(os.path.join(recordings_dir(hg),
                                           t.id + ".cast"))


def test_retention_prunes_at_start(hostgate_factory):
    hg = pl.own(hostgate_factory, "recording-retention",
                HOSTGATE_RECORDING_RETENTION_DAYS=30)
    rdir = recordings_dir(hg)
    old = os.path.join(rdir, "a" * 16 + ".cast")
    fresh = os.path.join(rdir, "b" * 16 + ".cast")
    other = os.path.join(rdir, "notes.txt")
    for p in (old, fresh, other):
        with open(p, "w") as f:
            f.write('{"version": 2, "width": 80, "height": 24}\n')
    then = time.time() - 31 * 86400
    os.utime(old, (then, then))
    os.utime(other, (then, then))
    hg.stop("sandboxd")
    hg.start("sandboxd")
    hglib.wait_for(lambda: not os.path.exists(old),
                   what="the old recording pruned")
    assert os.path.exists(fresh) and os.path.exists(other)
    hg.wait_chain()
    assert hg.hgctl_ok("audit", "replay", "b" * 16).stdout == \
        '{"version": 2, "width": 80, "height": 24}\n'
    r = hg.hgctl("audit", "replay", "a" * 16)
    assert r.returncode != 0 and "no such recording" in r.stderr, r
