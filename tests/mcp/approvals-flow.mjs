// A gated call through the official MCP TypeScript SDK clients (issue
// #28), against a running mcpvm with real VMs: on a session of MCP
// 2025-11-25 (@modelcontextprotocol/sdk), and on MCP 2026-07-28
// (@modelcontextprotocol/client, declaring URL-mode elicitation, whose
// handler is the person at the client).  tests/integration/
// test_approvals_e2e.py runs it and is the approver: this script prints
// "PROPOSAL <id>" when the call was proposed and waits for a line on
// standard input ("decided", or the end of it) before it retries, so that
// the decision is made with vmctl, outside this client's reach, or not at
// all until the proposal expired.  (tests/mcp/approvals.mjs is mcpd's
// shaping alone, against a vmmd double.)
//   MCPVM_URL   mcpd's base URL
//   TOKEN       the workspace's credential
//   TOOL        the gated tool (vm_exec by default)
//   ARGS        its arguments as JSON
//   GATES       the gates the proposal must name, as JSON (["exec"])
//   EXPECT      what the retry gets: "ran" (vm_exec's output is "1\n"),
//               "destroyed", "denied" or "expired"
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
const tool = process.env.TOOL || "vm_exec";
const args = JSON.parse(process.env.ARGS);
const gates = JSON.parse(process.env.GATES || '["exec"]');
const expect = process.env.EXPECT;
const url = new URL("/mcp", process.env.MCPVM_URL);
const headers = { Authorization: `Bearer ${process.env.TOKEN}` };

// The retry's answer, as EXPECT says it must be.
function outcome(res) {
	const sc = res.structuredContent;

	switch (expect) {
	case "ran":
		assert.ok(!res.isError, JSON.stringify(res));
		assert.equal(sc.exit_code, 0);
		assert.equal(sc.output.stdout, "1\n");
		break;
	case "destroyed":
		assert.ok(!res.isError, JSON.stringify(res));
		assert.equal(sc.destroyed, true);
		assert.equal(sc.vm_id, args.vm_id);
		break;
	default:	/* denied, expired */
		assert.equal(res.isError, true, JSON.stringify(res));
		assert.equal(sc.error.code, `approval_${expect}`);
		assert.equal(sc.proposal.state, expect);
	}
}

if (process.env.REVISION === "2026-07-28") {
	// The SDK's multi-round-trip driver hands the URL-mode request to this
	// handler and retries the call with the answer once it returns.
	const asked = [];
	const v2 = new ClientV2({ name: "mcpvm-approvals", version: "1.0.0" }, {
		capabilities: { elicitation: { url: {} } },
		versionNegotiation: { mode: { pin: "2026-07-28" } } });
	v2.setRequestHandler("elicitation/create", async (req) => {
		asked.push(req.params);
		console.log(`PROPOSAL ${req.params.url.split("/").pop()}`);
		await decided();
		return { action: "accept" };
	});
	await v2.connect(new TransportV2(url, { requestInit: { headers } }));
	outcome(await v2.callTool({ name: tool, arguments: args }));
	assert.equal(asked.length, 1, JSON.stringify(asked));
	assert.equal(asked[0].mode, "url");
	await v2.close();
	console.log("SDK OK");
	process.exit(0);
}

const client = new Client({ name: "mcpvm-approvals", version: "1.0.0" });
await client.connect(new StreamableHTTPClientTransport(url,
    { requestInit: { headers } }));
const { tools } = await client.listTools();
for (const name of ["vm_exec", "vm_run", "vm_create", "vm_destroy",
    "vm_snapshot_delete"]) {
	const t = tools.find((x) => x.name === name);
	assert.match(t.description, /approval/i,
	    `${name}'s description says it may need approval`);
}
assert.ok(!tools.some((t) => /approv/.test(t.name)),
    "no tool decides an approval");

const first = await client.callTool({ name: tool, arguments: args });
assert.equal(first.isError, true, JSON.stringify(first));
const sc = first.structuredContent;
assert.equal(sc.error.code, "approval_required", JSON.stringify(first));
assert.equal(sc.proposal.state, "pending");
assert.equal(sc.proposal.tool, tool);
assert.deepEqual(sc.proposal.gates, gates);
assert.match(first.content.map((c) => c.text).join("\n"),
    new RegExp(sc.proposal.id));
// The same call again before anyone decided: the same proposal.
const again = await client.callTool({ name: tool, arguments: args });
assert.equal(again.structuredContent?.proposal?.id, sc.proposal.id);
console.log(`PROPOSAL ${sc.proposal.id}`);
await decided();

const after = await client.callTool({ name: tool, arguments: args });
outcome(after);
if (expect === "ran") {
	// Once more: the receipt's answer, not a second run.
	const replay = await client.callTool({ name: tool, arguments: args });
	assert.equal(replay.structuredContent.output.stdout, "1\n");
}
await client.close();
console.log("SDK OK");
