// Framing across partial and coalesced reads, and refusal of bad lengths before allocation.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { serialize } from 'bson';
import { Framer, encodeOpMsg, WireError } from '../../runtime/wire/index.ts';

function collector() {
  const frames: Buffer[] = [];
  const errors: { err: WireError; requestId: number }[] = [];
  const framer = new Framer({ onFrame: (f) => frames.push(Buffer.from(f)), onFrameError: (err, requestId) => errors.push({ err, requestId }) });
  return { framer, frames, errors };
}

const a = encodeOpMsg(1, 0, 0, serialize({ ping: 1, $db: 'admin' }));
const b = encodeOpMsg(2, 0, 0, serialize({ find: 'c', filter: { x: 'y'.repeat(3000) }, $db: 'd' }));
const c = encodeOpMsg(3, 0, 0, serialize({ hello: 1, $db: 'admin' }));
const stream = Buffer.concat([a, b, c]);

test('coalesced frames in one chunk come out one by one', () => {
  const { framer, frames } = collector();
  framer.push(stream);
  assert.deepEqual(frames, [a, b, c]);
});

test('every split point of the stream yields the same frames', () => {
  for (let cut = 1; cut < stream.length; cut += 7) {
    const { framer, frames } = collector();
    framer.push(stream.subarray(0, cut));
    framer.push(stream.subarray(cut));
    assert.deepEqual(frames, [a, b, c], `cut at ${cut}`);
  }
});

test('byte-at-a-time delivery yields the same frames', () => {
  const { framer, frames } = collector();
  for (let i = 0; i < stream.length; i++) framer.push(stream.subarray(i, i + 1));
  assert.deepEqual(frames, [a, b, c]);
  assert.equal(framer.buffered, 0);
});

test('a length below 16 or above 48,000,000 is refused and framing stops', () => {
  for (const size of [0, 15, -1, 48_000_001, 0x7fffffff]) {
    const { framer, frames, errors } = collector();
    const bad = Buffer.alloc(16);
    bad.writeInt32LE(size, 0);
    bad.writeInt32LE(42, 4);
    framer.push(Buffer.concat([a, bad, c]));
    assert.deepEqual(frames, [a], `size ${size}: frames before the bad one still delivered`);
    assert.equal(errors.length, 1);
    assert.equal(errors[0].err.code, 'PROXY_ERR_BAD_LENGTH');
    assert.equal(errors[0].requestId, 42);
    framer.push(c);
    assert.equal(frames.length, 1, 'nothing is framed after a fatal error');
  }
});

test('a frame announced as large but sent partially allocates once and completes later', () => {
  const big = encodeOpMsg(9, 0, 0, serialize({ insert: 'c', documents: [{ blob: Buffer.alloc(1_000_000, 1) }], $db: 'd' }));
  const { framer, frames } = collector();
  for (let off = 0; off < big.length; off += 65536) framer.push(big.subarray(off, off + 65536));
  assert.equal(frames.length, 1);
  assert.deepEqual(frames[0], big);
});
