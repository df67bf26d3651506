// Tracing without profiling times only sampled requests (TracingRecorder.timingsOnly): an unsampled
// request reads no clock — neither at step boundaries nor for its plugins' sub-operations (the
// plugins' own clock reads, the kv store's TTLs, are counted from the same graph built untraced) — and a
// sampled one gets its steps and sub-operations in its RequestTimings. And a request whose
// RequestTimings do not ask for sub-operations (profiling outside its frame sample) has its steps
// timed while its plugins' subop() calls never leave the plugin. The reads are counted by wrapping
// performance.now(), which the step clock is made to read (PROXY_STEP_CLOCK=performance).
import '../helpers/performance-step-clock.ts';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { performance } from 'node:perf_hooks';
import { PipelineManager, RequestTimings, type PipelineConfig } from '../../runtime/pipeline/index.ts';
import { TracingRecorder } from '../../runtime/telemetry/index.ts';
import { makeExchange } from '../../sdk/testing/index.ts';
import { fixture } from '../wasm/fixtures.ts';
import { stepClock } from '../../runtime/step-clock.ts';

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

  assert.equal(stepClock.source, 'performance.now', 'the step clock reads performance.now()');
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

test('a request whose RequestTimings do not ask for sub-operations: its steps are timed, and the SDK\'s subop() never calls into the host ' +
  '(CallFlag.TimeSubops absent)', async () => {
  const { StepHost } = await import('../../runtime/wasm/step-host.ts');
  const { callbackRecorder } = await import('../../runtime/pipeline/index.ts');
  const recorder = callbackRecorder(true, () => {});
  const m = new PipelineManager({ recorder, logger: quiet });
  await m.load({
    pipeline: { id: 's', request: ['counter'], response: [] },
    steps: { counter: { module: await fixture('counter'), config: {}, max_memory_pages: 32 } },
  });
  const p = m.get('s');
  const realBegin = StepHost.prototype.subopBegin;
  const realEnd = StepHost.prototype.subopEnd;
  let calls = 0;
  StepHost.prototype.subopBegin = function (this: InstanceType<typeof StepHost>, name: string | null) { calls++; realBegin.call(this, name); };
  StepHost.prototype.subopEnd = function (this: InstanceType<typeof StepHost>) { calls++; realEnd.call(this); };
  try {
    const off = new RequestTimings();
    off.subops = false;
    const a = makeExchange({ find: 'c', $db: 'app' }, 's');
    a.timings = off;
    p.runRequest(a);
    assert.equal(off.count, 1, 'the step is timed');
    assert.equal(off.subCount, 0);
    assert.equal(calls, 0, 'no sub-operation call reached the host');

    const on = new RequestTimings();
    const b = makeExchange({ find: 'c', $db: 'app' }, 's');
    b.timings = on;
    p.runRequest(b);
    assert.deepEqual(on.subNames.slice(0, on.subCount), ['cache.lookup', 'cache.store']);
    assert.equal(calls, 4, 'begin and end of both sub-operations');
  } finally {
    StepHost.prototype.subopBegin = realBegin;
    StepHost.prototype.subopEnd = realEnd;
  }
});
