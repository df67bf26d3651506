// `proxy profile` against real HTTP servers started here (node:http) that answer what
// runtime/http/profiling.ts answers — the same paths, JSON shapes and HDR encodings (histograms
// built with hdr-histogram-js from known values) — so the numbers the command prints can be checked
// against values computed from what was recorded. The command runs as a child process.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as hdr from 'hdr-histogram-js';

const dir = mkdtempSync(join(tmpdir(), 'proxy-profile-'));
const bin = join(process.cwd(), 'bin/proxy.mjs');

// ---- fixtures shaped like runtime/http/profiling.ts -----------------------------------------------

function histogram(values: number[]): hdr.Histogram {
  const h = hdr.build({ lowestDiscernibleValue: 1, highestTrackableValue: 60_000_000, numberOfSignificantValueDigits: 3, bitBucketSize: 32,
    autoResize: false, useWebAssembly: false });
  for (const v of values) h.recordValue(v);
  return h;
}

const sum = (a: number[]) => a.reduce((x, y) => x + y, 0);
const repeat = (n: number, v: number) => new Array<number>(n).fill(v);

interface StepState { name: string; phase: 'request' | 'response'; values: number[]; errors?: number; slow?: number }
interface GraphState { pipeline_id: string; pipeline: string; ok: number; errors: number; total: number[]; upstream: number[]; steps: StepState[] }

/** Body of GET /api/profile/histograms for cumulative values (µs). */
function histogramsBody(since: string, graphs: GraphState[]) {
  return {
    since,
    graphs: graphs.map((g) => ({
      pipeline_id: g.pipeline_id, pipeline: g.pipeline, ok: g.ok, errors: g.errors,
      total: hdr.encodeIntoCompressedBase64(histogram(g.total)), total_sum_ns: sum(g.total) * 1000,
      upstream: hdr.encodeIntoCompressedBase64(histogram(g.upstream)), upstream_sum_ns: sum(g.upstream) * 1000,
      steps: g.steps.map((s) => ({
        name: s.name, phase: s.phase, invocations: s.values.length, errors: s.errors ?? 0, sum_ns: sum(s.values) * 1000,
        max_ns: Math.max(0, ...s.values) * 1000, slow: s.slow ?? 0, hdr: hdr.encodeIntoCompressedBase64(histogram(s.values)),
      })),
    })),
  };
}

type Answer = { status?: number; body: unknown; type?: string };
interface Fixture { url: string; calls: string[]; close(): Promise<void> }

