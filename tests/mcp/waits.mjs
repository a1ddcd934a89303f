// Fewer round trips, against a running mcpvm with real VMs: vm_exec with
// wait_seconds and the one-shot vm_run, each over MCP (the official
// TypeScript SDK client on a session, and raw stateless 2026-07-28
// requests) and over JSON HTTP (POST /v1/tools/{name}), every result
// checked against its tool's outputSchema.  Cases: a command that ends
// within the wait, one that outlives it, a retry during the wait,
// cancellation during the wait (the job ends cancelled; vm_run's VM is
// gone), progress while waiting, and a client that goes away during
// vm_run: its VM is gone afterwards with none of its processes left (none
// with its id on the command line, none running as its uid) and no VM
// directory left on the state volume.
// tests/integration/test_e2e.py runs it after e2e.mjs and streams.mjs with:
//   MCPVM_URL        mcpd's base URL (http://127.0.0.1:PORT)
//   TOKEN_A          a workspace's credential; none of its VMs exist yet
//   VM_DIR           vmmd's directory of VM directories
//   AUDIT_LOG        vmmd's audit log
//   VM_UIDS          the VM uids, comma-separated
//   TOOLS_JSON       proto/tools.json
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import Ajv from "ajv";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const BASE = process.env.MCPVM_URL;
const TOKEN = process.env.TOKEN_A;
const URL_MCP = new URL("/mcp", BASE);
const VM_UIDS = new Set(process.env.VM_UIDS.split(",").map(Number));
const run = `waits-${process.pid}-${Date.now()}`;
let rid = 0;
const requestId = (what) => `${run}-${what}-${++rid}`;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Each tool's outputSchema, compiled once.
const ajv = new Ajv({ strict: false, allErrors: true });
const schemas = {};
for (const t of JSON.parse(readFileSync(process.env.TOOLS_JSON)).tools)
	schemas[t.name] = ajv.compile(t.outputSchema);

function valid(name, result) {
	const v = schemas[name];
	assert.ok(v(result), `${name}'s result fails its outputSchema: ` +
	    `${ajv.errorsText(v.errors)}: ${JSON.stringify(result)}`);
	return result;
}

// ---- the three ways in -------------------------------------------------

async function connect() {
	const client = new Client({ name: "mcpvm-waits", version: "1.0.0" });
	const transport = new StreamableHTTPClientTransport(URL_MCP, {
		requestInit: { headers: { Authorization: `Bearer ${TOKEN}` } },
	});
	await client.connect(transport);
	// The SDK checks structuredContent against the schemas it listed.
	await client.listTools();
	return client;
}

// MCP on the session; { error } for a tool error, as e2e.mjs does.
async function mcp(client, name, args, options = {}) {
	const res = await client.callTool({ name, arguments: args }, undefined,
	    { timeout: 600000, ...options });
	if (res.isError)
		return { error: JSON.parse(res.content[0].text).error };
	return valid(name, res.structuredContent);
}

// JSON HTTP; { status, body }.
async function rest(name, args, signal) {
	const r = await fetch(`${BASE}/v1/tools/${name}`, { method: "POST",
	    headers: { Authorization: `Bearer ${TOKEN}`,
	    "Content-Type": "application/json" },
	    body: JSON.stringify(args), signal });
	return { status: r.status, body: await r.json() };
}

async function restOk(name, args) {
	const r = await rest(name, args);
	assert.equal(r.status, 200, `${name}: ${JSON.stringify(r.body)}`);
	return valid(name, r.body);
}

// A stateless 2026-07-28 tools/call with a progress token: the answer is
// an event stream carrying the progress notifications, then the result.
// onEvent sees each message; returning true from it closes the stream.
async function stateless(name, args, onEvent = () => false) {
	const ac = new AbortController();
	const r = await fetch(URL_MCP, { method: "POST", signal: ac.signal,
	    headers: { Authorization: `Bearer ${TOKEN}`,
	    "Content-Type": "application/json",
	    Accept: "application/json, text/event-stream",
	    "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call",
	    "Mcp-Name": name },
	    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call",
	    params: { name, arguments: args, _meta: {
		"io.modelcontextprotocol/protocolVersion": "2026-07-28",
		"io.modelcontextprotocol/clientCapabilities": {},
		progressToken: "p1" } } }) });
	assert.equal(r.status, 200);
	assert.match(r.headers.get("content-type"), /text\/event-stream/);
	const msgs = [];
	let buf = "", closed = false;
	const dec = new TextDecoder();
	try {
		for await (const chunk of r.body) {
			buf += dec.decode(chunk, { stream: true });
			let i;
			while ((i = buf.indexOf("\n\n")) !== -1) {
				const ev = buf.slice(0, i);
				buf = buf.slice(i + 2);
				const data = ev.split("\n").filter((l) =>
				    l.startsWith("data: ")).map((l) =>
				    l.slice(6)).join("\n");
				if (data === "")
					continue;
				const m = JSON.parse(data);
				msgs.push(m);
				if (onEvent(m)) {
					closed = true;
					ac.abort();
					return { msgs, closed };
				}
			}
		}
	} catch (e) {
		if (!closed)
			throw e;
	}
	return { msgs, closed };
}

