// The CLI commands that talk to a running proxy, pointed at a server that streams without end (a
// wrong port, a hostile service): they read at most 64 MiB of an answer, then close the
// connection, say which URL answered too much and exit 1 — they used to read until memory ran out
// (941 MB for `proxy canary list`). A server that trickles bytes forever trips a total timeout.
import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server, type ServerResponse } from 'node:http';
import { execFile } from 'node:child_process';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { httpRequest, MAX_ANSWER_BYTES } from '../../runtime/cli/http-client.ts';

const bin = new URL('../../bin/proxy.mjs', import.meta.url).pathname;
let server: Server;
let url = '';
/** Bytes the server wrote per request path, and whether the client closed before the server stopped. */
const written = new Map<string, { bytes: number; closedByClient: boolean }>();

/** Writes `chunk` until the client goes away, respecting backpressure; gives up after 2 × the cap. */
function streamForever(res: ServerResponse, path: string, chunk: Buffer): void {
  const w = { bytes: 0, closedByClient: false };
  written.set(path, w);
  res.on('close', () => { if (!res.writableEnded) w.closedByClient = true; });
  const pump = () => {
    while (!res.destroyed) {
      if (w.bytes > 2 * MAX_ANSWER_BYTES) { res.end(); return; }
      w.bytes += chunk.length;
      if (!res.write(chunk)) { res.once('drain', pump); return; }
    }
  };
  pump();
}

before(async () => {
  const json = Buffer.from('[' + '1,'.repeat(32 * 1024));
  const noNewline = Buffer.alloc(64 * 1024, 'x');
  server = createServer((req, res) => {
    const path = new URL(req.url!, 'http://x').pathname;
    if (path === '/trickle') {
      res.writeHead(200, { 'content-type': 'text/plain' });
      const t = setInterval(() => res.write('.'), 50);
      res.on('close', () => clearInterval(t));
      return;
    }
    if (path === '/api/v1/logs') {
      res.writeHead(req.url!.includes('tail=1') ? 500 : 200, { 'content-type': 'application/x-ndjson' });
      streamForever(res, req.url!.includes('tail=1') ? 'logs-error' : 'logs', noNewline);
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json' });
    streamForever(res, path, json);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

after(() => { server.closeAllConnections(); server.close(); });

// Asynchronous: the server answering is in this process.
const cli = (args: string[]) => new Promise<{ code: number | null; stderr: string }>((resolve) => {
  const child = execFile(process.execPath, [bin, ...args, '--url', url], { encoding: 'utf8', timeout: 60_000,
    env: { ...process.env, PROXY_CONTROL_TOKEN: 'a-token-of-16-chars-or-more' } }, (_err, _stdout, stderr) => {
    resolve({ code: child.exitCode, stderr });
  });
});

test('proxy canary list: an endless answer stops at 64 MiB, names the URL, exit 1', async () => {
  const r = await cli(['canary', 'list']);
  assert.equal(r.code, 1, r.stderr);
  assert.match(r.stderr, new RegExp(`^proxy canary list: PROXY_ERR_CANARY_CLI_DATA: the answer from ${url}/api/v1/canary is larger than 64 MiB: ` +
    'stopped reading it'));
  const w = written.get('/api/v1/canary')!;
  assert.ok(w.closedByClient, 'the CLI closed the connection');
  assert.ok(w.bytes < 2 * MAX_ANSWER_BYTES, `the server stopped writing at ${w.bytes} bytes`);
});

test('proxy profile: the same cap, exit 1', async () => {
  const r = await cli(['profile', '--json']);
  assert.equal(r.code, 1, r.stderr);
  assert.match(r.stderr, new RegExp(`the answer from ${url}/api/profile is larger than 64 MiB: stopped reading it`));
  assert.ok(written.get('/api/profile')!.closedByClient);
});

test('proxy logs: a line longer than 64 MiB, or an error answer past it, stops there: exit 1', async () => {
  const line = await cli(['logs', '--tail', '5']);
  assert.equal(line.code, 1, line.stderr);
  assert.match(line.stderr, new RegExp(`^proxy logs: the log line from ${url}/api/v1/logs is larger than 64 MiB: stopped reading it`));
  assert.ok(written.get('logs')!.closedByClient);
  const error = await cli(['logs', '--tail', '1']);
  assert.equal(error.code, 1, error.stderr);
  assert.match(error.stderr, new RegExp(`^proxy logs: the 500 answer from ${url}/api/v1/logs is larger than 64 MiB: stopped reading it`));
  assert.ok(written.get('logs-error')!.closedByClient);
});

test('an answer that trickles forever fails at the total timeout (code ETIMEDOUT, total)', async () => {
  const t0 = Date.now();
  await assert.rejects(httpRequest(new URL(`${url}/trickle`), { totalTimeoutMs: 400 }),
    (err: NodeJS.ErrnoException & { total?: boolean }) => err.code === 'ETIMEDOUT' && err.total === true && /within 0.4 s/.test(err.message));
  assert.ok(Date.now() - t0 < 5_000);
});