/** A real HTTP server; `route` answers each request (null: 404 PROXY_ERR_NOT_FOUND, as fastify's not-found handler). */
async function fixture(route: (req: IncomingMessage, u: URL) => Answer | null): Promise<Fixture> {
  const calls: string[] = [];
  const server = createServer((req, res) => {
    const u = new URL(req.url ?? '/', 'http://x');
    calls.push(`${req.method} ${u.pathname}${u.search}`);
    const a = route(req, u) ?? { status: 404, body: { error: { code: 'PROXY_ERR_NOT_FOUND', message: `no route ${req.method} ${u.pathname}` } } };
    const text = typeof a.body === 'string' ? a.body : JSON.stringify(a.body);
    res.writeHead(a.status ?? 200, { 'content-type': a.type ?? (typeof a.body === 'string' ? 'text/plain; charset=utf-8' : 'application/json') });
    res.end(text);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as { port: number }).port;
  return { url: `http://127.0.0.1:${port}`, calls, close: () => new Promise((r) => server.close(() => r())) };
}

/** Runs `proxy profile …` (asynchronously: the fixture servers live in this process). */
function run(args: string[], opts: { env?: Record<string, string>; onStdout?: (text: string,
  child: ReturnType<typeof spawn>) => void } = {}): Promise<{ status: number | null; stdout: string; stderr: string }> {
  const env = { ...process.env, ...opts.env };
  if (opts.env?.PROXY_PROFILE_URL === undefined) delete env.PROXY_PROFILE_URL;
  if (opts.env?.PROXY_PROFILE_TOKEN === undefined) delete env.PROXY_PROFILE_TOKEN;
  const child = spawn(process.execPath, [bin, 'profile', ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d) => { stdout += d; opts.onStdout?.(stdout, child); });
  child.stderr.on('data', (d) => { stderr += d; });
  const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
  return new Promise((resolve) => child.on('close', (status) => { clearTimeout(timer); resolve({ status, stdout, stderr }); }));
}

// ---- one-shot report --------------------------------------------------------------------------------

test('--duration: a report of exactly the window (end minus start histograms), without resetting', async () => {
  // Before the window: 1000 requests of 5 ms. In the window: 1000 requests of 1..1000 µs.
  const before = repeat(1000, 5000);
  const windowTotal = Array.from({ length: 1000 }, (_, i) => i + 1);
  const cacheBefore = repeat(1000, 900);
  const cacheWindow = Array.from({ length: 1000 }, (_, i) => (i % 100) + 1);
  const authWindow = repeat(1000, 7);
  const graph = (total: number[], ok: number, errors: number, cache: number[], auth: number[]): GraphState => ({
    pipeline_id: 'main', pipeline: 'baseline', ok, errors, total, upstream: repeat(total.length, 40),
    steps: [{ name: 'wasm:cache', phase: 'request', values: cache, errors: 0 },
      { name: 'wasm:auth', phase: 'request', values: auth, errors: auth.length > 0 ? 5 : 0 }],
  });
  // A candidate graph with more traffic and an idle old pipeline: neither is the baseline's busiest.
  const others = (n: number): GraphState[] => [
    { pipeline_id: 'main', pipeline: 'candidate', ok: n, errors: 0, total: repeat(n, 3), upstream: repeat(n, 1), steps: [] },
    { pipeline_id: 'old', pipeline: 'baseline', ok: 10, errors: 0, total: repeat(10, 2), upstream: repeat(10, 1), steps: [] },
  ];
  const start = histogramsBody('2025-01-01T00:00:00.000Z', [graph(before, 1000, 0, cacheBefore, []), ...others(5000)]);
  const end = histogramsBody('2025-01-01T00:00:00.000Z', [
    graph([...before, ...windowTotal], 1990, 10, [...cacheBefore, ...cacheWindow], authWindow), ...others(9000),
  ]);
  let reads = 0;
  const folded = 'request pipeline;wasm:cache 12.5\nupstream 40000\nproxy 100.25\n';
  const f = await fixture((req, u) => {
    if (u.pathname === '/api/profile/histograms') return { body: reads++ === 0 ? start : end };
    if (u.pathname === '/api/profile/flamegraph') return { body: folded };
    return null;
  });
  try {
    const out = join(dir, 'report.json');
    const r = await run(['--url', f.url, '--duration', '400ms', '--output', out]);
    assert.equal(r.status, 0, r.stderr);
    const rep = JSON.parse(readFileSync(out, 'utf8'));
    assert.equal(rep.report, 'proxy-profile');
    assert.equal(rep.pipeline_id, 'main');
    assert.equal(rep.pipeline, 'baseline');
    assert.equal(rep.total_requests, 1000);
    assert.equal(rep.errors, 10);
    assert.equal(rep.error_rate_pct, 1);
    assert.ok(rep.duration_s >= 0.4 && rep.duration_s < 5, `duration_s ${rep.duration_s}`);
    assert.ok(Math.abs(rep.throughput_rps - 1000 / rep.duration_s) < 0.06, `throughput ${rep.throughput_rps}`);
    assert.equal(rep.avg_total_latency_us, 501); // mean of 1..1000 = 500.5
    assert.equal(rep.avg_upstream_latency_us, 40);
    assert.equal(rep.avg_pipeline_overhead_us, 461); // 500.5 − 40, rounded
    assert.equal(rep.p99_total_latency_us, histogram(windowTotal).getValueAtPercentile(99));
    assert.equal(rep.p99_total_latency_us, 990, 'the window alone, not the 5 ms before it');
    assert.equal(rep.max_total_latency_us, 1000);
    assert.equal(rep.reset_during_window, false);
    const cache = rep.steps.find((s: { name: string }) => s.name === 'wasm:cache');
    assert.deepEqual(cache, {
      name: 'wasm:cache', phase: 'request', avg_latency_us: 51, p50_latency_us: 50, p95_latency_us: 95, p99_latency_us: 99,
      max_latency_us: 100, invocations: 1000, errors: 0,
    });
    const auth = rep.steps.find((s: { name: string }) => s.name === 'wasm:auth');
    assert.equal(auth.invocations, 1000);
    assert.equal(auth.errors, 5);
    assert.deepEqual(rep.slowest_step, { name: 'wasm:cache', phase: 'request', p99_latency_us: 99 });
    assert.equal(rep.folded, folded);
    const fg = f.calls.find((c) => c.startsWith('GET /api/profile/flamegraph'))!;
    assert.match(fg, /format=folded/);
    assert.match(fg, /duration=\d+ms/);
    assert.match(fg, /pipeline_id=main&pipeline=baseline/);
    assert.ok(!f.calls.some((c) => c.startsWith('POST')), 'no reset without --reset');
    assert.match(r.stdout, /requests: +1,000 /);
    assert.match(r.stdout, /slowest: +wasm:cache \(request\) p99 99 µs/);
    assert.match(r.stdout, /report written to /);
  } finally {
    await f.close();
  }
});

test('--reset clears first; a reset by someone else during the window leaves only what followed it', async () => {
  const g = (n: number): GraphState => ({ pipeline_id: 'p', pipeline: 'baseline', ok: n, errors: 0, total: repeat(n, 300), upstream: repeat(n, 100),
    steps: [] });
  let reads = 0;
  const f = await fixture((req, u) => {
    if (req.method === 'POST' && u.pathname === '/api/profile/reset') return { body: { reset: true, since: '2025-01-01T00:00:00.000Z' } };
    if (u.pathname === '/api/profile/histograms') return { body: reads++ === 0 ? histogramsBody('2025-01-01T00:00:00.000Z',
      [g(500)]) : histogramsBody('2025-01-01T00:00:01.000Z', [g(200)]) };
    if (u.pathname === '/api/profile/flamegraph') return { body: '' };
    return null;
  });
  try {
    const r = await run(['--url', f.url, '--duration', '100ms', '--reset', '--json']);
    assert.equal(r.status, 0, r.stderr);
    const rep = JSON.parse(r.stdout);
    assert.equal(f.calls[0], 'POST /api/profile/reset');
    assert.equal(rep.reset_during_window, true);
    assert.equal(rep.total_requests, 200);
    assert.equal(rep.avg_pipeline_overhead_us, 200);
  } finally {
    await f.close();
  }
});

// ---- export --------------------------------------------------------------------------------------

const snapshot = {
  total_requests: 10, avg_total_latency_us: 100, avg_upstream_latency_us: 60, avg_pipeline_overhead_us: 40,
  steps: [
    { name: 'wasm:cache', phase: 'request', avg_latency_us: 5, p50_latency_us: 4, p95_latency_us: 9, p99_latency_us: 12, max_latency_us: 30,
      invocations: 10, errors: 0 },
    { name: 'wasm:odd,"name"', phase: 'response', avg_latency_us: 1, p50_latency_us: 1, p95_latency_us: 2, p99_latency_us: 3, max_latency_us: 4,
      invocations: 10, errors: 2 },
  ],
};

test('--pipeline <id> selects a pipeline\'s graph (--variant its baseline or candidate); "baseline"/"candidate" keep meaning the variant', async () => {
  const f = await fixture((_req, u) => (u.pathname === '/api/profile' ? { body: snapshot } : null));
  try {
    const one = await run(['--url', f.url, '--pipeline', 'reports', '--json']);
    assert.equal(one.status, 0, one.stderr);
    assert.equal(f.calls.at(-1), 'GET /api/profile?pipeline_id=reports&pipeline=baseline');
    const cand = await run(['--url', f.url, '--pipeline', 'reports', '--variant', 'candidate', '--json']);
    assert.equal(cand.status, 0, cand.stderr);
    assert.equal(f.calls.at(-1), 'GET /api/profile?pipeline_id=reports&pipeline=candidate');
    const legacy = await run(['--url', f.url, '--pipeline', 'candidate', '--json']);
    assert.equal(legacy.status, 0, legacy.stderr);
    assert.equal(f.calls.at(-1), 'GET /api/profile?pipeline=candidate');
    const clash = await run(['--url', f.url, '--pipeline', 'reports', '--pipeline-id', 'audit']);
    assert.equal(clash.status, 2);
    assert.match(clash.stderr, /--pipeline reports and --pipeline-id audit name different pipelines/);
    const bad = await run(['--url', f.url, '--variant', 'other']);
    assert.equal(bad.status, 2);
    assert.match(bad.stderr, /--variant must be baseline or candidate, got "other"/);
  } finally {
    await f.close();
  }
});

test('--export: one JSON line or CSV row per (step, phase) with the snapshot fields; --output or stdout', async () => {
  const f = await fixture((_req, u) => (u.pathname === '/api/profile' ? { body: snapshot } : null));
  try {
    const jsonl = await run(['--url', f.url, '--export', '--format', 'jsonl', '--pipeline', 'candidate', '--pipeline-id', '007']);
    assert.equal(jsonl.status, 0, jsonl.stderr);
    assert.deepEqual(jsonl.stdout.trimEnd().split('\n').map((l) => JSON.parse(l)), snapshot.steps);
    assert.equal(f.calls[0], 'GET /api/profile?pipeline_id=007&pipeline=candidate', 'ids are passed as typed, never as numbers');
    const file = join(dir, 'steps.csv');
    const csv = await run(['--url', f.url, '--export', '--format', 'csv', '--output', file]);
    assert.equal(csv.status, 0, csv.stderr);
    assert.equal(csv.stdout, '');
    assert.equal(readFileSync(file, 'utf8'), [
      'name,phase,avg_latency_us,p50_latency_us,p95_latency_us,p99_latency_us,max_latency_us,invocations,errors',
      'wasm:cache,request,5,4,9,12,30,10,0',
      '"wasm:odd,""name""",response,1,1,2,3,4,10,2',
    ].join('\n') + '\n');
    const bad = await run(['--url', f.url, '--export', '--format', 'xml']);
    assert.equal(bad.status, 2);
    assert.match(bad.stderr, /--format for --export is jsonl or csv, got "xml"/);
  } finally {
    await f.close();
  }
});

// ---- compare -------------------------------------------------------------------------------------

function report(o: Partial<Record<string, unknown>>): Record<string, unknown> {
  return {
    report: 'proxy-profile', source: ['http://x'], pipeline_id: 'main', pipeline: 'baseline', started_at: '2025-01-01T00:00:00.000Z',
    duration_s: 10, reset_during_window: false, errors: 0, error_rate_pct: 0, throughput_rps: 1000, total_requests: 10_000,
    avg_total_latency_us: 200, avg_upstream_latency_us: 150, avg_pipeline_overhead_us: 50,
    p50_total_latency_us: 180, p95_total_latency_us: 300, p99_total_latency_us: 400, max_total_latency_us: 900,
    slowest_step: null, steps: [], folded: null, ...o,
  };
}

test('--compare: throughput, average latency, P99, overhead, error rate and per-step changes', async () => {
  const step = (name: string, avg: number, p99: number) => ({ name, phase: 'request', avg_latency_us: avg, p50_latency_us: avg, p95_latency_us: p99,
    p99_latency_us: p99, max_latency_us: p99, invocations: 10, errors: 0 });
  const a = join(dir, 'base.json');
  const b = join(dir, 'exp.json');
  writeFileSync(a, JSON.stringify(report({ steps: [step('wasm:cache', 20, 80), step('wasm:auth', 5, 10)] })));
  writeFileSync(b, JSON.stringify(report({
    throughput_rps: 900, avg_total_latency_us: 250, p99_total_latency_us: 600, avg_pipeline_overhead_us: 75, errors: 50, error_rate_pct: 0.5,
    steps: [step('wasm:cache', 30, 60), step('wasm:filter', 3, 4)],
  })));
  const r = await run(['--compare', a, b, '--json']);
  assert.equal(r.status, 0, r.stderr);
  const d = JSON.parse(r.stdout);
  assert.deepEqual(d.metrics, {
    throughput_rps: { baseline: 1000, experiment: 900, delta: -100, delta_pct: -10 },
    avg_total_latency_us: { baseline: 200, experiment: 250, delta: 50, delta_pct: 25 },
    p99_total_latency_us: { baseline: 400, experiment: 600, delta: 200, delta_pct: 50 },
    avg_pipeline_overhead_us: { baseline: 50, experiment: 75, delta: 25, delta_pct: 50 },
    error_rate_pct: { baseline: 0, experiment: 0.5, delta: 0.5, delta_pct: null },
  });
  assert.deepEqual(d.steps, [
    { name: 'wasm:cache', phase: 'request', status: 'both', avg_latency_us: { baseline: 20, experiment: 30, delta: 10, delta_pct: 50 },
      p99_latency_us: { baseline: 80, experiment: 60, delta: -20, delta_pct: -25 } },
    { name: 'wasm:auth', phase: 'request', status: 'removed', avg_latency_us: null, p99_latency_us: null },
    { name: 'wasm:filter', phase: 'request', status: 'added', avg_latency_us: null, p99_latency_us: null },
  ]);
  const text = await run(['--compare', a, b]);
  assert.equal(text.status, 0, text.stderr);
  assert.match(text.stdout, /throughput req\/s +1,000 +900 +-100 \(-10\.0%\)/);
  assert.match(text.stdout, /p99 latency µs +400 +600 +\+200 \(\+50\.0%\)/);
  assert.match(text.stdout, /error rate +0\.00% +0\.50% +\+0\.50 pp/);
  assert.match(text.stdout, /wasm:cache +request +20 → 30 +\+10 \(\+50\.0%\) +80 → 60 +-20 \(-25\.0%\)/);
  const noStacks = await run(['--compare', a, b, '--output', join(dir, 'diff.svg')]);
  assert.equal(noStacks.status, 1);
  assert.match(noStacks.stderr, /carries no folded stacks/);
  const bad = await run(['--compare', a]);
  assert.equal(bad.status, 2);
  assert.match(bad.stderr, /--compare needs two reports/);
});

test('--compare --output: a differential flame graph from the reports\' folded stacks, per request', async () => {
  const a = join(dir, 'base-f.json');
  const b = join(dir, 'exp-f.json');
  writeFileSync(a, JSON.stringify(report({ folded: 'request pipeline;wasm:cache 1000\nupstream 9000\n' })));
  writeFileSync(b, JSON.stringify(report({ folded: 'request pipeline;wasm:cache 3000\nupstream 9000\n' })));
  const svg = join(dir, 'diff-f.svg');
  const r = await run(['--compare', a, b, '--output', svg]);
  assert.equal(r.status, 0, r.stderr);
  const doc = readFileSync(svg, 'utf8');
  assert.match(doc, /^<\?xml[\s\S]*<svg[\s\S]*wasm:cache/);
  assert.match(doc, /µs per request/);
  assert.match(r.stdout, /differential flame graph written to /);
});

// ---- aggregate -------------------------------------------------------------------------------------

test('--aggregate: histograms of several instances added, so the merged p99 is the p99 of all values', async () => {
  // A: 990 × 100 µs and 10 × 10 ms (p99 100 µs); B: 100 × 5 ms (p99 5 ms). Together p99 is 5 ms,
  // nowhere near the mean of the two p99s (2.55 ms).
  const aTotal = [...repeat(990, 100), ...repeat(10, 10_000)];
  const bTotal = repeat(100, 5000);
  const aCache = repeat(1000, 10);
  const bCache = repeat(100, 700);
  const state = (total: number[], cache: number[], errors: number): GraphState => ({
    pipeline_id: 'main', pipeline: 'baseline', ok: total.length - errors, errors, total, upstream: repeat(total.length, 50),
    steps: [{ name: 'wasm:cache', phase: 'request', values: cache, errors: 1 }],
  });
  const empty: GraphState = { pipeline_id: 'main', pipeline: 'baseline', ok: 0, errors: 0, total: [], upstream: [], steps: [] };
  const instance = async (total: number[], cache: number[], errors: number, folded: string) => {
    let reads = 0;
    return fixture((req, u) => {
      if (req.headers.authorization !== 'Bearer agg-token-0123456789') return { status: 401,
        body: { error: { code: 'PROXY_ERR_UNAUTHORIZED', message: 'missing or invalid bearer token' } } };
      if (u.pathname === '/api/profile/histograms') return { body: histogramsBody('2025-01-01T00:00:00.000Z',
        [reads++ === 0 ? empty : state(total, cache, errors)]) };
      if (u.pathname === '/api/profile/flamegraph') return { body: folded };
      return null;
    });
  };
  const a = await instance(aTotal, aCache, 4, 'upstream 10\nrequest pipeline;wasm:cache 2\n');
  const b = await instance(bTotal, bCache, 6, 'upstream 5\n');
  try {
    const out = join(dir, 'merged.json');
    const r = await run(['--aggregate', '--instances', `${a.url.slice(7)},${b.url}`, '--duration', '300ms', '--output', out],
      { env: { PROXY_PROFILE_TOKEN: 'agg-token-0123456789' } });
    assert.equal(r.status, 0, r.stderr);
    const m = JSON.parse(readFileSync(out, 'utf8'));
    const union = histogram([...aTotal, ...bTotal]);
    assert.equal(m.total_requests, 1100);
    assert.equal(m.errors, 10);
    assert.equal(m.p99_total_latency_us, union.getValueAtPercentile(99));
    const meanOfP99s = (histogram(aTotal).getValueAtPercentile(99) + histogram(bTotal).getValueAtPercentile(99)) / 2;
    assert.ok(Math.abs(m.p99_total_latency_us - meanOfP99s) > 2000, `merged p99 ${m.p99_total_latency_us} is not an average of percentiles`);
    assert.equal(m.avg_total_latency_us, Math.round(sum([...aTotal, ...bTotal]) / 1100));
    assert.ok(Math.abs(m.max_total_latency_us - 10_000) <= 10, `max ${m.max_total_latency_us}: 10 ms at HDR precision (3 digits)`);
    const cache = m.steps[0];
    assert.equal(cache.name, 'wasm:cache');
    assert.equal(cache.invocations, 1100);
    assert.equal(cache.errors, 2);
    assert.equal(cache.p99_latency_us, histogram([...aCache, ...bCache]).getValueAtPercentile(99));
    assert.equal(cache.p95_latency_us, histogram([...aCache, ...bCache]).getValueAtPercentile(95));
    assert.equal(cache.max_latency_us, 700);
    assert.deepEqual(m.source, [a.url, b.url]);
    assert.deepEqual(m.instances.map((i: { url: string; total_requests: number; errors: number; p99_total_latency_us: number }) => [i.url,
      i.total_requests, i.errors, i.p99_total_latency_us]), [
      [a.url, 1000, 4, histogram(aTotal).getValueAtPercentile(99)],
      [b.url, 100, 6, histogram(bTotal).getValueAtPercentile(99)],
    ]);
    assert.equal(m.folded, 'upstream 15\nrequest pipeline;wasm:cache 2\n');
  } finally {
    await a.close();
    await b.close();
  }
});

// ---- step detail, flame graph, live ---------------------------------------------------------------

const buckets = (counts: number[]) => [50, 100, 250].map((le, i) => ({ le_us: le, count: counts[i] })).concat([{ le_us: '+Inf' as never, count: counts[3] }]);

test('--step: phases, distribution as a text histogram, sub-operations, and the cache hit rate from /metrics', async () => {
  const dist = { invocations: 100, errors: 1, avg_latency_us: 40, p50_latency_us: 30, p90_latency_us: 80, p95_latency_us: 90, p99_latency_us: 200,
    p999_latency_us: 300, max_latency_us: 310, buckets: buckets([60, 30, 9, 1]) };
  const detail = {
    name: 'wasm:cache', pipeline_id: 'main', pipeline: 'baseline',
    phases: [{ phase: 'request', slow: 3, ...dist, subops: [{ name: 'cache.lookup', ...dist, invocations: 100 }] }],
  };
  const metrics = [
    '# TYPE proxy_plugin_cache_hits_total counter',
    'proxy_plugin_cache_hits_total{pipeline_id="main",pipeline="baseline"} 90',
    'proxy_plugin_cache_hits_total{pipeline_id="main",pipeline="candidate"} 5',
    'proxy_plugin_cache_misses_total{pipeline_id="main",pipeline="baseline"} 10',
  ].join('\n') + '\n';
  const f = await fixture((_req, u) => {
    if (u.pathname === '/api/profile/steps/cache') return { body: detail };
    if (u.pathname === '/metrics') return { body: metrics };
    return null;
  });
  try {
    const r = await run(['--url', f.url, '--step', 'cache']);
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, /wasm:cache in main\/baseline, since the last reset/);
    assert.match(r.stdout, /request +100 +1 +3 +40 +30 +80 +90 +200 +300 +310/);
    assert.match(r.stdout, /≤ 50 µs +60 +█{40} +60\.0%/);
    assert.match(r.stdout, /> 250 µs +1 +█? +1\.0%/);
    assert.match(r.stdout, /cache\.lookup +100/);
    assert.match(r.stdout, /cache: 90 hits, 10 misses, hit rate 90\.00%/);
    const j = await run(['--url', f.url, '--step', 'cache', '--json']);
    assert.deepEqual(JSON.parse(j.stdout).cache, { hits: 90, misses: 10, hit_rate_pct: 90 });
    const missing = await run(['--url', f.url, '--step', 'nope']);
    assert.equal(missing.status, 1);
    assert.match(missing.stderr, /no statistics for step nope/);
  } finally {
    await f.close();
  }
});