// ---- what a destroyed VM leaves ----------------------------------------

async function vmIds() {
	return (await restOk("vm_list", {})).vms.map((v) => v.vm_id);
}

// Processes running as a VM uid (QEMU, vmproxy), zombies aside, that
// belong to vm: its id is on their command line (vmproxy's --vm, QEMU's
// paths), or they run as a uid its processes were seen with.  Other
// workspaces' VMs may run meanwhile.
const seenUids = new Map();

function jailProcesses(vm) {
	const found = [];
	const uids = seenUids.get(vm) ?? new Set();
	for (const pid of readdirSync("/proc")) {
		if (!/^\d+$/.test(pid))
			continue;
		let st;
		try {
			st = readFileSync(`/proc/${pid}/status`, "utf8");
		} catch {
			continue;
		}
		const uid = Number(/^Uid:\s+(\d+)/m.exec(st)?.[1]);
		if (!VM_UIDS.has(uid) || /^State:\s+Z/m.test(st))
			continue;
		let cmd = "";
		try {
			cmd = readFileSync(`/proc/${pid}/cmdline`, "latin1");
		} catch {
			continue;
		}
		if (cmd.includes(vm)) {
			uids.add(uid);
			found.push(`${pid} uid ${uid} (${vm} on its command line)`);
		} else if (uids.has(uid))
			found.push(`${pid} uid ${uid} (a uid ${vm} ran as)`);
	}
	seenUids.set(vm, uids);
	return found;
}

// The new VM a vm_run made, once vm_list shows it.
async function newVm(before) {
	for (let i = 0; i < 600; i++) {
		const fresh = (await vmIds()).filter((v) => !before.includes(v));
		if (fresh.length > 0) {
			jailProcesses(fresh[0]);	/* its uid, if it runs */
			return fresh[0];
		}
		await sleep(100);
	}
	assert.fail("vm_run's VM never appeared in vm_list");
}

// vm is gone: not listed, not_found, no process, no directory.
async function assertGone(vm) {
	let left;
	for (let i = 0; i < 600; i++) {
		left = { listed: (await vmIds()).includes(vm),
		    procs: jailProcesses(vm),
		    dir: existsSync(join(process.env.VM_DIR, vm)) };
		if (!left.listed && left.procs.length === 0 && !left.dir)
			break;
		await sleep(100);
	}
	assert.deepEqual(left, { listed: false, procs: [], dir: false },
	    `VM ${vm} left something behind`);
	const r = await rest("vm_status", { vm_id: vm });
	assert.equal(r.status, 404, JSON.stringify(r.body));
}

// ---- vm_exec with wait_seconds -----------------------------------------

let client, vm;

before(async () => {
	client = await connect();
	vm = (await mcp(client, "vm_create", { request_id:
	    requestId("create"), memory_mib: 512 })).vm_id;
});

after(async () => {
	await client?.close();
});

const PRINT4 = "python3 -c 'print(4)'";

test("vm_exec waits for a command that ends within the wait (MCP)",
    async () => {
	const r = await mcp(client, "vm_exec", { vm_id: vm, request_id:
	    requestId("w"), command: PRINT4, wait_seconds: 30 });
	assert.equal(r.state, "completed");
	assert.equal(r.exit_code, 0);
	assert.equal(r.output.stdout, "4\n");
	assert.deepEqual(r.output.next_cursor, { stdout: 2, stderr: 0 });
});

test("vm_exec waits for a command that ends within the wait (JSON HTTP)",
    async () => {
	const r = await restOk("vm_exec", { vm_id: vm, request_id:
	    requestId("w"), command: "echo out; echo err >&2; exit 3",
	    wait_seconds: 30 });
	assert.equal(r.state, "failed");
	assert.equal(r.exit_code, 3);
	assert.equal(r.output.stdout, "out\n");
	assert.equal(r.output.stderr, "err\n");
});

