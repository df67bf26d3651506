// Cheap reads over raw BSON bytes: walk top-level elements, compare names byte by byte, and decode
// only the few values routing needs. No full deserialisation on the hot path (DESIGN.md §3).
// Layout: https://bsonspec.org/spec.html

import { WireError } from './errors.ts';

export const BSON_DOUBLE = 0x01;
export const BSON_STRING = 0x02;
export const BSON_DOCUMENT = 0x03;
export const BSON_ARRAY = 0x04;
export const BSON_BINARY = 0x05;
export const BSON_UNDEFINED = 0x06;
export const BSON_OBJECTID = 0x07;
export const BSON_BOOLEAN = 0x08;
export const BSON_DATE = 0x09;
export const BSON_NULL = 0x0a;
export const BSON_REGEX = 0x0b;
export const BSON_DBPOINTER = 0x0c;
export const BSON_CODE = 0x0d;
export const BSON_SYMBOL = 0x0e;
export const BSON_CODE_W_SCOPE = 0x0f;
export const BSON_INT32 = 0x10;
export const BSON_TIMESTAMP = 0x11;
export const BSON_INT64 = 0x12;
export const BSON_DECIMAL128 = 0x13;
export const BSON_MIN_KEY = 0xff;
export const BSON_MAX_KEY = 0x7f;

function bad(message: string): never {
  throw new WireError('PROXY_ERR_BAD_BSON', message, true);
}

/** Checks the outer frame of a document at `off`: length in bounds and trailing NUL. Returns its length. */
export function checkDocument(buf: Uint8Array, off: number, limit: number): number {
  if (off + 5 > limit) bad('truncated BSON document');
  const len = buf[off] | (buf[off + 1] << 8) | (buf[off + 2] << 16) | (buf[off + 3] << 24);
  if (len < 5 || off + len > limit) bad(`BSON document length ${len} exceeds its container`);
  if (buf[off + len - 1] !== 0) bad('BSON document is missing its terminating NUL');
  return len;
}

/**
 * Offset just past the NUL of a C string starting at `off`, bounded by `limit`. A loop, not
 * `indexOf(0)`: names are a few bytes, and `Buffer#indexOf` is a call into C++ that costs 15–40 ns
 * where the loop takes 6–12 (every element of every peeked document goes through here).
 */
export function skipCString(buf: Uint8Array, off: number, limit: number): number {
  let i = off;
  while (i < limit && buf[i] !== 0) i++;
  if (i >= limit) bad('unterminated element name');
  return i + 1;
}

function i32(buf: Uint8Array, off: number): number {
  return buf[off] | (buf[off + 1] << 8) | (buf[off + 2] << 16) | (buf[off + 3] << 24);
}

/** Size of an element's value, given its type and the offset where the value starts. */
export function valueSize(buf: Uint8Array, type: number, off: number, limit: number): number {
  let n: number;
  switch (type) {
    case BSON_DOUBLE: case BSON_DATE: case BSON_TIMESTAMP: case BSON_INT64: n = 8; break;
    case BSON_STRING: case BSON_CODE: case BSON_SYMBOL:
      if (off + 4 > limit) bad('truncated string');
      n = 4 + i32(buf, off);
      if (n < 5) bad('negative string length');
      break;
    case BSON_DOCUMENT: case BSON_ARRAY: case BSON_CODE_W_SCOPE:
      if (off + 4 > limit) bad('truncated document');
      n = i32(buf, off);
      if (n < 5) bad('bad embedded document length');
      break;
    case BSON_BINARY:
      if (off + 5 > limit) bad('truncated binary');
      n = 5 + i32(buf, off);
      if (n < 5) bad('negative binary length');
      break;
    case BSON_UNDEFINED: case BSON_NULL: case BSON_MIN_KEY: case BSON_MAX_KEY: n = 0; break;
    case BSON_OBJECTID: n = 12; break;
    case BSON_BOOLEAN: n = 1; break;
    case BSON_INT32: n = 4; break;
    case BSON_DECIMAL128: n = 16; break;
    case BSON_REGEX: {
      const p = skipCString(buf, off, limit);
      return skipCString(buf, p, limit) - off;
    }
    case BSON_DBPOINTER:
      if (off + 4 > limit) bad('truncated dbpointer');
      n = 4 + i32(buf, off) + 12;
      break;
    default: bad(`unknown BSON element type 0x${type.toString(16)}`);
  }
  if (off + n > limit) bad('BSON value runs past the end of its document');
  return n;
}

