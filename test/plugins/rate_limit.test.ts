import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { Verdict } from '../../sdk/testing/index.ts';
import { load, refuses, pluginPath } from './helpers.ts';

const find = { find: 'c', filter: {}, $db: 'app' };

test('rate_limit: burst passes, the next request is rejected (462), tokens refill', async () => {
  const h = await load('rate_limit', { max_rps: 20, burst: 2 });
  assert.equal(h.request(find).verdict, Verdict.Continue);
  assert.equal(h.request(find).verdict, Verdict.Continue);
  const r = h.request(find);
  assert.equal(r.verdict, Verdict.Reject);
  assert.deepEqual([r.reject?.code, r.reject?.codeName], [462, 'RateLimitExceeded']);
  assert.match(r.reject!.message, /max 20 requests\/s \(burst 2\)/);
  await sleep(80); // 20/s → one token per 50 ms
  assert.equal(h.request(find).verdict, Verdict.Continue, 'a token refilled');
  // A late timer may have refilled a second token, never more than the burst (2): the bucket
  // empties again within two more requests.
  const next = [h.request(find).verdict, h.request(find).verdict];
  assert.ok(next.includes(Verdict.Reject), `rejected again once the refilled tokens are spent: ${next}`);
  assert.match(await h.metrics(), /proxy_plugin_rate_limited_total\{pipeline_id="p\d+",pipeline="baseline"\} [1-9]/);
});

test('rate_limit: per client host and per app keep separate buckets', async () => {
  const h = await load('rate_limit', { max_rps: 1, burst: 1, per: 'client' });
  const a = { conn: { clientAddress: '10.0.0.1:5000' } };
  const a2 = { conn: { clientAddress: '10.0.0.1:6000', id: 2 } };
  const b = { conn: { clientAddress: '10.0.0.2:5000' } };
  assert.equal(h.request(find, a).verdict, Verdict.Continue);
  const r = h.request(find, a2); // same host, other port
  assert.equal(r.verdict, Verdict.Reject);
  assert.match(r.reject!.message, /per client, client 10\.0\.0\.1/);
  assert.equal(h.request(find, b).verdict, Verdict.Continue);

  const p = await load('rate_limit', { max_rps: 1, per: 'app' });
  assert.equal(p.request(find, { conn: { appName: 'shop' } }).verdict, Verdict.Continue);
  assert.equal(p.request(find, { conn: { appName: 'shop' } }).verdict, Verdict.Reject);
  assert.equal(p.request(find, { conn: { appName: 'batch' } }).verdict, Verdict.Continue);
});

test('rate_limit: bucket state is in the host kv store and survives a reload', async () => {
  const h = await load('rate_limit', { max_rps: 1, burst: 1 });
  assert.equal(h.request(find).verdict, Verdict.Continue);
  await h.reload(await pluginPath('rate_limit'), { config: { max_rps: 1, burst: 1 } });
  assert.equal(h.request(find).verdict, Verdict.Reject);
  assert.ok(h.kv.get('g') !== undefined);
});

test('rate_limit: bad configs are refused', async () => {
  await refuses('rate_limit', { max_rps: 5 }, {}, /max_rps is required/);
  await refuses('rate_limit', { max_rps: 5 }, { max_rps: 0 }, /positive/);
  await refuses('rate_limit', { max_rps: 5 }, { max_rps: '5' }, /must be a number/);
  await refuses('rate_limit', { max_rps: 5 }, { max_rps: 5, burst: 0.5 }, /burst/);
  await refuses('rate_limit', { max_rps: 5 }, { max_rps: 5, per: 'user' }, /per must be one of/);
});
