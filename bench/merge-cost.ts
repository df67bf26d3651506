// What the machine's merged view costs the primary at scrape time (runtime/cluster/machine.ts):
// W workers each export their profiler's state (encoded HDR histograms: a graph's four, and one
// per step), the primary rebuilds its profiler from them (decode + add(), Profiler.replaceWith)
// and renders /metrics from it (profilingMetricsText) — with W = 16 workers × S = 50 steps by
// default. The IPC transfer itself is not included (structured clone of the states; measured by
// the workers test end to end, not here). Reported: ms per scrape, and the workers' export
// (which runs in each worker, in parallel) apart.
//
// Usage: node --import tsx bench/merge-cost.ts [--workers 16] [--steps 50] [--requests 20000] [--rounds 10]
import { performance } from 'node:perf_hooks';
import { GraphKey, RequestTimings } from '../runtime/pipeline/index.ts';
import { Profiler, profilingMetricsText } from '../runtime/profiling/index.ts';
import { Phase } from '../runtime/wasm/index.ts';
import { arg, median } from './lib.ts';

const W = Number(arg('--workers', '16'));
const S = Number(arg('--steps', '50'));
const N = Number(arg('--requests', '20000'));
const rounds = Number(arg('--rounds', '10'));
const settings = {
  enabled: true, slowStepThresholdUs: 1_000_000, alertOnSlowStep: false, perStepThresholds: {},
  histogramBuckets: [10, 50, 100, 500, 1000, 5000], filters: { operations: null, collections: null, minUpstreamLatencyUs: 0 }, frameCapacity: 1000,
};
const key = new GraphKey('default', 'baseline', 1);
const workers: Profiler[] = [];
for (let w = 0; w < W; w++) {
  const p = await Profiler.create(settings, { warn() {} });
  const timers = Array.from({ length: S }, (_, i) => p.bind(key, `wasm:step${i}`, i % 2 === 0 ? Phase.Request : Phase.Response));
  const t = new RequestTimings();
  for (let i = 0; i < N; i++) {
    t.reset();
    for (let k = 0; k < S; k++) t.step(timers[k]!, 500 + ((i * 7919 + k * 131 + w) % 200_000), false);
    p.commit({ pipelineId: 'default', variant: 'baseline', op: 'find', collection: 'c', totalNs: 200_000 + (i % 5_000_000), acquireNs: 1000,
      upstreamNs: 100_000, ok: true, timings: t });
  }
  workers.push(p);
}
const primary = await Profiler.create(settings, { warn() {} });
const exportMs: number[] = [];
const mergeMs: number[] = [];
const renderMs: number[] = [];
for (let r = 0; r < rounds; r++) {
  let t0 = performance.now();
  // Each worker's export runs in its own process; the slowest one is what the scrape waits for.
  let slowest = 0;
  const states = workers.map((p) => {
    const t = performance.now();
    // A fresh request per round, so the export cannot reuse its encoded cache.
    commitOne(p);
    const s = p.exportState();
    slowest = Math.max(slowest, performance.now() - t);
    return s;
  });
  exportMs.push(slowest);
  t0 = performance.now();
  primary.replaceWith(states, []);
  mergeMs.push(performance.now() - t0);
  t0 = performance.now();
  profilingMetricsText(primary);
  renderMs.push(performance.now() - t0);
}
console.log(JSON.stringify({
  workers: W, steps: S, requests_per_worker: N, rounds,
  worker_export_ms_median: +median(exportMs).toFixed(2), primary_merge_ms_median: +median(mergeMs).toFixed(2),
  metrics_render_ms_median: +median(renderMs).toFixed(2), scrape_ms_median: +(median(exportMs) + median(mergeMs) + median(renderMs)).toFixed(2),
}));

function commitOne(p: Profiler): void {
  const t = new RequestTimings();
  p.commit({ pipelineId: 'default', variant: 'baseline', op: 'find', collection: 'c', totalNs: 300_000, acquireNs: 0, upstreamNs: 100_000, ok: true,
    timings: t });
}
