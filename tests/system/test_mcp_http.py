"""/mcp, the MCP server, spoken as raw HTTP the way the specification
writes it: initialize and version negotiation for 2025-06-18 and
2025-11-25 (sessions, the GET stream, DELETE), the stateless 2026-07-28
(_meta, mirrored headers, server/discover, subscriptions/listen), the
tools, the 401 challenge and its metadata, Origin, hostile JSON-RPC, and
a mode change reaching an open stream, the next result and the next
instructions.

Mode-independent (MODE_INDEPENDENT): run in one mode only, root as root,
because the MCP protocol frontd and brokerd speak does not depend on who
runs them; spawning in each mode is test_run's and test_sandbox's."""

import base64
import json
import socket
import time

import pytest

import hglib
import policylib as pl

MODE_INDEPENDENT = True

LEGACY = ["2025-06-18", "2025-11-25"]
MODERN = "2026-07-28"
ACCEPT = "application/json, text/event-stream"
READ_ONLY = ("this session's permission is read-only: the workspace cannot "
             "be changed; ask an admin to switch the session to "
             "workspace-write")
TOOLS = ["run_command", "run_python", "read_file", "write_file",
         "list_files", "status"]


# The configuration of `hg` (conftest.py): pooled per mode.
HOSTGATE = pl.config(HOST_EXECUTION_DIRECT_TTL_SECONDS=60)


@pytest.fixture
def alice(hg):
    s = hg.login(*pl.ADMIN)
    yield s
    pl.set_mode(s, "sandbox")


@pytest.fixture
def token(hg):
    """An hgctl token of bob's (a standalone agent token)."""
    return hg.hgctl_json("token", "create", pl.USER[0])["token"]


def post(hg, msg, bearer=None, headers=None, raw=None):
    h = {"Accept": ACCEPT, "Content-Type": "application/json"}
    h.update(headers or {})
    body = raw if raw is not None else json.dumps(msg)
    return hg.request("POST", "/mcp", body=body, headers=h, bearer=bearer)


def rpc(id_, method, params=None):
    m = {"jsonrpc": "2.0", "id": id_, "method": method}
    if params is not None:
        m["params"] = params
    return m


def meta(params=None):
    """params with 2026-07-28's required _meta."""
    p = dict(params or {})
    p["_meta"] = {"io.modelcontextprotocol/protocolVersion": MODERN,
                  "io.modelcontextprotocol/clientInfo":
                  {"name": "test", "version": "1"},
                  "io.modelcontextprotocol/clientCapabilities": {}}
    return p


def modern(hg, bearer, id_, method, params=None, name=None, headers=None):
    """One 2026-07-28 request with its headers."""
    h = {"MCP-Protocol-Version": MODERN, "Mcp-Method": method}
    if name is not None:
        h["Mcp-Name"] = name
    h.update(headers or {})
    return post(hg, rpc(id_, method, meta(params)), bearer, h)


class Legacy:
    """A session of a handshake revision."""

    def __init__(self, hg, bearer, version="2025-11-25"):
        self.hg = hg
        self.bearer = bearer
        r = post(hg, rpc(0, "initialize", {
            "protocolVersion": version, "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"}}), bearer)
        assert r.status == 200, r
        self.init = r.json()
        self.sid = r.header("Mcp-Session-Id")
        self.version = self.init["result"]["protocolVersion"]
        assert self.sid, r
        r = self.send({"jsonrpc": "2.0",
                       "method": "notifications/initialized"})
        assert r.status == 202, r
        assert r.body == b"", r
        self.n = 0

    def headers(self):
        return {"Mcp-Session-Id": self.sid,
                "MCP-Protocol-Version": self.version}

    def send(self, msg, headers=None):
        h = {"Mcp-Session-Id": self.sid,
             "MCP-Protocol-Version": getattr(self, "version", "2025-11-25")}
        h.update(headers or {})
        return post(self.hg, msg, self.bearer, h)

    def call(self, method, params=None):
        self.n += 1
        r = self.send(rpc(self.n, method, params))
        assert r.status == 200, r
        doc = r.json()
        assert doc["id"] == self.n, doc
        return doc

    def tool(self, name, args=None):
        doc = self.call("tools/call", {"name": name,
                                       "arguments": args or {}})
        assert "result" in doc, doc
        return doc["result"]


