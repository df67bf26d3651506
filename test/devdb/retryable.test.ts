// Retryable writes in devdb: a write resent with the same (lsid, txnNumber) gets the first reply
// back and is not applied twice; an older txnNumber is refused with TransactionTooOld (225).
// Engine-level cases (bounds, expiry, endSessions, transactions) and the same through the real
// Node driver against a DevDbServer.
import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, it } from 'node:test';
import { BSON, Long, UUID, type Document } from 'bson';
import { MongoClient, MongoServerError } from 'mongodb';
import { DevEngine } from '../../runtime/devdb/engine/index.ts';
import { DevDbServer } from '../../runtime/devdb/server.ts';

describe('devdb retryable writes (engine)', () => {
  let e: DevEngine;
  let clock = 0;
  const run = (cmd: Document) => BSON.deserialize(BSON.serialize(e.run({ ...cmd, $db: cmd.$db ?? 'rw' })));
  const count = (coll: string) => (run({ find: coll, filter: {} }).cursor.firstBatch as Document[]).length;
  const insert = (lsid: UUID, txn: number | Long, doc: Document, extra: Document = {}) =>
    run({ insert: 'c', documents: [doc], lsid: { id: lsid }, txnNumber: txn, ...extra });

  beforeEach(() => {
    clock = 1_000_000;
    e = new DevEngine({ now: () => clock, maxRetryableSessions: 3, sessionTimeoutMs: 60_000 });
  });

  it('a retried insert returns the first reply and inserts once', () => {
    const s = new UUID();
    const first = insert(s, Long.fromNumber(1), { _id: 1 });
    assert.deepEqual(first, { n: 1, ok: 1 });
    const again = insert(s, Long.fromNumber(1), { _id: 1 });
    assert.deepEqual(again, first);
    assert.equal(count('c'), 1);
    // the txnNumber may arrive promoted to a JS number: same session record
    assert.deepEqual(insert(s, 1, { _id: 1 }), first);
  });

  it('an older txnNumber is TransactionTooOld; a newer one runs and replaces the record', () => {
    const s = new UUID();
    assert.equal(insert(s, 5, { _id: 1 }).n, 1);
    const old = insert(s, 4, { _id: 2 });
    assert.equal(old.ok, 0);
    assert.equal(old.code, 225);
    assert.equal(old.codeName, 'TransactionTooOld');
    assert.equal(count('c'), 1);
    assert.deepEqual(insert(s, 6, { _id: 2 }), { n: 1, ok: 1 });
    assert.equal(count('c'), 2);
    assert.equal(insert(s, 5, { _id: 3 }).code, 225);
    // another session has its own txnNumbers
    assert.deepEqual(insert(new UUID(), 1, { _id: 3 }), { n: 1, ok: 1 });
  });

  it('update, delete and findAndModify are applied once', () => {
    const s = new UUID();
    run({ insert: 'c', documents: [{ _id: 1, v: 0 }, { _id: 2 }] });
    const upd = { update: 'c', updates: [{ q: { _id: 1 }, u: { $inc: { v: 1 } } }], lsid: { id: s } };
    assert.deepEqual(run({ ...upd, txnNumber: 1 }), run({ ...upd, txnNumber: 1 }));
    const fam = { findAndModify: 'c', query: { _id: 1 }, update: { $inc: { v: 10 } }, new: true, lsid: { id: s } };
    const f1 = run({ ...fam, txnNumber: 2 });
    assert.equal(f1.value.v, 11);
    assert.deepEqual(run({ ...fam, txnNumber: 2 }), f1);
    assert.equal(run({ find: 'c', filter: { _id: 1 } }).cursor.firstBatch[0].v, 11);
    const del = { delete: 'c', deletes: [{ q: {}, limit: 1 }], lsid: { id: s } };
    assert.equal(run({ ...del, txnNumber: 3 }).n, 1);
    assert.equal(run({ ...del, txnNumber: 3 }).n, 1);
    assert.equal(count('c'), 1);
  });

  it('without txnNumber, or inside a transaction (autocommit: false), writes run every time', () => {
    const s = new UUID();
    assert.equal(run({ insert: 'c', documents: [{ _id: 1 }], lsid: { id: s } }).n, 1);
    assert.equal(run({ insert: 'c', documents: [{ _id: 1 }], lsid: { id: s } }).writeErrors[0].code, 11000);
    const txn = { insert: 'c', documents: [{ _id: 2 }], lsid: { id: s }, txnNumber: 9, autocommit: false };
    assert.equal(run({ ...txn, startTransaction: true }).n, 1);
    assert.equal(run(txn).writeErrors[0].code, 11000);
  });

  it('a command that failed as a whole is run again on retry', () => {
    const s = new UUID();
    const bad = run({ insert: 'c', lsid: { id: s }, txnNumber: 1 }); // no documents
    assert.equal(bad.ok, 0);
    assert.deepEqual(insert(s, 1, { _id: 1 }), { n: 1, ok: 1 });
    assert.equal(count('c'), 1);
  });

  it('endSessions forgets the record: the same txnNumber then runs again', () => {
    const s = new UUID();
    insert(s, 1, { _id: 1 });
    assert.equal(run({ endSessions: [{ id: s }], $db: 'admin' }).ok, 1);
    assert.equal(insert(s, 1, { _id: 1 }).writeErrors[0].code, 11000);
  });

  it('remembers at most maxRetryableSessions sessions (least recently used forgotten) and expires idle ones', () => {
    const [a, b, c, d] = [new UUID(), new UUID(), new UUID(), new UUID()];
    insert(a, 1, { _id: 'a' });
    insert(b, 1, { _id: 'b' });
    insert(c, 1, { _id: 'c' });
    assert.deepEqual(insert(a, 1, { _id: 'a' }), { n: 1, ok: 1 }); // a is now the most recent
    insert(d, 1, { _id: 'd' }); // 4 sessions > 3: b, the least recently used, is forgotten
    assert.equal(insert(b, 1, { _id: 'b' }).writeErrors?.[0].code, 11000);
    assert.deepEqual(insert(a, 1, { _id: 'a' }), { n: 1, ok: 1 });
    clock += 60_001;
    assert.equal(insert(a, 1, { _id: 'a' }).writeErrors?.[0].code, 11000);
  });
});

