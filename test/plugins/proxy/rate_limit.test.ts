// rate_limit through the proxy with the real driver: burst, then code 462 naming the limit,
// recovery after the bucket refills.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MongoServerError } from 'mongodb';
import { startPipelineProxy, metricValue, sleep, type Doc } from './_proxy.ts';

const PID = 'px_rate';

test('rate_limit: burst, then 462 RateLimitExceeded with the limit, then recovery', { timeout: 60_000 }, async () => {
  const p = await startPipelineProxy({ id: PID, request: ['rate_limit'], steps: { rate_limit: { config: { max_rps: 2, burst: 3 } } } });
  try {
    const client = await p.client({ retryReads: false, retryWrites: false });
    const coll = client.db('app').collection<Doc>('r');
    const limited0 = await metricValue('proxy_plugin_rate_limited_total', PID);
    let ok = 0;
    const errors: MongoServerError[] = [];
    for (let i = 0; i < 6; i++) {
      try { await coll.find({ i }).toArray(); ok++; } catch (e) { assert.ok(e instanceof MongoServerError, String(e)); errors.push(e); }
    }
    assert.equal(ok, 3, 'the burst of 3 passes (the driver handshake does not go through the pipeline)');
    assert.equal(errors.length, 3);
    for (const e of errors) {
      assert.equal(e.code, 462);
      assert.equal(e.codeName, 'RateLimitExceeded');
      assert.match(e.errmsg, /rate limit exceeded: max 2 requests\/s \(burst 3\)/);
    }
    assert.equal(await metricValue('proxy_plugin_rate_limited_total', PID) - limited0, 3);
    // writes are limited too
    await assert.rejects(coll.insertOne({ a: 1 }), (e: unknown) => e instanceof MongoServerError && e.code === 462);
    // refill: 2 tokens/s → after 600 ms at least one token
    await sleep(600);
    assert.deepEqual(await coll.find({}).toArray(), []);
    await sleep(1600); // full burst back
    for (let i = 0; i < 3; i++) await coll.find({ i }).toArray();
    await assert.rejects(coll.find({}).toArray(), (e: unknown) => e instanceof MongoServerError && e.code === 462);
  } finally {
    await p.close();
  }
});

test('rate_limit per app: one application exhausting its bucket does not limit another', { timeout: 60_000 }, async () => {
  const p = await startPipelineProxy({ id: `${PID}_app`, request: ['rate_limit'], steps: { rate_limit: { config: { max_rps: 1, burst: 2, per: 'app' } } } });
  try {
    const a = await p.client({ appName: 'appA', retryReads: false });
    const b = await p.client({ appName: 'appB', retryReads: false });
    await a.db('app').collection<Doc>('r').find({}).toArray();
    await a.db('app').collection<Doc>('r').find({}).toArray();
    await assert.rejects(a.db('app').collection<Doc>('r').find({}).toArray(), (e: unknown) => {
      assert.ok(e instanceof MongoServerError);
      assert.equal(e.code, 462);
      assert.match(e.errmsg, /max 1 requests\/s \(burst 2\) per app, app "appA"/);
      return true;
    });
    assert.deepEqual(await b.db('app').collection<Doc>('r').find({}).toArray(), []);
  } finally {
    await p.close();
  }
});
