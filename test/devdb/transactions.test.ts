// Transactions in devdb: abortTransaction undoes the transaction's inserts, updates, deletes,
// findAndModify and the collections it created (newest first); commitTransaction keeps them; the
// session's state answers as mongod's does (NoSuchTransaction, TransactionTooOld,
// TransactionCommitted); reads are not isolated. Engine cases, then the real Node driver
// (withTransaction whose callback throws, abortTransaction) against devdb directly and through
// the proxy.
import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, it } from 'node:test';
import { BSON, UUID, type Document } from 'bson';
import { MongoClient, type Collection } from 'mongodb';
import { DevEngine } from '../../runtime/devdb/engine/index.ts';
import { DevDbServer } from '../../runtime/devdb/server.ts';
import { parseConfig } from '../../runtime/config/index.ts';
import { startProxy, type RunningProxy } from '../../runtime/app/serve.ts';
import { Logger } from '../../runtime/log/index.ts';

describe('devdb transactions (engine)', () => {
  let e: DevEngine;
  let clock = 0;
  const run = (cmd: Document) => BSON.deserialize(BSON.serialize(e.run({ ...cmd, $db: cmd.$db ?? 'tx' })));
  const docs = (coll: string) => (run({ find: coll, filter: {}, sort: { _id: 1 } }).cursor?.firstBatch ?? []) as Document[];
  const collections = () => (run({ listCollections: 1 }).cursor.firstBatch as Document[]).map((c) => c.name).sort();
  /** A transaction's statement: the first one starts it. */
  const txn = (s: UUID, n: number, cmd: Document, start = false) =>
    run({ ...cmd, lsid: { id: s }, txnNumber: n, autocommit: false, ...(start ? { startTransaction: true } : {}) });
  const end = (s: UUID, n: number, how: 'commitTransaction' | 'abortTransaction') =>
    run({ [how]: 1, lsid: { id: s }, txnNumber: n, autocommit: false, $db: 'admin' });

  beforeEach(() => {
    clock = 1_000_000;
    e = new DevEngine({ now: () => clock, maxRetryableSessions: 3 });
    run({ insert: 'c', documents: [{ _id: 1, v: 'a' }, { _id: 2, v: 'b' }, { _id: 3, v: 'c' }] });
    run({ createIndexes: 'c', indexes: [{ key: { v: 1 }, name: 'v_1', unique: true }] });
  });

  it('abortTransaction undoes inserts, updates, deletes, findAndModify, upserts and a created collection', () => {
    const s = new UUID();
    assert.equal(txn(s, 1, { insert: 'c', documents: [{ _id: 4, v: 'd' }] }, true).n, 1);
    assert.equal(txn(s, 1, { update: 'c', updates: [{ q: { _id: 1 }, u: { $set: { v: 'a2' } } }, { q: { _id: 4 }, u: { $set: { v: 'd2' } } }] }).nModified, 2);
    assert.equal(txn(s, 1, { update: 'c', updates: [{ q: { _id: 9 }, u: { $set: { v: 'up' } }, upsert: true }] }).upserted.length, 1);
    assert.equal(txn(s, 1, { delete: 'c', deletes: [{ q: { _id: 2 }, limit: 1 }] }).n, 1);
    assert.equal(txn(s, 1, { findAndModify: 'c', query: { _id: 3 }, update: { $set: { v: 'c2' } } }).ok, 1);
    assert.equal(txn(s, 1, { findAndModify: 'c', query: { _id: 1 }, remove: true }).ok, 1);
    assert.equal(txn(s, 1, { insert: 'created', documents: [{ _id: 1 }] }).n, 1);
    // Not isolated: a read outside the transaction sees its writes before it ends.
    assert.deepEqual(docs('c').map((d) => [d._id, d.v]), [[3, 'c2'], [4, 'd2'], [9, 'up']]);
    assert.deepEqual(collections(), ['c', 'created']);
    assert.deepEqual(end(s, 1, 'abortTransaction'), { ok: 1 });
    assert.deepEqual(docs('c').map((d) => [d._id, d.v]), [[1, 'a'], [2, 'b'], [3, 'c']]);
    assert.deepEqual(collections(), ['c']);
    assert.equal(e.openTransactions, 0);
    // The unique index holds the restored values again, and no longer the undone ones.
    assert.equal(run({ insert: 'c', documents: [{ _id: 5, v: 'a' }] }).writeErrors?.[0].code, 11000);
    assert.equal(run({ insert: 'c', documents: [{ _id: 5, v: 'd2' }] }).n, 1);
  });

  it('commitTransaction keeps the writes; a retried commit answers ok; abort after commit is TransactionCommitted', () => {
    const s = new UUID();
    txn(s, 1, { insert: 'c', documents: [{ _id: 4, v: 'd' }] }, true);
    txn(s, 1, { delete: 'c', deletes: [{ q: { _id: 1 }, limit: 1 }] });
    assert.deepEqual(end(s, 1, 'commitTransaction'), { ok: 1 });
    assert.deepEqual(end(s, 1, 'commitTransaction'), { ok: 1 });
    assert.equal(end(s, 1, 'abortTransaction').codeName, 'TransactionCommitted');
    assert.deepEqual(docs('c').map((d) => d._id), [2, 3, 4]);
  });

  it('after an abort: statements and commit are NoSuchTransaction (labelled transient); the next transaction runs', () => {
    const s = new UUID();
    txn(s, 1, { insert: 'c', documents: [{ _id: 4, v: 'd' }] }, true);
    end(s, 1, 'abortTransaction');
    for (const r of [txn(s, 1, { insert: 'c', documents: [{ _id: 5, v: 'e' }] }), end(s, 1, 'commitTransaction')]) {
      assert.equal(r.code, 251);
      assert.equal(r.codeName, 'NoSuchTransaction');
      assert.deepEqual(r.errorLabels, ['TransientTransactionError']);
    }
    assert.equal(txn(s, 0, { insert: 'c', documents: [{ _id: 6, v: 'f' }] }, true).codeName, 'TransactionTooOld');
    assert.equal(txn(s, 2, { insert: 'c', documents: [{ _id: 7, v: 'g' }] }, true).n, 1);
    assert.deepEqual(end(s, 2, 'commitTransaction'), { ok: 1 });
    assert.deepEqual(docs('c').map((d) => d._id), [1, 2, 3, 7]);
  });

  it('a statement of a transaction never started is NoSuchTransaction and writes nothing', () => {
    const r = txn(new UUID(), 1, { insert: 'c', documents: [{ _id: 4, v: 'd' }] });
    assert.equal(r.codeName, 'NoSuchTransaction');
    assert.deepEqual(docs('c').map((d) => d._id), [1, 2, 3]);
  });

  it('an open transaction is aborted by a newer one on its session, by endSessions, and after 60 s without a command', () => {
    const [a, b, c] = [new UUID(), new UUID(), new UUID()];
    txn(a, 1, { insert: 'c', documents: [{ _id: 10, v: 'x' }] }, true);
    txn(a, 2, { insert: 'c', documents: [{ _id: 11, v: 'y' }] }, true);
    assert.deepEqual(docs('c').map((d) => d._id), [1, 2, 3, 11], 'txn 1 aborted when txn 2 started');
    run({ endSessions: [{ id: a }], $db: 'admin' });
    assert.deepEqual(docs('c').map((d) => d._id), [1, 2, 3]);
    txn(b, 1, { insert: 'c', documents: [{ _id: 12, v: 'z' }] }, true);
    clock += 30_000;
    txn(c, 1, { update: 'c', updates: [{ q: { _id: 1 }, u: { $set: { w: 1 } } }] }, true);
    clock += 31_000; // b idle 61 s, c 31 s
    assert.deepEqual(docs('c').map((d) => [d._id, d.w]), [[1, 1], [2, undefined], [3, undefined]]);
    assert.equal(end(b, 1, 'commitTransaction').codeName, 'NoSuchTransaction');
    assert.deepEqual(end(c, 1, 'commitTransaction'), { ok: 1 });
  });

  it('open transactions are bounded: the least recently used is aborted', () => {
    const sessions = [new UUID(), new UUID(), new UUID(), new UUID()];
    sessions.forEach((s, i) => txn(s, 1, { insert: 'c', documents: [{ _id: 20 + i, v: `t${i}` }] }, true));
    assert.equal(e.openTransactions, 3);
    assert.deepEqual(docs('c').map((d) => d._id), [1, 2, 3, 21, 22, 23]);
  });

  it('a document another session wrote since is left as that session wrote it', () => {
    const s = new UUID();
    txn(s, 1, { update: 'c', updates: [{ q: { _id: 1 }, u: { $set: { v: 'mine' } } }] }, true);
    run({ update: 'c', updates: [{ q: { _id: 1 }, u: { $set: { v: 'theirs' } } }] });
    end(s, 1, 'abortTransaction');
    assert.equal(docs('c')[0].v, 'theirs');
  });

  it('DDL an abort could not undo is refused inside a transaction', () => {
    const s = new UUID();
    txn(s, 1, { find: 'c', filter: {} }, true);
    for (const cmd of [{ drop: 'c' }, { dropDatabase: 1 }, { dropIndexes: 'c', index: 'v_1' }]) {
      assert.equal(txn(s, 1, cmd).codeName, 'OperationNotSupportedInTransaction');
    }
    assert.deepEqual(collections(), ['c']);
  });
});

