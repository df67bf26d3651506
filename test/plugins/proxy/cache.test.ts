// cache through the proxy with the real driver. Staleness is the proof of a hit: the test edits
// the data directly on devdb (a second MongoClient on the devdb URI, bypassing the proxy), and the
// proxy keeps answering the cached reply until the TTL expires or a write through the proxy
// invalidates the namespace.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MongoClient } from 'mongodb';
import { startPipelineProxy, metricValue, sleep, type Doc } from './_proxy.ts';

const PID = 'px_cache';
const m = async () => ({
  hits: await metricValue('proxy_plugin_cache_hits_total', PID),
  misses: await metricValue('proxy_plugin_cache_misses_total', PID),
  stores: await metricValue('proxy_plugin_cache_stores_total', PID),
  invalidations: await metricValue('proxy_plugin_cache_invalidations_total', PID),
});

test('cache: hits answer stale data until a proxy write or the TTL; cursors are not cached', { timeout: 60_000 }, async () => {
  const TTL = 1500;
  const p = await startPipelineProxy({
    id: PID, request: ['cache'], response: ['cache'],
    steps: { cache: { config: { ttl_ms: TTL } } },
  });
  const direct = new MongoClient(p.devdbUri, { directConnection: true });
  try {
    await direct.connect();
    const client = await p.client();
    const coll = client.db('app').collection<Doc>('items');
    const raw = direct.db('app').collection<Doc>('items');
    await coll.insertMany([{ _id: 1, v: 'a' }, { _id: 2, v: 'b' }] as never[]);
    const finds = () => p.upstreamCommands.filter((c) => c.find === 'items').length;

    const m0 = await m();
    const first = await coll.find({}).toArray();
    assert.deepEqual(first, [{ _id: 1, v: 'a' }, { _id: 2, v: 'b' }]);
    const m1 = await m();
    assert.equal(m1.misses - m0.misses, 1);
    assert.equal(m1.stores - m0.stores, 1);
    const upstreamFinds = finds();

    // change the data behind the proxy's back
    await raw.updateOne({ _id: 1 }, { $set: { v: 'CHANGED' } });
    const t0 = Date.now();
    const second = await coll.find({}).toArray();
    assert.deepEqual(second, first, 'the second identical find is the cached (stale) reply');
    assert.equal(finds(), upstreamFinds, 'the hit never reached devdb');
    const m2 = await m();
    assert.equal(m2.hits - m1.hits, 1);
    // another client (another connection and session: lsid is not part of the key) hits as well
    const client2 = await p.client();
    assert.deepEqual(await client2.db('app').collection<Doc>('items').find({}).toArray(), first);
    assert.equal(finds(), upstreamFinds);
    assert.equal((await m()).hits - m1.hits, 2);
    // a differently-shaped command is another key: a miss, fresh data
    assert.deepEqual(await coll.find({ _id: 1 }).toArray(), [{ _id: 1, v: 'CHANGED' }]);
    // count / distinct are cached too
    assert.equal(await coll.countDocuments({}), 2);
    assert.deepEqual(await coll.distinct('v'), ['CHANGED', 'b']);
    await raw.insertOne({ _id: 3, v: 'c' });
    assert.equal(await coll.countDocuments({}), 2, 'cached count (stale)');
    assert.deepEqual(await coll.distinct('v'), ['CHANGED', 'b'], 'cached distinct (stale)');
    assert.ok(Date.now() - t0 < TTL, 'test ran within the TTL; the staleness checks above are meaningful');

    // a write through the proxy invalidates the namespace
    const inv0 = (await m()).invalidations;
    await coll.updateOne({ _id: 2 }, { $set: { v: 'B' } });
    assert.ok((await m()).invalidations > inv0, 'invalidations counter moved');
    assert.deepEqual(await coll.find({}).toArray(), [{ _id: 1, v: 'CHANGED' }, { _id: 2, v: 'B' }, { _id: 3, v: 'c' }]);
    assert.equal(await coll.countDocuments({}), 3);

    // other namespaces keep their entries: a write to items does not invalidate app.other
    const other = client.db('app').collection<Doc>('other');
    await direct.db('app').collection<Doc>('other').insertOne({ _id: 1 });
    assert.deepEqual(await other.find({}).toArray(), [{ _id: 1 }]);
    await direct.db('app').collection<Doc>('other').insertOne({ _id: 2 });
    await coll.insertOne({ _id: 4, v: 'd' });
    assert.deepEqual(await other.find({}).toArray(), [{ _id: 1 }], 'entry of another namespace survives');

    // TTL: after it, the entry is gone
    const stale = await coll.find({}).toArray();
    await raw.deleteOne({ _id: 4 });
    assert.deepEqual(await coll.find({}).toArray(), stale);
    await sleep(TTL + 200);
    assert.deepEqual((await coll.find({}).toArray()).map((d) => d._id), [1, 2, 3]);
  } finally {
    await direct.close();
    await p.close();
  }
});

test('cache: results with an open cursor (batchSize < result) are not cached and stay correct', { timeout: 60_000 }, async () => {
  const p = await startPipelineProxy({ id: `${PID}_cur`, request: ['cache'], response: ['cache'] });
  const direct = new MongoClient(p.devdbUri, { directConnection: true });
  try {
    await direct.connect();
    const client = await p.client();
    const coll = client.db('app').collection<Doc>('many');
    const docs = Array.from({ length: 10 }, (_, i) => ({ _id: i, n: i }));
    await coll.insertMany(docs as never[]);
    const pid = `${PID}_cur`;
    const stores0 = await metricValue('proxy_plugin_cache_stores_total', pid);
    const hits0 = await metricValue('proxy_plugin_cache_hits_total', pid);
    assert.deepEqual(await coll.find({}, { batchSize: 3 }).toArray(), docs);
    await direct.db('app').collection<Doc>('many').insertOne({ _id: 10, n: 10 });
    const again = await coll.find({}, { batchSize: 3 }).toArray();
    assert.deepEqual(again, [...docs, { _id: 10, n: 10 }], 'fresh: the first reply had a live cursor and was not stored');
    assert.equal(await metricValue('proxy_plugin_cache_stores_total', pid), stores0);
    assert.equal(await metricValue('proxy_plugin_cache_hits_total', pid), hits0);
    assert.ok(p.upstreamCommands.filter((c) => c.getMore !== undefined).length >= 6, 'getMores went upstream');
    // same for aggregate
    const agg = await coll.aggregate([{ $match: { n: { $gte: 0 } } }], { cursor: { batchSize: 2 } }).toArray();
    assert.equal(agg.length, 11);
  } finally {
    await direct.close();
    await p.close();
  }
});