test('--flamegraph: the endpoint\'s SVG for the last --duration saved to --output', async () => {
  const f = await fixture((_req, u) => (u.pathname === '/api/profile/flamegraph' ? { body: '<svg>flame</svg>', type: 'image/svg+xml' } : null));
  try {
    const out = join(dir, 'flame.svg');
    const r = await run(['--url', f.url, '--flamegraph', '--duration', '30s', '--output', out, '--min-width', '0.5', '--title', 'T 1']);
    assert.equal(r.status, 0, r.stderr);
    assert.equal(readFileSync(out, 'utf8'), '<svg>flame</svg>');
    assert.equal(f.calls[0], 'GET /api/profile/flamegraph?pipeline=baseline&duration=30s&format=svg&min_width=0.5&title=T+1');
  } finally {
    await f.close();
  }
});

test('--live: a line per interval for steps over the threshold, a summary on SIGINT, exit 0', async () => {
  // Every read adds 100 fast calls and one of 5 ms to wasm:cache.
  let reads = 0;
  const f = await fixture((_req, u) => {
    if (u.pathname !== '/api/profile/histograms') return null;
    const n = reads++;
    const values = [...repeat(100 * n, 10), ...repeat(n, 5000)];
    return { body: histogramsBody('2025-01-01T00:00:00.000Z', [{ pipeline_id: 'main', pipeline: 'baseline', ok: 0, errors: 0, total: [], upstream: [],
      steps: [{ name: 'wasm:cache', phase: 'request', values }] }]) };
  });
  try {
    let signalled = false;
    const r = await run(['--url', f.url, '--live', '--threshold', '1ms'], {
      onStdout: (text, child) => {
        if (!signalled && (text.match(/over 1,000 µs/g) ?? []).length >= 2) { signalled = true; child.kill('SIGINT'); }
      },
    });
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, /\d\d:\d\d:\d\d  wasm:cache request: 1 of 101 calls over 1,000 µs, p99 10 µs, max 5,000 µs/);
    assert.match(r.stdout, /summary: [\d.]+ s, \d+ intervals, threshold 1,000 µs/);
    assert.match(r.stdout, /wasm:cache +request +\d+ +\d+ \(0\.99%\)/);
  } finally {
    await f.close();
  }
});

