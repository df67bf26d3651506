// Upstream authentication: the proxy holds the upstream credentials (upstream.uri) and logs every
// pooled connection in with SCRAM-SHA-256; clients connect to the proxy without credentials.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { MongoClient, MongoServerError } from 'mongodb';
import { DevDbServer } from '../../runtime/devdb/index.ts';
import type { RunningProxy } from '../../runtime/app/serve.ts';
import { ScramClient } from '../../runtime/upstream/index.ts';
import { withProxy, type Cleanup } from '../helpers/proxy.ts';

const devdb = new DevDbServer(undefined, { users: { svc: 'p@ss:w/rd' } });
after(() => devdb.close());

/** A proxy logging in to devdb as `userinfo`, closed when test `t` ends. */
async function proxyFor(t: Cleanup, userinfo: string): Promise<RunningProxy> {
  const d = await devdbAddress;
  const { proxy } = await withProxy(t, {
    upstream: { uri: `mongodb://${userinfo}@127.0.0.1:${d.port}/?authSource=admin`, connect_timeout_ms: 2000 },
  });
  return proxy;
}
const devdbAddress = devdb.listen(0);

test('the development upstream refuses unauthenticated commands (so the next test proves something)', async () => {
  const d = await devdbAddress;
  const c = new MongoClient(d.uri, { directConnection: true });
  try {
    await assert.rejects(c.db('app').collection('c').findOne({}), (e: unknown) => e instanceof MongoServerError && e.code === 13);
  } finally {
    await c.close();
  }
});

test('the development upstream with users: logout runs before a login, and after one ends it', async () => {
  const d = await devdbAddress;
  const anon = new MongoClient(d.uri, { directConnection: true });
  const user = new MongoClient(`mongodb://svc:${encodeURIComponent('p@ss:w/rd')}@127.0.0.1:${d.port}/?authSource=admin`,
    { directConnection: true, maxPoolSize: 1 });
  try {
    assert.equal((await anon.db('admin').command({ logout: 1 })).ok, 1);
    await user.db('app').collection('c').findOne({});
    assert.equal((await user.db('admin').command({ logout: 1 })).ok, 1);
    // The one pooled connection is no longer logged in.
    await assert.rejects(user.db('app').collection('c').findOne({}), (e: unknown) => e instanceof MongoServerError && e.code === 13);
  } finally {
    await anon.close();
    await user.close();
  }
});

test('with credentials in upstream.uri, clients without credentials work through the proxy', async (t) => {
  const p = await proxyFor(t, `svc:${encodeURIComponent('p@ss:w/rd')}`);
  const c = new MongoClient(p.uri);
  try {
    const col = c.db('app').collection<{ _id: number; v: string }>('c');
    await col.insertOne({ _id: 1, v: 'through an authenticated pool' });
    assert.deepEqual(await col.findOne({ _id: 1 }), { _id: 1, v: 'through an authenticated pool' });
  } finally {
    await c.close();
  }
});

test('a wrong upstream password: clients get an error document naming the authentication failure', async (t) => {
  const p = await proxyFor(t, 'svc:wrong');
  const c = new MongoClient(p.uri, { retryReads: false, serverSelectionTimeoutMS: 3000 });
  try {
    await assert.rejects(c.db('app').collection('c').findOne({}), (e: unknown) =>
      e instanceof MongoServerError && e.code === 6 && /authentication of "svc".*failed/.test(e.message));
  } finally {
    await c.close();
  }
});

test('SCRAM client: RFC 7677 test vector (SCRAM-SHA-256, user "user", password "pencil")', () => {
  const c = new ScramClient({ username: 'user', password: 'pencil', source: 'admin', mechanism: 'SCRAM-SHA-256' }, 'rOprNGfwEbeRWgbNEkqO');
  assert.equal(c.first().toString(), 'n,,n=user,r=rOprNGfwEbeRWgbNEkqO');
  const final = c.next(Buffer.from('r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096'));
  assert.equal(final.toString(), 'c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=');
  c.finish(Buffer.from('v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4='));
  assert.throws(() => c.finish(Buffer.from('v=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=')), /signature does not match/);
});
