// The compression libraries, loaded once per thread, and bounded decompression into a buffer the
// caller owns. Plain JavaScript, so that inflate-worker.mjs can load it in a worker thread without
// the TypeScript loader; compression.ts (the event loop's small messages) and the worker share it,
// so both decompress alike and answer alike.
//
// Every decompression is bounded by the size the message declares (OP_COMPRESSED uncompressedSize,
// itself bounded by maxMessageSizeBytes before this is called): it writes at most that many bytes
// and stops there. zstd is the WebAssembly build in `@bokuweb/zstd-wasm` (Node 20's zlib has no
// zstd); its own decompress() allocates whatever the frame header claims and, without one, only
// 1 MiB, so it is not used: ZSTD_decompress is called with the declared size as dstCapacity.
// Spec of the zstd format: RFC 8878. ZSTD_ErrorCode values: zstd's lib/zstd_errors.h.
import { constants as zlibConstants, inflateSync } from 'node:zlib';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

const require = createRequire(import.meta.url);
const snappy = require('snappy');
const zstdMain = require.resolve('@bokuweb/zstd-wasm');
const zstd = require(zstdMain);
// The package exports only its main file; its Emscripten module (the same instance zstd.init()
// initialises, from the require cache) is reached by path for the raw ZSTD_* calls.
const zstdModule = require(join(dirname(zstdMain), 'module.js')).Module;

let zstdInit = null;

/** Loads zstd's WebAssembly (once per thread). */
export function initZstd() {
  if (zstdInit === null) zstdInit = zstd.init();
  return zstdInit;
}

/** Bytes of zstd's WebAssembly memory in this thread: it grows with the largest message and never shrinks. */
export function zstdHeapBytes() {
  return zstdModule.HEAPU8 === undefined ? 0 : zstdModule.HEAPU8.length;
}

export function zstdCompress(data, level) {
  return zstd.compress(data, level);
}

export function snappyCompress(data) {
  return snappy.compressSync(data);
}

/** A message that does not decompress to its declared size. `over`: it would be larger (decompression stopped at the bound). */
export class InflateError extends Error {
  constructor(message, over) {
    super(message);
    this.over = over;
  }
}

const ZSTD_DST_SIZE_TOO_SMALL = 70;
const ZSTD_ERRORS = {
  1: 'generic error',
  10: 'unknown frame descriptor (not zstd data)',
  12: 'unsupported zstd version',
  14: 'unsupported frame parameter',
  16: 'frame needs a window too large to decode',
  20: 'corrupted data',
  22: 'checksum mismatch',
  24: 'malformed literals header',
  30: 'corrupted dictionary',
  32: 'wrong dictionary (dictionaries are not supported)',
  64: 'out of memory',
  72: 'wrong compressed size (truncated data or trailing bytes)',
};

const COMPRESSOR_NAMES = ['noop', 'snappy', 'zlib', 'zstd'];

/**
 * Decompresses `data`, compressed with compressor `id` (0 noop, 1 snappy, 2 zlib, 3 zstd), into
 * `out` at `offset`: exactly `size` bytes, or throws InflateError (never writes more than `size`).
 * The caller has checked the cheap headers (compression.ts: inflateChecked).
 */
export function inflateBody(id, data, size, out, offset) {
  let plain;
  switch (id) {
    case 0:
      plain = data;
      break;
    case 1:
      // The snappy stream's own length prefix was checked to equal `size`; the decoder allocates that.
      try {
        plain = snappy.uncompressSync(data, { asBuffer: true });
      } catch (err) {
        throw new InflateError(`could not decompress a snappy message: ${err.message}`, false);
      }
      break;
    case 2:
      try {
        // One output chunk of size + 1: the whole message in one allocation, and one byte more
        // tells "larger than declared" apart (maxOutputLength stops inflating past it).
        plain = inflateSync(data, { maxOutputLength: Math.max(1, size), chunkSize: Math.max(64, size + 1) });
      } catch (err) {
        if (err.code === 'ERR_BUFFER_TOO_LARGE') {
          throw new InflateError(`zlib data inflates to more than the ${size} bytes the message declares (inflating stopped there)`, true);
        }
        throw new InflateError(`could not decompress a zlib message: ${err.message}`, false);
      }
      break;
    case 3:
      return zstdInto(data, size, out, offset);
    default:
      throw new InflateError(`unknown compressor id ${id}`, false);
  }
  if (plain.length !== size) {
    if (plain.length > size) throw new InflateError(`${COMPRESSOR_NAMES[id]} data decompresses to ${plain.length} bytes, more than the ${size} the ` +
      `message declares`, true);
    throw new InflateError(`OP_COMPRESSED declared ${size} bytes but decompressed to ${plain.length}`, false);
  }
  out.set(plain, offset);
  return size;
}

