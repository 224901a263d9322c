"""Retention of the audit log: `hgctl audit archive --before TIME` has
brokerd move the old rotated files out of the state directory behind an
`audit_archived` record, after which `hgctl audit verify` checks the
chain from the oldest record left and says what was archived; a file
removed without it, or an anchor forged without the key, is still an
error. `hgctl audit verify --state-dir DIR` checks a copy in hgctl
itself, with brokerd running or not, and writes nothing in DIR."""

import hashlib
import hmac
import json
import os
import re
import shutil

import pytest

import policylib as pl

# The smallest HOSTGATE_AUDIT_ROTATE_BYTES (common/config.c): a file
# holds about a dozen records.
ROTATE = 4096


def rotated(d):
    """The rotated files of directory d, oldest first."""
    return sorted((n for n in os.listdir(d)
                   if re.fullmatch(r"audit\.log\.\d+", n)),
                  key=lambda n: int(n.rsplit(".", 1)[1]))


def lines_of(path):
    with open(path, "rb") as f:
        return f.read().split(b"\n")[:-1]


def snapshot(d):
    """Every entry under d: its mode and, for a file, its bytes."""
    out = {}
    for root, dirs, files in os.walk(d):
        for n in dirs + files:
            p = os.path.join(root, n)
            st = os.lstat(p)
            data = None
            if os.path.isfile(p):
                with open(p, "rb") as f:
                    data = f.read()
            out[os.path.relpath(p, d)] = (st.st_mode, st.st_size, data)
    return out


def verify(hg, *args):
    """hgctl audit verify ARGS: (exit status, stdout, --json document)."""
    r = hg.hgctl("audit", "verify", *args)
    j = hg.hgctl("audit", "verify", *(list(args) + ["--json"]))
    assert j.returncode == r.returncode, (r, j)
    try:
        doc = json.loads(j.stdout)
    except ValueError:
        raise AssertionError("verify --json: %r %r" % (j.stdout, j.stderr))
    return r.returncode, r.stdout, doc


def copy_of(hg, src, name):
    """A copy of src that hgctl (as it runs in this mode) can read."""
    dst = os.path.join(hg.dir, name)
    shutil.copytree(src, dst)
    who = hg.run_as if hg.mode == "user" and hg.run_as else None
    if who:
        for root, dirs, files in os.walk(dst):
            os.chown(root, *who)
            for n in files:
                os.chown(os.path.join(root, n), *who)
    return dst


def rewrite(path, data):
    """Replace the content of path in place (brokerd holds audit.log)."""
    with open(path, "r+b") as f:
        f.write(data)
        f.truncate(len(data))


@pytest.fixture(scope="module")
def cycle(mode):
    """A hostgate whose log rotated four times, then archived up to the
    first record of its third rotated file."""
    with pl.module_hostgate(mode, "archive",
                            HOSTGATE_AUDIT_ROTATE_BYTES=ROTATE) as hg:
        for i in range(400):
            if len(rotated(hg.state)) >= 4:
                break
            doc = hg.hgctl_json("token", "create", "bob")
            hg.hgctl_ok("token", "revoke", doc["id"])
        files = rotated(hg.state)
        assert len(files) >= 4, files
        recs = {n: [json.loads(l) for l in lines_of(os.path.join(hg.state, n))]
                for n in files}
        before = recs[files[2]][0]["time"]
        # What the rule archives: the oldest files, all of whose records
        # are older than `before` (a record in the same millisecond keeps
        # its file).
        expect = []
        for n in files:
            if any(r["time"] >= before for r in recs[n]):
                break
            expect.append(n)
        assert expect and expect != files, (expect, files)
        last_line = lines_of(os.path.join(hg.state, expect[-1]))[-1]
        yield {"hg": hg, "files": files, "before": before,
               "expect": expect, "recs": recs,
               "last_seq": json.loads(last_line)["seq"],
               "last_hash": hashlib.sha256(last_line).hexdigest()}


@pytest.fixture(scope="module")
def archived(cycle):
    hg = cycle["hg"]
    rc, _, doc = verify(hg)
    assert rc == 0 and doc["first_seq"] == 1, doc
    doc = hg.hgctl_json("audit", "archive", "--before", cycle["before"])
    cycle["archive"] = doc
    return cycle


