// Decompression bombs against the codec: the declared size is checked (and the size a snappy or
// zstd stream states) before any work, and decompression stops at the declared size. A gigabyte
// of zstd zeros in 32 KB must cost neither the time nor the memory of a gigabyte.
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import { performance } from 'node:perf_hooks';
import { deflateSync } from 'node:zlib';
import snappy from 'snappy';
import {
  initCompression, compressedSize, compressedMoreToCome, compressedMsgHead, inflateFrame, inflatesInline, decompressFrame, compressFrame, WireError,
  COMPRESSOR_ZSTD, HEADER_SIZE, INLINE_INFLATE_BYTES,
} from '../../runtime/wire/index.ts';
import { zstdHeapBytes } from '../../runtime/wire/compressors.mjs';
import { opMsg } from '../helpers/wire.ts';
import { NOOP, SNAPPY, ZLIB, ZSTD, compressedFrame, zstdZeros } from '../helpers/compressed.ts';

const GiB = 2 ** 30;
before(() => initCompression());

function refused(f: () => unknown, re: RegExp): void {
  assert.throws(f, (e: unknown) => e instanceof WireError && e.code === 'PROXY_ERR_BAD_COMPRESSION' && re.test(e.message),
    `expected a PROXY_ERR_BAD_COMPRESSION matching ${re}`);
}

test('zstd bomb stating its size: 1 GiB of zeros in 32 KB declared as 100 bytes is refused from the frame header, before any work', () => {
  const bomb = zstdZeros(GiB, GiB);
  assert.ok(bomb.length < 40_000, `${bomb.length} bytes`);
  const f = compressedFrame(ZSTD, 100, bomb);
  const heapBefore = zstdHeapBytes();
  const t = performance.now();
  refused(() => compressedSize(f), /the zstd frame states 1073741824 uncompressed bytes but the message declares 100; refused without decompressing/);
  refused(() => decompressFrame(f), /states 1073741824/);
  assert.ok(performance.now() - t < 50, `took ${(performance.now() - t).toFixed(1)} ms`);
  assert.equal(zstdHeapBytes(), heapBefore, 'zstd\'s memory did not grow');
});

test('zstd bomb without a stated size: decompression stops at the declared 100 bytes; zstd\'s memory does not grow', () => {
  const f = compressedFrame(ZSTD, 100, zstdZeros(GiB, null));
  assert.equal(compressedSize(f), 100);
  assert.ok(inflatesInline(f, 100), 'small enough to decompress on the event loop');
  const heapBefore = zstdHeapBytes();
  const t = performance.now();
  refused(() => inflateFrame(f, 100), /zstd data decompresses to more than the 100 bytes the message declares \(decompression stopped there\)/);
  const ms = performance.now() - t;
  assert.ok(ms < 100, `took ${ms.toFixed(1)} ms (inflating a GiB takes seconds)`);
  assert.equal(zstdHeapBytes(), heapBefore, 'zstd\'s memory did not grow');
});

test('claims of 2 GB get an accurate message: in the OP_COMPRESSED header, and in the zstd frame header', () => {
  refused(() => compressedSize(compressedFrame(ZSTD, 2_000_000_000, zstdZeros(1000, null))),
    /OP_COMPRESSED declares an uncompressed message of 2000000016 bytes \(header included\), more than the 48000000 a message may have/);
  refused(() => compressedSize(compressedFrame(ZSTD, 100, zstdZeros(1000, 2_000_000_000))),
    /the zstd frame states 2000000000 uncompressed bytes but the message declares 100/);
  refused(() => compressedSize(compressedFrame(ZLIB, -5, Buffer.alloc(4))), /negative uncompressed size \(-5\)/);
  // A caller's own bound (the upstream's maxMessageSizeBytes) applies the same way.
  refused(() => compressedSize(compressedFrame(ZLIB, 1000, Buffer.alloc(4)), 500), /more than the 500 a message may have/);
});

test('zstd that decompresses to less than declared, or is not zstd at all, is refused with what went wrong', () => {
  refused(() => decompressFrame(compressedFrame(ZSTD, 2000, zstdZeros(1000, null))), /declared 2000 bytes but decompressed to 1000/);
  refused(() => decompressFrame(compressedFrame(ZSTD, 100, Buffer.from('not zstd at all'))), /could not decompress a zstd message: unknown frame descriptor/);
  const truncated = zstdZeros(1000, null).subarray(0, 8);
  refused(() => decompressFrame(compressedFrame(ZSTD, 1000, truncated)), /could not decompress a zstd message/);
});

test('zlib bomb: inflating stops just past the declared size', () => {
  const zeros = deflateSync(Buffer.alloc(64 * 1024 * 1024), { level: 9 });
  const f = compressedFrame(ZLIB, 100, zeros);
  const t = performance.now();
  refused(() => decompressFrame(f), /zlib data inflates to more than the 100 bytes the message declares \(inflating stopped there\)/);
  assert.ok(performance.now() - t < 50, `took ${(performance.now() - t).toFixed(1)} ms`);
});

