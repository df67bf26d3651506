// Profiling in a running proxy, through the real driver: the SPEC §2.1 snapshot's shape, step
// percentiles against latencies injected by a step that busy-waits a known time, the slow-step
// counter and log line, sampling filters, reset, disabled → 404, not configured → refused,
// per-request profiles, /metrics (promtool when installed), and reload switching profiling on/off.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { MongoClient } from 'mongodb';
import { parseConfig } from '../../runtime/config/index.ts';
import { startProxy, type RunningProxy } from '../../runtime/app/serve.ts';
import { Logger } from '../../runtime/log/index.ts';
import { profilingSettings } from '../../runtime/app/serve.ts';
import { GraphKey } from '../../runtime/pipeline/index.ts';
import { Profiler, SLOW_SUPPRESSED_MESSAGE, type StepStats } from '../../runtime/profiling/index.ts';
import { fixture } from '../wasm/fixtures.ts';
import { until } from '../helpers/until.ts';
import { promtoolFindings } from '../helpers/promtool.ts';

const running: RunningProxy[] = [];
const clients: MongoClient[] = [];
after(async () => {
  for (const c of clients) await c.close(true).catch(() => {});
  for (const p of running) await p.close().catch(() => {});
});

async function start(profiling: Record<string, unknown> | undefined, extra: Record<string, unknown> = {}) {
  const lines: Array<Record<string, unknown>> = [];
  const log = new Logger('test', 'warn', 'json', {
    write: (l: string) => { for (const s of l.split('\n')) if (s.trim() !== '') lines.push(JSON.parse(s)); },
  });
  const spin = await fixture('spin');
  const raw: Record<string, unknown> = {
    listen: '127.0.0.1:0', log: { level: 'warn' },
    pipeline: { request: ['spin', 'filter'], response: ['logging'] },
    steps: { spin: { module: spin, config: {} }, filter: { config: { rules: [{ name: 'no-drop', action: 'deny', ops: ['drop'] }],
      default: 'allow' } }, logging: { config: { sample_rate: 0 } } },
    ...extra,
  };
  if (profiling !== undefined) raw.profiling = { port: 0, ...profiling };
  const proxy = await startProxy(parseConfig(raw, null), { log });
  running.push(proxy);
  const client = new MongoClient(proxy.uri, { serverSelectionTimeoutMS: 5000 });
  clients.push(client);
  return { proxy, client, lines };
}

const get = async (url: string) => {
  const r = await fetch(url);
  return { status: r.status, type: r.headers.get('content-type') ?? '',
    body: r.headers.get('content-type')?.includes('json') ? await r.json() : await r.text() };
};

