// OP_COMPRESSED (2012): header, int32 originalOpcode, int32 uncompressedSize, uint8 compressorId,
// compressed bytes of the original message *without* its header.
// Spec: github.com/mongodb/specifications source/compression/OP_COMPRESSED.md
//
// zlib comes from node:zlib, snappy from the `snappy` package (a prebuilt binary shipped inside an
// npm package), zstd from `@bokuweb/zstd-wasm` (WebAssembly: Node 20's zlib has no zstd, and the
// native `@mongodb-js/zstd` cannot be installed offline); compressors.mjs loads them. zstd must be
// initialised once (`initCompression`) before use.
//
// A compressed request is a decompression bomb until proven otherwise: a 34 KB zstd frame can
// hold a gigabyte of zeros. So the declared size is checked first (range, and against the size the
// snappy or zstd stream itself states, before any work), and decompression writes at most the
// declared size and stops there (compressors.mjs). Messages small enough are decompressed here, on
// the caller's thread (inflateFrame); larger ones off the event loop (inflate-pool.ts).

import {
  COMPRESSOR_NOOP, COMPRESSOR_SNAPPY, COMPRESSOR_ZLIB, COMPRESSOR_ZSTD, HEADER_SIZE, MAX_MESSAGE_SIZE,
  MSG_MORE_TO_COME, OP_COMPRESSED, OP_MSG, type CompressorName,
} from './constants.ts';
import { WireError } from './errors.ts';
import { InflateError, firstUncompressedByte, inflateBody, initZstd, snappyCompress, zstdCompress } from './compressors.mjs';
import { deflateSync } from 'node:zlib';

/** OP_COMPRESSED's own header after the standard one: originalOpcode, uncompressedSize, compressorId. */
export const COMPRESSED_PREFIX = 9;

/**
 * Messages declaring at most this many uncompressed bytes, carried in at most this many
 * compressed bytes, are decompressed on the event loop: below it, inflating costs less than a
 * round trip to a worker thread (measured with zlib on this project's 2-core machine: 64 KiB
 * inflated in 58 µs on the loop, 107 µs through a worker), and the hot path of ordinary
 * compressed traffic stays one synchronous call.
 */
export const INLINE_INFLATE_BYTES = 64 * 1024;

let zstdReady = false;

export async function initCompression(): Promise<void> {
  if (zstdReady) return;
  await initZstd();
  zstdReady = true;
}

export function compressorName(id: number): CompressorName | 'noop' | null {
  switch (id) {
    case COMPRESSOR_NOOP: return 'noop';
    case COMPRESSOR_SNAPPY: return 'snappy';
    case COMPRESSOR_ZLIB: return 'zlib';
    case COMPRESSOR_ZSTD: return 'zstd';
    default: return null;
  }
}

function fail(message: string, cause?: unknown): never {
  throw new WireError('PROXY_ERR_BAD_COMPRESSION', message, true, { cause });
}

/** The compressor id of an OP_COMPRESSED frame (checked by compressedSize). */
export function compressorOf(frame: Buffer): number {
  return frame[HEADER_SIZE + 8];
}

/**
 * Checks an OP_COMPRESSED frame before any decompression and returns the uncompressed size it
 * declares (the original message without its header). Refused (WireError): a frame too short, one
 * wrapping another OP_COMPRESSED, an unknown compressor, a declared size above `maxMessageSize`
 * (header included), and a snappy or zstd stream whose own size field says something else than
 * the declared size (a zstd frame's content size may only be smaller: a message may hold several
 * frames). Costs a few header reads: no allocation.
 */
