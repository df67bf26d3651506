// How long `proxy canary` and `proxy fleet` wait for the control plane, against a real HTTP server
// that answers late: a read gives up at its own (short) limit, while a change — answered only once
// every worker, and on a fleet every other instance, has applied or checked it — waits longer, so a
// create that takes a while on a loaded machine is reported as done, not as "not reachable". A
// change that is never answered says it may still be applied and how to look.
import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { CanaryClient, CanaryCliError, EXIT } from '../../runtime/cli/canary-client.ts';

/** How long the server waits before answering each path (no entry: never). */
const DELAY_MS: Record<string, number> = { '/api/v1/canary': 600, '/api/v1/canary/c1/promote': 600 };
let server: Server;
let url = '';

before(async () => {
  server = createServer((req, res) => {
    const path = new URL(req.url!, 'http://x').pathname;
    const delay = DELAY_MS[path];
    if (delay === undefined) return; // never answers
    setTimeout(() => {
      res.writeHead(req.method === 'POST' ? 201 : 200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ canary_id: 'c1', canaries: [] }));
    }, delay);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
after(() => {
  server.closeAllConnections();
  server.close();
});

test('a change waits past the read limit for its answer; a read of the same server gives up at its own', async () => {
  const client = new CanaryClient(url, null, { readMs: 200, changeMs: 3000 });
  assert.deepEqual(await client.json('POST', '/api/v1/canary', { pipeline_id: 'default' }), { canary_id: 'c1', canaries: [] });
  assert.deepEqual(await client.json('POST', '/api/v1/canary/c1/promote', {}), { canary_id: 'c1', canaries: [] });
  await assert.rejects(client.json('GET', '/api/v1/canary'), (err: CanaryCliError) => err.code === 'PROXY_ERR_CANARY_CLI_UNREACHABLE' &&
    err.exitCode === EXIT.unreachable && /did not answer within 0\.2 s; is control_plane configured\?/.test(err.message));
});

test('a change never answered: exit 5, and the message says it may still apply and how to look', async () => {
  const client = new CanaryClient(url, null, { readMs: 200, changeMs: 300 });
  await assert.rejects(client.json('POST', '/api/v1/canary/c2/rollback', { reason: 'x' }), (err: CanaryCliError) =>
    err.code === 'PROXY_ERR_CANARY_CLI_UNREACHABLE' && err.exitCode === EXIT.unreachable &&
    /did not answer the POST within 0\.3 s; it may still apply the change: check with `proxy canary list` before sending it again/.test(err.message));
  await assert.rejects(client.json('POST', '/api/v1/fleet/pipelines', {}), (err: CanaryCliError) =>
    /did not answer the POST within 0\.3 s; it may still apply the change: check with `proxy fleet` before/.test(err.message));
});