test('GET /api/profile: SPEC §2.1 fields, integer µs, one row per (step, phase); percentiles match injected latencies', { timeout: 60_000 }, async () => {
  const { proxy, client } = await start({ enabled: true, slow_step_threshold_us: 1_000_000 });
  const db = client.db('prof');
  // 90 requests spinning 200 µs, 10 spinning 5,000 µs: p50 ≈ 200, p95/p99 ≈ 5,000.
  for (let i = 0; i < 90; i++) await db.collection('us_200').findOne({});
  for (let i = 0; i < 10; i++) await db.collection('us_5000').findOne({});
  const { status, type, body } = await get(`${proxy.profilingUrl}/api/profile`);
  assert.equal(status, 200);
  assert.match(type, /application\/json/);
  assert.deepEqual(Object.keys(body).sort(), ['avg_pipeline_overhead_us', 'avg_total_latency_us', 'avg_upstream_latency_us', 'steps', 'total_requests']);
  assert.equal(body.total_requests, 100);
  for (const k of ['avg_total_latency_us', 'avg_upstream_latency_us', 'avg_pipeline_overhead_us']) assert.ok(Number.isInteger(body[k]), k);
  assert.ok(body.avg_total_latency_us >= body.avg_upstream_latency_us);
  // Each average is rounded on its own, so the difference may be off by one.
  assert.ok(Math.abs(body.avg_pipeline_overhead_us - (body.avg_total_latency_us - body.avg_upstream_latency_us)) <= 1,
    `overhead ${body.avg_pipeline_overhead_us} = total ${body.avg_total_latency_us} − upstream ${body.avg_upstream_latency_us} (±1 rounding)`);
  const rows = body.steps as Array<Record<string, unknown>>;
  assert.deepEqual(rows.map((r) => `${r.name}/${r.phase}`), ['wasm:spin/request', 'wasm:filter/request', 'wasm:logging/response']);
  for (const r of rows) {
    assert.deepEqual(Object.keys(r).sort(), ['avg_latency_us', 'errors', 'invocations', 'max_latency_us', 'name', 'p50_latency_us', 'p95_latency_us',
      'p99_latency_us', 'phase']);
    for (const [k, v] of Object.entries(r)) if (k !== 'name' && k !== 'phase') assert.ok(Number.isInteger(v), `${k} is an integer`);
    assert.equal(r.invocations, 100);
  }
  const spin = rows[0] as Record<string, number>;
  // A busy-wait is at least its time and, on a loaded machine, rarely much more.
  // p50 falls among the ninety 200 µs requests: below the 5 ms ones even when descheduled.
  assert.ok(spin.p50_latency_us >= 200 && spin.p50_latency_us < 5000, `p50 ${spin.p50_latency_us}`);
  // p95 and p99 fall among the ten 5 ms requests (a descheduled busy-wait may take longer, never less).
  assert.ok(spin.p95_latency_us >= 5000 && spin.p99_latency_us >= spin.p95_latency_us && spin.p99_latency_us <= spin.max_latency_us,
    `p95 ${spin.p95_latency_us}, p99 ${spin.p99_latency_us}, max ${spin.max_latency_us}`);
  assert.ok(spin.max_latency_us >= 5000);
  assert.ok(spin.avg_latency_us >= (90 * 200 + 10 * 5000) / 100);
});

test('slow steps: counter per step and phase, a "slow step detected" line (logger proxy::profiling) rate-limited per step', { timeout: 60_000 }, async () => {
  const { proxy, client, lines } = await start({ enabled: true, slow_step_threshold_us: 1_000_000, per_step_thresholds: { 'wasm:spin': 1000 } });
  const db = client.db('prof');
  for (let i = 0; i < 20; i++) await db.collection('us_3000').findOne({});
  await db.collection('us_10').findOne({});
  const metrics = (await get(`${proxy.profilingUrl}/metrics`)).body as string;
  assert.match(metrics, /proxy_step_slow_total\{pipeline_id="default",pipeline="baseline",step="wasm:spin",phase="request"\} 20\n/);
  assert.match(metrics, /proxy_step_slow_total\{pipeline_id="default",pipeline="baseline",step="wasm:filter",phase="request"\} 0\n/);
  const slow = lines.filter((l) => l.msg === 'slow step detected');
  assert.ok(slow.length >= 1 && slow.length < 20, `rate-limited: ${slow.length} lines for 20 slow invocations`);
  const l = slow[0];
  assert.equal(l.level, 'warn');
  assert.equal(l.logger, 'proxy::profiling');
  assert.match(String(l.time), /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/, 'ISO 8601 UTC timestamp');
  assert.equal(l.step, 'wasm:spin');
  assert.equal(l.phase, 'request');
  assert.equal(l.threshold_us, 1000);
  assert.ok(Number(l.latency_us) >= 3000);
});

const suppressedMetric = (metrics: string, step = 'wasm:spin') => {
  const m = new RegExp(`proxy_step_slow_log_suppressed_total\\{pipeline_id="default",pipeline="baseline",step="${step}",phase="request"\\} ` +
    `(\\d+)\\n`).exec(metrics);
  assert.ok(m !== null, 'proxy_step_slow_log_suppressed_total is exposed');
  return Number(m[1]);
};
const sumSuppressed = (lines: Array<Record<string, unknown>>) => lines.filter((l) => l.msg === SLOW_SUPPRESSED_MESSAGE).reduce((n,
  l) => n + Number(l.suppressed), 0);

