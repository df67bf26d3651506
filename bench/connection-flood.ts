// Connection flood: how much resident memory an idle client connection costs the proxy.
//
// The proxy (`proxy serve`, no upstream.uri, so the embedded devdb runs in the same process) runs
// as a CHILD process, so its RSS is measured alone — not the flood's own sockets — and the file
// descriptors of both ends are split over two processes. Steps:
//   1. warm-up: a driver inserts, finds and pings, then disconnects; after `--settle` the child's
//      VmRSS (/proc/<pid>/status) is the idle figure;
//   2. `--connections` raw TCP connections are opened in batches of `--batch` (so the listen
//      backlog is not overrun), each completing one OP_MSG hello round trip, then left idle; a
//      driver already connected keeps running find loops meanwhile (served during the flood);
//   3. after `--settle` (nothing forced: no GC, no signal) VmRSS is read again: delta, bytes per
//      connection; the admin API's proxy_client_connections gauge is read;
//   4. a fresh driver connection must still ping, insert and find;
//   5. the flood sockets close and the gauge must go back to 0.
// Target (issue): 10,000 idle connections within 150 MB RSS over idle.
//
// Measured on the 2-core dev machine (Node 20): idle ~122-128 MB, +48-55 MB at 10,000
// (5.1-5.8 KB per connection). A heap-snapshot diff (10,000 connections, after a forced GC) puts
// the live part at ~2.9 KB each: TCPSocketWrap 408 B (native), net.Socket 272 + Readable/
// WritableState 184, ClientConnection 256, CommandPeek + ElementCursor 200, Framer 72, the hello
// frame's chunk kept alive (Buffer + ArrayBuffer + data, ~240 B), listener closures, small
// objects, arrays and strings (~900 B). The rest of the RSS growth is V8 heap headroom (garbage
// not yet collected, heapTotal > heapUsed) — nothing is forced before the reading. (That snapshot
// predates the split of ClientConnection into its parts, 2026-11-26; this bench measured the same
// per-connection growth before and after it: 6,729 and 6,621 bytes.)
//
// Usage: node --import tsx bench/connection-flood.ts [--connections 10000] [--batch 500] [--settle 1000]
// test/faults/flood.test.ts runs the same function with assertions.
import { readFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect, type Socket } from 'node:net';
import { pathToFileURL } from 'node:url';
import type { ChildProcess } from 'node:child_process';
import { MongoClient } from 'mongodb';
import { deserialize, serialize } from 'bson';
import { arg, freePort, startChild } from './lib.ts';

const ROOT = new URL('..', import.meta.url).pathname;
const ADMIN_TOKEN = 'connection-flood-bench-token';
const MB = 1024 * 1024;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export interface FloodOptions {
  connections: number;
  /** Connections opened concurrently per batch. */
  batch?: number;
  /** Quiet time before each RSS reading, ms. */
  settleMs?: number;
  /** Progress lines (default: none). */
  progress?: (line: string) => void;
}

export interface MemoryReading {
  /** VmRSS, bytes. */
  rss: number;
  /** RssAnon (heap, stacks, malloc), bytes. */
  anon: number;
  /** RssFile (mapped code, shared libraries), bytes. */
  file: number;
  /** VmHWM: peak RSS so far, bytes. */
  peak: number;
}

export interface FloodResult {
  connections: number;
  idle: MemoryReading;
  flooded: MemoryReading;
  afterClose: MemoryReading;
  /** flooded.rss - idle.rss */
  deltaBytes: number;
  bytesPerConnection: number;
  /** Wall time to open and handshake every connection, ms. */
  openMs: number;
  /** proxy_client_connections: before the flood, with the flood open, after it closed. */
  gauge: { idle: number; flooded: number; afterClose: number };
  /** Driver find loop that ran while the flood was being opened. */
  duringFlood: { ok: number; errors: number; maxMs: number };
  /** A fresh driver connection with the flood open: ping + insert + find took this long, ms. */
  freshDriverMs: number;
  /** Documents that fresh driver found. */
  freshDriverFound: number;
}

export function readMemory(pid: number): MemoryReading {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (key: string) => {
    const m = new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(status);
    return m === null ? 0 : Number(m[1]) * 1024;
  };
  return { rss: kb('VmRSS'), anon: kb('RssAnon'), file: kb('RssFile'), peak: kb('VmHWM') };
}

/** One OP_MSG hello frame (written here from the spec; the reply is parsed the same way). */
function helloFrame(): Buffer {
  const body = Buffer.from(serialize({ hello: 1, $db: 'admin' }));
  const frame = Buffer.alloc(16 + 4 + 1 + body.length);
  frame.writeInt32LE(frame.length, 0);
  frame.writeInt32LE(1, 4);
  frame.writeInt32LE(0, 8);
  frame.writeInt32LE(2013, 12); // OP_MSG
  frame.writeUInt32LE(0, 16);
  frame[20] = 0;
  body.copy(frame, 21);
  return frame;
}

