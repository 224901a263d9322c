#!/usr/bin/python3
"""Write the seed corpora of the fuzz targets that take structured input
(tests/fuzz/corpus/TARGET/NAME): valid requests and messages as the tests
and docs have them, and edge cases. Run from the repository root; the
files it writes are committed, so a run only matters after a change here.
Parts of one input are separated by a 0xff byte where a target says so."""
import hashlib
import json
import os
import struct

SEP = b"\xff"
ROOT = "tests/fuzz/corpus"


def put(target, name, data):
    d = os.path.join(ROOT, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def j(o):
    return json.dumps(o, separators=(",", ":")).encode()


def http(method, target, body=None, headers=(), host="127.0.0.1:8080"):
    h = "%s %s HTTP/1.1\r\nHost: %s\r\n" % (method, target, host)
    for k, v in headers:
        h += "%s: %s\r\n" % (k, v)
    if body is not None:
        if isinstance(body, str):
            body = body.encode()
        h += "Content-Type: application/json\r\nContent-Length: %d\r\n" % len(body)
        return (h + "\r\n").encode() + body
    return (h + "\r\n").encode()


AUTH = [("Cookie", "hg_session=hgs_" + "a" * 43),
        ("X-CSRF-Token", "c" * 43)]
BEARER = [("Authorization", "Bearer hgt_" + "b" * 43)]
ERR = j({"error": {"code": "forbidden", "message": "no"}})
OK = j({"result": {}})

# fuzz_api: request SEP brokerd's answer SEP stdout SEP stderr
api = {
    "login": (http("POST", "/api/login", j({"username": "alice", "password": "correct horse"})),
              j({"result": {"user": "alice", "role": "admin", "cookie": "hgs_x", "csrf": "y",
                            "expires": 1767229200}})),
    "login_refused": (http("POST", "/api/login", j({"username": "alice", "password": "x"})),
                      j({"error": {"code": "rate_limited", "message": "slow down",
                                   "retry_after": 30}})),
    "login_types": (http("POST", "/api/login", j({"username": 1, "password": None})), None),
    "login_nul": (http("POST", "/api/login", b'{"username":"al\\u0000ice","password":"p"}'), None),
    "login_trailing": (http("POST", "/api/login", b'{"username":"a","password":"p"} {}'), None),
    "login_array": (http("POST", "/api/login", b'[1,2,3]'), None),
    "login_deep": (http("POST", "/api/login", b'{"username":' + b'[' * 40 + b']' * 40 + b'}'), None),
    "logout": (http("POST", "/api/logout", headers=AUTH), OK),
    "status": (http("GET", "/api/status", headers=BEARER),
               j({"result": {"user": "alice", "mode": "sandbox"}, "user": "alice"})),
    "status_head": (http("HEAD", "/api/status", headers=AUTH), OK),
    "status_noreply": (http("GET", "/api/status", headers=AUTH), None),
    "status_badreply": (http("GET", "/api/status", headers=AUTH), j({"result": [1]})),
    "raw_escaped_key": (http("GET", "/api/status", headers=AUTH),
                        b'{"id":3,"user":"alice","\\u0072esult":{"a":1},"result":{"b":"}"}}'),
    "raw_spaces": (http("GET", "/api/terminals", headers=AUTH),
                   b' {\n "user" : "a\\"b" ,\t"result" : { "x" : [1, {"y": "\\\\"}], "z": null } , "id": 4 }'),
    "raw_result_last": (http("GET", "/api/execution-mode", headers=AUTH),
                        b'{"id":5,"user":"alice","result":{"mode":"sandbox","nested":{"a":{"b":{}}}}}'),
    "raw_result_twice": (http("GET", "/api/execution-mode", headers=AUTH),
                         b'{"result":{"a":1},"id":5,"result":{"b":2}}'),
    "raw_trailing": (http("GET", "/api/status", headers=AUTH), b'{"result":{}} x'),
    "healthz": (http("GET", "/healthz"), j({"result": {"ok": True, "brokerd": True}})),
    "healthz_down": (http("GET", "/healthz"), None),
    "token_mint": (http("POST", "/api/session/tokens", b"{}", headers=AUTH),
                   j({"result": {"token": "hgt_" + "d" * 43, "id": "0" * 16}})),
    "session_tokens": (http("GET", "/api/session/tokens", headers=AUTH),
                       j({"result": {"tokens": [{"id": "0" * 16, "created": "2026-12-01T19:45:00Z"}]}})),
    "session_token_revoke": (http("DELETE", "/api/session/tokens/0123456789abcdef", headers=AUTH),
                             j({"result": {"id": "0123456789abcdef", "revoked": True}})),
    "session_token_revoke_bad": (http("DELETE", "/api/session/tokens/0123456789ABCDEF/x", headers=AUTH),
                                 None),
    "mode_set": (http("POST", "/api/execution-mode", j({"mode": "direct"}), headers=AUTH), OK),
    "mode_get": (http("GET", "/api/execution-mode", headers=AUTH), OK),
    "permission_set": (http("POST", "/api/permission", j({"permission": "read-only"}), headers=AUTH), OK),
    "run_command": (http("POST", "/api/run_command",
                         j({"command": "ls -la", "cwd": "src", "timeout": 30,
                            "env": {"LANG": "C.UTF-8"}, "stdin": "input\n"}), headers=AUTH),
                    j({"result": {"exit_code": 0, "signal": None, "truncated": False,
                                  "timed_out": False, "oom": False, "duration_ms": 12,
                                  "stdout_len": 6, "stderr_len": 4, "mode": "sandbox",
                                  "backend": "bwrap"}}),
                    b"total\n", b"\xc3(\xed\xa0\x80\xf4\x90\x80\x80"),
    "run_command_long": (http("POST", "/api/run_command", j({"command": "x" * 40000}), headers=AUTH), None),
    "run_command_env": (http("POST", "/api/run_command", j({"command": "env", "env": {"A": ["b"]},
                                                            "timeout": "9"}), headers=AUTH), None),
    "run_stdin_type": (http("POST", "/api/run_command", j({"command": "cat", "stdin": 5}), headers=AUTH), None),
    "run_python": (http("POST", "/api/run_python", j({"code": "print(1)", "timeout": 10}), headers=AUTH),
                   j({"result": {"exit_code": 1, "stdout_len": 2, "stderr_len": 0}}), b"1\n", b""),
    "run_python_nocode": (http("POST", "/api/run_python", b"{}", headers=AUTH), None),
    "terminal_create": (http("POST", "/api/terminals", j({"cols": 120, "rows": 40}), headers=AUTH),
                        j({"result": {"id": "0123456789abcdef", "mode": "sandbox"}})),
    "terminal_create_empty": (http("POST", "/api/terminals", headers=AUTH), OK),
    "terminal_list": (http("GET", "/api/terminals", headers=AUTH), j({"result": {"terminals": []}})),
    "terminal_delete": (http("DELETE", "/api/terminals/0123456789abcdef", headers=AUTH), OK),
    "terminal_delete_bad": (http("DELETE", "/api/terminals/0123456789ABCDEF", headers=AUTH), None),
    "terminal_delete_host": (http("DELETE", "/api/terminals/h2.0123456789abcdef", headers=AUTH),
                             j({"error": {"code": "misdirected",
                                          "message": "terminal h2.0123456789abcdef is served by host h2"}})),
    "terminal_delete_lost": (http("DELETE", "/api/admin/terminals/web-3.0123456789abcdef", headers=AUTH),
                             j({"error": {"code": "gone", "message": "terminal web-3.0123456789abcdef was "
                                          "lost with host web-3 at 2026-12-02T01:00:00Z"}})),
    "terminal_delete_badhost": (http("DELETE", "/api/terminals/H2..0123456789abcdef", headers=AUTH), None),
    "admin_kill": (http("DELETE", "/api/admin/terminals/0123456789abcdef", headers=AUTH), ERR),
    "admin_revert": (http("POST", "/api/admin/sessions/" + "0123456789abcdef" * 2 + "/revert", headers=AUTH), OK),
    "admin_audit": (http("GET", "/api/admin/audit?user=alice&type=login&since=2026-01-01T00:00:00Z"
                         "&limit=50&request_id=%41b+c&x=1", headers=AUTH), j({"result": {"records": []}})),
    "admin_audit_bad": (http("GET", "/api/admin/audit?limit=0&user=%zz&session=%00", headers=AUTH), None),
    "admin_recording": (http("GET", "/api/admin/recordings/0123456789abcdef?offset=1024", headers=AUTH),
                        j({"result": {"data": "", "next": 0, "eof": True}})),
    "admin_recording_bad": (http("GET", "/api/admin/recordings/0123456789abcdef/x?offset=-1", headers=AUTH), None),
    "admin_sessions": (http("GET", "/api/admin/sessions", headers=AUTH), OK),
    "egress_get": (http("GET", "/api/admin/egress", headers=AUTH),
                   j({"result": {"allow": ["pypi.org"], "deny": [], "ports": [443, 80],
                                 "users": {"bob": ["*.example.com"]}, "sessions": {}}})),
    "egress_set_user": (http("PUT", "/api/admin/egress/users/bob", j({"allow": ["a.example.com",
                                                                             "*.example.org"]}),
                             headers=AUTH),
                        j({"result": {"scope": "user", "target": "bob", "allow": ["a.example.com"]}})),
    "egress_set_session": (http("PUT", "/api/admin/egress/sessions/" + "0123456789abcdef" * 2,
                                j({"allow": []}), headers=AUTH), ERR),
    "egress_set_bad": (http("PUT", "/api/admin/egress/users/..%2Fx", j({"allow": [1, None, "a\u0000"]}),
                            headers=AUTH), None),
    "egress_set_items": (http("PUT", "/api/admin/egress/sessions/" + "0" * 32,
                              j({"allow": ["x"] * 70}), headers=AUTH), None),
    "method_405": (http("PUT", "/api/login", b"{}"), None),
    "unknown_404": (http("GET", "/api/nothing/here", headers=AUTH), None),
    "expect_continue": (http("POST", "/api/login", j({"username": "a", "password": "b"}),
                             headers=[("Expect", "100-continue")]), OK),
    "chunked": (b"POST /api/login HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
                b"5\r\n{\"use\r\n0\r\n\r\n", None),
    "pipelined": (http("GET", "/api/status", headers=AUTH) + http("GET", "/api/terminals", headers=AUTH), OK),
    "events": (http("GET", "/api/events", headers=AUTH), j({"result": {"user": "alice"}})),
    "ws_noupgrade": (http("GET", "/api/terminals/0123456789abcdef/ws", headers=AUTH), None),
}
# The workspace file API: PUT is checked (file_write with check) before its
# body is read, then written; both get the same answer.
WROTE = j({"result": {"path": "a.txt", "size": 5, "mtime": 1767225600, "created": True,
                      "mode": "sandbox", "permission": "workspace-write"}})
READ_ONLY = j({"error": {"code": "forbidden", "message": "this session's permission is read-only"}})
FILE = j({"result": {"path": "a.txt", "size": 5, "mtime": 1767225600, "mode": "sandbox",
                     "permission": "workspace-write"}})
LISTING = j({"path": "", "entries": [{"name": "a.txt", "type": "file", "size": 5,
                                      "mtime": 1767225600}], "truncated": False})


def raw_put(target, body, headers=()):
    h = "PUT %s HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n" % target
    for k, v in list(AUTH) + list(headers):
        h += "%s: %s\r\n" % (k, v)
    return (h + "\r\n").encode() + body


api.update({
    "files_put": (raw_put("/api/files/a.txt", b"hello", [("Content-Length", "5")]), WROTE),
    "files_put_bearer": (http("PUT", "/api/files/dir/b.bin", b"\x00\x01binary", headers=BEARER), WROTE),
    "files_put_expect": (raw_put("/api/files/a.txt", b"", [("Content-Length", "5"),
                                                            ("Expect", "100-continue")]), WROTE),
    "files_put_expect_body": (raw_put("/api/files/a.txt", b"hello", [("Content-Length", "5"),
                                                                      ("Expect", "100-continue")]), WROTE),
    "files_put_nolen": (raw_put("/api/files/a.txt", b"hello"), WROTE),
    "files_put_chunked": (raw_put("/api/files/a.txt", b"5\r\nhello\r\n0\r\n\r\n",
                                  [("Transfer-Encoding", "chunked")]), WROTE),
    "files_put_too_large": (raw_put("/api/files/a.txt", b"x" * 100, [("Content-Length", "262145")]), WROTE),
    "files_put_short": (raw_put("/api/files/a.txt", b"hel", [("Content-Length", "5")]), WROTE),
    "files_put_refused": (raw_put("/api/files/a.txt", b"hello", [("Content-Length", "5")])
                          + http("GET", "/api/files/", headers=AUTH), READ_ONLY),
    "files_put_refused_big": (raw_put("/api/files/a.txt", b"y" * 1000, [("Content-Length", "100000")]),
                              READ_ONLY),
    "files_put_refused_expect": (raw_put("/api/files/a.txt", b"", [("Content-Length", "5"),
                                                                    ("Expect", "100-continue")]),
                                 j({"error": {"code": "rate_limited", "message": "slow down",
                                              "retry_after": 3}})),
    "files_put_noanswer": (raw_put("/api/files/a.txt", b"hello", [("Content-Length", "5")]), None),
    "files_put_pipelined": (raw_put("/api/files/a.txt", b"hello", [("Content-Length", "5")])
                            + raw_put("/api/files/b.txt", b"world", [("Content-Length", "5")]), WROTE),
    "files_mkdir": (raw_put("/api/files/d/e/", b"", [("Content-Length", "0")]),
                    j({"result": {"path": "d/e", "created": True, "mode": "sandbox",
                                  "permission": "workspace-write"}})),
    "files_mkdir_body": (raw_put("/api/files/d/", b"xy", [("Content-Length", "2")]), WROTE),
    "files_put_root": (raw_put("/api/files/", b"xy", [("Content-Length", "2")]), WROTE),
    "files_put_hostile": (raw_put("/api/files/a/%2e%2e/%2e%2e/etc/passwd", b"x",
                                  [("Content-Length", "1")]), WROTE),
    "files_get_hostile": (http("GET", "/api/files/a//b%00/../" + "c" * 300, headers=AUTH), FILE),
    "files_get_pct": (http("GET", "/api/files/%E2%82%AC%20x%zz", headers=AUTH), FILE),
    "files_read": (http("GET", "/api/files/a.txt", headers=AUTH), FILE, b"hello"),
    "files_read_nofd": (http("GET", "/api/files/a.txt", headers=AUTH), FILE),
    "files_head": (http("HEAD", "/api/files/dir/x.tar.gz", headers=AUTH), FILE, b"hello"),
    "files_list": (http("GET", "/api/files/", headers=AUTH),
                   j({"result": {"path": "", "count": 1, "truncated": False, "mode": "sandbox",
                                 "permission": "workspace-write"}}), LISTING),
    "files_list_dir": (http("GET", "/api/files/dir/", headers=BEARER),
                       j({"result": {"path": "dir", "count": 0, "truncated": False,
                                     "mode": "direct", "permission": "read-only"}}), b"{}"),
    "files_delete": (http("DELETE", "/api/files/a.txt", headers=AUTH),
                     j({"result": {"path": "a.txt", "deleted": True, "mode": "sandbox",
                                   "permission": "workspace-write"}})),
    "files_delete_root": (http("DELETE", "/api/files/", headers=AUTH), OK),
    "files_delete_refused": (http("DELETE", "/api/files/full", headers=AUTH),
                             j({"error": {"code": "conflict", "message": "not empty"}})),
    "files_post": (http("POST", "/api/files/a.txt", b"{}", headers=AUTH), OK),
})
for name, parts in api.items():
    req, reply = parts[0], parts[1]
    data = req
    if reply is not None or len(parts) > 2:
        data += SEP + (reply or b"")
    for p in parts[2:]:
        data += SEP + p
    put("fuzz_api", name, data)

# fuzz_ws: an upgrade head, then raw client frames
WS_HEAD = ("GET /api/terminals/0123456789abcdef/ws HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n"
           "Upgrade: websocket\r\nConnection: keep-alive, Upgrade\r\n"
           "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
           "Origin: http://127.0.0.1:8080\r\nCookie: hg_session=hgs_x\r\n\r\n").encode()


def frame(op, payload=b"", fin=True, mask=b"\x37\xfa\x21\x3d", masked=True, length=None):
    if isinstance(payload, str):
        payload = payload.encode()
    n = len(payload) if length is None else length
    b0 = (0x80 if fin else 0) | op
    m = 0x80 if masked else 0
    if n < 126:
        h = bytes([b0, m | n])
    elif n < 65536:
        h = bytes([b0, m | 126]) + struct.pack(">H", n)
    else:
        h = bytes([b0, m | 127]) + struct.pack(">Q", n)
    if masked:
        h += mask
        payload = bytes(c ^ mask[i % 4] for i, c in enumerate(payload))
    return h + payload


RESIZE = j({"type": "resize", "cols": 120, "rows": 40})
ws = {
    "resize": frame(1, RESIZE),
    "resize_limits": frame(1, j({"type": "resize", "cols": 1000, "rows": 1})) +
                     frame(1, j({"type": "resize", "cols": 0, "rows": 5000})) +
                     frame(1, j({"type": "resize", "cols": "80", "rows": 24.5})),
    "control_junk": frame(1, "not json") + frame(1, "[1,2]") + frame(1, j({"type": "other"})) +
                    frame(1, b"{\"type\":\"resize\"" + b" " * 5000 + b"}"),
    "input": frame(2, b"ls -la\r") + frame(2, b"\x03\x04\x1b[A"),
    "fragmented": frame(2, b"ec", fin=False) + frame(0, b"ho ", fin=False) + frame(0, b"hi\r"),
    "fragmented_text": frame(1, b'{"type":"res', fin=False) + frame(9, b"p") +
                       frame(0, b'ize","cols":90,"rows":30}'),
    "ping_pong": frame(9, b"ping") + frame(10, b"pong"),
    "close": frame(2, b"x") + frame(8, struct.pack(">H", 1000) + b"bye"),
    "close_bad": frame(8, b"\x03"),
    "too_big": frame(2, b"", length=1 << 62)[:14],
    "too_big_126": frame(2, b"a" * 300),
    "len_127": frame(2, b"b" * 100, length=100000)[:114],
    "len_127_text": frame(1, b"", length=70000)[:14] + b"{}",
    "unmasked": frame(2, b"abc", masked=False),
    "ping_long": frame(9, b"p" * 200),
    "reserved_op": frame(3, b"?") + frame(2, b"after"),
    "rsv_bits": bytes([0xc2, 0x81]) + b"\x00\x00\x00\x00" + b"a",
    "bad_utf8": frame(1, b"\xc3\x28\xed\xa0\x80"),
    "many": b"".join(frame(2, bytes([i])) for i in range(64)),
    "half_header": frame(2, b"abcd")[:3],
}
for name, frames in ws.items():
    put("fuzz_ws", name, WS_HEAD + frames)
put("fuzz_ws", "head_evil_origin", WS_HEAD.replace(b"Origin: http://", b"Origin: evil://") + frame(1, RESIZE))
put("fuzz_ws", "head_other_host", WS_HEAD.replace(b"Origin: http://127.0.0.1:8080", b"Origin: http://example.com"))
put("fuzz_ws", "head_no_origin", WS_HEAD.replace(b"Origin: http://127.0.0.1:8080\r\n", b"") + frame(2, b"id\r"))
put("fuzz_ws", "head_configured", WS_HEAD.replace(b"Origin: http://127.0.0.1:8080", b"Origin: https://panel.example.com") + frame(1, RESIZE))
put("fuzz_ws", "head_localhost", WS_HEAD.replace(b"Origin: http://127.0.0.1:8080", b"Origin: http://localhost:8080"))
put("fuzz_ws", "head_https", WS_HEAD.replace(b"Origin: http://", b"Origin: https://"))
put("fuzz_ws", "head_port", WS_HEAD.replace(b"Origin: http://127.0.0.1:8080", b"Origin: http://127.0.0.1:8081"))
put("fuzz_ws", "head_version", WS_HEAD.replace(b"Version: 13", b"Version: 8"))
put("fuzz_ws", "head_key", WS_HEAD.replace(b"dGhlIHNhbXBsZSBub25jZQ==", b"dGhlIHNhbXBsZSBub25jZQ"))
put("fuzz_ws", "head_connection", WS_HEAD.replace(b"keep-alive, Upgrade", b"keep-alive,upgrade ,x"))
put("fuzz_ws", "head_bad_id", WS_HEAD.replace(b"0123456789abcdef/ws", b"0123456789abcdeg/ws"))

# fuzz_sse: Last-Event-ID SEP subscribe answer SEP event...
SID = "0123456789abcdef" * 2
SUB = j({"result": {"user": "alice", "session": SID, "complete": True, "last": 7,
                    "missed": [{"type": "event", "seq": 6, "event": "mode_changed",
                                "user": "alice", "session": SID, "data": {"mode": "direct"}}]}})


def ev(seq, name, data=None, user="alice", session=SID):
    o = {"type": "event", "seq": seq, "event": name, "user": user, "data": data or {}}
    if session is not None:
        o["session"] = session
    return j(o)


sse = {
    "plain": b"5",
    "zero": b"0",
    "big": b"9223372036854775807",
    "overflow": b"99999999999999999999999",
    "negative": b"-3",
    "junk": b"12abc",
    "spaces": b"  42  ",
    "empty": b"",
    "query": b"?17",
    "query_amp": b"?17&x=1",
    "query_junk": b"?x17",
    "resume": b"5" + SEP + SUB + SEP + ev(8, "terminal_created", {"id": "0123456789abcdef"}),
    "resync": b"3" + SEP + j({"result": {"user": "alice", "session": SID, "complete": False,
                                         "missed": []}}),
    "refused": b"1" + SEP + ERR,
    "noreply": b"1" + SEP,
    "malformed": b"1" + SEP + j({"result": {"session": SID}}),
    "events": b"2" + SEP + SEP.join([b"", ev(3, "mode_changed", {"mode": "sandbox"}),
                                     ev(4, "permission_changed", session=None),
                                     ev(5, "other_user", user="bob"),
                                     ev(6, "session_ended"), ev(7, "after_end")]),
    "revoked": b"2" + SEP + SEP.join([b"", ev(3, "token_revoked", {"id": "0123456789abcdef"}),
                                      j({"type": "event", "seq": 4, "event": "token_revoked",
                                         "user": "alice", "session": SID, "token": "ab" * 32,
                                         "data": {"id": "0123456789abcdef"}}),
                                      ev(5, "mode_changed", {"mode": "direct"})]),
    "events_odd": b"2" + SEP + SEP.join([b"", j({"type": "event"}), j({"event": 5, "user": "alice"}),
                                         j({"type": "event", "event": "x", "user": "alice",
                                            "seq": "7", "data": [1, {"a": None}]}), b"[]"]),
}
for name, data in sse.items():
    put("fuzz_sse", name, data)

# fuzz_static: target SEP method SEP If-None-Match
static = {
    "root": b"/",
    "index": b"/index.html",
    "asset": b"/assets/index-AbCdEf12.js",
    "asset_css": b"/assets/app.css",
    "asset_nested": b"/assets/player/term-0123456789.wasm",
    "asset_missing": b"/assets/missing-12345678.js",
    "nested": b"/docs/readme.txt",
    "spa_route": b"/terminals/0123456789abcdef",
    "query": b"/index.html?v=1&x=%2e%2e",
    "dotdot": b"/../../etc/passwd",
    "dotdot_assets": b"/assets/../index.html",
    "encoded": b"/%2e%2e/%2e%2e/etc/passwd",
    "double_slash": b"//assets//app.css",
    "hidden": b"/.secret",
    "hidden_assets": b"/assets/.env",
    "symlink": b"/passwd",
    "backslash": b"/assets\\..\\index.html",
    "long": b"/" + b"a/" * 1000,
    "head": b"/favicon.ico" + SEP + b"HEAD",
    "post": b"/index.html" + SEP + b"POST",
    "etag_hit": b"/index.html" + SEP + b"GET" + SEP + b'"' + b"0" * 16 + b'"',
    "etag_star": b"/assets/app.css" + SEP + b"GET" + SEP + b"*",
    # the fixture's own ETag (sha256 of the file, 16 hex digits): a 304
    "etag_match": b"/index.html" + SEP + b"GET" + SEP + b'"' + hashlib.sha256(
        b"<!doctype html><title>hostgate</title>").hexdigest()[:16].encode() + b'"',
    "absolute": b"http://127.0.0.1:8080/index.html",
    "api": b"/api",
    # the MCP endpoint and its metadata are not the panel's
    "mcp": b"/mcp",
    "mcp_metadata": b"/.well-known/oauth-protected-resource/mcp",
    "fragment": b"/index.html#top",
    # CR LF in the target pipelines more requests: each answer is for its own
    "pipelined": b"/assets/app.css HTTP/1.1\r\nHost: h\r\n\r\nHEAD /favicon.ico",
    # the long campaign's input: an asset, then a bare CR and a bad version
    "pipelined_bare_cr": b"/assets/index-AbCdEf12.js HTTP/1.1\r\n\r\n\rGET / x",
    "pipelined_close": b"/index.html HTTP/1.0\r\n\r\nGET /assets/app.css",
    "pipelined_body": b"/favicon.ico HTTP/1.1\r\nContent-Length: 4\r\n\r\n"
                      b"abcdGET /assets/missing.js",
    "pipelined_api": b"/docs/readme.txt HTTP/1.1\r\n\r\nGET /api/status HTTP/1.1\r\n"
                     b"\r\nGET /passwd",
    "pipelined_refused": b"/favicon.ico HTTP/1.1\r\n\r\nPOST /index.html HTTP/1.1\r\n"
                         b"\r\nget /",
}
for name, data in static.items():
    put("fuzz_static", name, data)

# fuzz_spawn: one message from brokerd to sandboxd
SPAWN = {"type": "spawn", "id": 1, "kind": "command", "mode": "sandbox",
         "permission": "workspace-write", "user": "alice", "session": SID,
         "request_id": "0123456789abcdef", "argv": ["/bin/sh", "-c", "ls"],
         "env": ["LANG=C.UTF-8"], "cwd": "src", "timeout_ms": 30000,
         "output_cap": 1048576, "cols": 80, "rows": 24, "term": "xterm-256color",
         "uid": 1879048200, "gid": 1879048200}


def spawn(**kw):
    o = dict(SPAWN)
    for k, v in kw.items():
        if v is None:
            o.pop(k, None)
        else:
            o[k] = v
    return j(o)


spawns = {
    "command": spawn(),
    "terminal": spawn(kind="terminal", argv=["/bin/bash", "-l"], cwd=None),
    "direct_grant": spawn(mode="direct", deadline_ms=1767229200000, permission="workspace-write+network"),
    "direct_past": spawn(mode="direct", deadline_ms=1000),
    "read_only_abs_cwd": spawn(permission="read-only", cwd="/tmp"),
    "cwd_up": spawn(cwd="../.."),
    "cwd_symlink": spawn(cwd="out"),
    "cwd_symlink_up": spawn(cwd="up/ws"),
    "cwd_file": spawn(cwd="file"),
    "cwd_nested": spawn(cwd="src/lib/"),
    "cwd_dot": spawn(cwd="./src"),
    "no_uid": spawn(uid=None, gid=None),
    "root_uid": spawn(uid=0, gid=0),
    "mapped_uid": spawn(uid=1000, gid=1000),
    "bad_types": spawn(argv="ls", env={"A": "b"}, timeout_ms="1", cols=-1),
    "argv_nul": b'{"type":"spawn","id":2,"kind":"command","mode":"sandbox","permission":"read-only",'
                b'"user":"alice","argv":["a\\u0000b"],"uid":1879048200}',
    "argv_empty": spawn(argv=[]),
    "env_many": spawn(env=["X%d=1" % i for i in range(70)]),
    "user_bad": spawn(user="../root"),
    "user_dot": spawn(user=".."),
    "reqid_bad": spawn(request_id="xyz"),
    "permission_bad": spawn(permission="all"),
    "deadline_neg": spawn(deadline_ms=-5),
    "attach": j({"type": "attach", "id": 3, "proc": "0123456789abcdef", "request_id": "0123456789abcdef"}),
    "hangup": j({"type": "hangup", "id": 4, "proc": "ffffffffffffffff"}),
    "list": j({"type": "list", "id": 5}),
    "kill_session": j({"type": "kill_session", "id": 6, "session": SID, "mode": "direct"}),
    "grant": j({"type": "grant", "id": 7, "session": SID, "user": "alice", "deadline_ms": 1767229200000}),
    "grant_zero": j({"type": "grant", "id": 8, "session": SID, "user": "alice", "deadline_ms": 0}),
    "kill_user": j({"type": "kill_user", "id": 9, "user": "alice"}),
    "usage": j({"type": "usage", "id": 10, "user": "alice"}),
    "recording": j({"type": "recording", "id": 11, "recording": "0123456789abcdef"}),
    "recording_bad": j({"type": "recording", "id": 12, "recording": "../../etc/passwd"}),
    "health": j({"type": "health", "id": 13}),
    "unknown": j({"type": "nope", "id": 14}),
    "no_id": j({"type": "spawn"}),
    "not_object": b"[1]",
    # the workspace file operations (sandboxd/files.c)
    "file_read": j({"type": "file", "id": 15, "op": "read", "user": "alice", "path": "file",
                    "uid": 1879048200, "gid": 1879048200}),
    "file_read_out": j({"type": "file", "id": 16, "op": "read", "user": "alice", "path": "out/passwd",
                        "uid": 1879048200, "gid": 1879048200}),
    "file_list_up": j({"type": "file", "id": 17, "op": "list", "user": "alice", "path": "up/",
                       "uid": 1879048200, "gid": 1879048200}),
    "file_list": j({"type": "file", "id": 18, "op": "list", "user": "alice", "path": "src/",
                    "uid": 1879048200, "gid": 1879048200}),
    "file_write_nofd": j({"type": "file", "id": 19, "op": "write", "user": "alice", "path": "a/b",
                          "size": 3, "uid": 1879048200, "gid": 1879048200}),
    "file_delete_dotdot": j({"type": "file", "id": 20, "op": "delete", "user": "alice", "path": "src/../..",
                             "uid": 1879048200, "gid": 1879048200}),
    "file_mkdir_noid": j({"type": "file", "id": 21, "op": "mkdir", "user": "alice", "path": "new/dir/"}),
}
for name, data in spawns.items():
    put("fuzz_spawn", name, data)


def sha(s):
    return hashlib.sha256(s.encode()).hexdigest()


# fuzz_session: sessions.json SEP cookie SEP bearer SEP csrf
NOW = 1767225600  # the fuzz targets' fixed clock (fuzz_det.c)
COOKIE, CSRF, BEARER = "hgs_" + "k" * 43, "x" * 43, "hgt_" + "t" * 43
SESS = {"id": "a1" * 16, "token_hash": sha(COOKIE), "csrf_hash": sha(CSRF), "user": "alice",
        "created": NOW - 60, "last_seen": NOW - 5, "expires": NOW + 3600}
TOK = {"id": "b2" * 8, "hash": sha(BEARER), "user": "alice", "session_id": "a1" * 16,
       "created": NOW - 30}
STOK = dict(TOK, id="c3" * 8, hash=sha("hgt_standalone"), session_id="")


def store(sessions, tokens, version=1):
    return json.dumps({"version": version, "sessions": sessions, "tokens": tokens}, indent=2).encode()


def sess_input(st, cookie=COOKIE, bearer=BEARER, csrf=CSRF):
    return SEP.join([st, cookie.encode(), bearer.encode(), csrf.encode()])


sessions = {
    "valid": sess_input(store([SESS], [TOK, STOK])),
    "standalone": sess_input(store([], [STOK]), bearer="hgt_standalone"),
    "permission": sess_input(store([dict(SESS, permission="read-only", direct_until=NOW + 600)], [])),
    "permission_bad": sess_input(store([dict(SESS, permission="root", direct_until=-1)], [])),
    "expired": sess_input(store([dict(SESS, expires=NOW - 1)], [TOK])),
    "wrong_csrf": sess_input(store([SESS], [TOK]), csrf="nope"),
    "wrong_cookie": sess_input(store([SESS], [TOK]), cookie="hgs_other", bearer="hgt_other"),
    "bearer_noprefix": sess_input(store([SESS], [dict(TOK, hash=sha("t" * 47))]), bearer="t" * 47),
    "empty_store": sess_input(b""),
    "empty_lists": sess_input(store([], [])),
    "version2": sess_input(store([SESS], [], version=2)),
    "no_tokens": sess_input(json.dumps({"version": 1, "sessions": []}).encode()),
    "dup_session": sess_input(store([SESS, SESS], [])),
    "dup_token": sess_input(store([SESS], [TOK, TOK])),
    "orphan_token": sess_input(store([], [TOK])),
    "bad_hex": sess_input(store([dict(SESS, id="zz" * 16)], [])),
    "bad_user": sess_input(store([dict(SESS, user="../x")], [])),
    "long_user": sess_input(store([dict(SESS, user="u" * 300)], [])),
    "bad_types": sess_input(store([dict(SESS, created="now", expires=1.5)], [dict(TOK, session_id=None)])),
    "not_object": sess_input(b"[]"),
    "truncated": sess_input(store([SESS], [TOK])[:80]),
    "garbage": sess_input(b"\x00\x01{version"),
    "huge_ints": sess_input(store([dict(SESS, expires=2**63 - 1, created=-2**63)], [])),
}
for name, data in sessions.items():
    put("fuzz_session", name, data)

# fuzz_auth: users.json SEP name
HASH = "$argon2id$v=19$m=19456,t=2,p=1$c2FsdHNhbHRzYWx0c2FsdA$aGFzaGhhc2hoYXNoaGFzaGhhc2hoYXNoaGFzaGhhc2g"
ALICE = {"name": "alice", "role": "admin", "hash": HASH, "created": NOW - 86400,
         "uid": 1879048193, "gid": 1879048193}
BOB = {"name": "bob", "role": "user", "hash": HASH, "created": NOW}


def users(lst, version=1):
    return json.dumps({"version": version, "users": lst}, indent=2).encode()


auths = {
    "valid": users([ALICE, BOB]) + SEP + b"bob",
    "delete_admin": users([ALICE]) + SEP + b"alice",
    "no_ids": users([BOB, dict(BOB, name="carol")]) + SEP + b"carol",
    "unix_user": users([dict(ALICE, unix_user="alice", uid=1000, gid=1000)]) + SEP + b"alice",
    "unix_user_noid": users([dict(BOB, unix_user="bob")]),
    "unix_user_shared": users([dict(ALICE, unix_user="a", uid=1000, gid=1000),
                              dict(BOB, unix_user="b", uid=1000, gid=1000)]),
    "shared_uid": users([ALICE, dict(BOB, uid=1879048193, gid=1879048193)]),
    "reserved_uid": users([dict(ALICE, uid=1879048200, gid=1879048200)]),
    "outside_range": users([dict(ALICE, uid=5000, gid=5000)]),
    "uid_zero": users([dict(ALICE, uid=0, gid=0)]),
    "uid_huge": users([dict(ALICE, uid=2**32, gid=-1)]),
    "uid_only": users([{k: v for k, v in ALICE.items() if k != "gid"}]),
    "dup": users([ALICE, ALICE]),
    "bad_role": users([dict(ALICE, role="root")]),
    "bad_hash": users([dict(ALICE, hash="$2b$10$abc")]),
    "long_hash": users([dict(ALICE, hash="$argon2id$" + "a" * 300)]),
    "bad_name": users([dict(ALICE, name="Alice")]) + SEP + b"Alice",
    "name_dots": users([dict(ALICE, name="..")]) + SEP + b"..",
    "no_created": users([{k: v for k, v in ALICE.items() if k != "created"}]),
    "version0": users([ALICE], version=0),
    "users_object": json.dumps({"version": 1, "users": {}}).encode(),
    "empty": b"" + SEP + b"alice",
    "empty_list": users([]) + SEP + b"nobody",
    "not_json": b"users: alice\n",
    "nested_deep": b'{"version":1,"users":' + b"[" * 200 + b"]" * 200 + b"}",
    "entry_not_object": users(["alice", 5, None]),
}
for name, data in auths.items():
    put("fuzz_auth", name, data)

# fuzz_front: messages from frontd to brokerd (after the hello), SEP between
# them; the fixture of fuzz_front.c has these cookies, CSRF tokens, tokens.
A = {"cookie": "hgs_alice", "csrf": "csrf_alice"}
B = {"cookie": "hgs_bob", "csrf": "csrf_bob"}
TA = {"bearer": "hgt_alice"}
TB = {"bearer": "hgt_bob"}
RID = "0123456789abcdef"
_n = [0]


def fm(typ, auth=None, **kw):
    _n[0] += 1
    o = {"type": typ, "id": _n[0], "request_id": RID, "client": "127.0.0.1"}
    if auth is not None:
        o["auth"] = auth
    o.update(kw)
    return j(o)


def seq(*msgs):
    return SEP.join(msgs)


TERM = "0123456789abcdef"
front = {
    "health": fm("health"),
    "login": fm("login", username="alice", password="correct horse"),
    "login_wrong": seq(fm("login", username="bob", password="x"),
                       fm("login", username="nobody", password="correct horse")),
    "login_types": fm("login", username=["alice"], password=None, client=7),
    "login_client": fm("login", username="alice", password="correct horse", client="not-an-address\r\n"),
    "logout": seq(fm("logout", A), fm("status", A)),
    "logout_nocsrf": fm("logout", {"cookie": "hgs_alice"}),
    "status": seq(fm("status", A), fm("status", TA), fm("status", TB), fm("status", B)),
    "status_noauth": seq(fm("status"), fm("status", {"cookie": 5}), fm("status", {"bearer": "hgt_nope"}),
                         fm("status", {"cookie": "hgs_nope"}), fm("status", "auth")),
    "token_mint": seq(fm("token_mint", A), fm("token_mint", TA)),
    "mode": seq(fm("mode_get", A), fm("mode_set", A, mode="direct"), fm("mode_get", A),
                fm("mode_set", A, mode="sandbox")),
    "mode_bad": seq(fm("mode_set", A, mode="root"), fm("mode_set", {"cookie": "hgs_alice"}, mode="direct"),
                    fm("mode_set", TB, mode="direct")),
    "permission": seq(fm("permission_get", A), fm("permission_set", A, permission="read-only"),
                      fm("permission_set", A, permission="workspace-write+network"),
                      fm("permission_set", B, permission="bogus")),
    "events": seq(fm("events_subscribe", A, last_event_id=0), fm("events_subscribe", TB, last_event_id=-5)),
    "prompt": seq(fm("prompt", A), fm("prompt", TB)),
    "admin": seq(fm("admin_sessions", A), fm("admin_debug", A), fm("admin_sessions", B),
                 fm("admin_audit", A, user="alice", action="login", limit=10, since="2026-01-01T00:00:00Z"),
                 fm("admin_audit", A, limit=0, until="yesterday", decision=5)),
    "admin_revert": seq(fm("admin_revert", A, session="d4" * 16), fm("admin_revert", A, session="zz")),
    "admin_kill": fm("admin_kill", A, terminal=TERM),
    "admin_recording": seq(fm("admin_recording", A, recording=TERM, offset=0),
                           fm("admin_recording", A, recording="../x", offset=-1)),
    "run": fm("run", A, command="ls -la", cwd="src", timeout=30, env={"LANG": "C.UTF-8"}),
    "run_python": fm("run", TA, lang="python", code="", timeout=5),
    "run_bad": seq(fm("run", A, command=5), fm("run", A, command="x", timeout=-1, env={"PATH": "/x"}),
                   fm("run", A, command="x", env=["A=b"])),
    "terminals": seq(fm("terminal_create", A, cols=120, rows=40), fm("terminal_list", A),
                     fm("terminal_attach", A, terminal=TERM), fm("terminal_delete", A, terminal=TERM)),
    "terminal_bad": seq(fm("terminal_create", A, cols=0, rows=99999), fm("terminal_attach", TB, terminal="x")),
    "events_oneway": seq(j({"type": "front_info", "version": "1.0", "started": 1767225000}),
                         j({"type": "terminal_resized", "terminal": TERM})),
    "unknown": seq(fm("nope", A), j({"type": "status"}), b"[]", b"{", j({"id": 1})),
    "reqid": seq(fm("status", A, request_id="bad id\n"), fm("status", A, request_id=None)),
    # An upload's check before its body (no fd), then refusals of each kind.
    "file_write_check": seq(fm("file_write", A, path="a.txt", size=5, check=True),
                            fm("file_write", TA, path="d", size=0, dir=True, check=True),
                            fm("file_write", B, path="big", size=1 << 40, check=True),
                            fm("file_write", {"cookie": "hgs_alice"}, path="a", size=1, check=True),
                            fm("file_write", A, path="a", size=1, check="yes"),
                            fm("permission_set", A, permission="read-only"),
                            fm("file_write", A, path="ro.txt", size=3, check=True),
                            fm("file_write", A, path="ro.txt", size=3)),
}
for name, data in front.items():
    put("fuzz_front", name, data)

# The sessions.json that main 9c3c254 wrote (the store's migration fixture).
fx = json.load(open("tests/system/fixtures/sessions-v1.json"))
put("fuzz_session", "main_9c3c254", fx["sessions_json"].encode() + SEP + SEP + SEP)

# fuzz_proto: roles byte, reply row byte, one message. Roles by index:
# frontd 0, brokerd 1, sandboxd 2, hgctl 3; byte = from | to << 2 | fds << 4.
FE, BR, SB, HG = 0, 1, 2, 3


def roles(frm, to, fds=0):
    return bytes([frm | to << 2 | fds << 4])


for name, data in front.items():
    for i, msg in enumerate(data.split(SEP)):
        put("fuzz_proto", "front_%s_%d" % (name, i), roles(FE, BR) + b"\x00" + msg)
for name, data in spawns.items():
    put("fuzz_proto", "sandbox_" + name, roles(BR, SB, 1 if name == "command" else 0) + b"\x29" + data)
_n[0] = 100
hgctl = {
    "user_add": fm("user_add", name="carol", password="pw", admin=True, uid=1879048300, gid=1879048300),
    "user_add_unix": fm("user_add", name="dave", password="pw", unix_user="dave"),
    "user_del": fm("user_del", name="carol"),
    "user_passwd": fm("user_passwd", name="carol", password=""),
    "user_list": fm("user_list"),
    "token_create": fm("token_create", user="alice"),
    "token_revoke": fm("token_revoke", token="b2" * 8),
    "token_revoke_bad": fm("token_revoke", token="B2" * 8),
    "session_revoke": fm("session_revoke", session="a1" * 16),
    "audit_verify": fm("audit_verify"),
    "audit_show": fm("audit_show", limit=5),
    "status": fm("status"),
    "config": fm("config"),
    "audit_replay": fm("audit_replay", recording=TERM, offset=0),
}
for name, msg in hgctl.items():
    put("fuzz_proto", "hgctl_" + name, roles(HG, BR) + b"\x00" + msg)
put("fuzz_proto", "hgctl_as_frontd", roles(FE, BR) + b"\x00" + hgctl["user_add"])
put("fuzz_proto", "spawn_from_frontd", roles(FE, SB) + b"\x00" + spawns["command"])
put("fuzz_proto", "proc_exited", roles(SB, BR) + b"\x00" +
    j({"type": "proc_exited", "id": 3, "proc": TERM, "status": 0, "oom": False,
       "recording": {"id": TERM}}))
put("fuzz_proto", "event", roles(BR, FE) + b"\x00" + ev(9, "mode_changed", {"mode": "direct"}))
put("fuzz_proto", "login_fds", roles(FE, BR, 2) + b"\x01" + j({"type": "login", "id": 1,
    "client": "::1", "username": "alice", "password": "pw"}))
put("fuzz_proto", "no_id", roles(FE, BR) + b"\x00" + j({"type": "status", "auth": A}))
for i, reply in enumerate([
        {"id": 1, "result": {"exit_code": 0, "stdout_len": 1, "stderr_len": 0, "id": TERM}},
        {"id": 2, "error": {"code": "forbidden", "message": "no", "retry_after": 3}},
        {"id": 3, "error": {"code": 5}},
        {"id": 4, "result": []},
        {"id": 5, "result": {"id": TERM, "mode": "sandbox", "backend": "bwrap", "sha256": "0" * 64}},
        {"id": -1, "result": {}}]):
    for row in (0, 0x29, 0x2a, 0x31):
        put("fuzz_proto", "reply_%d_%02x" % (i, row), roles(SB, BR) + bytes([row]) + j(reply))

# A session's own tokens (after the rest, so that the message ids of the
# seeds above stay as they were).
put("fuzz_front", "session_tokens", seq(
    fm("token_mint", A), fm("session_tokens", A), fm("session_tokens", TA),
    fm("session_tokens", B), fm("session_token_revoke", B, token="0" * 16),
    fm("session_token_revoke", {"cookie": "hgs_alice"}, token="0" * 16),
    fm("session_token_revoke", TA, token="0" * 16),
    fm("session_token_revoke", A, token="zz"), fm("session_token_revoke", A)))

# The egress allowlist's admin messages and the allowlist profile (last:
# the message ids of the seeds above stay as they were).
put("fuzz_front", "egress", seq(fm("egress_get", A),
                  fm("egress_set", A, scope="user", target="bob", allow=["PyPI.org", "*.x.org", "pypi.org"]),
                  fm("egress_set", A, scope="session", target="d4" * 16, allow=["docs.example"]),
                  fm("egress_set", A, scope="user", target="bob", allow=["*", "a..b"]),
                  fm("egress_set", A, scope="team", target="x", allow=[]),
                  fm("egress_set", {"cookie": "hgs_alice"}, scope="user", target="bob", allow=[]),
                  fm("egress_set", B, scope="user", target="bob", allow=[]), fm("egress_get", TA),
                  fm("permission_set", B, permission="workspace-write+allowlist"), fm("status", B),
                  fm("prompt", B), fm("run", B, command="curl https://pypi.org/"),
                  fm("egress_set", A, scope="session", target="d4" * 16, allow=[])))