def test_archive_moves_only_the_old_files(archived):
    hg, doc = archived["hg"], archived["archive"]
    arch = os.path.join(hg.state, "audit-archive")
    assert doc["files"] == archived["expect"], doc
    assert doc["to"] == arch, doc
    assert os.stat(arch).st_mode & 0o777 == 0o700
    assert sorted(os.listdir(arch)) == sorted(archived["expect"])
    for n in archived["files"]:
        here = os.path.exists(os.path.join(hg.state, n))
        assert here == (n not in archived["expect"]), n
    assert os.path.exists(pl.audit_path(hg))
    assert doc["first_seq"] == 1, doc
    assert doc["last_seq"] == archived["last_seq"], doc
    assert doc["last_hash"] == archived["last_hash"], doc


def test_the_anchor_is_a_record_of_the_chain(archived):
    hg, doc = archived["hg"], archived["archive"]
    recs = pl.audit_records(hg, action="audit_archived")
    assert [r["seq"] for r in recs] == [doc["anchor_seq"]], recs
    d = recs[0]["detail"]
    assert d["first_seq"] == 1 and d["last_seq"] == archived["last_seq"], d
    assert d["last_hash"] == archived["last_hash"], d
    assert [f["file"] for f in d["files"]] == archived["expect"], d
    assert recs[0]["allowed"] is True


def test_verify_says_what_was_archived(archived):
    hg = archived["hg"]
    rc, out, doc = verify(hg)
    first = archived["last_seq"] + 1
    assert rc == 0, out
    assert doc["ok"] is True and doc["first_seq"] == first, doc
    assert doc["anchor_seq"] == archived["archive"]["anchor_seq"], doc
    assert doc["records"] == doc["last_seq"] - first + 1, doc
    assert out == ("audit log OK: %d records, seq %d to %d; seq 1 to %d "
                   "archived (anchor at seq %d)\n"
                   % (doc["records"], first, doc["last_seq"], first - 1,
                      doc["anchor_seq"])), out


def test_archive_again_moves_nothing_newer(archived):
    hg = archived["hg"]
    doc = hg.hgctl_json("audit", "archive", "--before", archived["before"])
    assert doc["files"] == [] and doc["anchor_seq"] is None, doc
    r = hg.hgctl_ok("audit", "archive", "--before", "2000-01-01")
    assert r.stdout.startswith("nothing to archive"), r.stdout
    r = hg.hgctl("audit", "archive", "--before", "yesterday")
    assert r.returncode == 1 and "ISO 8601" in r.stderr, r


def test_a_file_removed_without_archive_is_still_missing(archived):
    """The next file removed by hand, and an anchor for it appended by
    someone without the key: the gap stands, as before archiving."""
    hg = archived["hg"]
    nxt = rotated(hg.state)[0]
    path = os.path.join(hg.state, nxt)
    aside = os.path.join(hg.dir, nxt + ".aside")
    log = pl.audit_path(hg)
    with open(log, "rb") as f:
        orig = f.read()
    nlines = lines_of(path)
    last = json.loads(nlines[-1])
    first_left = last["seq"] + 1
    os.rename(path, aside)
    try:
        rc, out, doc = verify(hg)
        assert rc == 1 and doc["bad_seq"] == 1, doc
        assert ("missing (deleted, or records out of order): the next "
                "record has seq %d" % first_left) in doc["error"], doc
        # A forged anchor naming exactly that file: wrong HMAC.
        tail = json.loads(orig.split(b"\n")[-2])
        rec = dict(tail)
        rec.pop("hmac")
        rec["seq"] = tail["seq"] + 1
        rec["prev"] = hashlib.sha256(orig.split(b"\n")[-2]).hexdigest()
        rec["action"] = "audit_archived"
        rec["detail"] = {"first_seq": 1, "last_seq": last["seq"],
                         "last_hash": hashlib.sha256(nlines[-1]).hexdigest(),
                         "files": []}
        body = json.dumps(rec, separators=(",", ":")).encode()
        fake = hmac.new(b"not the key", body, hashlib.sha256).hexdigest()
        forged = body[:-1] + b',"hmac":"' + fake.encode() + b'"}\n'
        rewrite(log, orig + forged)
        rc, out, doc = verify(hg)
        assert rc == 1 and doc["bad_seq"] == 1, doc
        assert "the next record has seq %d" % first_left in doc["error"], doc
        assert out.startswith("audit log: first bad record at seq 1: ")
    finally:
        rewrite(log, orig)
        os.rename(aside, path)
    rc, out, doc = verify(hg)
    assert rc == 0, doc