/** ZSTD_decompress with dstCapacity = `size`: decoding stops with dstSize_tooSmall at the bound. */
function zstdInto(data, size, out, offset) {
  const m = zstdModule;
  if (m.HEAPU8 === undefined) throw new InflateError('zstd is not initialised', false);
  const src = m._malloc(data.length || 1);
  const dst = src === 0 ? 0 : m._malloc(size || 1);
  try {
    if (dst === 0) throw new InflateError(`zstd could not allocate ${size + data.length} bytes to decompress a message`, false);
    // HEAPU8 is replaced when malloc grows the memory: read it after the allocations.
    m.HEAPU8.set(data, src);
    const r = m._ZSTD_decompress(dst, size, src, data.length);
    if (m._ZSTD_isError(r)) {
      const code = -(r | 0);
      if (code === ZSTD_DST_SIZE_TOO_SMALL) {
        throw new InflateError(`zstd data decompresses to more than the ${size} bytes the message declares (decompression stopped there)`, true);
      }
      throw new InflateError(`could not decompress a zstd message: ${ZSTD_ERRORS[code] ?? `zstd error ${code}`}`, false);
    }
    const n = r >>> 0;
    if (n !== size) throw new InflateError(`OP_COMPRESSED declared ${size} bytes but decompressed to ${n}`, false);
    out.set(m.HEAPU8.subarray(dst, dst + n), offset);
    return n;
  } finally {
    if (dst !== 0) m._free(dst);
    if (src !== 0) m._free(src);
  }
}

/** Compressed bytes firstUncompressedByte inflates at most (zlib): at most ~1 MB of output, on an error path only. */
const FLAGS_PROBE_BYTES = 1024;
const ZSTD_MAGIC = 0xfd2fb528;
/** The largest block a zstd frame may hold (RFC 8878 3.1.1.2.4, Block_Maximum_Size). */
const ZSTD_BLOCK_MAX = 128 * 1024;

/**
 * The first byte `data` (compressed with compressor `id`: 0 noop, 1 snappy, 2 zlib, 3 zstd)
 * decompresses to, read without decompressing the message: noop directly; snappy from its first
 * literal; zlib by inflating the first FLAGS_PROBE_BYTES at most; zstd from its first block (at most
 * ZSTD_BLOCK_MAX bytes of output). For a message refused before it could be decompressed (a size
 * that lies, a bomb, a compressor not negotiated), the flags of the OP_MSG inside. undefined when
 * it cannot be read (an unknown compressor, damaged or truncated data).
 */
export function firstUncompressedByte(id, data) {
  switch (id) {
    case 0:
      return data[0];
    case 1: {
      // The length varint, then the first element, necessarily a literal: tag (len-1)<<2, or
      // 60..63 <<2 followed by a 1..4-byte length.
      let p = 0;
      while (p < 4 && (data[p] & 0x80) !== 0) p++;
      const tag = data[p + 1];
      if (tag === undefined || (tag & 3) !== 0) return undefined;
      return data[p + 2 + ((tag >> 2) >= 60 ? (tag >> 2) - 59 : 0)];
    }
    case 2:
      // 64 bytes first (a fixed-Huffman block starts there); 1 KiB when a block header is longer.
      // Deflate expands at most 1032:1, so a bomb's prefix inflates to at most ~1 MB.
      for (const n of [64, FLAGS_PROBE_BYTES]) {
        try {
          const head = inflateSync(data.subarray(0, n), { finishFlush: zlibConstants.Z_SYNC_FLUSH, maxOutputLength: n * 1100 });
          if (head.length > 0) return head[0];
        } catch {
          // Damaged, or a longer prefix is needed: tried once more, then unknown.
        }
      }
      return undefined;
    case 3:
      return zstdFirstByte(data);
    default:
      return undefined;
  }
}

