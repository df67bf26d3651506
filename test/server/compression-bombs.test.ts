// Compressed requests from a hostile client, through a running proxy: decompression bombs are
// answered with an error document and the connection and the proxy keep serving; large messages
// are inflated off the event loop, so a bystander's pings stay fast; zstd's memory does not stay
// at its peak; a compressed moreToCome request that fails gets no reply; a connection closed while
// its message is being inflated is simply dropped; requests stay in order.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { performance } from 'node:perf_hooks';
import { deflateSync } from 'node:zlib';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { serialize } from 'bson';
import { MongoClient } from 'mongodb';
import { DevDbServer } from '../../runtime/devdb/index.ts';
import type { RunningProxy } from '../../runtime/app/serve.ts';
import { INLINE_INFLATE_BYTES, compressFrame } from '../../runtime/wire/index.ts';
import { RawClient, decodeReply, opMsg, requestId } from '../helpers/wire.ts';
import { NOOP, SNAPPY, ZLIB, ZSTD, compressedFrame, zlibCompressed, zstdZeros } from '../helpers/compressed.ts';
import { until } from '../helpers/until.ts';
import { withProxy } from '../helpers/proxy.ts';

const GiB = 2 ** 30;
const BIG = 47_000_000; // inside maxMessageSizeBytes (48,000,000 with the header)
const devdb = new DevDbServer();
const devdbAddress = devdb.listen(0);
const cleanups: Array<() => Promise<unknown>> = [];
after(async () => {
  for (const c of cleanups.reverse()) await c().catch(() => {});
  await devdb.close();
});

async function proxy(): Promise<RunningProxy> {
  const d = await devdbAddress;
  // Closed with the rest, last opened first.
  const { proxy: p } = await withProxy({ after: (fn) => cleanups.push(async () => fn()) }, { upstream: { uri: d.uri } });
  return p;
}

async function client(p: RunningProxy): Promise<RawClient> {
  const c = await RawClient.connect(p.port);
  cleanups.push(async () => c.destroy());
  const h = await c.hello({ compression: ['zstd', 'zlib', 'snappy'] });
  assert.deepEqual(h.compression, ['zstd', 'zlib', 'snappy']);
  return c;
}

/** Sends `frame` and returns the error document it is answered with. */
async function refusal(c: RawClient, frame: Buffer, ms = 10_000): Promise<{ code: number; errmsg: string }> {
  const id = frame.readInt32LE(4);
  const r = await c.roundTrip(frame, ms);
  assert.equal(r.frame.responseTo, id, 'the answer is to that request');
  assert.equal(r.body!.ok, 0, `an error document: ${JSON.stringify(r.body)}`);
  return r.body as { code: number; errmsg: string };
}

async function pingOk(c: RawClient): Promise<void> {
  const r = await c.roundTrip(opMsg({ ping: 1, $db: 'admin' }));
  assert.equal(r.body!.ok, 1);
}

function rssMb(): number {
  return process.memoryUsage().rss / 1024 / 1024;
}

test('zstd bombs: answered with ProtocolError and an accurate message, at once; the connection and the proxy keep serving', async () => {
  const p = await proxy();
  const c = await client(p);
  const other = await client(p);
  let t = performance.now();
  // 1 GiB of zeros in 32 KB, the frame stating its size, the message declaring 100 bytes.
  let e = await refusal(c, compressedFrame(ZSTD, 100, zstdZeros(GiB, GiB)));
  assert.equal(e.code, 17);
  assert.match(e.errmsg, /the zstd frame states 1073741824 uncompressed bytes but the message declares 100; refused without decompressing/);
  // The same without a stated size: decompression stops at 100 bytes.
  e = await refusal(c, compressedFrame(ZSTD, 100, zstdZeros(GiB, null)));
  assert.equal(e.code, 17);
  assert.match(e.errmsg, /zstd data decompresses to more than the 100 bytes the message declares \(decompression stopped there\)/);
  // Declaring a large size (off the event loop): stopped there too.
  e = await refusal(c, compressedFrame(ZSTD, BIG, zstdZeros(GiB, null)));
  assert.match(e.errmsg, /zstd data decompresses to more than the 47000000 bytes the message declares/);
  const ms = performance.now() - t;
  assert.ok(ms < 2000, `three bombs answered in ${ms.toFixed(0)} ms (inflating one GiB took 4 s)`);
  await pingOk(c);
  await pingOk(other);

  // Claims of 2 GB: in the OP_COMPRESSED header, and in the zstd frame's.
  t = performance.now();
  e = await refusal(c, compressedFrame(ZSTD, 2_000_000_000, zstdZeros(1000, null)));
  assert.equal(e.code, 17);
  assert.match(e.errmsg, /OP_COMPRESSED declares an uncompressed message of 2000000016 bytes \(header included\), more than the 48000000 a message may have/);
  e = await refusal(c, compressedFrame(ZSTD, 100, zstdZeros(1000, 2_000_000_000)));
  assert.match(e.errmsg, /the zstd frame states 2000000000 uncompressed bytes but the message declares 100/);
  assert.doesNotMatch(e.errmsg, /compress with code/);
  assert.ok(performance.now() - t < 1000);
  await pingOk(c);
  assert.ok(p.server.stats.decodeErrors >= 5, 'counted as bad input');
});

