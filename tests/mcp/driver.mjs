// Drive hostgate's /mcp with an official MCP TypeScript SDK client, one
// step at a time, for tests/system/test_mcp_sdk.py.
//
//   node driver.mjs v1    @modelcontextprotocol/sdk (the system's node)
//   node driver.mjs v2    @modelcontextprotocol/client (Node.js 22), pinned
//                         to the 2026-07-28 revision unless connect says
//                         otherwise
//
// Reads one JSON object a line on stdin and answers each with one JSON line
// on stdout, {"ok": true, "result": ...} or {"ok": false, "error": {...}},
// so that the test can act on hostgate (revoke the token, change the
// session's mode) between two calls of one MCP session. Steps:
//
//   {"op": "connect", "url": U, "token": T, "version": V?}
//   {"op": "list"}                       tools/list
//   {"op": "call", "name": N, "arguments": {...}}
//   {"op": "notifications"}              what arrived so far (and clears it)
//   {"op": "wait_notification", "method": M, "ms": N}
//   {"op": "listen", "filter": {...}}    v2, 2026-07-28: subscriptions/listen
//   {"op": "discover"}                   v2: server/discover
//   {"op": "close"}
//
// A watchdog ends the process with status 3 after HG_MCP_TIMEOUT_MS
// (default 60000) so that a hang fails clearly.

import readline from 'node:readline';

const flavour = process.argv[2];
if (flavour !== 'v1' && flavour !== 'v2') {
	process.stderr.write('usage: driver.mjs v1|v2\n');
	process.exit(2);
}
const limit = Number(process.env.HG_MCP_TIMEOUT_MS || 60000);
setTimeout(() => {
	process.stderr.write(`driver: no end after ${limit} ms, giving up\n`);
	process.exit(3);
}, limit).unref();

let Client, StreamableHTTPClientTransport, LATEST_PROTOCOL_VERSION;
if (flavour === 'v1') {
	({ Client } = await import('@modelcontextprotocol/sdk/client/index.js'));
	({ StreamableHTTPClientTransport } = await import(
	    '@modelcontextprotocol/sdk/client/streamableHttp.js'));
	({ LATEST_PROTOCOL_VERSION } = await import(
	    '@modelcontextprotocol/sdk/types.js'));
} else {
	({ Client, StreamableHTTPClientTransport, LATEST_PROTOCOL_VERSION } =
	    await import('@modelcontextprotocol/client'));
}

let client = null;
let transport = null;
let listed = false;
const subs = [];
const notes = [];
const waiters = [];
const transportErrors = [];

// The fields of an error that a test can assert on.
function errorOf(e) {
	const out = { name: e?.name, message: String(e?.message ?? e) };
	if (e?.code !== undefined)
		out.code = e.code;
	if (e?.status !== undefined)
		out.status = e.status;
	if (e?.cause !== undefined) {
		// fetch's TypeError("fetch failed") says why only here.
		out.cause = [e.cause?.code, e.cause?.message ?? String(e.cause)]
		    .filter(Boolean).join(': ');
	}
	if (e?.data !== undefined) {
		try {
			out.data = JSON.parse(JSON.stringify(e.data));
		} catch {
			out.data = String(e.data);
		}
	}
	return out;
}

// Record a notification from the server and wake whoever waits for it.
function noteArrived(n) {
	notes.push(n);
	for (let i = waiters.length - 1; i >= 0; i--) {
		if (waiters[i].method === n.method) {
			waiters[i].resolve(n);
			waiters.splice(i, 1);
		}
	}
}

// Connect and initialize (v1, and v2 at a legacy version) or discover (v2
// at 2026-07-28); the negotiated view of the server.
async function stepConnect(s) {
	const headers = { Authorization: 'Bearer ' + s.token };
	const opts = {};
	if (flavour === 'v2') {
		const v = s.version || '2026-07-28';
		opts.versionNegotiation = v === 'legacy' ? { mode: 'legacy' } :
		    { mode: { pin: v } };
	}
	client = new Client({ name: 'hostgate-test-' + flavour,
	    version: '1.0.0' }, opts);
	client.fallbackNotificationHandler = async (n) => noteArrived(n);
	transport = new StreamableHTTPClientTransport(new URL(s.url),
	    { requestInit: { headers } });
	await client.connect(transport);
	client.onerror = (e) => transportErrors.push(errorOf(e));
	const r = {
		serverVersion: client.getServerVersion() ?? null,
		capabilities: client.getServerCapabilities() ?? null,
		instructions: client.getInstructions() ?? null,
		sessionId: transport.sessionId ?? null,
		protocolVersion: transport.protocolVersion ?? null,
		clientLatest: LATEST_PROTOCOL_VERSION,
		node: process.version,
	};
	if (flavour === 'v2') {
		r.protocolVersion = client.getNegotiatedProtocolVersion() ??
		    r.protocolVersion;
		r.era = client.getProtocolEra() ?? null;
	}
	return r;
}

// Wait up to ms (by default the suite's bound, HG_SLOW_BOUND or 120 s) for
// a notification of this method (one already arrived counts).
function stepWait(s) {
	const seen = notes.find((n) => n.method === s.method);
	if (seen)
		return Promise.resolve(seen);
	return new Promise((resolve, reject) => {
		const w = { method: s.method, resolve };
		waiters.push(w);
		setTimeout(() => {
			const i = waiters.indexOf(w);
			if (i >= 0)
				waiters.splice(i, 1);
			reject(new Error(`no ${s.method} within ${s.ms} ms`));
		}, s.ms ?? Number(process.env.HG_SLOW_BOUND || 120) * 1000);
	});
}

// Run one step.
async function step(s) {
	switch (s.op) {
	case 'connect':
		return await stepConnect(s);
	case 'list':
		listed = true;
		return await client.listTools();
	case 'call':
		// The SDK checks structuredContent against the outputSchema of
		// the tools it has listed: list them first.
		if (!listed) {
			await client.listTools();
			listed = true;
		}
		return await client.callTool({ name: s.name,
		    arguments: s.arguments ?? {} });
	case 'notifications': {
		const out = notes.splice(0);
		return { notifications: out, transportErrors:
		    transportErrors.splice(0) };
	}
	case 'wait_notification':
		return await stepWait(s);
	case 'listen': {
		// 2026-07-28: a subscriptions/listen stream.
		const sub = await client.listen(s.filter);
		subs.push(sub);
		return { honoredFilter: sub.honoredFilter };
	}
	case 'discover':
		return await client.discover();
	case 'close':
		for (const sub of subs.splice(0))
			await sub.close();
		if (transport?.terminateSession && transport.sessionId) {
			try {
				await transport.terminateSession();
			} catch {
				// a session the server already ended
			}
		}
		await client?.close();
		return {};
	default:
		throw new Error('unknown op ' + s.op);
	}
}

const rl = readline.createInterface({ input: process.stdin });
for await (const line of rl) {
	if (!line.trim())
		continue;
	let reply;
	try {
		reply = { ok: true, result: await step(JSON.parse(line)) };
	} catch (e) {
		reply = { ok: false, error: errorOf(e) };
	}
	process.stdout.write(JSON.stringify(reply) + '\n');
}
process.exit(0);
