// Tests for the devdb command engine (runtime/devdb/engine): pure command-level
// behaviour, no sockets.
import assert from 'node:assert/strict';
import { describe, it, beforeEach } from 'node:test';
import { BSON, Decimal128, Long, ObjectId, type Document } from 'bson';
import { DevEngine } from '../../runtime/devdb/engine/index.ts';

let e: DevEngine;
const run = (cmd: Document, seq?: Record<string, Document[]>) => {
  const r = e.run({ ...cmd, $db: cmd.$db ?? 'test' }, seq);
  // every reply must survive a BSON round trip, as it will on the wire
  return BSON.deserialize(BSON.serialize(r), { promoteLongs: false });
};
const ok = (cmd: Document, seq?: Record<string, Document[]>) => {
  const r = run(cmd, seq);
  assert.equal(r.ok, 1, `expected ok: ${JSON.stringify(r)}`);
  return r;
};
const findAll = (coll: string, filter: Document = {}, extra: Document = {}) =>
  ok({ find: coll, filter, ...extra }).cursor.firstBatch as Document[];

beforeEach(() => {
  e = new DevEngine();
});

describe('handshake and admin', () => {
  it('hello/isMaster answer as a standalone', () => {
    const h = e.run({ hello: 1, $db: 'admin' }, undefined, 42);
    assert.equal(h.isWritablePrimary, true);
    assert.equal(h.maxBsonObjectSize, 16777216);
    assert.equal(h.maxMessageSizeBytes, 48000000);
    assert.equal(h.maxWriteBatchSize, 100000);
    assert.equal(h.maxWireVersion, 21);
    assert.equal(h.minWireVersion, 0);
    assert.equal(h.connectionId, 42);
    assert.equal(h.logicalSessionTimeoutMinutes, 30);
    assert.equal(h.readOnly, false);
    assert.ok(h.localTime instanceof Date);
    for (const name of ['isMaster', 'ismaster']) assert.equal(e.run({ [name]: 1 }).ismaster, true);
  });
  it('ping, buildInfo, getParameter, misc', () => {
    ok({ ping: 1 });
    const b = ok({ buildInfo: 1 });
    assert.equal(b.version, '7.0.0-devdb');
    assert.deepEqual(b.versionArray, [7, 0, 0, 0]);
    assert.match(b.note, /development upstream/);
    assert.deepEqual(ok({ getParameter: 1, featureCompatibilityVersion: 1, $db: 'admin' }).featureCompatibilityVersion, { version: '7.0' });
    ok({ hostInfo: 1 });
    ok({ whatsmyuri: 1 });
    assert.deepEqual(ok({ getLog: 'startupWarnings' }).log, []);
    ok({ connectionStatus: 1 });
    ok({ serverStatus: 1 });
    ok({ endSessions: [] });
    ok({ killSessions: [] });
    ok({ startSession: 1 });
    ok({ commitTransaction: 1, $db: 'admin' });
    ok({ abortTransaction: 1, $db: 'admin' });
  });
  it('unknown commands and atlasVersion give 59 CommandNotFound', () => {
    for (const name of ['frobnicate', 'atlasVersion']) {
      const r = run({ [name]: 1 });
      assert.deepEqual({ ...r }, { ok: 0, errmsg: `no such command: '${name}'`, code: 59, codeName: 'CommandNotFound' });
    }
  });
  it('ignores session/transaction fields', () => {
    const r = ok({
      insert: 'c', documents: [{ a: 1 }], lsid: { id: new ObjectId() }, txnNumber: Long.fromNumber(1),
      autocommit: false, startTransaction: true, $clusterTime: {}, readConcern: {}, writeConcern: { w: 1 },
      $readPreference: { mode: 'primary' }, apiVersion: '1', comment: 'x',
    });
    assert.equal(r.n, 1);
  });
});

describe('bad shapes', () => {
  it('insert without documents → 9, non-string collection → 14', () => {
    const a = run({ insert: 'c' });
    assert.equal(a.ok, 0);
    assert.equal(a.code, 9);
    assert.equal(a.codeName, 'FailedToParse');
    const b = run({ insert: 5, documents: [] });
    assert.equal(b.code, 14);
    assert.equal(b.codeName, 'TypeMismatch');
    const c = run({ insert: 'c', documents: 'nope' });
    assert.equal(c.code, 14);
    const d = run({ find: 'c', filter: { a: { $bogus: 1 } } });
    assert.equal(d.ok, 0);
    assert.equal(d.code, 2);
    assert.equal(d.codeName, 'BadValue');
  });
});

