// route through the proxy with the real driver: rules send one database (and one collection) to a
// second devdb started by the test; everything else goes to the proxy's default upstream. Data is
// checked by connecting to each devdb directly; cursors on the routed upstream continue via getMore.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { MongoClient } from 'mongodb';
import { DevDbServer } from '../../../runtime/devdb/index.ts';
import { startPipelineProxy, type Doc } from './_proxy.ts';

// Second devdbs are closed here, so a proxy that fails to start cannot keep the process alive.
const seconds: DevDbServer[] = [];
after(async () => { for (const s of seconds) await s.close(); });

test('route: a database and a collection go to a second devdb; getMore follows the cursor', { timeout: 60_000 }, async () => {
  const second = new DevDbServer();
  seconds.push(second);
  const { uri: secondUri } = await second.listen(0);
  const p = await startPipelineProxy({
    id: 'px_route', request: ['route'],
    steps: { route: { config: { rules: [{ dbs: ['archive'], upstream: secondUri }, { collections: ['events'], upstream: secondUri }] } } },
  });
  const d1 = new MongoClient(p.devdbUri, { directConnection: true });
  const d2 = new MongoClient(secondUri, { directConnection: true });
  try {
    await d1.connect(); await d2.connect();
    const client = await p.client();
    const docs = Array.from({ length: 9 }, (_, i) => ({ _id: i, v: i }));
    await client.db('archive').collection<Doc>('old').insertMany(docs as never[]);
    await client.db('app').collection<Doc>('live').insertMany(docs.slice(0, 2) as never[]);
    await client.db('app').collection<Doc>('events').insertMany(docs as never[]);
    // landed on the right devdb
    assert.equal(await d2.db('archive').collection<Doc>('old').countDocuments({}), 9);
    assert.equal(await d1.db('archive').collection<Doc>('old').countDocuments({}), 0);
    assert.equal(await d1.db('app').collection<Doc>('live').countDocuments({}), 2);
    assert.equal(await d2.db('app').collection<Doc>('live').countDocuments({}), 0);
    assert.equal(await d2.db('app').collection<Doc>('events').countDocuments({}), 9);
    assert.equal(await d1.db('app').collection<Doc>('events').countDocuments({}), 0);
    // reads come back from the routed upstream, cursors continue there (batchSize small)
    assert.deepEqual(await client.db('archive').collection<Doc>('old').find({}, { batchSize: 2 }).toArray(), docs);
    assert.deepEqual(await client.db('app').collection<Doc>('events').find({}, { batchSize: 2 }).toArray(), docs,
      'getMore carries the collection in its `collection` field, not as the command value');
    assert.deepEqual(await client.db('app').collection<Doc>('events').aggregate([{ $sort: { _id: 1 } }], { cursor: { batchSize: 4 } }).toArray(), docs);
    assert.deepEqual(await client.db('app').collection<Doc>('live').find({}).toArray(), docs.slice(0, 2));
    // an explicit close of a routed cursor (killCursors) does not fail
    const cur = client.db('archive').collection<Doc>('old').find({}, { batchSize: 2 });
    assert.deepEqual(await cur.next(), docs[0]);
    await cur.close();
    // updates and deletes follow the route too
    await client.db('archive').collection<Doc>('old').updateOne({ _id: 1 }, { $set: { touched: true } });
    await client.db('archive').collection<Doc>('old').deleteOne({ _id: 8 });
    assert.deepEqual(await d2.db('archive').collection<Doc>('old').findOne({ _id: 1 } as never), { _id: 1, v: 1, touched: true });
    assert.equal(await d2.db('archive').collection<Doc>('old').countDocuments({}), 8);
  } finally {
    await d1.close(); await d2.close();
    await p.close();
  }
});

test('route: default sends unmatched requests to the given upstream', { timeout: 60_000 }, async () => {
  const second = new DevDbServer();
  seconds.push(second);
  const { uri: secondUri } = await second.listen(0);
  const p = await startPipelineProxy({ id: 'px_route_default', request: ['route'], steps: { route: { config: { default: secondUri } } } });
  const d2 = new MongoClient(secondUri, { directConnection: true });
  try {
    await d2.connect();
    const client = await p.client();
    await client.db('app').collection<Doc>('c').insertOne({ _id: 1 } as never);
    assert.equal(await d2.db('app').collection<Doc>('c').countDocuments({}), 1);
    assert.equal(p.upstreamCommands.filter((c) => c.insert === 'c').length, 0, 'the proxy default devdb saw nothing');
  } finally {
    await d2.close();
    await p.close();
  }
});

test('route: a transaction started on a routed upstream is pinned there — commit included; killCursors follows its cursor', { timeout: 60_000 }, async () => {
  const second = new DevDbServer();
  seconds.push(second);
  const { uri: secondUri } = await second.listen(0);
  // What each devdb executed (their own engines, observed, not replaced).
  const seenBy = (engine: DevDbServer['engine']) => {
    const seen: string[] = [];
    const run = engine.run.bind(engine);
    engine.run = ((cmd, seq, conn) => { seen.push(Object.keys(cmd)[0]); return run(cmd, seq, conn); }) as typeof engine.run;
    return seen;
  };
  const onSecond = seenBy(second.engine);
  const p = await startPipelineProxy({
    id: 'px_route_txn', request: ['route'],
    steps: { route: { config: { rules: [{ dbs: ['archive'], upstream: secondUri }] } } },
  });
  try {
    const onMain = seenBy(p.proxy.devdb!.engine);
    const client = await p.client();
    const router = p.proxy.server.router;
    const session = client.startSession();
    try {
      session.startTransaction();
      await client.db('archive').collection<Doc>('t').insertOne({ _id: 1, v: 'in txn' }, { session });
      assert.equal(router.pinnedTransactions, 1, 'the transaction is pinned to the routed pool');
      await client.db('archive').collection<Doc>('t').updateOne({ _id: 1 }, { $set: { w: 2 } }, { session });
      await session.commitTransaction();
    } finally {
      await session.endSession();
    }
    assert.ok(onSecond.includes('commitTransaction'), `commit reached the routed upstream (it saw ${onSecond.join(',')})`);
    assert.ok(!onMain.includes('commitTransaction'), 'commit did not go to the main upstream');
    assert.equal(router.pinnedTransactions, 0, 'the pin ends with the commit');

    const docs = Array.from({ length: 6 }, (_, i) => ({ _id: 10 + i }));
    await client.db('archive').collection<Doc>('k').insertMany(docs as never[]);
    const cur = client.db('archive').collection<Doc>('k').find({}, { batchSize: 2 });
    await cur.next();
    assert.equal(router.pinnedCursors, 1, 'the open cursor is pinned');
    await cur.close();
    assert.ok(onSecond.includes('killCursors'), 'killCursors reached the server that owns the cursor');
    assert.ok(!onMain.includes('killCursors'), 'killCursors did not go to the main upstream');
    assert.equal(router.pinnedCursors, 0, 'a killed cursor is unpinned');
  } finally {
    await p.close();
  }
});