export function compressedSize(frame: Buffer, maxMessageSize = MAX_MESSAGE_SIZE): number {
  if (frame.length < HEADER_SIZE + COMPRESSED_PREFIX) fail('OP_COMPRESSED too short');
  const originalOpcode = frame.readInt32LE(HEADER_SIZE);
  const size = frame.readInt32LE(HEADER_SIZE + 4);
  const id = frame[HEADER_SIZE + 8];
  if (originalOpcode === OP_COMPRESSED) fail('OP_COMPRESSED wraps another OP_COMPRESSED');
  if (size < 0) fail(`OP_COMPRESSED declares a negative uncompressed size (${size})`);
  if (size + HEADER_SIZE > maxMessageSize) {
    fail(`OP_COMPRESSED declares an uncompressed message of ${size + HEADER_SIZE} bytes (header included), more than the ${maxMessageSize} a message may have`);
  }
  const dataAt = HEADER_SIZE + COMPRESSED_PREFIX;
  switch (id) {
    case COMPRESSOR_NOOP:
      if (frame.length - dataAt !== size) fail(`OP_COMPRESSED (noop) declares ${size} bytes but carries ${frame.length - dataAt}`);
      break;
    case COMPRESSOR_SNAPPY: {
      const stated = snappyLength(frame, dataAt);
      if (stated !== size) fail(`the snappy data states ${stated} uncompressed bytes but the message declares ${size}; refused without decompressing`);
      break;
    }
    case COMPRESSOR_ZLIB:
      break; // zlib states no size: inflating is bounded instead
    case COMPRESSOR_ZSTD: {
      const stated = zstdContentSize(frame, dataAt);
      if (stated > size) fail(`the zstd frame states ${stated} uncompressed bytes but the message declares ${size}; refused without decompressing`);
      break;
    }
    default:
      fail(`unknown compressor id ${id}`);
  }
  return size;
}

/** The uncompressed length a snappy stream begins with (a little-endian base-128 varint, at most 32 bits). */
function snappyLength(b: Buffer, at: number): number {
  let n = 0;
  for (let i = 0; i < 5; i++) {
    if (at + i >= b.length) fail('snappy data too short to state its uncompressed length');
    const byte = b[at + i];
    n += (byte & 0x7f) * 2 ** (7 * i);
    if ((byte & 0x80) === 0) return n;
  }
  fail('snappy data states an uncompressed length of more than 32 bits');
}

/**
 * The Frame_Content_Size of the first zstd frame (RFC 8878 section 3.1.1.1), or -1 when the frame
 * does not state it (or the data starts with a skippable frame). Data that is not a zstd frame is
 * left to the decoder, which says so.
 */
function zstdContentSize(b: Buffer, at: number): number {
  if (b.length < at + 5 || b.readUInt32LE(at) !== 0xfd2fb528) return -1;
  const fhd = b[at + 4];
  const fcsFlag = fhd >> 6;
  const singleSegment = (fhd >> 5) & 1;
  const dictIdFlag = fhd & 3;
  const fcsBytes = fcsFlag === 0 ? singleSegment : 1 << fcsFlag;
  if (fcsBytes === 0) return -1;
  const p = at + 5 + (singleSegment === 1 ? 0 : 1) + (dictIdFlag === 3 ? 4 : dictIdFlag);
  if (p + fcsBytes > b.length) fail('zstd frame header truncated');
  switch (fcsBytes) {
    case 1: return b[p];
    case 2: return b.readUInt16LE(p) + 256;
    case 4: return b.readUInt32LE(p);
    default: return b.readUInt32LE(p) + b.readUInt32LE(p + 4) * 2 ** 32;
  }
}

/** Bytes of a compressed frame's data kept for compressedMoreToCome when its message goes to a decompression worker. */
const HEAD_DATA_BYTES = 1024;

/**
 * Whether a compressed OP_MSG has moreToCome (flag bit 1, in its first uncompressed byte), read
 * from the start of its compressed data without decompressing the message (compressors.mjs,
 * firstUncompressedByte): for a request refused before it could be decompressed, whether the client
 * expects a reply. null when the frame is not a compressed OP_MSG or the byte cannot be read (an
 * unknown compressor, damaged data).
 */
export function compressedMoreToCome(frame: Buffer): boolean | null {
  if (frame.length < HEADER_SIZE + COMPRESSED_PREFIX || frame.readInt32LE(HEADER_SIZE) !== OP_MSG) return null;
  const first = firstUncompressedByte(frame[HEADER_SIZE + 8]!, frame.subarray(HEADER_SIZE + COMPRESSED_PREFIX));
  return first === undefined ? null : (first & MSG_MORE_TO_COME) !== 0;
}

