// Codec tests with real client frames as vectors: every captured frame decodes to what the index
// says (opcode, compressor, flags, command, db, sequence ids), and re-encodes byte for byte.
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import { deserialize, serialize } from 'bson';
import {
  initCompression, decompressFrame, compressFrame, parseOpMsg, opMsgBody, parseOpQuery, encodeOpMsg, foldSequences,
  CommandPeek, OP_MSG, OP_QUERY, OP_COMPRESSED, COMPRESSOR_SNAPPY, COMPRESSOR_ZLIB, COMPRESSOR_ZSTD,
  MSG_CHECKSUM_PRESENT, MSG_MORE_TO_COME, retargetOpMsg, crc32c, WireError,
} from '../../runtime/wire/index.ts';
import { fixtureFrame, fixtureIndex } from './fixtures.ts';

const COMPRESSOR_BY_ID: Record<number, string> = { 1: 'snappy', 2: 'zlib', 3: 'zstd' };

before(() => initCompression());

test('every captured client frame decodes to what its index records', () => {
  const entries = fixtureIndex();
  assert.ok(entries.length >= 60, `expected the whole fixture set, got ${entries.length}`);
  for (const e of entries) {
    let frame = fixtureFrame(e.file);
    assert.equal(frame.readInt32LE(0), frame.length, `${e.file}: header length`);
    let compressor: string | null = null;
    if (frame.readInt32LE(12) === OP_COMPRESSED) {
      const d = decompressFrame(frame);
      frame = d.frame;
      compressor = COMPRESSOR_BY_ID[d.compressorId];
    }
    assert.equal(compressor, e.compressor, `${e.file}: compressor`);
    const peek = new CommandPeek();
    if (e.opcode === 'OP_QUERY') {
      assert.equal(frame.readInt32LE(12), OP_QUERY);
      const q = parseOpQuery(frame);
      assert.equal(q.fullCollectionName, e.ns);
      assert.equal(peek.read(q.query).op, e.command, e.file);
      continue;
    }
    assert.equal(frame.readInt32LE(12), OP_MSG, e.file);
    const msg = parseOpMsg(frame);
    assert.equal(msg.flags, e.flags, `${e.file}: flags`);
    peek.read(msg.body);
    assert.equal(peek.op, e.command, `${e.file}: command`);
    assert.equal(peek.db, e.db, `${e.file}: $db`);
    assert.deepEqual((msg.sequences ?? []).map((s) => s.id), e.sequences ?? [], `${e.file}: sequences`);
    assert.deepEqual(opMsgBody(frame), msg.body, `${e.file}: opMsgBody`);
    // The peek agrees with a full decode.
    const full = deserialize(msg.body);
    assert.equal(Object.keys(full)[0], peek.op);
    assert.equal(full.$db, peek.db);
    assert.equal(peek.lsidAt >= 0, full.lsid !== undefined, `${e.file}: lsid`);
    // Re-encoding the parsed message gives the same bytes (uncompressed form).
    const again = encodeOpMsg(msg.requestId, msg.responseTo, msg.flags, msg.body, msg.sequences);
    assert.deepEqual(again, frame, `${e.file}: re-encode`);
  }
});

test('folding document sequences gives the same document as the array form', () => {
  const e = fixtureIndex().find((x) => x.sequences?.includes('documents') && x.compressor === null)!;
  const msg = parseOpMsg(fixtureFrame(e.file));
  const folded = deserialize(foldSequences(msg.body, msg.sequences));
  const seq = msg.sequences![0];
  const docs: unknown[] = [];
  for (let p = 0; p < seq.payload.length;) {
    const n = seq.payload.readInt32LE(p);
    docs.push(deserialize(seq.payload.subarray(p, p + n)));
    p += n;
  }
  assert.ok(docs.length > 0);
  assert.deepEqual(folded.documents, docs);
  assert.equal(folded.insert, 'orders');
});

test('compression round-trips with snappy, zlib and zstd', () => {
  const body = serialize({ find: 'c', filter: { a: 'x'.repeat(500) }, $db: 'd' });
  const frame = encodeOpMsg(7, 0, 0, body);
  for (const id of [COMPRESSOR_SNAPPY, COMPRESSOR_ZLIB, COMPRESSOR_ZSTD]) {
    const packed = compressFrame(frame, id);
    assert.equal(packed.readInt32LE(12), OP_COMPRESSED);
    assert.ok(packed.length < frame.length, `compressor ${id} shrinks a repetitive body`);
    assert.equal(packed.readInt32LE(4), 7, 'requestID kept');
    assert.deepEqual(decompressFrame(packed).frame, frame);
  }
});

test('a wrong uncompressedSize or unknown compressor is refused', () => {
  const frame = encodeOpMsg(1, 0, 0, serialize({ ping: 1, $db: 'admin' }));
  const packed = compressFrame(frame, COMPRESSOR_ZLIB);
  packed.writeInt32LE(packed.readInt32LE(20) + 1, 20);
  assert.throws(() => decompressFrame(packed), (e: unknown) => e instanceof WireError && e.code === 'PROXY_ERR_BAD_COMPRESSION');
  const other = compressFrame(frame, COMPRESSOR_ZLIB);
  other[24] = 9;
  assert.throws(() => decompressFrame(other), /unknown compressor id 9/);
});

