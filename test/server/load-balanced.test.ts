// Load-balanced mode: clients that connect with loadBalanced=true get a stable serviceId; their
// cursors and transactions stay on one upstream connection; and when such a client's connection
// closes with a transaction or cursors open, the proxy aborts and kills them upstream. The
// upstream is devdb with an engine that records every command it runs and on which of its
// connections, which is how the tests see pinning and cleanup.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { Long, ObjectId, UUID, type Document } from 'bson';
import { MongoClient } from 'mongodb';
import { DevDbServer, DevEngine } from '../../runtime/devdb/index.ts';
import type { RunningProxy } from '../../runtime/app/serve.ts';
import { RawClient, opMsg } from '../helpers/wire.ts';
import { until } from '../helpers/until.ts';
import { Closes, withProxy } from '../helpers/proxy.ts';

interface Seen { name: string; conn: number; cmd: Document }

class RecordingEngine extends DevEngine {
  readonly seen: Seen[] = [];
  override run(cmd: Document, sequences?: Record<string, Document[]>, connectionId = 0): Document {
    this.seen.push({ name: Object.keys(cmd)[0] ?? '', conn: connectionId, cmd });
    return super.run(cmd, sequences, connectionId);
  }
}

const engine = new RecordingEngine();
const devdb = new DevDbServer(engine);
let proxy: RunningProxy;
const proxies = new Closes();
const clients: MongoClient[] = [];
const raws: RawClient[] = [];

after(async () => {
  for (const r of raws) r.destroy();
  for (const c of clients) await c.close().catch(() => {});
  await proxies.run();
  await devdb.close();
});

async function start(): Promise<RunningProxy> {
  if (proxy !== undefined) return proxy;
  const d = await devdb.listen(0);
  ({ proxy } = await withProxy(proxies, { upstream: { uri: d.uri, pool_size: 8 } }));
  return proxy;
}

function lbClient(p: RunningProxy): MongoClient {
  const c = new MongoClient(`${p.uri}?loadBalanced=true`, { retryReads: false, retryWrites: false });
  clients.push(c);
  return c;
}

/** Whether a recorded command's lsid is the session `id` (a UUID; the driver's own bson copy may hand a Binary). */
const hex = (b: { buffer: Uint8Array }) => Buffer.from(b.buffer).toString('hex');
const sameLsid = (a: unknown, id: { buffer: Uint8Array }) => hex((a as { id: { buffer: Uint8Array } }).id) === hex(id);

test('hello with loadBalanced: true is answered with a serviceId, the same for every connection of the process', async () => {
  const p = await start();
  const a = await RawClient.connect(p.port);
  const b = await RawClient.connect(p.port);
  raws.push(a, b);
  const ha = await a.hello({ loadBalanced: true });
  const hb = await b.hello({ loadBalanced: true });
  assert.ok(ha.serviceId instanceof ObjectId, 'serviceId is an ObjectId');
  assert.equal(ha.serviceId.toHexString(), hb.serviceId.toHexString());
  assert.equal(ha.msg, 'isdbgrid');
  assert.equal(ha.setName, undefined);
  assert.equal(ha.hosts, undefined);
  // A client that is not load-balanced gets none (a driver would otherwise see a service it did not ask for).
  const c = await RawClient.connect(p.port);
  raws.push(c);
  assert.equal((await c.hello()).serviceId, undefined);
});

test('the Node driver with loadBalanced=true: a transaction commits, all its statements on one upstream connection', async () => {
  const p = await start();
  const c = lbClient(p);
  const col = c.db('lb').collection<{ _id: number; v: string }>('txn');
  await col.insertOne({ _id: 0, v: 'before' });
  const session = c.startSession();
  const mark = engine.seen.length;
  try {
    session.startTransaction();
    await col.insertOne({ _id: 1, v: 'in txn' }, { session });
    // Other traffic meanwhile: it must not take the transaction's pinned connection.
    const other = lbClient(p);
    await Promise.all([1, 2, 3].map((i) => other.db('lb').collection('noise').insertOne({ i })));
    await col.updateOne({ _id: 0 }, { $set: { v: 'updated in txn' } }, { session });
    await session.commitTransaction();
  } finally {
    await session.endSession();
  }
  const txn = engine.seen.slice(mark).filter((s) => s.cmd.lsid !== undefined && sameLsid(s.cmd.lsid, session.id!.id) && s.cmd.txnNumber !== undefined);
  assert.deepEqual(txn.map((s) => s.name), ['insert', 'update', 'commitTransaction']);
  assert.equal(txn[0].cmd.startTransaction, true);
  assert.equal(new Set(txn.map((s) => s.conn)).size, 1, 'one upstream connection for the whole transaction');
  const noise = engine.seen.slice(mark).filter((s) => s.name === 'insert' && (s.cmd.insert as string) === 'noise');
  assert.equal(noise.length, 3);
  assert.ok(noise.every((s) => s.conn !== txn[0].conn), 'no other client used the pinned connection');
  assert.deepEqual(await col.find().sort({ _id: 1 }).toArray(), [{ _id: 0, v: 'updated in txn' }, { _id: 1, v: 'in txn' }]);
});