/**
 * The start of a compressed frame, copied: kept for a message handed to a decompression worker, whose
 * memory moves to the worker with it. The worker reads the flags itself from the whole data when the
 * message fails to decompress; this is for a worker that fails (compressedMoreToCome reads it then).
 */
export function compressedMsgHead(frame: Buffer): Buffer {
  return Buffer.from(frame.subarray(0, HEADER_SIZE + COMPRESSED_PREFIX + HEAD_DATA_BYTES));
}

/** Whether a checked frame of declared `size` is decompressed on the caller's thread (see INLINE_INFLATE_BYTES). */
export function inflatesInline(frame: Buffer, size: number): boolean {
  return size <= INLINE_INFLATE_BYTES && frame.length <= INLINE_INFLATE_BYTES + HEADER_SIZE + COMPRESSED_PREFIX;
}

/**
 * Decompresses an OP_COMPRESSED frame already checked by compressedSize (declared `size`) into an
 * ordinary frame of the original opcode, on this thread. Throws WireError.
 */
export function inflateFrame(frame: Buffer, size: number): Buffer {
  const out = Buffer.allocUnsafe(HEADER_SIZE + size);
  out.writeInt32LE(HEADER_SIZE + size, 0);
  frame.copy(out, 4, 4, 12); // requestID, responseTo
  out.writeInt32LE(frame.readInt32LE(HEADER_SIZE), 12);
  try {
    inflateBody(frame[HEADER_SIZE + 8], frame.subarray(HEADER_SIZE + COMPRESSED_PREFIX), size, out, HEADER_SIZE);
  } catch (err) {
    if (err instanceof InflateError) fail(err.message);
    fail(`could not decompress a ${compressorName(frame[HEADER_SIZE + 8])} message: ${(err as Error).message}`, err);
  }
  return out;
}

/** Checks and decompresses an OP_COMPRESSED frame into an ordinary frame of the original opcode. */
export function decompressFrame(frame: Buffer, maxMessageSize = MAX_MESSAGE_SIZE): { frame: Buffer; compressorId: number } {
  const size = compressedSize(frame, maxMessageSize);
  if (frame[HEADER_SIZE + 8] === COMPRESSOR_ZSTD && !zstdReady) fail('zstd is not initialised');
  return { frame: inflateFrame(frame, size), compressorId: frame[HEADER_SIZE + 8] };
}

/** Wraps an ordinary frame in OP_COMPRESSED with the given compressor. */
export function compressFrame(frame: Buffer, compressorId: number, zlibLevel = -1): Buffer {
  const body = frame.subarray(HEADER_SIZE);
  let packed: Uint8Array;
  switch (compressorId) {
    case COMPRESSOR_NOOP: packed = body; break;
    case COMPRESSOR_SNAPPY: packed = snappyCompress(body); break;
    case COMPRESSOR_ZLIB: packed = deflateSync(body, { level: zlibLevel }); break;
    case COMPRESSOR_ZSTD:
      if (!zstdReady) throw new Error('zstd is not initialised: call initCompression() first');
      packed = zstdCompress(body, 3);
      break;
    default: throw new Error(`unknown compressor id ${compressorId}`);
  }
  const size = HEADER_SIZE + COMPRESSED_PREFIX + packed.length;
  const out = Buffer.allocUnsafe(size);
  out.writeInt32LE(size, 0);
  frame.copy(out, 4, 4, 12);
  out.writeInt32LE(OP_COMPRESSED, 12);
  out.writeInt32LE(frame.readInt32LE(12), HEADER_SIZE);
  out.writeInt32LE(body.length, HEADER_SIZE + 4);
  out[HEADER_SIZE + 8] = compressorId;
  out.set(packed, HEADER_SIZE + COMPRESSED_PREFIX);
  return out;
}