class Stream:
    """An SSE response (GET /mcp or subscriptions/listen) read from a raw
    socket, so that a read can wait for one more event."""

    def __init__(self, hg, method, headers, body=b""):
        self.sock = socket.create_connection(("127.0.0.1", hg.port),
                                             timeout=hglib.SLOW)
        h = ["Host: 127.0.0.1:%d" % hg.port] + \
            ["%s: %s" % kv for kv in headers.items()]
        if body:
            h.append("Content-Length: %d" % len(body))
        self.sock.sendall(("%s /mcp HTTP/1.1\r\n%s\r\n\r\n"
                           % (method, "\r\n".join(h))).encode() + body)
        self.buf = b""
        head = self._until(b"\r\n\r\n")
        self.status, self.headers, _ = hglib.parse_raw(head)

    def _until(self, sep, timeout=hglib.SLOW):
        deadline = time.monotonic() + timeout
        while sep not in self.buf:
            self.sock.settimeout(max(deadline - time.monotonic(), 0.01))
            chunk = self.sock.recv(65536)
            if not chunk:
                return None
            self.buf += chunk
        out, _, self.buf = self.buf.partition(sep)
        return out + sep

    def message(self, timeout=hglib.SLOW):
        """The next JSON-RPC message of the stream (comments skipped)."""
        while True:
            block = self._until(b"\n\n", timeout)
            assert block is not None, "the stream ended"
            data = [ln[5:].lstrip() for ln in block.decode().split("\n")
                    if ln.startswith("data:")]
            if data and data != [""]:
                return json.loads("\n".join(data))

    def close(self):
        self.sock.close()


def check_tool_result(res):
    """A tool result as the schema has it: a text block, structured
    content that says the mode and permission."""
    assert res["content"][0]["type"] == "text", res
    sc = res["structuredContent"]
    assert sc["mode"] in ("sandbox", "direct"), sc
    assert sc["permission"] in ("read-only", "workspace-write",
                                "workspace-write+network"), sc
    return sc


# --- the handshake revisions ------------------------------------------------

@pytest.mark.parametrize("version", LEGACY)
def test_initialize(hg, token, version):
    s = Legacy(hg, token, version)
    res = s.init["result"]
    assert res["protocolVersion"] == version, res
    assert res["serverInfo"]["name"] == "hostgate", res
    assert set(res["capabilities"]) >= {"tools", "resources"}, res
    prompt = hg.get("/api/sandbox/prompt", bearer=token).json()["prompt"]
    assert res["instructions"] == prompt, res
    assert s.call("ping")["result"] == {}


@pytest.mark.parametrize("asked", ["2024-11-05", "2025-03-26", "1900-01-01",
                                   MODERN])
def test_initialize_other_version(hg, token, asked):
    """A version not served is answered with the newest one served."""
    r = post(hg, rpc(1, "initialize", {"protocolVersion": asked,
                                       "capabilities": {},
                                       "clientInfo": {"name": "t",
                                                      "version": "1"}}),
             token)
    assert r.status == 200, r
    assert r.json()["result"]["protocolVersion"] == "2025-11-25", r


def test_session_rules(hg, token):
    s = Legacy(hg, token)
    # Without a session: initialize first.
    r = post(hg, rpc(1, "tools/list"), token,
             {"MCP-Protocol-Version": "2025-11-25"})
    assert r.status == 400, r
    assert r.json()["error"]["code"] == -32600, r
    # An unknown session, or one of another token: 404.
    r = s.send(rpc(2, "tools/list"), {"Mcp-Session-Id": "0" * 32})
    assert r.status == 404, r
    other = hg.hgctl_json("token", "create", pl.USER[0])["token"]
    r = post(hg, rpc(3, "tools/list"), other, s.headers())
    assert r.status == 404, r
    # An unsupported MCP-Protocol-Version: 400.
    r = s.send(rpc(4, "tools/list"), {"MCP-Protocol-Version": "1999-01-01"})
    assert r.status == 400, r
    # DELETE ends it.
    r = hg.request("DELETE", "/mcp", headers=s.headers(), bearer=token)
    assert r.status == 200, r
    r = s.send(rpc(5, "tools/list"))
    assert r.status == 404, r


