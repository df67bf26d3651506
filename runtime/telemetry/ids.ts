// Trace and span ids: random bytes from the system's generator, drawn 4 KiB at a time (one
// randomFillSync per ~500 span ids instead of one per id). The same draws can be had as lowercase
// hex (the ReadableSpan path) or written as bytes straight into an encoding (span-writer.ts): both
// take the pool's bytes in the same order, so for the same pool they give the same ids.
import { randomFillSync } from 'node:crypto';

const HEX = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, '0'));

export class IdSource {
  private readonly pool = new Uint8Array(4096);
  private at = this.pool.length;
  private readonly fill: (pool: Uint8Array) => void;

  /** `fill` refills the pool (the system's generator; a test may give a seeded one). */
  constructor(fill: (pool: Uint8Array) => void = randomFillSync) {
    this.fill = fill;
  }

  private take(bytes: number): number {
    if (this.at + bytes > this.pool.length) {
      this.fill(this.pool);
      this.at = 0;
    }
    const from = this.at;
    this.at += bytes;
    return from;
  }

  /** `bytes` random bytes as hex, never all zero (W3C: an all-zero id is invalid). */
  next(bytes: 8 | 16): string {
    const from = this.take(bytes);
    const p = this.pool;
    let out = '';
    let any = 0;
    for (let i = from, end = from + bytes; i < end; i++) {
      out += HEX[p[i]];
      any |= p[i];
    }
    return any === 0 ? this.next(bytes) : out;
  }

  /** `bytes` random bytes written to `to` at `at`, never all zero; the same draw as next(). */
  into(to: Uint8Array, at: number, bytes: 8 | 16): void {
    const from = this.take(bytes);
    const p = this.pool;
    let any = 0;
    for (let i = 0; i < bytes; i++) any |= to[at + i] = p[from + i];
    if (any === 0) this.into(to, at, bytes);
  }
}
