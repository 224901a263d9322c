"""The audit chain against the real journal: brokerd's records reach the
journal with HOSTGATE_AUDIT_SEQ and HOSTGATE_AUDIT_HASH, and hgctl audit
verify --journal anchors the chain on them."""

import json
import re

import hgvm as h


def anchors():
    out = h.sh("journalctl", "--no-pager", "-o", "json",
               "SYSLOG_IDENTIFIER=hostgate-audit").stdout
    return [json.loads(line) for line in out.splitlines() if line]


def test_journal_fields():
    entries = anchors()
    assert entries
    for e in entries:
        assert re.fullmatch(r"[0-9]+", e["HOSTGATE_AUDIT_SEQ"]), e
        assert re.fullmatch(r"[0-9a-f]{64}", e["HOSTGATE_AUDIT_HASH"]), e
        assert e["MESSAGE"].startswith("audit seq=%s hash=%s action=" % (
            e["HOSTGATE_AUDIT_SEQ"], e["HOSTGATE_AUDIT_HASH"])), e


def test_verify_journal():
    """The newest anchor in the journal matches the log's record."""
    head = max(int(e["HOSTGATE_AUDIT_SEQ"]) for e in anchors())
    r = h.sh("hgctl", "audit", "verify", "--journal")
    m = re.search(r"anchor seq ([0-9]+) matches", r.stdout)
    assert m and int(m.group(1)) == head, r.stdout + r.stderr
