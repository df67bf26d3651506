// profiling.storage: "mmap" — the histogram file (runtime/profiling/mmap-layout.ts) through a real
// `proxy serve` child driven by the real driver: a second process (`proxy profile --mmap`) reads
// live counts while the proxy runs and prints what /api/profile answers; the file's buckets and
// percentiles; restored snapshots land in the file; a file truncated under the running proxy (no
// SIGBUS); a second proxy on the same file stops at start (the first holds its lock; readers need
// none; the first's own workers do not map it); a pipeline too large for mmap_size_mb and a
// missing mmap_path are refused with their key paths.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync, truncateSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MongoClient } from 'mongodb';
import { ConfigError, parseConfig } from '../../runtime/config/index.ts';
import { GraphKey } from '../../runtime/pipeline/index.ts';
import { Profiler, fileSnapshot, readHistogramFile, type StepStats } from '../../runtime/profiling/index.ts';
import { BUCKETS, bucketHighUs, bucketIndex, rowCapacity } from '../../runtime/profiling/mmap-layout.ts';
import { HistogramFile } from '../../runtime/profiling/mmap-store.ts';
import { profilingSettings } from '../../runtime/app/serve.ts';
import { Logger } from '../../runtime/log/index.ts';
import { fixture } from '../wasm/fixtures.ts';
import { until } from '../helpers/until.ts';
import { Closes, withProxy } from '../helpers/proxy.ts';

