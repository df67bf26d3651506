// Every listener on the IPv6 loopback: the wire listener, the admin API, the profiling endpoint and
// the control plane on [::1], their URLs bracketed and reachable; `proxy devdb --host ::1`; and
// `proxy serve` refusing an address the parser refuses before any port opens.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MongoClient } from 'mongodb';
import { parseConfig } from '../../runtime/config/index.ts';
import { startProxy } from '../../runtime/app/serve.ts';
import { Logger } from '../../runtime/log/index.ts';

const TOKEN = 'ipv6-test-token-0123456789';

/** Whether this machine can bind the IPv6 loopback (containers without IPv6 cannot). */
async function hasIpv6Loopback(): Promise<boolean> {
  const s = createServer();
  return new Promise((resolve) => {
    s.once('error', () => resolve(false));
    s.listen(0, '::1', () => s.close(() => resolve(true)));
  });
}

const ipv6 = await hasIpv6Loopback();
const skip = ipv6 ? false : 'this machine has no IPv6 loopback (::1 cannot be bound)';

test('listen, admin.listen, profiling.host and control_plane.host on [::1]: bracketed URLs, each answering', { skip }, async () => {
  const dir = mkdtempSync(join(tmpdir(), 'proxy-ipv6-'));
  const proxy = await startProxy(parseConfig({
    listen: '[::1]:0', log: { level: 'error' },
    admin: { listen: '[::1]:0', token: TOKEN },
    profiling: { enabled: true, host: '::1', port: 0 },
    control_plane: { host: '[::1]', port: 0, tokens: [TOKEN] },
    canary: { data_dir: dir },
  }, null), { log: new Logger('test', 'error') });
  try {
    assert.match(proxy.uri, /^mongodb:\/\/\[::1\]:\d+\/$/);
    assert.match(proxy.adminUrl!, /^http:\/\/\[::1\]:\d+$/);
    assert.match(proxy.profilingUrl!, /^http:\/\/\[::1\]:\d+$/);
    assert.match(proxy.controlPlaneUrl!, /^http:\/\/\[::1\]:\d+$/);
    const auth = { authorization: `Bearer ${TOKEN}` };
    assert.deepEqual(await (await fetch(`${proxy.adminUrl}/healthz`)).json(), { status: 'ok' });
    const pipeline = await fetch(`${proxy.adminUrl}/api/v1/pipeline`, { headers: auth });
    assert.equal(pipeline.status, 200);
    assert.equal((await pipeline.json() as { id: string }).id, 'default');
    assert.equal((await fetch(`${proxy.profilingUrl}/api/profile`)).status, 200);
    assert.equal((await fetch(`${proxy.controlPlaneUrl}/api/v1/canary`, { headers: auth })).status, 200);
    const client = new MongoClient(proxy.uri, { serverSelectionTimeoutMS: 5000 });
    try {
      assert.equal((await client.db('admin').command({ ping: 1 })).ok, 1);
    } finally {
      await client.close();
    }
  } finally {
    await proxy.close();
  }
});

test('proxy serve: an IPv6 admin.listen without brackets is refused (exit 2, key path) before the wire port opens', async () => {
  const probe = createServer();
  await new Promise<void>((r) => probe.listen(0, '127.0.0.1', r));
  const port = (probe.address() as { port: number }).port;
  await new Promise((r) => probe.close(r));
  const file = join(mkdtempSync(join(tmpdir(), 'proxy-ipv6-serve-')), 'proxy.json');
  writeFileSync(file, JSON.stringify({ listen: `127.0.0.1:${port}`, admin: { listen: '::1:9090', token: TOKEN } }));
  const r = spawnSync(process.execPath, ['bin/proxy.mjs', 'serve', '--config', file, '--workers', '1'], { encoding: 'utf8', timeout: 60_000 });
  assert.equal(r.status, 2, r.stderr);
  assert.match(r.stderr, /admin\.listen: "::1:9090": an IPv6 host goes in brackets, e\.g\. \[::1\]:9090/);
  assert.doesNotMatch(r.stdout + r.stderr, /proxy listening/);
});

test('proxy devdb --host ::1 prints a bracketed URI a driver connects to; a bad --host exits 2', { skip }, async () => {
  const child = spawn(process.execPath, ['bin/proxy.mjs', 'devdb', '--host', '::1', '--port', '0'], { stdio: ['ignore', 'pipe', 'pipe'] });
  try {
    const uri = await new Promise<string>((resolve, reject) => {
      let out = '';
      const timer = setTimeout(() => reject(new Error(`no URI: ${out}`)), 30_000);
      child.stdout!.on('data', (d) => {
        out += d;
        const m = /^mongodb:\/\/\S+/m.exec(out);
        if (m !== null) { clearTimeout(timer); resolve(m[0]); }
      });
    });
    assert.match(uri, /^mongodb:\/\/\[::1\]:\d+$/);
    const client = new MongoClient(uri, { serverSelectionTimeoutMS: 5000 });
    try {
      assert.equal((await client.db('admin').command({ ping: 1 })).ok, 1);
    } finally {
      await client.close();
    }
  } finally {
    child.kill('SIGTERM');
  }
  const bad = spawnSync(process.execPath, ['bin/proxy.mjs', 'devdb', '--host', '::1:27017', '--port', '0'], { encoding: 'utf8', timeout: 30_000 });
  assert.equal(bad.status, 2, bad.stderr);
  assert.match(bad.stderr, /--host "::1:27017" is not an IPv6 address/);
});