def test_tools_list(hg, token):
    s = Legacy(hg, token)
    tools = s.call("tools/list")["result"]["tools"]
    assert [t["name"] for t in tools] == TOOLS, tools
    for t in tools:
        assert t["inputSchema"]["type"] == "object", t
        assert t["outputSchema"]["type"] == "object", t
        assert {"mode", "permission"} <= set(
            t["outputSchema"]["required"]), t
        assert t["description"], t
    by = {t["name"]: t for t in tools}
    assert by["run_command"]["inputSchema"]["required"] == ["command"]
    assert set(by["run_command"]["inputSchema"]["properties"]) == {
        "command", "cwd", "timeout", "env", "stdin"}
    assert by["write_file"]["inputSchema"]["required"] == ["path", "content"]


def test_run_command(hg, token):
    s = Legacy(hg, token)
    res = s.tool("run_command", {"command": "echo hi; echo err >&2",
                                 "stdin": "x"})
    sc = check_tool_result(res)
    assert res["isError"] is False, res
    assert sc["exit_code"] == 0 and sc["stdout"] == "hi\n", sc
    assert sc["stderr"] == "err\n", sc
    assert sc["mode"] == "sandbox" and sc["backend"], sc
    assert "hi" in res["content"][0]["text"], res
    res = s.tool("run_command", {"command": "cat", "stdin": "in put"})
    assert res["structuredContent"]["stdout"] == "in put", res


def test_run_command_fails(hg, token):
    s = Legacy(hg, token)
    res = s.tool("run_command", {"command": "echo no >&2; exit 3"})
    sc = check_tool_result(res)
    assert res["isError"] is True, res
    assert sc["exit_code"] == 3 and sc["stderr"] == "no\n", sc


def test_run_python(hg, token):
    s = Legacy(hg, token)
    res = s.tool("run_python", {"code": "print(6 * 7)"})
    sc = check_tool_result(res)
    assert res["isError"] is False and sc["stdout"] == "42\n", res


def test_status(hg, token):
    s = Legacy(hg, token)
    res = s.tool("status")
    sc = check_tool_result(res)
    assert res["isError"] is False, res
    assert sc["user"] == pl.USER[0], sc
    assert "limits" in sc and "execution_mode" in sc, sc


def test_files(hg, token):
    s = Legacy(hg, token)
    res = s.tool("write_file", {"path": "mcp/a.txt", "content": "héllo\n"})
    sc = check_tool_result(res)
    assert res["isError"] is False, res
    assert sc["path"] == "mcp/a.txt" and sc["size"] == 7, sc
    res = s.tool("read_file", {"path": "mcp/a.txt"})
    sc = check_tool_result(res)
    assert sc["encoding"] == "utf-8" and sc["content"] == "héllo\n", sc
    blob = bytes(range(256))
    res = s.tool("write_file", {"path": "mcp/b.bin", "encoding": "base64",
                                "content": base64.b64encode(blob).decode()})
    assert res["isError"] is False, res
    res = s.tool("read_file", {"path": "mcp/b.bin"})
    sc = check_tool_result(res)
    assert sc["encoding"] == "base64", sc
    assert base64.b64decode(sc["content"]) == blob, sc
    res = s.tool("list_files", {"path": "mcp"})
    sc = check_tool_result(res)
    names = [e["name"] for e in sc["entries"]]
    assert names == ["a.txt", "b.bin"], sc
    res = s.tool("read_file", {"path": "mcp/missing"})
    assert res["isError"] is True, res
    res = s.tool("read_file", {"path": "../etc/passwd"})
    assert res["isError"] is True, res


