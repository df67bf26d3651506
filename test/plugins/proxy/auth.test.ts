// auth through the proxy with the real driver. static: per-database permissions (appName allow
// list; identity from a command field); hmac_jwt: a JWT in the top-level $proxyToken field, added
// with db.command(). What devdb received is recorded (upstreamCommands) to show the token/user
// field is stripped before forwarding.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { MongoServerError } from 'mongodb';
import { startPipelineProxy, type Doc } from './_proxy.ts';

const unauthorized = (re: RegExp) => (e: unknown) => {
  assert.ok(e instanceof MongoServerError, String(e));
  assert.equal(e.code, 13);
  assert.equal(e.codeName, 'Unauthorized');
  assert.match(e.errmsg, re);
  return true;
};

test('auth static: per-database read/readWrite and the appName allow list', { timeout: 60_000 }, async () => {
  const p = await startPipelineProxy({
    id: 'px_auth_static', request: ['auth'],
    steps: { auth: { config: { provider: 'static', apps: ['shop'], dbs: { app: 'readWrite', reports: 'read' } } } },
  });
  try {
    const shop = await p.client({ appName: 'shop', retryWrites: false });
    await shop.db('app').collection<Doc>('c').insertOne({ _id: 1 } as never);
    assert.deepEqual(await shop.db('app').collection<Doc>('c').find({}).toArray(), [{ _id: 1 }]);
    assert.deepEqual(await shop.db('reports').collection<Doc>('r').find({}).toArray(), []);
    assert.equal(await shop.db('reports').collection<Doc>('r').countDocuments({}), 0);
    await assert.rejects(shop.db('reports').collection<Doc>('r').insertOne({ a: 1 }),
      unauthorized(/not authorized to write on database "reports" \(insert needs readWrite, has read\)/));
    await assert.rejects(shop.db('reports').collection<Doc>('r').updateOne({}, { $set: { a: 1 } }), unauthorized(/update needs readWrite, has read/));
    await assert.rejects(shop.db('reports').collection<Doc>('r').aggregate([{ $out: 'x' }]).toArray(), unauthorized(/needs readWrite/));
    await assert.rejects(shop.db('other').collection<Doc>('c').find({}).toArray(), unauthorized(/database "other"/));
    assert.equal(p.upstreamCommands.filter((c) => c.$db === 'reports' && c.insert !== undefined).length, 0);
    const curl = await p.client({ appName: 'curl' });
    await assert.rejects(curl.db('app').collection<Doc>('c').find({}).toArray(), unauthorized(/application "curl" is not allowed/));
  } finally {
    await p.close();
  }
});

test('auth static with user_source field: $proxyUser via db.command, stripped before forwarding', { timeout: 60_000 }, async () => {
  const p = await startPipelineProxy({
    id: 'px_auth_field', request: ['auth'],
    steps: { auth: { config: { provider: 'static', user_source: 'field', users: ['ann', { name: 'bob', dbs: { app: 'read' } }], dbs: { app: 'readWrite' } } } },
  });
  try {
    const client = await p.client({ retryWrites: false });
    const app = client.db('app');
    const r = await app.command({ insert: 'c', documents: [{ _id: 1 }], $proxyUser: 'ann' });
    assert.equal(r.n, 1);
    const found = await app.command({ find: 'c', filter: {}, $proxyUser: 'bob' });
    assert.deepEqual(found.cursor.firstBatch, [{ _id: 1 }]);
    const upstream = p.upstreamCommands.filter((c) => c.find === 'c' || c.insert === 'c');
    assert.equal(upstream.length, 2);
    for (const c of upstream) assert.ok(!('$proxyUser' in c), `forwarded without $proxyUser: ${JSON.stringify(c)}`);
    await assert.rejects(app.command({ insert: 'c', documents: [{ _id: 2 }], $proxyUser: 'bob' }),
      unauthorized(/user "bob" is not authorized to write on database "app"/));
    await assert.rejects(app.command({ find: 'c', filter: {}, $proxyUser: 'eve' }), unauthorized(/user "eve" is not allowed/));
    await assert.rejects(app.collection<Doc>('c').find({}).toArray(), unauthorized(/\$proxyUser/));
  } finally {
    await p.close();
  }
});

