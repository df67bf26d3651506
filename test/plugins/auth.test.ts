import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { Verdict } from '../../sdk/testing/index.ts';
import { load, refuses } from './helpers.ts';

const b64u = (b: Buffer | string) => Buffer.from(b).toString('base64url');
function jwt(claims: object, secret: string, header: object = { alg: 'HS256', typ: 'JWT' }): string {
  const signing = `${b64u(JSON.stringify(header))}.${b64u(JSON.stringify(claims))}`;
  return `${signing}.${b64u(createHmac('sha256', secret).update(signing).digest())}`;
}

const STATIC = {
  provider: 'static',
  users: ['ann', { name: 'bob', dbs: { reports: 'read' } }],
  apps: ['shop', 'batch'],
  dbs: { app: 'readWrite', reports: 'read' },
};

test('auth static: allowed users/apps and per-database read/readWrite', async () => {
  const h = await load('auth', STATIC);
  const ann = { conn: { user: 'ann', appName: 'shop' } };
  const bob = { conn: { user: 'bob', appName: 'shop' } };
  assert.equal(h.request({ insert: 'c', documents: [{}], $db: 'app' }, ann).verdict, Verdict.Continue);
  assert.equal(h.request({ find: 'c', $db: 'reports' }, ann).verdict, Verdict.Continue);
  const w = h.request({ update: 'c', updates: [], $db: 'reports' }, ann);
  assert.equal(w.reject?.code, 13);
  assert.match(w.reject!.message, /not authorized to write on database "reports" \(update needs readWrite, has read\)/);
  // aggregate with $out is a write
  assert.equal(h.request({ aggregate: 'c', pipeline: [{ $out: 'x' }], cursor: {}, $db: 'reports' }, ann).verdict, Verdict.Reject);
  assert.equal(h.request({ aggregate: 'c', pipeline: [{ $match: {} }], cursor: {}, $db: 'reports' }, ann).verdict, Verdict.Continue);
  // bob's own permissions replace the defaults
  assert.equal(h.request({ find: 'c', $db: 'app' }, bob).verdict, Verdict.Reject);
  assert.equal(h.request({ find: 'c', $db: 'reports' }, bob).verdict, Verdict.Continue);
  assert.match(h.request({ find: 'c', $db: 'app' }, { conn: { user: 'eve', appName: 'shop' } }).reject!.message, /user "eve" is not allowed/);
  assert.match(h.request({ find: 'c', $db: 'app' }, { conn: { user: 'ann', appName: 'curl' } }).reject!.message, /application "curl" is not allowed/);
  assert.match(h.request({ find: 'c', $db: 'app' }, { conn: { user: '', appName: 'shop' } }).reject!.message, /no user identity/);
  // neutral commands pass
  assert.equal(h.request({ endSessions: [], $db: 'admin' }, ann).verdict, Verdict.Continue);
});

test('auth static: identity from a command field, stripped before forwarding', async () => {
  const h = await load('auth', { provider: 'static', user_source: 'field', users: ['ann'], dbs: { app: 'read' } });
  const r = h.request({ find: 'c', $proxyUser: 'ann', $db: 'app' });
  assert.equal(r.verdict, Verdict.Continue);
  assert.deepEqual(r.newRequest, { find: 'c', $db: 'app' });
  assert.match(h.request({ find: 'c', $db: 'app' }).reject!.message, /send the \$proxyUser field/);
});

const SECRET = 'a-very-long-shared-secret-that-is-longer-than-one-block-of-sha256-64-bytes!!';
const NOW = 1_700_000_000;
const JWT_CFG = { provider: 'hmac_jwt', secret: SECRET, now_unix_s: NOW };

test('auth hmac_jwt: valid token passes and is stripped; permissions from the dbs claim', async () => {
  const h = await load('auth', JWT_CFG);
  const token = jwt({ sub: 'svc-reports', dbs: { app: 'readWrite', logs: 'read' }, exp: NOW + 60, pad: 'x'.repeat(200) }, SECRET);
  const r = h.request({ find: 'users', filter: { a: 1 }, $proxyToken: token, $db: 'app' });
  assert.equal(r.verdict, Verdict.Continue, r.reject?.message);
  assert.deepEqual(r.newRequest, { find: 'users', filter: { a: 1 }, $db: 'app' });
  assert.equal(r.exchange.conn.user, 'svc-reports', 'the verified sub becomes the user property');
  assert.equal(h.request({ insert: 'c', documents: [{}], $proxyToken: token, $db: 'app' }).verdict, Verdict.Continue);
  const w = h.request({ insert: 'c', documents: [{}], $proxyToken: token, $db: 'logs' });
  assert.match(w.reject!.message, /user "svc-reports" is not authorized to write on database "logs"/);
  assert.match(h.request({ find: 'c', $proxyToken: token, $db: 'other' }).reject!.message, /has none/);
});