const bin = join(process.cwd(), 'bin/proxy.mjs');
const dir = mkdtempSync(join(tmpdir(), 'proxy-mmap-'));
const children: ChildProcess[] = [];
const clients: MongoClient[] = [];
const running = new Closes();
after(async () => {
  for (const c of clients) await c.close(true).catch(() => {});
  await running.run().catch(() => {});
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

/** `proxy serve --config file` as a child; resolves once it prints its connection string and profiling URL. */
async function serve(file: string, workers = 1): Promise<{ child: ChildProcess; uri: string; profilingUrl: string }> {
  const child = spawn(process.execPath, [bin, 'serve', '--config', file, '--workers', String(workers)], { stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  let err = '';
  child.stderr!.on('data', (d) => { err += d; });
  const out = await new Promise<string>((resolve, reject) => {
    let text = '';
    const timer = setTimeout(() => reject(new Error(`not ready: ${text}${err}`)), 90_000);
    child.stdout!.on('data', (d) => {
      text += d;
      if (/Profiling: \S+/.test(text)) { clearTimeout(timer); resolve(text); }
    });
    child.once('exit', (code) => { clearTimeout(timer); reject(new Error(`exited ${code}: ${text}${err}`)); });
  });
  return { child, uri: /mongodb:\/\/\S+/.exec(out)![0].replace(/"$/, ''), profilingUrl: /Profiling: (\S+)\/api\/profile/.exec(out)![1] };
}

/** A command of bin/proxy.mjs in its own process. */
function cli(args: string[]): Promise<{ status: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [bin, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d) => { stdout += d; });
  child.stderr.on('data', (d) => { stderr += d; });
  const timer = setTimeout(() => child.kill('SIGKILL'), 90_000);
  return new Promise((resolve) => child.on('close', (status) => { clearTimeout(timer); resolve({ status, stdout, stderr }); }));
}

test('bucket layout: exact below 64 µs, 32 buckets per power of two up to 60 s, each value inside its bucket', () => {
  let prev = -1;
  for (let us = 0; us <= 60_000_000; us += us < 5000 ? 1 : 997) {
    const i = bucketIndex(us);
    assert.ok(i >= prev && i < BUCKETS, `${us} → ${i}`);
    assert.ok(us <= bucketHighUs(i) && (i === 0 || us > bucketHighUs(i - 1)), `${us} lies in bucket ${i}`);
    if (us < 64) assert.equal(bucketHighUs(i), us);
    else assert.ok((bucketHighUs(i) - us) / us < 1 / 32, `${us}: bucket ends at ${bucketHighUs(i)}, within 1/32`);
    prev = i;
  }
  assert.equal(bucketIndex(60_000_000), 697);
  assert.equal(bucketHighUs(BUCKETS - 1), 2 ** 26 - 1);
  assert.equal(rowCapacity(1), 178);
});

test('a second process reads live counts from the histogram file while `proxy serve` runs: `proxy profile --mmap` prints what /api/profile answers',
  { timeout: 240_000 }, async () => {
    const path = join(dir, 'live.hist');
    const file = join(dir, 'live.json');
    writeFileSync(file, JSON.stringify({
      listen: '127.0.0.1:0', log: { level: 'info', format: 'json' },
      pipeline: { request: ['spin', 'filter'], response: ['logging'] },
      steps: { spin: { module: await fixture('spin'), config: {} }, filter: { config: { rules: [], default: 'allow' } },
        logging: { config: { sample_rate: 0 } } },
      profiling: { enabled: true, port: 0, slow_step_threshold_us: 1_000_000, storage: 'mmap', mmap_path: path, mmap_size_mb: 1 },
    }));
    const proxy = await serve(file);
    const client = new MongoClient(proxy.uri, { serverSelectionTimeoutMS: 10_000 });
    clients.push(client);
    const db = client.db('mm');
    for (let i = 0; i < 30; i++) await db.collection('us_200').findOne({});
    for (let i = 0; i < 10; i++) await db.collection('us_3000').findOne({});

    // This process reads the file too (the proxy is a third one): its header names the writer.
    await until('the 40 requests in the file', () => fileSnapshot(readHistogramFile(path), 'default', 'baseline').total_requests === 40, 20_000);
    const f = readHistogramFile(path);
    assert.equal(f.pid, proxy.child.pid);
    assert.equal(f.defaultPipelineId, 'default');
    assert.deepEqual(f.rows.map((r) => `${r.kind}:${r.step}:${r.phase}`), [
      'total::request', 'upstream::request', 'overhead::request', 'acquire::request',
      'step:wasm:spin:request', 'step:wasm:spin:response', 'step:wasm:filter:request', 'step:wasm:filter:response',
      'step:wasm:logging:request', 'step:wasm:logging:response',
    ]);
    const spinRow = f.rows[4];
    assert.equal(spinRow.count, 40);
    assert.equal(spinRow.buckets.reduce((a, b) => a + b, 0), 40, 'every invocation is in one bucket');
    const at = (us: number) => spinRow.buckets.slice(bucketIndex(us)).reduce((a, b) => a + b, 0);
    assert.ok(at(200) === 40 && at(3000) >= 10, 'no invocation shorter than its busy-wait');

    const viaFile = await cli(['profile', '--mmap', path, '--json']);
    assert.equal(viaFile.status, 0, viaFile.stderr);
    const fromFile = JSON.parse(viaFile.stdout);
    const fromHttp = await (await fetch(`${proxy.profilingUrl}/api/profile`)).json();
    assert.deepEqual(fromFile, fromHttp, 'the file reader computes what the endpoint serves');
    assert.equal(fromFile.total_requests, 40);
    const spin = fromFile.steps.find((s: { name: string }) => s.name === 'wasm:spin');
    assert.equal(spin.invocations, 40);
    assert.ok(spin.p50_latency_us >= 200 && spin.p50_latency_us < 3000, `p50 ${spin.p50_latency_us}: the 200 µs requests are 75%`);
    assert.ok(spin.p99_latency_us >= 3000, `p99 ${spin.p99_latency_us}: the 3 ms requests are the top 25%`);
    assert.ok(spin.max_latency_us >= spin.p99_latency_us);

    // Live: more traffic, and the next read sees it without anything being flushed.
    for (let i = 0; i < 10; i++) await db.collection('us_200').findOne({});
    await until('the 50 requests in the file', () => fileSnapshot(readHistogramFile(path), 'default', 'baseline').total_requests === 50, 20_000);
    const table = await cli(['profile', '--mmap', path]);
    assert.equal(table.status, 0, table.stderr);
    assert.match(table.stdout, /^requests: 50 since the last reset; avg total [\d,]+ µs/);
    assert.match(table.stdout, /wasm:spin\s+request(\s+[\d,]+){5}\s+50\s+0\.00%/);

    // A reset through the endpoint clears the rows in the file.
    assert.equal((await fetch(`${proxy.profilingUrl}/api/profile/reset`, { method: 'POST' })).status, 200);
    assert.equal(JSON.parse((await cli(['profile', '--mmap', path, '--json'])).stdout).total_requests, 0);
    assert.ok(proxy.child.exitCode === null, 'the proxy ran throughout');
    const exited = new Promise((r) => proxy.child.once('exit', r));
    proxy.child.kill('SIGTERM');
    await exited;
    // The file outlives the proxy and stays readable.
    const afterStop = await cli(['profile', '--mmap', path, '--json']);
    assert.equal(afterStop.status, 0, afterStop.stderr);
    assert.equal(JSON.parse(afterStop.stdout).total_requests, 0);
  });

test('--mmap: a file that is not a histogram file, or none, exits 1 saying so; --url does not apply', async () => {
  const junk = join(dir, 'junk.bin');
  writeFileSync(junk, Buffer.alloc(4096, 7));
  const bad = await cli(['profile', '--mmap', junk]);
  assert.equal(bad.status, 1);
  assert.match(bad.stderr, /not a profiling histogram file \(magic/);
  // A real histogram file cut short (a partial copy): said, not read as a file with fewer rows.
  const whole = join(dir, 'whole.hist');
  HistogramFile.create(whole, 1, 'default');
  const cut = join(dir, 'cut-copy.hist');
  writeFileSync(cut, readFileSync(whole).subarray(0, 8000));
  const short = await cli(['profile', '--mmap', cut]);
  assert.equal(short.status, 1, short.stdout);
  assert.match(short.stderr, /cut-copy\.hist: cut short: 8000 bytes, but its header says 178 rows \(1048576 bytes\); copy the whole file/);
  assert.equal((await cli(['profile', '--mmap', whole])).status, 0);
  const none = await cli(['profile', '--mmap', join(dir, 'absent.bin')]);
  assert.equal(none.status, 1);
  assert.match(none.stderr, /cannot open .*absent\.bin: No such file or directory/);
  const url = await cli(['profile', '--mmap', junk, '--url', 'http://127.0.0.1:1']);
  assert.equal(url.status, 2);
  assert.match(url.stderr, /--url does not apply to --mmap/);
});

test('statistics restored from snapshot_dir land in the histogram file: counts add, buckets hold the restored values', async () => {
  const raw = (extra: Record<string, unknown>) => profilingSettings(parseConfig({ listen: '127.0.0.1:0',
    profiling: { enabled: true, port: 0, ...extra } }, null).profiling!);
  const silent = { warn: () => {} };
  const key = new GraphKey('default', 'baseline', 0);
  const mem = await Profiler.create(raw({}), silent);
  const step = mem.bind(key, 'wasm:spin', 0) as StepStats;
  for (let i = 0; i < 90; i++) step.record(200_000, false);
  for (let i = 0; i < 10; i++) step.record(5_000_000, i === 0);
  const path = join(dir, 'restore.hist');
  const mapped = await Profiler.create(raw({ storage: 'mmap', mmap_path: path }), silent, { path, sizeMb: 1, defaultPipelineId: 'default' });
  mapped.importState(JSON.parse(JSON.stringify(mem.exportState())));
  const rows = fileSnapshot(readHistogramFile(path), 'default', 'baseline').steps;
  // p50 is the high end of 200 µs's bucket (200..203); p95 and p99 fall in 5 ms's bucket, capped at the max.
  assert.deepEqual(rows, [{
    name: 'wasm:spin', phase: 'request', avg_latency_us: 680, p50_latency_us: bucketHighUs(bucketIndex(200)), p95_latency_us: 5000,
    p99_latency_us: 5000, max_latency_us: 5000, invocations: 100, errors: 1,
  }]);
  assert.equal(rows[0].p50_latency_us, 203);
  assert.deepEqual(mapped.snapshot('default', 'baseline').steps, rows);
});

test('one proxy per histogram file: a second `proxy serve` on the same mmap_path stops at start naming the file and the holder, the ' +
  'file untouched; `proxy profile --mmap` reads it meanwhile; with --workers 2 only the primary maps it', { timeout: 240_000 }, async () => {
  const path = join(dir, 'shared.hist');
  const config = (name: string) => {
    const file = join(dir, `${name}.json`);
    writeFileSync(file, JSON.stringify({
      listen: '127.0.0.1:0', log: { level: 'info', format: 'json' },
      pipeline: { request: ['filter'], response: [] }, steps: { filter: { config: { rules: [], default: 'allow' } } },
      profiling: { enabled: true, port: 0, storage: 'mmap', mmap_path: path, mmap_size_mb: 1 },
    }));
    return file;
  };
  const first = await serve(config('shared-a'), 2);
  const client = new MongoClient(first.uri, { serverSelectionTimeoutMS: 10_000 });
  clients.push(client);
  for (let i = 0; i < 12; i++) await client.db('sh').collection('c').findOne({});
  await until('the 12 requests in the file', () => fileSnapshot(readHistogramFile(path), 'default', 'baseline').total_requests === 12, 20_000);

  const second = await cli(['serve', '--config', config('shared-b'), '--workers', '1']);
  assert.equal(second.status, 1, second.stderr);
  assert.match(second.stderr, new RegExp(`^proxy: could not start: cannot use the profiling histogram file ${path.replace(/[.]/g, '\\.')}: another process holds it ` +
    `\\(pid ${first.child.pid} wrote its header\\); one proxy per file: give each proxy its own profiling\\.mmap_path`, 'm'));
  assert.doesNotMatch(second.stderr, /\n\s+at /, 'no stack trace');
  const f = readHistogramFile(path);
  assert.equal(f.pid, first.child.pid, 'the header is the first proxy\'s');
  assert.equal(fileSnapshot(f, 'default', 'baseline').total_requests, 12, 'its counts are not cleared');
  const read = await cli(['profile', '--mmap', path, '--json']);
  assert.equal(read.status, 0, read.stderr);
  assert.equal(JSON.parse(read.stdout).total_requests, 12);
  for (let i = 0; i < 3; i++) await client.db('sh').collection('c').findOne({});
  await until('the first proxy still writes it', () => fileSnapshot(readHistogramFile(path), 'default', 'baseline').total_requests === 15, 20_000);

  // This process is another one too; once the first proxy stops, the file is free.
  assert.throws(() => HistogramFile.create(path, 1, 'default'), /another process holds it/);
  const exited = new Promise((r) => first.child.once('exit', r));
  first.child.kill('SIGTERM');
  await exited;
  // A proxy stopped in this process lets the next one in it take the file (the lock goes at close, not when the mapping is collected).
  const raw = {
    pipeline: { request: ['filter'], response: [] }, steps: { filter: { config: { rules: [], default: 'allow' } } },
    profiling: { enabled: true, port: 0, storage: 'mmap', mmap_path: path, mmap_size_mb: 1 },
  };
  const closes = new Closes();
  const a = await withProxy(closes, raw);
  await closes.run();
  const b = await withProxy(running, raw);
  assert.equal(readHistogramFile(path).pid, process.pid);
  assert.ok(b.proxy.profiler !== null);
  assert.equal(a.proxy.profiler?.file?.path, path);
});

test('a pipeline too large for mmap_size_mb is refused at start with the key path; mmap_path is required', { timeout: 120_000 }, async () => {
  const file = join(dir, 'big.json');
  // 45 distinct steps, each timed in both phases: 2 graphs × (4 + 90) rows. The check comes before any plugin loads.
  const names = Array.from({ length: 45 }, (_, i) => `spin${i}`);
  const spin = await fixture('spin');
  writeFileSync(file, JSON.stringify({
    listen: '127.0.0.1:0', pipeline: { request: names, response: [] }, steps: Object.fromEntries(names.map((n) => [n, { module: spin, config: {} }])),
    profiling: { enabled: true, port: 0, storage: 'mmap', mmap_path: join(dir, 'big.hist'), mmap_size_mb: 1 },
  }));
  const r = await cli(['serve', '--config', file, '--workers', '1']);
  assert.equal(r.status, 2, r.stderr);
  assert.match(r.stderr, /configuration refused/);
  assert.match(r.stderr, /profiling\.mmap_size_mb: 1 MiB holds 178 histogram rows of 5888 bytes; this pipeline needs 188 \(2 graphs × \(4 \+ 2 phases × 45 steps\)\): set at least 2/);

  assert.throws(() => parseConfig({ profiling: { storage: 'mmap' } }, null), (err: unknown) => {
    assert.ok(err instanceof ConfigError);
    assert.deepEqual(err.issues, [{ path: 'profiling.mmap_path', message: 'is required when profiling.storage is "mmap"' }]);
    return true;
  });
});

test('with mmap the rest works from the file\'s rows: /metrics, histograms, flame graph, snapshots and series; a reload that would not fit is ' +
  'refused', { timeout: 120_000 }, async () => {
  const path = join(dir, 'inproc.hist');
  const raw = {
    listen: '127.0.0.1:0', log: { level: 'warn' },
    pipeline: { request: ['spin', 'filter'], response: [] },
    steps: { spin: { module: await fixture('spin'), config: {} }, filter: { config: { rules: [], default: 'allow' } } },
    profiling: { enabled: true, port: 0, slow_step_threshold_us: 1_000_000, storage: 'mmap', mmap_path: path, snapshot_dir: join(dir, 'snapshots'),
      snapshot_interval_s: 3600 },
  };
  const { proxy } = await withProxy(running, raw, { log: new Logger('test', 'error', 'json', { write: () => {} }) });
  const client = new MongoClient(proxy.uri, { serverSelectionTimeoutMS: 10_000 });
  clients.push(client);
  for (let i = 0; i < 20; i++) await client.db('mm').collection('us_300').findOne({});
  const base = proxy.profilingUrl!;
  const metrics = await (await fetch(`${base}/metrics`)).text();
  assert.match(metrics, /proxy_step_latency_us_count\{[^}]*step="wasm:spin"[^}]*\} 20/);
  assert.match(metrics, /proxy_request_duration_seconds\{[^}]*quantile="0.99"\} 0\.\d+/);
  const hist = await (await fetch(`${base}/api/profile/histograms`)).json();
  const spinHist = hist.graphs[0].steps.find((s: { name: string }) => s.name === 'wasm:spin');
  assert.equal(spinHist.invocations, 20);
  assert.ok(spinHist.hdr.length > 0);
  const folded = await (await fetch(`${base}/api/profile/flamegraph?format=folded&duration=5m`)).text();
  assert.match(folded, /^request pipeline;wasm:spin [\d.]+$/m);
  await proxy.snapshots!.snapshot();
  const series = await (await fetch(`${base}/api/profile/series?step=spin`)).json();
  assert.equal(series.points.at(-1).steps[0].count, 20);
  assert.ok(series.points.at(-1).steps[0].p50_latency_us >= 300);

  const names = Array.from({ length: 45 }, (_, i) => `s${i}`);
  const bigger = parseConfig({ ...raw, pipeline: { request: names, response: [] },
    steps: Object.fromEntries(names.map((n) => [n, { module: raw.steps.spin.module, config: {} }])) }, null);
  await assert.rejects(proxy.reload(bigger), (err: unknown) => {
    assert.ok(err instanceof ConfigError);
    assert.equal(err.issues[0].path, 'profiling.mmap_size_mb');
    return true;
  });
  assert.deepEqual(proxy.config.pipeline.request, ['spin', 'filter'], 'the old configuration stays');
  for (let i = 0; i < 5; i++) await client.db('mm').collection('us_300').findOne({});
  assert.equal(fileSnapshot(readHistogramFile(path), 'default', 'baseline').total_requests, 25);
});

test('a full file: further distributions are kept in memory, and the proxy says so once, naming the key to raise', async () => {
  const warnings: Array<{ msg: string; fields?: Record<string, unknown> }> = [];
  const path = join(dir, 'full.hist');
  const settings = profilingSettings(parseConfig({ profiling: { enabled: true, storage: 'mmap', mmap_path: path } }, null).profiling!);
  const p = await Profiler.create(settings, { warn: (msg, fields) => warnings.push({ msg, fields }) }, { path, sizeMb: 1, defaultPipelineId: 'default' });
  const key = new GraphKey('default', 'baseline', 0);
  // 4 graph rows + 174 step rows fill the 178; the next two have no row.
  const steps = Array.from({ length: 176 }, (_, i) => p.bind(key, `wasm:s${i}`, 0) as StepStats);
  assert.equal(p.file!.rowsUsed, 178);
  assert.equal(warnings.length, 1);
  assert.match(warnings[0].msg, /profiling histogram file is full: .* \(raise profiling\.mmap_size_mb\)/);
  assert.deepEqual(warnings[0].fields, { file: path, rows: 178, pipeline_id: 'default', pipeline: 'baseline', step: 'wasm:s174' });
  steps[175].record(1_000_000, false);
  assert.equal(p.snapshot('default', 'baseline').steps[0].invocations, 1, 'served from memory');
  assert.equal(fileSnapshot(readHistogramFile(path), 'default', 'baseline').steps.length, 0, 'not in the file');
});

test('the histogram file truncated, or deleted, while `proxy serve` runs and serves: no SIGBUS; the size, header and row names come back, ' +
  'and the proxy says so', { timeout: 120_000 }, async () => {
  const path = join(dir, 'cut.hist');
  const file = join(dir, 'cut.json');
  writeFileSync(file, JSON.stringify({
    listen: '127.0.0.1:0', log: { level: 'info', format: 'json' },
    pipeline: { request: ['filter'], response: ['logging'] },
    steps: { filter: { config: { rules: [], default: 'allow' } }, logging: { config: { sample_rate: 0 } } },
    profiling: { enabled: true, port: 0, storage: 'mmap', mmap_path: path, mmap_size_mb: 1 },
  }));
  const proxy = await serve(file);
  let err = '';
  proxy.child.stderr!.on('data', (d) => { err += d; });
  const client = new MongoClient(proxy.uri, { serverSelectionTimeoutMS: 10_000 });
  clients.push(client);
  const db = client.db('cut');
  for (let i = 0; i < 5; i++) await db.collection('c').findOne({});
  await until('the 5 requests in the file', () => fileSnapshot(readHistogramFile(path), 'default', 'baseline').total_requests === 5, 20_000);

  truncateSync(path, 0); // `: > file`: the mapped pages now lie past the end of the file
  for (let i = 0; i < 5; i++) await db.collection('c').findOne({});
  assert.ok(proxy.child.exitCode === null && proxy.child.signalCode === null, `the proxy runs (${proxy.child.signalCode})`);
  assert.equal(statSync(path).size, 1024 * 1024, 'the file has its size again');
  await until('the warning', () => /profiling histogram file was truncated while the proxy ran/.test(err), 10_000);
  const warn = JSON.parse(err.split('\n').find((l) => l.includes('was truncated'))!);
  assert.equal(warn.level, 'warn');
  assert.equal(warn.file, path);
  // The header and the rows' names are back: the file reader reads it again, with the requests since.
  await until('the file readable again', () => {
    try { return fileSnapshot(readHistogramFile(path), 'default', 'baseline').steps.length === 2; } catch { return false; }
  }, 10_000);
  for (let i = 0; i < 3; i++) await db.collection('c').findOne({});
  const n = fileSnapshot(readHistogramFile(path), 'default', 'baseline').total_requests;
  assert.ok(n >= 3 && n <= 8, `${n} requests counted since the cut`);
  // /metrics agrees with the file: the buckets kept in process memory restarted with it (a finite
  // `le` bucket above `+Inf` is no histogram), and so did the request counters. (A request is
  // committed just after its reply: read until the last one is in both.)
  const value = (text: string, re: RegExp) => [...text.matchAll(re)].map((m) => [m[1], Number(m[2])] as const);
  let metrics = '';
  await until(() => `/metrics agreeing with the file:\n${metrics}`, async () => {
    const inFile = fileSnapshot(readHistogramFile(path), 'default', 'baseline').total_requests;
    metrics = await (await fetch(`${proxy.profilingUrl}/metrics`)).text();
    const requests = value(metrics, /^proxy_requests_total\{(pipeline_id="default",pipeline="baseline"),status="\w+"\} (\S+)$/gm)
      .reduce((a, [, v]) => a + v, 0);
    return requests === inFile && metrics.includes(`proxy_request_duration_seconds_count{pipeline_id="default",pipeline="baseline"} ${inFile}\n`);
  }, 5000, 100);
  const inf = new Map(value(metrics, /^proxy_step_latency_us_bucket\{(.*),le="\+Inf"\} (\S+)$/gm));
  assert.ok(inf.size >= 2, metrics);
  for (const [labels, v] of value(metrics, /^proxy_step_latency_us_bucket\{(.*),le="[\d.]+"\} (\S+)$/gm)) {
    assert.ok(v <= inf.get(labels)!, `${labels}: a bucket of ${v} above +Inf ${inf.get(labels)}`);
  }
  for (const [labels, v] of value(metrics, /^proxy_step_latency_us_count\{(.*)\} (\S+)$/gm)) assert.equal(inf.get(labels), v);

  unlinkSync(path); // deleted: the mapping keeps the inode; nothing faults
  for (let i = 0; i < 3; i++) await db.collection('c').findOne({});
  assert.ok(proxy.child.exitCode === null && proxy.child.signalCode === null, 'the proxy runs');
  const total = (await (await fetch(`${proxy.profilingUrl}/api/profile`)).json()).total_requests;
  assert.ok(total >= n + 3, `${total}: the requests after the delete are counted`);
  proxy.child.kill('SIGTERM');
});