const SECRET = 'proxy-test-secret-of-sufficient-length';
const b64u = (b: Buffer | string) => Buffer.from(b).toString('base64url');
function jwt(claims: object, secret = SECRET, header: object = { alg: 'HS256', typ: 'JWT' }): string {
  const signing = `${b64u(JSON.stringify(header))}.${b64u(JSON.stringify(claims))}`;
  return `${signing}.${b64u(createHmac('sha256', secret).update(signing).digest())}`;
}

test('auth hmac_jwt: valid token passes and never reaches devdb; bad signature / expired / missing → 13', { timeout: 60_000 }, async () => {
  const now = Math.floor(Date.now() / 1000);
  const p = await startPipelineProxy({
    id: 'px_auth_jwt', request: ['auth'],
    steps: { auth: { config: { provider: 'hmac_jwt', secret: SECRET, now_unix_s: now } } },
  });
  try {
    const client = await p.client({ retryWrites: false, retryReads: false });
    const app = client.db('app');
    const token = jwt({ sub: 'svc', dbs: { app: 'readWrite', reports: 'read' }, exp: now + 300 });
    const ins = await app.command({ insert: 'c', documents: [{ _id: 1, a: 1 }], $proxyToken: token });
    assert.equal(ins.n, 1);
    const found = await app.command({ find: 'c', filter: {}, $proxyToken: token });
    assert.deepEqual(found.cursor.firstBatch, [{ _id: 1, a: 1 }]);
    const upstream = p.upstreamCommands.filter((c) => c.find === 'c' || c.insert === 'c');
    assert.equal(upstream.length, 2);
    for (const c of upstream) assert.ok(!('$proxyToken' in c), `forwarded without $proxyToken: ${JSON.stringify(c)}`);
    assert.deepEqual(upstream[1].filter, {}); // the rest of the body is intact
    // read-only database from the claim
    await assert.rejects(client.db('reports').command({ insert: 'r', documents: [{}], $proxyToken: token }), unauthorized(/needs readWrite, has read/));
    // bad signature
    await assert.rejects(app.command({ find: 'c', filter: {}, $proxyToken: jwt({ sub: 'svc', dbs: { app: 'read' } }, 'another-secret-of-sufficient-length') }),
      unauthorized(/invalid token signature/));
    // tampered claims with the old signature
    const [h, , s] = token.split('.');
    await assert.rejects(app.command({ find: 'c', filter: {}, $proxyToken: `${h}.${b64u(JSON.stringify({ sub: 'svc', dbs: { admin: 'readWrite' } }))}.${s}` }),
      unauthorized(/invalid token signature/));
    // expired
    await assert.rejects(app.command({ find: 'c', filter: {}, $proxyToken: jwt({ sub: 'svc', dbs: { app: 'read' }, exp: now - 10 }) }),
      unauthorized(/token expired/));
    // alg none refused
    await assert.rejects(app.command({ find: 'c', filter: {}, $proxyToken: `${b64u('{"alg":"none"}')}.${b64u('{"sub":"x","dbs":{"app":"read"}}')}.` }),
      unauthorized(/./));
    // missing: plain driver calls carry no token
    await assert.rejects(app.collection<Doc>('c').find({}).toArray(), unauthorized(/authentication required: send an HS256 JWT in the \$proxyToken field/));
    await assert.rejects(app.collection<Doc>('c').insertOne({ a: 2 }), unauthorized(/authentication required/));
    // nothing denied reached devdb
    assert.equal(p.upstreamCommands.filter((c) => c.find === 'c' || c.insert === 'c' || c.insert === 'r').length, 2);
  } finally {
    await p.close();
  }
});
