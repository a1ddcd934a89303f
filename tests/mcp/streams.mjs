// The stream suite: WebSocket byte streams into real VMs, driven with the
// `ws` package -- an ordinary third-party client -- against a running mcpvm,
// with plain fetch to POST /v1/tools/{name} for the tools.  It checks what
// docs/mcpd.8 and README.md say about streams: echo, EOF as a half-close,
// 100 MiB each way, every refusal status before any guest connection, the
// message limit, the quotas, and the close codes for suspend, destroy,
// revocation and expiry.  tests/integration/test_e2e.py runs it after
// e2e.mjs, with:
//   MCPVM_URL        mcpd's base URL (http://127.0.0.1:PORT)
//   TOKEN_A, TOKEN_C credentials of two workspaces, WORKSPACE_A and
//                    WORKSPACE_C; C's is revoked here
//   AUTHCTL, CONF    authctl and the configuration it uses
//   ATTACH           mcpvm-attach
//   STREAMS_PER_VM   [vmmd] max_streams_per_vm as the harness set it
//   STREAMS_C        C's max_streams (below STREAMS_PER_VM)
//   STREAMS_HOST     [vmmd] max_streams: STREAMS_PER_VM + STREAMS_C
//   STREAM_PORT_MAX  the top of [vmmd] stream_ports (1025-STREAM_PORT_MAX)
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { once } from "node:events";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import WebSocket from "ws";

const BASE = process.env.MCPVM_URL;
const TOKEN_A = process.env.TOKEN_A, TOKEN_C = process.env.TOKEN_C;
const PER_VM = Number(process.env.STREAMS_PER_VM);
const PER_WS_C = Number(process.env.STREAMS_C);
const HOST_MAX = Number(process.env.STREAMS_HOST);
const PORT_MAX = Number(process.env.STREAM_PORT_MAX);
const MIB = 1024 * 1024;
const run = `streams-${process.pid}-${Date.now()}`;
let rid = 0;

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// A tool over JSON HTTP; { status, body }.
async function tool(token, name, args = {}) {
	const r = await fetch(`${BASE}/v1/tools/${name}`, { method: "POST",
	    headers: { Authorization: `Bearer ${token}`,
	    "Content-Type": "application/json" },
	    body: JSON.stringify(args) });
	return { status: r.status, body: await r.json() };
}

async function ok(token, name, args = {}) {
	const r = await tool(token, name, args);
	assert.equal(r.status, 200, `${name}: ${JSON.stringify(r.body)}`);
	return r.body;
}

// A command to the end; its stdout.
async function sh(token, vm, command) {
	const job = await ok(token, "vm_exec", { vm_id: vm,
	    request_id: `${run}-${++rid}`, command });
	let cursor = { stdout: 0, stderr: 0 }, out = "", err = "", r;
	for (;;) {
		r = await ok(token, "vm_job_output", { vm_id: vm,
		    job_id: job.job_id, cursor });
		out += r.stdout;
		err += r.stderr;
		const moved = r.next_cursor.stdout !== cursor.stdout ||
		    r.next_cursor.stderr !== cursor.stderr;
		cursor = r.next_cursor;
		if (r.state !== "running" && !moved)
			break;
		if (!moved)
			await sleep(200);
	}
	assert.equal(r.exit_code, 0, `${command}: ${err}`);
	return out;
}

const streamUrl = (vm, port) =>
    `${BASE.replace(/^http/, "ws")}/v1/vms/${vm}/streams/${port}`;

// Every socket, so that a failed test leaves none open to keep node up.
const sockets = new Set();

