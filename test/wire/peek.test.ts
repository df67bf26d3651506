// Cheap peeks agree with a full BSON decode.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Long, serialize, UUID, Binary } from 'bson';
import { CommandPeek, ReplyPeek, WireError, encodeOpMsg, HEADER_SIZE } from '../../runtime/wire/index.ts';

const buf = (d: object) => Buffer.from(serialize(d));

test('command name, $db, collection, session and transaction fields', () => {
  const p = new CommandPeek().read(buf({
    insert: 'orders', ordered: true, lsid: { id: new UUID() }, txnNumber: Long.fromNumber(7),
    startTransaction: true, autocommit: false, $db: 'shop',
  }));
  assert.equal(p.op, 'insert');
  assert.equal(p.db, 'shop');
  assert.equal(p.collection, 'orders');
  assert.ok(p.lsidAt > 0);
  assert.equal(p.hasTxnNumber, true);
  assert.equal(p.txnNumber, 7n);
  assert.equal(p.startTransaction, true);
  assert.equal(p.inTransaction, true);
});

test('getMore: cursor id from the first value, collection from its field', () => {
  const p = new CommandPeek().read(buf({ getMore: Long.fromString('1234567890123456789'), collection: 'orders', batchSize: 2, $db: 'shop' }));
  assert.equal(p.op, 'getMore');
  assert.equal(p.cursorId, 1234567890123456789n);
  assert.equal(p.collection, 'orders');
});

test('commands without a collection leave it empty; reused peeks are reset', () => {
  const p = new CommandPeek();
  p.read(buf({ find: 'x', lsid: { id: 1 }, $db: 'a' }));
  p.read(buf({ ping: 1, $db: 'admin' }));
  assert.equal(p.collection, '');
  assert.equal(p.lsidAt, -1);
  p.read(buf({ aggregate: 1, pipeline: [], $db: 'admin' }));
  assert.equal(p.collection, '');
  p.read(buf({ listCollections: 1, $db: 'admin' }));
  assert.equal(p.collection, '');
});

test('every BSON type is skipped correctly on the way to $db', () => {
  const p = new CommandPeek().read(buf({
    find: 'c', d: 1.5, s: 'str', o: { a: [1, 2] }, b: new Binary(Buffer.from([1, 2, 3]), 4), n: null,
    r: /ab+c/i, i: 3, l: Long.fromNumber(5), date: new Date(0), t: true, $db: 'deep',
  }));
  assert.equal(p.db, 'deep');
});

test('reply peek: ok, code, cursor id', () => {
  const r = new ReplyPeek();
  r.read(buf({ cursor: { firstBatch: [], id: Long.fromNumber(42), ns: 'a.b' }, ok: 1 }));
  assert.equal(r.ok, true);
  assert.equal(r.cursorId, 42n);
  r.read(buf({ ok: 0, errmsg: 'x', code: 11000, codeName: 'DuplicateKey' }));
  assert.equal(r.ok, false);
  assert.equal(r.code, 11000);
  assert.equal(r.cursorId, 0n);
});

test('a status-only reply peek (the profiler\'s and tracing\'s) reads ok and the failure, not the cursor id', () => {
  const r = new ReplyPeek(false);
  r.read(buf({ cursor: { firstBatch: [{ _id: 1 }], id: Long.fromNumber(42), ns: 'a.b' }, ok: 1 }));
  assert.deepEqual([r.ok, r.failed, r.cursorId], [true, false, 0n]);
  r.read(buf({ cursor: { firstBatch: [], id: Long.fromNumber(7), ns: 'a.b' }, ok: 0, code: 43, codeName: 'CursorNotFound' }));
  assert.deepEqual([r.ok, r.failed, r.errorCode, r.errorName, r.cursorId], [false, true, 43, 'CursorNotFound', 0n]);
});

test('a reply peek reads the body of a whole OP_MSG frame at its offset as it reads the body alone', () => {
  const ok = buf({ cursor: { firstBatch: [{ _id: 1 }], id: Long.fromNumber(42), ns: 'a.b' }, ok: 1 });
  const failed = buf({ ok: 0, errmsg: 'x', code: 48, codeName: 'NamespaceExists' });
  for (const body of [ok, failed]) {
    const alone = new ReplyPeek();
    alone.read(body);
    const inFrame = new ReplyPeek();
    inFrame.read(encodeOpMsg(7, 3, 0, body), HEADER_SIZE + 5);
    assert.deepEqual([inFrame.ok, inFrame.code, inFrame.cursorId, inFrame.failed, inFrame.errorCode, inFrame.errorName],
      [alone.ok, alone.code, alone.cursorId, alone.failed, alone.errorCode, alone.errorName]);
  }
  const r = new ReplyPeek();
  assert.equal(r.read(encodeOpMsg(7, 3, 0, failed), HEADER_SIZE + 5).errorName, 'NamespaceExists');
  assert.equal(r.read(encodeOpMsg(7, 3, 0, ok), HEADER_SIZE + 5).cursorId, 42n);
});

test('the failure a reply reports: ok 0 with its codeName, the first write error, a write concern error; none on success', () => {
  const r = new ReplyPeek();
  r.read(buf({ ok: 0, errmsg: 'x', code: 48, codeName: 'NamespaceExists' }));
  assert.deepEqual([r.failed, r.errorCode, r.errorName], [true, 48, 'NamespaceExists']);
  // mongod's write errors carry no codeName: the name is left to the reader of the code.
  r.read(buf({ n: 1, writeErrors: [{ index: 1, code: 11000, keyPattern: { _id: 1 }, keyValue: { _id: 1 }, errmsg: 'E11000 dup' },
    { index: 2, code: 121, errmsg: 'validation' }], ok: 1 }));
  assert.deepEqual([r.ok, r.failed, r.errorCode, r.errorName, r.hasWriteErrors], [true, true, 11000, '', true]);
  r.read(buf({ n: 1, writeConcernError: { code: 64, codeName: 'WriteConcernFailed', errmsg: 'timeout' }, ok: 1 }));
  assert.deepEqual([r.ok, r.failed, r.errorCode, r.errorName], [true, true, 64, 'WriteConcernFailed']);
  r.read(buf({ n: 1, ok: 1 }));
  assert.deepEqual([r.ok, r.failed, r.errorCode, r.errorName, r.hasWriteErrors], [true, false, 0, '', false]);
});

test('malformed BSON is refused, never read out of bounds', () => {
  const good = buf({ find: 'c', $db: 'd' });
  const cut = Buffer.from(good.subarray(0, good.length - 4));
  assert.throws(() => new CommandPeek().read(cut), (e: unknown) => e instanceof WireError);
  const lying = Buffer.from(good);
  lying.writeInt32LE(1000, 0);
  assert.throws(() => new CommandPeek().read(lying), /exceeds its container/);
  const badString = Buffer.from(good);
  badString.writeInt32LE(0x7fffff, 10); // the string length of `find`'s value
  assert.throws(() => new CommandPeek().read(badString), (e: unknown) => e instanceof WireError);
});