test('RSS after the zstd bombs is back within 64 MB of before: zstd\'s memory does not stay at its peak', async () => {
  const p = await proxy();
  const c = await client(p);
  // Retained memory, not garbage waiting for a collection, is what must come back.
  setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc') as () => void;
  // Warm up: a worker has run once, the paths are compiled.
  await refusal(c, compressedFrame(ZSTD, BIG, zstdZeros(BIG, BIG)));
  await until('the warm-up worker ended', () => p.server.inflater.workers === 0, 10_000);
  gc();
  const before = rssMb();
  let peak = before;
  const frames = [
    compressedFrame(ZSTD, 100, zstdZeros(GiB, GiB)),
    compressedFrame(ZSTD, 100, zstdZeros(GiB, null)),
    compressedFrame(ZSTD, BIG, zstdZeros(GiB, null)),
    compressedFrame(ZSTD, BIG, zstdZeros(BIG, BIG)), // inflates whole (inside the limit), then is not an OP_MSG
  ];
  for (let i = 0; i < 3; i++) {
    for (const f of frames) {
      const e = await refusal(c, Buffer.from(f));
      assert.ok(e.code === 17 || e.code === 22, `code ${e.code}: ${e.errmsg}`);
      peak = Math.max(peak, rssMb());
    }
  }
  await pingOk(c);
  await until('the worker holding zstd memory ended', () => p.server.inflater.workers === 0, 10_000);
  const settled = rssMb();
  gc();
  await new Promise((r) => setTimeout(r, 100));
  const afterGc = rssMb();
  console.log(`zstd bombs: RSS ${before.toFixed(0)} MB before, ${peak.toFixed(0)} MB at the most, ${settled.toFixed(0)} MB once the worker ended, `
    + `${afterGc.toFixed(0)} MB after a collection (+${(afterGc - before).toFixed(0)} MB)`);
  assert.ok(afterGc - before < 64, `RSS ${before.toFixed(0)} → ${afterGc.toFixed(0)} MB`);
  assert.ok(p.server.inflater.stats.workersRecycled >= 2);
});

test('a bystander\'s pings stay fast while another client sends zstd and zlib bombs and 47 MB messages', { timeout: 120_000 }, async () => {
  const p = await proxy();
  const bystander = await RawClient.connect(p.port);
  cleanups.push(async () => bystander.destroy());
  await bystander.hello();
  const attackers = [await client(p), await client(p)];
  const zeros47 = deflateSync(Buffer.alloc(BIG), { level: 9 }); // 45.7 KB
  const kinds = [
    compressedFrame(ZLIB, BIG, zeros47), // inflates to 47 MB, inside the limit
    compressedFrame(ZSTD, BIG, zstdZeros(BIG, BIG)),
    compressedFrame(ZSTD, BIG, zstdZeros(GiB, null)), // stopped at 47 MB
    compressedFrame(ZSTD, 100, zstdZeros(GiB, GiB)), // refused from its header
    compressedFrame(ZLIB, 100, zeros47), // stopped at 100 bytes
  ];
  const ROUNDS = 6;
  let stop = false;
  const latencies: number[] = [];
  const pinging = (async () => {
    while (!stop) {
      const t = performance.now();
      const r = await bystander.roundTrip(opMsg({ ping: 1, $db: 'admin' }));
      latencies.push(performance.now() - t);
      assert.equal(r.body!.ok, 1);
    }
  })();
  let answered = 0;
  const t0 = performance.now();
  await Promise.all(attackers.map(async (a, n) => {
    const own = kinds.map((k) => Buffer.from(k));
    for (let i = 0; i < ROUNDS; i++) {
      for (const frame of own) {
        frame.writeInt32LE(requestId(), 4);
        const e = await refusal(a, frame, 30_000);
        assert.ok(e.code === 17 || e.code === 22, `attacker ${n}: code ${e.code} ${e.errmsg}`);
        answered++;
      }
    }
  }));
  const attackMs = performance.now() - t0;
  stop = true;
  await pinging;
  latencies.sort((x, y) => x - y);
  const p50 = latencies[Math.floor(latencies.length / 2)];
  const max = latencies[latencies.length - 1];
  console.log(`bystander during ${answered} hostile compressed messages (${attackMs.toFixed(0)} ms): ${latencies.length} pings, `
    + `p50 ${p50.toFixed(2)} ms, p99 ${latencies[Math.floor(latencies.length * 0.99)].toFixed(2)} ms, max ${max.toFixed(1)} ms (goal < 50 ms)`);
  assert.equal(answered, attackers.length * ROUNDS * kinds.length);
  assert.ok(latencies.length >= 20, `${latencies.length} pings`);
  assert.ok(max < 250, `worst bystander ping ${max.toFixed(1)} ms`);
  assert.ok(p.server.inflater.stats.peakInflatingBytes <= p.server.inflater.maxInflatingBytes);
});