// Opens a stream; resolves with the socket once upgraded, or with
// { status, body } when the upgrade is refused.  Close and message
// listeners go on at once so nothing is missed.
function connect(token, vm, port, opts = {}) {
	return new Promise((resolve) => {
		const headers = token === null ? {} :
		    { Authorization: `Bearer ${token}` };
		const ws = new WebSocket(streamUrl(vm, port), {
		    perMessageDeflate: false, ...opts,
		    headers: { ...headers, ...opts.headers } });
		sockets.add(ws);
		ws.chunks = [];
		ws.on("message", (d) => ws.chunks.push(d));
		ws.closed = new Promise((r) => ws.on("close", (code, why) =>
		    r({ code, reason: why.toString(), at: Date.now() })));
		ws.on("error", (e) => resolve({ status: 0, error: e.message }));
		ws.on("open", () => resolve(ws));
		ws.on("unexpected-response", (req, res) => {
			const body = [];
			res.on("data", (d) => body.push(d));
			res.on("end", () => {
				resolve({ status: res.statusCode,
				    headers: res.headers,
				    body: Buffer.concat(body).toString() });
				req.destroy();
			});
		});
	});
}

async function open(token, vm, port, opts) {
	const ws = await connect(token, vm, port, opts);
	assert.ok(ws instanceof WebSocket, `stream to ${port} refused: ` +
	    JSON.stringify(ws));
	return ws;
}

// Messages of at most 1 MiB, the most a client may send.
function* pieces(buf, size = MIB) {
	for (let i = 0; i < buf.length; i += size)
		yield buf.subarray(i, i + size);
}

// Sends with backpressure: never more than `window` bytes unwritten.
async function sendAll(ws, chunks, window = 8 * MIB) {
	let wait = null;
	for (const c of chunks) {
		while (ws.bufferedAmount > window)
			await new Promise((r) => { wait = r; });
		ws.send(c, { binary: true }, () => {
			if (wait !== null && ws.bufferedAmount <= window) {
				const w = wait;
				wait = null;
				w();
			}
		});
	}
}

const ECHO = 7000, DIGEST = 7001, HOLD = 7002, NOBODY = 6999;
const OUTSIDE = PORT_MAX + 1;

// Each guest listener writes one line per accepted connection to
// /workspace/accepts-PORT, so a test can tell that a refusal never reached
// the guest.  echo: bytes back until EOF, then close.  digest: reads to
// EOF, then answers "LENGTH SHA256" -- a reply after the half-close.
// hold: reads and discards until the client goes.
const SERVER = `import hashlib, socket, sys, threading
def echo(c):
    while True:
        d = c.recv(262144)
        if not d:
            break
        c.sendall(d)
    c.shutdown(socket.SHUT_WR)
    c.close()
def digest(c):
    h, n = hashlib.sha256(), 0
    while True:
        d = c.recv(262144)
        if not d:
            break
        h.update(d)
        n += len(d)
    c.sendall(b'%d %s\\n' % (n, h.hexdigest().encode()))
    c.shutdown(socket.SHUT_WR)
    c.close()
def hold(c):
    while c.recv(65536):
        pass
    c.close()
def serve(s, port, fn):
    while True:
        c, _ = s.accept()
        with open('/workspace/accepts-%d' % port, 'a') as f:
            f.write('x\\n')
        threading.Thread(target=fn, args=(c,), daemon=True).start()
ports = {${ECHO}: echo, ${DIGEST}: digest, ${HOLD}: hold, ${OUTSIDE}: echo}
socks = []
for port, fn in ports.items():
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(('127.0.0.1', port))
    s.listen(16)
    socks.append((s, port, fn))
open('/workspace/listening', 'w').close()
for s, port, fn in socks:
    threading.Thread(target=serve, args=(s, port, fn)).start()
`;
async function startServer(token, vm) {
	await ok(token, "vm_write_file", { vm_id: vm, path: "streams.py",
	    data_base64: Buffer.from(SERVER).toString("base64") });
	await sh(token, vm, "rm -f /workspace/listening /workspace/accepts-*; " +
	    "nohup python3 /workspace/streams.py >/workspace/streams.log " +
	    "2>&1 & for i in $(seq 100); do [ -e /workspace/listening ] && " +
	    "exit 0; sleep 0.2; done; cat /workspace/streams.log >&2; exit 1");
}