/** The driver's two ways to abort, against a connection string; the collection ends as it began. */
async function abortsThroughDriver(uri: string): Promise<void> {
  const client = new MongoClient(uri, { serverSelectionTimeoutMS: 10_000 });
  try {
    const c: Collection = client.db('txdrv').collection('items');
    await c.deleteMany({});
    await c.insertMany([{ _id: 1 as never, n: 1 }, { _id: 2 as never, n: 2 }]);
    const before = await c.find({}, { sort: { _id: 1 } }).toArray();
    const session = client.startSession();
    try {
      await assert.rejects(session.withTransaction(async () => {
        await c.insertOne({ _id: 3 as never, n: 3 }, { session });
        await c.updateOne({ _id: 1 as never }, { $inc: { n: 10 } }, { session });
        await c.deleteOne({ _id: 2 as never }, { session });
        await client.db('txdrv').collection('made_in_txn').insertOne({ x: 1 }, { session });
        throw new Error('the application changed its mind');
      }), /changed its mind/);
      assert.deepEqual(await c.find({}, { sort: { _id: 1 } }).toArray(), before, 'withTransaction whose callback threw kept nothing');
      assert.equal(await client.db('txdrv').listCollections({ name: 'made_in_txn' }).hasNext(), false);

      session.startTransaction();
      await c.insertOne({ _id: 4 as never, n: 4 }, { session });
      await c.findOneAndUpdate({ _id: 2 as never }, { $set: { n: 20 } }, { session });
      await session.abortTransaction();
      assert.deepEqual(await c.find({}, { sort: { _id: 1 } }).toArray(), before, 'abortTransaction kept nothing');

      await session.withTransaction(async () => {
        await c.insertOne({ _id: 5 as never, n: 5 }, { session });
      });
      assert.deepEqual((await c.find({}, { sort: { _id: 1 } }).toArray()).map((d) => d._id), [1, 2, 5], 'a committed transaction stays');
    } finally {
      await session.endSession();
    }
  } finally {
    await client.close();
  }
}

describe('devdb transactions through the Node driver', () => {
  let server: DevDbServer;
  let proxy: RunningProxy;
  before(async () => {
    server = new DevDbServer();
    proxy = await startProxy(parseConfig({ listen: '127.0.0.1:0', devdb: { port: 0 } }, null),
      { log: new Logger('proxy', 'warn', 'json', { write: () => {} }) });
  });
  after(async () => {
    await proxy?.close();
    await server?.close();
  });

  it('directly: withTransaction whose callback throws, and abortTransaction, keep nothing; commit keeps', async () => {
    const { uri } = await server.listen();
    await abortsThroughDriver(uri);
  });

  it('through the proxy (embedded devdb): the same', async () => {
    await abortsThroughDriver(proxy.uri);
  });
});
