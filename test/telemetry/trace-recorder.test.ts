// Tracing without profiling times only sampled requests (TracingRecorder.timingsOnly): an unsampled
// request reads no clock — neither at step boundaries nor for its plugins' sub-operations (the
// plugins' own clock reads, the kv store's TTLs, are counted from the same graph built untraced) — and a
// sampled one gets its steps and sub-operations in its RequestTimings.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { performance } from 'node:perf_hooks';
import { PipelineManager, RequestTimings, type PipelineConfig } from '../../runtime/pipeline/index.ts';
import { TracingRecorder } from '../../runtime/telemetry/index.ts';
import { makeExchange } from '../../sdk/testing/index.ts';
import { fixture } from '../wasm/fixtures.ts';

const quiet = { trace() {}, debug() {}, info() {}, warn() {}, error() {} };

test('tracing only: an unsampled request reads no clock (steps or sub-operations); a sampled one records both', async () => {
  const m = new PipelineManager({ recorder: new TracingRecorder(null), logger: quiet });
  const cfg: PipelineConfig = {
    pipeline: { id: 't', request: ['counter', 'continue'], response: [] },
    steps: {
      counter: { module: await fixture('counter'), config: {}, max_memory_pages: 32 },
      continue: { module: await fixture('continue'), config: {}, max_memory_pages: 32 },
    },
  };
  await m.load(cfg);
  const p = m.get('t');
  p.runRequest(makeExchange({ find: 'c', $db: 'app' }, 't')); // instances warm
  // The same graph without any recorder: its clock reads are the plugins' own (the kv store's TTLs).
  const plainManager = new PipelineManager({ logger: quiet });
  await plainManager.load(cfg);
  const plain = plainManager.get('t');
  plain.runRequest(makeExchange({ find: 'c', $db: 'app' }, 't'));

  const realNow = performance.now;
  let reads = 0;
  performance.now = function now(this: typeof performance) { reads++; return realNow.call(this); };
  try {
    plain.runRequest(makeExchange({ find: 'c', $db: 'app' }, 't'));
    const own = reads;
    assert.ok(own > 0, 'the counter plugin\'s kv calls read the clock');
    reads = 0;
    const unsampled = makeExchange({ find: 'c', $db: 'app' }, 't');
    p.runRequest(unsampled);
    assert.equal(reads, own, 'no clock read for an unsampled request beyond the plugins\' own');
    reads = 0;

    const timings = new RequestTimings();
    const sampled = makeExchange({ find: 'c', $db: 'app' }, 't');
    sampled.timings = timings;
    p.runRequest(sampled);
    assert.ok(reads >= own + 3 + 4, `step boundaries and sub-operation begin/end read the clock (${reads} reads)`);
    assert.deepEqual(timings.timers.slice(0, timings.count).map((t) => t.step), ['wasm:counter', 'wasm:continue']);
    assert.deepEqual(timings.subNames.slice(0, timings.subCount), ['cache.lookup', 'cache.store']);
    assert.deepEqual(timings.subOf.slice(0, timings.subCount), [0, 0], 'both belong to the counter step');

    // And again unsampled after a sampled one: the sub-operation stack stayed balanced.
    reads = 0;
    p.runRequest(makeExchange({ find: 'c', $db: 'app' }, 't'));
    assert.equal(reads, own);
  } finally {
    performance.now = realNow;
  }
});