for (const via of ["MCP", "JSON HTTP"]) {
	const call = via === "MCP" ? (n, a) => mcp(client, n, a) :
	    (n, a) => restOk(n, a);

	test(`vm_exec comes back running when the command outlives the ` +
	    `wait (${via})`, async () => {
		const r = await call("vm_exec", { vm_id: vm, request_id:
		    requestId("long"), command: "sleep 60", wait_seconds: 2 });
		assert.equal(r.state, "running");
		assert.equal(r.output, undefined);
		assert.equal(r.exit_code, undefined);
		const c = await call("vm_job_cancel", { vm_id: vm,
		    job_id: r.job_id });
		assert.equal(c.job_id, r.job_id);
	});

	test(`a retry during the wait gets the same job and answer (${via})`,
	    async () => {
		const args = { vm_id: vm, request_id: requestId("retry"),
		    command: "sleep 3; echo once >> /workspace/retries; " +
		    "cat /workspace/retries | wc -l", wait_seconds: 30 };
		const first = call("vm_exec", args);
		await sleep(1000);
		const second = await call("vm_exec", args);
		const r = await first;
		assert.equal(second.job_id, r.job_id);
		assert.equal(r.state, "completed");
		assert.deepEqual(second, r);
		const again = await call("vm_exec", args);
		assert.equal(again.job_id, r.job_id);
		await call("vm_exec", { vm_id: vm, request_id:
		    requestId("rm"), command: "rm /workspace/retries",
		    wait_seconds: 10 });
	});
}

// The job a wait ran: its state once it has ended.
async function jobEnd(job) {
	for (let i = 0; i < 300; i++) {
		const st = await restOk("vm_job_status", { vm_id: vm,
		    job_id: job });
		if (st.state !== "running")
			return st.state;
		await sleep(100);
	}
	return "running";
}

// The job vm_status lists for a request_id, once it is there.
async function jobOf(requestIdWanted) {
	for (let i = 0; i < 300; i++) {
		const st = await restOk("vm_status", { vm_id: vm });
		const j = st.jobs.find((x) => x.request_id === requestIdWanted);
		if (j !== undefined)
			return j.job_id;
		await sleep(100);
	}
	assert.fail(`no job for ${requestIdWanted}`);
}

test("progress while vm_exec waits, and notifications/cancelled cancels " +
    "the job (MCP session)", async () => {
	const ac = new AbortController();
	const progress = [];
	const id = requestId("cancel");
	const p = mcp(client, "vm_exec", { vm_id: vm, request_id: id,
	    command: "sleep 60", wait_seconds: 50 }, { signal: ac.signal,
	    onprogress: (n) => progress.push(n) });
	const job = await jobOf(id);
	while (progress.length === 0)
		await sleep(100);
	ac.abort("the test cancels");
	await assert.rejects(p);
	assert.equal(await jobEnd(job), "cancelled");
	assert.ok(progress.every((n) => n.total === 50 && n.progress <= 50),
	    JSON.stringify(progress));
});

test("progress on a stateless request's stream, and closing it cancels " +
    "the job (MCP 2026-07-28)", async () => {
	const id = requestId("sl-cancel");
	const { msgs, closed } = await stateless("vm_exec", { vm_id: vm,
	    request_id: id, command: "sleep 60", wait_seconds: 50 },
	    (m) => m.method === "notifications/progress");
	assert.ok(closed, JSON.stringify(msgs));
	assert.equal(msgs[0].params.progressToken, "p1");
	assert.equal(await jobEnd(await jobOf(id)), "cancelled");
});

test("a JSON HTTP client that goes away during the wait cancels the job",
    async () => {
	const ac = new AbortController();
	const id = requestId("rest-cancel");
	const p = rest("vm_exec", { vm_id: vm, request_id: id,
	    command: "sleep 60", wait_seconds: 50 }, ac.signal);
	const job = await jobOf(id);
	ac.abort();
	await assert.rejects(p);
	assert.equal(await jobEnd(job), "cancelled");
});

// ---- vm_run ------------------------------------------------------------

test("vm_run: the exec VM is destroyed first (vm_run's VMs are counted " +
    "alone below)", async () => {
	await mcp(client, "vm_destroy", { vm_id: vm });
	await assertGone(vm);
});