// How many connections each listener accepted: { port: count }.
async function accepts(token, vm) {
	const out = await sh(token, vm, "cd /workspace && for f in " +
	    "accepts-*; do [ -e \"$f\" ] && echo \"$f $(wc -l < $f)\"; " +
	    "done; true");
	const n = {};
	for (const line of out.trim().split("\n").filter(Boolean)) {
		const [f, c] = line.split(" ");
		n[Number(f.slice(8))] = Number(c);
	}
	return n;
}

// vmmd learns the open streams from the VM's proxy a moment later.
async function openStreams(token, vm, want) {
	let st;
	for (let i = 0; i < 100; i++) {
		st = await ok(token, "vm_status", { vm_id: vm });
		if (st.open_streams === want)
			return;
		await sleep(100);
	}
	assert.equal(st.open_streams, want, "vm_status open_streams");
}

let vmA, vmC;
const heldC = [];	// C's streams, open from the quota test on

before(async () => {
	// Both boot at once: under TCG that is the slow part.
	[vmA, vmC] = (await Promise.all([TOKEN_A, TOKEN_C].map((t) =>
	    ok(t, "vm_create", { request_id: `${run}-create`,
	    memory_mib: 512 })))).map((r) => r.vm_id);
	await Promise.all([startServer(TOKEN_A, vmA),
	    startServer(TOKEN_C, vmC)]);
});

after(() => {
	for (const ws of sockets)
		ws.terminate();
});

// Waits until `n` bytes have come back on ws; they, concatenated.
async function received(ws, n) {
	for (let i = 0; i < 200 && Buffer.concat(ws.chunks).length < n; i++)
		await sleep(50);
	return Buffer.concat(ws.chunks);
}

test("a stream echoes binary, text and fragmented messages, answers pings",
    async () => {
	const ws = await open(TOKEN_A, vmA, ECHO);
	const pong = once(ws, "pong");
	ws.ping("still there?");
	assert.equal((await pong)[0].toString(), "still there?");
	ws.send(Buffer.from([0, 1, 2, 255]));
	ws.send("héllo");	// text goes as its UTF-8 bytes
	ws.send(Buffer.from("fr"), { fin: false });	// one message, three
	ws.send(Buffer.from("ag"), { fin: false });	// frames
	ws.send(Buffer.from("ment"), { fin: true });
	const want = Buffer.concat([Buffer.from([0, 1, 2, 255]),
	    Buffer.from("héllo"), Buffer.from("fragment")]);
	assert.deepEqual(await received(ws, want.length), want);
	ws.send(Buffer.alloc(0));
	const c = await ws.closed;
	assert.equal(c.code, 1000, c.reason);
});

test("an empty binary message is EOF: the guest still replies, then 1000",
    async () => {
	const ws = await open(TOKEN_A, vmA, DIGEST);
	const data = randomBytes(3 * MIB + 12345);
	await sendAll(ws, pieces(data));
	await sleep(300);
	assert.equal(ws.chunks.length, 0, "no reply before the EOF");
	ws.send(Buffer.alloc(0), { binary: true });
	const c = await ws.closed;
	assert.equal(Buffer.concat(ws.chunks).toString(), `${data.length} ` +
	    `${createHash("sha256").update(data).digest("hex")}\n`,
	    "the guest read every byte, then EOF, and answered after it");
	assert.equal(c.code, 1000, c.reason);
	// Bytes after the EOF are not the guest's to read.
	const late = await open(TOKEN_A, vmA, DIGEST);
	late.send(Buffer.from("seen"));
	late.send(Buffer.alloc(0));
	late.send(Buffer.from("unseen"));
	const lc = await late.closed;
	assert.equal(Buffer.concat(late.chunks).toString(), "4 " +
	    createHash("sha256").update("seen").digest("hex") + "\n");
	assert.equal(lc.code, 1000);
});

