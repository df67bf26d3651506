// What the profiler costs per request once the pipeline has run: Profiler.commit() of a request
// that ran the eight built-ins (11 step invocations, 3 sub-operations) — graph statistics, the
// step and sub-operation histograms, the flame-graph frame ring — with the ring full
// (flamegraph_frames default, 20,000) so every push overwrites an old frame.
//
// Usage: node --import tsx bench/profiler-commit.ts [--rounds 10] [--requests 200000]
import { Profiler, type CompletedRequest } from '../runtime/profiling/index.ts';
import { RequestTimings } from '../runtime/pipeline/request-timings.ts';
import { GraphKey } from '../runtime/pipeline/graph-key.ts';
import { arg } from './lib.ts';

const rounds = Number(arg('--rounds', '10'));
const requests = Number(arg('--requests', '200000'));
const REQUEST_STEPS = ['metrics', 'logging', 'auth', 'rate_limit', 'filter', 'cache', 'route'];
const RESPONSE_STEPS = ['transform', 'cache', 'logging', 'metrics'];

const profiler = await Profiler.create({
  enabled: true, slowStepThresholdUs: 1_000_000, alertOnSlowStep: false, perStepThresholds: {},
  histogramBuckets: [10, 50, 100, 500, 1000], filters: { operations: null, collections: null, minUpstreamLatencyUs: 0 },
  frameCapacity: Number(arg('--frames', '20000')),
}, { warn() {} });
const key = new GraphKey('bench', 'baseline', 1);
const timers = [
  ...REQUEST_STEPS.map((s) => profiler.bind(key, `wasm:${s}`, 0)),
  ...RESPONSE_STEPS.map((s) => profiler.bind(key, `wasm:${s}`, 1)),
];
const timings = new RequestTimings();
const r: CompletedRequest = {
  pipelineId: key.pipelineId, variant: key.variant, op: 'find', collection: 'items',
  totalNs: 150_000, acquireNs: 2_000, upstreamNs: 90_000, ok: true, timings,
};
function fill(i: number): void {
  timings.reset();
  for (let k = 0; k < timers.length; k++) {
    if (k === 5) { timings.subop('cache.lookup', 800 + (i & 63)); timings.subop('bson.deserialize', 300); }
    if (k === 7) timings.subop('field.redact', 200);
    timings.step(timers[k]!, 1000 + ((i * 7 + k * 13) & 1023), false);
  }
}
const perRound: number[] = [];
for (let round = 0; round < rounds; round++) {
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < requests; i++) {
    fill(i);
    profiler.commit(r);
  }
  perRound.push(Number(process.hrtime.bigint() - t0) / requests);
}
fill(0);
const t0 = process.hrtime.bigint();
for (let i = 0; i < requests; i++) fill(i);
const fillNs = Number(process.hrtime.bigint() - t0) / requests;
const best = Math.min(...perRound);
console.log(`profiler commit: ${(best - fillNs).toFixed(0)} ns/request (min of ${rounds} rounds of ${requests}; `
  + `${best.toFixed(0)} incl. ${fillNs.toFixed(0)} ns filling the timings), frames kept ${profiler.frames.size}`);
