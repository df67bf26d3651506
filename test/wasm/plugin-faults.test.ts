import { test } from 'node:test';
import assert from 'node:assert/strict';
import { PluginHarness, Verdict } from '../../sdk/testing/index.ts';
import { fixture } from './fixtures.ts';

test('trap: error counted and recorded, instance rebuilt, request fails open per on_error', async () => {
  const h = await PluginHarness.load(await fixture('trap'), { on_error: 'open' });
  assert.equal(h.request({ find: 'a' }).route, 'calls=1');
  assert.equal(h.request({ find: 'a' }).route, 'calls=2');
  const r = h.request({ boom: 1 });
  assert.equal(r.verdict, Verdict.Continue, 'fail open');
  assert.equal(h.records.at(-1)?.error, true);
  const slot = h.pipeline.steps.get('trap')!.slot;
  assert.equal(slot.traps, 1);
  assert.equal(h.request({ find: 'a' }).route, 'calls=1', 'fresh instance after the trap');
  assert.equal(slot.rebuilds, 1);
  assert.match(await h.metrics(), /proxy_step_errors_total\{pipeline_id="default",pipeline="baseline",step="wasm:trap",phase="request"\} 1/);
});

test('trap with on_error closed rejects with InternalError', async () => {
  const h = await PluginHarness.load(await fixture('trap'), { on_error: 'closed', pipelineId: 'closed' });
  const r = h.request({ boom: 1 });
  assert.equal(r.verdict, Verdict.Reject);
  assert.equal(r.reject?.code, 1);
  assert.equal(r.reject?.codeName, 'InternalError');
});

test('crash loop disables the step for a backoff period', async () => {
  const h = await PluginHarness.load(await fixture('trap'), { on_error: 'open', pipelineId: 'loop' });
  for (let i = 0; i < 5; i++) h.request({ boom: 1 });
  const slot = h.pipeline.steps.get('trap')!.slot;
  assert.equal(slot.disabled, true);
  const before = slot.rebuilds;
  const r = h.request({ find: 'a' });
  assert.equal(r.route, null, 'disabled step did not run');
  assert.equal(h.records.at(-1)?.error, true);
  assert.equal(slot.rebuilds, before, 'no rebuild while disabled');
});

test('infinite loop is stopped by fuel and the host keeps working', async () => {
  const h = await PluginHarness.load(await fixture('trap'), { on_error: 'open', fuel: 1_000_000, pipelineId: 'fuel' });
  const t0 = performance.now();
  const r = h.request({ spin: 1 });
  const ms = performance.now() - t0;
  assert.equal(r.verdict, Verdict.Continue);
  assert.ok(ms < 2000, `stopped in ${ms} ms`);
  assert.match(h.pipeline.steps.get('trap')!.slot.lastError, /fuel budget/);
  assert.equal(h.request({ find: 'a' }).route, 'calls=1');
});

test('memory cap: a plugin growing past max_memory_pages traps, the next request works', async () => {
  const h = await PluginHarness.load(await fixture('trap'), { on_error: 'open', max_memory_pages: 8, pipelineId: 'mem' });
  h.request({ hog: 1 });
  const slot = h.pipeline.steps.get('trap')!.slot;
  assert.equal(slot.traps, 1);
  assert.equal(h.request({ find: 'a' }).route, 'calls=1');
});

test('a module whose initial memory exceeds the cap is refused', async () => {
  await assert.rejects(PluginHarness.load(await fixture('trap'), { max_memory_pages: 0, pipelineId: 'tiny' }), /exceeds cap|cap is 0/);
});

test('metrics, sub-operations and kv with TTL', async () => {
  const h = await PluginHarness.load(await fixture('counter'), { config: { ttl: 50 } });
  h.request({ find: 'a' });
  h.request({ find: 'a' });
  assert.equal(new TextDecoder().decode(h.kv.get('count')), '2');
  const text = await h.metrics();
  assert.match(text, /proxy_plugin_test_requests_total\{pipeline_id="default",pipeline="baseline"\} 2/);
  assert.match(text, /proxy_plugin_test_body_bytes_count\{pipeline_id="default",pipeline="baseline"\} 2/);
  assert.deepEqual(h.subops.slice(0, 2).map((s) => [s.step, s.phase, s.name]), [['wasm:counter', 0, 'cache.lookup'], ['wasm:counter', 0, 'cache.store']]);
  await new Promise((r) => setTimeout(r, 80));
  assert.equal(h.kv.get('count'), undefined, 'expired');
  h.request({ find: 'a' });
  assert.equal(new TextDecoder().decode(h.kv.get('count')), '1');
  // The kv state survives an instance rebuild: it lives in the host.
  const slot = h.pipeline.steps.get('counter')!.slot;
  (slot as unknown as { instance: null }).instance = null;
  h.request({ find: 'a' });
  assert.equal(new TextDecoder().decode(h.kv.get('count')), '2');
});
