// MCP tasks (the io.modelcontextprotocol/tasks extension of 2026-07-28)
// against a running mcpvm with real VMs, driven by the official TypeScript
// SDK: @modelcontextprotocol/client negotiates 2026-07-28 with
// server/discover, and @modelcontextprotocol/ext-tasks runs the task
// lifecycle on it (its raw dispatch, below, is plain fetch with the
// extension's routing headers).  Cases: a vm_exec becomes a task, is polled
// while its command waits, and completes with vm_exec's result for the
// ended job (as the job tools tell it); its retry is the same task; a task is cancelled and its job ends
// cancelled; another workspace's client finds neither task nor can cancel
// it; a client without the extension gets vm_exec's ordinary answer and
// -32021 for tasks/get.  A vm_run becomes a task too: polled while its VM
// is made and its command runs (the status says where vm_job_output pages
// its output), it completes with vm_run's result (origin, commit's
// snapshot) after its VM is gone, which a plain retry of the same
// request_id returns again; cancelled, its VM is destroyed; workspace D
// finds none of it.  No test waits on time: a command that must still
// run waits for a file the test writes, and a task is asked again after
// its pollIntervalMs until it says what the test waits for.
// tests/integration/test_e2e.py runs it with:
//   MCPVM_URL        mcpd's base URL (http://127.0.0.1:PORT)
//   TOKEN_A, TOKEN_D credentials of two workspaces (e2e.mjs revokes B's)
//   TOOLS_JSON       proto/tools.json
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import Ajv from "ajv";
import { Client, StreamableHTTPClientTransport } from
    "@modelcontextprotocol/client";
import { createTaskSessionFromClient } from
    "@modelcontextprotocol/ext-tasks/client";

const BASE = process.env.MCPVM_URL;
const URL_MCP = new URL("/mcp", BASE);
const V = "2026-07-28";
const EXT = "io.modelcontextprotocol/tasks";
const run = `tasks-${process.pid}-${Date.now()}`;
let rid = 0;
const requestId = (what) => `${run}-${what}-${++rid}`;

const ajv = new Ajv({ strict: false, allErrors: true });
const toolsJson = JSON.parse(readFileSync(process.env.TOOLS_JSON)).tools;
const execSchema = ajv.compile(toolsJson.find((t) => t.name === "vm_exec")
    .outputSchema);
const runSchema = ajv.compile(toolsJson.find((t) => t.name === "vm_run")
    .outputSchema);

function validExec(result) {
	assert.ok(execSchema(result), "vm_exec's result fails its outputSchema: " +
	    `${ajv.errorsText(execSchema.errors)}: ${JSON.stringify(result)}`);
	return result;
}

// JSON HTTP for the setup around the tasks; the body, status 200.
async function rest(token, name, args) {
	const r = await fetch(`${BASE}/v1/tools/${name}`, { method: "POST",
	    headers: { Authorization: `Bearer ${token}`,
	    "Content-Type": "application/json" }, body: JSON.stringify(args) });
	const body = await r.json();
	assert.equal(r.status, 200, `${name}: ${JSON.stringify(body)}`);
	return body;
}

// One stateless request as the extension frames it: the raw dispatch the
// tasks package asks its host for.  { kind: "result" | "error", ... }.
function rawDispatcher(token) {
	let n = 0;
	return async (request, options = {}) => {
		const p = request.params ?? {};
		const name = request.method === "tools/call" ? p.name :
		    p.taskId;
		const headers = { Authorization: `Bearer ${token}`,
		    "Content-Type": "application/json",
		    Accept: "application/json, text/event-stream",
		    "MCP-Protocol-Version": V, "Mcp-Method": request.method };
		if (name !== undefined)
			headers["Mcp-Name"] = name;
		const r = await fetch(URL_MCP, { method: "POST", headers,
		    signal: options.signal, body: JSON.stringify({
		    jsonrpc: "2.0", id: `raw-${++n}`, ...request }) });
		const body = await r.json();
		return body.error !== undefined ?
		    { kind: "error", error: body.error } :
		    { kind: "result", result: body.result };
	};
}

