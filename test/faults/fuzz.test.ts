// Fuzzing the wire path with mutations of frames captured from real clients (test/fixtures/wire).
// Each iteration opens a fresh raw connection, says hello (offering every compressor), then writes
// a batch of ~20 frames, most of them mutated (bit flips, boundary bytes and int32s, header length
// changes, truncation, BSON length prefixes, section kinds, OP_MSG flags incl. moreToCome /
// checksum / exhaustAllowed, opcodes, OP_COMPRESSED header and payload corruption, mutations inside
// a compressed message). A reference framer (test/helpers/fuzz.ts) says which complete frames the
// stream holds and which of them are owed a reply: every frame owed one must get a reply (matching
// responseTo) or see the connection close within 2 s; frames with moreToCome must get none; a frame
// whose declared length runs past the batch swallows what follows and the batch ends there.
// Meanwhile bystanders (a raw client doing ping + find, one doing zstd-compressed finds, and a
// `mongodb` MongoClient doing finds) must keep succeeding, and the proxy must log nothing at error
// level.
//
//   PROXY_FUZZ_SECONDS=120 node test/run.mjs test/faults/fuzz.test.ts   # longer run (default 15 s)
//   PROXY_FUZZ_SEED=0x1234abcd                                           # replay a run
//   PROXY_FUZZ_ITER=17                                                   # …only its iteration 17
//   PROXY_FUZZ_OUT=/tmp/fuzz.json                                        # all findings + statistics
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { MongoClient, type Collection } from 'mongodb';
import { type Document } from 'bson';
import { startStack, type Stack } from '../helpers/stack.ts';
import { RawClient, opMsg, type Frame } from '../helpers/wire.ts';
import { fixtureFrame, fixtureIndex } from '../wire/fixtures.ts';
import {
  Rng, iterationSeed, parseSeed, hex, mutate, referenceFrames, decodeAnyReply, wrapCompressed, unwrapCompressed,
  StderrCapture, COMPRESSOR_ZSTD, type RefFrame,
} from '../helpers/fuzz.ts';
import { initCompression } from '../../runtime/wire/compression.ts';

const SECONDS = Number(process.env.PROXY_FUZZ_SECONDS ?? 15);
const SEED = parseSeed(process.env.PROXY_FUZZ_SEED) ?? ((Date.now() ^ (Math.random() * 0x1_0000_0000)) >>> 0);
const ONLY_ITER = process.env.PROXY_FUZZ_ITER !== undefined ? Number(process.env.PROXY_FUZZ_ITER) : null;
const OUT = process.env.PROXY_FUZZ_OUT;
const REPLY_MS = 2000;
const BATCH = 20;
const BYSTANDER_MS = 5000;
const seedText = `0x${SEED.toString(16).padStart(8, '0')}`;

interface Base {
  name: string;
  bytes: Buffer;
}

interface Sent {
  base: string;
  mutations: string[];
  bytes: Buffer;
  offset: number;
}

interface Finding {
  kind: 'no-reply' | 'reply-to-moreToCome' | 'bad-reply' | 'internal-error' | 'upstream-lost' | 'unexpected-reply' | 'hello-failed'
    | 'bystander' | 'error-log';
  iteration: number;
  replay: string;
  detail: string;
  /** The frame as the proxy frames it (hex), and the batch entries it came from. */
  frameHex?: string;
  from?: Array<{ index: number; base: string; mutations: string[] }>;
  due?: string;
  /** What the proxy's connection looked like when the wait ran out (private fields, best effort). */
  proxyState?: Record<string, unknown>;
  /** What happened after the 2 s ran out (up to 3 s more). */
  eventually?: string;
  /** The whole batch (written to PROXY_FUZZ_OUT only). */
  batch?: Array<{ base: string; mutations: string[]; hex: string }>;
}

