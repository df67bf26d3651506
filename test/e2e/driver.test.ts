// End to end: the official `mongodb` Node driver → proxy → devdb, all over real TCP.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { MongoClient, MongoServerError, type Db } from 'mongodb';
import { startStack, withTimeout, type Stack } from '../helpers/stack.ts';

const T = { timeout: 60_000 };

describe('mongodb driver through the proxy', () => {
  let stack: Stack;
  let client: MongoClient;
  let db: Db;

  before(async () => {
    stack = await startStack();
    client = new MongoClient(stack.uri, { serverSelectionTimeoutMS: 5000, connectTimeoutMS: 5000 });
    await client.connect();
    db = client.db('e2e_driver');
  });

  after(async () => {
    await client?.close();
    await stack?.close();
  });

  test('CRUD round trip', T, async () => {
    const c = db.collection('crud');
    const one = await c.insertOne({ _id: 1 as never, name: 'a', n: 1, tags: ['x'] });
    assert.equal(one.acknowledged, true);
    assert.equal(one.insertedId, 1);
    const many = await c.insertMany([
      { _id: 2 as never, name: 'b', n: 2 }, { _id: 3 as never, name: 'c', n: 3 }, { _id: 4 as never, name: 'd', n: 4 }, { _id: 5 as never, name: 'b', n: 5 },
    ]);
    assert.equal(many.insertedCount, 4);

    const found = await c.find({ n: { $gte: 2 } }, { sort: { n: -1 }, projection: { _id: 0, name: 1, n: 1 } }).toArray();
    assert.deepEqual(found, [{ name: 'b', n: 5 }, { name: 'd', n: 4 }, { name: 'c', n: 3 }, { name: 'b', n: 2 }]);
    assert.deepEqual(await c.findOne({ _id: 1 as never }), { _id: 1, name: 'a', n: 1, tags: ['x'] });

    const u1 = await c.updateOne({ _id: 2 as never }, { $set: { name: 'bb' }, $inc: { n: 10 } });
    assert.equal(u1.matchedCount, 1);
    assert.equal(u1.modifiedCount, 1);
    assert.deepEqual(await c.findOne({ _id: 2 as never }), { _id: 2, name: 'bb', n: 12 });

    const um = await c.updateMany({ n: { $lt: 5 } }, { $set: { small: true } });
    assert.equal(um.matchedCount, 3); // 1, 3, 4
    assert.equal(um.modifiedCount, 3);

    const ups = await c.updateOne({ _id: 99 as never }, { $set: { name: 'up' } }, { upsert: true });
    assert.equal(ups.upsertedCount, 1);
    assert.equal(ups.upsertedId, 99);

    const r = await c.replaceOne({ _id: 3 as never }, { name: 'replaced', n: 33 });
    assert.equal(r.modifiedCount, 1);
    assert.deepEqual(await c.findOne({ _id: 3 as never }), { _id: 3, name: 'replaced', n: 33 });

    const fau = await c.findOneAndUpdate({ _id: 4 as never }, { $inc: { n: 100 } }, { returnDocument: 'after' });
    assert.equal(fau?.n, 104);
    const before = await c.findOneAndUpdate({ _id: 4 as never }, { $inc: { n: 1 } }, { returnDocument: 'before' });
    assert.equal(before?.n, 104);

    assert.equal(await c.countDocuments({}), 6);
    assert.equal(await c.countDocuments({ small: true }), 2); // 1 and 4 (3 was replaced)
    assert.equal(await c.estimatedDocumentCount(), 6);
    assert.deepEqual((await c.distinct('name')).sort(), ['a', 'b', 'bb', 'd', 'replaced', 'up']);

    const d1 = await c.deleteOne({ _id: 1 as never });
    assert.equal(d1.deletedCount, 1);
    const dm = await c.deleteMany({ n: { $gte: 0 } });
    assert.equal(dm.deletedCount, 4);
    assert.equal(await c.countDocuments({}), 1); // only the upserted one, without n
  });

  test('cursor over many getMore batches sees every document exactly once', T, async () => {
    const c = db.collection('cursor');
    const N = 5000;
    await c.insertMany(Array.from({ length: N }, (_, i) => ({ _id: i as never, v: i * 2 })));
    const seen = new Set<number>();
    let count = 0;
    for await (const d of c.find({}, { batchSize: 7, sort: { _id: 1 } })) {
      const id = d._id as unknown as number;
      assert.equal(d.v, id * 2);
      assert.ok(!seen.has(id), `duplicate ${id}`);
      seen.add(id);
      count++;
    }
    assert.equal(count, N);
    assert.equal(seen.size, N);
    // An aggregate cursor with small batches too.
    const agg = await c.aggregate([{ $match: { v: { $gte: 9000 } } }], { cursor: { batchSize: 3 } }).toArray();
    assert.equal(agg.length, 500);
    // Closing a cursor early (killCursors) leaves the connection usable.
    const cur = c.find({}, { batchSize: 5 });
    await cur.next();
    await cur.next();
    await cur.close();
    assert.equal(await c.countDocuments({}), N);
  });

  test('bulk insert larger than maxWriteBatchSize is split by the driver and fully applied', { timeout: 120_000 }, async () => {
    const c = db.collection('bulk');
    const hello = await db.admin().command({ hello: 1 });
    const N = hello.maxWriteBatchSize + 20_000;
    const docs = Array.from({ length: N }, (_, i) => ({ i }));
    const res = await c.insertMany(docs, { ordered: false });
    assert.equal(res.insertedCount, N);
    assert.equal(await c.countDocuments({}), N);
    assert.equal(await c.countDocuments({ i: { $gte: N - 10 } }), 10);
  });

  test('documents totalling more than maxMessageSizeBytes are split across messages', { timeout: 120_000 }, async () => {
    const c = db.collection('bigdocs');
    const big = 'x'.repeat(1024 * 1024); // 1 MiB strings; 60 docs ≈ 60 MiB > 48 MB
    const docs = Array.from({ length: 60 }, (_, i) => ({ _id: i as never, s: big }));
    const res = await c.bulkWrite(docs.map((d) => ({ insertOne: { document: d } })));
    assert.equal(res.insertedCount, 60);
    assert.equal(await c.countDocuments({}), 60);
    const one = await c.findOne({ _id: 59 as never });
    assert.equal(one?.s.length, big.length);
  });

  test('aggregation: $match / $group / $sort', T, async () => {
    const c = db.collection('agg');
    await c.insertMany([
      { k: 'a', v: 1 }, { k: 'b', v: 2 }, { k: 'a', v: 3 }, { k: 'c', v: 4 }, { k: 'b', v: 5 }, { k: 'a', v: 6 }, { k: 'z', v: -1 },
    ]);
    const out = await c.aggregate([
      { $match: { v: { $gt: 0 } } },
      { $group: { _id: '$k', total: { $sum: '$v' }, n: { $sum: 1 } } },
      { $sort: { total: -1 } },
    ]).toArray();
    assert.deepEqual(out, [{ _id: 'a', total: 10, n: 3 }, { _id: 'b', total: 7, n: 2 }, { _id: 'c', total: 4, n: 1 }]);
  });

  test('duplicate key on a unique index arrives as MongoServerError 11000 with its message', T, async () => {
    const c = db.collection('uniq');
    await c.createIndex({ email: 1 }, { unique: true });
    const idx = await c.listIndexes().toArray();
    assert.ok(idx.some((i) => i.unique === true && i.key.email === 1), JSON.stringify(idx));
    await c.insertOne({ email: 'a@example.com' });
    const err = await c.insertOne({ email: 'a@example.com' }).then(() => null, (e: unknown) => e);
    assert.ok(err instanceof MongoServerError, `expected MongoServerError, got ${String(err)}`);
    assert.equal(err.code, 11000);
    assert.match(err.message, /duplicate key/i);
    assert.match(err.message, /a@example\.com|email/);
    assert.equal(await c.countDocuments({}), 1);
  });

  test('unknown command → code 59 (CommandNotFound)', T, async () => {
    const err = await db.command({ noSuchCommandHere: 1 }).then(() => null, (e: unknown) => e);
    assert.ok(err instanceof MongoServerError, `expected MongoServerError, got ${String(err)}`);
    assert.equal(err.code, 59);
    assert.equal(err.codeName, 'CommandNotFound');
    assert.match(err.message, /noSuchCommandHere/);
  });

  test('the proxy answers hello as a mongos', T, async () => {
    const h = await db.admin().command({ hello: 1 });
    assert.equal(h.msg, 'isdbgrid');
    assert.equal(h.isWritablePrimary, true);
    assert.equal(h.setName, undefined);
    assert.equal(h.hosts, undefined);
    assert.equal(h.primary, undefined);
    assert.ok(h.maxWireVersion >= 9, `maxWireVersion ${h.maxWireVersion}`);
    assert.equal(typeof h.connectionId, 'number');
    assert.equal(typeof h.logicalSessionTimeoutMinutes, 'number');
    assert.ok(h.localTime instanceof Date);
    assert.equal(h.maxBsonObjectSize, 16777216);
    assert.equal(h.maxMessageSizeBytes, 48000000);
    assert.equal(h.maxWriteBatchSize, 100000);
    assert.equal(h.ok, 1);
    const legacy = await db.admin().command({ isMaster: 1 });
    assert.equal(legacy.ismaster, true);
    assert.equal(legacy.msg, 'isdbgrid');
  });

  test('sessions and a transaction with withTransaction are accepted', T, async () => {
    const c = db.collection('txn');
    await c.insertOne({ _id: 'seed' as never });
    const session = client.startSession();
    try {
      await session.withTransaction(async () => {
        await c.insertOne({ _id: 't1' as never, v: 1 }, { session });
        await c.updateOne({ _id: 'seed' as never }, { $set: { touched: true } }, { session });
      });
      // A causally consistent read within the same session.
      const got = await c.find({}, { session, sort: { _id: 1 } }).toArray();
      assert.deepEqual(got.map((d) => d._id), ['seed', 't1']);
    } finally {
      await session.endSession();
    }
    assert.equal((await c.findOne({ _id: 'seed' as never }))?.touched, true);
  });

  test('50 concurrent clients, each inserting and reading its own documents', { timeout: 120_000 }, async () => {
    const clients = Array.from({ length: 50 }, () => new MongoClient(stack.uri, { serverSelectionTimeoutMS: 10_000, maxPoolSize: 4 }));
    try {
      await withTimeout(Promise.all(clients.map(async (cl, k) => {
        const c = cl.db('e2e_driver').collection('concurrent');
        for (let round = 0; round < 5; round++) {
          await c.insertMany(Array.from({ length: 20 }, (_, i) => ({ client: k, round, i })));
          const mine = await c.find({ client: k, round }, { batchSize: 6 }).toArray();
          assert.equal(mine.length, 20, `client ${k} round ${round}`);
          assert.deepEqual(mine.map((d) => d.i).sort((a, b) => a - b), Array.from({ length: 20 }, (_, i) => i));
        }
        assert.equal(await c.countDocuments({ client: k }), 100);
      })), 100_000, '50 concurrent clients');
      const total = await db.collection('concurrent').countDocuments({});
      assert.equal(total, 5000);
    } finally {
      await Promise.all(clients.map((c) => c.close()));
    }
  });

  test('appName query parameters (proxy_profile=true) are parsed into the connection metadata', T, async () => {
    const cl = new MongoClient(stack.uri, { appName: 'e2e-app?proxy_profile=true&x=1', serverSelectionTimeoutMS: 5000 });
    try {
      await cl.db('admin').command({ ping: 1 });
      const clients = [...stack.proxy.server.connections()];
      const mine = clients.filter((c) => c.metadata.appName === 'e2e-app');
      assert.ok(mine.length > 0, `no connection with appName e2e-app among ${clients.map((c) => c.metadata.appName).join(',')}`);
      for (const c of mine) {
        assert.deepEqual({ ...c.metadata.appParams }, { proxy_profile: 'true', x: '1' });
        assert.match(c.metadata.driver, /nodejs/);
      }
    } finally {
      await cl.close();
    }
  });
});