test('a compressed moreToCome request that fails to parse gets no reply; the next request on the connection is answered', async () => {
  const p = await proxy();
  const c = await client(p);
  const stats = p.server.stats;
  // An OP_MSG with moreToCome and an unknown section kind, compressed: small (inline) and large (in a worker).
  const badInner = (pad: number) => {
    const body = Buffer.from(serialize({ insert: 'c', documents: [{ _id: 1 }], $db: 'mtc', pad: 'x'.repeat(pad) }));
    const msg = Buffer.concat([Buffer.alloc(16), Buffer.from([2, 0, 0, 0]), Buffer.from([0]), body, Buffer.from([9, 1, 2, 3])]);
    msg.writeInt32LE(msg.length, 0);
    msg.writeInt32LE(requestId(), 4);
    msg.writeInt32LE(2013, 12);
    return msg;
  };
  for (const [pad, label] of [[10, 'small'], [200_000, 'large']] as const) {
    const repliesBefore = stats.errorReplies;
    const silentBefore = stats.errorsWithoutReply;
    for (const id of [ZLIB, ZSTD]) c.write(compressFrame(badInner(pad), id));
    const ping = opMsg({ ping: 1, $db: 'admin' });
    const r = await c.roundTrip(ping);
    assert.equal(r.frame.responseTo, ping.readInt32LE(4), `${label}: the first frame back answers the ping, not the moreToCome requests`);
    assert.equal(r.body!.ok, 1);
    assert.equal(stats.errorReplies, repliesBefore, `${label}: no error reply counted: none was written`);
    assert.equal(stats.errorsWithoutReply, silentBefore + 2, `${label}: counted as errors without a reply`);
  }
  // A compressed moreToCome request that parses is forwarded (and not answered either).
  c.write(zlibCompressed(opMsg({ insert: 'c', documents: [{ _id: 'w0' }], writeConcern: { w: 0 }, $db: 'mtc' }, { flags: 2 })));
  const find = await c.roundTrip(opMsg({ find: 'c', filter: { _id: 'w0' }, $db: 'mtc' }));
  assert.equal((find.body!.cursor as { firstBatch: unknown[] }).firstBatch.length, 1);
  // An uncompressed request that fails is still answered, and counted.
  const before = stats.errorReplies;
  const bad = opMsg({ ping: 1, $db: 'admin' });
  bad[20] = 7; // unknown section kind
  assert.equal((await refusal(c, bad)).code, 17);
  assert.equal(stats.errorReplies, before + 1);
});

