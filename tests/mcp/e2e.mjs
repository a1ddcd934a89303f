// The end-to-end suite: the official MCP TypeScript SDK client against a
// running mcpvm (authd, vmmd, mcpd) with real VMs, doing what a real host
// smoke test would.  tests/integration/test_e2e.py starts the service and
// runs this with node's test runner; everything comes from the environment:
//   MCPVM_URL        mcpd's base URL (http://127.0.0.1:PORT)
//   TOKEN_A, TOKEN_B credentials of two workspaces, "e2e-a" and "e2e-b"
//   AUTHCTL, VMCTL   the CLIs, with CONF the configuration they use
//   IDLE_SECONDS     the short idle time the idle test's VM gets
//   ATTACH           mcpvm-attach, for the WebSocket stream tests
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const URL_MCP = new URL("/mcp", process.env.MCPVM_URL);
const run = `e2e-${process.pid}-${Date.now()}`;
let rid = 0;
const requestId = (what) => `${run}-${what}-${++rid}`;

async function connect(token) {
	const client = new Client({ name: "mcpvm-e2e", version: "1.0.0" });
	const transport = new StreamableHTTPClientTransport(URL_MCP, {
		requestInit: { headers: { Authorization: `Bearer ${token}` } },
	});
	await client.connect(transport);
	return client;
}

// A tool call; failures come back as { error } rather than throwing, so
// tests can assert on the code.
async function call(client, name, args = {}) {
	const res = await client.callTool({ name, arguments: args }, undefined,
	    { timeout: 600000 });
	// A tool error is {"error":{code,message}} as the text content: the
	// SDK checks structuredContent against the outputSchema even then.
	if (res.isError)
		return { error: JSON.parse(res.content[0].text).error };
	return res.structuredContent;
}

async function ok(client, name, args = {}) {
	const r = await call(client, name, args);
	assert.equal(r.error, undefined,
	    `${name} failed: ${JSON.stringify(r.error)}`);
	return r;
}