def test_read_only_refusal(hg):
    """A write under read-only is a tool error in the words of the
    sandbox prompt, with the session's constraints."""
    bob = hg.login(*pl.USER)
    tok = pl.mint_token(bob)
    try:
        assert bob.post("/api/permission",
                        {"permission": "read-only"}).status == 200
        s = Legacy(hg, tok)
        res = s.tool("write_file", {"path": "ro.txt", "content": "x"})
        assert res["isError"] is True, res
        # The tool the agent called, brokerd's reason word for word.
        assert res["content"][0]["text"] == (
            "write_file refused: " + READ_ONLY + " (see the server "
            "instructions, or the status tool, for what this session may "
            "do)"), res
        sc = res["structuredContent"]
        assert sc["error"]["message"] == READ_ONLY, sc
        assert sc["permission"] == "read-only", sc
        assert sc["error"]["code"] == "forbidden", sc
    finally:
        bob.post("/api/permission", {"permission": "workspace-write"})


@pytest.mark.parametrize("version", LEGACY)
def test_bad_arguments(hg, token, version):
    """Bad arguments: a protocol error in 2025-06-18, a tool error after."""
    s = Legacy(hg, token, version)
    s.n += 1
    doc = s.send(rpc(s.n, "tools/call", {"name": "run_command",
                                         "arguments": {"command": 5}})).json()
    if version == "2025-06-18":
        assert doc["error"]["code"] == -32602, doc
    else:
        assert doc["result"]["isError"] is True, doc
        assert "command" in doc["result"]["content"][0]["text"], doc
    doc = s.call("tools/call", {"name": "no_such_tool", "arguments": {}})
    assert doc["error"]["code"] == -32602, doc


# --- 2026-07-28 ----------------------------------------------------------------

