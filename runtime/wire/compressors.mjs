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
import { inflateSync } from 'node:zlib';
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
