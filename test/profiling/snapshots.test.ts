// Persisted profiling snapshots (profiling.snapshot_dir), through running proxies and the real
// driver: statistics survive a restart (a second proxy on the same directory answers as the first
// did at its last snapshot, percentiles included) and a kill -9 of `proxy serve`; the series
// endpoint's per-interval figures against latencies injected by the `spin` step; retention; a
// corrupt or malformed state.json is ignored with a warning; reset clears the persisted state.
// The last test measures what a typical pipeline writes per day.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { appendFileSync, existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as hdr from 'hdr-histogram-js';
import { MongoClient } from 'mongodb';
import { parseConfig } from '../../runtime/config/index.ts';
import { Logger } from '../../runtime/log/index.ts';
import { GraphKey } from '../../runtime/pipeline/index.ts';
import { Profiler, SnapshotStore, seriesFileName, type SeriesRecord, type StepStats } from '../../runtime/profiling/index.ts';
import { profilingSettings } from '../../runtime/app/serve.ts';
import { encodeCompressedBase64 } from '../../runtime/profiling/profiler-state.ts';
import { MemorySeries } from '../../runtime/profiling/series-memory.ts';
import { fixture } from '../wasm/fixtures.ts';
import { until } from '../helpers/until.ts';
import { Closes, withProxy } from '../helpers/proxy.ts';

