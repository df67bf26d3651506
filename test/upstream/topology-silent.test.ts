// A server that goes silent — it stops answering but its TCP connections stay open, as in a network
// partition — must not hold requests for ever. Two devdb mongos routers sit behind TCP relays
// (TcpTap); holding a relay stops replies from its router while the proxy's sockets stay connected.
// The proxy's server monitor then gets no hello reply, marks the router Unknown and clears its pool,
// interrupting the requests in flight there: they are answered at once with HostUnreachable (a
// retryable error) and the driver's retry goes to the other router. upstream.request_timeout_ms is
// left at its default (0, no limit): the monitor alone bounds the wait. The replica-set case uses a
// devdb member made `silent` (it drops every frame, connections open) while another is elected.
import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import { MongoClient, MongoServerError } from 'mongodb';
import { DevMongos, DevReplicaSet } from '../../runtime/devdb/index.ts';
import type { RunningProxy } from '../../runtime/app/serve.ts';

const ADMIN_TOKEN = 'silent-test-token-0123';
import { TcpTap } from '../helpers/wire.ts';
import { until } from '../helpers/until.ts';
import { Closes, withProxy } from '../helpers/proxy.ts';

const HEARTBEAT_MS = 500;
const CONNECT_TIMEOUT_MS = 1000;
/** Generous on a loaded machine: the expected bound is one heartbeat plus one hello timeout (~1.5 s). */
const ANSWERED_WITHIN_MS = 10_000;

let routers: DevMongos[];
let taps: TcpTap[];
let proxy: RunningProxy;
const proxies = new Closes();
const clients: MongoClient[] = [];

before(async () => {
  routers = await DevMongos.startMany(2);
  taps = routers.map((r) => new TcpTap(r.port));
  for (const t of taps) await t.listen();
  ({ proxy } = await withProxy(proxies, {
    admin: { listen: '127.0.0.1:0', token: ADMIN_TOKEN },
    upstream: { uri: `mongodb://${taps.map((t) => `127.0.0.1:${t.port}`).join(',')}/`, connect_timeout_ms: CONNECT_TIMEOUT_MS, heartbeat_ms: HEARTBEAT_MS },
  }));
});
after(async () => {
  for (const c of clients) await c.close(true);
  await proxies.run();
  for (const t of taps) await t.close();
  for (const r of routers) await r.server!.close();
});

function client(retry: boolean): MongoClient {
  const c = new MongoClient(proxy.uri, { retryReads: retry, retryWrites: retry, maxPoolSize: 20, serverSelectionTimeoutMS: 15_000 });
  clients.push(c);
  return c;
}

/** Every promise settles within `ms`, or the test fails naming how many hung. */
async function allSettledWithin<T>(ops: Promise<T>[], ms: number): Promise<PromiseSettledResult<T>[]> {
  let timer: NodeJS.Timeout | undefined;
  let settled = 0;
  for (const op of ops) op.then(() => settled++, () => settled++);
  const hung = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${ops.length - settled} of ${ops.length} requests still unanswered after ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([Promise.allSettled(ops), hung]);
  } finally {
    clearTimeout(timer);
  }
}

async function bothRoutersUsable(): Promise<void> {
  const t = proxy.server.router.topology!;
  await until('both routers usable', () => t.usableServers.length === 2 && t.usableServers.every((s) => s.type === 'Mongos'));
}

/** Opens pooled connections to both routers (so requests in flight there are on established sockets). */
async function warm(c: MongoClient): Promise<void> {
  const col = c.db('app').collection<{ _id: number }>('silent');
  await col.updateOne({ _id: 0 }, { $set: { v: 1 } }, { upsert: true });
  for (let k = 0; k < 3; k++) await Promise.all(Array.from({ length: 10 }, () => col.findOne({ _id: 0 })));
}