// ---- errors -----------------------------------------------------------------------------------------

test('errors: unreachable, disabled, token rejected (exit 1); bad usage (exit 2)', async () => {
  const closed = await fixture(() => null);
  await closed.close();
  const refused = await run(['--url', closed.url]);
  assert.equal(refused.status, 1);
  assert.match(refused.stderr, new RegExp(`profiling endpoint not reachable at ${closed.url} \\(is profiling configured\\? see docs/profiling\\.md\\)`));

  const f = await fixture((req, u) => {
    if (req.headers.authorization !== 'Bearer right-token-0123456789') return { status: 401,
      body: { error: { code: 'PROXY_ERR_UNAUTHORIZED', message: 'missing or invalid bearer token' } } };
    if (u.pathname.startsWith('/api/profile')) return { status: 404, body: { error: { code: 'PROXY_ERR_PROFILING_DISABLED', message: 'profiling is ' +
      'disabled (profiling.enabled: false)' } } };
    return null;
  });
  try {
    const disabled = await run(['--export'], { env: { PROXY_PROFILE_URL: f.url, PROXY_PROFILE_TOKEN: 'right-token-0123456789' } });
    assert.equal(disabled.status, 1);
    assert.match(disabled.stderr, /proxy profile: profiling is disabled at http/);
    const wrong = await run(['--url', f.url, '--token', 'wrong-token-0123456789']);
    assert.equal(wrong.status, 1);
    assert.match(wrong.stderr, /proxy profile: token rejected by http:\/\/127\.0\.0\.1:\d+\n/);
    const none = await run(['--url', f.url]);
    assert.match(none.stderr, /token rejected by .* \(the endpoint requires one: --token or PROXY_PROFILE_TOKEN\)/);
  } finally {
    await f.close();
  }

  for (const [args, message] of [
    [['--live', '--export'], /choose one of --live, --flamegraph, --step, --compare, --export, --aggregate, --mmap \(got --live, --export\)/],
    [['--variant', 'canary'], /--variant must be baseline or candidate, got "canary"/],
    [['--duration', '10'], /--duration "10" is not a duration/],
    [['--format', 'csv'], /--format does not apply to the snapshot/],
    [['--live', '--threshold', 'fast'], /--threshold "fast" is not a duration in microseconds/],
    [['--url', 'ftp://x'], /--url "ftp:\/\/x" must be http:\/\/ or https:\/\//],
    [['--aggregate'], /--aggregate needs --instances/],
  ] as Array<[string[], RegExp]>) {
    const r = await run(args);
    assert.equal(r.status, 2, `${args.join(' ')}: ${r.stderr}`);
    assert.match(r.stderr, message);
  }
});
