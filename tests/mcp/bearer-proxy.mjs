// A pass-through HTTP proxy that adds "Authorization: Bearer <token>" to
// every request, for test clients that cannot send a header of their own
// (the MCP conformance runner).  Everything else, Host and Origin
// included, reaches mcpd as the client sent it, and answers (event
// streams too) are relayed as they arrive.
//
// usage: node bearer-proxy.mjs LISTEN_PORT UPSTREAM_PORT TOKEN_FILE
import http from 'node:http';
import fs from 'node:fs';

const [listenPort, upstreamPort, tokenFile] = process.argv.slice(2);
const token = fs.readFileSync(tokenFile, 'utf8').trim();

const server = http.createServer((req, res) => {
  const headers = { ...req.headers, authorization: `Bearer ${token}` };
  const up = http.request({
    host: '127.0.0.1', port: Number(upstreamPort), method: req.method,
    path: req.url, headers,
  }, (upRes) => {
    res.writeHead(upRes.statusCode, upRes.headers);
    upRes.pipe(res);
  });
  up.on('error', (e) => {
    if (!res.headersSent) res.writeHead(502);
    res.end(String(e));
  });
  res.on('close', () => up.destroy());
  req.pipe(up);
});
server.listen(Number(listenPort), '127.0.0.1', () => {
  process.stdout.write(`proxy ready on ${listenPort}\n`);
});