test('slow-step lines held back by the rate limit: counted in proxy_step_slow_log_suppressed_total and reported in a summary line when the window ' +
  'closes', { timeout: 60_000 }, async () => {
  const { proxy, client, lines } = await start({ enabled: true, slow_step_threshold_us: 1_000_000, per_step_thresholds: { 'wasm:spin': 1000 } });
  const db = client.db('prof');
  for (let i = 0; i < 20; i++) await db.collection('us_3000').findOne({});
  // The step is never slow again: the count is reported by the window's timer, not by a later line.
  const metrics = (await get(`${proxy.profilingUrl}/metrics`)).body as string;
  const written = lines.filter((l) => l.msg === 'slow step detected').length;
  const suppressed = suppressedMetric(metrics);
  assert.equal(written + suppressed, 20, `${written} lines written + ${suppressed} suppressed = every slow invocation`);
  assert.ok(suppressed > 0);
  assert.equal(suppressedMetric(metrics, 'wasm:filter'), 0);
  await until('the summary lines to report every suppressed line', () => sumSuppressed(lines) === suppressed, 10_000);
  const summary = lines.find((l) => l.msg === SLOW_SUPPRESSED_MESSAGE)!;
  assert.equal(summary.level, 'warn');
  assert.equal(summary.logger, 'proxy::profiling');
  assert.equal(summary.step, 'wasm:spin');
  assert.equal(summary.phase, 'request');
  assert.equal(summary.threshold_us, 1000);
  assert.ok(lines.filter((l) => l.msg === 'slow step detected').every((l) => l.suppressed === undefined), 'the count is on the summary line only');
});

test('slow-step lines held back are reported at shutdown: nothing is lost when the proxy stops inside the window', { timeout: 60_000 }, async () => {
  const { proxy, client, lines } = await start({ enabled: true, slow_step_threshold_us: 1_000_000, per_step_thresholds: { 'wasm:spin': 1000 } });
  for (let i = 0; i < 10; i++) await client.db('prof').collection('us_3000').findOne({});
  await client.close();
  await proxy.close();
  // Whether the window's timer fired before the stop or the stop reported the rest, every slow
  // invocation is on a line by the time close() returns.
  assert.equal(lines.filter((l) => l.msg === 'slow step detected').length + sumSuppressed(lines), 10);

  // The shutdown path alone (no timer can run inside synchronous code): the profiler's flush.
  const logged: Array<{ msg: string; fields: Record<string, unknown> }> = [];
  const profiler = await Profiler.create(profilingSettings(parseConfig({ profiling: { enabled: true, per_step_thresholds: { 'wasm:x': 10 } } },
    null).profiling!), { warn: (msg, fields = {}) => logged.push({ msg, fields }) });
  const s = profiler.bind(new GraphKey('default', 'baseline', 0), 'wasm:x', 0) as StepStats;
  for (let i = 0; i < 5; i++) s.record(50_000, false);
  assert.deepEqual(logged.map((l) => l.msg), ['slow step detected']);
  assert.equal(s.suppressedTotal, 4);
  profiler.flushSlowStepLog();
  assert.deepEqual(logged.map((l) => l.msg), ['slow step detected', SLOW_SUPPRESSED_MESSAGE]);
  assert.deepEqual(logged[1].fields, { step: 'wasm:x', phase: 'request', suppressed: 4, threshold_us: 10 });
  profiler.flushSlowStepLog();
  assert.equal(logged.length, 2, 'reported once');
});

test('slow steps are checked for requests the filters leave out: counted and logged, not recorded', { timeout: 60_000 }, async () => {
  const { proxy, client, lines } = await start({ enabled: true, slow_step_threshold_us: 1_000_000, per_step_thresholds: { 'wasm:spin': 1000 },
    filters: { operations: ['insert'] } });
  for (let i = 0; i < 3; i++) await client.db('prof').collection('us_3000').findOne({});
  const metrics = (await get(`${proxy.profilingUrl}/metrics`)).body as string;
  assert.match(metrics, /proxy_step_slow_total\{pipeline_id="default",pipeline="baseline",step="wasm:spin",phase="request"\} 3\n/);
  assert.ok(lines.some((l) => l.msg === 'slow step detected' && l.step === 'wasm:spin'));
  const snap = (await get(`${proxy.profilingUrl}/api/profile`)).body;
  assert.equal(snap.total_requests, 0, 'the finds are not sampled');
  assert.deepEqual(snap.steps, []);
});

