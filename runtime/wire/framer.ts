// Incremental framing of a byte stream into whole wire-protocol messages.
//
// Frames are handed out as views (`subarray`) of the chunk they arrived in whenever a chunk holds
// them whole — the common case — and are assembled into one exact-size buffer only when a frame
// spans chunks. A declared length outside [16, 48,000,000] is refused before anything is allocated
// (MongoDB driver cmap's SizedMessageTransform does the same check).

import { HEADER_SIZE, MAX_MESSAGE_SIZE, MIN_MESSAGE_SIZE } from './constants.ts';
import { WireError } from './errors.ts';

export interface FrameSink {
  /** A complete message, header included. The buffer is not reused by the framer. */
  onFrame(frame: Buffer): void;
  /** The stream cannot be framed any further; `requestId` is the offending header's id when known. */
  onFrameError(err: WireError, requestId: number, opCode: number): void;
}

export class Framer {
  private readonly sink: FrameSink;
  private readonly maxSize: number;
  /** A frame being assembled across chunks (allocated at its declared size), or null. */
  private partial: Buffer | null = null;
  private partialFilled = 0;
  /** Fewer than 4 bytes of a header seen so far: the length is not known yet. */
  private stub: Buffer | null = null;
  private failed = false;

  constructor(sink: FrameSink, maxSize = MAX_MESSAGE_SIZE) {
    this.sink = sink;
    this.maxSize = maxSize;
  }

  /** Bytes buffered for an incomplete frame. */
  get buffered(): number {
    return this.partial !== null ? this.partialFilled : this.stub !== null ? this.stub.length : 0;
  }

  push(chunk: Buffer): void {
    if (this.failed) return;
    let off = 0;
    const len = chunk.length;

    if (this.stub !== null) {
      // Complete a length prefix that was split across chunks.
      const joined = Buffer.concat([this.stub, chunk]);
      this.stub = null;
      this.push(joined);
      return;
    }

    if (this.partial !== null) {
      const need = this.partial.length - this.partialFilled;
      const take = need < len ? need : len;
      chunk.copy(this.partial, this.partialFilled, 0, take);
      this.partialFilled += take;
      off = take;
      if (this.partialFilled < this.partial.length) return;
      const frame = this.partial;
      this.partial = null;
      this.partialFilled = 0;
      this.sink.onFrame(frame);
      if (this.failed) return;
    }

    while (off < len) {
      const avail = len - off;
      if (avail < 4) {
        this.stub = Buffer.from(chunk.subarray(off));
        return;
      }
      const size = chunk.readInt32LE(off);
      if (size < MIN_MESSAGE_SIZE || size > this.maxSize) {
        this.failed = true;
        const requestId = avail >= 8 ? chunk.readInt32LE(off + 4) : 0;
        const opCode = avail >= HEADER_SIZE ? chunk.readInt32LE(off + 12) : 0;
        this.sink.onFrameError(
          new WireError('PROXY_ERR_BAD_LENGTH',
            `message length ${size} is outside the accepted range ${MIN_MESSAGE_SIZE}..${this.maxSize}`, false),
          requestId, opCode);
        return;
      }
      if (avail >= size) {
        this.sink.onFrame(chunk.subarray(off, off + size));
        if (this.failed) return;
        off += size;
        continue;
      }
      // Frame spans chunks: allocate it once at its final size.
      const buf = Buffer.allocUnsafe(size);
      chunk.copy(buf, 0, off, len);
      this.partial = buf;
      this.partialFilled = avail;
      return;
    }
  }

  /** Stops framing (after a fatal error decided by the consumer). */
  fail(): void {
    this.failed = true;
    this.partial = null;
    this.stub = null;
  }
}
