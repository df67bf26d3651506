// Graceful shutdown: the proxy stops accepting, lets the request in flight finish and answers it,
// then closes the connection; nothing in flight is lost. When the upstream does not answer before
// shutdown.drain_timeout_ms, the request still in flight is answered with InterruptedAtShutdown.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { Binary, Long } from 'bson';
import { randomUUID } from 'node:crypto';
import { MongoClient, MongoServerError } from 'mongodb';
import { DevDbServer } from '../../runtime/devdb/index.ts';
import { startProxy } from '../../runtime/app/serve.ts';
import { parseConfig } from '../../runtime/config/index.ts';
import { OP_MSG, RawClient, TcpTap, decodeReply, opMsg } from '../helpers/wire.ts';
import { until } from '../helpers/until.ts';

test('close() drains: a request in flight is answered, then new connections are refused', async () => {
  const devdb = new DevDbServer();
  const d = await devdb.listen(0);
  // A tap between proxy and upstream lets the test stall replies.
  const tap = new TcpTap(d.port);
  const tapUri = await tap.listen();
  const proxy = await startProxy(parseConfig({ listen: '127.0.0.1:0', upstream: { uri: tapUri }, log: { level: 'error' } }, null));
  const client = new MongoClient(proxy.uri, { retryReads: false, retryWrites: false, serverSelectionTimeoutMS: 2000 });
  try {
    const col = client.db('s').collection<{ _id: number; v: string }>('c');
    await col.insertOne({ _id: 1, v: 'kept' });
    tap.hold();
    const inFlight = col.findOne({ _id: 1 });
    await new Promise((r) => setTimeout(r, 100));
    const closing = proxy.server.close(5000);
    await new Promise((r) => setTimeout(r, 100));
    // No new connections while draining.
    const refused = await new Promise<boolean>((resolve) => {
      const s = connect({ host: '127.0.0.1', port: proxy.port });
      s.once('connect', () => { s.destroy(); resolve(false); });
      s.once('error', () => resolve(true));
    });
    assert.equal(refused, true, 'the listener is closed during the drain');
    tap.release();
    assert.deepEqual(await inFlight, { _id: 1, v: 'kept' });
    await closing;
    assert.equal(proxy.server.clientCount, 0);
  } finally {
    await client.close().catch(() => {});
    await devdb.close();
    await tap.close();
  }
});

test('the drain deadline: requests whose upstream reply is held past shutdown.drain_timeout_ms get InterruptedAtShutdown (11600); close() ends ' +
  'within the deadline and a margin', async () => {
  const DRAIN_MS = 1000;
  const devdb = new DevDbServer();
  const d = await devdb.listen(0);
  const tap = new TcpTap(d.port);
  const tapUri = await tap.listen();
  const proxy = await startProxy(parseConfig({
    listen: '127.0.0.1:0', upstream: { uri: tapUri }, log: { level: 'error' }, shutdown: { drain_timeout_ms: DRAIN_MS },
  }, null));
  const client = new MongoClient(proxy.uri, { retryReads: false, retryWrites: false, serverSelectionTimeoutMS: 2000 });
  const raw = await RawClient.connect(proxy.port);
  try {
    const col = client.db('s').collection<{ _id: number | string }>('drain');
    await col.insertOne({ _id: 1 });
    await raw.hello();
    const sentBefore = tap.count('toServer', OP_MSG);
    tap.hold();
    // A read through the driver, and a retryable write (lsid + txnNumber) on a raw connection.
    const read = col.findOne({ _id: 1 }).then(() => null, (e: Error) => e);
    raw.write(opMsg({
      insert: 'drain', documents: [{ _id: 'w' }], lsid: { id: new Binary(Buffer.from(randomUUID().replace(/-/g, ''), 'hex'), 4) },
      txnNumber: Long.fromNumber(1), $db: 's',
    }));
    await until('both requests at the upstream', () => tap.count('toServer', OP_MSG) >= sentBefore + 2);
    const started = Date.now();
    await proxy.close(); // what SIGTERM runs
    const closeMs = Date.now() - started;

    const err = await read;
    assert.ok(err instanceof MongoServerError, `an error document: ${String(err)}`);
    assert.equal(err.code, 11600);
    assert.equal(err.codeName, 'InterruptedAtShutdown');
    assert.match(err.message, /shut down before the upstream answered find \(shutdown\.drain_timeout_ms\)/);
    const reply = await raw.next(5000);
    assert.ok(reply !== null, 'the raw client got a reply before its connection closed');
    const body = decodeReply(reply).body!;
    assert.equal(body.ok, 0);
    assert.equal(body.code, 11600);
    assert.deepEqual(body.errorLabels, ['RetryableWriteError'], 'a retryable write may be retried elsewhere');
    assert.equal(await raw.next(5000), null, 'then the connection closes');

    // The replies were held for the whole deadline, and close() did not wait much beyond it.
    assert.ok(closeMs >= DRAIN_MS - 50, `close() took ${closeMs} ms, before the ${DRAIN_MS} ms deadline`);
    assert.ok(closeMs < DRAIN_MS + 4000, `close() took ${closeMs} ms (deadline ${DRAIN_MS} ms)`);
    assert.equal(proxy.server.clientCount, 0);
  } finally {
    raw.destroy();
    await client.close(true).catch(() => {});
    await tap.close();
    await devdb.close();
  }
});
