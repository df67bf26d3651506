// A hostile or broken upstream (a scripted server, test/helpers/stub-upstream.ts) behind the
// proxy: replies the proxy did not ask for must never reach a client as the answer to another
// request, the connection that carried them is dropped (never pooled out of step), the affected
// client gets a MongoDB error document, and other requests keep being served.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { serialize, type Document } from 'bson';
import { deflateSync } from 'node:zlib';
import { RawClient, opMsg, header, OP_REPLY, OP_COMPRESSED } from '../helpers/wire.ts';
import { StubUpstream, stubReply } from '../helpers/stub-upstream.ts';
import { withProxy, type Cleanup } from '../helpers/proxy.ts';
import { until } from '../helpers/until.ts';

const MORE_TO_COME = 2;

async function setup(t: Cleanup, upstream: Record<string, unknown> = {}, hello: Document = {}) {
  const stub = new StubUpstream();
  stub.hello = hello;
  stub.onCommand = (r) => r.socket.write(stubReply(r.requestId, { op: r.op, ok: 1 }));
  const uri = await stub.listen();
  const { proxy } = await withProxy(t, { upstream: { uri, pool_size: 2, wait_queue_timeout_ms: 2000, ...upstream } });
  t.after(() => stub.close());
  const client = await RawClient.connect(proxy.port);
  t.after(() => client.destroy());
  return { stub, proxy, client };
}

test('a reply with moreToCome the proxy did not ask for: an error document, the connection dropped, its next frame never answers another request',
  async (t) => {
    const { stub, proxy, client } = await setup(t);
    stub.onCommand = (r) => {
      if (r.op === 'find') {
        // An exhaust stream nobody asked for: a first batch with moreToCome, the next one a moment later.
        const first = stubReply(r.requestId, { cursor: { id: 0, ns: 'a.x', firstBatch: [{ n: 1 }] }, ok: 1 }, MORE_TO_COME);
        r.socket.write(first);
        setTimeout(() => r.socket.writable && r.socket.write(stubReply(first.readInt32LE(4), { stale: true, ok: 1 })), 50);
        return;
      }
      setTimeout(() => r.socket.writable && r.socket.write(stubReply(r.requestId, { op: r.op, ok: 1 })), 150);
    };
    const find = await client.roundTrip(opMsg({ find: 'x', $db: 'a' }));
    assert.equal(find.flags & MORE_TO_COME, 0, 'moreToCome must not reach a client that did not ask for exhaust');
    assert.equal(find.body!.ok, 0, JSON.stringify(find.body));
    assert.equal(find.body!.code, 6, JSON.stringify(find.body));
    assert.match(String(find.body!.errmsg), /moreToCome/);
    // The next request gets its own reply, not the upstream's leftover frame.
    const ping = await client.roundTrip(opMsg({ ping: 1, $db: 'a' }));
    assert.deepEqual(ping.body, { op: 'ping', ok: 1 });
    // No connection is left leased to nobody: every open connection is back in the pool.
    await until('every upstream connection idle', () => proxy.pool.size === proxy.pool.idleCount);
    assert.ok(proxy.server.stats.upstreamErrors >= 1);
    const other = await RawClient.connect(proxy.port);
    t.after(() => other.destroy());
    assert.deepEqual((await other.roundTrip(opMsg({ ping: 1, $db: 'a' }))).body, { op: 'ping', ok: 1 });
  });

