// Protobuf writing for span-writer.ts: a growable scratch buffer and the field primitives, each
// writing what the SDK's ProtobufWriter writes for the same value (so the spans come out as the
// SDK serializer's bytes).

/** The SDK's hex digit values (hex-to-binary.ts), for char codes < 256: other characters give c - 55 as there. */
const HEX_VALUE = Int16Array.from({ length: 256 }, (_, c) => (c >= 48 && c <= 57 ? c - 48 : c >= 97 && c <= 102 ? c - 87 : c - 55));
/** The byte two ASCII hex chars a, b make, at (a << 7) | b. */
export const HEX_PAIR = Uint8Array.from({ length: 128 * 128 }, (_, i) => (HEX_VALUE[i >>> 7] << 4) | HEX_VALUE[i & 0x7f]);

export function varintSize(v: number): number {
  return v < 0x80 ? 1 : v < 0x4000 ? 2 : v < 0x200000 ? 3 : v < 0x10000000 ? 4 : 5;
}

/** A protobuf message under construction in a reused, growable buffer. */
export class ProtoBuffer {
  protected buf: Buffer;
  protected pos = 0;

  constructor(bytes: number) {
    this.buf = Buffer.allocUnsafe(bytes);
  }

  protected ensure(n: number): void {
    if (this.pos + n <= this.buf.length) return;
    let size = this.buf.length * 2;
    while (size < this.pos + n) size *= 2;
    const bigger = Buffer.allocUnsafe(size);
    this.buf.copy(bigger, 0, 0, this.pos);
    this.buf = bigger;
  }

  /** Writes the length of the message opened at `at`, shifting its content when the length needs other than `reserve` bytes. */
  protected close(at: number, reserve: number): void {
    const len = this.pos - at - reserve;
    const size = varintSize(len);
    if (size !== reserve) {
      if (size > reserve) this.ensure(size - reserve);
      this.buf.copyWithin(at + size, at + reserve, this.pos);
      this.pos += size - reserve;
    }
    this.uvarintAt(at, len);
  }

  /** A uint32 as a varint at `at` (space already there); returns the position after it. */
  protected uvarintAt(at: number, v: number): number {
    const buf = this.buf;
    while (v > 0x7f) {
      buf[at++] = (v & 0x7f) | 0x80;
      v >>>= 7;
    }
    buf[at++] = v;
    return at;
  }

  /** A number as the SDK's ProtobufWriter.writeVarint writes it (uint32, else int64 two's complement). */
  protected varint(value: number): void {
    this.ensure(10);
    const buf = this.buf;
    let p = this.pos;
    if (value >= 0 && value <= 0xffffffff) {
      let v = value >>> 0;
      while (v > 0x7f) {
        buf[p++] = (v & 0x7f) | 0x80;
        v >>>= 7;
      }
      buf[p++] = v;
    } else {
      let low: number;
      let high: number;
      if (value >= 0) {
        low = value >>> 0;
        high = (value / 0x100000000) >>> 0;
      } else {
        const abs = Math.abs(value);
        low = ~(abs >>> 0) >>> 0;
        high = ~((abs / 0x100000000) >>> 0) >>> 0;
        low = (low + 1) >>> 0;
        if (low === 0) high = (high + 1) >>> 0;
      }
      while (high > 0 || low > 0x7f) {
        buf[p++] = (low & 0x7f) | 0x80;
        low = ((low >>> 7) | (high << 25)) >>> 0;
        high >>>= 7;
      }
      buf[p++] = low & 0x7f;
    }
    this.pos = p;
  }

  protected fixed32(v: number): void {
    this.ensure(4);
    const buf = this.buf;
    const p = this.pos;
    buf[p] = v;
    buf[p + 1] = v >>> 8;
    buf[p + 2] = v >>> 16;
    buf[p + 3] = v >>> 24;
    this.pos = p + 4;
  }

  /**
   * A time given as HrTime's seconds and nanoseconds, as fixed64 nanoseconds, computed as the SDK's
   * writeHrTimeAsFixed64 does (seconds split at 16 bits so every product stays an exact double).
   */
  protected nanos(seconds: number, nanos: number): void {
    const lowSeconds = seconds & 0xffff;
    const highSeconds = (seconds / 0x10000) >>> 0;
    const fromLow = lowSeconds * 1e9;
    const fromHigh = highSeconds * 1e9;
    const low = (fromLow >>> 0) + (((fromHigh & 0xffff) * 0x10000) >>> 0) + nanos;
    const high = (Math.floor(fromLow / 0x100000000) + ((fromHigh / 0x10000) >>> 0) + Math.floor(low / 0x100000000)) >>> 0;
    this.fixed32(low >>> 0);
    this.fixed32(high);
  }

  /** A string field's length and UTF-8 bytes. */
  protected str(s: string): void {
    const n = s.length;
    this.ensure(5 + 3 * n);
    const buf = this.buf;
    const p = this.pos;
    if (n < 0x80) {
      // ASCII (the usual case): one length byte, the chars as bytes.
      let i = 0;
      for (; i < n; i++) {
        const c = s.charCodeAt(i);
        if (c > 0x7f) break;
        buf[p + 1 + i] = c;
      }
      if (i === n) {
        buf[p] = n;
        this.pos = p + 1 + n;
        return;
      }
    }
    const len = Buffer.byteLength(s, 'utf8');
    const at = this.uvarintAt(p, len);
    this.pos = at + buf.write(s, at, len, 'utf8');
  }

}
