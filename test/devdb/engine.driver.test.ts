// End-to-end check of the devdb engine's reply shapes with the official Node
// driver, through the devdb wire server.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Decimal128, MongoClient, MongoServerError, ObjectId } from 'mongodb';
import { DevDbServer } from '../../runtime/devdb/server.ts';

describe('devdb engine via the Node driver', () => {
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

  it('CRUD, cursors, indexes and aggregation', async () => {
    const db = client.db('drv');
    const c = db.collection('items');
    const ins = await c.insertMany(Array.from({ length: 1000 }, (_, i) => ({ i, even: i % 2 === 0, price: Decimal128.fromString(`${i}.25`) })));
    assert.equal(ins.insertedCount, 1000);
    const anId = ins.insertedIds[7] as ObjectId;
    const one = await c.findOne({ _id: anId });
    assert.equal(one?.i, 7);
    assert.ok(one?.price instanceof Decimal128);
    assert.equal(await c.countDocuments({ even: true }), 500);
    assert.equal(await c.estimatedDocumentCount(), 1000);
    const all = await c.find({}, { batchSize: 33 }).sort({ i: -1 }).toArray();
    assert.equal(all.length, 1000);
    assert.equal(all[0].i, 999);
    const upd = await c.updateMany({ i: { $lt: 10 } }, { $set: { small: true } });
    assert.equal(upd.matchedCount, 10);
    assert.equal(upd.modifiedCount, 10);
    const ups = await c.updateOne({ i: -1 }, { $set: { neg: true } }, { upsert: true });
    assert.ok(ups.upsertedId instanceof ObjectId);
    const fam = await c.findOneAndUpdate({ i: 3 }, { $inc: { i: 1000 } }, { returnDocument: 'after' });
    assert.equal(fam?.i, 1003);
    const del = await c.deleteMany({ even: false });
    assert.equal(del.deletedCount, 500);
    assert.deepEqual((await c.distinct('small')).sort(), [true]);

    await c.createIndex({ i: 1 }, { unique: true });
    const idx = await c.indexes();
    assert.deepEqual(idx.map((x) => x.name), ['_id_', 'i_1']);
    await assert.rejects(c.insertOne({ i: 0 }), (err: unknown) => {
      assert.ok(err instanceof MongoServerError);
      assert.equal(err.code, 11000);
      assert.deepEqual(err.keyValue, { i: 0 });
      return true;
    });
    await assert.rejects(c.insertMany([{ i: 5000 }, { i: 5000 }]), (err: any) => err.code === 11000 && err.result?.insertedCount === 1);

    const groups = await c.aggregate([{ $match: { small: true } }, { $group: { _id: '$even', n: { $sum: 1 } } }]).toArray();
    assert.deepEqual(groups, [{ _id: true, n: 5 }]);
    const names = (await db.listCollections().toArray()).map((x) => x.name);
    assert.deepEqual(names, ['items']);
    const dbs = await client.db('admin').admin().listDatabases();
    assert.ok(dbs.databases.some((d) => d.name === 'drv'));
    await assert.rejects(db.command({ noSuchThing: 1 }), (err: any) => err.code === 59 && err.codeName === 'CommandNotFound');
    await c.rename('renamed');
    assert.equal(await db.collection('renamed').countDocuments(), 502); // 500 even + upsert + first i:5000
    assert.equal(await db.collection('renamed').drop(), true);
  });

  it('sessions and transactions are accepted (no isolation)', async () => {
    const c = client.db('drv').collection('tx');
    const session = client.startSession();
    try {
      await session.withTransaction(async () => {
        await c.insertOne({ a: 1 }, { session });
      });
    } finally {
      await session.endSession();
    }
    assert.equal(await c.countDocuments(), 1);
  });
});
