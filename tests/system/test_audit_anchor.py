"""Off-host anchoring of the audit chain: with HOSTGATE_AUDIT_SYSLOG=1
every record also goes to syslog or the journal with its seq and chain
hash, and `hgctl audit verify --head SEQ:HASH` / `--journal` prove the
file against such an anchor: records cut from the end, followed by a
restart of brokerd, pass a plain verify (the known limit) but not one
against the anchor.

systemd is not PID 1 here, so `--journal` is tested with a fake
`journalctl` first on PATH that prints journal entries in the form
`journalctl -o json` does (one JSON object a line, field values as
strings)."""

import hashlib
import json
import os
import subprocess

import pytest

import hglib
import policylib as pl


def head_of(hg):
    """(seq, chain hash) of the last record in the file."""
    with open(pl.audit_path(hg), "rb") as f:
        lines = f.read().split(b"\n")[:-1]
    rec = json.loads(lines[-1])
    return rec["seq"], hashlib.sha256(lines[-1]).hexdigest()


def hgctl_path(hg, path_dir, *args):
    """hgctl with path_dir first on PATH (for the fake journalctl)."""
    as_user = (0, 0) if hg.mode == "root" else None
    argv = hg.wrap([hg.binary("hgctl")] + list(args), as_user)
    env = {"PATH": path_dir + ":" + hg.env["PATH"], "LANG": "C.UTF-8",
           "HOSTGATE_RUN_DIR": hg.run, "HOSTGATE_STATE_DIR": hg.state,
           "HOSTGATE_ENV_FILE": hg.envfile}
    return subprocess.run(argv, capture_output=True, text=True, env=env,
                          timeout=hglib.SLOW, cwd=hg.dir)


def fake_journalctl(hg, entries, rc=0):
    """A directory holding a journalctl that prints entries (dicts) as
    journal JSON lines and exits rc; it records its arguments."""
    d = os.path.join(hg.dir, "fakebin-%d" % len(os.listdir(hg.dir)))
    os.mkdir(d)
    os.chmod(d, 0o755)
    data = os.path.join(d, "entries.json")
    with open(data, "w") as f:
        for e in entries:
            f.write(json.dumps(e) + "\n")
    args = os.path.join(d, "args")
    open(args, "w").close()
    os.chmod(args, 0o666)     # hgctl may run as the test user
    script = os.path.join(d, "journalctl")
    with open(script, "w") as f:
        f.write("#!/bin/sh\necho \"$@\" > %s 2>/dev/null\ncat %s\nexit %d\n"
                % (args, data, rc))
    os.chmod(script, 0o755)
    os.chmod(data, 0o644)
    return d


def anchor_entry(seq, digest):
    return {"__REALTIME_TIMESTAMP": "1764600000000000",
            "SYSLOG_IDENTIFIER": "hostgate-audit", "PRIORITY": "6",
            "MESSAGE": "audit seq=%d hash=%s action=login" % (seq, digest),
            "HOSTGATE_AUDIT_SEQ": str(seq), "HOSTGATE_AUDIT_HASH": digest}


def failed_logins(h):
    """Records to anchor and to cut: six failed logins."""
    for i in range(6):
        assert h.post("/api/login", {"username": "bob",
                                     "password": "bad-%d" % i}).status == 401
    pl.wait_audit(h, action="login_failed")


@pytest.fixture(scope="module")
def anchored(mode):
    """One hostgate for the tests that only read and verify its log (each
    takes the head as it finds it)."""
    with pl.module_hostgate(mode, "anchor", HOSTGATE_AUDIT_SYSLOG=1) as h:
        failed_logins(h)
        yield h


@pytest.fixture
def hg(hostgate_factory):
    """A hostgate of its own, for a test that cuts the log."""
    h = pl.own(hostgate_factory, "anchor-cut", HOSTGATE_AUDIT_SYSLOG=1)
    failed_logins(h)
    return h


def test_status_head_is_the_file_head(anchored):
    hg = anchored
    seq, digest = head_of(hg)
    doc = hg.hgctl_json("status")
    assert doc["audit"] == {"seq": seq, "hash": digest}, doc["audit"]