/**
 * Position of one element while walking a document. Reused across steps of a walk so a scan
 * allocates nothing.
 */
export class ElementCursor {
  buf: Buffer = EMPTY;
  /** End of the enclosing document (offset of its trailing NUL). */
  end = 0;
  /** Offset of the current element's type byte. */
  at = 0;
  type = 0;
  nameStart = 0;
  nameEnd = 0;
  valueStart = 0;
  valueEnd = 0;

  /** Positions the cursor before the first element of the document at `off`. */
  open(buf: Buffer, off: number, limit = buf.length): this {
    const len = checkDocument(buf, off, limit);
    this.buf = buf;
    this.end = off + len - 1;
    this.valueEnd = off + 4;
    this.type = 0;
    return this;
  }

  /** Advances to the next element; false at the end of the document. */
  next(): boolean {
    const buf = this.buf;
    const at = this.valueEnd;
    if (at >= this.end) return false;
    this.at = at;
    this.type = buf[at];
    this.nameStart = at + 1;
    this.nameEnd = skipCString(buf, at + 1, this.end) - 1;
    this.valueStart = this.nameEnd + 1;
    this.valueEnd = this.valueStart + valueSize(buf, this.type, this.valueStart, this.end);
    return true;
  }

  nameIs(name: Uint8Array): boolean {
    const n = name.length;
    if (this.nameEnd - this.nameStart !== n) return false;
    const buf = this.buf;
    const s = this.nameStart;
    for (let i = 0; i < n; i++) if (buf[s + i] !== name[i]) return false;
    return true;
  }

  name(): string {
    return this.buf.toString('utf8', this.nameStart, this.nameEnd);
  }

  /** The value of a string element (type 0x02), decoded. */
  string(): string {
    return this.buf.toString('utf8', this.valueStart + 4, this.valueEnd - 1);
  }

  int32(): number {
    return i32(this.buf, this.valueStart);
  }

  int64(): bigint {
    return this.buf.readBigInt64LE(this.valueStart);
  }

  double(): number {
    return this.buf.readDoubleLE(this.valueStart);
  }

  /** A numeric value of any BSON number type as a JS number, NaN for other types. */
  number(): number {
    switch (this.type) {
      case BSON_INT32: return this.int32();
      case BSON_INT64: return Number(this.int64());
      case BSON_DOUBLE: return this.double();
      case BSON_BOOLEAN: return this.buf[this.valueStart];
      default: return NaN;
    }
  }

  /** Raw bytes of the value (a view). */
  valueBytes(): Buffer {
    return this.buf.subarray(this.valueStart, this.valueEnd);
  }
}

const EMPTY = Buffer.alloc(0);

export function utf8(s: string): Uint8Array {
  return Buffer.from(s, 'utf8');
}

/** Offset of the type byte of the top-level field `name` in the document at `off`, or -1. */
export function findField(buf: Buffer, name: Uint8Array, off = 0, cur = new ElementCursor()): number {
  cur.open(buf, off);
  while (cur.next()) if (cur.nameIs(name)) return cur.at;
  return -1;
}

/** The first key of a document (a command's name). */
export function firstKey(buf: Buffer, off = 0): string {
  const cur = new ElementCursor().open(buf, off);
  return cur.next() ? cur.name() : '';
}