/** Connects, sends a hello, waits for its whole reply (ok: 1), and leaves the socket idle. */
function openHandshaken(port: number, hello: Buffer, timeoutMs: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const s = connect({ host: '127.0.0.1', port });
    const chunks: Buffer[] = [];
    let got = 0;
    const timer = setTimeout(() => fail(new Error(`no hello reply within ${timeoutMs} ms`)), timeoutMs);
    const fail = (err: Error) => {
      clearTimeout(timer);
      s.destroy();
      reject(err);
    };
    const onData = (c: Buffer) => {
      chunks.push(c);
      got += c.length;
      if (got < 4) return;
      const all = chunks.length === 1 ? chunks[0] : Buffer.concat(chunks);
      const len = all.readInt32LE(0);
      if (got < len) return;
      clearTimeout(timer);
      s.off('data', onData);
      s.off('error', fail);
      s.on('error', () => {});
      let ok = false;
      try {
        ok = all.readInt32LE(12) === 2013 && deserialize(all.subarray(21, len)).ok === 1;
      } catch { /* reported below */ }
      if (!ok) {
        fail(new Error('hello reply is not an OP_MSG with ok: 1'));
        return;
      }
      resolve(s);
    };
    s.on('data', onData);
    s.once('error', fail);
    s.once('close', () => fail(new Error('connection closed before the hello reply')));
    s.once('connect', () => s.write(hello));
  });
}

