// Limits and health: clients.max_connections (the connection past the limit is told why, the
// others keep working), request size limits as the handshake advertises them, and the admin
// port's health probes (/healthz, /readyz) with the upstream down and during a drain.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { MongoClient } from 'mongodb';
import { DevDbServer } from '../../runtime/devdb/index.ts';
import type { RunningProxy } from '../../runtime/app/serve.ts';
import { RawClient, TcpTap, decodeReply, opMsg, opQuery, header, OP_MSG, OP_REPLY, requestId } from '../helpers/wire.ts';
import { until } from '../helpers/until.ts';
import { withProxy } from '../helpers/proxy.ts';

const TOKEN = 'limits-test-admin-token';
const devdb = new DevDbServer();
const devdbAddress = devdb.listen(0);
const cleanups: Array<() => Promise<unknown>> = [];
after(async () => {
  for (const c of cleanups.reverse()) await c().catch(() => {});
  await devdb.close();
});

async function proxy(extra: Record<string, unknown> = {}, uri?: string): Promise<RunningProxy> {
  const d = await devdbAddress;
  // Closed with the rest, last opened first.
  const { proxy: p } = await withProxy({ after: (fn) => cleanups.push(async () => fn()) }, {
    upstream: { uri: uri ?? d.uri, connect_timeout_ms: 1000 },
    admin: { listen: '127.0.0.1:0', token: TOKEN },
    ...extra,
  });
  return p;
}

