// Upstream faults: devdb killed under load (connections dropped; server closed and restarted on the
// same port), and a pool with one connection behind a stalled upstream. Clients must get error
// documents (not hangs, not dropped sockets) within connect_timeout_ms, and the proxy must recover
// by itself once the upstream is back.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { MongoClient, MongoServerError } from 'mongodb';
import { type Document } from 'bson';
import { startStack, withTimeout, type Stack } from '../helpers/stack.ts';
import { RawClient, TcpTap, opMsg } from '../helpers/wire.ts';
import { DevDbServer } from '../../runtime/devdb/index.ts';

const CONNECT_TIMEOUT_MS = 1000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface LoadStats { ok: number; errors: number; maxMs: number; codes: Map<string, number>; acked: number[] }

/** `workers` loops of insertOne + find until stopped; records outcome and latency of each op. */
function startLoad(client: MongoClient, workers: number, coll: string) {
  const c = client.db('faults_upstream').collection(coll);
  const stats: LoadStats = { ok: 0, errors: 0, maxMs: 0, codes: new Map(), acked: [] };
  let stop = false;
  let seq = 0;
  const loops = Array.from({ length: workers }, async () => {
    while (!stop) {
      const id = ++seq;
      const t0 = performance.now();
      try {
        await c.insertOne({ _id: id as never, at: Date.now() });
        stats.acked.push(id);
        await c.findOne({ _id: id as never });
        stats.ok++;
      } catch (e) {
        stats.errors++;
        const key = e instanceof MongoServerError ? `server:${e.code}` : (e as Error).name;
        stats.codes.set(key, (stats.codes.get(key) ?? 0) + 1);
        await sleep(20);
      }
      stats.maxMs = Math.max(stats.maxMs, performance.now() - t0);
    }
  });
  return {
    stats,
    async stop() {
      stop = true;
      await Promise.all(loops);
    },
    resetLatency() { stats.maxMs = 0; },
  };
}

async function eventually(what: string, ms: number, fn: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + ms;
  let last: unknown = null;
  while (Date.now() < deadline) {
    try {
      if (await fn()) return;
    } catch (e) {
      last = e;
    }
    await sleep(100);
  }
  throw new Error(`${what} did not happen within ${ms} ms (last error: ${String(last)})`);
}

describe('upstream killed under load', () => {
  let stack: Stack;
  let client: MongoClient;

  before(async () => {
    stack = await startStack({ pool: { connect_timeout_ms: CONNECT_TIMEOUT_MS, wait_queue_timeout_ms: 3000, pool_size: 20 } });
    client = new MongoClient(stack.uri, { serverSelectionTimeoutMS: 5000, socketTimeoutMS: 15_000, maxPoolSize: 20 });
    await client.connect();
  });

  after(async () => {
    await client?.close();
    await stack?.close();
  });

  test('connections dropped under load: errors or retries, no hangs, service continues', { timeout: 60_000 }, async (t) => {
    const load = startLoad(client, 10, 'drop');
    try {
      await eventually('load running', 5000, async () => load.stats.ok > 50);
      for (let k = 0; k < 5; k++) {
        stack.devdb!.dropConnections();
        await sleep(150);
      }
      const okBefore = load.stats.ok;
      await eventually('traffic flowing again after drops', 10_000, async () => load.stats.ok > okBefore + 50);
    } finally {
      await load.stop();
    }
    assert.ok(load.stats.maxMs < 5000, `an operation took ${load.stats.maxMs} ms`);
    const codes = Object.fromEntries(load.stats.codes);
    t.diagnostic(`ok ${load.stats.ok}, errors ${load.stats.errors} ${JSON.stringify(codes)}, max latency ${load.stats.maxMs.toFixed(0)} ms`);
    for (const k of Object.keys(codes)) {
      assert.ok(k === 'server:6' || k === 'server:89', `unexpected error kind ${k} (${JSON.stringify(codes)})`);
    }
    // Every acknowledged insert is really there.
    const c = client.db('faults_upstream').collection('drop');
    const have = new Set((await c.find({}, { projection: { _id: 1 } }).toArray()).map((d) => d._id as unknown as number));
    const missing = load.stats.acked.filter((id) => !have.has(id));
    assert.deepEqual(missing, []);
    assert.ok(stack.proxy.server.stats.connectionsActive > 0);
  });

  test('upstream down: error documents within connect_timeout_ms; recovery without restarting the proxy', { timeout: 90_000 }, async (t) => {
    const raw = await RawClient.connect(stack.proxy.port);
    const load = startLoad(client, 10, 'down');
    try {
      await eventually('load running', 5000, async () => load.stats.ok > 50);
      await stack.stopDevdb();
      const errorsAtStop = load.stats.errors;
      await sleep(300);
      load.resetLatency();

      // The raw client: an OP_MSG find gets an ok:0 document with code 6 and RetryableWriteError,
      // on a socket that stays open; it arrives within connect_timeout_ms (plus scheduling slack).
      for (let i = 0; i < 3; i++) {
        const t0 = performance.now();
        const r = await raw.roundTrip(opMsg({ find: 'down', filter: {}, $db: 'faults_upstream' }), CONNECT_TIMEOUT_MS + 4000);
        const took = performance.now() - t0;
        const b = r.body as Document;
        assert.equal(b.ok, 0, JSON.stringify(b));
        assert.equal(b.code, 6, JSON.stringify(b));
        assert.equal(b.codeName, 'HostUnreachable');
        assert.ok(Array.isArray(b.errorLabels) && b.errorLabels.includes('RetryableWriteError'), JSON.stringify(b));
        assert.ok(took < CONNECT_TIMEOUT_MS + 1000, `error took ${took.toFixed(0)} ms (connect_timeout_ms ${CONNECT_TIMEOUT_MS})`);
        assert.equal(raw.closed, false, 'the client socket must stay open');
      }

      await sleep(1500);
      assert.ok(load.stats.errors > errorsAtStop, 'the driver saw errors while the upstream was down');
      // No hangs: with retryable writes the driver may try twice, each bounded by connect_timeout_ms.
      assert.ok(load.stats.maxMs < 2 * CONNECT_TIMEOUT_MS + 2000, `an operation took ${load.stats.maxMs.toFixed(0)} ms while the upstream was down`);

      await stack.restartDevdb();
      const okAtRestart = load.stats.ok;
      await eventually('driver traffic recovers', 15_000, async () => load.stats.ok > okAtRestart + 50);
      const r = await raw.roundTrip(opMsg({ find: 'down', filter: {}, limit: 1, $db: 'faults_upstream' }));
      assert.equal(r.body?.ok, 1, JSON.stringify(r.body));
    } finally {
      await load.stop();
      raw.destroy();
    }
    const codes = Object.fromEntries(load.stats.codes);
    t.diagnostic(`ok ${load.stats.ok}, errors ${load.stats.errors} ${JSON.stringify(codes)}, max latency ${load.stats.maxMs.toFixed(0)} ms`);
    for (const k of Object.keys(codes)) {
      assert.ok(k === 'server:6' || k === 'server:89', `unexpected error kind ${k} (${JSON.stringify(codes)})`);
    }
  });

  test('a fresh client connecting while the upstream is down gets hello and then error documents', { timeout: 60_000 }, async () => {
    await stack.stopDevdb();
    const c2 = new MongoClient(stack.uri, { serverSelectionTimeoutMS: 5000, retryReads: false, retryWrites: false });
    try {
      const t0 = performance.now();
      const err = await c2.db('faults_upstream').collection('x').findOne({}).then(() => null, (e: unknown) => e);
      assert.ok(err instanceof MongoServerError, `expected a server error, got ${String(err)}`);
      assert.equal(err.code, 6);
      assert.ok(err.hasErrorLabel('RetryableWriteError'));
      assert.ok(performance.now() - t0 < CONNECT_TIMEOUT_MS + 2000);
    } finally {
      await stack.restartDevdb();
    }
    await eventually('fresh client works after restart', 10_000, async () => {
      await c2.db('faults_upstream').collection('x').insertOne({ back: true });
      return true;
    });
    await c2.close();
  });
});