/**
 * The first decompressed byte of a zstd frame (RFC 8878 3.1.1), from its first block: read in place
 * for a raw or RLE block, or a compressed block whose literals are raw or RLE (the first byte of
 * output is a literal: a match needs earlier output); otherwise (entropy-coded literals) by
 * decoding that block alone (zstdFirstBlockByte). A frame with a dictionary: unknown.
 */
function zstdFirstByte(b) {
  if (b.length < 5 || (b[0] | (b[1] << 8) | (b[2] << 16) | (b[3] << 24)) >>> 0 !== ZSTD_MAGIC) return undefined;
  const fhd = b[4];
  const singleSegment = (fhd >> 5) & 1;
  const dictIdFlag = fhd & 3;
  const fcsFlag = fhd >> 6;
  const fcsBytes = fcsFlag === 0 ? singleSegment : 1 << fcsFlag;
  const at = 5 + (singleSegment === 1 ? 0 : 1) + (dictIdFlag === 3 ? 4 : dictIdFlag) + fcsBytes;
  if (at + 4 > b.length) return undefined;
  const header = b[at] | (b[at + 1] << 8) | (b[at + 2] << 16);
  const blockType = (header >> 1) & 3;
  const p = at + 3;
  if (blockType === 0 || blockType === 1) return b[p]; // raw; RLE (the byte repeated)
  if (blockType !== 2) return undefined;
  const lh = b[p];
  const literalsType = lh & 3;
  if (literalsType <= 1) {
    const sizeFormat = (lh >> 2) & 3;
    const headerBytes = sizeFormat === 1 ? 2 : sizeFormat === 3 ? 3 : 1;
    const regenerated = sizeFormat === 1 ? (lh >> 4) + (b[p + 1] << 4) : sizeFormat === 3 ? (lh >> 4) + (b[p + 1] << 4) + (b[p + 2] << 12) : lh >> 3;
    return regenerated > 0 ? b[p + headerBytes] : undefined;
  }
  const end = p + (header >>> 3);
  if (dictIdFlag !== 0 || end > b.length || header >>> 3 > ZSTD_BLOCK_MAX) return undefined;
  return zstdFirstBlockByte(b.subarray(at, end));
}

/**
 * The first byte a zstd block (its 3-byte header included) decodes to on its own: the block is put
 * in a frame of its own — no content size, checksum or dictionary, a 128 KiB window, marked last —
 * and decoded with ZSTD_BLOCK_MAX bytes of room, all a block can hold. undefined when it does not
 * decode (damaged, or zstd not initialised in this thread).
 */
function zstdFirstBlockByte(block) {
  const m = zstdModule;
  if (m.HEAPU8 === undefined) return undefined;
  const frame = new Uint8Array(6 + block.length);
  // Magic; frame header descriptor 0 (a window descriptor follows); window 2^(10 + 7) bytes.
  frame.set([0x28, 0xb5, 0x2f, 0xfd, 0x00, 7 << 3]);
  frame.set(block, 6);
  frame[6] |= 1; // Last_Block
  const src = m._malloc(frame.length);
  const dst = src === 0 ? 0 : m._malloc(ZSTD_BLOCK_MAX);
  try {
    if (dst === 0) return undefined;
    m.HEAPU8.set(frame, src);
    const r = m._ZSTD_decompress(dst, ZSTD_BLOCK_MAX, src, frame.length);
    return m._ZSTD_isError(r) || r === 0 ? undefined : m.HEAPU8[dst];
  } finally {
    if (dst !== 0) m._free(dst);
    if (src !== 0) m._free(src);
  }
}