def test_modern_discover(hg, token):
    r = modern(hg, token, "d1", "server/discover")
    assert r.status == 200, r
    res = r.json()["result"]
    assert r.json()["id"] == "d1"
    assert MODERN in res["supportedVersions"], res
    assert set(LEGACY) <= set(res["supportedVersions"]), res
    assert res["resultType"] == "complete", res
    assert res["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == \
        "hostgate", res
    prompt = hg.get("/api/sandbox/prompt", bearer=token).json()["prompt"]
    assert res["instructions"] == prompt, res
    # No session in this revision.
    assert r.header("Mcp-Session-Id") is None, r


def test_modern_tools(hg, token):
    r = modern(hg, token, 1, "tools/list")
    assert r.status == 200, r
    res = r.json()["result"]
    assert [t["name"] for t in res["tools"]] == TOOLS, res
    assert res["resultType"] == "complete" and "ttlMs" in res, res
    r = modern(hg, token, 2, "tools/call", {"name": "run_command",
                                            "arguments": {"command":
                                                          "echo m"}},
               name="run_command")
    assert r.status == 200, r
    res = r.json()["result"]
    assert check_tool_result(res)["stdout"] == "m\n", res
    assert res["resultType"] == "complete", res
    # resources/read is a CacheableResult: ttlMs and cacheScope.
    r = modern(hg, token, 3, "resources/read",
               {"uri": "hostgate://sandbox/prompt"},
               name="hostgate://sandbox/prompt")
    assert r.status == 200, r
    res = r.json()["result"]
    assert res["ttlMs"] == 0 and res["cacheScope"] == "private", res
    assert res["contents"][0]["text"], res
    r = modern(hg, token, 4, "resources/read", {"uri": "file:///etc/passwd"},
               name="file:///etc/passwd")
    assert r.json()["error"]["code"] == -32602, r


def test_modern_version_and_headers(hg, token):
    # An unsupported version: 400, UnsupportedProtocolVersion, the list.
    m = rpc(1, "tools/list", meta())
    m["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = \
        "2099-01-01"
    r = post(hg, m, token, {"MCP-Protocol-Version": "2099-01-01",
                            "Mcp-Method": "tools/list"})
    assert r.status == 400, r
    err = r.json()["error"]
    assert err["code"] == -32022, err
    assert err["data"]["requested"] == "2099-01-01", err
    assert MODERN in err["data"]["supported"], err
    # The header must match _meta; Mcp-Method and Mcp-Name the body.
    r = modern(hg, token, 2, "tools/list",
               headers={"MCP-Protocol-Version": "2025-11-25"})
    assert r.status == 400 and r.json()["error"]["code"] == -32020, r
    r = modern(hg, token, 3, "tools/list", headers={"Mcp-Method": "ping"})
    assert r.status == 400 and r.json()["error"]["code"] == -32020, r
    r = modern(hg, token, 4, "tools/call", {"name": "status",
                                            "arguments": {}},
               name="run_command")
    assert r.status == 400 and r.json()["error"]["code"] == -32020, r
    enc = "=?base64?%s?=" % base64.b64encode(b"status").decode()
    r = modern(hg, token, 5, "tools/call", {"name": "status",
                                            "arguments": {}}, name=enc)
    assert r.status == 200 and "result" in r.json(), r
    # Missing clientCapabilities: -32602, 400.
    m = rpc(6, "tools/list", meta())
    del m["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"]
    r = post(hg, m, token, {"MCP-Protocol-Version": MODERN,
                            "Mcp-Method": "tools/list"})
    assert r.status == 400 and r.json()["error"]["code"] == -32602, r
    # A notification: 202, no body.
    r = post(hg, {"jsonrpc": "2.0", "method": "notifications/cancelled",
                  "params": meta({"requestId": 1})}, token,
             {"MCP-Protocol-Version": MODERN})
    assert r.status == 202 and r.body == b"", r
    # A response: this revision's clients send none.
    r = post(hg, {"jsonrpc": "2.0", "id": 3, "result": {}}, token,
             {"MCP-Protocol-Version": MODERN})
    assert r.status == 400, r
    # No initialize, GET or DELETE in this revision.
    r = modern(hg, token, 7, "initialize")
    assert r.status == 404 and r.json()["error"]["code"] == -32601, r
    r = hg.request("GET", "/mcp", bearer=token,
                   headers={"Accept": "text/event-stream",
                            "MCP-Protocol-Version": MODERN})
    assert r.status == 405, r
    r = hg.request("DELETE", "/mcp", bearer=token,
                   headers={"MCP-Protocol-Version": MODERN})
    assert r.status == 405, r


# --- auth, Origin --------------------------------------------------------------

def test_unauthorized(hg, alice):
    init = rpc(1, "initialize", {"protocolVersion": "2025-11-25",
                                 "capabilities": {},
                                 "clientInfo": {"name": "t", "version": "1"}})
    for kw in ({}, {"cookie": alice.cookie},
               {"bearer": "hgt_" + "0" * 40}):
        r = hg.request("POST", "/mcp", body=init,
                       headers={"Accept": ACCEPT}, **kw)
        assert r.status == 401, (kw, r)
        www = r.header("WWW-Authenticate")
        want = ('Bearer resource_metadata="http://127.0.0.1:%d/.well-known/'
                'oauth-protected-resource/mcp"' % hg.port)
        assert www == want, www
    r = hg.get("/.well-known/oauth-protected-resource/mcp")
    assert r.status == 200, r
    doc = r.json()
    assert doc["resource"] == "http://127.0.0.1:%d/mcp" % hg.port, doc
    assert doc["bearer_methods_supported"] == ["header"], doc
    assert "authorization_servers" not in doc, doc


def test_revoked_mid_session(hg):
    doc = hg.hgctl_json("token", "create", pl.USER[0])
    s = Legacy(hg, doc["token"])
    assert s.call("tools/list")["result"]["tools"]
    hg.hgctl_ok("token", "revoke", str(doc["id"]))
    for m in (rpc(9, "tools/list"),
              rpc(10, "tools/call", {"name": "run_command",
                                     "arguments": {"command": "true"}})):
        r = s.send(m)
        assert r.status == 401, r
        assert r.header("WWW-Authenticate").startswith(
            "Bearer resource_metadata="), r


def test_origin(hg, token):
    r = post(hg, rpc(1, "tools/list", meta()), token,
             {"Origin": "http://evil.example", "MCP-Protocol-Version": MODERN,
              "Mcp-Method": "tools/list"})
    assert r.status == 403, r
    r = post(hg, rpc(1, "tools/list", meta()), token,
             {"Origin": "http://127.0.0.1:%d" % hg.port,
              "MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/list"})
    assert r.status == 200, r


# --- hostile JSON-RPC ------------------------------------------------------------

def test_hostile(hg, token):
    s = Legacy(hg, token)
    h = s.headers()
    cases = [
        (b"{nope", 400, -32700),
        (b"", 400, -32700),
        (b'{"jsonrpc":"2.0","id":1,/* x */"method":"ping"}', 400, -32700),
        (b"{'jsonrpc':'2.0','id':1,'method':'ping'}", 400, -32700),
        (b'{"jsonrpc":"2.0","id":1,"method":"p\xffing"}', 400, -32700),
        (b'[{"jsonrpc":"2.0","id":1,"method":"ping"}]', 400, -32600),
        (b'{"jsonrpc":"1.0","id":1,"method":"ping"}', 400, -32600),
        (b'{"id":1,"method":"ping"}', 400, -32600),
        (b'{"jsonrpc":"2.0","id":null,"method":"ping"}', 400, -32600),
        (b'{"jsonrpc":"2.0","id":1.5,"method":"ping"}', 400, -32600),
        (b'{"jsonrpc":"2.0","id":{},"method":"ping"}', 400, -32600),
        (b'{"jsonrpc":"2.0","id":1,"method":7}', 400, -32600),
        (b'{"jsonrpc":"2.0","id":1,"method":"ping","params":[1]}', 400,
         -32602),
        (b'{"jsonrpc":"2.0","id":1,"method":"no/such"}', 200, -32601),
        (b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":'
         b'{"name":5}}', 200, -32602),
    ]
    for body, status, code in cases:
        r = post(hg, None, token, h, raw=body)
        assert r.status == status, (body, r)
        assert r.json()["error"]["code"] == code, (body, r)
    # Huge and odd ids come back exactly as sent.
    for raw_id in (b"123456789012345678901234567890", b"-9223372036854775809",
                   b'"\\u00e9\\"x"', b"0"):
        r = post(hg, None, token, h, raw=b'{"jsonrpc":"2.0","id":' + raw_id +
                 b',"method":"ping"}')
        assert r.status == 200, r
        assert b'"id":' + raw_id + b"," in r.body, r
    # Wrong Content-Type, Accept; an oversized body.
    r = hg.request("POST", "/mcp", body=b"{}", bearer=token,
                   headers=dict(h, **{"Content-Type": "text/plain",
                                      "Accept": ACCEPT}))
    assert r.status == 415, r
    r = hg.request("POST", "/mcp", body=json.dumps(rpc(1, "ping")),
                   bearer=token, headers=dict(h, Accept="text/html"))
    assert r.status == 406, r
    r = hg.request("POST", "/mcp", body=b"{" + b" " * (2 << 20) + b"}",
                   bearer=token, headers=dict(h, Accept=ACCEPT))
    assert r.status == 413, r
    # A response (we sent no request) and a notification: 202.
    assert s.send({"jsonrpc": "2.0", "id": 77, "result": {}}).status == 202
    assert s.send({"jsonrpc": "2.0",
                   "method": "notifications/cancelled",
                   "params": {"requestId": 1}}).status == 202
    # The server lives on.
    assert s.call("ping")["result"] == {}


def test_sse_answer(hg, token):
    """A client that accepts only text/event-stream gets one SSE event."""
    s = Legacy(hg, token)
    r = s.send(rpc(5, "ping"), {"Accept": "text/event-stream"})
    assert r.status == 200, r
    assert r.header("Content-Type").startswith("text/event-stream"), r
    data = [ln[5:].strip() for ln in r.body.decode().split("\n")
            if ln.startswith("data:")]
    assert json.loads(data[0]) == {"jsonrpc": "2.0", "id": 5, "result": {}}


# --- mode changes ----------------------------------------------------------------

def test_mode_change_notifies(hg, alice):
    """Direct mode granted to the token's session: a notification on the
    open GET stream and on a listen, then the next result and the next
    instructions say so."""
    tok = pl.mint_token(alice)
    s = Legacy(hg, tok)
    assert "subscribe" in s.init["result"]["capabilities"]["resources"]
    s.call("resources/subscribe", {"uri": "hostgate://sandbox/prompt"})
    get = Stream(hg, "GET", dict(s.headers(), **{
        "Accept": "text/event-stream",
        "Authorization": "Bearer " + tok}))
    assert get.status == 200, get.headers
    body = json.dumps(rpc("L1", "subscriptions/listen", meta({
        "notifications": {"resourceSubscriptions":
                          ["hostgate://sandbox/prompt"]}}))).encode()
    listen = Stream(hg, "POST", {
        "Accept": ACCEPT, "Content-Type": "application/json",
        "Authorization": "Bearer " + tok, "MCP-Protocol-Version": MODERN,
        "Mcp-Method": "subscriptions/listen"}, body)
    try:
        assert listen.status == 200, listen.headers
        ack = listen.message()
        assert ack["method"] == "notifications/subscriptions/acknowledged"
        assert ack["params"]["_meta"][
            "io.modelcontextprotocol/subscriptionId"] == "L1", ack
        pl.grant(alice)
        seen = [get.message(), get.message()]
        methods = sorted(m["method"] for m in seen)
        assert methods == ["notifications/message",
                           "notifications/resources/updated"], seen
        log = [m for m in seen if m["method"] == "notifications/message"][0]
        assert log["params"]["data"]["event"] == "mode_changed", log
        up = listen.message()
        assert up["method"] == "notifications/resources/updated", up
        assert up["params"]["uri"] == "hostgate://sandbox/prompt", up
        assert up["params"]["_meta"][
            "io.modelcontextprotocol/subscriptionId"] == "L1", up
    finally:
        get.close()
        listen.close()
    res = s.tool("run_command", {"command": "true"})
    assert res["structuredContent"]["mode"] == "direct", res
    again = Legacy(hg, tok)
    text = again.init["result"]["instructions"]
    assert text != s.init["result"]["instructions"], text
    prompt = hg.get("/api/sandbox/prompt", bearer=tok).json()
    assert prompt["mode"] == "direct" and text == prompt["prompt"], prompt
    doc = s.call("resources/read", {"uri": "hostgate://sandbox/prompt"})
    assert doc["result"]["contents"][0]["text"] == text, doc


def test_listen_huge_id(hg, token):
    """A listen's id, a 100-bit integer, is its subscription id exactly;
    a listen that names no resource of ours is acknowledged with an empty
    filter."""
    huge = 2 ** 100 + 7
    body = json.dumps(rpc(huge, "subscriptions/listen", meta({
        "notifications": {"toolsListChanged": True,
                          "resourceSubscriptions": ["file:///x"]}}))).encode()
    st = Stream(hg, "POST", {
        "Accept": ACCEPT, "Content-Type": "application/json",
        "Authorization": "Bearer " + token, "MCP-Protocol-Version": MODERN,
        "Mcp-Method": "subscriptions/listen"}, body)
    try:
        assert st.status == 200, st.headers
        assert st.headers["content-type"].startswith("text/event-stream")
        ack = st.message()
        assert ack["method"] == "notifications/subscriptions/acknowledged"
        assert ack["params"]["_meta"][
            "io.modelcontextprotocol/subscriptionId"] == huge, ack
        assert ack["params"]["notifications"] == {}, ack
    finally:
        st.close()


def test_sessions_per_token(hg):
    """A token keeps at most 64 sessions: its 65th initialize forgets its
    oldest (404), not another token's."""
    mine = hg.hgctl_json("token", "create", pl.USER[0])["token"]
    other = Legacy(hg, hg.hgctl_json("token", "create", pl.USER[0])["token"])
    first = Legacy(hg, mine)
    rest = [Legacy(hg, mine) for _ in range(64)]
    assert first.send(rpc(1, "ping")).status == 404
    assert rest[0].call("ping")["result"] == {}
    assert rest[-1].call("ping")["result"] == {}
    assert other.call("ping")["result"] == {}


def test_logout_ends_streams(hg):
    """The logout of the token's session ends its streams: a listen gets
    the result of its request (a graceful end), a GET stream closes."""
    bob = hg.login(*pl.USER)
    tok = pl.mint_token(bob)
    s = Legacy(hg, tok)
    get = Stream(hg, "GET", dict(s.headers(), **{
        "Accept": "text/event-stream", "Authorization": "Bearer " + tok}))
    body = json.dumps(rpc(41, "subscriptions/listen", meta({
        "notifications": {}}))).encode()
    listen = Stream(hg, "POST", {
        "Accept": ACCEPT, "Content-Type": "application/json",
        "Authorization": "Bearer " + tok, "MCP-Protocol-Version": MODERN,
        "Mcp-Method": "subscriptions/listen"}, body)
    try:
        assert get.status == 200 and listen.status == 200
        assert listen.message()["method"] == \
            "notifications/subscriptions/acknowledged"
        assert bob.post("/api/logout").status == 200
        end = listen.message()
        assert end["id"] == 41 and end["result"]["resultType"] == \
            "complete", end
        assert end["result"]["_meta"][
            "io.modelcontextprotocol/subscriptionId"] == 41, end
        assert listen._until(b"\n\n") is None   # then it closes
        assert get._until(b"\n\n") is None
    finally:
        get.close()
        listen.close()
    # The token went with the session.
    assert s.send(rpc(2, "ping")).status == 401


def listen_stream(hg, tok, id_, prompt=False):
    """A subscriptions/listen of tok's, its acknowledgment read."""
    filt = {"resourceSubscriptions": ["hostgate://sandbox/prompt"]} \
        if prompt else {}
    body = json.dumps(rpc(id_, "subscriptions/listen", meta({
        "notifications": filt}))).encode()
    st = Stream(hg, "POST", {
        "Accept": ACCEPT, "Content-Type": "application/json",
        "Authorization": "Bearer " + tok, "MCP-Protocol-Version": MODERN,
        "Mcp-Method": "subscriptions/listen"}, body)
    assert st.status == 200, st.headers
    assert st.message()["method"] == \
        "notifications/subscriptions/acknowledged"
    return st


def test_revoke_ends_the_tokens_streams(hg, alice):
    """Revoking one token ends its GET stream and its listen (the listen
    with its request's result) and forgets its sessions at once, while
    another token of the same login session keeps its streams and gets
    the next mode change."""
    gone = alice.post("/api/session/tokens").json()
    kept = pl.mint_token(alice)
    s = Legacy(hg, gone["token"])
    get = Stream(hg, "GET", dict(s.headers(), **{
        "Accept": "text/event-stream",
        "Authorization": "Bearer " + gone["token"]}))
    listen = listen_stream(hg, gone["token"], 51)
    other = Legacy(hg, kept)
    other_get = Stream(hg, "GET", dict(other.headers(), **{
        "Accept": "text/event-stream", "Authorization": "Bearer " + kept}))
    other_listen = listen_stream(hg, kept, 52, prompt=True)
    try:
        assert get.status == 200 and other_get.status == 200
        hg.hgctl_ok("token", "revoke", gone["id"])
        end = listen.message()
        assert end["id"] == 51 and end["result"]["resultType"] == \
            "complete", end
        assert listen._until(b"\n\n") is None   # then it closes
        assert get._until(b"\n\n") is None
        # Its session is forgotten; the answer is a revoked token's.
        r = s.send(rpc(2, "ping"))
        assert r.status == 401, r
        assert r.header("WWW-Authenticate").startswith(
            "Bearer resource_metadata="), r
        pl.grant(alice)
        log = other_get.message()
        assert log["method"] == "notifications/message", log
        assert log["params"]["data"]["event"] == "mode_changed", log
        up = other_listen.message()
        assert up["method"] == "notifications/resources/updated", up
        assert other.call("ping")["result"] == {}
    finally:
        for st in (get, listen, other_get, other_listen):
            st.close()


def test_revoke_standalone_token(hg):
    """A standalone token (no login session) revoked: its listen ends
    with its request's result, and closes."""
    gone = hg.hgctl_json("token", "create", pl.USER[0])
    listen = listen_stream(hg, gone["token"], 61)
    try:
        hg.hgctl_ok("token", "revoke", str(gone["id"]))
        end = listen.message()
        assert end["id"] == 61 and end["result"]["resultType"] == \
            "complete", end
        assert listen._until(b"\n\n") is None
    finally:
        listen.close()
