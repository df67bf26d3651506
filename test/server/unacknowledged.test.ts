// The real `proxy serve` (one worker) in front of the embedded upstream with one pooled upstream
// connection, and the real driver: unacknowledged writes (w:0, sent as OP_MSG moreToCome) from one
// client interleaved with acknowledged commands from another on the same upstream connection get no
// reply and leave that connection in step; and the driver's streaming monitor (an exhaustAllowed
// hello) is answered once per request, without moreToCome or topologyVersion, so it polls.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MongoClient } from 'mongodb';
import { DevDbServer } from '../../runtime/devdb/index.ts';
import { spawnServe, type Served } from '../helpers/serve.ts';
import { RawClient, opMsg } from '../helpers/wire.ts';

const dir = mkdtempSync(join(tmpdir(), 'unack-'));
const devdb = new DevDbServer();
let served: Served | null = null;
const clients: MongoClient[] = [];
after(async () => {
  for (const c of clients) await c.close().catch(() => {});
  await served?.stop();
  await devdb.close();
  rmSync(dir, { recursive: true, force: true });
});

async function start(): Promise<string> {
  const d = await devdb.listen(0);
  const config = join(dir, 'proxy.json');
  writeFileSync(config, JSON.stringify({ listen: '127.0.0.1:0', log: { level: 'warn' }, upstream: { uri: d.uri, pool_size: 1 } }));
  served = await spawnServe(['--config', config]);
  return /mongodb:\/\/[^\s"]+/.exec(served.out())![0];
}

test('w:0 writes interleaved with acknowledged reads on one upstream connection: every write lands, every read gets its own answer', async () => {
  const uri = await start();
  // One client connection for the writer: the count below follows its w:0 writes in order.
  const writer = new MongoClient(uri, { maxPoolSize: 1 });
  const reader = new MongoClient(uri, { maxPoolSize: 4 });
  clients.push(writer, reader);
  const w = writer.db('unack').collection('c');
  const r = reader.db('unack').collection('probe');
  await r.insertMany([{ _id: 'a' as never, v: 1 }, { _id: 'b' as never, v: 2 }]);
  const N = 300;
  const writes = (async () => {
    for (let i = 0; i < N; i++) await w.insertOne({ i }, { writeConcern: { w: 0 } });
    await w.insertMany(Array.from({ length: 50 }, (_, i) => ({ many: i })), { writeConcern: { w: 0 } });
  })();
  const reads = (async () => {
    for (let i = 0; i < 100; i++) {
      const id = i % 2 === 0 ? 'a' : 'b';
      const doc = await r.findOne({ _id: id as never });
      assert.equal(doc?.v, id === 'a' ? 1 : 2, `read ${i} got its own answer`);
    }
  })();
  await Promise.all([writes, reads]);
  // Requests of one client connection reach the upstream in order: the count comes after the writes.
  assert.equal(await w.countDocuments({ i: { $exists: true } }), N);
  assert.equal(await w.countDocuments({ many: { $exists: true } }), 50);
  assert.equal((await reader.db('admin').command({ ping: 1 })).ok, 1);
  assert.doesNotMatch(served!.err(), /"level":"error"/);
});

test('an exhaustAllowed hello with maxAwaitTimeMS is answered once, without moreToCome or topologyVersion; the streaming monitor polls', async () => {
  const uri = served === null ? await start() : /mongodb:\/\/[^\s"]+/.exec(served.out())![0];
  const port = Number(/:(\d+)\//.exec(uri)![1]);
  const c = await RawClient.connect(port);
  try {
    const hello = await c.hello();
    assert.equal(hello.topologyVersion, undefined, 'no topologyVersion: drivers do not stream hellos from the proxy');
    const r = await c.roundTrip(opMsg({ hello: 1, maxAwaitTimeMS: 10_000, $db: 'admin' }, { flags: 1 << 16 }), 3000);
    assert.equal(r.body?.ok, 1);
    assert.equal(r.flags & 2, 0, 'no moreToCome on the reply');
    assert.equal(await c.next(500).catch(() => null), null, 'nothing streamed after it');
    assert.equal((await c.roundTrip(opMsg({ ping: 1, $db: 'admin' }))).body?.ok, 1);
  } finally {
    c.destroy();
  }
  const streaming = new MongoClient(uri, { serverMonitoringMode: 'stream', heartbeatFrequencyMS: 500 });
  clients.push(streaming);
  let heartbeats = 0;
  streaming.on('serverHeartbeatSucceeded', (e) => { if (!e.awaited) heartbeats++; });
  assert.equal((await streaming.db('admin').command({ ping: 1 })).ok, 1);
  await new Promise((res) => setTimeout(res, 1600));
  assert.ok(heartbeats >= 2, `the monitor polls (${heartbeats} heartbeats in 1.6 s)`);
  assert.equal((await streaming.db('admin').command({ ping: 1 })).ok, 1);
});