test('the Node driver with loadBalanced=true: two cursors read in turns, each with its getMores on its own upstream connection', async () => {
  const p = await start();
  const c1 = lbClient(p);
  const c2 = lbClient(p);
  await c1.db('lb').collection<{ _id: number }>('cur').insertMany(Array.from({ length: 10 }, (_, i) => ({ _id: i })));
  const mark = engine.seen.length;
  const k1 = c1.db('lb').collection<{ _id: number }>('cur').find({}, { batchSize: 3 }).sort({ _id: 1 });
  const k2 = c2.db('lb').collection<{ _id: number }>('cur').find({}, { batchSize: 3 }).sort({ _id: -1 });
  const got1: number[] = [];
  const got2: number[] = [];
  for (let i = 0; i < 10; i++) {
    got1.push((await k1.next())!._id);
    got2.push((await k2.next())!._id);
  }
  assert.equal(await k1.next(), null);
  assert.equal(await k2.next(), null);
  assert.deepEqual(got1, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
  assert.deepEqual(got2, [9, 8, 7, 6, 5, 4, 3, 2, 1, 0]);
  const reads = engine.seen.slice(mark).filter((s) => (s.name === 'find' || s.name === 'getMore') && (s.cmd.find === 'cur' || s.cmd.collection === 'cur'));
  const byCursor = new Map<number, Seen[]>();
  const findConn: number[] = [];
  for (const s of reads) {
    if (s.name === 'find') findConn.push(s.conn);
    else {
      const id = Number((s.cmd.getMore as Long).toBigInt());
      byCursor.set(id, [...(byCursor.get(id) ?? []), s]);
    }
  }
  assert.equal(findConn.length, 2);
  assert.notEqual(findConn[0], findConn[1], 'the second cursor did not get the first one\'s pinned connection');
  assert.equal(byCursor.size, 2);
  for (const getMores of byCursor.values()) {
    assert.ok(getMores.length >= 3, 'several getMore batches');
    assert.equal(new Set(getMores.map((s) => s.conn)).size, 1);
    assert.ok(findConn.includes(getMores[0].conn), 'getMores on the connection the cursor was opened on');
  }
});

test('a load-balanced client that closes mid-transaction and mid-cursor: abortTransaction and killCursors reach the upstream', async () => {
  const p = await start();
  const seed = lbClient(p);
  await seed.db('lb').collection<{ _id: number }>('gone').insertMany(Array.from({ length: 8 }, (_, i) => ({ _id: i })));
  const r = await RawClient.connect(p.port);
  raws.push(r);
  await r.hello({ loadBalanced: true });
  const lsid = { id: new UUID() };
  const txnNumber = Long.fromNumber(7);
  const ins = await r.roundTrip(opMsg({
    insert: 'gone', documents: [{ _id: 100 }], lsid, txnNumber, startTransaction: true, autocommit: false, $db: 'lb',
  }));
  assert.equal(ins.body!.ok, 1);
  const found = await r.roundTrip(opMsg({ find: 'gone', filter: {}, batchSize: 2, $db: 'lb' }));
  const cursorId = (found.body!.cursor as Document).id as Long;
  assert.ok(cursorId.toBigInt() !== 0n, 'a cursor is open');
  const mark = engine.seen.length;
  const before = { aborted: p.server.stats.lbTransactionsAborted, killed: p.server.stats.lbCursorsKilled };
  r.destroy(); // the client dies without ending anything

  await until('abortTransaction and killCursors upstream', () => {
    const names = engine.seen.slice(mark).map((s) => s.name);
    return names.includes('abortTransaction') && names.includes('killCursors');
  });
  const after = engine.seen.slice(mark);
  const abort = after.find((s) => s.name === 'abortTransaction')!;
  assert.ok(sameLsid(abort.cmd.lsid, lsid.id), 'the transaction\'s lsid');
  assert.equal(Number(abort.cmd.txnNumber), 7);
  assert.equal(abort.cmd.autocommit, false);
  const kill = after.find((s) => s.name === 'killCursors')!;
  assert.equal(kill.cmd.killCursors, 'gone');
  assert.equal(kill.cmd.$db, 'lb');
  assert.deepEqual((kill.cmd.cursors as Long[]).map((x) => x.toString()), [cursorId.toString()]);
  // Sent on the connection the client's statements used (it was still alive).
  const stmts = engine.seen.filter((s) => s.cmd.lsid !== undefined && sameLsid(s.cmd.lsid, lsid.id));
  assert.equal(abort.conn, stmts[0].conn);
  assert.equal(kill.conn, stmts[0].conn);
  assert.equal(p.server.stats.lbTransactionsAborted, before.aborted + 1);
  assert.equal(p.server.stats.lbCursorsKilled, before.killed + 1);
  // The cursor is gone upstream: a getMore through another client finds nothing.
  const other = await RawClient.connect(p.port);
  raws.push(other);
  const gm = await other.roundTrip(opMsg({ getMore: cursorId, collection: 'gone', $db: 'lb' }));
  assert.equal(gm.body!.ok, 0);
  assert.equal(gm.body!.codeName, 'CursorNotFound');
});

test('a load-balanced client that closes with nothing open sends nothing extra, and a non-load-balanced one is never cleaned up after', async () => {
  const p = await start();
  const lb = await RawClient.connect(p.port);
  const plain = await RawClient.connect(p.port);
  raws.push(lb, plain);
  await lb.hello({ loadBalanced: true });
  await plain.hello();
  await openCursor(plain);
  const ping = await lb.roundTrip(opMsg({ ping: 1, $db: 'admin' }));
  assert.equal(ping.body!.ok, 1);
  const mark = engine.seen.length;
  const open = p.server.clientCount;
  lb.destroy();
  plain.destroy();
  await until('both connections closed', () => p.server.clientCount === open - 2);
  await new Promise((r) => setTimeout(r, 200));
  assert.deepEqual(engine.seen.slice(mark).map((s) => s.name).filter((n) => n === 'killCursors' || n === 'abortTransaction'), []);
});

async function openCursor(r: RawClient): Promise<void> {
  const f = await r.roundTrip(opMsg({ find: 'gone', filter: {}, batchSize: 1, $db: 'lb' }));
  assert.ok(((f.body!.cursor as Document).id as Long).toBigInt() !== 0n);
}
