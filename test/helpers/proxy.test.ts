// withProxy: a proxy in front of the embedded upstream that serves a real driver, closed (port and
// upstream) once the test that asked for it ends; with an upstream given, that one is used.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { MongoClient } from 'mongodb';
import { freePort } from './ports.ts';
import { withProxy } from './proxy.ts';

function refused(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect(port, '127.0.0.1');
    s.once('connect', () => { s.destroy(); resolve(false); });
    s.once('error', () => resolve(true));
  });
}

test('withProxy serves a driver through the embedded upstream, and closes the proxy and its upstream after the test', async (t) => {
  let ports: number[] = [];
  await t.test('inner', async (st) => {
    const devdbPort = await freePort();
    const { proxy, uri } = await withProxy(st, { devdb: { port: devdbPort } });
    assert.equal(uri, proxy.uri);
    assert.notEqual(proxy.devdb, null, 'the embedded upstream runs');
    const c = new MongoClient(uri, { serverSelectionTimeoutMS: 5000 });
    try {
      const coll = c.db('h').collection<{ _id: number }>('x');
      await coll.insertOne({ _id: 1 });
      assert.deepEqual(await coll.findOne({ _id: 1 }), { _id: 1 });
    } finally {
      await c.close();
    }
    ports = [proxy.port, devdbPort];
    assert.equal(await refused(devdbPort), false);
    assert.equal(await refused(proxy.port), false);
  });
  assert.equal(ports.length, 2);
  for (const p of ports) assert.equal(await refused(p), true, `port ${p} is closed after the test`);
});

test('withProxy uses the upstream it is given', async (t) => {
  const devdbPort = await freePort();
  await withProxy(t, { devdb: { port: devdbPort } });
  const { proxy } = await withProxy(t, { upstream: { uri: `mongodb://127.0.0.1:${devdbPort}` } });
  assert.equal(proxy.devdb, null);
  const c = new MongoClient(proxy.uri, { serverSelectionTimeoutMS: 5000 });
  try {
    assert.equal((await c.db('admin').command({ ping: 1 })).ok, 1);
  } finally {
    await c.close();
  }
});