async function connect(token, name) {
	const clientInfo = { name, version: "1.0.0" };
	const clientCapabilities = {};
	const client = new Client(clientInfo, { capabilities: clientCapabilities,
	    versionNegotiation: { mode: { pin: V } } });
	await client.connect(new StreamableHTTPClientTransport(URL_MCP, {
	    requestInit: { headers: { Authorization: `Bearer ${token}` } } }));
	const session = createTaskSessionFromClient(client, { endpointId: name,
	    rawDispatch: rawDispatcher(token), v2RequestFraming: {
	    protocolVersion: V, clientInfo, clientCapabilities } });
	return { client, session };
}

let a, b, vm;

before(async () => {
	a = await connect(process.env.TOKEN_A, "mcpvm-tasks-a");
	b = await connect(process.env.TOKEN_D, "mcpvm-tasks-d");
	vm = (await rest(process.env.TOKEN_A, "vm_create",
	    { request_id: requestId("vm"), idle_seconds: 600 })).vm_id;
});

after(async () => {
	if (vm !== undefined)
		await rest(process.env.TOKEN_A, "vm_destroy", { vm_id: vm });
	for (const c of [a, b]) {
		if (c === undefined)
			continue;
		await c.session.close();
		await c.client.close();
	}
});

// A command that runs until the test writes its go file.
const waitFor = (file) =>
    `while [ ! -e ${file} ]; do sleep 0.2; done; cat ${file}`;

async function go(file, text) {
	await rest(process.env.TOKEN_A, "vm_write_file", { vm_id: vm,
	    path: file, data_base64: Buffer.from(text).toString("base64") });
}

test("mcpd offers the extension in server/discover", () => {
	assert.deepEqual(a.client.getServerCapabilities().extensions,
	    { [EXT]: {} });
});

test("vm_exec is a task: polled while it runs, then vm_exec's result",
    async () => {
	const req = requestId("exec");
	const args = { vm_id: vm, request_id: req, command:
	    `${waitFor("go1")}; echo err >&2; exit 3` };
	const ex = await a.session.callTool("vm_exec", args);
	assert.equal(ex.kind, "task");
	const id = ex.handle.taskId;
	const [v, job, r] = [id.slice(0, id.indexOf(".")),
	    id.slice(id.indexOf(".") + 1, id.indexOf(".", id.indexOf(".") + 1)),
	    id.slice(id.indexOf(".", id.indexOf(".") + 1) + 1)];
	assert.deepEqual([v, r], [vm, req], id);
	// Still waiting for go1: working, whenever it is asked.
	const snap = await a.session.task(id).snapshot();
	assert.equal(snap.status, "working");
	assert.equal(snap.retentionMs, null);
	assert.equal(snap.suggestedPollIntervalMs, 1000);
	assert.equal((await rest(process.env.TOKEN_A, "vm_job_status",
	    { vm_id: vm, job_id: job })).state, "running");
	await go("go1", "go\n");
	const { outcome } = await ex.settle();
	assert.equal(outcome.status, "completed", JSON.stringify(outcome));
	const res = outcome.result;
	assert.equal(res.isError, false);
	const sc = validExec(res.structuredContent);
	assert.deepEqual(JSON.parse(res.content[0].text), sc);
	assert.equal(sc.job_id, job);
	assert.equal(sc.state, "failed");
	assert.equal(sc.exit_code, 3);
	assert.equal(sc.output.stdout, "go\n");
	assert.equal(sc.output.stderr, "err\n");
	// The job as the job tools tell it: the output is vm_job_output's
	// first page, as in vm_exec's answer to a wait the job ended in.
	const st = await rest(process.env.TOKEN_A, "vm_job_status",
	    { vm_id: vm, job_id: job });
	assert.deepEqual([sc.state, sc.exit_code, sc.started_at],
	    [st.state, st.exit_code, st.started_at]);
	const { vm_id: _, ...page } = await rest(process.env.TOKEN_A,
	    "vm_job_output", { vm_id: vm, job_id: job });
	assert.deepEqual(sc.output, page);
	// A retry of the vm_exec is the same task.
	const ex2 = await a.session.callTool("vm_exec", args);
	assert.equal(ex2.handle.taskId, id);
	assert.equal((await ex2.settle()).outcome.status, "completed");
});

