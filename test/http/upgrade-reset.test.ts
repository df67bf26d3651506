// The control plane's WebSocket upgrade handler gets sockets from Node's HTTP server without the
// server's error listener. A client that sends an upgrade request and resets the connection at once
// (RST) made the write of the refusal (401, 404) fail with ECONNRESET on a socket nobody listened
// to: an uncaught exception that ended the whole `proxy serve` process — data plane included — for
// any client that could reach the control-plane port, token or not. Now such a client loses only
// its own connection; the process, its control plane and its clients are served on.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MongoClient } from 'mongodb';
import { spawnServe } from '../helpers/serve.ts';
import { freePort } from '../helpers/ports.ts';

const TOKEN = 'upgrade-reset-token-0123456789';

/** Writes an upgrade request and resets the connection straight after (SO_LINGER 0: an RST, not a FIN). */
function upgradeThenReset(port: number, target: string, authorization: string | null): Promise<void> {
  return new Promise((resolve) => {
    const s = connect(port, '127.0.0.1', () => {
      s.write(`GET ${target} HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
        'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n' +
        `${authorization === null ? '' : `Authorization: ${authorization}\r\n`}\r\n`);
      s.resetAndDestroy();
    });
    s.on('error', () => {});
    s.on('close', () => resolve());
  });
}

test('upgrade requests reset by their client while being refused leave proxy serve running and serving', { timeout: 120_000 }, async () => {
  const dir = mkdtempSync(join(tmpdir(), 'upgrade-reset-'));
  const port = await freePort();
  const file = join(dir, 'proxy.json');
  writeFileSync(file, JSON.stringify({
    listen: '127.0.0.1:0', log: { level: 'warn' },
    control_plane: { port, tokens: [TOKEN] },
    canary: { data_dir: join(dir, 'canary') },
  }));
  const served = await spawnServe(['--config', file]);
  const uri = /mongodb:\/\/\S+/.exec(served.out())![0];
  const client = await new MongoClient(uri, { serverSelectionTimeoutMS: 5000 }).connect();
  try {
    const refusals: Array<[string, string | null]> = [
      ['/api/v1/canary/x/feed', 'Bearer not-the-token-at-all'], // 401
      ['/api/v1/canary/x/feed', null], // 401
      ['/api/v1/canary/nope/feed', `Bearer ${TOKEN}`], // 404: no such canary
      ['/elsewhere', `Bearer ${TOKEN}`], // 404: no WebSocket there
    ];
    for (let round = 0; round < 100 && served.child.exitCode === null; round++) {
      for (const [target, auth] of refusals) await upgradeThenReset(port, target, auth);
    }
    await new Promise((r) => setTimeout(r, 300));
    assert.equal(served.child.exitCode, null, `the proxy exited: ${served.err().slice(-2000)}`);
    assert.doesNotMatch(served.err(), /ECONNRESET|Unhandled 'error' event/);
    assert.deepEqual(await client.db('admin').command({ ping: 1 }), { ok: 1 });
    const res = await fetch(`http://127.0.0.1:${port}/api/v1/canary`, { headers: { authorization: `Bearer ${TOKEN}` } });
    assert.equal(res.status, 200);
  } finally {
    await client.close();
    await served.stop();
  }
});
