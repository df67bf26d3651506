// `proxy canary` pointed at a service that is not the control plane but answers JSON all the same
// (a typo in --url, a port reused): a clear error and exit 1 (a runtime failure), not a TypeError
// from reading the answer and exit 2 (which the CLI keeps for bad usage).
import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import { execFile } from 'node:child_process';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';

const bin = new URL('../../bin/proxy.mjs', import.meta.url).pathname;
let server: Server;
let url = '';

before(async () => {
  server = createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ status: 'ok', version: '1.2.3' }));
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

after(() => { server.close(); });

// Asynchronous: the server answering is in this process.
const cli = (args: string[]) => new Promise<{ code: number | null; stderr: string }>((resolve) => {
  const child = execFile(process.execPath, [bin, 'canary', ...args, '--url', url], { encoding: 'utf8', timeout: 60_000,
    env: { ...process.env, PROXY_CONTROL_TOKEN: 'a-token-of-16-chars-or-more' } }, (_err, _stdout, stderr) => {
    resolve({ code: child.exitCode, stderr });
  });
});

test('a JSON answer that is not a canary list: PROXY_ERR_CANARY_CLI_DATA, exit 1', async () => {
  for (const args of [['list'], ['status', 'default'], ['promote', 'default']]) {
    const r = await cli(args);
    assert.equal(r.code, 1, `${args.join(' ')}: ${r.stderr}`);
    assert.match(r.stderr, new RegExp(`^proxy canary ${args[0]}: PROXY_ERR_CANARY_CLI_DATA: GET /api/v1/canary at ${url} did not answer a canary list`));
  }
});

test('any other answer of the wrong shape fails at run time: exit 1, not the exit 2 of bad usage', async () => {
  const r = await cli(['history', 'c-1']);
  assert.equal(r.code, 1, r.stderr);
  assert.match(r.stderr, /^proxy: /);
  const usage = await cli(['list', '--no-such-option']);
  assert.equal(usage.code, 2, usage.stderr);
});