async function clientGauge(adminUrl: string): Promise<number> {
  const r = await fetch(`${adminUrl}/metrics`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
  if (!r.ok) throw new Error(`GET /metrics: HTTP ${r.status}`);
  const m = /^proxy_client_connections (\d+)$/m.exec(await r.text());
  if (m === null) throw new Error('proxy_client_connections not in /metrics');
  return Number(m[1]);
}

async function waitGauge(adminUrl: string, want: number, timeoutMs: number): Promise<number> {
  const until = Date.now() + timeoutMs;
  let n = await clientGauge(adminUrl);
  while (n !== want && Date.now() < until) {
    await sleep(100);
    n = await clientGauge(adminUrl);
  }
  return n;
}

export async function runFlood(opts: FloodOptions): Promise<FloodResult> {
  const n = opts.connections;
  const batch = opts.batch ?? 500;
  const settleMs = opts.settleMs ?? 1000;
  const say = opts.progress ?? (() => {});
  const tmp = mkdtempSync(join(tmpdir(), 'connection-flood-'));
  const port = await freePort();
  const adminPort = await freePort();
  const adminUrl = `http://127.0.0.1:${adminPort}`;
  const configFile = join(tmp, 'proxy.json');
  writeFileSync(configFile, JSON.stringify({
    listen: `127.0.0.1:${port}`,
    log: { level: 'warn' },
    admin: { listen: `127.0.0.1:${adminPort}`, token: ADMIN_TOKEN, reload_on_change: false },
  }));
  const uri = `mongodb://127.0.0.1:${port}/`;
  let child: ChildProcess | null = null;
  const flood: Socket[] = [];
  let bystander: MongoClient | null = null;
  try {
    child = await startChild('proxy', process.execPath, [join(ROOT, 'bin/proxy.mjs'), 'serve', '--config', configFile, '--workers', '1'], port, ROOT);
    const pid = child.pid!;
    // The admin API starts after the client listener: wait for it.
    for (let i = 0; ; i++) {
      try { await clientGauge(adminUrl); break; } catch (e) { if (i > 100) throw e; await sleep(100); }
    }

    // 1. Warm-up request, then the idle figure.
    const warm = new MongoClient(uri, { serverSelectionTimeoutMS: 5000 });
    const wc = warm.db('flood').collection('warmup');
    await wc.insertMany([{ i: 1 }, { i: 2 }, { i: 3 }]);
    await wc.find({}).toArray();
    await warm.db('admin').command({ ping: 1 });
    await warm.close();
    const gaugeIdle = await waitGauge(adminUrl, 0, 5000);
    await sleep(settleMs);
    const idle = readMemory(pid);
    say(`idle: RSS ${(idle.rss / MB).toFixed(1)} MB, ${gaugeIdle} client connections`);

    // 2. The flood, with a driver served throughout.
    bystander = new MongoClient(uri, { serverSelectionTimeoutMS: 5000, maxPoolSize: 1 });
    const bc = bystander.db('flood').collection('bystander');
    await bc.insertOne({ _id: 1 as never, v: 'bystander' });
    const during = { ok: 0, errors: 0, maxMs: 0 };
    let opening = true;
    const loop = (async () => {
      while (opening) {
        const t0 = performance.now();
        try {
          const d = await bc.findOne({ _id: 1 as never });
          if (d?.v === 'bystander') during.ok++; else during.errors++;
        } catch {
          during.errors++;
        }
        during.maxMs = Math.max(during.maxMs, performance.now() - t0);
        await sleep(20);
      }
    })();
    const hello = helloFrame();
    const t0 = performance.now();
    for (let i = 0; i < n; i += batch) {
      const k = Math.min(batch, n - i);
      const opened = await Promise.all(Array.from({ length: k }, () => openHandshaken(port, hello, 15_000)));
      for (const s of opened) flood.push(s);
      if ((i + k) % 2000 === 0 || i + k === n) say(`opened ${i + k}/${n}`);
    }
    const openMs = performance.now() - t0;
    opening = false;
    await loop;
    await bystander.close();
    bystander = null;

    // 3. Idle with the flood open.
    await sleep(settleMs);
    const flooded = readMemory(pid);
    const gaugeFlooded = await clientGauge(adminUrl);
    say(`flooded: RSS ${(flooded.rss / MB).toFixed(1)} MB, ${gaugeFlooded} client connections`);

    // 4. A fresh driver connection with the flood still open.
    const f0 = performance.now();
    const fresh = new MongoClient(uri, { serverSelectionTimeoutMS: 5000 });
    let found = 0;
    try {
      await fresh.db('admin').command({ ping: 1 });
      const fc = fresh.db('flood').collection('fresh');
      await fc.insertOne({ at: Date.now() });
      found = (await fc.find({}).toArray()).length;
    } finally {
      await fresh.close();
    }
    const freshDriverMs = performance.now() - f0;

    // 5. Close the flood: the proxy's connection count must come back.
    for (const s of flood.splice(0)) s.destroy();
    const gaugeAfter = await waitGauge(adminUrl, 0, 10_000);
    await sleep(settleMs);
    const afterClose = readMemory(pid);
    say(`after close: RSS ${(afterClose.rss / MB).toFixed(1)} MB, ${gaugeAfter} client connections`);

    const deltaBytes = flooded.rss - idle.rss;
    return {
      connections: n, idle, flooded, afterClose, deltaBytes, bytesPerConnection: Math.round(deltaBytes / n), openMs,
      gauge: { idle: gaugeIdle, flooded: gaugeFlooded, afterClose: gaugeAfter },
      duringFlood: during, freshDriverMs, freshDriverFound: found,
    };
  } finally {
    for (const s of flood) s.destroy();
    await bystander?.close().catch(() => {});
    if (child !== null && child.exitCode === null) {
      const exited = new Promise((r) => child!.once('exit', r));
      child.kill('SIGKILL');
      await exited;
    }
    rmSync(tmp, { recursive: true, force: true });
  }
}

export function formatFlood(r: FloodResult): string {
  const mb = (b: number) => `${(b / MB).toFixed(1)} MB`;
  return [
    `connection flood: ${r.connections} idle connections (each after one OP_MSG hello), proxy + devdb in a child process`,
    `  idle RSS            ${mb(r.idle.rss)}  (anon ${mb(r.idle.anon)}, file ${mb(r.idle.file)})`,
    `  RSS with ${String(r.connections).padEnd(6)}     ${mb(r.flooded.rss)}  (anon ${mb(r.flooded.anon)}, file ${mb(r.flooded.file)}; ` +
      `peak ${mb(r.flooded.peak)})`,
    `  delta               ${mb(r.deltaBytes)}  = ${r.bytesPerConnection} bytes per connection`,
    `  after close         ${mb(r.afterClose.rss)}`,
    `  opened in           ${(r.openMs / 1000).toFixed(2)} s`,
    `  client gauge        idle ${r.gauge.idle}, flooded ${r.gauge.flooded}, after close ${r.gauge.afterClose}`,
    `  driver during flood ${r.duringFlood.ok} finds ok, ${r.duringFlood.errors} errors, slowest ${r.duringFlood.maxMs.toFixed(0)} ms`,
    `  fresh driver        ping + insert + find in ${r.freshDriverMs.toFixed(0)} ms (${r.freshDriverFound} found)`,
    `  goal                10,000 idle connections within 150 MB: ${r.connections >= 10_000 &&
      r.deltaBytes <= 150 * MB ? 'met' : r.connections < 10_000 ? `not measured at 10,000 (${mb((r.bytesPerConnection * 10_000))} ` +
      `extrapolated)` : 'NOT met'}`,
  ].join('\n');
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const r = await runFlood({
    connections: Number(arg('--connections', '10000')),
    batch: Number(arg('--batch', '500')),
    settleMs: Number(arg('--settle', '1000')),
    progress: (l) => process.stderr.write(`${l}\n`),
  });
  process.stdout.write(`${formatFlood(r)}\n`);
}
