// A list of mongos routers behind the proxy: requests spread over the healthy ones, a router that
// is down (from the start, or going down under traffic) is skipped, a cursor's getMore and
// killCursors reach the router that opened it, and a transaction stays on the router it started
// on. The routers are devdb members answering hello as mongos (msg: "isdbgrid") over one engine;
// each counts the commands it served and refuses a getMore for a cursor it did not open.
import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import { Long, UUID, type Document } from 'bson';
import { MongoClient } from 'mongodb';
import { DevMongos } from '../../runtime/devdb/index.ts';
import type { RunningProxy } from '../../runtime/app/serve.ts';
import { until } from '../helpers/until.ts';
import { Closes, withProxy } from '../helpers/proxy.ts';
import { RawClient, opMsg } from '../helpers/wire.ts';

let routers: DevMongos[];
const proxies = new Closes();
const clients: MongoClient[] = [];

before(async () => {
  routers = await DevMongos.startMany(3);
});
after(async () => {
  for (const c of clients) await c.close(true);
  await proxies.run();
  for (const r of routers) await r.server!.close();
});

async function proxyFor(uri: string): Promise<RunningProxy> {
  const { proxy } = await withProxy(proxies, { upstream: { uri, connect_timeout_ms: 2000 } });
  return proxy;
}

function client(p: RunningProxy): MongoClient {
  const c = new MongoClient(p.uri, { serverSelectionTimeoutMS: 15000 });
  clients.push(c);
  return c;
}

const resetCounts = () => { for (const r of routers) r.resetCounts(); };

test('a mongos list: requests are spread over the routers; one down from the start is skipped', async () => {
  // A port nobody listens on, first in the list.
  const dead = await DevMongos.startMany(1);
  const deadAddress = dead[0].address;
  await dead[0].server!.close();
  const p = await proxyFor(`mongodb://${deadAddress},${routers[0].address},${routers[1].address}`);
  const t = p.server.router.topology!;
  await until('two routers', () => t.usableServers.length === 2);
  assert.equal(t.kind, 'Sharded');
  resetCounts();
  const col = client(p).db('app').collection<{ _id: number }>('spread');
  for (let i = 0; i < 30; i++) await col.insertOne({ _id: i });
  assert.equal(routers[0].count('insert') + routers[1].count('insert'), 30);
  assert.ok(routers[0].count('insert') >= 5 && routers[1].count('insert') >= 5,
    `spread: ${routers[0].count('insert')} / ${routers[1].count('insert')}`);
});

test('a router going down under traffic: the others keep serving, no request fails for good', async () => {
  const extra = await DevMongos.startMany(1);
  const p = await proxyFor(`mongodb://${routers[0].address},${routers[1].address},${extra[0].address}`);
  const t = p.server.router.topology!;
  await until('three routers', () => t.usableServers.length === 3);
  const col = client(p).db('app').collection<{ _id: string }>('down');
  let stop = false;
  let ok = 0;
  const errors: Error[] = [];
  const running = Array.from({ length: 6 }, async (_, w) => {
    for (let i = 0; !stop; i++) {
      try {
        await col.insertOne({ _id: `${w}-${i}` });
        await col.findOne({ _id: `${w}-${i}` });
        ok++;
      } catch (err) {
        errors.push(err as Error);
      }
    }
  });
  await until('traffic on the third router', () => extra[0].count('insert') > 10);
  await extra[0].server!.close();
  const at = ok;
  await until('traffic after it went down', () => ok > at + 100);
  stop = true;
  await Promise.all(running);
  assert.deepEqual(errors.map((e) => e.message), []);
  assert.equal(t.usableServers.length, 2);
});

