// Graceful shutdown: the proxy stops accepting, lets the request in flight finish and answers it,
// then closes the connection; nothing in flight is lost.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { MongoClient } from 'mongodb';
import { DevDbServer } from '../../runtime/devdb/index.ts';
import { startProxy } from '../../runtime/app/serve.ts';
import { parseConfig } from '../../runtime/config/index.ts';
import { TcpTap } from '../helpers/wire.ts';

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