// 100 messages of 1 MiB, the most a client may send in one; each carries
// its index so that a lost, doubled or reordered one changes the digest.
// Hashes what it yields into `sent`.
function* hundredMiB(sent) {
	const block = randomBytes(MIB);

	for (let i = 0; i < 100; i++) {
		const c = Buffer.from(block);
		c.writeUInt32BE(i, 0);
		sent.update(c);
		yield c;
	}
}

const rate = (secs) => `${(100 / secs).toFixed(1)} MiB/s`;

test("100 MiB each way through a guest echo, byte for byte", async (t) => {
	const sent = createHash("sha256"), got = createHash("sha256");
	const ws = await open(TOKEN_A, vmA, ECHO);
	let received = 0;
	ws.removeAllListeners("message");
	ws.on("message", (d) => {
		got.update(d);
		received += d.length;
	});
	const t0 = performance.now();
	await sendAll(ws, hundredMiB(sent));
	const tSent = performance.now();
	ws.send(Buffer.alloc(0));
	const c = await ws.closed;
	const secs = (performance.now() - t0) / 1000;
	assert.equal(c.code, 1000, c.reason);
	assert.equal(received, 100 * MIB);
	assert.equal(got.digest("hex"), sent.digest("hex"));
	t.diagnostic(`ws: 100 MiB each way at once in ${secs.toFixed(1)} s, ` +
	    `${rate(secs)} per direction (the last byte sent after ` +
	    `${((tSent - t0) / 1000).toFixed(1)} s)`);
});

test("100 MiB each way through mcpvm-attach, byte for byte", async (t) => {
	const dir = mkdtempSync(join(tmpdir(), "streams-tok-"));
	const tok = join(dir, "a");
	writeFileSync(tok, TOKEN_A, { mode: 0o600 });
	const sent = createHash("sha256"), got = createHash("sha256");
	const t0 = performance.now();
	const p = spawn(process.env.ATTACH, ["--endpoint", BASE,
	    "--token-file", tok, "--vm", vmA, "--port", String(ECHO)]);
	let received = 0, stderr = "";
	p.stdout.on("data", (d) => {
		got.update(d);
		received += d.length;
	});
	p.stderr.on("data", (d) => { stderr += d; });
	const exited = once(p, "close");
	for (const c of hundredMiB(sent))
		if (!p.stdin.write(c))
			await once(p.stdin, "drain");
	p.stdin.end();	// attach sends EOF; the echo closes; 1000
	const [code] = await exited;
	const secs = (performance.now() - t0) / 1000;
	rmSync(dir, { recursive: true });
	assert.equal(code, 0, stderr);
	assert.equal(received, 100 * MIB);
	assert.equal(got.digest("hex"), sent.digest("hex"));
	t.diagnostic(`mcpvm-attach: 100 MiB each way at once in ` +
	    `${secs.toFixed(1)} s, ${rate(secs)} per direction`);
});

test("refusals come before any guest connection, each with its status",
    async () => {
	const bogus = "0123456789abcdef0123456789abcdef";
	const cases = [
		["no credential", null, vmA, ECHO, {}, 401],
		["a bad credential", "not-a-token", vmA, ECHO, {}, 401],
		["another workspace's VM", TOKEN_A, vmC, ECHO, {}, 404],
		["a VM that does not exist", TOKEN_A, bogus, ECHO, {}, 404],
		["port 1023 (the job broker)", TOKEN_A, vmA, 1023, {}, 403],
		["port 1024 (guestd)", TOKEN_A, vmA, 1024, {}, 403],
		["port 22, outside stream_ports", TOKEN_A, vmA, 22, {}, 403],
		[`port ${OUTSIDE}, outside stream_ports`, TOKEN_A, vmA,
		    OUTSIDE, {}, 403],
		["a foreign Origin", TOKEN_A, vmA, ECHO,
		    { origin: "http://evil.example" }, 403],
		["a Host not in allowed_hosts", TOKEN_A, vmA, ECHO,
		    { headers: { Host: "evil.example" } }, 403],
		["a port nothing listens on", TOKEN_A, vmA, NOBODY, {}, 409],
	];
	const before = await accepts(TOKEN_A, vmA);
	for (const [what, tok, vm, port, opts, status] of cases) {
		const r = await connect(tok, vm, port, opts);
		if (r instanceof WebSocket)
			r.terminate();
		assert.equal(r.status, status, `${what}: ${JSON.stringify(r)}`);
		assert.ok(JSON.parse(r.body).error.code, what);
		if (status === 401)
			assert.match(r.headers["www-authenticate"], /^Bearer/);
	}
	assert.deepEqual(await accepts(TOKEN_A, vmA), before,
	    "no refused stream reached a listener of A's VM");
	assert.deepEqual(await accepts(TOKEN_C, vmC), {},
	    "nor of C's VM");
});