test('a reply to another request, an OP_REPLY, an unknown compressor, a decompression bomb: error documents, and the proxy keeps serving', async (t) => {
  const { stub, proxy, client } = await setup(t);
  stub.onCommand = (r) => {
    const coll = r.cmd[r.op];
    if (coll === 'responseTo') r.socket.write(stubReply(r.requestId + 1, { ok: 1 }));
    else if (coll === 'opReply') {
      const doc = Buffer.from(serialize({ ok: 1 }));
      const fields = Buffer.alloc(20);
      fields.writeInt32LE(1, 16); // numberReturned
      r.socket.write(Buffer.concat([header(16 + 20 + doc.length, 1, r.requestId, OP_REPLY), fields, doc]));
    } else if (coll === 'compressor') {
      const inner = stubReply(r.requestId, { ok: 1 });
      const p = Buffer.alloc(9);
      p.writeInt32LE(2013, 0);
      p.writeInt32LE(inner.length - 16, 4);
      p[8] = 77;
      r.socket.write(Buffer.concat([header(16 + 9 + inner.length - 16, 1, r.requestId, OP_COMPRESSED), p, inner.subarray(16)]));
    } else if (coll === 'bomb' || coll === 'huge') {
      // zlib: 4 MB of zeros declared as 100 bytes (a bomb), or a declared size past 48,000,000.
      const packed = deflateSync(Buffer.alloc(4 << 20));
      const p = Buffer.alloc(9);
      p.writeInt32LE(2013, 0);
      p.writeInt32LE(coll === 'bomb' ? 100 : 60_000_000, 4);
      p[8] = 2;
      r.socket.write(Buffer.concat([header(16 + 9 + packed.length, 1, r.requestId, OP_COMPRESSED), p, packed]));
    } else r.socket.write(stubReply(r.requestId, { op: r.op, ok: 1 }));
  };
  const cases = [
    ['responseTo', /unexpected frame/], ['opReply', /unexpected frame from upstream \(opcode 1,/], ['compressor', /unknown compressor id 77/],
    ['bomb', /inflates to more than the 100 bytes/], ['huge', /more than the 48000000 a message may have/],
  ] as const;
  for (const [coll, why] of cases) {
    const r = await client.roundTrip(opMsg({ find: coll, $db: 'a' }));
    assert.equal(r.body!.ok, 0, JSON.stringify(r.body));
    assert.equal(r.body!.code, 6, JSON.stringify(r.body));
    assert.match(String(r.body!.errmsg), why);
    assert.deepEqual((await client.roundTrip(opMsg({ ping: 1, $db: 'a' }))).body, { op: 'ping', ok: 1 });
  }
  await until('every upstream connection idle', () => proxy.pool.size === proxy.pool.idleCount);
});

const ABSURD_HELLOS = [
  { maxMessageSizeBytes: 0, maxBsonObjectSize: -1, maxWriteBatchSize: 0, logicalSessionTimeoutMinutes: -5 },
  { maxMessageSizeBytes: 2 ** 40, maxBsonObjectSize: 2 ** 40, maxWriteBatchSize: 2 ** 40, maxWireVersion: 2 ** 40 },
  { maxMessageSizeBytes: 'big', maxBsonObjectSize: 1.5, maxWriteBatchSize: { n: 1 }, maxWireVersion: 'x', logicalSessionTimeoutMinutes: 'y' },
];

test('absurd limits in the upstream\'s hello are not relayed to clients nor enforced: the defaults stand in', async (t) => {
  for (const absurd of ABSURD_HELLOS) {
    const { client } = await setup(t, {}, absurd);
    const hello = await client.hello();
    const what = `upstream hello ${JSON.stringify(absurd)} gave ${JSON.stringify(hello)}`;
    assert.equal(hello.maxMessageSizeBytes, 48_000_000, what);
    assert.equal(hello.maxBsonObjectSize, 16_777_216, what);
    assert.equal(hello.maxWriteBatchSize, 100_000, what);
    assert.ok(Number.isInteger(hello.maxWireVersion) && hello.maxWireVersion >= 9 && hello.maxWireVersion < 2 ** 31, what);
    assert.ok(Number.isInteger(hello.logicalSessionTimeoutMinutes) && hello.logicalSessionTimeoutMinutes >= 0, what);
    // Requests are served (a maxMessageSizeBytes of 0 made every one a BadValue).
    assert.deepEqual((await client.roundTrip(opMsg({ ping: 1, $db: 'a' }))).body, { op: 'ping', ok: 1 }, what);
  }
});

/** The start of a frame declaring 100 bytes, whose rest never comes. */
function frameStart(): Buffer {
  const b = Buffer.alloc(8);
  b.writeInt32LE(100, 0);
  return b;
}

test('bytes from the upstream while no reply is awaited: the idle connection is dropped, never handed to the next request', async (t) => {
  const { stub, proxy, client } = await setup(t, { pool_size: 1 });
  assert.deepEqual((await client.roundTrip(opMsg({ ping: 1, $db: 'a' }))).body, { op: 'ping', ok: 1 });
  assert.equal(proxy.pool.idleCount, 1);
  for (const s of stub.sockets) s.write(frameStart());
  await until('the idle connection that got unsolicited bytes is closed', () => proxy.pool.size === 0);
  // The next request goes to a new connection (it swallowed this reply before, and waited for ever).
  assert.deepEqual((await client.roundTrip(opMsg({ ping: 1, $db: 'a' }), 3000)).body, { op: 'ping', ok: 1 });
});

test('bytes after a reply, in the same read: the connection is dropped before its next request, which goes to another one', async (t) => {
  const { stub, proxy, client } = await setup(t, { pool_size: 1 });
  stub.onCommand = (r) => {
    const reply = stubReply(r.requestId, { op: r.op, ok: 1 });
    r.socket.write(r.op === 'find' ? Buffer.concat([reply, frameStart()]) : reply);
  };
  assert.deepEqual((await client.roundTrip(opMsg({ find: 'x', $db: 'a' }))).body, { op: 'find', ok: 1 });
  const retried = proxy.server.stats.retriedUnsent;
  assert.deepEqual((await client.roundTrip(opMsg({ ping: 1, $db: 'a' }), 3000)).body, { op: 'ping', ok: 1 });
  assert.equal(proxy.server.stats.retriedUnsent, retried + 1);
  assert.equal(proxy.pool.size, proxy.pool.idleCount);
});

/** `reply` with `extra` appended and its length fixed. */
function withTail(reply: Buffer, extra: Buffer): Buffer {
  const out = Buffer.concat([reply, extra]);
  out.writeInt32LE(out.length, 0);
  return out;
}

test('a reply with bytes after its body, a section of an unknown kind, a wrong checksum or an unknown required flag: not relayed', async (t) => {
  const { stub, proxy, client } = await setup(t);
  const bad: Record<string, (reply: Buffer) => Buffer> = {
    trailing: (r) => withTail(r, Buffer.from([1, 2, 3])),
    kind7: (r) => withTail(r, Buffer.concat([Buffer.from([7]), Buffer.from(serialize({ x: 1 }))])),
    checksum: (r) => {
      const out = withTail(r, Buffer.alloc(4, 0xab));
      out.writeUInt32LE(1, 16);
      return out;
    },
    flag: (r) => {
      r.writeUInt32LE(1 << 4, 16);
      return r;
    },
  };
  stub.onCommand = (r) => {
    const reply = stubReply(r.requestId, { op: r.op, ok: 1 });
    const spoil = bad[r.cmd[r.op] as string];
    r.socket.write(spoil === undefined ? reply : spoil(reply));
  };
  for (const coll of Object.keys(bad)) {
    const r = await client.roundTrip(opMsg({ find: coll, $db: 'a' }));
    assert.equal(r.frame.length, r.frame.raw.readInt32LE(0));
    assert.equal(r.body!.ok, 0, `${coll}: ${JSON.stringify(r.body)}`);
    assert.equal(r.body!.code, 6, `${coll}: ${JSON.stringify(r.body)}`);
    assert.match(String(r.body!.errmsg), /malformed reply from upstream/, coll);
    assert.deepEqual((await client.roundTrip(opMsg({ ping: 1, $db: 'a' }))).body, { op: 'ping', ok: 1 });
  }
  await until('every upstream connection idle', () => proxy.pool.size === proxy.pool.idleCount);
});

test('a reply stalled half-way: request_timeout_ms answers NetworkTimeout and drops the connection; a reply sent a byte at a time is served', async (t) => {
  const { stub, proxy, client } = await setup(t, { request_timeout_ms: 500 });
  stub.onCommand = (r) => {
    const reply = stubReply(r.requestId, { op: r.op, ok: 1 });
    if (r.op === 'find') r.socket.write(reply.subarray(0, 20));
    else if (r.op === 'count') {
      let i = 0;
      const dribble = setInterval(() => {
        if (i >= reply.length || !r.socket.writable) clearInterval(dribble);
        else r.socket.write(reply.subarray(i, ++i));
      }, 1);
    } else r.socket.write(reply);
  };
  const other = await RawClient.connect(proxy.port);
  t.after(() => other.destroy());
  const stalled = client.roundTrip(opMsg({ find: 'x', $db: 'a' }));
  assert.deepEqual((await other.roundTrip(opMsg({ ping: 1, $db: 'a' }))).body, { op: 'ping', ok: 1 });
  const r = await stalled;
  assert.equal(r.body!.code, 89, JSON.stringify(r.body));
  assert.deepEqual((await client.roundTrip(opMsg({ count: 'x', $db: 'a' }))).body, { op: 'count', ok: 1 });
  await until('every upstream connection idle', () => proxy.pool.size === proxy.pool.idleCount);
});
