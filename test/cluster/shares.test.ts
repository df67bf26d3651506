// Limits configured for the whole proxy hold for the whole machine with several workers: each
// worker runs its share (runtime/cluster/shares.ts). clients.max_connections: the machine serves
// exactly the limit; rate_limit.max_rps: the machine admits no more than the bucket allows. The
// default `workers: "auto"` runs no more workers than clients.max_connections can be shared by.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { spawnSync } from 'node:child_process';
import { parseConfig } from '../../runtime/config/index.ts';
import { autoWorkers, pipelineShare, share, shareProblem, workerConfig } from '../../runtime/cluster/shares.ts';
import { freePort } from '../helpers/ports.ts';
import { spawnServe } from '../helpers/serve.ts';
import { RawClient, opMsg } from '../helpers/wire.ts';

const dir = mkdtempSync(join(tmpdir(), 'proxy-shares-'));

test('shares add up to the limit and differ by at most one; a limit below the worker count is refused with its key', () => {
  for (const [total, n] of [[10, 3], [4, 4], [7, 2], [1000, 16]]) {
    const s = Array.from({ length: n }, (_, i) => share(total, n, i));
    assert.equal(s.reduce((a, b) => a + b, 0), total);
    assert.ok(Math.max(...s) - Math.min(...s) <= 1);
  }
  const c = parseConfig({ clients: { max_connections: 3 }, steps: { rate_limit: { config: { max_rps: 100, burst: 50 } } } }, null);
  assert.equal(shareProblem(c, 4)?.path, 'clients.max_connections');
  assert.equal(shareProblem(c, 2), null);
  const w1 = workerConfig(c, 2, 1);
  assert.equal(w1.clients.max_connections, 1);
  assert.deepEqual(w1.steps.rate_limit.config, { max_rps: 50, burst: 25 });
});

test('proxy serve --workers 2 refuses, with the key path, a limit it cannot share; a fleet member (fleet.store: etcd) is not refused for its workers',
  () => {
    const file = join(dir, 'small-limit.json');
    writeFileSync(file, JSON.stringify({ listen: '127.0.0.1:0', clients: { max_connections: 1 } }));
    const small = spawnSync(process.execPath, [join(process.cwd(), 'bin/proxy.mjs'), 'serve', '--config', file, '--workers', '2'], { encoding: 'utf8',
      timeout: 60_000 });
    assert.equal(small.status, 2, small.stderr);
    assert.match(small.stderr, /clients\.max_connections: 1 cannot be shared by 2 workers/);
    // etcd unreachable: it gets as far as the fleet store (exit 1, naming it), not a refusal of its workers.
    const fleet = join(dir, 'fleet.json');
    writeFileSync(fleet, JSON.stringify({ listen: '127.0.0.1:0', control_plane: { port: 0 }, canary: { data_dir: join(dir, 'fleet-canary') },
      notifications: { outbox_path: join(dir, 'fleet-outbox.db') }, fleet: { store: 'etcd', endpoints: ['http://127.0.0.1:1'] } }));
    const member = spawnSync(process.execPath, [join(process.cwd(), 'bin/proxy.mjs'), 'serve', '--config', fleet, '--workers', '2'], { encoding: 'utf8',
      timeout: 60_000 });
    assert.equal(member.status, 1, member.stderr);
    assert.match(member.stderr, /fleet\.endpoints: etcd at http:\/\/127\.0\.0\.1:1 cannot be reached/);
    const r = spawnSync(process.execPath, [join(process.cwd(), 'bin/proxy.mjs'), 'serve', '--workers', 'many'], { encoding: 'utf8', timeout: 60_000 });
    assert.equal(r.status, 2);
    assert.match(r.stderr, /--workers: workers: expected integer 1\.\.256 or "auto", received "many"/);
  });

test('workers: "auto" (the default) runs one per CPU, but no more than clients.max_connections can be shared by', () => {
  const at = (max: number) => parseConfig({ clients: { max_connections: max } }, null);
  assert.equal(parseConfig({}, null).workers, 'auto');
  assert.equal(autoWorkers(at(0), 16), 16);
  assert.equal(autoWorkers(at(3), 16), 3);
  assert.equal(autoWorkers(at(8), 2), 2);
  assert.equal(autoWorkers(at(1), 2), 1);
  assert.equal(shareProblem(at(3), autoWorkers(at(3), 16)), null);
});