test('snappy states its length first: one that disagrees with the declared size is refused before decompressing', () => {
  const packed = snappy.compressSync(Buffer.alloc(100_000));
  refused(() => compressedSize(compressedFrame(SNAPPY, 100, packed)),
    /the snappy data states 100000 uncompressed bytes but the message declares 100; refused without decompressing/);
  refused(() => compressedSize(compressedFrame(SNAPPY, 100, Buffer.from([0xff, 0xff, 0xff, 0xff, 0xff, 0x01]))), /more than 32 bits/);
  refused(() => compressedSize(compressedFrame(NOOP, 100, Buffer.alloc(50))), /\(noop\) declares 100 bytes but carries 50/);
  assert.equal(compressedSize(compressedFrame(SNAPPY, 100_000, packed)), 100_000);
});

test('ordinary messages still round-trip with every compressor; small ones are decompressed inline', () => {
  const msg = opMsg({ insert: 'c', documents: [{ _id: 1, s: 'x'.repeat(500) }], $db: 'd' });
  for (const id of [NOOP, SNAPPY, ZLIB, ZSTD]) {
    const packed = compressFrame(msg, id);
    const size = compressedSize(packed);
    assert.equal(size, msg.length - HEADER_SIZE);
    assert.ok(inflatesInline(packed, size));
    assert.deepEqual(inflateFrame(packed, size), msg);
  }
  const big = compressFrame(opMsg({ insert: 'c', documents: [{ s: 'y'.repeat(INLINE_INFLATE_BYTES) }], $db: 'd' }), COMPRESSOR_ZSTD);
  assert.equal(inflatesInline(big, compressedSize(big)), false, 'over INLINE_INFLATE_BYTES: off the event loop');
});

/** The literals type of a zstd OP_COMPRESSED frame's first block, when it is a compressed block (0 raw, 1 RLE, 2 Huffman, 3 treeless), else -1. */
function zstdLiteralsType(packed: Buffer): number {
  const at = HEADER_SIZE + 9;
  const fhd = packed[at + 4]!;
  const fcsFlag = fhd >> 6;
  const single = (fhd >> 5) & 1;
  const p = at + 5 + (single === 1 ? 0 : 1) + [0, 1, 2, 4][fhd & 3]! + (fcsFlag === 0 ? single : 1 << fcsFlag);
  return ((packed[p]! >> 1) & 3) === 2 ? packed[p + 3]! & 3 : -1;
}

test('moreToCome is read from the start of a compressed OP_MSG without decompressing it, by every compressor the proxy announces', () => {
  const bodies = [
    { ping: 1, $db: 'admin' },
    { insert: 'c', documents: [{ _id: 1, s: 'x'.repeat(5000) }], $db: 'd' },
    { insert: 'c', documents: Array.from({ length: 300 }, (_, i) => ({ i, r: Math.random() })), $db: 'd' },
    { insert: 'c', documents: Array.from({ length: 3000 }, (_, i) => ({ i, name: `item-${i}`, tags: ['a', 'b', String(i % 7)] })), $db: 'd' },
  ];
  // zstd codes the literals of the second and the last with Huffman (their first block is decoded on its
  // own to read the byte); the random numbers of the third stay raw literals (read in place).
  assert.deepEqual(bodies.map((body) => zstdLiteralsType(compressFrame(opMsg(body), ZSTD))), [-1, 2, 0, 2]);
  for (const id of [NOOP, SNAPPY, ZLIB, ZSTD]) {
    for (const body of bodies) {
      for (const flags of [0, 2, 3]) {
        const packed = compressFrame(opMsg(body, { flags }), id);
        const label = `compressor ${id}, flags ${flags}, ${packed.length} bytes`;
        const expected = (flags & 2) !== 0;
        assert.equal(compressedMoreToCome(packed), expected, label);
        // The head kept for a worker that fails: the same, but for a zstd block cut short by it (unknown).
        const head = compressedMsgHead(packed);
        const cut = id === ZSTD && head.length < packed.length && zstdLiteralsType(packed) >= 2;
        assert.equal(compressedMoreToCome(head), cut ? null : expected, `${label}: from the kept head`);
      }
    }
  }
  // A zstd first block cut short (the data truncated inside it): unknown, not a guess.
  const whole = compressFrame(opMsg(bodies[3]!, { flags: 2 }), ZSTD);
  assert.equal(compressedMoreToCome(whole.subarray(0, HEADER_SIZE + 9 + 2000)), null);
  // A damaged first block that no longer decodes: unknown.
  const damaged = Buffer.from(whole);
  damaged.fill(0xff, HEADER_SIZE + 9 + 20, HEADER_SIZE + 9 + 200);
  assert.equal(compressedMoreToCome(damaged), null);
  // A bomb: its first bytes are read; the rest is never inflated.
  const bomb = Buffer.concat([opMsg({ ping: 1, $db: 'admin' }, { flags: 2 }), Buffer.alloc(10_000_000)]);
  assert.equal(compressedMoreToCome(compressedFrame(ZLIB, 100, deflateSync(bomb.subarray(HEADER_SIZE)))), true);
  // Not an OP_MSG, or data that is not what the compressor id says: unknown.
  assert.equal(compressedMoreToCome(compressedFrame(ZLIB, 10, deflateSync(Buffer.alloc(10)), { originalOpcode: 2004 })), null);
  assert.equal(compressedMoreToCome(compressedFrame(ZLIB, 10, Buffer.from('not zlib at all'))), null);
  assert.equal(compressedMoreToCome(compressedFrame(ZSTD, 10, Buffer.from('not zstd at all'))), null);
  assert.equal(compressedMoreToCome(compressedFrame(9, 10, Buffer.alloc(10))), null);
});
