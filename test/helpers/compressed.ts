// Hostile compressed messages for tests: OP_COMPRESSED frames whose declared size says what the
// test wants (not what the data holds), and zstd frames written from RFC 8878 by hand — RLE blocks
// of zeros, with or without a Frame_Content_Size — so a gigabyte fits in 32 KB and no compressor
// has to produce it. Independent of the proxy's codec.
import { deflateSync } from 'node:zlib';
import { OP_COMPRESSED, OP_MSG, requestId } from './wire.ts';

export const NOOP = 0;
export const SNAPPY = 1;
export const ZLIB = 2;
export const ZSTD = 3;

/** An OP_COMPRESSED frame carrying `data` as compressor `id`, declaring `declared` uncompressed bytes. */
export function compressedFrame(id: number, declared: number, data: Uint8Array, o: { reqId?: number; originalOpcode?: number } = {}): Buffer {
  const f = Buffer.alloc(25 + data.length);
  f.writeInt32LE(f.length, 0);
  f.writeInt32LE(o.reqId ?? requestId(), 4);
  f.writeInt32LE(0, 8);
  f.writeInt32LE(OP_COMPRESSED, 12);
  f.writeInt32LE(o.originalOpcode ?? OP_MSG, 16);
  f.writeInt32LE(declared, 20);
  f[24] = id;
  f.set(data, 25);
  return f;
}

/** An ordinary frame (`msg`, header included) compressed with zlib, declaring its true size. */
export function zlibCompressed(msg: Buffer): Buffer {
  return compressedFrame(ZLIB, msg.length - 16, deflateSync(msg.subarray(16)), { reqId: msg.readInt32LE(4), originalOpcode: msg.readInt32LE(12) });
}

/**
 * A zstd frame of `total` zero bytes in RLE blocks of 128 KiB (4 bytes each), stating
 * `contentSize` in its header (8-byte Frame_Content_Size), or no size at all when null.
 */
export function zstdZeros(total: number, contentSize: number | null): Buffer {
  const BLOCK = 128 * 1024;
  const blocks = Math.max(1, Math.ceil(total / BLOCK));
  const headerBytes = contentSize === null ? 2 : 10;
  const out = Buffer.alloc(4 + headerBytes + blocks * 4);
  out.writeUInt32LE(0xfd2fb528, 0); // magic
  // Frame_Header_Descriptor: FCS flag 3 (8 bytes) or 0 (none), not single-segment; then the
  // Window_Descriptor: exponent 7 → 2^17 = 128 KiB, the largest block.
  out[4] = contentSize === null ? 0 : 3 << 6;
  out[5] = 7 << 3;
  if (contentSize !== null) {
    out.writeUInt32LE(contentSize % 2 ** 32, 6);
    out.writeUInt32LE(Math.floor(contentSize / 2 ** 32), 10);
  }
  let p = 4 + headerBytes;
  let left = total;
  for (let i = 0; i < blocks; i++) {
    const n = Math.min(BLOCK, left);
    left -= n;
    // Block_Header (3 bytes LE): Last_Block, Block_Type 1 (RLE), Block_Size = bytes regenerated.
    const h = (i === blocks - 1 ? 1 : 0) | (1 << 1) | (n << 3);
    out[p] = h & 0xff;
    out[p + 1] = (h >> 8) & 0xff;
    out[p + 2] = (h >> 16) & 0xff;
    out[p + 3] = 0; // the byte repeated
    p += 4;
  }
  return out;
}
