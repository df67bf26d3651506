// OP_COMPRESSED (2012): header, int32 originalOpcode, int32 uncompressedSize, uint8 compressorId,
// compressed bytes of the original message *without* its header.
// Spec: github.com/mongodb/specifications source/compression/OP_COMPRESSED.md
//
// zlib comes from node:zlib, snappy from the `snappy` package (a prebuilt binary shipped inside an
// npm package), zstd from `@bokuweb/zstd-wasm` (WebAssembly: Node 20's zlib has no zstd, and the
// native `@mongodb-js/zstd` cannot be installed offline). zstd must be initialised once
// (`initCompression`) before use.

import { deflateSync, inflateSync } from 'node:zlib';
import snappy from 'snappy';
import * as zstd from '@bokuweb/zstd-wasm';
import {
  COMPRESSOR_NOOP, COMPRESSOR_SNAPPY, COMPRESSOR_ZLIB, COMPRESSOR_ZSTD, HEADER_SIZE, MAX_MESSAGE_SIZE,
  OP_COMPRESSED, type CompressorName,
} from './constants.ts';
import { WireError } from './errors.ts';

let zstdReady = false;

export async function initCompression(): Promise<void> {
  if (zstdReady) return;
  await zstd.init();
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

/** Decompresses an OP_COMPRESSED frame into an ordinary frame of the original opcode. */
export function decompressFrame(frame: Buffer): { frame: Buffer; compressorId: number } {
  if (frame.length < HEADER_SIZE + 9) fail('OP_COMPRESSED too short');
  const originalOpcode = frame.readInt32LE(HEADER_SIZE);
  const size = frame.readInt32LE(HEADER_SIZE + 4);
  const id = frame[HEADER_SIZE + 8];
  if (size < 0 || size + HEADER_SIZE > MAX_MESSAGE_SIZE) fail(`OP_COMPRESSED uncompressed size ${size} out of range`);
  if (originalOpcode === OP_COMPRESSED) fail('OP_COMPRESSED wraps another OP_COMPRESSED');
  const data = frame.subarray(HEADER_SIZE + 9);
  let plain: Uint8Array;
  try {
    switch (id) {
      case COMPRESSOR_NOOP: plain = data; break;
      case COMPRESSOR_SNAPPY: plain = snappy.uncompressSync(data) as Buffer; break;
      case COMPRESSOR_ZLIB: plain = inflateSync(data, { maxOutputLength: size }); break;
      case COMPRESSOR_ZSTD:
        if (!zstdReady) fail('zstd is not initialised');
        plain = zstd.decompress(data);
        break;
      default: fail(`unknown compressor id ${id}`);
    }
  } catch (err) {
    if (err instanceof WireError) throw err;
    fail(`could not decompress a ${compressorName(id)} message: ${(err as Error).message}`, err);
  }
  if (plain.length !== size) fail(`OP_COMPRESSED declared ${size} bytes but decompressed to ${plain.length}`);
  const out = Buffer.allocUnsafe(HEADER_SIZE + size);
  out.writeInt32LE(HEADER_SIZE + size, 0);
  frame.copy(out, 4, 4, 12); // requestID, responseTo
  out.writeInt32LE(originalOpcode, 12);
  out.set(plain, HEADER_SIZE);
  return { frame: out, compressorId: id };
}

/** Wraps an ordinary frame in OP_COMPRESSED with the given compressor. */
export function compressFrame(frame: Buffer, compressorId: number, zlibLevel = -1): Buffer {
  const body = frame.subarray(HEADER_SIZE);
  let packed: Uint8Array;
  switch (compressorId) {
    case COMPRESSOR_NOOP: packed = body; break;
    case COMPRESSOR_SNAPPY: packed = snappy.compressSync(body); break;
    case COMPRESSOR_ZLIB: packed = deflateSync(body, { level: zlibLevel }); break;
    case COMPRESSOR_ZSTD:
      if (!zstdReady) throw new Error('zstd is not initialised: call initCompression() first');
      packed = zstd.compress(body, 3);
      break;
    default: throw new Error(`unknown compressor id ${compressorId}`);
  }
  const size = HEADER_SIZE + 9 + packed.length;
  const out = Buffer.allocUnsafe(size);
  out.writeInt32LE(size, 0);
  frame.copy(out, 4, 4, 12);
  out.writeInt32LE(OP_COMPRESSED, 12);
  out.writeInt32LE(frame.readInt32LE(12), HEADER_SIZE);
  out.writeInt32LE(body.length, HEADER_SIZE + 4);
  out[HEADER_SIZE + 8] = compressorId;
  out.set(packed, HEADER_SIZE + 9);
  return out;
}