test('a configuration that ran in one process starts with workers: auto: clients.max_connections: 1 runs one process', { timeout: 120_000 },
  async () => {
    const port = await freePort();
    const file = join(dir, 'auto-one.json');
    writeFileSync(file, JSON.stringify({ listen: `127.0.0.1:${port}`, log: { level: 'info' }, clients: { max_connections: 1 } }));
    const served = await spawnServe(['--config', file, '--workers', 'auto']);
    try {
      const c = await RawClient.connect(port);
      assert.equal((await c.roundTrip(opMsg({ ping: 1, $db: 'admin' }))).body?.ok, 1);
      c.destroy();
      assert.doesNotMatch(served.err(), /workers listening/, 'one process: no workers forked');
    } finally {
      await served.stop();
    }
  });

async function serve(name: string, config: Record<string, unknown>) {
  const port = await freePort();
  const file = join(dir, `${name}.json`);
  writeFileSync(file, JSON.stringify({ listen: `127.0.0.1:${port}`, log: { level: 'error' }, ...config }));
  return { served: await spawnServe(['--config', file, '--workers', '2']), port };
}

test('clients.max_connections: 4 with 2 workers: the machine serves 4 connections, not 8', { timeout: 180_000 }, async () => {
  const { served, port } = await serve('conns', { clients: { max_connections: 4 } });
  const clients: RawClient[] = [];
  try {
    // One connection at a time, each answered before the next: the primary hands a connection to
    // the worker that has been free longest, so they alternate (a burst of connects may be split
    // unevenly, docs/operations.md) and each worker sees 4 and admits its share of 2.
    const outcomes: string[] = [];
    for (let i = 0; i < 8; i++) {
      const c = await RawClient.connect(port);
      clients.push(c);
      const r = await c.roundTrip(opMsg({ ping: 1, $db: 'admin' }), 15_000).catch(() => null);
      outcomes.push(r?.body?.ok === 1 ? 'served' : 'refused');
    }
    assert.equal(outcomes.filter((o) => o === 'served').length, 4, outcomes.join());
  } finally {
    for (const c of clients) c.destroy();
    await served.stop();
  }
});

test('rate_limit max_rps with 2 workers: the machine admits at most burst + max_rps × elapsed', { timeout: 180_000 }, async () => {
  const MAX_RPS = 20;
  const BURST = 10;
  const { served, port } = await serve('rate', {
    pipeline: { request: ['rate_limit'] }, steps: { rate_limit: { config: { max_rps: MAX_RPS, burst: BURST } } },
  });
  const clients: RawClient[] = [];
  try {
    for (let i = 0; i < 4; i++) clients.push(await RawClient.connect(port));
    let admitted = 0;
    let limited = 0;
    const t0 = performance.now();
    await Promise.all(clients.map(async (c) => {
      while (performance.now() - t0 < 2000) {
        const r = await c.roundTrip(opMsg({ find: 'items', filter: {}, $db: 'shares' }), 15_000);
        if (r.body?.ok === 1) admitted++;
        else limited++;
      }
    }));
    const elapsedS = (performance.now() - t0) / 1000;
    assert.ok(limited > 0, 'the limit was reached');
    // Each worker's bucket: BURST/2 tokens at first, MAX_RPS/2 per second after.
    assert.ok(admitted <= BURST + MAX_RPS * elapsedS + 1, `admitted ${admitted} in ${elapsedS.toFixed(2)} s`);
    assert.ok(admitted >= BURST, `admitted ${admitted}: at least the burst`);
  } finally {
    for (const c of clients) c.destroy();
    await served.stop();
  }
});

