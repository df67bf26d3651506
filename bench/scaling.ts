// Throughput and CPU per request of `proxy serve --workers N` for several N, at the same offered
// load: how the workers scale, and what the machinery costs (CPU per request with N workers over 1).
//
// Per N: a stub upstream (answers hello/find at once, its own process), the proxy as a child
// process (`--workers N`, pipeline from --fragment or the eight built-ins of
// bench/crossover-config.mjs), and --loaders load-generator processes, each holding
// --connections / --loaders connections with one find outstanding each for --seconds. CPU is the
// proxy's whole process tree (primary + workers, /proc). With --rate R the loaders pace the
// requests to R per second in total (the same load for every N: CPU per request compares the
// machinery); without, they send as fast as the proxy answers (throughput).
//
// A 2-core machine shared with the load generator cannot show scaling; on a machine with C cores,
// throughput should grow with N up to about C minus the cores the loaders and stub take.
//
// Usage: node --import tsx bench/scaling.ts [--workers 1,2,4,8,16] [--connections 64] [--loaders 2] [--seconds 10] [--rate 0]
//        [--fragment '<JSON merged into the proxy config>']
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BSON } from 'bson';
import { arg, cpuMicros, freePort, startChild, stopChildren } from './lib.ts';

const ROOT = new URL('..', import.meta.url).pathname;
const role = arg('--role', 'main');

function opMsg(reqId: number, doc: Record<string, unknown>, responseTo = 0): Buffer {
  const body = Buffer.from(BSON.serialize(doc));
  const b = Buffer.alloc(21 + body.length);
  b.writeInt32LE(b.length, 0);
  b.writeInt32LE(reqId, 4);
  b.writeInt32LE(responseTo, 8);
  b.writeInt32LE(2013, 12);
  body.copy(b, 21);
  return b;
}

/** Splits a byte stream into wire frames. */
function frames(s: Socket, onFrame: (f: Buffer) => void): void {
  let buf: Buffer = Buffer.alloc(0);
  s.on('data', (d: Buffer) => {
    buf = buf.length > 0 ? Buffer.concat([buf, d]) : d;
    while (buf.length >= 4 && buf.length >= buf.readInt32LE(0)) {
      const len = buf.readInt32LE(0);
      onFrame(buf.subarray(0, len));
      buf = buf.subarray(len);
    }
  });
}

/** The stub upstream: hello and find answered at once. */
function stub(port: number): void {
  const hello = { ismaster: true, isWritablePrimary: true, maxBsonObjectSize: 16777216, maxMessageSizeBytes: 48000000, maxWriteBatchSize: 100000,
    localTime: new Date(), logicalSessionTimeoutMinutes: 30, connectionId: 1, minWireVersion: 0, maxWireVersion: 21, readOnly: false, ok: 1 };
  createServer((s) => {
    s.setNoDelay(true);
    s.on('error', () => {});
    frames(s, (m) => {
      const reqId = m.readInt32LE(4);
      if (m.readInt32LE(12) !== 2013) return;
      const doc = BSON.deserialize(m.subarray(21));
      const cmd = Object.keys(doc)[0];
      if (cmd === 'hello' || cmd === 'isMaster' || cmd === 'ismaster') s.write(opMsg(1, hello, reqId));
      else if (cmd === 'find') {
        s.write(opMsg(1, { cursor: { firstBatch: [{ _id: 1, age: doc.filter?.age }], id: 0n, ns: `${doc.$db}.${doc.find}` }, ok: 1 }, reqId));
      }
      else s.write(opMsg(1, { ok: 1 }, reqId));
    });
  }).listen(port, '127.0.0.1');
}

/** A load generator: `conns` connections, one find outstanding each (a distinct filter value each time), paced to `rate` per second when > 0. */
async function load(port: number, conns: number, ms: number, rate: number): Promise<void> {
  const sockets = await Promise.all(Array.from({ length: conns }, () => new Promise<Socket>((r) => {
    const s = connect(port, '127.0.0.1', () => r(s));
    s.setNoDelay(true);
  })));
  const lat: number[] = [];
  let n = 0;
  let errors = 0;
  // Filter values (and request ids) start at a random point of a 2^40 range, so that the runs one
  // after another of a bench (its windows) send values the proxy's cache has not stored: a run
  // counting from 0 again repeated the previous run's keys, and a cache large enough to hold them
  // answered from memory instead of missing.
  let next = Math.floor(Math.random() * 2 ** 40);
  const t0 = performance.now();
  const gapMs = rate > 0 ? (conns / rate) * 1000 : 0;
  await Promise.all(sockets.map((s, c) => new Promise<void>((done) => {
    let sent = 0;
    let at = t0 + (gapMs * c) / conns;
    const send = () => {
      if (performance.now() - t0 > ms) { s.end(); done(); return; }
      sent = performance.now();
      next++;
      s.write(opMsg(next % 0x7fffffff, { find: 'users', filter: { age: next }, limit: 1, singleBatch: true, $db: 'test' }));
    };
    frames(s, (f) => {
      if (f.includes('errmsg')) errors++;
      lat.push((performance.now() - sent) * 1000);
      n++;
      if (gapMs === 0) { send(); return; }
      at += gapMs;
      setTimeout(send, Math.max(0, at - performance.now()));
    });
    s.on('error', () => done());
    send();
  })));
  lat.sort((a, b) => a - b);
  const p = (q: number) => lat[Math.floor(lat.length * q)] ?? 0;
  process.stdout.write(`${JSON.stringify({ n, errors, ms: performance.now() - t0, p50: p(0.5), p99: p(0.99) })}\n`);
  process.exit(0);
}