describe('insert / find', () => {
  it('generates ObjectId _id and copies values', () => {
    const doc: Document = { name: 'a', nested: { x: [1, 2] } };
    ok({ insert: 'c', documents: [doc] });
    doc.nested.x.push(3);
    const [got] = findAll('c');
    assert.ok(got._id instanceof ObjectId);
    assert.deepEqual(got.nested.x, [1, 2]);
    // mutating a returned document does not change the store
    const raw = e.run({ find: 'c', filter: {}, $db: 'test' }).cursor.firstBatch[0];
    raw.nested.x.push(99);
    assert.deepEqual(findAll('c')[0].nested.x, [1, 2]);
  });
  it('finds by ObjectId and keeps BSON types', () => {
    const ids = [new ObjectId(), new ObjectId(), new ObjectId()];
    ok({
      insert: 'c',
      documents: ids.map((_id, i) => ({ _id, i, big: Long.fromString('9007199254740993'), dec: Decimal128.fromString(`${i}.5`), when: new Date(i * 1000) })),
    });
    const [d] = findAll('c', { _id: new ObjectId(ids[1].toHexString()) });
    assert.equal(d.i, 1);
    assert.ok(d._id instanceof ObjectId);
    assert.ok(d.big instanceof Long);
    assert.equal(d.big.toString(), '9007199254740993');
    assert.ok(d.dec instanceof Decimal128);
    assert.ok(d.when instanceof Date);
    assert.equal(findAll('c', { _id: { $in: [ids[0], ids[2]] } }).length, 2);
    assert.equal(findAll('c', { _id: { $ne: ids[0] } }).length, 2);
    assert.equal(findAll('c', { dec: { $gt: Decimal128.fromString('1') } }).length, 2);
    assert.equal(findAll('c', { i: Long.fromNumber(2) }).length, 1);
  });
  it('filter, projection, sort, skip, limit', () => {
    ok({ insert: 'c', documents: Array.from({ length: 20 }, (_, i) => ({ _id: i, v: i % 5, s: `k${i}` })) });
    const r = findAll('c', { v: { $gte: 3 } }, { sort: { v: -1, _id: 1 }, skip: 1, limit: 3, projection: { s: 1 } });
    assert.deepEqual(r, [{ _id: 9, s: 'k9' }, { _id: 14, s: 'k14' }, { _id: 19, s: 'k19' }]);
    assert.deepEqual(findAll('c', { _id: 3 }, { projection: { _id: 0, v: 1 } }), [{ v: 3 }]);
    const bad = run({ find: 'c', projection: { a: 1, b: 0 } });
    assert.equal(bad.ok, 0);
  });
  it('duplicate key 11000 with ordered and unordered inserts', () => {
    ok({ createIndexes: 'u', indexes: [{ key: { name: 1 }, name: 'name_1', unique: true }] });
    const r1 = ok({ insert: 'u', documents: [{ name: 'x' }, { name: 'x' }, { name: 'y' }] });
    assert.equal(r1.n, 1);
    assert.equal(r1.writeErrors.length, 1);
    const we = r1.writeErrors[0];
    assert.equal(we.index, 1);
    assert.equal(we.code, 11000);
    assert.equal(we.errmsg, 'E11000 duplicate key error collection: test.u index: name_1 dup key: { name: "x" }');
    assert.deepEqual(we.keyPattern, { name: 1 });
    assert.deepEqual(we.keyValue, { name: 'x' });
    const r2 = ok({ insert: 'u', documents: [{ name: 'x' }, { name: 'z' }, { name: 'y' }], ordered: false });
    assert.equal(r2.n, 2);
    assert.deepEqual(r2.writeErrors.map((w: Document) => w.index), [0]);
    const r3 = ok({ insert: 'u', documents: [{ _id: 1, name: 'q' }, { _id: 1, name: 'r' }] });
    assert.equal(r3.writeErrors[0].errmsg, 'E11000 duplicate key error collection: test.u index: _id_ dup key: { _id: 1 }');
  });
  it('OP_MSG sequences are equivalent to arrays', () => {
    const docs = [{ _id: 1, a: 1 }, { _id: 2, a: 2 }, { _id: 3, a: 3 }];
    const e2 = new DevEngine();
    const viaArray = e2.run({ insert: 'c', documents: docs, $db: 'test' });
    const viaSeq = e.run({ insert: 'c', $db: 'test' }, { documents: docs });
    assert.deepEqual(viaSeq, viaArray);
    assert.deepEqual(findAll('c'), e2.run({ find: 'c', $db: 'test' }).cursor.firstBatch);
    ok({ update: 'c', $db: 'test' }, { updates: [{ q: { _id: 1 }, u: { $set: { a: 10 } } }] });
    ok({ delete: 'c' }, { deletes: [{ q: { _id: 2 }, limit: 1 }] });
    assert.deepEqual(findAll('c'), [{ _id: 1, a: 10 }, { _id: 3, a: 3 }]);
    const dup = run({ insert: 'c', documents: [] }, { documents: docs });
    assert.equal(dup.ok, 0);
  });
});