test('auth hmac_jwt: missing, bad signature, expired, not yet valid, wrong alg, garbage', async () => {
  const h = await load('auth', JWT_CFG);
  const deny = (cmd: object) => { const r = h.request(cmd); assert.equal(r.reject?.code, 13); assert.equal(r.reject?.codeName, 'Unauthorized');
    return r.reject!.message; };
  assert.match(deny({ find: 'c', $db: 'app' }), /authentication required: send an HS256 JWT in the \$proxyToken field/);
  assert.match(deny({ find: 'c', $proxyToken: jwt({ sub: 'x', dbs: { app: 'read' } }, 'another-secret-of-enough-length'), $db: 'app' }),
    /invalid token signature/);
  assert.match(deny({ find: 'c', $proxyToken: jwt({ sub: 'x', dbs: { app: 'read' }, exp: NOW - 1 }, SECRET), $db: 'app' }), /token expired/);
  assert.match(deny({ find: 'c', $proxyToken: jwt({ sub: 'x', dbs: { app: 'read' }, nbf: NOW + 600 }, SECRET), $db: 'app' }), /not valid yet/);
  assert.match(deny({ find: 'c', $proxyToken: jwt({ sub: 'x' }, SECRET, { alg: 'none' }), $db: 'app' }), /must be HS256/);
  assert.match(deny({ find: 'c', $proxyToken: 'abc.def', $db: 'app' }), /malformed token/);
  assert.match(deny({ find: 'c', $proxyToken: 'a!b.c.d', $db: 'app' }), /malformed token/);
  assert.match(deny({ find: 'c', $proxyToken: jwt({ dbs: {} }, SECRET), $db: 'app' }), /no sub claim/);
  assert.match(deny({ find: 'c', $proxyToken: 42, $db: 'app' }), /must be a string/);
  // tampered payload keeps the old signature
  const good = jwt({ sub: 'x', dbs: { app: 'read' } }, SECRET).split('.');
  good[1] = b64u(JSON.stringify({ sub: 'x', dbs: { app: 'readWrite' } }));
  assert.match(deny({ insert: 'c', documents: [], $proxyToken: good.join('.'), $db: 'app' }), /invalid token signature/);
});

test('auth hmac_jwt: without now_unix_s, expiry is checked against the host wall clock', async () => {
  const h = await load('auth', { provider: 'hmac_jwt', secret: SECRET });
  const now = Math.floor(Date.now() / 1000);
  assert.match(h.request({ find: 'c', $proxyToken: jwt({ sub: 'x', dbs: { app: 'read' }, exp: now - 60 }, SECRET),
    $db: 'app' }).reject?.message ?? '', /expired/);
  assert.equal(h.request({ find: 'c', $proxyToken: jwt({ sub: 'x', dbs: { app: 'read' }, exp: now + 600 }, SECRET), $db: 'app' }).verdict, Verdict.Continue);
  assert.equal(h.request({ find: 'c', $proxyToken: jwt({ sub: 'x', dbs: { app: 'read' } }, SECRET), $db: 'app' }).verdict, Verdict.Continue);
});

test('auth: bad configs are refused', async () => {
  await refuses('auth', STATIC, { users: ['a'] }, /provider is required/);
  await refuses('auth', STATIC, { provider: 'ldap' }, /provider must be one of/);
  await refuses('auth', STATIC, { provider: 'static' }, /needs at least one of/);
  await refuses('auth', STATIC, { provider: 'static', dbs: { app: 'write' } }, /must be "read" or "readWrite"/);
  await refuses('auth', STATIC, { provider: 'hmac_jwt' }, /secret is required/);
  await refuses('auth', STATIC, { provider: 'hmac_jwt', secret: 'short' }, /at least 16/);
  await refuses('auth', STATIC, { provider: 'hmac_jwt', secret: SECRET, users: ['a'] }, /unknown key "users"/);
});

test('auth static: the answers kept for a repeated op, database and application follow every change of them', async () => {
  // No users list: the connection's user is read only for a denial's message.
  const h = await load('auth', { provider: 'static', apps: ['shop'], dbs: { app: 'readWrite', reports: 'read' } });
  const carol = { conn: { user: 'carol', appName: 'shop' } };
  const anon = { conn: { user: '', appName: 'shop' } };
  const verdicts = (steps: [Record<string, unknown>, typeof carol][]) => steps.map(([cmd, who]) => h.request(cmd, who).verdict);
  const insert = (db: string) => ({ insert: 'c', documents: [{}], $db: db });
  const find = (db: string) => ({ find: 'c', $db: db });
  const agg = (db: string, stage: object) => ({ aggregate: 'c', pipeline: [stage], cursor: {}, $db: db });
  const [C, R] = [Verdict.Continue, Verdict.Reject];
  assert.deepEqual(verdicts([
    [find('reports'), carol], [insert('reports'), carol], [insert('reports'), carol], [insert('app'), carol], [insert('reports'), carol],
    [find('reports'), carol], [find('nowhere'), carol], [find('reports'), carol],
  ]), [C, R, R, C, R, C, R, C]);
  // aggregate: the same op is a read or a write by its pipeline, each time
  assert.deepEqual(verdicts([
    [agg('reports', { $out: 'x' }), carol], [agg('reports', { $match: {} }), carol], [agg('reports', { $merge: 'x' }), carol],
    [agg('app', { $out: 'x' }), carol],
  ]), [R, C, R, C]);
  // the application check, alternating
  const curl = { conn: { user: 'carol', appName: 'curl' } };
  assert.deepEqual(verdicts([[find('app'), carol], [find('app'), curl], [find('app'), carol], [find('app'), curl]]), [C, R, C, R]);
  // a denial names the connection's user, or "this client" without one
  assert.match(h.request(insert('reports'), carol).reject!.message, /^auth: user "carol" is not authorized to write on database "reports"/);
  assert.match(h.request(insert('reports'), anon).reject!.message, /^auth: this client is not authorized to write on database "reports"/);
});
