"""hgctl token list and session list at any size: brokerd answers
token_list and session_list a page at a time (after the last id of the
page before, at most limit items, never more than one datagram holds) and
hgctl prints every page as one list.

Mode-independent (MODE_INDEPENDENT): run in one mode only, root as root,
because the paging of the control protocol does not depend on who runs
brokerd."""

import json
import os
import secrets
import socket
import sqlite3
import time

import pytest

import hglib

MODE_INDEPENDENT = True

IPC_MAX_MSG = 64 * 1024
MANY = 2100     # well past the ~600 rows that once overflowed a datagram


class Control:
    """A connection to brokerd's control socket, speaking as hgctl."""

    def __init__(self, hg):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.s.settimeout(hglib.SLOW)
        self.s.connect(os.path.join(hg.run, "broker-control.sock"))
        self.s.send(hglib.hello("hgctl"))
        assert json.loads(self.s.recv(IPC_MAX_MSG + 1))["type"] == "hello"
        self.next_id = 1

    def close(self):
        self.s.close()

    def send(self, msg):
        msg = dict(msg, id=self.next_id)
        self.next_id += 1
        self.s.send(json.dumps(msg).encode())
        return msg["id"]

    def recv(self):
        d = self.s.recv(IPC_MAX_MSG + 1)
        assert d, "brokerd closed the control connection"
        assert len(d) <= IPC_MAX_MSG, len(d)
        return json.loads(d)

    def call(self, msg):
        rid = self.send(msg)
        r = self.recv()
        assert r["id"] == rid, r
        return r

    def many(self, msgs, batch=100):
        """Send msgs in pipelined batches; their replies, in order."""
        out = []
        for i in range(0, len(msgs), batch):
            ids = [self.send(m) for m in msgs[i:i + batch]]
            for rid in ids:
                r = self.recv()
                assert r["id"] == rid, r
                out.append(r)
        return out


def mint(ctl, user, n):
    """n standalone tokens of user, minted through brokerd: their ids."""
    replies = ctl.many([{"type": "token_create", "user": user}] * n)
    for r in replies:
        assert "result" in r, r
    return [r["result"]["id"] for r in replies]


def walk(ctl, type, limit=None, between=None):
    """Every page of a list: (the items in order, the pages' lengths).
    between(page_number) runs before each page but the first."""
    items, sizes, after = [], [], None
    while True:
        req = {"type": type}
        if limit is not None:
            req["limit"] = limit
        if after is not None:
            req["after"] = after
        if between is not None and sizes:
            between(len(sizes))
        r = ctl.call(req)
        assert "result" in r, r
        page = r["result"]["items"]
        items += page
        sizes.append(len(page))
        if "next" not in r["result"]:
            return items, sizes
        assert r["result"]["next"] == page[-1]["id"], r["result"]["next"]
        after = r["result"]["next"]


def table_ids(text, header):
    lines = text.splitlines()
    assert lines[0] == header, lines[:2]
    return [l.split("\t")[0] for l in lines[1:]]


@pytest.fixture(scope="module")
def big(mode):
    """A hostgate of this module's own, its store holding MANY tokens."""
    with hglib.running(mode, "lists") as hg:
        ctl = Control(hg)
        try:
            hg.ids = set(mint(ctl, hglib.USER[0], MANY))
        finally:
            ctl.close()
        yield hg


def test_token_list_lists_every_token_once(big):
    s = big.login(*hglib.USER)
    bound = s.post("/api/session/tokens").json()["id"]
    out = big.hgctl_ok("token", "list").stdout
    ids = table_ids(out, "ID\tUSER\tSESSION\tCREATED")
    assert len(ids) == len(set(ids)), "a token listed twice"
    assert set(ids) >= big.ids | {bound}, len(set(ids))
    assert ids == sorted(ids)
    doc = big.hgctl_json("token", "list")
    assert [t["id"] for t in doc] == ids
    mine = [t for t in doc if t["id"] == bound]
    assert len(mine) == 1 and mine[0]["session_id"], mine


def test_pages_fit_a_datagram_and_follow_each_other(big):
    ctl = Control(big)
    try:
        items, sizes = walk(ctl, "token_list")
        ids = [t["id"] for t in items]
        assert len(ids) == len(set(ids)) and ids == sorted(ids)
        assert set(ids) >= big.ids
        # The byte bound, not the count, ends a page of 1000 asked for.
        assert len(sizes) > 2 and max(sizes) < 1000, sizes
        items, sizes = walk(ctl, "token_list", limit=7)
        assert [t["id"] for t in items] == ids
        assert all(n == 7 for n in sizes[:-1]) and 1 <= sizes[-1] <= 7, sizes
        r = ctl.call({"type": "token_list", "after": "f" * 16})
        assert r["result"] == {"items": []}, r
    finally:
        ctl.close()


