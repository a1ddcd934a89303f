// The official MCP TypeScript SDK as a client of mcpd: connect with a
// bearer header, list the tools, call every tool with its tools.json
// example arguments (the SDK checks structuredContent against each
// outputSchema), follow progress, and come back after a stale session.
//
// usage: node sdk-client.mjs URL TOKEN TOOLS_JSON   (exit 0 = all passed)
import fs from 'node:fs';
import assert from 'node:assert/strict';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from
  '@modelcontextprotocol/sdk/client/streamableHttp.js';

const [url, token, toolsPath] = process.argv.slice(2);
const catalogue = JSON.parse(fs.readFileSync(toolsPath, 'utf8'));
const requestInit = { headers: { Authorization: `Bearer ${token}` } };
let n = 0;

function ok(name) {
  n += 1;
  console.log(`ok ${n} - ${name}`);
}

async function connect(sessionId) {
  const client = new Client({ name: 'mcpvm-sdk-test', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(url),
    { requestInit, sessionId });
  await client.connect(transport);
  return { client, transport };
}

const { client, transport } = await connect();
assert.ok(transport.sessionId, 'mcpd assigned a session');
ok('connect and initialize');

const { tools } = await client.listTools();
assert.deepEqual(tools.map((t) => t.name).sort(),
  catalogue.tools.map((t) => t.name).sort());
for (const t of tools) {
  assert.ok(t.description && t.inputSchema && t.outputSchema, t.name);
}
ok('tools/list has every tool with its schemas');

for (const def of catalogue.tools) {
  const args = def.examples[0].arguments;
  // callTool validates structuredContent against the outputSchema.
  const res = await client.callTool({ name: def.name, arguments: args });
  assert.equal(res.isError, false, def.name);
  assert.deepEqual(JSON.parse(res.content[0].text), res.structuredContent);
  assert.deepEqual(res.structuredContent, def.examples[0].result);
}
ok('every tool called; structuredContent matches each outputSchema');

const bad = await client.callTool({ name: 'vm_status',
  arguments: { vm_id: 5 } });
assert.equal(bad.isError, true);
assert.equal(JSON.parse(bad.content[0].text).error.code, 'invalid_argument');
ok('invalid arguments come back as a tool error');

const seen = [];
await client.callTool({ name: 'vm_create',
  arguments: catalogue.tools.find((t) => t.name === 'vm_create')
    .examples[0].arguments },
  undefined, { onprogress: (p) => seen.push(p.progress) });
assert.deepEqual(seen, [1, 2, 3]);
ok('progress notifications while vm_create runs');

await client.ping();
const stale = transport.sessionId;
await transport.terminateSession();
await client.close();
const again = new Client({ name: 'mcpvm-sdk-test', version: '1.0.0' });
const t2 = new StreamableHTTPClientTransport(new URL(url),
  { requestInit, sessionId: stale });
// A transport still holding the ended session: mcpd answers 404.
await assert.rejects(t2.send({ jsonrpc: '2.0', id: 99, method: 'ping' }),
  (e) => e.code === 404 || /404/.test(String(e)));
ok('a stale session is refused with 404');
const fresh = await connect();
assert.notEqual(fresh.transport.sessionId, stale);
await fresh.client.ping();
await fresh.client.close();
ok('a new session after the stale one');

const noauth = new Client({ name: 'x', version: '1' });
await assert.rejects(noauth.connect(new StreamableHTTPClientTransport(
  new URL(url))));
ok('no credential, no session');
console.log(`1..${n}`);
