// `proxy profile --aggregate` against two real `proxy serve` children, each with its own profiling
// port and a `spin` step busy-waiting a different known time (A 200 µs, B 5 ms), under real driver
// traffic during the window: counts add, and percentiles come from the merged histograms — equal
// to the percentiles of both instances' histograms added together, never an average of each
// instance's percentiles. The command reaches each instance through a small HTTP forwarder here,
// so the test knows when the window opened (the command's first read) and sends its traffic then.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as hdr from 'hdr-histogram-js';
import { MongoClient } from 'mongodb';
import { fixture } from '../wasm/fixtures.ts';
import { until } from '../helpers/until.ts';

const bin = join(process.cwd(), 'bin/proxy.mjs');
const dir = mkdtempSync(join(tmpdir(), 'proxy-aggregate-'));
const children: ChildProcess[] = [];
const clients: MongoClient[] = [];
const servers: Server[] = [];
after(async () => {
  for (const c of clients) await c.close(true).catch(() => {});
  for (const s of servers) s.close();
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

/** `proxy serve` with a spin step of `us` µs; resolves with its connection string and profiling URL. */
async function serve(name: string, us: number): Promise<{ child: ChildProcess; uri: string; profilingUrl: string }> {
  const file = join(dir, `${name}.json`);
  writeFileSync(file, JSON.stringify({
    listen: '127.0.0.1:0', log: { level: 'warn' },
    pipeline: { request: ['spin'], response: [] },
    steps: { spin: { module: await fixture('spin'), config: { us } } },
    profiling: { enabled: true, port: 0, slow_step_threshold_us: 1_000_000 },
  }));
  const child = spawn(process.execPath, [bin, 'serve', '--config', file, '--workers', '1'], { stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  let err = '';
  child.stderr!.on('data', (d) => { err += d; });
  const out = await new Promise<string>((resolve, reject) => {
    let text = '';
    const timer = setTimeout(() => reject(new Error(`${name} not ready: ${text}${err}`)), 90_000);
    child.stdout!.on('data', (d) => {
      text += d;
      if (/Profiling: \S+/.test(text)) { clearTimeout(timer); resolve(text); }
    });
    child.once('exit', (code) => { clearTimeout(timer); reject(new Error(`${name} exited ${code}: ${text}${err}`)); });
  });
  return { child, uri: /mongodb:\/\/[^\s"]+/.exec(out)![0], profilingUrl: /Profiling: (\S+)\/api\/profile/.exec(out)![1] };
}

/** An HTTP forwarder to `target` that records the paths the target answered; resolves with its host:port. */
async function forwarder(target: string, seen: string[]): Promise<string> {
  const server = createServer((req, res) => {
    fetch(`${target}${req.url}`, { method: req.method }).then(async (r) => {
      seen.push(req.url ?? ''); // once the instance has answered: its read is done
      res.writeHead(r.status, { 'content-type': r.headers.get('content-type') ?? 'application/octet-stream' });
      res.end(Buffer.from(await r.arrayBuffer()));
    }, (e: Error) => { res.writeHead(502); res.end(e.message); });
  });
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return `127.0.0.1:${(server.address() as { port: number }).port}`;
}

interface Hist { graphs: Array<{ pipeline_id: string; total: string; steps: Array<{ name: string; phase: string; hdr: string; invocations: number }> }> }

/** An instance's cumulative histogram of `which` (total, or a step's request phase), decoded. */
async function cumulative(profilingUrl: string, which: 'total' | string): Promise<hdr.Histogram> {
  const body = await (await fetch(`${profilingUrl}/api/profile/histograms`)).json() as Hist;
  const g = body.graphs.find((x) => x.pipeline_id === 'default')!;
  const b64 = which === 'total' ? g.total : g.steps.find((s) => s.name === which && s.phase === 'request')!.hdr;
  return hdr.decodeFromCompressedBase64(b64, 32, false);
}

test('--aggregate over two real proxies: counts add; merged p50/p95/p99 are those of the added histograms, not averages of per-instance percentiles',
  { timeout: 300_000 }, async () => {
    const [a, b] = await Promise.all([serve('a', 200), serve('b', 5000)]);
    const seenA: string[] = [];
    const seenB: string[] = [];
    const hostA = await forwarder(a.profilingUrl, seenA);
    const hostB = await forwarder(b.profilingUrl, seenB);
    const ca = new MongoClient(a.uri, { serverSelectionTimeoutMS: 10_000, appName: 'agg' });
    const cb = new MongoClient(b.uri, { serverSelectionTimeoutMS: 10_000, appName: 'agg' });
    clients.push(ca, cb);
    await Promise.all([ca.connect(), cb.connect()]); // handshakes only: nothing runs through a pipeline yet

    const out = join(dir, 'merged.json');
    const child = spawn(process.execPath, [bin, 'profile', '--aggregate', '--instances', `${hostA},${hostB}`, '--duration', '12s', '--output', out],
      { stdio: ['ignore', 'pipe', 'pipe'] });
    children.push(child);
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => { stdout += d; });
    child.stderr.on('data', (d) => { stderr += d; });
    const done = new Promise<number | null>((r) => child.on('close', r));

    // The window opens with the command's first read of both instances; the traffic goes in it.
    await until('the window to open', () => seenA.length > 0 && seenB.length > 0, 60_000);
    const opened = Date.now();
    const nA = 120;
    const nB = 30;
    await Promise.all([
      (async () => { for (let i = 0; i < nA; i++) await ca.db('agg').collection('items').findOne({}); })(),
      (async () => { for (let i = 0; i < nB; i++) await cb.db('agg').collection('items').findOne({}); })(),
    ]);
    assert.ok(Date.now() - opened < 11_000, 'the traffic fit in the 12 s window');
    assert.equal(await done, 0, stderr);
    assert.match(stdout, /report written to /);
    assert.deepEqual(seenA.filter((p) => p.startsWith('/api/profile/histograms')).length, 2, 'one read at each end of the window');

    const m = JSON.parse(readFileSync(out, 'utf8'));
    assert.equal(m.total_requests, nA + nB);
    assert.equal(m.errors, 0);
    assert.deepEqual(m.instances.map((i: { total_requests: number }) => i.total_requests), [nA, nB]);
    const spin = m.steps.find((s: { name: string }) => s.name === 'wasm:spin');
    assert.equal(spin.invocations, nA + nB);

    // Nothing ran through a pipeline before the window, so each instance's window is its cumulative histogram now.
    const union = async (which: string) => {
      const h = hdr.build({ lowestDiscernibleValue: 1, highestTrackableValue: 60_000_000, numberOfSignificantValueDigits: 3, bitBucketSize: 32,
        useWebAssembly: false });
      h.add(await cumulative(a.profilingUrl, which));
      h.add(await cumulative(b.profilingUrl, which));
      return h;
    };
    const spinUnion = await union('wasm:spin');
    assert.equal(spinUnion.totalCount, nA + nB);
    for (const p of [50, 95, 99]) assert.equal(spin[`p${p}_latency_us`], Math.round(spinUnion.getValueAtPercentile(p)), `spin p${p} from the added histograms`);
    const totalUnion = await union('total');
    assert.equal(m.p99_total_latency_us, Math.round(totalUnion.getValueAtPercentile(99)));
    assert.equal(m.p50_total_latency_us, Math.round(totalUnion.getValueAtPercentile(50)));

    // What the latencies mean: 80% of the calls spin 200 µs, 20% spin 5 ms. The merged median is an
    // A-sized value and the merged p99 a B-sized one; averaging the instances' medians would give
    // a value of at least (200 + 5000) / 2 µs.
    const pA = await cumulative(a.profilingUrl, 'wasm:spin');
    const pB = await cumulative(b.profilingUrl, 'wasm:spin');
    assert.ok(pA.getValueAtPercentile(50) >= 200 && pB.getValueAtPercentile(50) >= 5000, 'each instance spun its configured time');
    assert.ok(spin.p50_latency_us >= 200 && spin.p50_latency_us < 2600, `merged p50 ${spin.p50_latency_us} µs is A's, not an average`);
    assert.ok(spin.p99_latency_us >= 5000, `merged p99 ${spin.p99_latency_us} µs is B's`);
    assert.notEqual(spin.p50_latency_us, Math.round((pA.getValueAtPercentile(50) + pB.getValueAtPercentile(50)) / 2));
  });