/** The proxy's process tree: the primary and its children (the workers). */
function tree(pid: number): number[] {
  const r = spawnSync('ps', ['-o', 'pid=', '--ppid', String(pid)], { encoding: 'utf8' });
  return [pid, ...r.stdout.split('\n').map((l) => Number(l.trim())).filter((p) => p > 0)];
}

async function runOne(workers: number, opts: { connections: number; loaders: number; seconds: number; rate: number; fragment: string }) {
  const dir = mkdtempSync(join(tmpdir(), 'scaling-'));
  const [stubPort, port, adminPort] = [await freePort(), await freePort(), await freePort()];
  await startChild('stub', process.execPath, ['--import', 'tsx', join(ROOT, 'bench/scaling.ts'), '--role', 'stub', '--port', String(stubPort)], stubPort, ROOT);
  const base = JSON.parse(spawnSync(process.execPath, [join(ROOT, 'bench/crossover-config.mjs'), String(port), String(stubPort), opts.fragment],
    { encoding: 'utf8' }).stdout) as Record<string, unknown>;
  const token = 'scaling-bench-token-01234';
  writeFileSync(join(dir, 'proxy.json'), JSON.stringify({ ...base, admin: { listen: `127.0.0.1:${adminPort}`, token, reload_on_change: false } }));
  const proxy = await startChild('proxy', process.execPath, [join(ROOT, 'bin/proxy.mjs'), 'serve', '--config', join(dir, 'proxy.json'),
    '--workers', String(workers)], port, ROOT, join(dir, 'proxy.log'), 120_000);
  // Every worker listening (the port accepts as soon as the first one does).
  for (let i = 0; i < 1200; i++) {
    const r = await fetch(`http://127.0.0.1:${adminPort}/api/v1/workers`, { headers: { authorization: `Bearer ${token}` } }).then((x) => x.json(),
      () => null) as { workers: unknown[] } | null;
    if (r !== null && r.workers.length === workers) break;
    await new Promise((r2) => setTimeout(r2, 100));
  }
  const pids = tree(proxy.pid!);
  const cpu0 = pids.reduce((s, p) => s + cpuMicros(p), 0);
  const per = Math.max(1, Math.floor(opts.connections / opts.loaders));
  const outs = await Promise.all(Array.from({ length: opts.loaders }, () => new Promise<{ n: number; errors: number; ms: number; p50: number;
    p99: number }>((resolve, reject) => {
    const c = spawn(process.execPath, ['--import', 'tsx', join(ROOT, 'bench/scaling.ts'), '--role', 'load', '--port', String(port), '--connections',
      String(per), '--ms', String(opts.seconds * 1000), '--rate', String(opts.rate / opts.loaders)], { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    c.stdout.on('data', (d) => { out += d; });
    c.once('exit', () => { try { resolve(JSON.parse(out)); } catch { reject(new Error(`load generator: ${out}`)); } });
  })));
  const cpu1 = pids.reduce((s, p) => { try { return s + cpuMicros(p); } catch { return s; } }, 0);
  const n = outs.reduce((s, o) => s + o.n, 0);
  const ms = Math.max(...outs.map((o) => o.ms));
  stopChildren();
  rmSync(dir, { recursive: true, force: true });
  return { workers, rps: Math.round(n / (ms / 1000)), errors: outs.reduce((s, o) => s + o.errors, 0), p50_us: Math.round(Math.max(...outs.map((o) => o.p50))),
    p99_us: Math.round(Math.max(...outs.map((o) => o.p99))), cpu_us_per_request: +((cpu1 - cpu0) / n).toFixed(1), processes: pids.length };
}

if (role === 'stub') {
  stub(Number(arg('--port', '0')));
} else if (role === 'load') {
  await load(Number(arg('--port', '0')), Number(arg('--connections', '1')), Number(arg('--ms', '1000')), Number(arg('--rate', '0')));
} else {
  const counts = arg('--workers', '1,2,4,8,16').split(',').map(Number);
  const opts = { connections: Number(arg('--connections', '64')), loaders: Number(arg('--loaders', '2')), seconds: Number(arg('--seconds', '10')),
    rate: Number(arg('--rate', '0')), fragment: arg('--fragment', '{}') };
  const rows = [];
  try {
    for (const w of counts) {
      const r = await runOne(w, opts);
      rows.push(r);
      console.log(JSON.stringify(r));
    }
  } finally {
    stopChildren();
  }
  const one = rows.find((r) => r.workers === 1);
  console.log('\n| workers | requests/s | p50 µs | p99 µs | proxy CPU µs/request | × 1 worker |\n|---|---|---|---|---|---|');
  for (const r of rows) {
    console.log(`| ${r.workers} | ${r.rps} | ${r.p50_us} | ${r.p99_us} | ${r.cpu_us_per_request} | ${one === undefined ? '' : (r.cpu_us_per_request /
      one.cpu_us_per_request).toFixed(3)} |`);
  }
}