describe('cursors', () => {
  it('getMore across many batches returns every document once', () => {
    const N = 2500;
    for (let i = 0; i < N; i += 500)
      ok({ insert: 'big', documents: Array.from({ length: 500 }, (_, j) => ({ _id: i + j, pad: 'x'.repeat(10) })) });
    const first = ok({ find: 'big', filter: {}, sort: { _id: 1 } });
    assert.equal(first.cursor.firstBatch.length, 101);
    assert.equal(first.cursor.ns, 'test.big');
    let id: Long = first.cursor.id;
    assert.ok(id instanceof Long && id.greaterThan(0));
    const seen = first.cursor.firstBatch.map((d: Document) => d._id);
    let batches = 0;
    while (!id.isZero()) {
      const r = ok({ getMore: id, collection: 'big', batchSize: 97 });
      assert.ok(r.cursor.nextBatch.length <= 97);
      seen.push(...r.cursor.nextBatch.map((d: Document) => d._id));
      id = r.cursor.id;
      batches++;
    }
    assert.equal(batches, Math.ceil((N - 101) / 97));
    assert.equal(seen.length, N);
    assert.deepEqual(seen, Array.from({ length: N }, (_, i) => i));
    const gone = run({ getMore: first.cursor.id, collection: 'big' });
    assert.equal(gone.code, 43);
    assert.equal(gone.codeName, 'CursorNotFound');
  });
  it('batchSize, singleBatch, byte limit, killCursors, idle timeout', () => {
    ok({ insert: 'c', documents: Array.from({ length: 50 }, (_, i) => ({ _id: i, s: 'y'.repeat(1000) })) });
    const r = ok({ find: 'c', batchSize: 10 });
    assert.equal(r.cursor.firstBatch.length, 10);
    const single = ok({ find: 'c', batchSize: 10, singleBatch: true });
    assert.ok(single.cursor.id.isZero());
    const k = ok({ killCursors: 'c', cursors: [r.cursor.id, Long.fromNumber(12345)] });
    assert.equal(k.cursorsKilled.length, 1);
    assert.equal(k.cursorsNotFound.length, 1);
    assert.deepEqual(k.cursorsAlive, []);
    assert.deepEqual(k.cursorsUnknown, []);

    const small = new DevEngine({ maxBatchBytes: 5000 });
    small.run({ insert: 'c', documents: Array.from({ length: 50 }, (_, i) => ({ _id: i, s: 'y'.repeat(1000) })), $db: 't' });
    const sb = small.run({ find: 'c', $db: 't' });
    assert.ok(sb.cursor.firstBatch.length >= 1 && sb.cursor.firstBatch.length <= 5);

    let now = 0;
    const timed = new DevEngine({ now: () => now });
    timed.run({ insert: 'c', documents: Array.from({ length: 200 }, (_, i) => ({ _id: i })), $db: 't' });
    const tc = timed.run({ find: 'c', $db: 't' });
    now += 11 * 60 * 1000;
    assert.equal(timed.run({ getMore: tc.cursor.id, collection: 'c', $db: 't' }).code, 43);
  });
  it('caps the number of open cursors', () => {
    const capped = new DevEngine({ maxCursors: 3 });
    capped.run({ insert: 'c', documents: Array.from({ length: 10 }, (_, i) => ({ _id: i })), $db: 't' });
    const ids = Array.from({ length: 5 }, () => capped.run({ find: 'c', batchSize: 1, $db: 't' }).cursor.id);
    assert.equal(capped.run({ getMore: ids[0], collection: 'c', $db: 't' }).code, 43);
    assert.equal(capped.run({ getMore: ids[4], collection: 'c', $db: 't' }).ok, 1);
  });
});