describe('pool limits', () => {
  let devdb: DevDbServer;
  let tap: TcpTap;
  let stack: Stack;

  before(async () => {
    devdb = new DevDbServer();
    const d = await devdb.listen(0);
    tap = new TcpTap(d.port);
    const tapUri = await tap.listen();
    stack = await startStack({ upstreamUri: tapUri, pool: { pool_size: 1, wait_queue_timeout_ms: 500, connect_timeout_ms: CONNECT_TIMEOUT_MS } });
  });

  after(async () => {
    tap?.release();
    await stack?.close();
    await tap?.close();
    await devdb?.close();
  });

  test('pool_size 1: 40 concurrent clients queue and all complete', { timeout: 60_000 }, async () => {
    const raws = await Promise.all(Array.from({ length: 40 }, () => RawClient.connect(stack.proxy.port)));
    try {
      const results = await withTimeout(Promise.all(raws.map(async (r, k) => {
        const ins = await r.roundTrip(opMsg({ insert: 'q', documents: [{ _id: k }], $db: 'faults_pool' }));
        assert.equal(ins.body?.ok, 1, JSON.stringify(ins.body));
        const f = await r.roundTrip(opMsg({ find: 'q', filter: { _id: k }, $db: 'faults_pool' }));
        return f.body?.cursor.firstBatch[0]._id;
      })), 20_000, 'queued requests');
      assert.deepEqual(results, Array.from({ length: 40 }, (_, k) => k));
      assert.ok(stack.proxy.pool.size <= 1, `pool grew to ${stack.proxy.pool.size}`);
    } finally {
      for (const r of raws) r.destroy();
    }
  });

  test('pool_size 1 with a stalled upstream: a waiter times out with a clear error, the holder completes', { timeout: 30_000 }, async () => {
    const holder = await RawClient.connect(stack.proxy.port);
    const waiter = await RawClient.connect(stack.proxy.port);
    try {
      tap.hold(); // devdb's replies stop reaching the proxy
      holder.write(opMsg({ find: 'q', filter: { _id: 1 }, $db: 'faults_pool' }));
      await sleep(100);
      const t0 = performance.now();
      const w = await waiter.roundTrip(opMsg({ find: 'q', filter: { _id: 2 }, $db: 'faults_pool' }), 5000);
      const took = performance.now() - t0;
      assert.equal(w.body?.ok, 0, JSON.stringify(w.body));
      assert.equal(w.body?.code, 89, JSON.stringify(w.body));
      assert.match(String(w.body?.errmsg), /waiting for an upstream connection/);
      assert.ok(took >= 400 && took < 2500, `wait timeout took ${took.toFixed(0)} ms (wait_queue_timeout_ms 500)`);
      assert.equal(waiter.closed, false);
      tap.release();
      const h = await holder.next(5000);
      assert.ok(h !== null);
      const again = await waiter.roundTrip(opMsg({ find: 'q', filter: { _id: 2 }, $db: 'faults_pool' }));
      assert.equal(again.body?.ok, 1);
      assert.equal(again.body?.cursor.firstBatch[0]._id, 2);
    } finally {
      tap.release();
      holder.destroy();
      waiter.destroy();
    }
  });
});
