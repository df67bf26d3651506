// The shadow canary's structural diff (runtime/canary/bson-diff.ts) over real BSON from the `bson`
// package: equal bytes; a changed value, a type change, added and removed fields, by dotted path
// through documents and arrays; array order respected; ignored paths skipped with what is under
// them; field order; values hidden unless asked; the entry bound.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { serialize, Long, ObjectId, type Document } from 'bson';
import { diffBson, type DiffOptions } from '../../runtime/canary/index.ts';

const opts = (o: Partial<DiffOptions> = {}): DiffOptions => ({ ignore: new Set(['$clusterTime', 'operationTime']), showValues: false, maxEntries: 16, ...o });
const diff = (a: Document, b: Document, o?: Partial<DiffOptions>) => diffBson(serialize(a), serialize(b), opts(o));

test('equal documents: no entries (byte equality, and equal but for ignored paths)', () => {
  assert.deepEqual(diff({ a: 1, b: { c: 'x' } }, { a: 1, b: { c: 'x' } }), { entries: [], truncated: false });
  const r = diff({ ok: 1, operationTime: 5, $clusterTime: { clusterTime: 1, signature: { hash: 'a' } } },
    { ok: 1, operationTime: 6, $clusterTime: { clusterTime: 2, signature: { hash: 'b' } } });
  assert.deepEqual(r.entries, []);
});

test('a changed value, a type change, an added and a removed field, by dotted path into documents and arrays', () => {
  const a = { cursor: { firstBatch: [{ _id: 1, ssn: '***', email: 'a@x' }, { _id: 2, n: 1 }] }, ok: 1 };
  const b = { cursor: { firstBatch: [{ _id: 1, ssn: '***', email: '***', extra: true }, { _id: 2, n: Long.fromNumber(1) }] }, ok: 1, gone: undefined };
  const r = diff(a, b);
  assert.deepEqual(r.entries, [
    { path: 'cursor.firstBatch.0.email', change: 'changed', baseline_type: 'string', candidate_type: 'string' },
    { path: 'cursor.firstBatch.0.extra', change: 'added', candidate_type: 'bool' },
    { path: 'cursor.firstBatch.1.n', change: 'type', baseline_type: 'int', candidate_type: 'long' },
  ]);
  assert.deepEqual(diff({ a: 1, b: 2 }, { a: 1 }).entries, [{ path: 'b', change: 'removed', baseline_type: 'int' }]);
});

test('array order is respected: the same elements in another order differ at each index', () => {
  const r = diff({ v: ['x', 'y'] }, { v: ['y', 'x'] });
  assert.deepEqual(r.entries.map((e) => e.path), ['v.0', 'v.1']);
  assert.deepEqual(diff({ v: [1, 2] }, { v: [1, 2, 3] }).entries, [{ path: 'v.2', change: 'added', candidate_type: 'int' }]);
});

test('ignored paths are skipped with everything under them, at any depth given', () => {
  assert.deepEqual(diff({ cursor: { id: 1, ns: 'a' } }, { cursor: { id: 2, ns: 'a' } }, { ignore: new Set(['cursor.id']) }).entries, []);
  assert.equal(diff({ cursor: { id: 1 } }, { cursor: { id: 2 } }).entries.length, 1);
});

test('the same fields in another order: one `order` entry at the document', () => {
  assert.deepEqual(diff({ find: 'c', filter: {} }, { filter: {}, find: 'c' }).entries, [{ path: '(document)', change: 'order' }]);
  assert.deepEqual(diff({ q: { a: 1, b: 2 } }, { q: { b: 2, a: 1 } }).entries, [{ path: 'q', change: 'order' }]);
});

test('values are shown only when asked, as short text', () => {
  const id = new ObjectId('65a1b2c3d4e5f60718293a4b');
  const r = diff({ s: 'secret', n: 1, o: id }, { s: '***', n: 2.5, o: 'x' }, { showValues: true });
  assert.deepEqual(r.entries, [
    { path: 's', change: 'changed', baseline_type: 'string', candidate_type: 'string', baseline: '"secret"', candidate: '"***"' },
    { path: 'n', change: 'type', baseline_type: 'int', candidate_type: 'double', baseline: '1', candidate: '2.5' },
    { path: 'o', change: 'type', baseline_type: 'objectId', candidate_type: 'string', baseline: `ObjectId(${id.toHexString()})`, candidate: '"x"' },
  ]);
  assert.doesNotMatch(JSON.stringify(diff({ s: 'secret' }, { s: '***' }).entries), /secret|\*\*\*/);
  const long = diff({ s: 'x'.repeat(500) }, { s: 'y' }, { showValues: true }).entries[0];
  assert.ok(long.baseline!.length <= 64 && long.baseline!.endsWith('…'));
});

test('at most maxEntries differences, then truncated', () => {
  const a: Document = {};
  const b: Document = {};
  for (let i = 0; i < 40; i++) { a[`f${i}`] = i; b[`f${i}`] = i + 1; }
  const r = diff(a, b, { maxEntries: 16 });
  assert.equal(r.entries.length, 16);
  assert.equal(r.truncated, true);
  assert.equal(diff(a, b, { maxEntries: 40 }).truncated, false);
});

test('malformed BSON throws (the comparison counts it as a difference of the whole document)', () => {
  const good = serialize({ a: 1 });
  const bad = Buffer.from(good);
  bad.writeInt32LE(200, 0);
  assert.throws(() => diffBson(good, bad, opts()));
});