// Runs a command to the end; returns { stdout, stderr, job } with all the
// output, read page by page with cursors as a client should.
async function sh(client, vm, command, extra = {}) {
	const job = await ok(client, "vm_exec", { vm_id: vm,
	    request_id: requestId("exec"), command, ...extra });
	let cursor = { stdout: 0, stderr: 0 };
	let stdout = "", stderr = "", last;
	for (;;) {
		last = await ok(client, "vm_job_output", { vm_id: vm,
		    job_id: job.job_id, cursor });
		stdout += last.stdout;
		stderr += last.stderr;
		const moved = last.next_cursor.stdout !== cursor.stdout ||
		    last.next_cursor.stderr !== cursor.stderr;
		cursor = last.next_cursor;
		if (last.state !== "running" && !moved)
			break;
		if (!moved)
			await sleep(200);
	}
	return { stdout, stderr, final: last, job: job.job_id };
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

let a, b, vmA, vmB;

before(async () => {
	a = await connect(process.env.TOKEN_A);
	b = await connect(process.env.TOKEN_B);
	vmA = (await ok(a, "vm_create", { request_id: requestId("create"),
	    memory_mib: 768 })).vm_id;
});

after(async () => {
	await a?.close();
	await b?.close();
});

test("tools/list has the seventeen tools, each with both schemas", async () => {
	const { tools } = await a.listTools();
	const names = tools.map((t) => t.name).sort();
	assert.deepEqual(names, ["vm_create", "vm_destroy", "vm_exec", "vm_fork",
	    "vm_job_cancel", "vm_job_output", "vm_job_status", "vm_list",
	    "vm_read_file", "vm_resume", "vm_run", "vm_snapshot",
	    "vm_snapshot_delete", "vm_snapshot_list", "vm_status", "vm_suspend",
	    "vm_write_file"]);
	for (const t of tools) {
		assert.equal(t.inputSchema.type, "object");
		assert.equal(t.outputSchema.type, "object");
	}
});

test("a Fibonacci program prints its sequence", async () => {
	const prog = "a, b = 0, 1\nout = []\nfor _ in range(12):\n" +
	    "    out.append(str(a))\n    a, b = b, a + b\nprint(', '.join(out))\n";
	await ok(a, "vm_write_file", { vm_id: vmA, path: "fib.py",
	    data_base64: Buffer.from(prog).toString("base64") });
	const r = await sh(a, vmA, "python3 fib.py");
	assert.equal(r.stdout, "0, 1, 1, 2, 3, 5, 8, 13, 21, 34, 55, 89\n");
	assert.equal(r.final.exit_code, 0);
});

test("stdout and stderr are separate", async () => {
	const r = await sh(a, vmA, "echo out; echo err >&2; echo out2");
	assert.equal(r.stdout, "out\nout2\n");
	assert.equal(r.stderr, "err\n");
});

test("UTF-8 paging keeps a character split at a page edge whole", async () => {
	// "aaa€b": the euro sign's three bytes start at offset 3, so a
	// four-byte page ends inside it.
	const job = await ok(a, "vm_exec", { vm_id: vmA,
	    request_id: requestId("utf8"), command: "printf 'aaa\\xe2\\x82\\xacb'" });
	let cursor = { stdout: 0, stderr: 0 }, text = "", errors = false, r;
	for (let i = 0; i < 50; i++) {
		r = await ok(a, "vm_job_output", { vm_id: vmA,
		    job_id: job.job_id, cursor, max_bytes: 4 });
		text += r.stdout;
		errors ||= r.decoding_errors.stdout;
		const moved = r.next_cursor.stdout !== cursor.stdout;
		cursor = r.next_cursor;
		if (r.state !== "running" && !moved)
			break;
		if (!moved)
			await sleep(200);
	}
	assert.equal(text, "aaa€b");
	assert.equal(errors, false);
	assert.equal(cursor.stdout, 7);	// byte offsets, not characters
});

test("base64 mode gives exact binary output", async () => {
	const job = await ok(a, "vm_exec", { vm_id: vmA,
	    request_id: requestId("bin"),
	    command: "printf '\\x00\\xff\\xfe\\x80\\n\\x01'" });
	let r;
	for (;;) {
		r = await ok(a, "vm_job_output", { vm_id: vmA,
		    job_id: job.job_id, encoding: "base64" });
		if (r.state !== "running")
			break;
		await sleep(200);
	}
	assert.deepEqual([...Buffer.from(r.stdout_base64, "base64")],
	    [0x00, 0xff, 0xfe, 0x80, 0x0a, 0x01]);
	assert.equal(r.decoding_errors, undefined);
});

test("output beyond 256 KiB is truncated while the command completes",
    async () => {
	const r = await sh(a, vmA,
	    "head -c 1048576 /dev/zero | tr '\\0' x; echo done >&2");
	assert.equal(r.final.state, "completed");
	assert.equal(r.final.exit_code, 0);
	assert.equal(r.final.truncated, true);
	assert.ok(r.stdout.length + r.stderr.length <= 256 * 1024);
});

test("a generated C program compiles with gcc and runs", async () => {
	const src = '#include <stdio.h>\nint main(void){int s=0;' +
	    'for(int i=1;i<=100;i++)s+=i;printf("sum=%d\\n",s);return 0;}\n';
	await ok(a, "vm_write_file", { vm_id: vmA, path: "c/sum.c",
	    data_base64: Buffer.from(src).toString("base64"),
	    create_parents: true });
	const r = await sh(a, vmA, "cd c && gcc -O2 -o sum sum.c && ./sum");
	assert.equal(r.stdout, "sum=5050\n", r.stderr);
});

test("two VMs' disks are isolated from each other", async () => {
	vmB = (await ok(a, "vm_create", { request_id: requestId("create"),
	    memory_mib: 512 })).vm_id;
	await sh(a, vmA, "echo secret-a > /workspace/mine; sync");
	const r = await sh(a, vmB, "cat /workspace/mine 2>&1; ls /workspace");
	assert.match(r.stdout, /No such file/);
	assert.doesNotMatch(r.stdout, /secret-a/);
});

// mcpvm-attach with the credential in a 0600 file, as a user would run it.
const tokdir = mkdtempSync(join(tmpdir(), "e2e-tok-"));
function tokenFile(name, token) {
	const p = join(tokdir, name);
	writeFileSync(p, token, { mode: 0o600 });
	return p;
}

function attach(tokfile, vm, port, input, extra = []) {
	return new Promise((resolve) => {
		const p = spawn(process.env.ATTACH, ["--endpoint",
		    process.env.MCPVM_URL, "--token-file", tokfile, "--vm", vm,
		    "--port", String(port), ...extra]);
		const out = [], err = [];
		p.stdout.on("data", (d) => out.push(d));
		p.stderr.on("data", (d) => err.push(d));
		p.on("close", (code) => resolve({ code,
		    stdout: Buffer.concat(out),
		    stderr: Buffer.concat(err).toString() }));
		// An attach that exits before taking all its input makes the
		// write fail (EPIPE); its exit code and stderr, which the
		// caller checks, say why.
		p.stdin.on("error", () => {});
		if (input !== null)
			p.stdin.end(input);
		resolve.proc = p;
		attach.last = p;
	});
}

test("a WebSocket stream carries bytes both ways, with half-close",
    async () => {
	const echo = "import socket\ns=socket.socket()\n" +
	    "s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)\n" +
	    "s.bind(('127.0.0.1',5000));s.listen(4)\n" +
	    "open('/workspace/echo-listening','w').close()\nwhile True:\n" +
	    " c,_=s.accept()\n while True:\n  d=c.recv(65536)\n" +
	    "  if not d: break\n  c.sendall(d)\n" +
	    " c.shutdown(socket.SHUT_WR);c.close()\n";
	await ok(a, "vm_write_file", { vm_id: vmA, path: "echo.py",
	    data_base64: Buffer.from(echo).toString("base64") });
	// Python takes a second or more to start under TCG: wait for the
	// listener itself rather than for a guess.
	const up = await sh(a, vmA, "rm -f echo-listening; nohup python3 " +
	    "echo.py >echo.log 2>&1 & for i in $(seq 100); do " +
	    "[ -e echo-listening ] && exit 0; sleep 0.2; done; " +
	    "cat echo.log >&2; exit 1");
	assert.equal(up.final.exit_code, 0, up.stderr);
	const ta = tokenFile("a", process.env.TOKEN_A);
	const data = randomBytes(8 << 20);
	const r = await attach(ta, vmA, 5000, data);
	assert.equal(r.code, 0, r.stderr);
	assert.equal(Buffer.compare(r.stdout, data), 0,
	    `echoed ${r.stdout.length} of ${data.length} bytes, or others`);
	// Refused before any guest connection, each with its own status.
	const tb = tokenFile("b", process.env.TOKEN_B);
	for (const [tok, port, status] of [[ta, 1024, "403"],
	    [ta, 6999, "409"], [tb, 5000, "404"]]) {
		const x = await attach(tok, vmA, port, "");
		assert.equal(x.code, 1, `port ${port}: ${x.stderr}`);
		assert.match(x.stderr, new RegExp(`HTTP ${status}`),
		    `port ${port}`);
	}
	// A suspension closes the streams of the VM (1001, "suspended").
	const held = attach(ta, vmA, 5000, null, ["--ignore-stdin-eof"]);
	await sleep(1500);
	const busy = await call(a, "vm_suspend", { vm_id: vmA, mode: "pause" });
	assert.equal(busy.error?.code, "busy", "an open stream is activity");
	await ok(a, "vm_suspend", { vm_id: vmA, mode: "pause", force: true });
	const closed = await held;
	assert.equal(closed.code, 1);
	assert.match(closed.stderr, /suspended/);
	await ok(a, "vm_resume", { vm_id: vmA });
});

test("a process keeps running across pause and across hibernate",
    async () => {
	await sh(a, vmA, "nohup sh -c 'while :; do date +%s >> /workspace/" +
	    "ticks; sleep 1; done' >/dev/null 2>&1 &");
	await sleep(2000);
	for (const mode of ["pause", "hibernate"]) {
		const before = Number((await sh(a, vmA,
		    "wc -l < /workspace/ticks")).stdout);
		const s = await ok(a, "vm_suspend", { vm_id: vmA, mode,
		    force: true });
		assert.equal(s.state, mode === "pause" ? "paused" :
		    "hibernated");
		await sleep(3000);
		await ok(a, "vm_resume", { vm_id: vmA });
		await sleep(2500);
		const after = Number((await sh(a, vmA,
		    "wc -l < /workspace/ticks")).stdout);
		assert.ok(after > before, `${mode}: ${before} -> ${after}`);
	}
});

test("wall time is right after resume; a timeout excludes suspended time",
    async () => {
	// A job with a 4 s budget sleeps 3 s of guest time either side of an
	// 8 s hibernation: it must finish, not time out.
	const job = await ok(a, "vm_exec", { vm_id: vmA,
	    request_id: requestId("budget"), command: "sleep 3; echo alive",
	    timeout_seconds: 4 });
	await sleep(1000);
	await ok(a, "vm_suspend", { vm_id: vmA, mode: "hibernate",
	    force: true });
	await sleep(8000);
	await ok(a, "vm_resume", { vm_id: vmA });
	const clock = await sh(a, vmA, "date +%s");
	assert.ok(Math.abs(Number(clock.stdout) - Date.now() / 1000) < 3,
	    `guest clock ${clock.stdout.trim()} vs host ${Date.now() / 1000}`);
	let st;
	for (let i = 0; i < 50; i++) {
		st = await ok(a, "vm_job_status", { vm_id: vmA,
		    job_id: job.job_id });
		if (st.state !== "running")
			break;
		await sleep(300);
	}
	assert.equal(st.state, "completed");
	assert.equal(st.timed_out, false);
});

test("an idle VM hibernates by itself and wakes on exec", async () => {
	const idle = Number(process.env.IDLE_SECONDS ?? 5);
	const vm = vmB;
	// vmB was created with the default idle time; make a fresh one short.
	const c = await ok(a, "vm_create", { request_id: requestId("idle"),
	    memory_mib: 512, idle_seconds: idle });
	await ok(a, "vm_destroy", { vm_id: vm });
	vmB = c.vm_id;
	let st;
	for (let i = 0; i < (idle + 30) * 2; i++) {
		st = await ok(a, "vm_status", { vm_id: vmB });
		if (st.state === "hibernated")
			break;
		await sleep(500);
	}
	assert.equal(st.state, "hibernated", "status polling must not keep " +
	    "it awake");
	const r = await sh(a, vmB, "echo woke");
	assert.equal(r.stdout, "woke\n");
	assert.equal((await ok(a, "vm_status", { vm_id: vmB })).state,
	    "running");
});

test("every tool refuses another workspace's VM as not_found", async () => {
	const job = (await ok(a, "vm_exec", { vm_id: vmA,
	    request_id: requestId("x"), command: "true" })).job_id;
	const probes = [
		["vm_status", { vm_id: vmA }],
		["vm_exec", { vm_id: vmA, request_id: requestId("b"),
		    command: "id" }],
		["vm_job_status", { vm_id: vmA, job_id: job }],
		["vm_job_output", { vm_id: vmA, job_id: job }],
		["vm_job_cancel", { vm_id: vmA, job_id: job }],
		["vm_read_file", { vm_id: vmA, path: "fib.py" }],
		["vm_write_file", { vm_id: vmA, path: "x", data_base64: "" }],
		["vm_suspend", { vm_id: vmA }],
		["vm_resume", { vm_id: vmA }],
		["vm_destroy", { vm_id: vmA }],
	];
	for (const [name, args] of probes) {
		const r = await call(b, name, args);
		assert.equal(r.error?.code, "not_found", `${name} from B`);
	}
	const list = await ok(b, "vm_list");
	assert.equal(list.vms.length, 0);
	// A workspace named in the arguments is refused, not obeyed.
	const forged = await call(b, "vm_status", { vm_id: vmA,
	    workspace: "e2e-a" });
	assert.equal(forged.error?.code, "invalid_argument");
	assert.equal((await ok(a, "vm_status", { vm_id: vmA })).state,
	    "running");
});

test("a retried request_id returns the stored result", async () => {
	const id = requestId("retry");
	const args = { vm_id: vmA, request_id: id, command: "echo once >> " +
	    "/workspace/once" };
	const first = await ok(a, "vm_exec", args);
	const again = await ok(a, "vm_exec", args);
	assert.equal(again.job_id, first.job_id);
	const changed = await call(a, "vm_exec", { ...args,
	    command: "echo twice" });
	assert.equal(changed.error?.code, "conflict");
	await sleep(1000);
	assert.equal((await sh(a, vmA, "cat /workspace/once")).stdout,
	    "once\n");
});

test("vmctl stop-workspace stops every VM of a workspace", async () => {
	const vm = (await ok(b, "vm_create", { request_id: requestId("b"),
	    memory_mib: 512 })).vm_id;
	execFileSync(process.env.VMCTL, ["-f", process.env.CONF,
	    "stop-workspace", "e2e-b"]);
	const st = await ok(b, "vm_status", { vm_id: vm });
	assert.equal(st.state, "failed");
	const r = await call(b, "vm_exec", { vm_id: vm,
	    request_id: requestId("b"), command: "true" });
	assert.ok(r.error, "a stopped VM runs nothing");
	await ok(b, "vm_destroy", { vm_id: vm });
});

test("a revoked workspace is refused at once", async () => {
	execFileSync(process.env.AUTHCTL, ["--config", process.env.CONF,
	    "revoke-workspace", "--workspace", "e2e-b"]);
	await assert.rejects(b.callTool({ name: "vm_list", arguments: {} }),
	    /401|nauthorized/);
	// The other workspace carries on.
	await ok(a, "vm_list");
});

test("destroy is idempotent and frees the VMs", async () => {
	for (const vm of [vmA, vmB]) {
		const r = await ok(a, "vm_destroy", { vm_id: vm });
		assert.equal(r.destroyed, true);
		const again = await ok(a, "vm_destroy", { vm_id: vm });
		assert.equal(again.already_destroyed, true);
	}
	assert.equal((await ok(a, "vm_list")).vms.length, 0);
});