def test_a_forged_line_after_the_anchor_is_an_error(archived):
    hg = archived["hg"]
    log = pl.audit_path(hg)
    with open(log, "rb") as f:
        orig = f.read()
    lines = orig.split(b"\n")[:-1]
    rec = json.loads(lines[-1])
    rec.pop("hmac")
    rec["seq"] += 1
    rec["prev"] = hashlib.sha256(lines[-1]).hexdigest()
    body = json.dumps(rec, separators=(",", ":")).encode()
    fake = hmac.new(b"not the key", body, hashlib.sha256).hexdigest()
    try:
        rewrite(log, orig + body[:-1] + b',"hmac":"' + fake.encode() +
                b'"}\n')
        rc, out, doc = verify(hg)
        assert rc == 1 and doc["bad_seq"] == rec["seq"], doc
        assert "HMAC does not match" in doc["error"], doc
    finally:
        rewrite(log, orig)


def test_state_dir_on_a_copy_while_brokerd_runs(archived):
    hg = archived["hg"]
    copy = copy_of(hg, hg.state, "copy-running")
    before = snapshot(copy)
    rc, out, doc = verify(hg, "--state-dir", copy)
    assert rc == 0, out
    rc2, out2, doc2 = verify(hg)
    assert (out, doc) == (out2, doc2)
    assert snapshot(copy) == before


def test_state_dir_on_the_archive(archived):
    """The archive with a copy of the key: seq 1 to the last archived."""
    hg = archived["hg"]
    arch = copy_of(hg, os.path.join(hg.state, "audit-archive"), "arch-copy")
    shutil.copy2(os.path.join(hg.state, "audit.key"), arch)
    if hg.mode == "user" and hg.run_as:
        os.chown(os.path.join(arch, "audit.key"), *hg.run_as)
    rc, out, doc = verify(hg, "--state-dir", arch)
    assert rc == 0, out
    assert out == "audit log OK: %d records, last seq %d\n" % (
        archived["last_seq"], archived["last_seq"]), out


def test_state_dir_on_a_tampered_copy_says_what_online_says(archived):
    hg = archived["hg"]
    copy = copy_of(hg, hg.state, "copy-tampered")
    log = pl.audit_path(hg)
    with open(log, "rb") as f:
        orig = f.read()
    # The anchor itself edited: it no longer vouches for the gap.
    k = orig.index(b'"action":"audit_archived"')
    k = orig.index(b'"reason":"hgctl"', k)
    edited = orig[:k] + b'"reason":"hgctL"' + orig[k + 16:]
    rewrite(os.path.join(copy, "audit.log"), edited)
    before = snapshot(copy)
    try:
        rewrite(log, edited)
        rc, out, doc = verify(hg)
    finally:
        rewrite(log, orig)
    assert rc == 1 and doc["bad_seq"] == 1, out
    assert ("missing (deleted, or records out of order): the next record "
            "has seq %d" % (archived["last_seq"] + 1)) in out, out
    rc2, out2, doc2 = verify(hg, "--state-dir", copy)
    assert (rc2, out2, doc2) == (rc, out, doc)
    assert snapshot(copy) == before
    # No key there: an error, not a verdict.
    os.unlink(os.path.join(copy, "audit.key"))
    r = hg.hgctl("audit", "verify", "--state-dir", copy)
    assert r.returncode == 1 and "audit.key" in r.stderr, r


def test_state_dir_with_brokerd_stopped(archived):
    """Last: brokerd stopped, the state directory itself, untouched."""
    hg = archived["hg"]
    rc, out, doc = verify(hg)
    assert rc == 0, out
    hg.stop("brokerd")
    before = snapshot(hg.state)
    rc2, out2, doc2 = verify(hg, "--state-dir", hg.state)
    assert (rc2, out2, doc2) == (rc, out, doc)
    assert snapshot(hg.state) == before