describe('update / delete / findAndModify', () => {
  beforeEach(() => {
    ok({ insert: 'c', documents: [{ _id: 1, a: 1, tags: ['x'] }, { _id: 2, a: 2, tags: [] }, { _id: 3, a: 3 }] });
  });
  it('operator, replacement, multi and upsert', () => {
    const r = ok({
      update: 'c',
      updates: [
        { q: { _id: 1 }, u: { $inc: { a: 10 }, $push: { tags: 'y' } } },
        { q: { a: { $gte: 2 } }, u: { $set: { big: true } }, multi: true },
        { q: { _id: 3 }, u: { b: 'replaced' } },
        { q: { _id: 9, k: 'v' }, u: { $set: { z: 1 }, $setOnInsert: { created: true } }, upsert: true },
        { q: { _id: 1 }, u: { $set: { a: 11 } } },
      ],
    });
    assert.equal(r.n, 7); // 1 + 3 (a >= 2 now matches _id 1 too) + 1 + 1 upsert + 1
    assert.equal(r.nModified, 5); // the last $set is a no-op
    assert.deepEqual(r.upserted, [{ index: 3, _id: 9 }]);
    assert.deepEqual(findAll('c'), [
      { _id: 1, a: 11, tags: ['x', 'y'], big: true },
      { _id: 2, a: 2, tags: [], big: true },
      { _id: 3, b: 'replaced' },
      { _id: 9, k: 'v', z: 1, created: true },
    ]);
    const up = ok({ update: 'c', updates: [{ q: { name: 'n' }, u: { name: 'n', v: 1 }, upsert: true }] });
    assert.ok(up.upserted[0]._id instanceof ObjectId);
  });
  it('pipeline updates and arrayFilters', () => {
    ok({ update: 'c', updates: [{ q: { _id: 2 }, u: [{ $set: { double: { $multiply: ['$a', 2] } } }] }] });
    assert.equal(findAll('c', { _id: 2 })[0].double, 4);
    ok({ insert: 'g', documents: [{ _id: 1, grades: [80, 95, 100] }] });
    ok({ update: 'g', updates: [{ q: { _id: 1 }, u: { $set: { 'grades.$[g]': 0 } }, arrayFilters: [{ g: { $gte: 95 } }] }] });
    assert.deepEqual(findAll('g')[0].grades, [80, 0, 0]);
  });
  it('errors: unknown modifier, _id change, duplicate key on update and upsert', () => {
    const bad = ok({ update: 'c', updates: [{ q: { _id: 1 }, u: { $frob: { a: 1 } } }] });
    assert.equal(bad.writeErrors[0].code, 9);
    const idc = ok({ update: 'c', updates: [{ q: { _id: 1 }, u: { $set: { _id: 5 } } }] });
    assert.equal(idc.writeErrors[0].code, 66);
    ok({ createIndexes: 'c', indexes: [{ key: { a: 1 }, name: 'a_1', unique: true }] });
    const dup = ok({ update: 'c', updates: [{ q: { _id: 1 }, u: { $set: { a: 2 } } }] });
    assert.equal(dup.writeErrors[0].code, 11000);
    assert.equal(dup.writeErrors[0].errmsg, 'E11000 duplicate key error collection: test.c index: a_1 dup key: { a: 2 }');
    const dupUp = ok({ update: 'c', updates: [{ q: { _id: 50 }, u: { $set: { a: 3 } }, upsert: true }] });
    assert.equal(dupUp.writeErrors[0].code, 11000);
    assert.equal(dupUp.n, 0);
    assert.equal(findAll('c', { _id: 1 })[0].a, 1);
  });
  it('delete with limit 0 and 1', () => {
    assert.equal(ok({ delete: 'c', deletes: [{ q: { a: { $gte: 1 } }, limit: 1 }] }).n, 1);
    assert.equal(ok({ delete: 'c', deletes: [{ q: {}, limit: 0 }] }).n, 2);
    assert.equal(findAll('c').length, 0);
    assert.equal(ok({ delete: 'missing', deletes: [{ q: {}, limit: 0 }] }).n, 0);
  });
  it('findAndModify', () => {
    const a = ok({ findAndModify: 'c', query: { a: { $gte: 2 } }, sort: { a: -1 }, update: { $inc: { a: 1 } }, new: true });
    assert.deepEqual(a.lastErrorObject, { n: 1, updatedExisting: true });
    assert.deepEqual(a.value, { _id: 3, a: 4 });
    const b = ok({ findAndModify: 'c', query: { _id: 1 }, update: { $set: { a: 0 } }, fields: { a: 1, _id: 0 } });
    assert.deepEqual(b.value, { a: 1 });
    const c = ok({ findAndModify: 'c', query: { _id: 7 }, update: { $set: { a: 7 } }, upsert: true, new: true });
    assert.deepEqual(c.lastErrorObject, { n: 1, updatedExisting: false, upserted: 7 });
    assert.deepEqual(c.value, { _id: 7, a: 7 });
    const d = ok({ findAndModify: 'c', query: { _id: 2 }, remove: true });
    assert.deepEqual(d.lastErrorObject, { n: 1 });
    assert.equal(d.value._id, 2);
    const none = ok({ findAndModify: 'c', query: { _id: 99 }, update: { $set: { a: 1 } } });
    assert.equal(none.value, null);
    assert.equal(run({ findAndModify: 'c', query: {} }).code, 9);
  });
});