test('rows follow pipeline order in each phase, whatever order the steps were compiled and bound in; a reload that reorders reorders them',
  { timeout: 60_000 }, async () => {
  // cache and transform run in both phases, in opposite orders: bind order (both phases of a step
  // at once) cannot match both.
    const pipeline = { request: ['cache', 'transform'], response: ['transform', 'logging', 'cache'] };
    const { proxy, client } = await start({ enabled: true, slow_step_threshold_us: 1_000_000 }, {
      pipeline,
      steps: {
        cache: { config: { ttl_ms: 60000 } }, logging: { config: { sample_rate: 0 } },
        transform: { config: { request: [{ op: 'unset', path: 'nonexistent_field' }], response: [{ op: 'unset', path: 'nonexistent_field' }] } },
      },
    });
    const rowsOf = async () => {
      await client.db('prof').collection('order').findOne({});
      const body = (await get(`${proxy.profilingUrl}/api/profile`)).body as { steps: Array<{ name: string; phase: string }> };
      return body.steps.map((r) => `${r.phase}:${r.name}`);
    };
    const expected = ['request:wasm:cache', 'request:wasm:transform', 'response:wasm:transform', 'response:wasm:logging', 'response:wasm:cache'];
    assert.deepEqual(await rowsOf(), expected);
    const series = proxy.snapshots!;
    await series.snapshot();
    const point = (await get(`${proxy.profilingUrl}/api/profile/series`)).body.points.at(-1);
    assert.deepEqual(point.steps.map((r: { name: string; phase: string }) => `${r.phase}:${r.name}`), expected, 'the series rows too');
    await proxy.reload(parseConfig({ ...proxy.config, pipeline: { ...proxy.config.pipeline, request: ['transform', 'cache'],
      response: ['cache', 'logging', 'transform'] } }, null));
    assert.deepEqual(await rowsOf(), [
      'request:wasm:transform', 'request:wasm:cache', 'response:wasm:cache', 'response:wasm:logging', 'response:wasm:transform',
    ]);
  });

test('upstream time has one definition: a request\'s proxy_profile.upstream_us is what /api/profile averages (pool wait included)',
  { timeout: 60_000 }, async () => {
    const { proxy } = await start({ enabled: true, slow_step_threshold_us: 1_000_000 });
    const pc = new MongoClient(proxy.uri, { appName: 'reporting?proxy_profile=true', serverSelectionTimeoutMS: 5000 });
    clients.push(pc);
    await pc.db('prof').command({ ping: 1 });
    await fetch(`${proxy.profilingUrl}/api/profile/reset`, { method: 'POST' });
    const reply = await pc.db('prof').command({ find: 'us_200', filter: {} });
    const snap = (await get(`${proxy.profilingUrl}/api/profile`)).body;
    assert.equal(snap.total_requests, 1);
    // The same nanoseconds, rounded once per figure.
    assert.ok(Math.abs(snap.avg_upstream_latency_us - reply.proxy_profile.upstream_us) <= 1,
    `/api/profile ${snap.avg_upstream_latency_us} µs, proxy_profile ${reply.proxy_profile.upstream_us} µs`);
    assert.ok(reply.proxy_profile.upstream_us > 0);
  });

test('a reload applies thresholds at once; histogram_buckets and flamegraph_frames are restart-only: warned, and every distribution keeps its bounds',
  { timeout: 60_000 }, async () => {
    const { proxy, client, lines } = await start({ enabled: true, slow_step_threshold_us: 1_000_000, histogram_buckets: [100, 1000], flamegraph_frames: 1000 });
    await client.db('prof').collection('us_10').findOne({});
    await proxy.reload(parseConfig({ ...proxy.config, profiling: { ...proxy.config.profiling, histogram_buckets: [50, 500, 5000],
      flamegraph_frames: 5000, per_step_thresholds: { 'wasm:spin': 1000 } } }, null));
    const warned = lines.find((l) => l.msg === 'configuration reloaded; these keys take effect only after a restart');
    assert.ok(warned !== undefined, 'the restart-only warning');
    assert.deepEqual(warned.keys, ['profiling.histogram_buckets', 'profiling.flamegraph_frames']);
    assert.deepEqual(proxy.profiler!.settings.histogramBuckets, [100, 1000]);
    assert.equal(proxy.profiler!.settings.frameCapacity, 1000);
    await client.db('prof').collection('us_3000').findOne({});
    const metrics = (await get(`${proxy.profilingUrl}/metrics`)).body as string;
    const les = [...metrics.matchAll(/proxy_step_latency_us_bucket\{[^}]*step="wasm:spin"[^}]*le="([^"]+)"\}/g)].map((m) => m[1]);
    assert.deepEqual(les, ['100', '1000', '+Inf'], 'the bounds it started with');
    assert.match(metrics, /proxy_step_slow_total\{pipeline_id="default",pipeline="baseline",step="wasm:spin",phase="request"\} 1\n/, 'the new ' +
    'threshold applies at once');
  });