test("a message over 1 MiB closes the stream with 1009", async () => {
	const ws = await open(TOKEN_A, vmA, ECHO);
	ws.send(Buffer.alloc(MIB + 1));
	const c = await ws.closed;
	assert.equal(c.code, 1009, c.reason);
	assert.equal(ws.chunks.length, 0, "nothing of it reached the guest");
	// Fragments count together: 1 MiB in two goes through; one byte
	// more closes the stream at the fragment that passes the limit (the
	// ones before it are relayed as they come).
	const f = await open(TOKEN_A, vmA, ECHO);
	const whole = Buffer.concat([Buffer.alloc(MIB / 2, 1),
	    Buffer.alloc(MIB / 2, 2)]);
	f.send(whole.subarray(0, MIB / 2), { fin: false });
	f.send(whole.subarray(MIB / 2), { fin: true });
	assert.ok((await received(f, MIB)).equals(whole));
	f.send(Buffer.alloc(MIB / 2), { fin: false });
	f.send(Buffer.alloc(MIB / 2 + 1), { fin: true });
	const fc = await f.closed;
	assert.equal(fc.code, 1009, fc.reason);
	const back = Buffer.concat(f.chunks).length;
	assert.ok(back <= MIB + MIB / 2, `${back} bytes came back`);
});

test("a full per-VM, per-workspace or host stream quota is 409", async () => {
	// A: the VM's limit.
	await openStreams(TOKEN_A, vmA, 0);
	const held = [];
	for (let i = 0; i < PER_VM; i++)
		held.push(await open(TOKEN_A, vmA, HOLD));
	await openStreams(TOKEN_A, vmA, PER_VM);
	const r = await connect(TOKEN_A, vmA, HOLD);
	assert.equal(r.status, 409, JSON.stringify(r));
	assert.match(JSON.parse(r.body).error.message, /max_streams_per_vm/);
	assert.equal((await accepts(TOKEN_A, vmA))[HOLD], PER_VM,
	    "the refused stream never reached the guest");
	for (const ws of held)
		ws.close(1000);
	await Promise.all(held.map((ws) => ws.closed));
	await openStreams(TOKEN_A, vmA, 0);
	// C: the workspace's limit, below the VM's.  These stay open for the
	// revocation test.
	for (let i = 0; i < PER_WS_C; i++)
		heldC.push(await open(TOKEN_C, vmC, HOLD));
	await openStreams(TOKEN_C, vmC, PER_WS_C);
	const w = await connect(TOKEN_C, vmC, HOLD);
	assert.equal(w.status, 409, JSON.stringify(w));
	assert.match(JSON.parse(w.body).error.message, /workspace max_streams/);
	// The host's limit: C's streams and A's fill it, whoever asks next.
	const more = [];
	while (heldC.length + more.length < HOST_MAX)
		more.push(await open(TOKEN_A, vmA, HOLD));
	await openStreams(TOKEN_A, vmA, more.length);
	const h = await connect(TOKEN_A, vmA, HOLD);
	assert.equal(h.status, 409, JSON.stringify(h));
	assert.match(JSON.parse(h.body).error.message, /max_streams: the host/);
	for (const ws of more)
		ws.close(1000);
	await Promise.all(more.map((ws) => ws.closed));
	await openStreams(TOKEN_A, vmA, 0);
});