describe('count / distinct / aggregate', () => {
  beforeEach(() => {
    ok({ insert: 'p', documents: [
      { _id: 1, cat: 'a', qty: 5, tags: ['x', 'y'] },
      { _id: 2, cat: 'b', qty: 10, tags: ['y'] },
      { _id: 3, cat: 'a', qty: 15 },
    ] });
  });
  it('count and distinct', () => {
    assert.equal(ok({ count: 'p' }).n, 3);
    assert.equal(ok({ count: 'p', query: { cat: 'a' } }).n, 2);
    assert.equal(ok({ count: 'p', query: {}, skip: 1, limit: 1 }).n, 1);
    assert.equal(ok({ count: 'nope' }).n, 0);
    assert.deepEqual(ok({ distinct: 'p', key: 'cat' }).values, ['a', 'b']);
    assert.deepEqual(ok({ distinct: 'p', key: 'tags', query: { qty: { $lt: 12 } } }).values, ['x', 'y']);
  });
  it('aggregate with group, sort, lookup and countDocuments shape', () => {
    const r = ok({ aggregate: 'p', pipeline: [{ $group: { _id: '$cat', total: { $sum: '$qty' } } }, { $sort: { _id: 1 } }], cursor: {} });
    assert.deepEqual(r.cursor.firstBatch, [{ _id: 'a', total: 20 }, { _id: 'b', total: 10 }]);
    assert.equal(r.cursor.ns, 'test.p');
    const cd = ok({ aggregate: 'p', pipeline: [{ $match: { cat: 'a' } }, { $group: { _id: 1, n: { $sum: 1 } } }], cursor: {} });
    assert.deepEqual(cd.cursor.firstBatch, [{ _id: 1, n: 2 }]);
    ok({ insert: 'cats', documents: [{ _id: 'a', label: 'Alpha' }] });
    const lk = ok({ aggregate: 'p', pipeline: [{ $match: { _id: 1 } }, { $lookup: { from: 'cats', localField: 'cat', foreignField: '_id',
      as: 'c' } }], cursor: {} });
    assert.equal(lk.cursor.firstBatch[0].c[0].label, 'Alpha');
    const batched = ok({ aggregate: 'p', pipeline: [], cursor: { batchSize: 1 } });
    assert.equal(batched.cursor.firstBatch.length, 1);
    assert.equal(ok({ getMore: batched.cursor.id, collection: 'p' }).cursor.nextBatch.length, 2);
    assert.equal(run({ aggregate: 'p', pipeline: [{ $bogus: {} }], cursor: {} }).code, 40324);
    assert.equal(run({ aggregate: 'p', pipeline: [] }).code, 9);
  });
  it('$out and $merge', () => {
    ok({ aggregate: 'p', pipeline: [{ $match: { cat: 'a' } }, { $out: 'onlyA' }], cursor: {} });
    assert.deepEqual(findAll('onlyA').map((d) => d._id), [1, 3]);
    ok({ aggregate: 'p', pipeline: [{ $project: { qty: 1 } }, { $merge: { into: 'onlyA', whenMatched: 'merge', whenNotMatched: 'insert' } }], cursor: {} });
    assert.deepEqual(findAll('onlyA', { _id: 2 }), [{ _id: 2, qty: 10 }]);
    assert.equal(findAll('onlyA', { _id: 1 })[0].cat, 'a');
    assert.equal(run({ aggregate: 'p', pipeline: [{ $out: 'x' }, { $match: {} }], cursor: {} }).ok, 0);
  });
});

