// A call waiting for a human's approval (issue #28) as official SDK clients
// see it from mcpd.  vmmd is doubled (mcpd-testd's backend: a vm_id of
// gated-required, gated-denied, gated-expired, gated-once) because its side
// is another change; what is checked is mcpd's shaping:
//  - MCP 2025-11-25, @modelcontextprotocol/sdk's Client: callTool accepts
//    the tool error (it validates structuredContent against the tool's
//    outputSchema even on an error: the approval shape is one of its
//    oneOf), with the proposal and the words for the agent;
//  - MCP 2026-07-28: the InputRequiredResult for a client that declared
//    URL-mode elicitation, checked against the tasks extension's v2 schemas
//    of it, and its retry with the answer returning the tool's result.
//
// usage: node approvals.mjs BASE_URL TOKEN   (exit 0 = all passed)
import assert from 'node:assert/strict';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from
  '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { InputRequiredCallToolResultV2Schema, CallToolResultV2Schema } from
  '@modelcontextprotocol/ext-tasks/core/v2';
import { Client as ClientV2, StreamableHTTPClientTransport as TransportV2 }
  from '@modelcontextprotocol/client';

const [base, token] = process.argv.slice(2);
const PID = 'p0123456789abcdef0123456789abcdef';
let n = 0;

function ok(name) {
  n += 1;
  console.log(`ok ${n} - ${name}`);
}

const client = new Client({ name: 'mcpvm-approvals-test', version: '1.0.0' });
await client.connect(new StreamableHTTPClientTransport(
  new URL('/mcp', base),
  { requestInit: { headers: { Authorization: `Bearer ${token}` } } }));
await client.listTools();	// so callTool knows each outputSchema

for (const [vm, code] of [['gated-required', 'approval_required'],
  ['gated-denied', 'approval_denied'], ['gated-expired', 'approval_expired']]) {
  const res = await client.callTool({ name: 'vm_exec', arguments:
    { vm_id: vm, request_id: 'sdk-1', command: 'make test' } });
  assert.equal(res.isError, true, vm);
  assert.equal(res.structuredContent.error.code, code);
  assert.equal(res.structuredContent.proposal.id, PID);
  assert.equal(res.structuredContent.proposal.request_id, 'sdk-1');
  assert.deepEqual(JSON.parse(res.content[0].text), res.structuredContent);
  if (code === 'approval_required')
    assert.match(res.content[1].text, new RegExp(
      `vmctl approval approve ${PID}.*retry the call with the same ` +
      'request_id \\("sdk-1"\\) and the same arguments'));
}
ok('2025-11-25: the SDK client accepts each approval tool error, ' +
  'structuredContent validated');

const d = await client.callTool({ name: 'vm_destroy',
  arguments: { vm_id: 'gated-required' } });
assert.equal(d.isError, true);
assert.equal(d.structuredContent.proposal.approvals_needed, 2);
ok('2025-11-25: a two-approver vm_destroy without request_id');
await client.close();

// 2026-07-28 on the wire as the revision frames it (stateless POSTs).
let rid = 0;
async function call(args, caps, inputResponses) {
  const params = { name: 'vm_exec', arguments: args, _meta: {
    'io.modelcontextprotocol/protocolVersion': '2026-07-28',
    'io.modelcontextprotocol/clientCapabilities': caps } };
  if (inputResponses) params.inputResponses = inputResponses;
  const r = await fetch(new URL('/mcp', base), { method: 'POST', headers: {
    Authorization: `Bearer ${token}`, 'Content-Type': 'application/json',
    Accept: 'application/json, text/event-stream',
    'MCP-Protocol-Version': '2026-07-28', 'Mcp-Method': 'tools/call',
    'Mcp-Name': 'vm_exec' }, body: JSON.stringify({ jsonrpc: '2.0',
    id: ++rid, method: 'tools/call', params }) });
  assert.equal(r.status, 200);
  return (await r.json()).result;
}

const args = { vm_id: 'gated-once', request_id: 'sdk-2026', command: 'ls' };
const asked = await call(args, { elicitation: { url: {} } });
const parsed = InputRequiredCallToolResultV2Schema.parse(asked);
assert.equal(parsed.resultType, 'input_required');
const q = parsed.inputRequests.approval;
assert.equal(q.method, 'elicitation/create');
assert.equal(q.params.mode, 'url');
assert.equal(q.params.url, `${base}/v1/approvals/${PID}`);
assert.match(q.params.message, new RegExp(`vmctl approval approve ${PID}`));
const page = await fetch(q.params.url);
assert.equal(page.status, 200);
assert.match(await page.text(), new RegExp(`vmctl approval approve ${PID}`));
ok('2026-07-28 with URL elicitation: an InputRequiredResult whose URL ' +
  'says how to approve');

const done = await call(args, { elicitation: { url: {} } },
  { approval: { action: 'accept' } });
const result = CallToolResultV2Schema.parse(done);
assert.equal(done.resultType, 'complete');
assert.equal(result.isError, false);
assert.equal(result.structuredContent.job_id, 'j1');
ok('2026-07-28: the retry with the answer returns the tool\'s result');

const plain = await call({ vm_id: 'gated-required', request_id: 'sdk-3',
  command: 'ls' }, {});
CallToolResultV2Schema.parse(plain);
assert.equal(plain.isError, true);
assert.equal(plain.structuredContent.error.code, 'approval_required');
ok('2026-07-28 without URL elicitation: the tool error');
// The 2026-07-28 SDK client, declaring URL-mode elicitation: its
// multi-round-trip driver hands the request to the elicitation handler (the
// person at the client), then retries the call with the answer.
const asks = [];
let answer = 'accept';
const v2 = new ClientV2({ name: 'mcpvm-approvals-v2', version: '1.0.0' }, {
  capabilities: { elicitation: { url: {} } },
  versionNegotiation: { mode: { pin: '2026-07-28' } } });
v2.setRequestHandler('elicitation/create', async (req) => {
  asks.push(req.params);
  return { action: answer };
});
await v2.connect(new TransportV2(new URL('/mcp', base),
  { requestInit: { headers: { Authorization: `Bearer ${token}` } } }));
const got = await v2.callTool({ name: 'vm_exec', arguments:
  { vm_id: 'gated-once', request_id: 'sdk-v2', command: 'ls' } });
assert.equal(asks.length, 1);
assert.equal(asks[0].mode, 'url');
assert.equal(asks[0].url, `${base}/v1/approvals/${PID}`);
assert.equal(got.isError, false);
assert.equal(got.structuredContent.job_id, 'j1');
ok('2026-07-28 SDK client: the elicitation goes to its handler, the ' +
  'retry returns the result');

answer = 'decline';
const declined = await v2.callTool({ name: 'vm_exec', arguments:
  { vm_id: 'gated-required', request_id: 'sdk-v2-no', command: 'ls' } });
assert.equal(asks.length, 2);
assert.equal(declined.isError, true);
assert.equal(declined.structuredContent.error.code, 'approval_required');
assert.match(declined.content[1].text, /vmctl approval approve/);
ok('2026-07-28 SDK client: declined, the call ends as the tool error');
await v2.close();
console.log(`1..${n}`);