test("tasks/cancel cancels the job; another workspace finds no task",
    async () => {
	const ex = await a.session.callTool("vm_exec", { vm_id: vm,
	    request_id: requestId("cancel"), command: waitFor("never") });
	assert.equal(ex.kind, "task");
	const id = ex.handle.taskId;
	const job = id.split(".")[1];
	// Workspace B: not found (-32602), and its cancel changes nothing.
	await assert.rejects(b.session.task(id).snapshot(),
	    (e) => /-32602|not found/i.test(`${e.code} ${e.message} ` +
	    JSON.stringify(e.cause ?? {})));
	await assert.rejects(b.session.task(id).cancel());
	assert.equal((await a.session.task(id).snapshot()).status, "working");
	await ex.cancel();
	const outcome = await a.session.task(id).result();
	assert.equal(outcome.status, "cancelled", JSON.stringify(outcome));
	assert.equal((await rest(process.env.TOKEN_A, "vm_job_status",
	    { vm_id: vm, job_id: job })).state, "cancelled");
	await ex.close();
});

test("a client without the extension: vm_exec as before, tasks/get -32021",
    async () => {
	const plain = new Client({ name: "mcpvm-tasks-plain", version: "1" },
	    { versionNegotiation: { mode: { pin: V } } });
	await plain.connect(new StreamableHTTPClientTransport(URL_MCP, {
	    requestInit: { headers: { Authorization:
	    `Bearer ${process.env.TOKEN_A}` } } }));
	const res = await plain.callTool({ name: "vm_exec", arguments: {
	    vm_id: vm, request_id: requestId("plain"), command: "echo plain",
	    wait_seconds: 60 } });
	const sc = validExec(res.structuredContent);
	assert.equal(sc.state, "completed");
	assert.equal(sc.output.stdout, "plain\n");
	const id = `${vm}.${sc.job_id}.${sc.request_id}`;
	const r = await fetch(URL_MCP, { method: "POST", headers: {
	    Authorization: `Bearer ${process.env.TOKEN_A}`,
	    "Content-Type": "application/json",
	    Accept: "application/json, text/event-stream",
	    "MCP-Protocol-Version": V, "Mcp-Method": "tasks/get",
	    "Mcp-Name": id }, body: JSON.stringify({ jsonrpc: "2.0", id: 1,
	    method: "tasks/get", params: { taskId: id, _meta: {
		"io.modelcontextprotocol/protocolVersion": V,
		"io.modelcontextprotocol/clientCapabilities": {} } } }) });
	const body = await r.json();
	assert.equal(body.error?.code, -32021, JSON.stringify(body));
	assert.deepEqual(body.error.data.requiredCapabilities.extensions,
	    { [EXT]: {} });
	// The same id with the extension: that job, completed.
	const done = await a.session.task(id).result();
	assert.equal(done.status, "completed");
	assert.deepEqual(done.result.structuredContent, sc);
	await plain.close();
});

// A vm_run task's status while its command runs names its VM and job.
const RUNNING = /running in VM (\S+) as job (\S+);/;

// Asks for the task again, after its pollIntervalMs, until it runs.
async function untilRunning(session, id) {
	for (;;) {
		const snap = await session.task(id).snapshot();
		assert.equal(snap.status, "working", JSON.stringify(snap));
		const m = RUNNING.exec(snap.statusMessage ?? "");
		if (m !== null)
			return { vm: m[1], job: m[2] };
		await new Promise((r) => setTimeout(r,
		    snap.suggestedPollIntervalMs));
	}
}

// The workspace's VMs, by id.
async function vmIds(token) {
	return (await rest(token, "vm_list", {})).vms.map((v) => v.vm_id);
}

