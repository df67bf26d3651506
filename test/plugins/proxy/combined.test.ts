// All eight built-ins in one pipeline with permissive configs: CRUD, cursors (firstBatch +
// getMore), aggregate, count/distinct and cache invalidation all behave as without the proxy.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { MongoClient } from 'mongodb';
import { DevDbServer } from '../../../runtime/devdb/index.ts';
import { startPipelineProxy, metricValue, type Doc } from './_proxy.ts';

// Second devdbs are closed here, so a proxy that fails to start cannot keep the process alive.
const seconds: DevDbServer[] = [];
after(async () => { for (const s of seconds) await s.close(); });

const PID = 'px_all8';

test('all eight built-ins (permissive): CRUD and cursors are correct', { timeout: 90_000 }, async () => {
  const second = new DevDbServer();
  seconds.push(second);
  const { uri: secondUri } = await second.listen(0);
  const p = await startPipelineProxy({
    id: PID,
    request: ['logging', 'metrics', 'rate_limit', 'auth', 'filter', 'transform', 'route', 'cache'],
    response: ['cache', 'transform', 'metrics', 'logging'],
    steps: {
      logging: { config: { sample_rate: 1 } },
      metrics: { config: {} },
      rate_limit: { config: { max_rps: 100000 } },
      auth: { config: { provider: 'static', dbs: { '*': 'readWrite' } } },
      filter: { config: { rules: [{ name: 'never', action: 'deny', collections: ['does_not_exist_*'] }], default: 'allow' } },
      transform: { config: { request: [{ op: 'unset', path: 'nonexistent_field' }], response: [{ op: 'unset', path: 'nonexistent_field' }] } },
      route: { config: { rules: [{ dbs: ['archive'], upstream: secondUri }] } },
      cache: { config: { ttl_ms: 60000 } },
    },
  });
  const d2 = new MongoClient(secondUri, { directConnection: true });
  try {
    await d2.connect();
    const client = await p.client();
    const coll = client.db('app').collection<Doc>('crud');
    const docs = Array.from({ length: 25 }, (_, i) => ({ _id: i, n: i, tag: i % 3 === 0 ? 'x' : 'y' }));
    assert.equal((await coll.insertMany(docs as never[])).insertedCount, 25);
    assert.deepEqual(await coll.find({}).sort({ _id: 1 }).toArray(), docs);
    assert.deepEqual(await coll.find({}, { batchSize: 4 }).sort({ _id: 1 }).toArray(), docs);
    assert.deepEqual(await coll.find({ tag: 'x' }).sort({ _id: 1 }).toArray(), docs.filter((d) => d.tag === 'x'));
    assert.equal(await coll.countDocuments({ tag: 'x' }), 9);
    assert.deepEqual((await coll.distinct('tag')).sort(), ['x', 'y']);
    // cached find (asked twice: the second is a cache hit), then a write through the proxy: the
    // next find sees the write
    assert.deepEqual(await coll.find({ _id: 3 }).toArray(), [{ _id: 3, n: 3, tag: 'x' }]);
    assert.deepEqual(await coll.find({ _id: 3 }).toArray(), [{ _id: 3, n: 3, tag: 'x' }]);
    assert.equal((await coll.updateOne({ _id: 3 }, { $set: { n: 300 } })).modifiedCount, 1);
    assert.deepEqual(await coll.find({ _id: 3 }).toArray(), [{ _id: 3, n: 300, tag: 'x' }]);
    assert.equal((await coll.updateMany({ tag: 'y' }, { $inc: { n: 1000 } })).modifiedCount, 16);
    assert.equal(await coll.countDocuments({ n: { $gte: 1000 } }), 16);
    assert.equal((await coll.deleteMany({ tag: 'x' })).deletedCount, 9);
    assert.equal(await coll.countDocuments({}), 16);
    assert.equal(await coll.countDocuments({ tag: 'x' }), 0);
    const fam = await coll.findOneAndUpdate({ _id: 1 }, { $set: { f: true } }, { returnDocument: 'after' });
    assert.deepEqual(fam, { _id: 1, n: 1001, tag: 'y', f: true });
    assert.equal((await coll.replaceOne({ _id: 2 }, { n: -2 })).modifiedCount, 1);
    const agg = await coll.aggregate([{ $match: { tag: 'y' } }, { $group: { _id: null, c: { $sum: 1 } } }]).toArray();
    assert.deepEqual(agg, [{ _id: null, c: 15 }]);
    const aggCursor = await coll.aggregate([{ $sort: { _id: 1 } }], { cursor: { batchSize: 3 } }).toArray();
    assert.equal(aggCursor.length, 16);
    const bulk = await coll.bulkWrite([
      { insertOne: { document: { _id: 100 } } },
      { updateOne: { filter: { _id: 100 }, update: { $set: { b: 1 } } } },
      { deleteOne: { filter: { _id: 4 } } },
    ] as never);
    assert.equal(bulk.insertedCount, 1); assert.equal(bulk.modifiedCount, 1); assert.equal(bulk.deletedCount, 1);
    assert.deepEqual(await coll.findOne({ _id: 100 } as never), { _id: 100, b: 1 });
    // partially consumed cursor closed early
    const cur = coll.find({}, { batchSize: 2 });
    await cur.next(); await cur.next(); await cur.next();
    await cur.close();
    // routed database through the whole pipeline
    await client.db('archive').collection<Doc>('a').insertMany(docs as never[]);
    assert.equal(await d2.db('archive').collection<Doc>('a').countDocuments({}), 25);
    assert.deepEqual(await client.db('archive').collection<Doc>('a').find({}, { batchSize: 5 }).sort({ _id: 1 }).toArray(), docs);
    // indexes / collections admin commands pass
    await coll.createIndex({ n: 1 });
    assert.ok((await coll.indexes()).some((i) => i.name === 'n_1'));
    assert.ok((await client.db('app').listCollections().toArray()).some((c) => c.name === 'crud'));
    await coll.drop();
    assert.equal(await coll.countDocuments({}), 0);
    // every step saw the traffic
    assert.ok(await metricValue('proxy_plugin_requests_total', PID) >= 30);
    assert.ok(await metricValue('proxy_plugin_cache_hits_total', PID) + await metricValue('proxy_plugin_cache_misses_total', PID) > 0);
    // The logging step's fields are fields of the proxy's own JSON line (no JSON-in-a-string).
    const logged = p.lines.filter((l) => l.step === 'wasm:logging' && l.op !== undefined);
    assert.ok(logged.length >= 30);
    assert.ok(logged.every((l) => l.status === 'ok'), JSON.stringify(logged.filter((l) => l.status !== 'ok')));
    // Response steps run over a local reply and know it: the logging step marks the cache hit.
    assert.ok(logged.some((l) => l.op === 'find' && l.local_reply === true), 'a cache hit is logged with local_reply');
    assert.equal(await metricValue('proxy_step_errors_total', PID), 0);
  } finally {
    await d2.close();
    await p.close();
  }
});