describe('catalogue and indexes', () => {
  it('create, listCollections, listDatabases, rename, drop', () => {
    ok({ create: 'one' });
    assert.equal(run({ create: 'one' }).code, 48);
    ok({ insert: 'two', documents: [{ a: 1 }] });
    const lc = ok({ listCollections: 1, cursor: {} });
    assert.deepEqual(lc.cursor.firstBatch.map((c: Document) => c.name).sort(), ['one', 'two']);
    assert.equal(lc.cursor.ns, 'test.$cmd.listCollections');
    const named = ok({ listCollections: 1, filter: { name: 'two' }, nameOnly: true });
    assert.deepEqual(named.cursor.firstBatch, [{ name: 'two', type: 'collection' }]);
    assert.deepEqual(ok({ listDatabases: 1, nameOnly: true, $db: 'admin' }).databases, [{ name: 'test' }]);
    ok({ renameCollection: 'test.two', to: 'test.three', $db: 'admin' });
    assert.equal(findAll('three').length, 1);
    assert.equal(run({ renameCollection: 'test.two', to: 'test.x', $db: 'admin' }).code, 26);
    ok({ drop: 'three' });
    ok({ drop: 'never-existed' });
    ok({ dropDatabase: 1 });
    assert.deepEqual(ok({ listDatabases: 1, $db: 'admin' }).databases, []);
    ok({ insert: 'c', documents: [{ a: 1 }] });
    assert.equal(ok({ collStats: 'c' }).count, 1);
    assert.equal(ok({ dbStats: 1 }).objects, 1);
  });
  it('createIndexes / listIndexes / dropIndexes with unique and compound keys', () => {
    ok({ insert: 'c', documents: [{ a: 1, b: 1 }, { a: 1, b: 2 }] });
    const fail = run({ createIndexes: 'c', indexes: [{ key: { a: 1 }, name: 'a_1', unique: true }] });
    assert.equal(fail.code, 11000);
    assert.equal(fail.codeName, 'DuplicateKey');
    const r = ok({ createIndexes: 'c', indexes: [{ key: { a: 1, b: -1 }, name: 'a_1_b_-1', unique: true }] });
    assert.equal(r.numIndexesBefore, 1);
    assert.equal(r.numIndexesAfter, 2);
    assert.equal(ok({ createIndexes: 'c', indexes: [{ key: { a: 1, b: -1 }, name: 'a_1_b_-1', unique: true }] }).note, 'all indexes already exist');
    const li = ok({ listIndexes: 'c' }).cursor.firstBatch;
    assert.deepEqual(li.map((i: Document) => i.name), ['_id_', 'a_1_b_-1']);
    const dup = ok({ insert: 'c', documents: [{ a: 1, b: 2 }, { a: 1, b: 3 }] });
    assert.equal(dup.writeErrors[0].code, 11000);
    assert.deepEqual(dup.writeErrors[0].keyValue, { a: 1, b: 2 });
    assert.equal(dup.n, 0);
    assert.equal(run({ dropIndexes: 'c', index: '_id_' }).code, 72);
    assert.equal(run({ dropIndexes: 'c', index: 'nope' }).code, 27);
    assert.equal(ok({ dropIndexes: 'c', index: 'a_1_b_-1' }).nIndexesWas, 2);
    ok({ insert: 'c', documents: [{ a: 1, b: 2 }] });
    assert.equal(run({ listIndexes: 'missing' }).code, 26);
  });
  it('reset clears everything', () => {
    ok({ insert: 'c', documents: [{ a: 1 }] });
    e.reset();
    assert.equal(findAll('c').length, 0);
  });
});