test("vm_run is a task: polled while it runs, then vm_run's result",
    async () => {
	const req = requestId("run");
	const args = { request_id: req, command: "echo started; " +
	    "while [ ! -e go ]; do sleep 0.2; done; echo done > kept; cat kept",
	    timeout_seconds: 300, commit: { name: `${run}-stage` } };
	const ex = await a.session.callTool("vm_run", args);
	assert.equal(ex.kind, "task");
	const id = ex.handle.taskId;
	assert.equal(id, `run:${req}`);
	const { vm: runVm, job } = await untilRunning(a.session, id);
	assert.ok((await vmIds(process.env.TOKEN_A)).includes(runVm));
	// Its output so far, paged as vm_job_output pages any job's.
	const page = await rest(process.env.TOKEN_A, "vm_job_output",
	    { vm_id: runVm, job_id: job });
	assert.equal(page.job_id, job);
	assert.ok("started\n".startsWith(page.stdout), page.stdout);
	assert.equal((await rest(process.env.TOKEN_A, "vm_job_status",
	    { vm_id: runVm, job_id: job })).state, "running");
	await rest(process.env.TOKEN_A, "vm_write_file", { vm_id: runVm,
	    path: "go", data_base64: Buffer.from("go\n").toString("base64") });
	const { outcome } = await ex.settle();
	assert.equal(outcome.status, "completed", JSON.stringify(outcome));
	const res = outcome.result;
	assert.equal(res.isError, false);
	const sc = res.structuredContent;
	assert.ok(runSchema(sc), "vm_run's result fails its outputSchema: " +
	    `${ajv.errorsText(runSchema.errors)}: ${JSON.stringify(sc)}`);
	assert.deepEqual(JSON.parse(res.content[0].text), sc);
	assert.deepEqual([sc.vm_id, sc.job_id, sc.request_id, sc.state,
	    sc.exit_code, sc.stdout], [runVm, job, req, "completed", 0,
	    "started\ndone\n"]);
	assert.ok(["booted", "warm"].includes(sc.origin), sc.origin);
	assert.equal(sc.commit.committed, true, JSON.stringify(sc.commit));
	// The VM is gone, and the task still resolves: vmmd's receipt.
	assert.ok(!(await vmIds(process.env.TOKEN_A)).includes(runVm));
	const again = await a.session.task(id).result();
	assert.equal(again.status, "completed");
	assert.deepEqual(again.result.structuredContent, sc);
	// A plain retry of the request_id: the same run's result, once.
	assert.deepEqual(await rest(process.env.TOKEN_A, "vm_run", args), sc);
	// The stage it left holds what the command wrote.
	const next = await rest(process.env.TOKEN_A, "vm_run", {
	    request_id: requestId("run-stage"), command: "cat kept",
	    snapshot: sc.commit.snapshot_id });
	assert.deepEqual([next.origin, next.stdout], ["snapshot", "done\n"]);
	await rest(process.env.TOKEN_A, "vm_snapshot_delete",
	    { snapshot_id: sc.commit.snapshot_id });
	// Another workspace finds none of it.
	await assert.rejects(b.session.task(id).snapshot(),
	    (e) => /-32602|not found/i.test(`${e.code} ${e.message} ` +
	    JSON.stringify(e.cause ?? {})));
});

test("tasks/cancel of a vm_run: cancelled, its VM destroyed; another " +
    "workspace can neither see nor cancel it", async () => {
	const ex = await a.session.callTool("vm_run", { request_id:
	    requestId("run-cancel"), command: "while :; do sleep 1; done",
	    timeout_seconds: 300 });
	assert.equal(ex.kind, "task");
	const id = ex.handle.taskId;
	const { vm: runVm } = await untilRunning(a.session, id);
	await assert.rejects(b.session.task(id).snapshot(),
	    (e) => /-32602|not found/i.test(`${e.code} ${e.message} ` +
	    JSON.stringify(e.cause ?? {})));
	await assert.rejects(b.session.task(id).cancel());
	assert.match((await a.session.task(id).snapshot()).statusMessage,
	    RUNNING);
	await ex.cancel();
	const outcome = await a.session.task(id).result();
	assert.equal(outcome.status, "cancelled", JSON.stringify(outcome));
	assert.ok(!(await vmIds(process.env.TOKEN_A)).includes(runVm));
	await ex.close();
});
