// The machine's view of several workers (runtime/cluster/machine.ts) is the primary's profiler
// rebuilt from the workers' exported states (Profiler.replaceWith): HDR histograms add()ed, never
// percentiles averaged. Known latencies are committed into two "worker" profilers and into one that
// records their union; the merged percentiles equal the union's exactly.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseConfig } from '../../runtime/config/index.ts';
import { profilingSettings } from '../../runtime/app/serve.ts';
import { Profiler } from '../../runtime/profiling/index.ts';
import { GraphKey, RequestTimings } from '../../runtime/pipeline/index.ts';
import { Phase } from '../../runtime/wasm/index.ts';

const settings = profilingSettings(parseConfig({ profiling: { enabled: true, alert_on_slow_step: false } }, null).profiling!);
const quiet = { warn: () => {} };
const KEY = new GraphKey('default', 'baseline', 1);

/** Commits one request per latency (µs): its step took a tenth of it, upstream the rest. */
function commitAll(p: Profiler, latenciesUs: readonly number[]): void {
  const timer = p.bind(KEY, 'wasm:x', Phase.Request);
  for (const us of latenciesUs) {
    const t = new RequestTimings();
    t.step(timer, us * 100, false);
    p.commit({ pipelineId: 'default', variant: 'baseline', op: 'find', collection: 'c', totalNs: us * 1000, acquireNs: 0, upstreamNs: us * 900,
      ok: true, timings: t });
  }
}

test('merged percentiles equal those of the union of the recorded values, not an average of the workers\'', async () => {
  // Worker 0: fast requests; worker 1: a slow tail. Seeded, so the figures are the same every run.
  let seed = 7;
  const rnd = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
  const fast = Array.from({ length: 3000 }, () => 100 + Math.floor(rnd() * 400));
  const slow = Array.from({ length: 200 }, () => 5000 + Math.floor(rnd() * 45_000));
  const [w0, w1, union, machine] = await Promise.all([0, 1, 2, 3].map(() => Profiler.create(settings, quiet)));
  commitAll(w0, fast);
  commitAll(w1, slow);
  commitAll(union, [...fast, ...slow]);
  machine.replaceWith([w0.exportState(), w1.exportState()], []);
  const merged = machine.snapshot('default', 'baseline');
  const expected = union.snapshot('default', 'baseline');
  assert.equal(merged.total_requests, 3200);
  assert.deepEqual(merged, expected);
  const g = (p: Profiler) => p.graph('default', 'baseline');
  for (const q of [50, 90, 95, 99, 99.9]) {
    assert.equal(g(machine).total.hdr.getValueAtPercentile(q), g(union).total.hdr.getValueAtPercentile(q), `total p${q}`);
  }
  // What averaging the workers' p99 would have said is far from the truth.
  const averaged = (g(w0).total.hdr.getValueAtPercentile(99) + g(w1).total.hdr.getValueAtPercentile(99)) / 2;
  assert.ok(Math.abs(averaged - g(union).total.hdr.getValueAtPercentile(99)) > 1000, 'the averaged p99 (µs) would differ by more than 1 ms');
  // Rebuilding again (the next scrape) gives the same figures: the view is replaced, not added to.
  machine.replaceWith([w0.exportState(), w1.exportState()], []);
  assert.deepEqual(machine.snapshot('default', 'baseline'), expected);
});

test('the merged flame graph reads every worker\'s frames', async () => {
  const [w0, w1, machine] = await Promise.all([0, 1, 2].map(() => Profiler.create(settings, quiet)));
  commitAll(w0, [100, 200]);
  commitAll(w1, [300]);
  const frames = [...w0.recentFrames(60_000), ...w1.recentFrames(60_000)].sort((a, b) => a.at - b.at);
  assert.equal(frames.length, 3);
  machine.replaceWith([w0.exportState(), w1.exportState()], frames);
  assert.deepEqual(machine.recentFrames(60_000).map((f) => f.totalNs).sort(), [100_000, 200_000, 300_000]);
  assert.equal(machine.recentFrames(60_000, 'other').length, 0);
});