test('a compressed moreToCome request refused before it is decompressed (lying size, bomb, compressor not negotiated) gets no reply; ' +
  'the next request is answered', async () => {
  const p = await proxy();
  const c = await client(p);
  const stats = p.server.stats;
  const insert = (pad: number) => opMsg({ insert: 'c', documents: [{ _id: 1 }], $db: 'mtc', pad: 'x'.repeat(pad) }, { flags: 2 });
  const zeros = (pad: number) => { const m = insert(0); return Buffer.concat([m, Buffer.alloc(pad)]); };
  const items = (n: number) => opMsg({ insert: 'c', documents: Array.from({ length: n }, (_, i) => ({ i, name: `item-${i}` })), $db: 'mtc' }, { flags: 2 });
  assert.ok(items(4000).length > INLINE_INFLATE_BYTES, 'large enough to be decompressed in a worker');
  /** `msg` (header included) as compressor `id`, declaring its size plus `delta`. */
  const lying = (id: number, msg: Buffer, delta: number, data?: Buffer) =>
    compressedFrame(id, msg.length - 16 + delta, data ?? compressFrame(msg, id).subarray(25));
  const cases: Array<[string, Buffer]> = [
    ['noop declaring 5 bytes more than it carries', lying(NOOP, insert(10), 5, insert(10).subarray(16))],
    ['snappy whose stream states another size', lying(SNAPPY, insert(10), 5)],
    ['zlib declaring 5 bytes more than it inflates to', lying(ZLIB, insert(10), 5)],
    ['zlib bomb, inline', lying(ZLIB, zeros(60_000), -60_000, deflateSync(zeros(60_000).subarray(16)))],
    ['zlib bomb, in a worker', lying(ZLIB, zeros(400_000), -200_000, deflateSync(zeros(400_000).subarray(16)))],
    // zstd: read when its first block starts with raw bytes (as for a message this short).
    ['zstd whose frame states more than declared', lying(ZSTD, opMsg({ ping: 1, $db: 'admin' }, { flags: 2 }), -5)],
    ['zstd declaring 5 bytes more than it decompresses to', lying(ZSTD, opMsg({ ping: 1, $db: 'admin' }, { flags: 2 }), 5)],
    // zstd with entropy-coded literals (most zstd messages): its first block is decoded on its own.
    ['zstd with Huffman-coded literals declaring 5 bytes more, inline', lying(ZSTD, insert(5000), 5)],
    ['zstd with Huffman-coded literals declaring 5 bytes more, in a worker', lying(ZSTD, items(4000), 5)],
  ];
  for (const [label, frame] of cases) {
    const repliesBefore = stats.errorReplies;
    const silentBefore = stats.errorsWithoutReply;
    c.write(frame);
    const ping = opMsg({ ping: 1, $db: 'admin' });
    const r = await c.roundTrip(ping);
    assert.equal(r.frame.responseTo, ping.readInt32LE(4), `${label}: the first frame back answers the ping, not the moreToCome request`);
    assert.equal(r.body!.ok, 1);
    assert.equal(stats.errorReplies, repliesBefore, `${label}: no error reply written`);
    assert.equal(stats.errorsWithoutReply, silentBefore + 1, `${label}: counted as an error without a reply`);
  }
  // A compressor the connection did not negotiate: refused, silently for a moreToCome request.
  const zlibOnly = await RawClient.connect(p.port);
  cleanups.push(async () => zlibOnly.destroy());
  await zlibOnly.hello({ compression: ['zlib'] });
  zlibOnly.write(compressFrame(insert(10), SNAPPY));
  const ping = opMsg({ ping: 1, $db: 'admin' });
  assert.equal((await zlibOnly.roundTrip(ping)).frame.responseTo, ping.readInt32LE(4), 'snappy not negotiated: no reply to the moreToCome request');
  // The same refusals of a request that expects a reply are answered.
  assert.equal((await refusal(c, lying(ZLIB, opMsg({ ping: 1, $db: 'admin' }), 5))).code, 17);
  assert.equal((await refusal(zlibOnly, compressFrame(opMsg({ ping: 1, $db: 'admin' }), SNAPPY))).code, 17);
});

test('a connection that closes while its message is being inflated: no crash, no reply, the proxy keeps serving', async () => {
  const p = await proxy();
  const other = await client(p);
  for (let i = 0; i < 5; i++) {
    const c = await client(p);
    c.write(compressedFrame(ZLIB, BIG, deflateSync(Buffer.alloc(BIG))));
    await until('the message handed to the inflater', () => p.server.inflater.stats.workersStarted > 0 &&
      [...p.server.connections()].some((x) => !x.idle), 5000);
    // An abortive close (RST): a FIN alone is a half-close, and the client is still owed its reply (half-close.test.ts).
    c.socket.resetAndDestroy();
  }
  await until('the connections gone', () => p.server.clientCount === 1, 5000);
  await until('nothing left in the inflater', () => p.server.inflater.queued === 0, 10_000);
  await pingOk(other);
  assert.ok(p.server.inflater.stats.cancelled >= 1, `${p.server.inflater.stats.cancelled} cancelled`);
});

test('requests stay in order: a large compressed insert inflated off the loop, then a ping, answered in order', async () => {
  const p = await proxy();
  const c = await client(p);
  const docs = Array.from({ length: 200 }, (_, i) => ({ _id: i, s: `doc ${i} `.repeat(100) }));
  const insert = zlibCompressed(opMsg({ insert: 'ordered', $db: 'bombs' }, { sequences: [{ id: 'documents', docs }] }));
  assert.ok(insert.readInt32LE(20) > 64 * 1024, 'declares more than the inline limit');
  const ping = opMsg({ ping: 1, $db: 'admin' });
  c.write(Buffer.concat([insert, ping]));
  const first = await c.next();
  const second = await c.next();
  assert.ok(first !== null && second !== null);
  assert.equal(first.responseTo, insert.readInt32LE(4), 'the insert is answered first');
  assert.equal(second.responseTo, ping.readInt32LE(4));
  const m = new MongoClient(p.uri);
  cleanups.push(() => m.close());
  assert.equal(await m.db('bombs').collection('ordered').countDocuments({}), 200);
  assert.ok(p.server.inflater.stats.inflated >= 1);
  assert.ok(decodeReply(second).body!.ok === 1);
});
