// logging through the proxy with the real driver: one JSON line per request (op, db, collection,
// duration_us, pipeline, status, code on errors), deterministic sampling.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MongoServerError } from 'mongodb';
import { startPipelineProxy, type ProxyUnderTest, type Doc } from './_proxy.ts';

/** The request lines the logging step wrote: its fields are fields of the proxy's JSON line. */
function requestLines(p: ProxyUnderTest): Array<Record<string, unknown>> {
  return p.lines.filter((l) => l.step === 'wasm:logging' && typeof l.op === 'string');
}

test('logging: one JSON line per request with op/db/collection/duration_us/pipeline/status', { timeout: 60_000 }, async () => {
  const p = await startPipelineProxy({ id: 'px_logging', request: ['logging'], response: ['logging'],
    steps: { logging: { config: { sample_rate: 1, level: 'info' } } } });
  try {
    const client = await p.client({ appName: 'logtest' });
    const coll = client.db('app').collection<Doc>('users');
    const before = requestLines(p).length;
    await coll.insertOne({ _id: 1, name: 'a' } as never);
    await coll.find({}).toArray();
    await client.db('app').collection<Doc>('orders').countDocuments({});
    await assert.rejects(coll.insertOne({ _id: 1, name: 'dup' } as never)); // duplicate key: ok 1 + writeErrors
    await assert.rejects(client.db('app').command({ noSuchCommand: 1 }), (e: unknown) => e instanceof MongoServerError);
    const lines = requestLines(p).slice(before);
    assert.equal(lines.length, 5, JSON.stringify(lines));
    const [ins, find, agg, dup, bad] = lines;
    assert.equal(ins.op, 'insert'); assert.equal(ins.db, 'app'); assert.equal(ins.collection, 'users');
    assert.equal(find.op, 'find'); assert.equal(find.collection, 'users');
    assert.equal(agg.op, 'aggregate'); assert.equal(agg.collection, 'orders'); // countDocuments is an aggregate
    for (const l of lines) {
      assert.equal(l.pipeline, 'px_logging');
      assert.equal(typeof l.duration_us, 'number');
      assert.ok((l.duration_us as number) >= 0);
      assert.equal(l.app, 'logtest');
      assert.equal(typeof l.request_id, 'number');
      assert.equal(typeof l.connection_id, 'number');
    }
    assert.equal(ins.status, 'ok'); assert.equal(find.status, 'ok'); assert.equal(dup.status, 'ok'); // write errors still ok: 1
    assert.equal(bad.op, 'noSuchCommand');
    assert.equal(bad.status, 'error');
    assert.equal(bad.code, 59);
    // one flat JSON object per line: the proxy's own fields, then the step's (no JSON in a string)
    for (const l of lines) {
      assert.equal(typeof l.time, 'string');
      assert.equal(l.msg, undefined);
      assert.equal(l.step, 'wasm:logging');
    }
    // the proxy's logger line carries the level chosen in the config
    assert.ok(p.lines.filter((l) => l.step === 'wasm:logging').every((l) => l.level === 'info'));
  } finally {
    await p.close();
  }
});

test('logging: sample_rate 0 writes no lines; 0.5 writes exactly half', { timeout: 60_000 }, async () => {
  const p0 = await startPipelineProxy({ id: 'px_logging0', request: ['logging'], response: ['logging'], steps: { logging: { config: { sample_rate: 0 } } } });
  try {
    const c = await p0.client();
    for (let i = 0; i < 10; i++) await c.db('app').collection<Doc>('c').find({ i }).toArray();
    assert.equal(requestLines(p0).length, 0);
  } finally {
    await p0.close();
  }
  const p5 = await startPipelineProxy({ id: 'px_logging5', request: ['logging'], response: ['logging'],
    steps: { logging: { config: { sample_rate: 0.5, level: 'warn' } } } });
  try {
    const c = await p5.client();
    for (let i = 0; i < 10; i++) await c.db('app').collection<Doc>('c').find({ i }).toArray();
    const l = p5.lines.filter((x) => x.step === 'wasm:logging');
    assert.equal(l.length, 5);
    assert.ok(l.every((x) => x.level === 'warn'));
  } finally {
    await p5.close();
  }
});
