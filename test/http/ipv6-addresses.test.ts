// Every address the proxy prints brackets an IPv6 host ([::1]:9090), never `::1:9090`: the
// `proxy serve` start that cannot bind (an HTTP surface and the wire listener), a reload through the
// admin API that cannot bind, the listening log lines, and an upstream that cannot be reached.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseConfig } from '../../runtime/config/index.ts';
import { startProxy } from '../../runtime/app/serve.ts';
import { Logger } from '../../runtime/log/index.ts';
import { UpstreamConnection } from '../../runtime/upstream/connection.ts';
import { spawnServe } from '../helpers/serve.ts';
import { until } from '../helpers/until.ts';

const TOKEN = 'ipv6-addresses-token-0123456789';

/** A port held on ::1 (null: this machine has no IPv6 loopback). */
async function holdV6(): Promise<{ server: Server; port: number } | null> {
  const s = createServer();
  return new Promise((resolve) => {
    s.once('error', () => resolve(null));
    s.listen(0, '::1', () => resolve({ server: s, port: (s.address() as { port: number }).port }));
  });
}

const probe = await holdV6();
probe?.server.close();
const skip = probe === null ? 'this machine has no IPv6 loopback (::1 cannot be bound)' : false;

/** `::1:<port>` written without brackets anywhere in `text`. */
const BARE = /(?<!\[)::1:\d/;

function serveFailing(config: object): { status: number | null; stderr: string } {
  const file = join(mkdtempSync(join(tmpdir(), 'proxy-ipv6-addr-')), 'proxy.json');
  writeFileSync(file, JSON.stringify({ log: { level: 'error' }, ...config }));
  const r = spawnSync(process.execPath, ['bin/proxy.mjs', 'serve', '--config', file, '--workers', '1'], { encoding: 'utf8', timeout: 60_000 });
  return { status: r.status, stderr: r.stderr };
}

test('proxy serve: profiling.host "::1" on a taken port fails to start naming [::1]:<port>', { skip }, async () => {
  const held = (await holdV6())!;
  try {
    const r = serveFailing({ listen: '127.0.0.1:0', profiling: { enabled: true, host: '::1', port: held.port } });
    assert.equal(r.status, 1, r.stderr);
    assert.ok(r.stderr.includes(`proxy: could not start: cannot listen on [::1]:${held.port}: address already in use (EADDRINUSE)`), r.stderr);
    assert.doesNotMatch(r.stderr, BARE);
  } finally {
    held.server.close();
  }
});

test('proxy serve: a taken [::1] wire listener and admin.listen fail to start naming [::1]:<port>', { skip }, async () => {
  const held = (await holdV6())!;
  try {
    for (const config of [{ listen: `[::1]:${held.port}` }, { listen: '127.0.0.1:0', admin: { listen: `[::1]:${held.port}`, token: TOKEN } }]) {
      const r = serveFailing(config);
      assert.equal(r.status, 1, r.stderr);
      assert.ok(r.stderr.includes(`cannot listen on [::1]:${held.port}: address already in use (EADDRINUSE)`), r.stderr);
      assert.doesNotMatch(r.stderr, BARE);
    }
  } finally {
    held.server.close();
  }
});

test('proxy serve on [::1]: the listening log lines and the banner bracket the host', { skip }, async () => {
  const file = join(mkdtempSync(join(tmpdir(), 'proxy-ipv6-addr-')), 'proxy.json');
  writeFileSync(file, JSON.stringify({ listen: '[::1]:0', log: { level: 'info' }, admin: { listen: '[::1]:0', token: TOKEN },
    profiling: { enabled: true, host: '::1', port: 0 } }));
  const served = await spawnServe(['--config', file]);
  try {
    await until(() => `the admin API's log line: ${served.err()}`, () => served.err().includes('"msg":"admin API listening"'));
    const lines = served.err().trim().split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, string>);
    const listening = lines.find((l) => l.msg === 'proxy listening');
    assert.ok(listening !== undefined, served.err());
    assert.match(listening.listen, /^\[::1\]:\d+$/);
    assert.match(listening.connect, /^mongodb:\/\/\[::1\]:\d+\/$/);
    assert.match(lines.find((l) => l.msg === 'admin API listening')?.url ?? '', /^http:\/\/\[::1\]:\d+$/);
    assert.match(lines.find((l) => l.msg.startsWith('profiling endpoint listening'))?.url ?? '', /^http:\/\/\[::1\]:\d+$/);
    assert.match(served.out(), /mongodb:\/\/\[::1\]:\d+/);
    assert.doesNotMatch(served.out() + served.err(), BARE);
  } finally {
    await served.stop();
  }
});

test('a reload through the admin API whose profiling.host "::1" port is taken names [::1]:<port>', { skip }, async () => {
  const held = (await holdV6())!;
  const base = { listen: '127.0.0.1:0', log: { level: 'error' as const }, admin: { listen: '127.0.0.1:0', token: TOKEN, reload_on_change: false } };
  const proxy = await startProxy(parseConfig({ ...base, profiling: { enabled: true, host: '::1', port: 0 } }, null), { log: new Logger('test', 'error') });
  try {
    const res = await fetch(`${proxy.adminUrl}/api/v1/reload`, {
      method: 'POST', headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ ...base, profiling: { enabled: true, host: '::1', port: held.port } }),
    });
    const body = await res.json() as { error: { code: string; message: string; details: Array<{ path: string; message: string }> } };
    assert.equal(res.status, 400, JSON.stringify(body));
    assert.equal(body.error.code, 'PROXY_ERR_CONFIG');
    assert.deepEqual(body.error.details, [{ path: 'profiling.port', message: `cannot listen on [::1]:${held.port}: address already in use (EADDRINUSE)` }]);
    assert.doesNotMatch(body.error.message, BARE);
  } finally {
    await proxy.close();
    held.server.close();
  }
});

test('an upstream on [::1] that refuses connections is named [::1]:<port>', { skip }, async () => {
  const held = (await holdV6())!;
  const port = held.port;
  await new Promise((r) => held.server.close(r)); // nothing listens there now
  await assert.rejects(UpstreamConnection.open(1, '::1', port, 5000, () => {}), (err: Error) => {
    assert.equal(err.message, `connect to [::1]:${port} failed: connection refused (ECONNREFUSED)`);
    return true;
  });
});