test('a pipeline\'s own steps.rate_limit is shared like the top-level one; a graph the primary hands its workers is shared too', () => {
  const c = parseConfig({ pipelines: [{ id: 'reports', match: { app_name: 'r*' }, request: ['rate_limit'],
    steps: { rate_limit: { config: { max_rps: 40, burst: 8 } } } }], steps: { rate_limit: { config: { max_rps: 100, burst: 50 } } } }, null);
  const w = workerConfig(c, 2, 0);
  assert.deepEqual(w.steps.rate_limit.config, { max_rps: 50, burst: 25 });
  assert.deepEqual((w.pipelines![0].steps as Record<string, { config: unknown }>).rate_limit.config, { max_rps: 20, burst: 4 });
  const graph = { pipeline: { id: 'default', request: ['rate_limit'], response: [] },
    steps: { rate_limit: { config: { max_rps: 10 }, max_memory_pages: 256 } } };
  assert.deepEqual(pipelineShare(graph, 4).steps.rate_limit.config, { max_rps: 2.5, burst: 2.5 });
  assert.equal(pipelineShare(graph, 1), graph, 'one process: unchanged');
});

/** Finds on `clients` for `ms`: how many the rate limit admitted, and the seconds it took. */
async function admittedFor(clients: RawClient[], ms: number): Promise<{ admitted: number; limited: number; elapsedS: number }> {
  let admitted = 0;
  let limited = 0;
  const t0 = performance.now();
  await Promise.all(clients.map(async (c) => {
    while (performance.now() - t0 < ms) {
      const r = await c.roundTrip(opMsg({ find: 'items', filter: {}, $db: 'shares' }), 15_000);
      if (r.body?.ok === 1) admitted++;
      else limited++;
    }
  }));
  return { admitted, limited, elapsedS: (performance.now() - t0) / 1000 };
}

test('with a control plane and 2 workers, rate_limit stays the machine\'s, at start and after a reload; the machine\'s /metrics has the notifier\'s',
  { timeout: 240_000 }, async () => {
    const MAX_RPS = 20;
    const BURST = 10;
    const TOKEN = 'shares-admin-token-0123456';
    const adminPort = await freePort();
    const admin = `http://127.0.0.1:${adminPort}`;
    const { served, port } = await serve('rate-canary', {
      pipeline: { request: ['rate_limit'] }, steps: { rate_limit: { config: { max_rps: MAX_RPS, burst: BURST } } },
      admin: { listen: `127.0.0.1:${adminPort}`, token: TOKEN, reload_on_change: false },
      control_plane: { port: await freePort(), tokens: [TOKEN] }, canary: { data_dir: join(dir, 'rate-canary') },
    });
    const clients: RawClient[] = [];
    const get = async (path: string) => (await fetch(`${admin}${path}`, { headers: { authorization: `Bearer ${TOKEN}` } }));
    try {
      for (let i = 0; i < 4; i++) clients.push(await RawClient.connect(port));
      // The workers serve the graphs they started with: the primary's canary state did not rebuild them.
      const workers = await (await get('/api/v1/workers')).json() as { workers: Array<{ generations: Record<string, number> }> };
      assert.deepEqual(workers.workers.map((w) => w.generations.default), [1, 1], JSON.stringify(workers));
      for (const phase of ['start', 'reload']) {
        if (phase === 'reload') {
          const r = await fetch(`${admin}/api/v1/reload`, { method: 'POST', headers: { authorization: `Bearer ${TOKEN}` } });
          assert.equal(r.status, 200, await r.text());
          // A fresh bucket: the limit's tokens are per config, and every worker's were spent above.
          await new Promise((r) => setTimeout(r, 1000));
        }
        const { admitted, limited, elapsedS } = await admittedFor(clients, 2000);
        assert.ok(limited > 0, `${phase}: the limit was reached`);
        // Burst + refill of the whole machine (at most: a bucket refilled for the wait before counts BURST at most).
        assert.ok(admitted <= BURST + MAX_RPS * elapsedS + 1, `${phase}: admitted ${admitted} in ${elapsedS.toFixed(2)} s`);
      }
      const metrics = await (await get('/metrics')).text();
      assert.match(metrics, /^proxy_notifications_pending 0$/m);
      assert.match(metrics, /^proxy_notifications_delivered_total\{channel="webhook"\} 0$/m);
    } finally {
      for (const c of clients) c.destroy();
      await served.stop();
    }
  });
