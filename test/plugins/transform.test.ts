import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Long } from 'bson';
import { load, refuses } from './helpers.ts';

test('transform: request edits (set/unset/rename/redact, wildcard, scoping)', async () => {
  const h = await load('transform', {
    request: [
      { op: 'set', path: 'comment', value: 'via-proxy' },
      { op: 'set', path: 'maxTimeMS', value: 5000, ops: ['find'] },
      { op: 'unset', path: 'hint' },
      { op: 'rename', path: 'filter.mail', to: 'email', collections: ['users'] },
      { op: 'set', path: 'documents.*.meta', value: { src: 'proxy', tags: ['a', 1, 2.5, true, null] }, ops: ['insert'] },
    ],
  });
  const r = h.request({ find: 'users', filter: { mail: 'a@b.c' }, hint: { a: 1 }, $db: 'app' });
  assert.deepEqual(r.newRequest, { find: 'users', filter: { email: 'a@b.c' }, $db: 'app', comment: 'via-proxy', maxTimeMS: 5000 });
  const other = h.request({ find: 'orders', filter: { mail: 'x' }, $db: 'app' });
  assert.deepEqual(other.newRequest, { find: 'orders', filter: { mail: 'x' }, $db: 'app', comment: 'via-proxy', maxTimeMS: 5000 });
  const ins = h.request({ insert: 'users', $db: 'app' }, { sequences: [{ id: 'documents', docs: [{ _id: 1 }, { _id: 2 }] }] });
  assert.deepEqual(ins.newRequest?.documents, [{ _id: 1, meta: { src: 'proxy', tags: ['a', 1, 2.5, true, null] } },
    { _id: 2, meta: { src: 'proxy', tags: ['a', 1, 2.5, true, null] } }]);
});

test('transform: response edits on every batch document and findAndModify value; sub-operations', async () => {
  const h = await load('transform', {
    response: [
      { op: 'redact', path: 'ssn' },
      { op: 'redact', path: 'card.number', replacement: 'XXXX' },
      { op: 'unset', path: 'internal' },
      { op: 'rename', path: 'nm', to: 'name', collections: ['users'] },
    ],
  });
  const reply = { cursor: { firstBatch: [{ _id: 1, ssn: '123-45-6789', nm: 'Ann', internal: 1 }, { _id: 2, card: { number: 4111, exp: '12/30' } },
    { _id: 3 }], id: Long.fromNumber(0), ns: 'app.users' }, ok: 1 };
  const r = h.roundTrip({ find: 'users', filter: {}, $db: 'app' }, reply);
  assert.deepEqual(r.newReply?.cursor.firstBatch, [{ _id: 1, ssn: '***', name: 'Ann' }, { _id: 2, card: { number: 'XXXX', exp: '12/30' } }, { _id: 3 }]);
  assert.equal(r.newReply?.ok, 1);
  assert.equal(r.newReply?.cursor.ns, 'app.users');
  const more = h.roundTrip({ getMore: Long.fromNumber(9), collection: 'users', $db: 'app' },
    { cursor: { nextBatch: [{ ssn: 'x' }], id: Long.fromNumber(9), ns: 'app.users' }, ok: 1 }, { collection: 'users' });
  assert.deepEqual(more.newReply?.cursor.nextBatch, [{ ssn: '***' }]);
  const fam = h.roundTrip({ findAndModify: 'users', query: {}, update: {}, $db: 'app' }, { lastErrorObject: { n: 1 }, value: { _id: 1, ssn: 's' }, ok: 1 });
  assert.deepEqual(fam.newReply?.value, { _id: 1, ssn: '***' });
  const untouched = h.roundTrip({ find: 'users', filter: {}, $db: 'app' }, { cursor: { firstBatch: [{ _id: 1 }], id: Long.fromNumber(0),
    ns: 'app.users' }, ok: 1 });
  assert.equal(untouched.newReply, null, 'no change, no replacement');
  assert.ok(h.subops.some((s) => s.name === 'field.redact'));
  assert.ok(h.subops.some((s) => s.name === 'bson.deserialize'));
});

test('transform: bad configs are refused', async () => {
  const good = { request: [{ op: 'unset', path: 'x' }] };
  await refuses('transform', good, {}, /needs request or response edits/);
  await refuses('transform', good, { request: [{ op: 'move', path: 'a' }] }, /op must be one of/);
  await refuses('transform', good, { request: [{ op: 'rename', path: 'a' }] }, /to must be a plain field name/);
  await refuses('transform', good, { request: [{ op: 'set', path: 'a' }] }, /value is required/);
  await refuses('transform', good, { response: [{ op: 'unset', path: '' }] }, /empty path/);
  await refuses('transform', good, { response: [{ op: 'unset', path: 'a', value: 1 }] }, /value only goes with set/);
});
