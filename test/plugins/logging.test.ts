import { test } from 'node:test';
import assert from 'node:assert/strict';
import { load, refuses } from './helpers.ts';

test('logging: one JSON line per request with op, db, collection, duration, pipeline, status', async () => {
  const h = await load('logging', {});
  h.roundTrip({ find: 'users', filter: {}, $db: 'app' }, { ok: 1, cursor: { id: 0n, ns: 'app.users', firstBatch: [] } }, { conn: { id: 3, appName: 'shop' } });
  h.roundTrip({ insert: 'users', documents: [{}], $db: 'app' }, { ok: 0, errmsg: 'dup', code: 11000 });
  const lines = h.logs.filter((l) => l.msg.startsWith('{')).map((l) => ({ level: l.level, ...JSON.parse(l.msg) }));
  assert.equal(lines.length, 2);
  assert.equal(lines[0].level, 'info');
  assert.equal(lines[0].op, 'find');
  assert.equal(lines[0].db, 'app');
  assert.equal(lines[0].collection, 'users');
  assert.equal(lines[0].status, 'ok');
  assert.equal(lines[0].pipeline, h.pipeline.id);
  assert.equal(lines[0].connection_id, 3);
  assert.equal(lines[0].app, 'shop');
  assert.ok(Number.isInteger(lines[0].duration_us) && lines[0].duration_us >= 0);
  assert.equal(lines[1].status, 'error');
  assert.equal(lines[1].code, 11000);
});

test('logging: sample_rate is deterministic; level is honoured', async () => {
  const h = await load('logging', { sample_rate: 0.25, level: 'debug' });
  for (let i = 0; i < 40; i++) h.roundTrip({ ping: 1, $db: 'admin' }, { ok: 1 });
  const lines = h.logs.filter((l) => l.msg.startsWith('{'));
  assert.equal(lines.length, 10);
  assert.ok(lines.every((l) => l.level === 'debug'));
  const none = await load('logging', { sample_rate: 0 });
  for (let i = 0; i < 10; i++) none.roundTrip({ ping: 1, $db: 'admin' }, { ok: 1 });
  assert.equal(none.logs.filter((l) => l.msg.startsWith('{')).length, 0);
});

test('logging: a line the proxy would drop (its log level above the step\'s) is not built or sent; one at or above it is', async () => {
  const quiet = await load('logging', {}, { logLevel: 'warn' });
  for (let i = 0; i < 5; i++) quiet.roundTrip({ ping: 1, $db: 'admin' }, { ok: 1 });
  assert.equal(quiet.logs.filter((l) => l.msg.startsWith('{')).length, 0);
  const warn = await load('logging', { level: 'warn' }, { logLevel: 'warn' });
  for (let i = 0; i < 5; i++) warn.roundTrip({ ping: 1, $db: 'admin' }, { ok: 1 });
  const lines = warn.logs.filter((l) => l.msg.startsWith('{'));
  assert.equal(lines.length, 5);
  assert.ok(lines.every((l) => l.level === 'warn'));
});

test('logging: bad configs are refused', async () => {
  await refuses('logging', {}, { sample_rate: 2 }, /between 0 and 1/);
  await refuses('logging', {}, { level: 'loud' }, /level must be one of/);
  await refuses('logging', {}, '[1]' as unknown as object, /JSON object|unknown key/);
});
