"""The audit chain against the real journal: brokerd's records reach the
journal with HOSTGATE_AUDIT_SEQ and HOSTGATE_AUDIT_HASH, and hgctl audit
verify --journal anchors the chain on them."""

import json

import hgvm as h


def test_journal_fields():
    out = h.sh("journalctl", "--no-pager", "-o", "json",
               "SYSLOG_IDENTIFIER=hostgate-audit").stdout
    entries = [json.loads(line) for line in out.splitlines() if line]
    assert entries
    assert all("HOSTGATE_AUDIT_SEQ" in e and "HOSTGATE_AUDIT_HASH" in e
               for e in entries[-5:]), entries[-1]


def test_verify_journal():
    r = h.sh("hgctl", "audit", "verify", "--journal")
    assert "journal" in (r.stdout + r.stderr).lower(), r.stdout + r.stderr