async function metric(p: RunningProxy, name: string): Promise<number> {
  const text = await (await fetch(`${p.adminUrl}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } })).text();
  const m = new RegExp(`^${name} (\\d+)`, 'm').exec(text);
  assert.ok(m !== null, `${name} is exposed`);
  return Number(m[1]);
}

test('max_connections: past the limit a driver gets "connection limit reached"; the first connections keep working', async () => {
  const p = await proxy({ clients: { max_connections: 2 } });
  // Two raw connections, each handshaken: the limit is reached.
  const a = await RawClient.connect(p.port);
  const b = await RawClient.connect(p.port);
  cleanups.push(async () => { a.destroy(); b.destroy(); });
  assert.equal((await a.hello()).ok, 1);
  assert.equal((await b.hello()).ok, 1);

  // The Node driver's connection is accepted, its handshake answered with the error, then closed.
  const refused = new MongoClient(p.uri, { serverSelectionTimeoutMS: 1500, connectTimeoutMS: 1000 });
  cleanups.push(() => refused.close());
  await assert.rejects(refused.db('admin').command({ ping: 1 }), (e: Error) => /connection limit reached/.test(e.message),
    'the driver reports the proxy\'s reason');

  // A legacy OP_QUERY isMaster (the Node driver's first handshake) gets an OP_REPLY with the error.
  const c = await RawClient.connect(p.port);
  c.write(opQuery('admin.$cmd', { isMaster: 1, helloOk: true }));
  const f = await c.next();
  assert.ok(f !== null && f.opCode === OP_REPLY, 'answered in the request\'s opcode family');
  const { docs } = decodeReply(f);
  assert.equal(docs![0].ok, 0);
  assert.equal(docs![0].code, 9001);
  assert.equal(docs![0].codeName, 'SocketException');
  assert.match(String(docs![0].errmsg), /connection limit reached.*clients\.max_connections/);
  await c.closedPromise; // and then closed by the proxy
  assert.ok(await metric(p, 'proxy_client_connections_refused_total') >= 2);

  // The connections within the limit were not disturbed.
  for (const r of [a, b]) {
    const ping = await r.roundTrip(opMsg({ ping: 1, $db: 'admin' }));
    assert.equal(ping.body!.ok, 1);
  }
  // Slots freed are slots for the next client (the driver needs two: its monitor and a pooled one).
  a.destroy();
  b.destroy();
  await until('both slots free', () => p.server.clientCount === 0);
  const next = new MongoClient(p.uri, { serverSelectionTimeoutMS: 3000, maxPoolSize: 1 });
  cleanups.push(() => next.close());
  assert.equal((await next.db('admin').command({ ping: 1 })).ok, 1);
});

test('in flight per client: one request at the upstream at a time; requests sent ahead are queued and answered in order', async () => {
  const d = await devdbAddress;
  const tap = new TcpTap(d.port);
  const tapUri = await tap.listen();
  cleanups.push(() => tap.close());
  const p = await proxy({ upstream: { uri: tapUri, pool_size: 8 } });
  const r = await RawClient.connect(p.port);
  cleanups.push(async () => r.destroy());
  await r.hello();
  const before = tap.count('toServer', OP_MSG);
  tap.hold(); // the upstream's replies are held back
  const ids: number[] = [];
  const frames: Buffer[] = [];
  for (let i = 0; i < 5; i++) {
    const id = requestId();
    ids.push(id);
    frames.push(opMsg({ find: 'inflight', filter: { n: i }, $db: 'lim' }, { reqId: id }));
  }
  r.write(Buffer.concat(frames)); // pipelined, as no driver does
  await until('the first request upstream', () => tap.count('toServer', OP_MSG) === before + 1);
  await new Promise((res) => setTimeout(res, 300));
  assert.equal(tap.count('toServer', OP_MSG), before + 1, 'the others wait at the proxy, although the pool has free connections');
  tap.release();
  for (const id of ids) {
    const f = await r.next();
    assert.ok(f !== null);
    assert.equal(f.responseTo, id, 'answered in order');
    assert.equal(decodeReply(f).body!.ok, 1);
  }
  assert.equal(tap.count('toServer', OP_MSG), before + 5);
});

test('queued requests are bounded in bytes too: large pipelined requests behind one in flight pause reading at clients.max_queued_request_bytes', async () => {
  // Without the byte bound the proxy read all 24 requests of 8 MB (fewer than max_queued_requests):
  // +192 MB held for one client; 64 requests of 48 MB held 3 GB.
  const d = await devdbAddress;
  const tap = new TcpTap(d.port);
  const tapUri = await tap.listen();
  cleanups.push(() => tap.close());
  const p = await proxy({ upstream: { uri: tapUri } });
  const r = await RawClient.connect(p.port);
  cleanups.push(async () => r.destroy());
  await r.hello();
  const COUNT = 24;
  const frames = Array.from({ length: COUNT }, () => opMsg({ ping: 1, pad: 'x'.repeat(8_000_000), $db: 'admin' }));
  const before = tap.count('toServer', OP_MSG);
  await new Promise((res) => setTimeout(res, 200));
  const base = process.memoryUsage().arrayBuffers;
  tap.hold(); // the first request stays in flight: the others wait in the proxy's queue
  for (const f of frames) r.write(f);
  await until('the first request upstream', () => tap.count('toServer', OP_MSG) === before + 1, 10_000);
  await new Promise((res) => setTimeout(res, 1000));
  const grown = process.memoryUsage().arrayBuffers - base;
  assert.ok(grown < 80 * 1024 * 1024,
    `the proxy holds ${(grown / 1048576).toFixed(0)} MB of one client's queued requests (bound: 16 MiB plus one request, one in flight, one being read)`);
  tap.release();
  for (const f of frames) {
    const reply = await r.next(20_000);
    assert.ok(reply !== null);
    assert.equal(reply.responseTo, f.readInt32LE(4), 'answered in order, once reading resumed');
    assert.equal(decodeReply(reply).body!.ok, 1);
  }
});

test('request size: a command over maxBsonObjectSize is answered with BSONObjectTooLarge and the connection stays usable', async () => {
  const p = await proxy();
  const r = await RawClient.connect(p.port);
  cleanups.push(async () => r.destroy());
  const hello = await r.hello();
  const max = hello.maxBsonObjectSize as number;
  assert.equal(max, 16 * 1024 * 1024);
  const big = await r.roundTrip(opMsg({ insert: 'c', documents: [{ _id: 1, pad: 'x'.repeat(max + 32 * 1024) }], $db: 'big' }), 15000);
  assert.equal(big.body!.ok, 0);
  assert.equal(big.body!.code, 10334);
  assert.match(String(big.body!.errmsg), /larger than maxBsonObjectSize/);
  // Same connection, next request: in sync.
  const ping = await r.roundTrip(opMsg({ ping: 1, $db: 'admin' }));
  assert.equal(ping.body!.ok, 1);
  assert.ok(await metric(p, 'proxy_oversize_requests_total') >= 1);
  // Nothing of the oversize insert reached the upstream.
  const c = new MongoClient(p.uri);
  cleanups.push(() => c.close());
  assert.equal(await c.db('big').collection('c').countDocuments({}), 0);
});

test('request size: a sequence document over maxBsonObjectSize is answered with BSONObjectTooLarge, not forwarded; the connection stays usable', async () => {
  const p = await proxy();
  const r = await RawClient.connect(p.port);
  cleanups.push(async () => r.destroy());
  const max = (await r.hello()).maxBsonObjectSize as number;
  const before = await metric(p, 'proxy_oversize_requests_total');
  // A small command document: only the sequence's second document is over the limit (plus the
  // 16 KiB of command overhead a command document may take).
  const big = await r.roundTrip(opMsg({ insert: 'c', ordered: false, $db: 'bigseq' }, {
    sequences: [{ id: 'documents', docs: [{ _id: 1 }, { _id: 2, pad: 'x'.repeat(max + 32 * 1024) }] }],
  }), 15000);
  assert.equal(big.body!.ok, 0, JSON.stringify(big.body).slice(0, 300));
  assert.equal(big.body!.code, 10334);
  assert.match(String(big.body!.errmsg), /document 1 of sequence "documents" is \d+ bytes, larger than maxBsonObjectSize/);
  const ping = await r.roundTrip(opMsg({ ping: 1, $db: 'admin' }));
  assert.equal(ping.body!.ok, 1);
  assert.equal(await metric(p, 'proxy_oversize_requests_total'), before + 1);
  // Nothing of the message reached the upstream, not even its small first document.
  const c = new MongoClient(p.uri);
  cleanups.push(() => c.close());
  assert.equal(await c.db('bigseq').collection('c').countDocuments({}), 0);
});

test('request size: a message of exactly maxMessageSizeBytes is served', async () => {
  const p = await proxy();
  const r = await RawClient.connect(p.port);
  cleanups.push(async () => r.destroy());
  const maxMessage = (await r.hello()).maxMessageSizeBytes as number;
  // Three documents in one sequence, padded so that the frame is exactly maxMessageSizeBytes.
  const docs = [{ _id: 1, pad: 'x'.repeat(16_000_000) }, { _id: 2, pad: 'x'.repeat(16_000_000) }, { _id: 3, pad: '' }];
  const short = maxMessage - opMsg({ insert: 'c', $db: 'exactmax' }, { sequences: [{ id: 'documents', docs }] }).length;
  docs[2].pad = 'x'.repeat(short);
  const frame = opMsg({ insert: 'c', $db: 'exactmax' }, { sequences: [{ id: 'documents', docs }] });
  assert.equal(frame.length, maxMessage);
  const reply = await r.roundTrip(frame, 30000);
  assert.deepEqual(reply.body, { n: 3, ok: 1 });
});

test('request size: a frame declaring more than maxMessageSizeBytes is answered with an error, then the connection closes', async () => {
  const p = await proxy();
  const r = await RawClient.connect(p.port);
  cleanups.push(async () => r.destroy());
  await r.hello();
  const id = requestId();
  // Only the header: the proxy refuses the length before reading (or allocating) the body.
  r.write(header(48_000_001, id, 0, OP_MSG));
  const f = await r.next();
  assert.ok(f !== null, 'an error document comes before the close');
  assert.equal(f.responseTo, id);
  const body = decodeReply(f).body!;
  assert.equal(body.ok, 0);
  assert.equal(body.codeName, 'ProtocolError');
  assert.match(String(body.errmsg), /message length 48000001 is outside the accepted range/);
  await r.closedPromise;
  // Other clients are unaffected.
  const c = new MongoClient(p.uri);
  cleanups.push(() => c.close());
  assert.equal((await c.db('admin').command({ ping: 1 })).ok, 1);
});

test('health: /healthz and /readyz answer without the token; the rest of the admin API still needs it', async () => {
  const p = await proxy();
  const h = await fetch(`${p.adminUrl}/healthz`);
  assert.equal(h.status, 200);
  assert.deepEqual(await h.json(), { status: 'ok' });
  const r = await fetch(`${p.adminUrl}/readyz`);
  assert.equal(r.status, 200);
  const body = await r.json() as { ready: boolean; upstream: string };
  assert.equal(body.ready, true);
  assert.match(body.upstream, /^127\.0\.0\.1:\d+$/);
  assert.equal((await fetch(`${p.adminUrl}/metrics`)).status, 401);
  assert.equal((await fetch(`${p.adminUrl}/api/v1/pipeline`)).status, 401);
  assert.equal((await fetch(`${p.adminUrl}/healthz/../metrics`)).status, 401);
});

test('health: /readyz is 503 while the upstream is unreachable and 200 again when it is back', async () => {
  const up = new DevDbServer();
  const addr = await up.listen(0);
  const p = await proxy({}, addr.uri);
  assert.equal((await fetch(`${p.adminUrl}/readyz`)).status, 200);
  await up.close(); // drops the pooled connections too
  await until('the pool to notice', () => p.server.pool.size === 0);
  const down = await fetch(`${p.adminUrl}/readyz`);
  assert.equal(down.status, 503);
  const why = await down.json() as { ready: boolean; reason: string; message: string };
  assert.equal(why.ready, false);
  assert.equal(why.reason, 'upstream_unreachable');
  assert.match(why.message, /ECONNREFUSED/);
  // Liveness does not depend on the upstream.
  assert.equal((await fetch(`${p.adminUrl}/healthz`)).status, 200);
  const again = new DevDbServer();
  await again.listen(addr.port);
  cleanups.push(() => again.close());
  assert.equal((await fetch(`${p.adminUrl}/readyz`)).status, 200);
});

test('health: /readyz is 503 (draining) as soon as the drain starts, while a request is still in flight', async () => {
  const d = await devdbAddress;
  const tap = new TcpTap(d.port);
  const tapUri = await tap.listen();
  cleanups.push(() => tap.close());
  const p = await proxy({ shutdown: { drain_timeout_ms: 5000 } }, tapUri);
  const c = new MongoClient(p.uri, { retryReads: false });
  cleanups.push(() => c.close());
  await c.db('h').collection<{ _id: number }>('c').insertOne({ _id: 1 });
  assert.equal((await fetch(`${p.adminUrl}/readyz`)).status, 200);
  tap.hold();
  const inFlight = c.db('h').collection<{ _id: number }>('c').findOne({ _id: 1 });
  await until('the request in flight', () => p.server.stats.requests > 0 && [...p.server.connections()].some((x) => !x.idle));
  const closing = p.close();
  const r = await fetch(`${p.adminUrl}/readyz`);
  assert.equal(r.status, 503);
  assert.equal((await r.json() as { reason: string }).reason, 'draining');
  tap.release();
  assert.deepEqual(await inFlight, { _id: 1 }, 'the request in flight is still answered');
  await closing;
});