test('filters sample only matching requests; reset clears; the per-request profile reaches profiling clients only', { timeout: 60_000 }, async () => {
  const { proxy, client } = await start({ enabled: true, filters: { operations: ['find'], collections: ['sampled'] } });
  const db = client.db('prof');
  await db.collection('sampled').insertOne({ a: 1 });
  await db.collection('sampled').findOne({});
  await db.collection('other').findOne({});
  let snap = (await get(`${proxy.profilingUrl}/api/profile`)).body;
  assert.equal(snap.total_requests, 1, 'only the find on "sampled"');

  const r = await fetch(`${proxy.profilingUrl}/api/profile/reset`, { method: 'POST' });
  assert.equal(r.status, 200);
  snap = (await get(`${proxy.profilingUrl}/api/profile`)).body;
  assert.equal(snap.total_requests, 0);
  assert.deepEqual(snap.steps, []);

  const plain = await db.command({ find: 'sampled', filter: {} });
  assert.equal(plain.proxy_profile, undefined, 'other clients get the upstream reply unchanged');
  const pc = new MongoClient(proxy.uri, { appName: 'reporting?proxy_profile=true' });
  clients.push(pc);
  const profiled = await pc.db('prof').command({ find: 'sampled', filter: {} });
  assert.equal(profiled.ok, 1);
  assert.equal(profiled.cursor.firstBatch.length, 1);
  const p = profiled.proxy_profile;
  assert.ok(Number.isInteger(p.total_us) && Number.isInteger(p.upstream_us));
  assert.ok(p.total_us >= p.upstream_us);
  assert.deepEqual(p.steps.map((s: { name: string; phase: string }) => `${s.name}/${s.phase}`),
    ['wasm:spin/request', 'wasm:filter/request', 'wasm:logging/response']);
  for (const s of p.steps) assert.ok(Number.isInteger(s.us));
});

test('every step invocation is counted; sub-operations are timed only for the requests whose flame-graph frame is kept, and the filters give a ' +
  'left-out request\'s token back', { timeout: 60_000 }, async () => {
  // flamegraph_frames 100: a burst of 10 frames, then one per 600 ms. 60 finds back to back keep
  // about 10 frames; the other requests are timed step by step but their sub-operations are not.
  const { proxy, client } = await start({ enabled: true, flamegraph_frames: 100, filters: { collections: ['kept'] } }, {
    pipeline: { request: ['cache'], response: ['cache'] },
    steps: { cache: { config: { ttl_ms: 60_000 } } },
  });
  const db = client.db('prof');
  await db.collection('kept').insertOne({ a: 1 });
  // Left out by the filters: had their tokens not come back, no frame would be left for "kept".
  for (let i = 0; i < 30; i++) await db.collection('other').findOne({ i });
  for (let i = 0; i < 60; i++) await db.collection('kept').findOne({ i });
  const detail = (await get(`${proxy.profilingUrl}/api/profile/steps/cache`)).body;
  const request = detail.phases.find((p: { phase: string }) => p.phase === 'request');
  assert.equal(request.invocations, 61, 'the insert and the 60 finds on "kept", each timed');
  const frames = proxy.profiler!.frames.size;
  assert.ok(frames >= 10 && frames < 30, `a burst of 10 frames and a few refills kept (${frames})`);
  const lookup = request.subops.find((s: { name: string }) => s.name === 'cache.lookup');
  assert.ok(lookup !== undefined, 'cache.lookup recorded');
  assert.ok(lookup.invocations <= frames, `cache.lookup timed in the kept requests only (${lookup.invocations} ≤ ${frames} frames)`);
  assert.ok(lookup.invocations >= frames - 1, `and in each of them that looked up (${lookup.invocations} of ${frames} frames; the insert does not)`);
  const folded = (await get(`${proxy.profilingUrl}/api/profile/flamegraph?format=folded`)).body as string;
  assert.match(folded, /request pipeline;wasm:cache;cache\.lookup \d+/, 'the kept frames carry the sub-operation');
});