test("a suspension closes with 1001 suspended; a new stream wakes the VM",
    async (t) => {
	for (const [mode, state] of [["pause", "paused"],
	    ["hibernate", "hibernated"]]) {
		const ws = await open(TOKEN_A, vmA, ECHO);
		await openStreams(TOKEN_A, vmA, 1);
		const busy = await tool(TOKEN_A, "vm_suspend", { vm_id: vmA,
		    mode });
		assert.equal(busy.status, 409);
		assert.equal(busy.body.error.code, "busy",
		    "an open stream is activity");
		await ok(TOKEN_A, "vm_suspend", { vm_id: vmA, mode,
		    force: true });
		const c = await ws.closed;
		assert.equal(c.code, 1001, mode);
		assert.equal(c.reason, "suspended", mode);
		assert.equal((await ok(TOKEN_A, "vm_status",
		    { vm_id: vmA })).state, state);
		// Opening a stream resumes the VM; the listener survived.
		const t0 = Date.now();
		const again = await open(TOKEN_A, vmA, ECHO);
		t.diagnostic(`a stream opened a ${state} VM in ` +
		    `${Date.now() - t0} ms`);
		again.send(Buffer.from("back"));
		for (let i = 0; i < 100 && again.chunks.length === 0; i++)
			await sleep(50);
		assert.equal(Buffer.concat(again.chunks).toString(), "back");
		assert.equal((await ok(TOKEN_A, "vm_status",
		    { vm_id: vmA })).state, "running");
		again.send(Buffer.alloc(0));
		assert.equal((await again.closed).code, 1000);
	}
});

test("revoking the workspace closes its streams with 1008 within 5 s",
    async () => {
	assert.equal(heldC.length, PER_WS_C, "the quota test opened them");
	const t0 = Date.now();
	execFileSync(process.env.AUTHCTL, ["--config", process.env.CONF,
	    "revoke-workspace", "--workspace", process.env.WORKSPACE_C]);
	for (const ws of heldC) {
		const c = await ws.closed;
		assert.equal(c.code, 1008, c.reason);
		assert.ok(c.at - t0 < 5000, `closed after ${c.at - t0} ms`);
	}
	const r = await connect(TOKEN_C, vmC, ECHO);
	assert.equal(r.status, 401, "the revoked credential opens nothing");
});

test("a credential that expires closes its streams with 1008 within 5 s",
    async () => {
	// A second credential of A's workspace, good for a few seconds.
	const ttl = 4;
	const token = execFileSync(process.env.AUTHCTL, ["--config",
	    process.env.CONF, "issue", "--workspace", process.env.WORKSPACE_A,
	    "--ttl", `${ttl}s`, "--stdout"], { stdio: ["ignore", "pipe",
	    "ignore"] }).toString().trim();
	const t0 = Date.now();
	const ws = await open(token, vmA, HOLD);
	const c = await ws.closed;
	assert.equal(c.code, 1008, c.reason);
	assert.match(c.reason, /expired/);
	// Expiry times are whole seconds.
	assert.ok(c.at - t0 > (ttl - 2) * 1000, `closed after ${c.at - t0} ms`);
	assert.ok(c.at - t0 < (ttl + 5) * 1000, `closed after ${c.at - t0} ms`);
	assert.equal((await connect(token, vmA, HOLD)).status, 401);
});

test("destroying the VM closes its streams with 1001 destroyed", async () => {
	const ws = await open(TOKEN_A, vmA, HOLD);
	await openStreams(TOKEN_A, vmA, 1);
	const r = await ok(TOKEN_A, "vm_destroy", { vm_id: vmA });
	assert.equal(r.destroyed, true);
	const c = await ws.closed;
	assert.equal(c.code, 1001);
	assert.equal(c.reason, "destroyed");
	const gone = await connect(TOKEN_A, vmA, HOLD);
	assert.equal(gone.status, 404);
});