const running = new Closes();
const clients: MongoClient[] = [];
const children: ChildProcess[] = [];
const dirs: string[] = [];
after(async () => {
  for (const c of clients) await c.close(true).catch(() => {});
  await running.run().catch(() => {});
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

function tempDir(): string {
  const d = mkdtempSync(join(tmpdir(), 'proxy-snapshots-'));
  dirs.push(d);
  return d;
}

async function pipelineConfig(): Promise<Record<string, unknown>> {
  return {
    pipeline: { request: ['spin', 'filter'], response: ['logging'] },
    steps: { spin: { module: await fixture('spin'), config: {} }, filter: { config: { rules: [], default: 'allow' } },
      logging: { config: { sample_rate: 0 } } },
  };
}

/** A proxy persisting to `dir`; the interval is an hour unless given, so only explicit snapshots write. */
async function start(dir: string, profiling: Record<string, unknown> = {}) {
  const lines: Array<Record<string, unknown>> = [];
  const log = new Logger('test', 'info', 'json', {
    write: (l: string) => { for (const s of l.split('\n')) if (s.trim() !== '') lines.push(JSON.parse(s)); },
  });
  const raw = {
    listen: '127.0.0.1:0', log: { level: 'info' }, ...await pipelineConfig(),
    profiling: { enabled: true, port: 0, slow_step_threshold_us: 1_000_000, snapshot_dir: dir, snapshot_interval_s: 3600, ...profiling },
  };
  const { proxy } = await withProxy(running, raw, { log });
  const client = new MongoClient(proxy.uri, { serverSelectionTimeoutMS: 5000 });
  clients.push(client);
  return { proxy, client, lines, store: proxy.snapshots! };
}

const getJson = async (url: string) => {
  const r = await fetch(url);
  return { status: r.status, body: await r.json() };
};

/** What a restart must reproduce: the SPEC §2.1 snapshot, step detail (buckets, slow, sub-operations), the encoded histograms. */
async function everything(base: string) {
  const histograms = (await getJson(`${base}/api/profile/histograms`)).body;
  delete histograms.since;
  return {
    profile: (await getJson(`${base}/api/profile`)).body,
    spin: (await getJson(`${base}/api/profile/steps/spin`)).body,
    histograms,
  };
}

async function traffic(client: MongoClient, n200: number, n5000: number): Promise<void> {
  const db = client.db('snap');
  for (let i = 0; i < n200; i++) await db.collection('us_200').findOne({});
  for (let i = 0; i < n5000; i++) await db.collection('us_5000').findOne({});
}

test('statistics survive a restart: a second proxy on the same snapshot_dir answers as the first did at its last snapshot, percentiles included',
  { timeout: 120_000 }, async () => {
    const dir = tempDir();
    const a = await start(dir);
    await traffic(a.client, 90, 10);
    await a.store.snapshot();
    const before = await everything(a.proxy.profilingUrl!);
    assert.equal(before.profile.total_requests, 100);
    // A crash now: no timer, no last snapshot on close. What happens after it is not persisted.
    a.store.stopTimer();
    await traffic(a.client, 5, 0);

    const b = await start(dir);
    const restored = b.lines.find((l) => l.msg === 'restored profiling statistics from the last snapshot');
    assert.ok(restored, 'the restore is logged');
    assert.equal(restored.level, 'info');
    assert.equal(restored.requests, 100);
    assert.equal(restored.graphs, 1);
    assert.equal(restored.steps, 3);
    const afterRestart = await everything(b.proxy.profilingUrl!);
    assert.deepEqual(afterRestart, before);
    const spinRow = afterRestart.profile.steps[0];
    assert.ok(spinRow.p99_latency_us >= 5000 && spinRow.p50_latency_us >= 200 && spinRow.p50_latency_us < 1500, JSON.stringify(spinRow));

    // The restored statistics keep accumulating.
    await traffic(b.client, 1, 0);
    assert.equal((await getJson(`${b.proxy.profilingUrl}/api/profile`)).body.total_requests, 101);
    assert.equal((await getJson(`${b.proxy.profilingUrl}/api/profile`)).body.steps[0].invocations, 101);
  });

/** `proxy serve --config file` as a child; resolves once it prints its connection string and profiling URL. */
async function serve(file: string): Promise<{ child: ChildProcess; uri: string; profilingUrl: string; stderr: () => string }> {
  const child = spawn(process.execPath, [join(process.cwd(), 'bin/proxy.mjs'), 'serve', '--config', file, '--workers', '1'],
    { stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  let err = '';
  child.stderr!.on('data', (d) => { err += d; });
  const out = await new Promise<string>((resolve, reject) => {
    let text = '';
    const timer = setTimeout(() => reject(new Error(`not ready: ${text}${err}`)), 60_000);
    child.stdout!.on('data', (d) => {
      text += d;
      if (/Profiling: \S+/.test(text)) { clearTimeout(timer); resolve(text); }
    });
    child.once('exit', (code) => { clearTimeout(timer); reject(new Error(`exited ${code}: ${text}${err}`)); });
  });
  return {
    child, uri: /mongodb:\/\/\S+/.exec(out)![0], profilingUrl: /Profiling: (\S+)\/api\/profile/.exec(out)![1], stderr: () => err,
  };
}

function stateRequests(dir: string): number {
  try {
    const s = JSON.parse(readFileSync(join(dir, 'state.json'), 'utf8'));
    return s.graphs.reduce((n: number, g: { total: { count: number } }) => n + g.total.count, 0);
  } catch {
    return -1;
  }
}

test('kill -9: `proxy serve` restarted on the same snapshot_dir has the counts of its last snapshot (interval 1 s)', { timeout: 180_000 }, async () => {
  const dir = tempDir();
  const file = join(dir, 'proxy.json');
  writeFileSync(file, JSON.stringify({
    listen: '127.0.0.1:0', log: { level: 'info', format: 'json' }, ...await pipelineConfig(),
    profiling: { enabled: true, port: 0, slow_step_threshold_us: 1_000_000, snapshot_dir: join(dir, 'snapshots'), snapshot_interval_s: 1 },
  }));
  const first = await serve(file);
  const c1 = new MongoClient(first.uri, { serverSelectionTimeoutMS: 5000 });
  clients.push(c1);
  await traffic(c1, 40, 10);
  await until('a snapshot holding the 50 requests', () => stateRequests(join(dir, 'snapshots')) === 50, 20_000, 50);
  const before = await everything(first.profilingUrl);
  assert.equal(before.profile.total_requests, 50);
  await c1.close(true);
  const exited = new Promise((r) => first.child.once('exit', (_code, signal) => r(signal)));
  first.child.kill('SIGKILL');
  assert.equal(await exited, 'SIGKILL');

  const second = await serve(file);
  try {
    await until('the restore line', () => second.stderr().includes('restored profiling statistics'), 20_000, 50);
    const line = second.stderr().split('\n').find((l) => l.includes('restored profiling statistics'))!;
    assert.equal(JSON.parse(line).requests, 50);
    assert.deepEqual(await everything(second.profilingUrl), before);
    // Its series files were written once a second while it ran.
    const series = readdirSync(join(dir, 'snapshots')).filter((n) => n.startsWith('series-'));
    assert.ok(series.length >= 1, series.join());
  } finally {
    const exited2 = new Promise((r) => second.child.once('exit', r));
    second.child.kill('SIGTERM');
    await exited2;
  }
  // A graceful stop writes a last snapshot: still the 50.
  assert.equal(stateRequests(join(dir, 'snapshots')), 50);
});

test('GET /api/profile/series: one point per interval with that interval\'s figures; step, from/to filters; a truncated line is skipped',
  { timeout: 120_000 }, async () => {
    const dir = tempDir();
    const { proxy, client, store } = await start(dir);
    const base = `${proxy.profilingUrl}/api/profile/series`;
    const db = client.db('snap');
    await store.snapshot(); // interval 1: nothing yet
    for (let i = 0; i < 20; i++) await db.collection('us_300').findOne({});
    await store.snapshot(); // interval 2: 20 × 300 µs
    // A crash in the middle of an append leaves half a line; the next append starts a new one.
    appendFileSync(join(dir, seriesFileName(Date.now())), '{"v":1,"t":"2026-01-01T00:00:00.000Z","graphs":[{"pipel');
    for (let i = 0; i < 10; i++) await db.collection('us_3000').findOne({});
    await store.snapshot(); // interval 3: 10 × 3000 µs

    const { status, body } = await getJson(base);
    assert.equal(status, 200);
    assert.equal(body.interval_s, 3600);
    assert.equal(body.truncated, false);
    assert.equal(body.points.length, 3);
    const [p1, p2, p3] = body.points;
    for (const p of body.points) assert.match(p.t, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    assert.ok(Date.parse(p1.t) <= Date.parse(p2.t) && Date.parse(p2.t) <= Date.parse(p3.t));
    assert.deepEqual(p1, { t: p1.t, steps: [], total: { count: 0, avg_total_latency_us: 0, avg_upstream_latency_us: 0 } });

    assert.deepEqual(p2.steps.map((s: { name: string; phase: string }) => `${s.name}/${s.phase}`),
      ['wasm:spin/request', 'wasm:filter/request', 'wasm:logging/response']);
    const s2 = p2.steps[0];
    assert.deepEqual(Object.keys(s2).sort(), ['avg_latency_us', 'count', 'errors', 'max_latency_us', 'name', 'p50_latency_us', 'p95_latency_us',
      'p99_latency_us', 'phase']);
    assert.equal(s2.count, 20);
    assert.equal(s2.errors, 0);
    // The median separates the intervals (300 µs here, 3 ms in interval 3); a tail percentile would
    // not: on a loaded machine a 300 µs busy-wait that is descheduled can take several ms.
    assert.ok(s2.p50_latency_us >= 300 && s2.p50_latency_us < 3000, `interval 2 is the 300 µs one: p50 ${s2.p50_latency_us}`);
    assert.ok(s2.avg_latency_us >= 300 && s2.max_latency_us >= s2.p99_latency_us);
    assert.equal(p2.total.count, 20);
    assert.ok(p2.total.avg_total_latency_us >= p2.total.avg_upstream_latency_us && p2.total.avg_total_latency_us >= 300);

    const s3 = p3.steps[0];
    assert.equal(s3.count, 10, 'only interval 3\'s invocations');
    assert.ok(s3.p50_latency_us >= 3000 && s3.p50_latency_us > s2.p50_latency_us, `interval 3 is the 3 ms one: p50 ${s3.p50_latency_us}`);
    assert.ok(s3.avg_latency_us >= 3000);
    assert.equal(p3.total.count, 10);
    for (const s of p3.steps) assert.equal(s.count, 10);

    const onlySpin = (await getJson(`${base}?step=spin`)).body;
    assert.deepEqual(onlySpin.points[1].steps.map((s: { name: string }) => s.name), ['wasm:spin']);
    const fromMs = Date.parse(p2.t) + 1;
    assert.deepEqual((await getJson(`${base}?from=${fromMs}`)).body.points.map((p: { t: string }) => p.t), [p3.t]);
    const onlyP2 = (await getJson(`${base}?from=${encodeURIComponent(p2.t)}&to=${encodeURIComponent(p2.t)}`)).body;
    assert.deepEqual(onlyP2.points.map((p: { t: string }) => p.t), [p2.t]);
    const other = await getJson(`${base}?pipeline_id=other`);
    assert.equal(other.status, 404, 'a pipeline neither configured nor recorded');
    assert.equal(other.body.error.code, 'PROXY_ERR_NOT_FOUND');
    assert.equal((await getJson(`${base}?pipeline=candidate`)).body.points[2].total.count, 0, 'another graph of the pipeline (no canary ran): zeros');
    const bad = await getJson(`${base}?from=yesterday`);
    assert.equal(bad.status, 400);
    assert.equal(bad.body.error.code, 'PROXY_ERR_BAD_QUERY');
  });

test('without snapshot_dir the series is kept in memory: a proxy with a 1 s snapshot_interval_s serves points of its traffic, writes no file, and ' +
  'starts empty again after a restart', { timeout: 120_000 }, async () => {
  const lines: Array<Record<string, unknown>> = [];
  const log = new Logger('test', 'info', 'json', { write: (l: string) => { for (const x of l.split('\n')) if (x.trim() !== '') lines.push(JSON.parse(x)); } });
  const raw = { listen: '127.0.0.1:0', log: { level: 'info' }, ...await pipelineConfig(),
    profiling: { enabled: true, port: 0, slow_step_threshold_us: 1_000_000, snapshot_interval_s: 1 } };
  const { proxy } = await withProxy(running, raw, { log });
  assert.equal(proxy.snapshots!.persistent, false);
  assert.ok(lines.some((l) => l.msg === 'profiling snapshots kept in memory (statistics reset on restart; set profiling.snapshot_dir to persist ' +
    'them)' && l.interval_s === 1 && l.retention === '24h'));
  const client = new MongoClient(proxy.uri, { serverSelectionTimeoutMS: 5000 });
  clients.push(client);
  for (let i = 0; i < 12; i++) await client.db('snap').collection('us_300').findOne({});
  const base = `${proxy.profilingUrl}/api/profile/series`;
  type Point = { t: string; steps: Array<{ name: string; phase: string; count: number; p50_latency_us: number }>; total: { count: number } };
  let body: { interval_s: number; truncated: boolean; points: Point[] } = { interval_s: 0, truncated: false, points: [] };
  // The timer takes a point every second; the 12 requests land in one or two of them.
  await until('the series to hold the 12 requests', async () => {
    const r = await getJson(base);
    assert.equal(r.status, 200);
    body = r.body;
    return body.points.reduce((n, p) => n + p.total.count, 0) === 12;
  }, 30_000);
  assert.equal(body.interval_s, 1);
  assert.equal(body.truncated, false);
  const withTraffic = body.points.filter((p) => p.total.count > 0);
  assert.ok(withTraffic.length >= 1 && withTraffic.length <= 2, `${withTraffic.length} points with traffic`);
  const spin = withTraffic.flatMap((p) => p.steps.filter((s) => s.name === 'wasm:spin'));
  assert.equal(spin.reduce((n, s) => n + s.count, 0), 12);
  for (const s of spin) assert.ok(s.p50_latency_us >= 300, `p50 ${s.p50_latency_us}`);
  for (let i = 1; i < body.points.length; i++) assert.ok(Date.parse(body.points[i - 1].t) < Date.parse(body.points[i].t), 'oldest first');
  const spinOnly = (await getJson(`${base}?step=spin`)).body;
  assert.deepEqual(spinOnly.points.flatMap((p: Point) => p.steps.map((s) => s.name)).filter((n: string) => n !== 'wasm:spin'), []);
  assert.ok(proxy.snapshots!.memoryBytes > 0);
  assert.equal(proxy.snapshots!.dir, null);
  assert.equal(proxy.snapshots!.statePath, null, 'no state.json');
  // Statistics are not persisted: a new proxy (its own memory) starts from zero.
  const { proxy: again } = await withProxy(running, raw, { log: new Logger('test', 'error', 'json', { write: () => {} }) });
  assert.equal((await getJson(`${again.profilingUrl}/api/profile`)).body.total_requests, 0);
  assert.deepEqual((await getJson(`${again.profilingUrl}/api/profile/series`)).body.points.filter((p: Point) => p.total.count > 0), []);
});

test('GET /api/profile/series answers the interval still running as `live` (partial): a proxy with a 30 s snapshot_interval_s has a point of its ' +
  'traffic before the first snapshot', { timeout: 60_000 }, async () => {
  const raw = {
    listen: '127.0.0.1:0', log: { level: 'error' }, ...await pipelineConfig(),
    profiling: { enabled: true, port: 0, slow_step_threshold_us: 1_000_000, snapshot_interval_s: 30 },
  };
  const { proxy } = await withProxy(running, raw, { log: new Logger('test', 'error', 'json', { write: () => {} }) });
  const startedMs = Date.now();
  const client = new MongoClient(proxy.uri, { serverSelectionTimeoutMS: 5000 });
  clients.push(client);
  for (let i = 0; i < 7; i++) await client.db('snap').collection('us_300').findOne({});
  const base = `${proxy.profilingUrl}/api/profile/series`;
  const { status, body } = await getJson(base);
  assert.equal(status, 200);
  assert.ok(Date.now() - startedMs < 30_000, 'asked before the first snapshot');
  assert.deepEqual(body.points, [], 'no snapshot yet');
  const live = body.live;
  assert.equal(live.partial, true);
  assert.ok(Date.parse(live.since) <= Date.parse(live.t), `since ${live.since} ≤ t ${live.t}`);
  assert.equal(live.total.count, 7);
  const spin = live.steps.find((s: { name: string }) => s.name === 'wasm:spin');
  assert.equal(spin.count, 7);
  assert.ok(spin.p50_latency_us >= 300, `p50 ${spin.p50_latency_us}`);
  // Step filter and range apply to it as to the points; a range that ended before it leaves it out.
  assert.deepEqual((await getJson(`${base}?step=spin`)).body.live.steps.map((s: { name: string }) => s.name), ['wasm:spin']);
  assert.equal((await getJson(`${base}?to=${startedMs - 60_000}`)).body.live, null);
  // Peeking moves nothing: the snapshot takes the whole interval, and the live point starts again.
  assert.equal((await getJson(base)).body.live.total.count, 7);
  await proxy.snapshots!.snapshot();
  const after1 = (await getJson(base)).body;
  assert.equal(after1.points.length, 1);
  assert.equal(after1.points[0].total.count, 7, 'the snapshot holds the requests the live point showed');
  assert.equal(after1.live.total.count, 0);
  assert.ok(Date.parse(after1.live.since) >= Date.parse(after1.points[0].t) - 1);
});

test('the in-memory series is bounded: points older than the retention are dropped, and past its byte bound the oldest go first', () => {
  const rec = (ms: number, pad: number) => ({ v: 1, t: new Date(ms).toISOString(), interval_s: 30,
    graphs: [{ pipeline_id: 'default', pipeline: 'baseline', count: 1, errors: 0, avg_total_latency_us: 1, avg_upstream_latency_us: 1,
      steps: [['wasm:x'.padEnd(pad, 'x'), 'request', 1, 0, 1, 1, 1, 1, 1] as SeriesRecord['graphs'][0]['steps'][0]] }] });
  const q = { pipelineId: 'default', variant: 'baseline' as const, step: null, fromMs: 0, toMs: Number.MAX_SAFE_INTEGER };
  const t0 = Date.UTC(2030, 0, 1);
  const byTime = new MemorySeries(60_000);
  for (let k = 0; k <= 10; k++) byTime.append(rec(t0 + k * 30_000, 10), t0 + k * 30_000);
  assert.deepEqual(byTime.read(q).points.map((p) => p.t), [8, 9, 10].map((k) => new Date(t0 + k * 30_000).toISOString()), 'the last minute');
  assert.equal(byTime.bytes, 3 * JSON.stringify(rec(t0, 10)).length);
  assert.equal(byTime.cappedAt, null);
  const one = JSON.stringify(rec(t0, 1000)).length;
  const bySize = new MemorySeries(86_400_000, 3 * one);
  for (let k = 0; k < 10; k++) bySize.append(rec(t0 + k * 30_000, 1000), t0 + k * 30_000);
  assert.equal(bySize.length, 3);
  assert.ok(bySize.bytes <= 3 * one);
  assert.deepEqual(bySize.read(q).points.map((p) => p.t), [7, 8, 9].map((k) => new Date(t0 + k * 30_000).toISOString()));
  assert.equal(bySize.cappedAt, t0 + 3 * 30_000);
});

test('retention: series files whose whole hour is older than snapshot_retention are deleted at each snapshot', { timeout: 60_000 }, async () => {
  const dir = tempDir();
  const hour = 3_600_000;
  const now = Date.now();
  const old = [seriesFileName(Date.UTC(2020, 0, 1, 0)), seriesFileName(now - 2 * hour)];
  for (const n of old) writeFileSync(join(dir, n), '{"v":1,"t":"2020-01-01T00:00:00.000Z","interval_s":30,"graphs":[]}\n');
  writeFileSync(join(dir, 'notes.txt'), 'not a series file');
  const { store } = await start(dir, { snapshot_retention: '2s' });
  await store.snapshot();
  const left = readdirSync(dir).sort();
  for (const n of old) assert.ok(!left.includes(n), `${n} deleted`);
  assert.ok(left.includes(seriesFileName(Date.now())), 'the current hour stays (not all of it is older than 2 s)');
  assert.ok(left.includes('notes.txt') && left.includes('state.json'));

  // The boundary, with a clock the test moves: a file goes once the end of its hour is `retention` ago.
  const profiler = await Profiler.create(profilingSettings(parseConfig({ profiling: { enabled: true } }, null).profiling!), { warn: () => {} });
  const d2 = tempDir();
  const h0 = Date.UTC(2030, 5, 1, 10);
  let clock = h0 + 5 * 60_000;
  const log = { info: () => {}, warn: () => {}, error: () => {} };
  const s = new SnapshotStore(profiler, { dir: d2, intervalMs: 30_000, retentionMs: 90 * 60_000, log, now: () => clock });
  await s.snapshot();
  const f0 = seriesFileName(h0);
  assert.ok(existsSync(join(d2, f0)));
  clock = h0 + hour + 90 * 60_000 - 1;
  await s.snapshot();
  assert.ok(existsSync(join(d2, f0)), 'its last millisecond is not yet older than the retention');
  clock = h0 + hour + 90 * 60_000;
  await s.snapshot();
  assert.ok(!existsSync(join(d2, f0)), 'deleted');
  assert.ok(existsSync(join(d2, seriesFileName(clock))));
  await s.close();
});

test('a corrupt or malformed state.json is ignored with a warning (moved aside), never fatal; the next snapshot replaces it', { timeout: 60_000 }, async () => {
  for (const [what, body] of [
    ['not JSON', '{"format":"proxy-profiling-state","version":1,"graphs":[{"pipel'],
    ['an undecodable histogram', JSON.stringify({
      format: 'proxy-profiling-state', version: 1, written: '2026-01-01T00:00:00.000Z', since: '2026-01-01T00:00:00.000Z',
      graphs: [{
        pipeline_id: 'default', pipeline: 'baseline', ok: 5, errors: 0,
        ...Object.fromEntries(['total', 'upstream', 'overhead', 'acquire'].map((k) => [k,
          { count: 5, errors: 0, sum_ns: 5000, max_ns: 1000, le: [], buckets: [5], hdr: 'bm90IGEgaGlzdG9ncmFt' }])),
        steps: [],
      }],
    })],
  ] as const) {
    const dir = tempDir();
    writeFileSync(join(dir, 'state.json'), body);
    const { proxy, client, lines, store } = await start(dir);
    const warn = lines.find((l) => l.msg === 'ignoring an unreadable profiling snapshot; statistics start empty');
    assert.ok(warn, `${what}: warned`);
    assert.equal(warn.level, 'warn');
    assert.match(String(warn.moved_to), /\/state\.json\.corrupt-\d{4}-\d\d-\d\dT\d{6}\.\d{3}Z$/);
    assert.equal(readFileSync(String(warn.moved_to), 'utf8'), body, 'kept for inspection');
    const snap = (await getJson(`${proxy.profilingUrl}/api/profile`)).body;
    assert.equal(snap.total_requests, 0, `${what}: nothing half-restored`);
    await client.db('snap').collection('us_10').findOne({});
    await store.snapshot();
    assert.equal(stateRequests(dir), 1);
  }
});

test('unreadable state files moved aside get distinct names and only the newest 3 are kept (an older `state.json.corrupt` included)', async () => {
  const profiler = await Profiler.create(profilingSettings(parseConfig({ profiling: { enabled: true } }, null).profiling!), { warn: () => {} });
  const dir = tempDir();
  writeFileSync(join(dir, 'state.json.corrupt'), 'from an older version');
  writeFileSync(join(dir, 'state.json.corrupted-notes'), 'not ours');
  let clock = Date.UTC(2030, 0, 1, 12);
  const moved: string[] = [];
  const log = { info: () => {}, error: () => {}, warn: (_m: string, f?: Record<string, unknown>) => { moved.push(String(f?.moved_to)); } };
  // Two in the same millisecond: the second does not overwrite the first.
  for (const step of [0, 1000, 0, 60_000, 1]) {
    clock += step;
    writeFileSync(join(dir, 'state.json'), `corrupt #${moved.length}`);
    const s = new SnapshotStore(profiler, { dir, intervalMs: 30_000, retentionMs: 86_400_000, log, now: () => clock });
    assert.equal(await s.load(), null);
  }
  assert.equal(new Set(moved).size, 5, 'five distinct names');
  const left = readdirSync(dir).filter((n) => n.startsWith('state.json.corrupt-')).sort();
  assert.deepEqual(left, ['state.json.corrupt-2030-01-01T120001.000Z-2', 'state.json.corrupt-2030-01-01T120101.000Z',
    'state.json.corrupt-2030-01-01T120101.001Z']);
  assert.deepEqual(left.map((n) => readFileSync(join(dir, n), 'utf8')), ['corrupt #2', 'corrupt #3', 'corrupt #4'], 'the newest three, each its own');
  assert.ok(existsSync(join(dir, 'state.json.corrupted-notes')), 'a file not named by the store is left alone');
  assert.ok(!existsSync(join(dir, 'state.json.corrupt')), 'the older name counts as the oldest');
});

test('a state.json written by a newer version is left untouched: the proxy starts, logs an error naming the file and version, and persists ' +
  'nothing (series in memory)', { timeout: 60_000 }, async () => {
  const dir = tempDir();
  const body = JSON.stringify({ format: 'proxy-profiling-state', version: 2, written: '2031-01-01T00:00:00.000Z', graphs: [], extra: 'new' });
  writeFileSync(join(dir, 'state.json'), body);
  const { proxy, client, lines, store } = await start(dir);
  const err = lines.find((l) => typeof l.msg === 'string' && l.msg.startsWith('the profiling snapshot was written by a newer version'));
  assert.ok(err, 'logged');
  assert.equal(err.level, 'error');
  assert.equal(err.file, join(dir, 'state.json'));
  assert.equal(err.version, 2);
  assert.equal(err.supported_version, 1);
  assert.match(String(err.msg), /snapshot_dir/);
  assert.ok(!lines.some((l) => l.msg === 'profiling snapshots persisted'), 'not announced as persisted');
  assert.equal(store.persistent, false);
  await client.db('snap').collection('us_10').findOne({});
  await store.snapshot();
  await proxy.close();
  assert.equal(readFileSync(join(dir, 'state.json'), 'utf8'), body, 'not overwritten, even by the last snapshot at stop');
  assert.deepEqual(readdirSync(dir), ['state.json'], 'nothing moved aside, no series file');
});

test('POST /api/profile/reset clears the persisted state (a restart after it starts empty); series files are kept', { timeout: 60_000 }, async () => {
  const dir = tempDir();
  const a = await start(dir);
  await traffic(a.client, 5, 0);
  await a.store.snapshot();
  assert.equal(stateRequests(dir), 5);
  const seriesBefore = readdirSync(dir).filter((n) => n.startsWith('series-'));
  const r = await fetch(`${a.proxy.profilingUrl}/api/profile/reset`, { method: 'POST' });
  assert.equal(r.status, 200);
  await until('the empty state written', () => stateRequests(dir) === 0, 5000);
  a.store.stopTimer();
  const b = await start(dir);
  assert.equal((await getJson(`${b.proxy.profilingUrl}/api/profile`)).body.total_requests, 0);
  assert.deepEqual(readdirSync(dir).filter((n) => n.startsWith('series-')), seriesBefore);
  // The interval after a reset counts from the reset.
  await traffic(a.client, 3, 0);
  await a.store.snapshot();
  const points = (await getJson(`${a.proxy.profilingUrl}/api/profile/series`)).body.points;
  assert.equal(points.at(-1).total.count, 3);
});

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

test('bytes per day for a typical pipeline (8 steps × 2 phases, 1 graph, 30 s interval), on disk and in memory', { timeout: 120_000 }, async (t) => {
  const profiler = await Profiler.create(profilingSettings(parseConfig({ profiling: { enabled: true } }, null).profiling!), { warn: () => {} });
  const dir = tempDir();
  let clock = Date.UTC(2030, 0, 1, 0, 0, 0);
  const store = new SnapshotStore(profiler, { dir, intervalMs: 30_000, retentionMs: 86_400_000,
    log: { info: () => {}, warn: () => {}, error: () => {} }, now: () => clock });
  const memory = new SnapshotStore(profiler, { dir: null, intervalMs: 30_000, retentionMs: 86_400_000,
    log: { info: () => {}, warn: () => {}, error: () => {} }, now: () => clock });
  const key = new GraphKey('default', 'baseline', 1);
  const names = ['rate_limit', 'auth', 'filter', 'transform', 'cache', 'metrics', 'logging', 'route'];
  const steps: StepStats[] = [];
  for (const phase of [0, 1] as const) for (const n of names) steps.push(profiler.bind(key, `wasm:${n}`, phase) as StepStats);
  const g = profiler.graph('default', 'baseline');
  // 200 requests/s: 6000 per interval, step latencies spread over 5 µs .. 5 ms.
  let seed = 1;
  const rnd = () => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648);
  const intervals = 10;
  const snapshotMs: number[] = [];
  const stallMs: number[] = [];
  for (let k = 0; k < intervals; k++) {
    for (let i = 0; i < 6000; i++) {
      let sum = 0;
      for (const s of steps) {
        const ns = Math.round(5000 * Math.exp(rnd() * 6.9));
        sum += ns;
        s.record(ns, rnd() < 0.001);
      }
      const up = Math.round(300_000 * Math.exp(rnd() * 2));
      g.total.record(sum + up, false);
      g.upstream.record(up, false);
      g.overhead.record(sum, false);
      g.ok++;
    }
    clock += 30_000;
    const t0 = performance.now();
    const written = store.snapshot();
    // The first of its two stretches on the event loop (the interval figures): until the next macrotask runs.
    await new Promise((r) => setImmediate(r));
    stallMs.push(performance.now() - t0);
    await written;
    snapshotMs.push(performance.now() - t0);
    await memory.snapshot();
  }
  const file = join(dir, seriesFileName(clock));
  const lines = readFileSync(file, 'utf8').split('\n').filter((l) => l !== '');
  assert.equal(lines.length, intervals);
  const rec = JSON.parse(lines.at(-1)!) as SeriesRecord;
  assert.equal(rec.graphs[0].steps.length, 16);
  assert.equal(rec.graphs[0].count, 6000);
  const perRecord = statSync(file).size / intervals;
  const perDay = perRecord * 2880;
  const stateBytes = statSync(join(dir, 'state.json')).size;
  t.diagnostic(`series: ${Math.round(perRecord)} bytes per record, ${(perDay / 1e6).toFixed(2)} MB per day; ` +
    `state.json ${Math.round(stateBytes / 1024)} KiB; snapshot ${median(snapshotMs).toFixed(1)} ms (median; ` +
    `min ${Math.min(...snapshotMs).toFixed(1)}), its interval figures ${median(stallMs).toFixed(1)} ms (min ${Math.min(...stallMs).toFixed(1)})`);
  assert.equal(encodeCompressedBase64(steps[0].latency.hdr), hdr.encodeIntoCompressedBase64(steps[0].latency.hdr), 'the native encoding is the ' +
    'library\'s, byte for byte');
  assert.ok(perDay < 5e6, `series stays under 5 MB a day: ${perDay}`);
  // In memory the same records are held as the same JSON text (less the newlines).
  assert.equal(memory.memoryBytes, statSync(file).size - intervals);
  t.diagnostic(`in memory: ${Math.round(memory.memoryBytes / intervals)} bytes per ` +
    `record, ${(memory.memoryBytes / intervals * 2880 / 1e6).toFixed(2)} MB for 24 h at 30 s`);
  await store.close();
  await memory.close();
});
