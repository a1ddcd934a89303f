// A gated call through the official MCP TypeScript SDK clients (issue
// #28), against a running mcpvm with real VMs: on a session of MCP
// 2025-11-25 (@modelcontextprotocol/sdk), and on MCP 2026-07-28
// (@modelcontextprotocol/client, declaring URL-mode elicitation, whose
// handler is the person at the client).  tests/integration/
// test_approvals_e2e.py runs it and is the approver: this script prints
// "PROPOSAL <id>" when the call was proposed and waits for a line on
// standard input ("decided") before it retries, so that the decision is
// made with vmctl, outside this client's reach.  (tests/mcp/approvals.mjs
// is mcpd's shaping alone, against a vmmd double.)
//   MCPVM_URL   mcpd's base URL
//   TOKEN       a supervised workspace's credential (vm_exec gated)
//   VM_ID       a running VM of that workspace
//   REQUEST_ID  the call's request_id
//   EXPECT      "ran" (approved: the retry runs it) or "denied"
//   REVISION    "2025-11-25" (default) or "2026-07-28"
import assert from "node:assert/strict";
import { createInterface } from "node:readline";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { Client as ClientV2, StreamableHTTPClientTransport as TransportV2 }
    from "@modelcontextprotocol/client";

const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
async function decided() {
	for (;;) {
		const { value, done } = await lines.next();
		if (done || value.trim() === "decided")
			return;
	}
}
const args = { vm_id: process.env.VM_ID, request_id: process.env.REQUEST_ID,
    command: "echo sdk-ran >> /workspace/sdk-ran-" + process.env.REQUEST_ID +
    "; wc -l < /workspace/sdk-ran-" + process.env.REQUEST_ID,
    wait_seconds: 60 };
const headers = { Authorization: `Bearer ${process.env.TOKEN}` };

if (process.env.REVISION === "2026-07-28") {
	// The SDK's multi-round-trip driver hands the URL-mode request to this
	// handler and retries the call with the answer once it returns.
	const asked = [];
	const v2 = new ClientV2({ name: "mcpvm-approvals", version: "1.0.0" }, {
		capabilities: { elicitation: { url: {} } },
		versionNegotiation: { mode: { pin: "2026-07-28" } } });
	v2.setRequestHandler("elicitation/create", async (req) => {
		asked.push(req.params);
		const id = req.params.url.split("/").pop();
		console.log(`PROPOSAL ${id}`);
		await decided();
		return { action: "accept" };
	});
	await v2.connect(new TransportV2(new URL("/mcp", process.env.MCPVM_URL),
	    { requestInit: { headers } }));
	const got = await v2.callTool({ name: "vm_exec", arguments: args });
	assert.equal(asked.length, 1, JSON.stringify(asked));
	assert.equal(asked[0].mode, "url");
	if (process.env.EXPECT === "ran") {
		assert.ok(!got.isError, JSON.stringify(got));
		assert.equal(got.structuredContent.output.stdout, "1\n");
	} else {
		assert.equal(got.isError, true, JSON.stringify(got));
		assert.equal(got.structuredContent.error.code,
		    "approval_denied");
	}
	await v2.close();
	console.log("SDK OK");
	process.exit(0);
}

const client = new Client({ name: "mcpvm-approvals", version: "1.0.0" });
await client.connect(new StreamableHTTPClientTransport(
    new URL("/mcp", process.env.MCPVM_URL), { requestInit: { headers } }));
const { tools } = await client.listTools();
for (const name of ["vm_exec", "vm_run", "vm_create", "vm_destroy",
    "vm_snapshot_delete"]) {
	const t = tools.find((x) => x.name === name);
	assert.match(t.description, /approval/i,
	    `${name}'s description says it may need approval`);
}
assert.ok(!tools.some((t) => /approv/.test(t.name)),
    "no tool decides an approval");

const first = await client.callTool({ name: "vm_exec", arguments: args });
assert.equal(first.isError, true, JSON.stringify(first));
const sc = first.structuredContent;
assert.equal(sc.error.code, "approval_required", JSON.stringify(first));
assert.equal(sc.proposal.state, "pending");
assert.equal(sc.proposal.tool, "vm_exec");
assert.deepEqual(sc.proposal.gates, ["exec"]);
assert.match(first.content[0].text, new RegExp(sc.proposal.id));
// The same call again before anyone decided: the same proposal.
const again = await client.callTool({ name: "vm_exec", arguments: args });
assert.equal(again.structuredContent?.proposal?.id, sc.proposal.id);
console.log(`PROPOSAL ${sc.proposal.id}`);

await decided();

const after = await client.callTool({ name: "vm_exec", arguments: args });
if (process.env.EXPECT === "ran") {
	assert.ok(!after.isError, JSON.stringify(after));
	assert.equal(after.structuredContent.exit_code, 0);
	assert.equal(after.structuredContent.output.stdout, "1\n");
	// Once more: the receipt's answer, not a second run.
	const replay = await client.callTool({ name: "vm_exec",
	    arguments: args });
	assert.equal(replay.structuredContent.output.stdout, "1\n");
} else {
	assert.equal(after.isError, true, JSON.stringify(after));
	assert.equal(after.structuredContent.error.code, "approval_denied");
	assert.equal(after.structuredContent.proposal.state, "denied");
}
await client.close();
console.log("SDK OK");