test('without a sampling filter step times go to the histograms as each phase ends: every invocation counted once, and the requests ' +
  'outside the frame sample still give their steps to proxy_profile', { timeout: 60_000 }, async () => {
  // flamegraph_frames 100: a burst of 10 frames, then one per 600 ms; 40 finds back to back leave
  // most requests outside the sample, their step times stored nowhere but in the histograms.
  const { proxy, client } = await start({ enabled: true, flamegraph_frames: 100 });
  assert.equal(proxy.profiler!.recordsDirect, true, 'no filter, histograms in memory');
  const db = client.db('prof');
  for (let i = 0; i < 40; i++) await db.collection('c').findOne({ i });
  const snap = (await get(`${proxy.profilingUrl}/api/profile`)).body;
  assert.equal(snap.total_requests, 40);
  const rows = snap.steps.map((r: { name: string; phase: string; invocations: number }) => `${r.name}/${r.phase} ${r.invocations}`);
  assert.deepEqual(rows.sort(), ['wasm:filter/request 40', 'wasm:logging/response 40', 'wasm:spin/request 40']);
  const frames = proxy.profiler!.frames.size;
  assert.ok(frames >= 10 && frames < 30, `a burst of frames kept (${frames})`);
  const folded = (await get(`${proxy.profilingUrl}/api/profile/flamegraph?format=folded`)).body as string;
  assert.match(folded, /request pipeline;wasm:spin \d+/, 'the kept frames carry their steps');
  // A client that asks for proxy_profile, once the frame budget is spent: its steps are kept for the reply.
  const pc = new MongoClient(proxy.uri, { appName: 'reporting?proxy_profile=true' });
  clients.push(pc);
  for (let i = 0; i < 5; i++) {
    const profiled = await pc.db('prof').command({ find: 'c', filter: {} });
    assert.deepEqual(profiled.proxy_profile.steps.map((x: { name: string; phase: string }) => `${x.name}/${x.phase}`),
      ['wasm:spin/request', 'wasm:filter/request', 'wasm:logging/response'], `request ${i}`);
  }
  // A filter (on reload) records at commit instead: the same requests, the same counts.
  const filtered = parseConfig({
    listen: '127.0.0.1:0', log: { level: 'warn' }, profiling: { port: 0, enabled: true, filters: { collections: ['c'] } },
    pipeline: { request: ['filter'], response: [] }, steps: { filter: { config: { rules: [], default: 'allow' } } },
  }, null);
  proxy.profiler!.configure(profilingSettings(filtered.profiling!));
  assert.equal(proxy.profiler!.recordsDirect, false, 'a filter is decided at the end of the request');
  for (let i = 0; i < 10; i++) await db.collection('c').findOne({ i });
  await db.collection('other').findOne({});
  const after = (await get(`${proxy.profilingUrl}/api/profile`)).body;
  assert.equal(after.total_requests, 40 + 5 + 10);
  const spin = after.steps.find((r: { name: string }) => r.name === 'wasm:spin');
  assert.equal(spin.invocations, 40 + 5 + 10, 'the find on "other" is left out');
});