def test_paging_while_rows_come_and_go(big):
    """A token that lives through the whole listing is listed once; one
    revoked before its page is not; new ones never repeat one."""
    ctl = Control(big)
    side = Control(big)
    try:
        before = [t["id"] for t in walk(ctl, "token_list")[0]]
        doomed = set(before[len(before) // 2::50])
        added = []

        def churn(page):
            for tid in list(doomed)[:3]:
                r = side.call({"type": "token_revoke", "token": tid})
                assert "result" in r, r
                doomed.discard(tid)
                big.ids.discard(tid)
            added.extend(mint(side, hglib.USER[0], 5))

        revoked = set(doomed)
        items, sizes = walk(ctl, "token_list", limit=100, between=churn)
        ids = [t["id"] for t in items]
        assert len(ids) == len(set(ids)), "a token listed twice"
        assert ids == sorted(ids)
        survivors = set(before) - revoked
        assert survivors <= set(ids), len(survivors - set(ids))
        gone = revoked - doomed      # revoked during the walk
        assert gone, "nothing revoked between pages"
        big.ids.update(added)
    finally:
        ctl.close()
        side.close()


@pytest.mark.parametrize("type", ["token_list", "session_list"])
@pytest.mark.parametrize("field,value,why", [
    ("limit", 0, "limit"),
    ("limit", -1, "limit"),
    ("limit", 1001, "limit"),
    ("limit", 10 ** 15, "limit"),
    ("limit", "10", "limit"),
    ("limit", 1.5, "limit"),
    ("after", 12, "after"),
    ("after", "zz", "after"),
    ("after", "G" * 32, "after"),
    ("after", ["0" * 16], "after"),
])
def test_hostile_page_requests(big, type, field, value, why):
    ctl = Control(big)
    try:
        r = ctl.call({"type": type, field: value})
        assert r["error"]["code"] == "bad_request", r
        assert why in r["error"]["message"], r
        # brokerd stays up, and so does this connection.
        assert "result" in ctl.call({"type": type, "limit": 1})
    finally:
        ctl.close()
    assert big.alive("brokerd")


def seed_sessions(hg, user, n):
    """Write n live login sessions of user into the store, as earlier runs
    of brokerd would have left them (brokerd stopped); their ids."""
    assert hg.stop("brokerd") == 0
    path = os.path.join(hg.state, "store.db")
    st = os.stat(path)
    now = int(time.time())
    rows = [(secrets.token_hex(16), secrets.token_hex(32),
             secrets.token_hex(32), user, now, now, now + 3600)
            for _ in range(n)]
    db = sqlite3.connect(path)
    try:
        db.executemany("INSERT INTO sessions (id, token_hash, csrf_hash, "
                       "user, created, last_seen, expires) VALUES "
                       "(?, ?, ?, ?, ?, ?, ?)", rows)
        db.commit()
    finally:
        db.close()
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(path + suffix):
            os.chown(path + suffix, st.st_uid, st.st_gid)
    hg.start("brokerd")
    hg.wait_healthy()
    hg.wait_control()
    return {r[0] for r in rows}


def test_session_list_lists_every_session_once(big):
    seeded = seed_sessions(big, hglib.USER[0], MANY)
    logins = set()
    for _ in range(20):
        big.login(*hglib.ADMIN)
    for s in big.hgctl_json("session", "list"):
        if s["user"] == hglib.ADMIN[0]:
            logins.add(s["id"])
    assert len(logins) >= 20, len(logins)
    out = big.hgctl_ok("session", "list").stdout
    ids = table_ids(out, "ID\tUSER\tMODE\tDIRECT_UNTIL\tDIRECT_LEFT\t"
                         "CREATED\tLAST_SEEN\tEXPIRES")
    assert len(ids) == len(set(ids)), "a session listed twice"
    assert set(ids) >= seeded | logins
    assert ids == sorted(ids)
    doc = big.hgctl_json("session", "list")
    assert [s["id"] for s in doc] == ids
    assert all(s["mode"] == "sandbox" for s in doc)
    ctl = Control(big)
    try:
        items, sizes = walk(ctl, "session_list")
        assert [s["id"] for s in items] == ids
        assert len(sizes) > 2 and max(sizes) < 1000, sizes
    finally:
        ctl.close()