test('a cursor is continued (getMore) and killed on the router that opened it', async () => {
  const p = await proxyFor(`mongodb://${routers[0].address},${routers[1].address}`);
  const t = p.server.router.topology!;
  await until('two routers', () => t.usableServers.length === 2);
  const col = client(p).db('app').collection<{ _id: number }>('cursors');
  await col.insertMany(Array.from({ length: 40 }, (_, i) => ({ _id: i })));
  resetCounts();
  const cursors = Array.from({ length: 6 }, () => col.find({}, { batchSize: 4 }));
  const lengths = await Promise.all(cursors.map(async (c) => (await c.toArray()).length));
  assert.deepEqual(lengths, [40, 40, 40, 40, 40, 40]);
  // Every find's cursor (40 documents in batches of 4: nine getMores) was continued where it was
  // opened (devdb refuses it anywhere else).
  assert.equal(routers[0].count('getMore'), routers[0].count('find') * 9);
  assert.equal(routers[1].count('getMore'), routers[1].count('find') * 9);
  assert.ok(routers[0].count('find') > 0 && routers[1].count('find') > 0, 'cursors opened on both routers');
  const open = [col.find({}, { batchSize: 3 }), col.find({}, { batchSize: 3 })];
  for (const c of open) await c.next();
  resetCounts();
  for (const c of open) await c.close();
  assert.equal(routers[0].count('killCursors') + routers[1].count('killCursors'), 2);
  assert.equal(p.server.router.pinnedCursors, 0);
});

test('a transaction stays on the router it started on (every statement and the commit)', async () => {
  const p = await proxyFor(`mongodb://${routers[0].address},${routers[1].address}`);
  const t = p.server.router.topology!;
  await until('two routers', () => t.usableServers.length === 2);
  const c = client(p);
  const col = c.db('app').collection<{ _id: string; n: number }>('txn');
  const used = new Set<number>();
  for (let k = 0; k < 6; k++) {
    resetCounts();
    const session = c.startSession();
    try {
      session.startTransaction();
      for (let i = 0; i < 5; i++) {
        await col.insertOne({ _id: `${k}-${i}`, n: i }, { session });
        await col.findOne({ _id: `${k}-${i}` }, { session });
      }
      assert.ok(p.server.router.pinnedTransactions >= 1, 'the transaction is pinned');
      await session.commitTransaction();
    } finally {
      await session.endSession();
    }
    const on = routers.findIndex((r) => r.count('commitTransaction') === 1);
    assert.ok(on >= 0, 'committed on one router');
    assert.equal(routers[on].count('insert'), 5, `every insert on router ${on}`);
    assert.equal(routers[on].count('find'), 5, `every find on router ${on}`);
    assert.equal(routers.reduce((n, r) => n + r.count('insert') + r.count('find'), 0), 10, 'nothing elsewhere');
    used.add(on);
  }
  assert.equal(p.server.router.pinnedTransactions, 0, 'commit drops the pin');
  assert.equal(used.size, 2, 'transactions started on both routers (so staying on one is not an accident)');
});

test('a load-balanced client closing after its pinned connection was lost: abortTransaction and killCursors go to the router that owns them, not ' +
  'the first seed', async () => {
  const p = await proxyFor(`mongodb://${routers[0].address},${routers[1].address}`);
  const t = p.server.router.topology!;
  await until('two routers', () => t.usableServers.length === 2);
  await client(p).db('app').collection<{ _id: number }>('lbgone').insertMany(Array.from({ length: 8 }, (_, i) => ({ _id: i })));
  // A load-balanced raw client whose transaction starts on router 1 (not the seed): requests go
  // to the routers in turn, so a few connections are enough.
  let r: RawClient | null = null;
  let lsid = { id: new UUID() };
  const txnNumber = Long.fromNumber(3);
  for (let attempt = 0; attempt < 20 && r === null; attempt++) {
    const c = await RawClient.connect(p.port);
    await c.hello({ loadBalanced: true });
    lsid = { id: new UUID() };
    const before = routers[1].count('insert');
    const ins = await c.roundTrip(opMsg({
      insert: 'lbgone', documents: [{ _id: 100 + attempt }], lsid, txnNumber, startTransaction: true, autocommit: false, $db: 'app',
    }));
    assert.equal(ins.body!.ok, 1);
    if (routers[1].count('insert') > before) r = c;
    else c.destroy();
  }
  assert.ok(r !== null, 'a transaction started on router 1');
  const findReply = await r.roundTrip(opMsg({
    find: 'lbgone', filter: {}, batchSize: 2, lsid, txnNumber, autocommit: false, $db: 'app',
  }));
  const cursorId = (findReply.body!.cursor as Document).id as Long;
  assert.ok(cursorId.toBigInt() !== 0n, 'a cursor is open (inside the transaction, on router 1)');
  // The client's pinned upstream connection is lost (router 1 itself stays up).
  [...t.allServers()].find((s) => s.port === routers[1].port)!.pool.clear('test: the pinned connection is lost');
  resetCounts();
  r.destroy();
  await until('abortTransaction and killCursors on router 1', () => routers[1].count('abortTransaction') === 1 && routers[1].count('killCursors') === 1);
  assert.equal(routers[0].count('abortTransaction') + routers[0].count('killCursors'), 0, 'nothing sent to the first seed');
  await until('the pins dropped', () => p.server.router.pinnedCursors === 0 && p.server.router.pinnedTransactions === 0);
});

