// The request-path cost of profiling.storage "mmap" against "memory" (the profiler's in-process
// histograms), in one process, interleaved rounds, the best round of each reported:
//  1. one record() of a distribution — what each step invocation and each graph total costs;
//  2. Profiler.commit() of a request of the eight-built-in pipeline (11 step invocations: 7 request,
//     4 response — as bench/pipeline-bench.ts's "eight" target), the whole per-request recording.
// Latencies are drawn from a fixed list spanning 3 µs .. 40 ms so the histograms' buckets vary.
//   node --import tsx bench/profile-storage.ts [--rounds 12] [--n 200000]
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { GraphKey, RequestTimings } from '../runtime/pipeline/index.ts';
import { Profiler, type CompletedRequest, type ProfilingSettings, type StepStats } from '../runtime/profiling/index.ts';

const arg = (name: string, dflt: string) => {
  const i = process.argv.indexOf(name);
  return i >= 0 && i + 1 < process.argv.length ? process.argv[i + 1] : dflt;
};
const ROUNDS = Number(arg('--rounds', '12'));
const N = Number(arg('--n', '200000'));

const settings: ProfilingSettings = {
  enabled: true, slowStepThresholdUs: 1_000_000, alertOnSlowStep: false, perStepThresholds: {},
  histogramBuckets: [50, 100, 250, 500, 1000, 2500, 5000, 10000, 25000, 50000, 100000, 250000, 1000000],
  filters: { operations: null, collections: null, minUpstreamLatencyUs: 0 }, frameCapacity: 20_000,
};
const REQUEST = ['metrics', 'logging', 'auth', 'rate_limit', 'filter', 'cache', 'route'];
const RESPONSE = ['transform', 'cache', 'logging', 'metrics'];
const LATENCIES_NS = Array.from({ length: 1024 }, (_, i) => Math.round(3000 * Math.pow(1.0089, i))); // 3 µs .. ~26 ms

async function setup(mmap: boolean, dir: string) {
  const p = await Profiler.create(settings, { warn: () => {} }, mmap ? { path: join(dir, 'bench.hist'), sizeMb: 1, defaultPipelineId: 'bench' } : null);
  const key = new GraphKey('bench', 'baseline', 0);
  const req = REQUEST.map((s) => p.bind(key, `wasm:${s}`, 0) as StepStats);
  const res = RESPONSE.map((s) => p.bind(key, `wasm:${s}`, 1) as StepStats);
  const timings = new RequestTimings();
  const done: CompletedRequest = { pipelineId: 'bench', variant: 'baseline', op: 'find', collection: 'items', totalNs: 0, acquireNs: 0, upstreamNs: 0,
    ok: true, timings };
  return { p, req, res, timings, done };
}

type Setup = Awaited<ReturnType<typeof setup>>;

function recordRound(s: Setup): number {
  const d = s.req[0].latency;
  const t0 = performance.now();
  for (let i = 0; i < N; i++) d.record(LATENCIES_NS[i & 1023], false);
  return ((performance.now() - t0) * 1e6) / N;
}

function commitRound(s: Setup): number {
  const n = N / 10;
  const t0 = performance.now();
  for (let i = 0; i < n; i++) {
    const t = s.timings;
    t.reset();
    for (let j = 0; j < s.req.length; j++) t.step(s.req[j], LATENCIES_NS[(i + j) & 1023], false);
    for (let j = 0; j < s.res.length; j++) t.step(s.res[j], LATENCIES_NS[(i + 7 * j) & 1023], false);
    s.done.totalNs = 400_000 + LATENCIES_NS[i & 1023];
    s.done.upstreamNs = 300_000;
    s.done.acquireNs = i & 1 ? 2000 : 0;
    s.p.commit(s.done);
  }
  return ((performance.now() - t0) * 1e6) / n;
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'profile-storage-'));
  const memory = await setup(false, dir);
  const mmap = await setup(true, dir);
  const best = { recMem: Infinity, recMap: Infinity, comMem: Infinity, comMap: Infinity };
  for (let r = 0; r < ROUNDS; r++) {
    // Alternate which goes first, so neither always runs on a warmer cache.
    const order: Array<[Setup, 'Mem' | 'Map']> = r % 2 === 0 ? [[memory, 'Mem'], [mmap, 'Map']] : [[mmap, 'Map'], [memory, 'Mem']];
    for (const [s, k] of order) best[`rec${k}`] = Math.min(best[`rec${k}`], recordRound(s));
    for (const [s, k] of order) best[`com${k}`] = Math.min(best[`com${k}`], commitRound(s));
  }
  rmSync(dir, { recursive: true, force: true });
  const f = (x: number) => x.toFixed(1);
  process.stdout.write([
    `record(), one distribution:       memory (HDR, WebAssembly) ${f(best.recMem)} ns, mmap ${f(best.recMap)} ns → ` +
      `mmap/memory ${(best.recMap / best.recMem).toFixed(2)}×`,
    `commit(), eight built-ins request: memory ${f(best.comMem)} ns, mmap ${f(best.comMap)} ns → mmap/memory ${(best.comMap / best.comMem).toFixed(2)}×`,
    `(best of ${ROUNDS} interleaved rounds; ${N} records, ${N / 10} commits per round)`,
  ].join('\n') + '\n');
}

main().catch((err) => { console.error(err); process.exit(1); });
