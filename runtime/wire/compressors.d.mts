// Types of compressors.mjs (plain JavaScript so a worker thread loads it without the TypeScript loader).
export function initZstd(): Promise<void>;
export function zstdHeapBytes(): number;
export function zstdCompress(data: Uint8Array, level: number): Uint8Array;
export function snappyCompress(data: Uint8Array): Buffer;
export class InflateError extends Error {
  /** The data would decompress to more than declared (decompression stopped at the bound). */
  readonly over: boolean;
  constructor(message: string, over: boolean);
}
/** Decompresses `data` (compressor `id`) into `out` at `offset`: exactly `size` bytes, or throws InflateError. */
export function inflateBody(id: number, data: Uint8Array, size: number, out: Uint8Array, offset: number): number;
/** The first byte `data` (compressor `id`) decompresses to, read without decompressing the message; undefined when it cannot be read. */
export function firstUncompressedByte(id: number, data: Uint8Array): number | undefined;