test("vm_run runs one command with stdin and destroys its VM (MCP, with " +
    "progress)", async () => {
	const progress = [];
	const r = await mcp(client, "vm_run", { request_id: requestId("run"),
	    command: "python3 -c 'print(4)'; wc -l", stdin_base64:
	    Buffer.from("a\nb\nc\n").toString("base64"), memory_mib: 512 },
	    { onprogress: (n) => progress.push(n.progress) });
	assert.equal(r.state, "completed");
	assert.equal(r.exit_code, 0);
	assert.equal(r.stdout, "4\n3\n");
	assert.equal(r.truncated, false);
	assert.ok(progress.length > 0);
	assert.deepEqual(progress, [...progress].sort((x, y) => x - y));
	await assertGone(r.vm_id);
	// Audited once, as vm_create is, with the VM it made.
	const lines = readFileSync(process.env.AUDIT_LOG, "utf8").trim()
	    .split("\n").map((l) => JSON.parse(l)).filter((l) =>
	    l.tool === "vm_run" && l.vm === r.vm_id);
	assert.deepEqual(lines.map((l) => [l.workspace, l.outcome]),
	    [["e2e-a", "ok"]]);
});

test("vm_run is admitted as vm_create is: over the workspace's memory it " +
    "is refused and leaves no VM", async () => {
	const before = await vmIds();
	const r = await rest("vm_run", { request_id: requestId("big-mem"),
	    command: "true", memory_mib: 16384 });
	assert.equal(r.status, 429, JSON.stringify(r.body));
	assert.equal(r.body.error.code, "quota_exceeded");
	assert.match(r.body.error.message, /memory_mib/);
	assert.deepEqual(await vmIds(), before);
});

test("vm_run bounds its output and says so (JSON HTTP)", async () => {
	const r = await restOk("vm_run", { request_id: requestId("big"),
	    command: "head -c 5000 /dev/zero | tr '\\0' x; echo e >&2; " +
	    "exit 7", max_bytes: 1000, memory_mib: 512 });
	assert.equal(r.state, "failed");
	assert.equal(r.exit_code, 7);
	assert.equal(r.stdout, "x".repeat(1000));
	assert.equal(r.stdout_bytes, 5000);
	assert.equal(r.stderr, "e\n");
	assert.equal(r.truncated, true);
	await assertGone(r.vm_id);
});

test("vm_run's timeout kills the command and the VM goes (JSON HTTP), " +
    "and a retry during the run gets the same answer", async () => {
	const args = { request_id: requestId("timeout"), command:
	    "echo started; sleep 60", timeout_seconds: 3, memory_mib: 512 };
	const before = await vmIds();
	const first = restOk("vm_run", args);
	const made = await newVm(before);
	const second = await restOk("vm_run", args);
	const r = await first;
	assert.equal(r.vm_id, made);
	assert.equal(r.state, "timed_out");
	assert.equal(r.timed_out, true);
	assert.equal(r.exit_code, null);
	assert.equal(r.stdout, "started\n");
	assert.deepEqual(second, r);
	assert.deepEqual(await restOk("vm_run", args), r);
	await assertGone(r.vm_id);
});

test("notifications/cancelled during vm_run destroys its VM (MCP session)",
    async () => {
	const ac = new AbortController();
	const before = await vmIds();
	const p = mcp(client, "vm_run", { request_id: requestId("run-cancel"),
	    command: "sleep 120", memory_mib: 512 }, { signal: ac.signal });
	const made = await newVm(before);
	ac.abort("the test cancels");
	await assert.rejects(p);
	await assertGone(made);
});

test("an MCP client that disconnects during vm_run leaves no VM, " +
    "process or disk (stateless stream closed once the command runs)",
    async () => {
	const before = await vmIds();
	const call = stateless("vm_run", { request_id: requestId("run-gone"),
	    command: "sleep 120", memory_mib: 512 }, (m) =>
	    m.method === "notifications/progress" && m.params.progress >= 3);
	const made = await newVm(before);
	const { closed } = await call;
	assert.ok(closed);
	await assertGone(made);
});

test("an MCP session client that goes away during vm_run leaves nothing",
    async () => {
		const other = await connect();
		const before = await vmIds();
		const p = mcp(other, "vm_run", { request_id:
		    requestId("run-close"), command: "sleep 120",
		    memory_mib: 512 });
		const made = await newVm(before);
		await other.close();
		await assert.rejects(p);
		await assertGone(made);
});

test("a JSON HTTP client that disconnects during vm_run leaves no VM, " +
    "process or disk", async () => {
	const ac = new AbortController();
	const before = await vmIds();
	const p = rest("vm_run", { request_id: requestId("rest-gone"),
	    command: "sleep 120", memory_mib: 512 }, ac.signal);
	const made = await newVm(before);
	ac.abort();
	await assert.rejects(p);
	await assertGone(made);
});