describe('devdb retryable writes (Node driver)', () => {
  let server: DevDbServer;
  let client: MongoClient;

  before(async () => {
    server = new DevDbServer();
    const { uri } = await server.listen();
    client = new MongoClient(uri, { serverSelectionTimeoutMS: 3000 });
    await client.connect();
  });
  after(async () => {
    await client?.close();
    await server?.close();
  });

  it('an insert resent with the same lsid and txnNumber is applied once; an older txnNumber gets 225', async () => {
    const db = client.db('retry');
    // The driver sets `lsid` from the session it uses, so an explicit session pins the lsid.
    const session = client.startSession();
    try {
      const cmd = (txn: number, id: number) => ({
        insert: 'items', documents: [{ _id: id }], lsid: { id: session.id!.id }, txnNumber: Long.fromNumber(txn),
      });
      const first = await db.command(cmd(7, 1), { session });
      assert.equal(first.n, 1);
      const second = await db.command(cmd(7, 1), { session });
      assert.equal(second.ok, 1);
      assert.equal(second.n, 1);
      assert.equal(second.writeErrors, undefined);
      assert.equal(await db.collection('items').countDocuments(), 1);

      await assert.rejects(db.command(cmd(6, 2), { session }), (err: unknown) => {
        assert.ok(err instanceof MongoServerError);
        assert.equal(err.code, 225);
        assert.equal(err.codeName, 'TransactionTooOld');
        return true;
      });
      assert.equal((await db.command(cmd(8, 2), { session })).n, 1);
      assert.deepEqual((await db.collection('items').find().sort({ _id: 1 }).toArray()).map((d) => d._id), [1, 2]);
    } finally {
      await session.endSession();
    }
  });
});