test('checksums: verified on input, dropped when a message is retargeted', () => {
  const body = serialize({ ping: 1, $db: 'admin' });
  const frame = encodeOpMsg(5, 0, MSG_CHECKSUM_PRESENT, body);
  assert.equal(frame.readUInt32LE(frame.length - 4), crc32c(frame, 0, frame.length - 4));
  assert.equal(parseOpMsg(frame).flags & MSG_CHECKSUM_PRESENT, MSG_CHECKSUM_PRESENT);
  const bad = Buffer.from(frame);
  bad[bad.length - 1] ^= 0xff;
  assert.throws(() => parseOpMsg(bad), (e: unknown) => e instanceof WireError && e.code === 'PROXY_ERR_BAD_CHECKSUM');
  const out = retargetOpMsg(Buffer.from(frame), 99, 5, 0);
  assert.equal(out.length, frame.length - 4);
  assert.equal(out.readInt32LE(0), out.length);
  const m = parseOpMsg(out);
  assert.equal(m.flags & MSG_CHECKSUM_PRESENT, 0);
  assert.equal(m.requestId, 99);
  assert.equal(m.responseTo, 5);
  assert.deepEqual(deserialize(m.body), { ping: 1, $db: 'admin' });
});

test('CRC-32C matches the standard check value', () => {
  // "123456789" → 0xE3069283 (RFC 3720 B.4 / the Castagnoli check value).
  assert.equal(crc32c(Buffer.from('123456789')), 0xe3069283);
  assert.equal(crc32c(Buffer.alloc(32)), 0x8a9136aa);
});

test('malformed OP_MSG variants are refused with a specific error', () => {
  const body = serialize({ ping: 1, $db: 'admin' });
  const ok = encodeOpMsg(1, 0, 0, body);
  const kind = Buffer.from(ok);
  kind[20] = 7;
  assert.throws(() => parseOpMsg(kind), /unknown OP_MSG section kind 7/);
  const flags = Buffer.from(ok);
  flags.writeUInt32LE(1 << 4, 16);
  assert.throws(() => parseOpMsg(flags), (e: unknown) => e instanceof WireError && e.code === 'PROXY_ERR_BAD_FLAGS');
  const truncated = Buffer.from(ok.subarray(0, ok.length - 3));
  truncated.writeInt32LE(truncated.length, 0);
  assert.throws(() => parseOpMsg(truncated), (e: unknown) => e instanceof WireError);
  const twoBodies = Buffer.concat([ok, Buffer.from([0]), body]);
  twoBodies.writeInt32LE(twoBodies.length, 0);
  assert.throws(() => parseOpMsg(twoBodies), /more than one kind-0 section/);
  // A kind-1 section whose size is below its own size field says so (not "exceeds the message").
  const smallSeq = Buffer.concat([ok, Buffer.from([1]), Buffer.from([3, 0, 0, 0]), Buffer.from('documents\0')]);
  smallSeq.writeInt32LE(smallSeq.length, 0);
  assert.throws(() => parseOpMsg(smallSeq), /document sequence size 3 is below 5/);
  const longSeq = Buffer.from(smallSeq);
  longSeq.writeInt32LE(1000, ok.length + 1);
  assert.throws(() => parseOpMsg(longSeq), /document sequence size 1000 exceeds the message/);
  const noNul = Buffer.from(ok);
  noNul[noNul.length - 1] = 1;
  assert.throws(() => parseOpMsg(noNul), /terminating NUL/);
  // exhaustAllowed (bit 16) is optional and accepted; moreToCome is known.
  const more = encodeOpMsg(1, 0, MSG_MORE_TO_COME | (1 << 16), body);
  assert.equal(parseOpMsg(more).flags, MSG_MORE_TO_COME | (1 << 16));
});

test('opMsgBody: the body parseOpMsg gives, whatever the shape; the same error for every malformed frame', () => {
  const body = serialize({ ok: 1, cursor: { id: 0, ns: 'a.b', firstBatch: [{ _id: 1 }] } });
  const plain = encodeOpMsg(1, 0, 0, body);
  assert.deepEqual(opMsgBody(plain), body);
  assert.equal(opMsgBody(plain).buffer, plain.buffer, 'a view, not a copy');
  const summed = encodeOpMsg(1, 0, MSG_CHECKSUM_PRESENT, body);
  assert.deepEqual(opMsgBody(summed), body);
  const seq = encodeOpMsg(1, 0, 0, body, [{ id: 'documents', payload: Buffer.from(serialize({ x: 1 })) }]);
  assert.deepEqual(opMsgBody(seq), body);
  const more = encodeOpMsg(1, 0, MSG_MORE_TO_COME | (1 << 16), body);
  assert.deepEqual(opMsgBody(more), body);
  const bads: Buffer[] = [];
  const kind = Buffer.from(plain); kind[20] = 7; bads.push(kind);
  const flags = Buffer.from(plain); flags.writeUInt32LE(1 << 4, 16); bads.push(flags);
  const truncated = Buffer.from(plain.subarray(0, plain.length - 3)); truncated.writeInt32LE(truncated.length, 0); bads.push(truncated);
  const noNul = Buffer.from(plain); noNul[noNul.length - 1] = 1; bads.push(noNul);
  const short = Buffer.from(plain); short.writeInt32LE(body.length - 2, 21); bads.push(short);
  const badSum = Buffer.from(summed); badSum[badSum.length - 1] ^= 0xff; bads.push(badSum);
  for (const f of bads) {
    let expected: unknown = null;
    try { parseOpMsg(f); } catch (err) { expected = err; }
    assert.ok(expected instanceof WireError, 'the frame is malformed');
    assert.throws(() => opMsgBody(f), (e: unknown) => e instanceof WireError && e.message === (expected as WireError).message);
  }
});