test('killCursors naming several cursors: sent whole to the first pinned cursor\'s router, every named pin dropped', async () => {
  const p = await proxyFor(`mongodb://${routers[0].address},${routers[1].address}`);
  const t = p.server.router.topology!;
  await until('two routers', () => t.usableServers.length === 2);
  await client(p).db('app').collection<{ _id: number }>('multikill').insertMany(Array.from({ length: 8 }, (_, i) => ({ _id: i })));
  const r = await RawClient.connect(p.port);
  try {
    await r.hello();
    resetCounts();
    // Requests go to the routers in turn (within the latency window): open cursors until each
    // router holds one, and name one of each, the first from router `firstOn`.
    const byRouter: Array<Long | null> = [null, null];
    let opened = 0;
    let firstOn = -1;
    for (let i = 0; i < 40 && byRouter.includes(null); i++) {
      const before = routers.map((x) => x.count('find'));
      const f = await r.roundTrip(opMsg({ find: 'multikill', filter: {}, batchSize: 1, $db: 'app' }));
      opened++;
      const on = routers.findIndex((x, j) => x.count('find') > before[j]);
      if (byRouter[on] === null) byRouter[on] = (f.body!.cursor as Document).id as Long;
      if (firstOn < 0) firstOn = on;
    }
    assert.ok(!byRouter.includes(null), 'cursors opened on both routers');
    assert.equal(p.server.router.pinnedCursors, opened);
    const ids = [byRouter[firstOn]!, byRouter[1 - firstOn]!];
    const k = await r.roundTrip(opMsg({ killCursors: 'multikill', cursors: ids, $db: 'app' }));
    assert.equal(k.body!.ok, 1);
    assert.equal(routers[firstOn].count('killCursors'), 1, 'sent to the router of the first cursor');
    assert.equal(routers[1 - firstOn].count('killCursors'), 0, 'not split');
    assert.equal(p.server.router.pinnedCursors, opened - 2, 'both named pins dropped');
  } finally {
    r.destroy();
  }
});

test('metrics: pinned cursors and transactions, and servers by type, are gauges on /metrics', async () => {
  const { proxy: p } = await withProxy(proxies, {
    upstream: { uri: `mongodb://${routers[0].address},${routers[1].address}`, connect_timeout_ms: 2000 },
    profiling: { host: '127.0.0.1', port: 0 },
  });
  await until('two routers', () => p.server.router.topology!.usableServers.length === 2);
  const col = client(p).db('app').collection<{ _id: number }>('cursors');
  const cur = col.find({}, { batchSize: 2 });
  await cur.next();
  const text = await (await fetch(`${p.profilingUrl}/metrics`)).text();
  assert.match(text, /^proxy_upstream_pinned_cursors 1$/m);
  assert.match(text, /^proxy_upstream_pinned_transactions 0$/m);
  assert.match(text, /^proxy_upstream_servers\{type="Mongos"\} 2$/m);
  await cur.close();
});