def test_head_matches(anchored):
    hg = anchored
    seq, digest = head_of(hg)
    r = hg.hgctl("audit", "verify", "--head", "%d:%s" % (seq, digest))
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert "anchor seq %d matches" % seq in r.stdout, r.stdout
    # An older anchor is fine too: the log goes on past it.
    with open(pl.audit_path(hg), "rb") as f:
        third = f.read().split(b"\n")[2]
    r = hg.hgctl("audit", "verify", "--json", "--head",
                 "3:" + hashlib.sha256(third).hexdigest())
    assert r.returncode == 0 and json.loads(r.stdout)["ok"], r.stdout


def test_head_with_another_hash_is_broken(anchored):
    hg = anchored
    seq, digest = head_of(hg)
    other = ("0" if digest[0] != "0" else "1") + digest[1:]
    r = hg.hgctl("audit", "verify", "--json", "--head",
                 "%d:%s" % (seq, other))
    doc = json.loads(r.stdout)
    assert r.returncode == 1 and doc["bad_seq"] == seq, doc
    assert "anchor" in doc["error"], doc


@pytest.mark.parametrize("bad", ["", "12", "x:" + "a" * 64, "0:" + "a" * 64,
                                 "5:" + "A" * 64, "5:abc", "5:" + "g" * 64])
def test_bad_head_is_a_usage_error(anchored, bad):
    r = anchored.hgctl("audit", "verify", "--head", bad)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "--head wants SEQ:HASH" in r.stderr, r.stderr


def cut_and_restart(hg, k):
    """Cut the last k records, with brokerd stopped, and start it again."""
    hg.stop("brokerd")
    path = pl.audit_path(hg)
    with open(path, "rb") as f:
        lines = f.read().split(b"\n")[:-1]
    with open(path, "r+b") as f:
        data = b"".join(l + b"\n" for l in lines[:-k])
        f.write(data)
        f.truncate(len(data))
    hg.start("brokerd")
    hglib.wait_for(lambda: hg.hgctl("user", "list").returncode == 0,
                   what="brokerd to answer")
    return len(lines)


def test_cut_end_after_restart_found_by_head(hg):
    seq, digest = head_of(hg)
    n = cut_and_restart(hg, 3)
    assert n == seq
    # The known limit: the shorter chain is whole.
    rc, doc = pl.verify(hg)
    assert rc == 0 and doc["records"] == n - 3, doc
    r = hg.hgctl("audit", "verify", "--head", "%d:%s" % (seq, digest))
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert "first bad record at seq %d" % (n - 2) in r.stdout, r.stdout
    assert "truncated" in r.stdout, r.stdout
    r = hg.hgctl("audit", "verify", "--json", "--head",
                 "%d:%s" % (seq, digest))
    doc = json.loads(r.stdout)
    assert r.returncode == 1 and doc["bad_seq"] == n - 2, doc


def test_cut_end_after_restart_found_by_journal(hg):
    seq, digest = head_of(hg)
    with open(pl.audit_path(hg), "rb") as f:
        second = f.read().split(b"\n")[1]
    entries = [{"MESSAGE": "brokerd: something else", "PRIORITY": "6",
                "SYSLOG_IDENTIFIER": "brokerd"},
               anchor_entry(2, hashlib.sha256(second).hexdigest()),
               anchor_entry(seq, digest)]
    d = fake_journalctl(hg, entries)
    r = hgctl_path(hg, d, "audit", "verify", "--journal")
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert "anchor seq %d matches" % seq in r.stdout, r.stdout
    with open(os.path.join(d, "args")) as f:
        args = f.read().split()
    assert "-o" in args and "json" in args, args
    assert "SYSLOG_IDENTIFIER=hostgate-audit" in args, args

    cut_and_restart(hg, 2)
    assert pl.verify(hg)[0] == 0
    r = hgctl_path(hg, d, "audit", "verify", "--journal")
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert "first bad record at seq %d" % (seq - 1) in r.stdout, r.stdout


def test_journal_without_anchors_or_failing(anchored):
    hg = anchored
    d = fake_journalctl(hg, [{"MESSAGE": "nothing", "PRIORITY": "6"}])
    r = hgctl_path(hg, d, "audit", "verify", "--journal")
    assert r.returncode == 1 and "no audit anchor" in r.stderr, r.stderr
    d = fake_journalctl(hg, [], rc=1)
    r = hgctl_path(hg, d, "audit", "verify", "--journal")
    assert r.returncode == 1 and "journalctl failed" in r.stderr, r.stderr
    r = hg.hgctl("audit", "verify", "--journal", "--head", "1:" + "a" * 64)
    assert r.returncode == 2, r.stderr