test('disabled → /api/profile 404 (metrics still served); not configured → connection refused; reload turns profiling on', { timeout: 60_000 }, async () => {
  const { proxy, client } = await start({ enabled: false });
  await client.db('prof').collection('x').findOne({});
  const off = await get(`${proxy.profilingUrl}/api/profile`);
  assert.equal(off.status, 404);
  assert.equal(off.body.error.code, 'PROXY_ERR_PROFILING_DISABLED');
  assert.equal((await get(`${proxy.profilingUrl}/metrics`)).status, 200);
  assert.equal(proxy.pipelines.get().timed, false, 'disabled: graphs run the untimed loop');

  await proxy.reload(parseConfig({ ...proxy.config, profiling: { ...proxy.config.profiling, enabled: true } }, null));
  assert.equal(proxy.pipelines.get().timed, true);
  await client.db('prof').collection('x').findOne({});
  const on = await get(`${proxy.profilingUrl}/api/profile`);
  assert.equal(on.status, 200);
  assert.equal(on.body.total_requests, 1);

  const bad = await get(`${proxy.profilingUrl}/api/profile?pipeline=green`);
  assert.equal(bad.status, 400);
  assert.equal(bad.body.error.code, 'PROXY_ERR_BAD_QUERY');

  const none = await start(undefined);
  assert.equal(none.proxy.profilingUrl, null);
  await assert.rejects(fetch('http://127.0.0.1:9091/api/profile'), 'nothing listens on the default port when profiling is not configured');
});

test('a token protects the endpoint; /metrics passes promtool (only the SPEC names\' unit lint)', { timeout: 60_000 }, async () => {
  const token = 'profiling-token-0123456789';
  const { proxy, client } = await start({ enabled: true, token });
  await client.db('prof').collection('us_10').findOne({});
  assert.equal((await fetch(`${proxy.profilingUrl}/api/profile`)).status, 401);
  const r = await fetch(`${proxy.profilingUrl}/metrics`, { headers: { authorization: `Bearer ${token}` } });
  assert.equal(r.status, 200);
  const text = await r.text();
  assert.match(text, /proxy_step_latency_us_bucket\{pipeline_id="default",pipeline="baseline",step="wasm:spin",phase="request",le="\+Inf"\} 1\n/);
  assert.match(text, /proxy_requests_total\{pipeline_id="default",pipeline="baseline",status="ok"\} 1\n/);
  assert.match(text, /proxy_request_duration_seconds\{pipeline_id="default",pipeline="baseline",quantile="0.99"\} /);
  const findings = promtoolFindings(text);
  if (findings !== null) assert.deepEqual(findings, [], `promtool findings: ${findings.join(' | ')}`);
});

test('a sub-operation named after the client\'s collection (";", a newline, a count) forges no frame, line or count in the flame graph',
  { timeout: 60_000 }, async () => {
    const { proxy, client } = await start({ enabled: true }, {
      pipeline: { request: ['names'], response: [] }, steps: { names: { module: await fixture('subop_name'), config: {} } },
    });
    const hostile = 'x;forged;frame 999999999\nproxy;forged 123456789';
    for (let i = 0; i < 3; i++) await client.db('prof').collection(hostile).findOne({});
    const folded = (await get(`${proxy.profilingUrl}/api/profile/flamegraph?format=folded`)).body as string;
    const lines = folded.trimEnd().split('\n');
    for (const l of lines) assert.match(l, /^[^;\n]+(;[^;\n]+)* \d+(\.\d+)?$/, `a stack line: ${JSON.stringify(l)}`);
    const sub = lines.filter((l) => l.startsWith('request pipeline;wasm:names;lookup '));
    assert.equal(sub.length, 1, folded);
    assert.match(sub[0], /^request pipeline;wasm:names;lookup x_forged_frame 999999999_proxy_forged 123456789 \d+(\.\d+)?$/, 'one frame, three deep');
    assert.ok(!lines.some((l) => /forged/.test(l.split(';')[0]) || l.startsWith('proxy;')), 'no line or top frame forged');
    assert.ok(Number(sub[0].slice(sub[0].lastIndexOf(' ') + 1)) < 123456789, 'the count is the measured one');
    const svg = (await get(`${proxy.profilingUrl}/api/profile/flamegraph`)).body as string;
    assert.doesNotMatch(svg, /<title>forged/, 'no frame named "forged" in the SVG');
    // `proxy profile --step` lists the sub-operation by name: the newline escaped, no line of its own.
    const cli = await promisify(execFile)(process.execPath, ['bin/proxy.mjs', 'profile', '--url', proxy.profilingUrl!, '--step', 'names'],
      { encoding: 'utf8' });
    assert.ok(cli.stdout.includes('lookup x;forged;frame 999999999\\nproxy;forged 123456789'), cli.stdout);
    assert.doesNotMatch(cli.stdout, /^proxy;forged/m, 'no line forged');
  });