describe('wire fuzz (mutated captured frames)', () => {
  let stack: Stack;
  const capture = new StderrCapture(process.env.PROXY_FUZZ_VERBOSE === '1');
  const findings: Finding[] = [];
  /** Per mutation kind: outcomes of frames it produced (reply ok / error code / close / none). */
  const outcomes = new Map<string, Map<string, number>>();
  /** Proxy connection id → fuzz iteration (for error log lines). */
  const connIteration = new Map<number, number>();
  let current = { iteration: -1, connId: -1 };
  let bases: Base[] = [];
  let stopBystanders = false;
  let bystanderLoops: Promise<void>[] = [];
  const bystanderOps = { raw: 0, zstd: 0, driver: 0 };
  let driver: MongoClient | null = null;
  let coll: Collection;

  const replayOf = (i: number) => `PROXY_FUZZ_SEED=${seedText} PROXY_FUZZ_ITER=${i}`;

  function count(kind: string, outcome: string): void {
    let m = outcomes.get(kind);
    if (m === undefined) outcomes.set(kind, (m = new Map()));
    m.set(outcome, (m.get(outcome) ?? 0) + 1);
  }

  function bystanderFailed(who: string, err: unknown): void {
    findings.push({
      kind: 'bystander', iteration: current.iteration, replay: replayOf(current.iteration),
      detail: `${who}: ${(err as Error)?.stack ?? String(err)} (fuzz iteration ${current.iteration} on proxy connection ${current.connId} was running)`,
    });
  }

  const PROBE = [{ _id: 1, v: 'one' }, { _id: 2, v: 'two' }, { _id: 3, v: 'three' }];

  function checkProbe(body: Document | undefined, who: string): void {
    assert.equal(body?.ok, 1, `${who}: ${JSON.stringify(body)}`);
    assert.deepEqual(body?.cursor?.firstBatch, PROBE, `${who}: wrong documents`);
  }

  async function rawBystander(): Promise<void> {
    let c: RawClient | null = null;
    while (!stopBystanders) {
      try {
        if (c === null || c.closed) {
          if (c !== null) throw new Error('bystander connection was closed by the proxy');
          c = await RawClient.connect(stack.proxy.port);
          await c.hello();
        }
        const p = await c.roundTrip(opMsg({ ping: 1, $db: 'admin' }), BYSTANDER_MS);
        assert.equal(p.body?.ok, 1, `raw ping: ${JSON.stringify(p.body)}`);
        const f = await c.roundTrip(opMsg({ find: 'probe', filter: {}, sort: { _id: 1 }, $db: 'fuzz_bystander' }), BYSTANDER_MS);
        checkProbe(f.body, 'raw find');
        bystanderOps.raw++;
      } catch (err) {
        bystanderFailed('raw bystander', err);
        c?.destroy();
        c = null;
      }
      await new Promise((r) => setTimeout(r, 5));
    }
    c?.destroy();
  }

  /** Finds sent as OP_COMPRESSED(zstd): the proxy decompresses with the same zstd module it fuzzes. */
  async function zstdBystander(): Promise<void> {
    let c: RawClient | null = null;
    while (!stopBystanders) {
      try {
        if (c === null || c.closed) {
          if (c !== null) throw new Error('zstd bystander connection was closed by the proxy');
          c = await RawClient.connect(stack.proxy.port);
          const h = await c.hello({ compression: ['zstd'] });
          assert.deepEqual(h.compression, ['zstd']);
        }
        const req = wrapCompressed(opMsg({ find: 'probe', filter: {}, sort: { _id: 1 }, $db: 'fuzz_bystander' }), COMPRESSOR_ZSTD);
        c.write(req);
        const f = await c.next(BYSTANDER_MS);
        if (f === null) throw new Error('zstd bystander: connection closed instead of replying');
        assert.equal(f.responseTo, req.readInt32LE(4), 'zstd bystander: responseTo');
        const inner = unwrapCompressed(f.raw);
        assert.ok(inner !== null, `zstd bystander: reply does not decompress: ${hex(f.raw)}`);
        const d = decodeAnyReply(f.raw);
        assert.equal(d.error, null, `zstd bystander: ${d.error}`);
        checkProbe(d.body ?? undefined, 'zstd find');
        bystanderOps.zstd++;
      } catch (err) {
        bystanderFailed('zstd bystander', err);
        c?.destroy();
        c = null;
      }
      await new Promise((r) => setTimeout(r, 5));
    }
    c?.destroy();
  }

  async function driverBystander(): Promise<void> {
    while (!stopBystanders) {
      try {
        const docs = await coll.find({}, { sort: { _id: 1 }, maxTimeMS: BYSTANDER_MS }).toArray();
        assert.deepEqual(docs, PROBE);
        bystanderOps.driver++;
      } catch (err) {
        bystanderFailed('driver bystander', err);
      }
      await new Promise((r) => setTimeout(r, 5));
    }
  }

  before(async () => {
    capture.start();
    stack = await startStack({ logLevel: 'warn' });
    // The proxy rate-limits log lines a client can trigger (LogThrottle, shared by warn and error):
    // under fuzzing the warn lines would use up the budget and hide an error line. Unthrottled here,
    // so every error-level line shows (best effort: skipped if the field is not there).
    const srv = stack.proxy.server as unknown as { inputLogThrottle?: { take(): number } };
    if (typeof srv.inputLogThrottle?.take === 'function') srv.inputLogThrottle = { take: () => 0 };
    await initCompression(); // already done by the proxy; the helpers share its zstd module
    bases = fixtureIndex().map((e) => ({ name: e.file, bytes: fixtureFrame(e.file) }));
    assert.ok(bases.length >= 50, `fixtures: ${bases.length}`);
    // What the captures lack: hello over OP_MSG (drivers switch to it after helloOk), a checksummed
    // message, and a moreToCome insert with a document sequence.
    const client = { driver: { name: 'nodejs', version: '7.0.0' }, os: { type: 'Linux', name: 'linux' }, platform: 'Node.js v20',
      application: { name: 'fuzz?x=1' } };
    bases.push(
      { name: 'synth-hello', bytes: opMsg({ hello: 1, helloOk: true, client, compression: ['zstd', 'snappy'], $db: 'admin' }) },
      { name: 'synth-isMaster', bytes: opMsg({ isMaster: 1, $db: 'admin', topologyVersion: { processId: 'x', counter: 0n } }) },
      { name: 'synth-find-checksum', bytes: opMsg({ find: 'items', filter: { a: { $gte: 1 } }, $db: 'shop' }, { checksum: true }) },
      { name: 'synth-insert-moreToCome', bytes: opMsg({ insert: 'items', ordered: false, writeConcern: { w: 0 }, $db: 'shop' }, {
        flags: 2, sequences: [{ id: 'documents', docs: [{ a: 1, s: 'text' }, { a: 2, b: { c: [1, 'x'] } }] }] }) },
    );
    // retryReads off: a transient failure caused by the fuzzing must show, not be retried away.
    driver = new MongoClient(stack.uri, { serverSelectionTimeoutMS: BYSTANDER_MS, retryReads: false, compressors: ['snappy', 'zlib'] });
    coll = driver.db('fuzz_bystander').collection('probe');
    await coll.insertMany(PROBE.map((d) => ({ ...d })) as never[]);
    stopBystanders = false;
    bystanderLoops = [rawBystander(), zstdBystander(), driverBystander()];
  });

  after(async () => {
    stopBystanders = true;
    await Promise.all(bystanderLoops);
    await driver?.close();
    await stack?.close();
    capture.stop();
  });

  /** A snapshot of the proxy's side of connection `id` (private fields; diagnostics only). */
  function proxyState(id: number): Record<string, unknown> {
    for (const c of stack.proxy.server.connections()) {
      if (c.id !== id) continue;
      const x = c as unknown as Record<string, unknown> & {
        framer?: { buffered?: number }; queue?: { length: number; paused: boolean }; call?: { active: boolean };
        socket: { destroyed: boolean; writableLength: number };
      };
      return {
        busy: x.busy, closed: x.closed, paused: x.queue?.paused, queued: x.queue?.length, framerBuffered: x.framer?.buffered,
        waitingForUpstream: x.call?.active, socketDestroyed: x.socket.destroyed, socketWritePending: x.socket.writableLength,
      };
    }
    return { gone: true };
  }

  async function iteration(i: number): Promise<void> {
    const rng = new Rng(iterationSeed(SEED, i));
    const replay = replayOf(i);
    const c = await RawClient.connect(stack.proxy.port);
    const replies = new Map<number, { at: number; frame: Frame }>();
    const order: Frame[] = [];
    let closedAt = 0;
    let wake: (() => void) | null = null;
    const notify = () => { const w = wake; wake = null; w?.(); };
    let pump: Promise<void> = Promise.resolve();
    try {
      let connId = -1;
      try {
        const h = await c.roundTrip(opMsg({ hello: 1, $db: 'admin', compression: ['snappy', 'zlib', 'zstd'] }), BYSTANDER_MS);
        connId = Number(h.body?.connectionId ?? -1);
        assert.deepEqual(h.body?.compression, ['snappy', 'zlib', 'zstd']);
      } catch (err) {
        findings.push({ kind: 'hello-failed', iteration: i, replay, detail: (err as Error).message });
        return;
      }
      current = { iteration: i, connId };
      connIteration.set(connId, i);
      // Collect every reply (and the close) from here on.
      pump = (async () => {
        for (;;) {
          let f: Frame | null;
          try {
            f = await c.next(600_000);
          } catch {
            continue;
          }
          if (f === null) {
            closedAt = Date.now();
            notify();
            return;
          }
          order.push(f);
          if (!replies.has(f.responseTo)) replies.set(f.responseTo, { at: Date.now(), frame: f });
          notify();
        }
      })();

      // Build the batch; stop once the stream cannot be framed any further or a frame's declared
      // length reaches far past what the batch will send.
      const sent: Sent[] = [];
      let stream = Buffer.alloc(0);
      for (let k = 0; k < BATCH; k++) {
        const base = rng.pick(bases);
        const frame = Buffer.from(base.bytes);
        // Request ids from the iteration number, so a replayed iteration sends the same bytes.
        frame.writeInt32LE(0x40000000 + i * 64 + k, 4);
        const m = rng.chance(0.15) ? { bytes: frame, mutations: [] } : mutate(frame, rng);
        sent.push({ base: base.name, mutations: m.mutations, bytes: m.bytes, offset: stream.length });
        stream = Buffer.concat([stream, m.bytes]);
        const r = referenceFrames(stream);
        if (r.end === 'bad-length' || (r.end === 'partial' && r.missing > 2048)) break;
      }
      const ref = referenceFrames(stream);
      const from = (f: RefFrame) => sent
        .map((s, index) => ({ index, s }))
        .filter(({ s }) => s.offset < f.offset + f.bytes.length && s.offset + s.bytes.length > f.offset)
        .map(({ index, s }) => ({ index, base: s.base, mutations: s.mutations }));
      const kindOf = (f: RefFrame) => {
        const src = from(f);
        if (src.length !== 1 || src[0].index !== sent.findIndex((s) => s.offset === f.offset)) return 'resync-garbage';
        const ms = src[0].mutations;
        if (ms.length === 0) return 'unmutated';
        if (ms.length > 1) return 'stacked';
        const m = ms[0];
        if (m.startsWith('flags:')) return m.replace(/\d+$/, '');
        if (m.startsWith('cz-')) return m.split(/[:(]/)[0];
        return m.split(/[:@(]/)[0];
      };

      const batch = sent.map((s) => ({ base: s.base, mutations: s.mutations, hex: hex(s.bytes) }));
      const before = findings.length;
      const attachBatch = () => { for (let k = before; k < findings.length; k++) findings[k].batch = batch; };
      const sentAt = Date.now();
      for (const s of sent) c.write(s.bytes);

      let lastSatisfied = sentAt;
      for (const f of ref.frames) {
        if (f.due !== 'reply') continue;
        const deadline = Math.max(sentAt, lastSatisfied) + REPLY_MS;
        while (!replies.has(f.requestId) && closedAt === 0 && Date.now() < deadline) {
          await new Promise<void>((resolve) => {
            wake = resolve;
            setTimeout(resolve, Math.max(1, deadline - Date.now()));
          });
        }
        if (replies.has(f.requestId) || closedAt !== 0) {
          lastSatisfied = Math.max(lastSatisfied, replies.get(f.requestId)?.at ?? closedAt);
          continue;
        }
        // Neither a reply nor a close in time.
        const state = proxyState(connId);
        const more = Date.now() + 3000;
        while (!replies.has(f.requestId) && closedAt === 0 && Date.now() < more) await new Promise((r) => setTimeout(r, 20));
        const eventually = replies.has(f.requestId)
          ? `reply after ${replies.get(f.requestId)!.at - sentAt} ms`
          : closedAt !== 0 ? `closed after ${closedAt - sentAt} ms` : 'still nothing 5 s after the batch';
        findings.push({
          kind: 'no-reply', iteration: i, replay, due: `${f.due} (${f.why})`,
          detail: `frame ${ref.frames.indexOf(f)} of the batch (requestId ${f.requestId}, opcode ${f.opCode}, ${f.bytes.length} bytes): no reply ` +
            `and no close within ${REPLY_MS} ms`,
          frameHex: hex(f.bytes), from: from(f), proxyState: state, eventually,
        });
        count(kindOf(f), 'NO-REPLY');
        attachBatch();
        return;
      }
      // Let replies to frames owed none arrive, if the proxy were to send any.
      await new Promise((r) => setTimeout(r, 50));

      const known = new Set(ref.frames.map((f) => f.requestId));
      // Ids that do not name one frame (a mutated requestId may repeat another frame's, or the id the
      // proxy read from an unframeable header): a reply to those cannot be attributed.
      const badId = ref.end === 'bad-length' ? (stream.length - ref.badAt >= 8 ? stream.readInt32LE(ref.badAt + 4) : 0) : null;
      const idCount = new Map<number, number>();
      for (const id of [...ref.frames.map((f) => f.requestId), ...(badId !== null ? [badId] : [])]) idCount.set(id, (idCount.get(id) ?? 0) + 1);
      for (const f of ref.frames) {
        const r = replies.get(f.requestId);
        const kind = kindOf(f);
        if (r === undefined) {
          count(kind, f.due === 'reply' ? 'close' : `none(${f.due})`);
          continue;
        }
        if (f.due === 'none' && idCount.get(f.requestId) === 1) {
          findings.push({
            kind: 'reply-to-moreToCome', iteration: i, replay, due: f.why, detail: `frame ${ref.frames.indexOf(f)} got a reply`,
            frameHex: hex(f.bytes), from: from(f),
          });
        }
        const d = decodeAnyReply(r.frame.raw);
        if (d.error !== null) {
          findings.push({ kind: 'bad-reply', iteration: i, replay, detail: `${d.error}; reply ${hex(r.frame.raw)}`, frameHex: hex(f.bytes), from: from(f) });
          count(kind, 'bad-reply');
          continue;
        }
        const body = d.body ?? {};
        const code = body.ok === 1 ? 'ok' : `err${body.code ?? (body.$err !== undefined ? '$err' : '?')}`;
        count(kind, code);
        if (body.code === 6) {
          findings.push({
            kind: 'upstream-lost', iteration: i, replay, detail: String(body.errmsg), frameHex: hex(f.bytes), from: from(f), due: f.why,
          });
        }
        if (body.code === 1) {
          findings.push({
            kind: 'internal-error', iteration: i, replay, detail: String(body.errmsg), frameHex: hex(f.bytes), from: from(f), due: f.why,
          });
        }
      }
      // Replies answering no frame of the stream: only the error for an unframeable header is expected.
      for (const f of order) {
        if (known.has(f.responseTo) || f.responseTo === badId) continue;
        findings.push({ kind: 'unexpected-reply', iteration: i, replay, detail: `reply with responseTo ${f.responseTo}: ${hex(f.raw)}` });
      }
      attachBatch();
      if (ref.end !== 'ok') count(ref.end === 'bad-length' ? 'stream:bad-length' : 'stream:partial', closedAt !== 0 ? 'close' : 'open');
    } finally {
      c.destroy();
      notify();
      await pump;
    }
  }

  test(`fuzz for ${SECONDS} s (seed ${seedText}): every frame owed a reply gets one or a close; bystanders unaffected; no error logs`,
    { timeout: (SECONDS + 120) * 1000 }, async (t) => {
      t.diagnostic(`seed ${seedText}${ONLY_ITER !== null ? ` iteration ${ONLY_ITER}` : ''}; replay with PROXY_FUZZ_SEED=${seedText}`);
      console.log(`# wire fuzz: seed ${seedText}, ${SECONDS} s`);
      const end = Date.now() + SECONDS * 1000;
      let iterations = 0;
      const decodeErrorsBefore = stack.proxy.server.stats.decodeErrors;
      for (let i = ONLY_ITER ?? 0; ; i++) {
        if (ONLY_ITER !== null ? i > ONLY_ITER : Date.now() >= end) break;
        await iteration(i);
        iterations++;
      }
      // The bystanders get a last round after the fuzzing stopped.
      await new Promise((r) => setTimeout(r, 300));
      stopBystanders = true;
      await Promise.all(bystanderLoops);

      // The proxy still serves a new connection.
      const fresh = await RawClient.connect(stack.proxy.port);
      try {
        const p = await fresh.roundTrip(opMsg({ ping: 1, $db: 'admin' }), BYSTANDER_MS);
        assert.equal(p.body?.ok, 1);
      } finally {
        fresh.destroy();
      }

      // Error-level log lines, attributed to the fuzz iteration of their connection.
      const { stderrLogSink } = await import('../../runtime/log/index.ts');
      stderrLogSink().flush();
      for (const l of capture.errors) {
        const conn = Number(l.fields.conn ?? -1);
        const it = connIteration.get(conn) ?? -1;
        findings.push({ kind: 'error-log', iteration: it, replay: replayOf(it), detail: l.raw.slice(0, 2000) });
      }

      const table = [...outcomes.entries()].sort((a, b) => a[0].localeCompare(b[0]))
        .map(([k, m]) => `  ${k.padEnd(34)} ${[...m.entries()].sort().map(([o, n]) => `${o}=${n}`).join(' ')}`);
      const summary = [
        `seed ${seedText}: ${iterations} iterations, proxy decodeErrors +${stack.proxy.server.stats.decodeErrors - decodeErrorsBefore}, ` +
          `bystander round trips raw=${bystanderOps.raw} zstd=${bystanderOps.zstd} driver=${bystanderOps.driver}`,
        'outcomes per mutation (reply ok / error code / close / none):', ...table,
        'proxy log lines: ' + [...capture.counts.entries()].map(([m, n]) => `"${m}"=${n}`).join(', '),
      ];
      for (const s of summary) t.diagnostic(s);
      if (OUT !== undefined) {
        writeFileSync(OUT, JSON.stringify({ seed: seedText, iterations, bystanderOps, summary, findings,
          outcomes: Object.fromEntries([...outcomes].map(([k, m]) => [k, Object.fromEntries(m)])) }, null, 1));
      }

      const byKind = new Map<string, number>();
      for (const f of findings) byKind.set(f.kind, (byKind.get(f.kind) ?? 0) + 1);
      const shown = findings.slice(0, 8).map((f) => [
        `- ${f.kind} (iteration ${f.iteration}; replay: ${f.replay})`,
        `  ${f.detail}`,
        f.due !== undefined ? `  owed: ${f.due}` : '',
        f.from !== undefined ? `  from: ${JSON.stringify(f.from)}` : '',
        f.frameHex !== undefined ? `  frame: ${f.frameHex}` : '',
        f.proxyState !== undefined ? `  proxy connection: ${JSON.stringify(f.proxyState)}` : '',
        f.eventually !== undefined ? `  then: ${f.eventually}` : '',
      ].filter((x) => x !== '').join('\n'));
      assert.ok(iterations > 0);
      assert.equal(findings.length, 0,
        `wire fuzz found ${findings.length} problem(s) with seed ${seedText} ` +
        `(${[...byKind].map(([k, n]) => `${k}: ${n}`).join(', ')}):\n${shown.join('\n')}\n${summary.join('\n')}`);
      assert.ok(bystanderOps.raw > 0 && bystanderOps.zstd > 0 && bystanderOps.driver > 0, JSON.stringify(bystanderOps));
      if (ONLY_ITER === null) assert.ok(stack.proxy.server.stats.decodeErrors > decodeErrorsBefore, 'the fuzzing produced decode errors');
    });
});
