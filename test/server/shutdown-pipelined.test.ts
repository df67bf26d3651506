// SIGTERM with deep pipelining: a client with more requests written than
// clients.max_queued_requests has its reading paused; the drain must read the rest and answer
// every request — the one in flight with its reply, every other with ShutdownInProgress (91) —
// none left unread and unanswered, and the connection must end well before the drain deadline.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { performance } from 'node:perf_hooks';
import { DevDbServer } from '../../runtime/devdb/index.ts';
import { startProxy } from '../../runtime/app/serve.ts';
import { parseConfig } from '../../runtime/config/index.ts';
import { initCompression, decompressFrame } from '../../runtime/wire/index.ts';
import { OP_MSG, RawClient, TcpTap, decodeReply, opMsg, requestId } from '../helpers/wire.ts';
import { zlibCompressed } from '../helpers/compressed.ts';
import { until } from '../helpers/until.ts';

const MAX_QUEUED = 8;
const DRAIN_MS = 5000;
const devdb = new DevDbServer();
const devdbAddress = devdb.listen(0);
after(() => devdb.close());
await initCompression();
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

for (const depth of [1, 64, 100]) {
  test(`shutdown at pipelining depth ${depth} (clients.max_queued_requests ${MAX_QUEUED}): every request is answered, none dropped`,
    { timeout: 60_000 }, async () => {
      const d = await devdbAddress;
      const tap = new TcpTap(d.port); // holds the upstream's replies: the first request stays in flight
      const tapUri = await tap.listen();
      const proxy = await startProxy(parseConfig({
        listen: '127.0.0.1:0', upstream: { uri: tapUri }, log: { level: 'error' },
        clients: { max_queued_requests: MAX_QUEUED }, shutdown: { drain_timeout_ms: DRAIN_MS },
      }, null));
      const raw = await RawClient.connect(proxy.port);
      raw.socket.setNoDelay(true);
      try {
        await raw.hello();
        const upstreamBefore = tap.count('toServer', OP_MSG);
        tap.hold();
        // Written one at a time, as a pipelining client does, so that the proxy reads them in
        // separate chunks and stops reading once its queue is over the bound; the rest wait unread.
        const ids: number[] = [];
        for (let i = 0; i < depth; i++) {
          const id = requestId();
          ids.push(id);
          raw.write(opMsg({ find: 'pipelined', filter: { n: i }, $db: 'drain' }, { reqId: id }));
          if (i === 0) await until('the first request at the upstream', () => tap.count('toServer', OP_MSG) > upstreamBefore);
          else await sleep(2);
        }
        // Long enough that a connection judged by when it last read looks quiet.
        await sleep(400);
        const closing = proxy.close(); // what SIGTERM runs
        await sleep(100);
        tap.release();
        const t0 = performance.now();
        const replies = new Map<number, { ok: number; code?: number }>();
        for (;;) {
          const f = await raw.next(DRAIN_MS + 5000);
          if (f === null) break;
          assert.ok(!replies.has(f.responseTo), `one reply per request (${f.responseTo} twice)`);
          replies.set(f.responseTo, decodeReply(f).body as { ok: number; code?: number });
        }
        await closing;
        const ms = performance.now() - t0;
        const unanswered = ids.filter((id) => !replies.has(id));
        const shutdown = [...replies.values()].filter((b) => b.ok === 0 && b.code === 91).length;
        console.log(`depth ${depth}: ${replies.size} of ${depth} answered (1 reply, ${shutdown} ShutdownInProgress), `
        + `${unanswered.length} unanswered, connection ended ${ms.toFixed(0)} ms after the upstream answered`);
        assert.deepEqual(unanswered, [], 'every request written got an answer');
        assert.equal(replies.get(ids[0])!.ok, 1, 'the request in flight gets its real reply');
        for (const id of ids.slice(1)) assert.equal(replies.get(id)!.code, 91, 'the others: ShutdownInProgress');
        assert.equal(replies.size, depth);
        assert.ok(ms < DRAIN_MS, `the connection ended after ${ms.toFixed(0)} ms, not at the drain deadline`);
        assert.equal(proxy.server.stats.shutdownRefused, depth - 1);
      } finally {
        raw.destroy();
        await tap.close();
      }
    });
}

test('shutdown while a large compressed request is being decompressed: it gets its real reply; those behind it, compressed or not, get 91',
  { timeout: 60_000 }, async () => {
    const d = await devdbAddress;
    const proxy = await startProxy(parseConfig({
      listen: '127.0.0.1:0', upstream: { uri: d.uri }, log: { level: 'error' }, shutdown: { drain_timeout_ms: DRAIN_MS },
    }, null));
    const raw = await RawClient.connect(proxy.port);
    try {
      assert.deepEqual((await raw.hello({ compression: ['zlib'] })).compression, ['zlib']);
      // ~30 MB of documents, decompressed in a worker (over the 64 KiB inline limit).
      const docs = Array.from({ length: 300 }, (_, i) => ({ _id: i, s: 'x'.repeat(100_000) }));
      const insert = (coll: string) => zlibCompressed(opMsg({ insert: coll, $db: 'drain' }, { sequences: [{ id: 'documents', docs }] }));
      const first = insert('first');
      const ping = opMsg({ ping: 1, $db: 'admin' });
      const second = insert('second');
      raw.write(Buffer.concat([first, ping, second]));
      // The drain begins while the first is in the inflater (checked between event-loop turns).
      const conn = () => [...proxy.server.connections()][0];
      while (conn().idle) await new Promise((r) => setImmediate(r));
      assert.equal(proxy.server.inflater.stats.inflated, 0, 'still being decompressed');
      const closing = proxy.close();
      const answers = new Map<number, { ok: number; code?: number }>();
      for (;;) {
        const f = await raw.next(DRAIN_MS + 5000);
        if (f === null) break;
        const body = f.opCode === OP_MSG ? decodeReply(f).body : decodeReply({ ...f, raw: decompressFrame(f.raw).frame, opCode: OP_MSG }).body;
        answers.set(f.responseTo, body as { ok: number; code?: number });
      }
      await closing;
      assert.equal(answers.get(first.readInt32LE(4))?.ok, 1, 'the request in flight: its real reply');
      assert.equal(answers.get(ping.readInt32LE(4))?.code, 91);
      assert.equal(answers.get(second.readInt32LE(4))?.code, 91, 'decompressed during the drain, then refused');
      assert.equal(answers.size, 3);
    } finally {
      raw.destroy();
    }
  });
