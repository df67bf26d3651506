// A client that pipelines finds for large replies (300 documents of 100 KB asked for in one batch:
// the upstream answers each with a full 16 MB batch, the most a server puts in one reply) and never reads its socket must not grow the
// proxy's memory (backpressure: clients.max_pending_reply_bytes), must not slow other clients
// down, and, once it reads, must get every reply, in order.
//
// The proxy runs in a child process so that its RSS is measured alone, and the development upstream
// (`proxy devdb`) in another: the 16 MB replies the upstream builds are not the proxy's memory.
// PROXY_SLOW_READER_SECONDS (default 15) sets how long the client stays unread; the figure
// is 60 s: `PROXY_SLOW_READER_SECONDS=60 node test/run.mjs test/faults/slow-reader.test.ts`.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import type { ChildProcess } from 'node:child_process';
import { MongoClient } from 'mongodb';
import { freePort, startChild } from '../../bench/lib.ts';
import { readMemory } from '../../bench/connection-flood.ts';
import { Framer, ReplyPeek, HEADER_SIZE } from '../../runtime/wire/index.ts';
import { opMsg } from '../helpers/wire.ts';

const ROOT = new URL('../..', import.meta.url).pathname;
const MB = 1024 * 1024;
const SECONDS = Number(process.env.PROXY_SLOW_READER_SECONDS ?? 15);
const DOCS = 300;
const DOC_BYTES = 100 * 1024;
/** Pipelined finds: more than clients.max_queued_requests (64), so reading pauses on that bound too. */
const REQUESTS = 120;
/** The documented bound: a non-reading client costs at most max_pending_reply_bytes + one reply. */
const RSS_BOUND = 64 * MB;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

test(`a client that never reads ${REQUESTS} pipelined 16 MB replies keeps the proxy within +64 MB RSS for ${SECONDS} s, others keep being served, ` +
  `then it gets every reply in order`,
{ timeout: (SECONDS + 150) * 1000 }, async () => {
  const tmp = mkdtempSync(join(tmpdir(), 'slow-reader-'));
  const port = await freePort();
  const dbPort = await freePort();
  const configFile = join(tmp, 'proxy.json');
  writeFileSync(configFile, JSON.stringify({
    listen: `127.0.0.1:${port}`, upstream: { uri: `mongodb://127.0.0.1:${dbPort}/` }, log: { level: 'warn' },
  }));
  let devdb: ChildProcess | null = null;
  let child: ChildProcess | null = null;
  let client: MongoClient | null = null;
  let slow: Socket | null = null;
  try {
    devdb = await startChild('devdb', process.execPath, [join(ROOT, 'bin/proxy.mjs'), 'devdb', '--port', String(dbPort)], dbPort, ROOT);
    child = await startChild('proxy', process.execPath, [join(ROOT, 'bin/proxy.mjs'), 'serve', '--config', configFile, '--workers', '1'], port, ROOT);
    const pid = child.pid!;
    const uri = `mongodb://127.0.0.1:${port}/`;
    client = new MongoClient(uri, { serverSelectionTimeoutMS: 5000, maxPoolSize: 2 });
    const big = client.db('slow').collection('big');
    const pad = 'x'.repeat(DOC_BYTES);
    for (let i = 0; i < DOCS; i += 50) {
      await big.insertMany(Array.from({ length: 50 }, (_, k) => ({ _id: i + k, pad })) as never[]);
    }
    const small = client.db('slow').collection('small');
    await small.insertOne({ _id: 1 as never, v: 'bystander' });
    // Warm-up: one whole large reply through the proxy, then the idle figure.
    const all = await big.find({}, { batchSize: DOCS }).toArray();
    assert.equal(all.length, DOCS);
    const baseline: number[] = [];
    for (let i = 0; i < 30; i++) {
      const t0 = performance.now();
      await small.findOne({ _id: 1 as never });
      baseline.push(performance.now() - t0);
    }
    await sleep(500);
    const idle = readMemory(pid).rss;

    // The slow client: pipelines REQUESTS finds, each answered by one 16 MB reply, and reads nothing.
    slow = connect({ host: '127.0.0.1', port });
    await new Promise<void>((resolve, reject) => { slow!.once('connect', resolve); slow!.once('error', reject); });
    slow.pause();
    const ids: number[] = [];
    const frames: Buffer[] = [];
    for (let i = 0; i < REQUESTS; i++) {
      const reqId = 1000 + i;
      ids.push(reqId);
      frames.push(opMsg({ find: 'big', filter: {}, batchSize: DOCS, $db: 'slow' }, { reqId }));
    }
    slow.write(Buffer.concat(frames));

    // While it does not read: sample the proxy's RSS, and time a bystander's requests.
    let maxRss = idle;
    const during: number[] = [];
    let failures = 0;
    const until = performance.now() + SECONDS * 1000;
    while (performance.now() < until) {
      const t0 = performance.now();
      try {
        const d = await small.findOne({ _id: 1 as never });
        if (d?.v !== 'bystander') failures++;
      } catch {
        failures++;
      }
      during.push(performance.now() - t0);
      maxRss = Math.max(maxRss, readMemory(pid).rss);
      await sleep(50);
    }
    const growth = maxRss - idle;
    console.log(`slow reader: idle RSS ${(idle / MB).toFixed(1)} MB, max RSS while unread ${(maxRss / MB).toFixed(1)} MB `
        + `(+${(growth / MB).toFixed(1)} MB over ${SECONDS} s); bystander: ${during.length} finds, median `
        + `${median(during).toFixed(2)} ms (before: ${median(baseline).toFixed(2)} ms), max ${Math.max(...during).toFixed(1)} ms`);
    assert.equal(failures, 0, 'every bystander request is answered');
    assert.ok(growth <= RSS_BOUND, `proxy RSS grew by ${(growth / MB).toFixed(1)} MB, bound ${RSS_BOUND / MB} MB`);
    // Normal latency: the median stays in the same range as before the slow client (generous
    // slack for a shared, noisy machine; without backpressure it degrades by orders of magnitude).
    assert.ok(median(during) < Math.max(25, 10 * median(baseline)),
        `bystander median ${median(during).toFixed(2)} ms vs ${median(baseline).toFixed(2)} ms before`);

    // Now it reads: every reply arrives, in request order, each with the whole batch.
    const got: number[] = [];
    const peek = new ReplyPeek();
    let badReplies = 0;
    const done = new Promise<void>((resolve, reject) => {
      const framer = new Framer({
        onFrame(f: Buffer) {
          got.push(f.readInt32LE(8));
          const r = peek.read(f.subarray(HEADER_SIZE + 5));
          if (!r.ok || f.length < 16_000_000) badReplies++;
          if (got.length === REQUESTS) resolve();
        },
        onFrameError(err) { reject(err); },
      });
      slow!.on('data', (c: Buffer) => framer.push(c));
      slow!.once('close', () => reject(new Error(`connection closed after ${got.length} replies`)));
    });
    slow.resume();
    await done;
    assert.deepEqual(got, ids, 'replies arrive in request order, one per request');
    assert.equal(badReplies, 0, 'every reply is ok and carries a full 16 MB batch');
  } finally {
    slow?.destroy();
    await client?.close().catch(() => {});
    child?.kill('SIGKILL');
    devdb?.kill('SIGKILL');
    rmSync(tmp, { recursive: true, force: true });
  }
});