test('a router that goes silent: requests in flight there get HostUnreachable within a few heartbeats, the rest succeed', async () => {
  await bothRoutersUsable();
  const c = client(false);
  await warm(c);
  const pool0 = proxy.server.router.topology!.usableServers.find((s) => s.port === taps[0].port)!.pool;
  const clearedBefore = pool0.stats.cleared;
  for (const r of routers) r.resetCounts();
  taps[0].hold();
  const started = Date.now();
  const col = c.db('app').collection<{ _id: number }>('silent');
  const results = await allSettledWithin(Array.from({ length: 10 }, () => col.findOne({ _id: 0 })), ANSWERED_WITHIN_MS);
  const elapsed = Date.now() - started;
  const failed = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected').map((r) => r.reason as Error);
  // Every find that reached the silent router failed; every other one succeeded.
  assert.equal(failed.length, routers[0].count('find'), `failures ${failed.map((e) => e.message).join('; ')}`);
  assert.ok(failed.length >= 1, 'some finds were sent to the silent router (round robin)');
  for (const e of failed) {
    assert.ok(e instanceof MongoServerError, `an error document, not a network error: ${e.message}`);
    assert.equal(e.code, 6, `HostUnreachable: ${e.message}`);
    assert.match(e.message, /unreachable/);
  }
  assert.ok(elapsed < ANSWERED_WITHIN_MS, `answered after ${elapsed} ms`);
  assert.ok(pool0.stats.cleared > clearedBefore, 'the silent router\'s pool was cleared');
  const metrics = await (await fetch(`${proxy.adminUrl}/metrics`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })).text();
  const cleared = /^proxy_upstream_pool_cleared_total (\d+)$/m.exec(metrics);
  assert.ok(cleared !== null && Number(cleared[1]) >= pool0.stats.cleared, `proxy_upstream_pool_cleared_total in /metrics: ${cleared?.[0]}`);
  assert.equal(proxy.server.router.topology!.usableServers.some((s) => s.port === taps[0].port), false, 'the silent router is not selected');
  // New requests go to the router that answers.
  assert.deepEqual(await col.findOne({ _id: 0 }), { _id: 0, v: 1 });
  taps[0].release();
});

test('with the driver\'s retries on, nothing fails: reads and retryable writes in flight on the silent router are retried on the other', async () => {
  await bothRoutersUsable();
  const c = client(true);
  await warm(c);
  const errorsBefore = proxy.server.stats.upstreamErrors;
  for (const r of routers) r.resetCounts();
  taps[0].hold();
  const col = c.db('app').collection<{ _id: number | string }>('silent');
  const ops: Promise<unknown>[] = [];
  for (let i = 0; i < 10; i++) {
    ops.push(col.findOne({ _id: 0 }));
    ops.push(col.insertOne({ _id: `w${i}` }));
  }
  const results = await allSettledWithin(ops, ANSWERED_WITHIN_MS);
  const failed = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected').map((r) => (r.reason as Error).message);
  assert.deepEqual(failed, []);
  assert.ok(routers[0].count('find') + routers[0].count('insert') >= 1, 'some requests were first sent to the silent router');
  assert.ok(proxy.server.stats.upstreamErrors > errorsBefore, 'those were answered with an error (then retried)');
  // Each write happened once (a retried insert would otherwise fail with a duplicate key).
  assert.equal(await col.countDocuments({ _id: { $in: Array.from({ length: 10 }, (_, i) => `w${i}`) } }), 10);
  taps[0].release();
});

test('replica set: the primary goes silent and another member is elected: writes and reads in flight on it get a retryable error, the driver ' +
  'retries them on the new primary', async () => {
  const rs = await DevReplicaSet.start(3, 'rs-silent');
  const closes = new Closes();
  const { proxy: p } = await withProxy(closes, { upstream: { uri: rs.uri(), connect_timeout_ms: CONNECT_TIMEOUT_MS, heartbeat_ms: HEARTBEAT_MS } });
  const c = new MongoClient(p.uri, { maxPoolSize: 20, serverSelectionTimeoutMS: 15_000 });
  try {
    const t = p.server.router.topology!;
    await until('primary 0 and two secondaries', () => t.primary?.port === rs.members[0].port && t.usableServers.length === 3);
    const col = c.db('app').collection<{ _id: string }>('silent-rs');
    for (let i = 0; i < 10; i++) await col.insertOne({ _id: `warm${i}` });
    const errorsBefore = p.server.stats.upstreamErrors;
    rs.members[0].silent = true;
    const ops: Promise<unknown>[] = [];
    for (let i = 0; i < 10; i++) {
      ops.push(col.insertOne({ _id: `w${i}` }));
      ops.push(col.findOne({ _id: `warm${i}` }));
    }
    // The partitioned primary is replaced (as the other members would elect one).
    await new Promise((r) => setTimeout(r, 100));
    rs.stepDown(1);
    const results = await allSettledWithin(ops, ANSWERED_WITHIN_MS);
    const failed = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected').map((r) => (r.reason as Error).message);
    assert.deepEqual(failed, []);
    assert.ok(p.server.stats.upstreamErrors > errorsBefore, 'requests in flight on the silent primary were answered with an error (then retried)');
    assert.equal(t.primary?.port, rs.members[1].port);
    assert.equal(await col.countDocuments({ _id: { $in: Array.from({ length: 10 }, (_, i) => `w${i}`) } }), 10);
  } finally {
    rs.members[0].silent = false;
    await c.close(true);
    await closes.run();
    await rs.close();
  }
});
