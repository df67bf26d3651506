// BSON writer appending into a growable buffer.
//
//   const w = new BsonWriter();
//   w.startDoc();                 // the root document (no name)
//   w.writeString("find", "users");
//   w.startDoc("filter"); w.writeI32("age", 30); w.endDoc();
//   w.startArray("tags"); w.writeString("", "a"); w.writeString("", "b"); w.endArray();
//   w.endDoc();
//   const bytes = w.finish();
//
// Inside an array the name argument is ignored: keys "0", "1", ... are written automatically
// (appendRawElement too). Misuse (endDoc without startDoc, finish with open documents, wrong
// sizes for ObjectId/decimal128) aborts with a "BSON writer: ..." error.

import { BsonType, BsonValue, BsonDoc } from "./reader";
import { utf8LengthRange, utf8EncodeRange } from "./utf8";

const MAX_DEPTH = 128;

export class BsonWriter {
  private buf: Uint8Array;
  private pos: i32 = 0;
  /** Start offset of each open document's length prefix. */
  private starts: StaticArray<i32> = new StaticArray<i32>(MAX_DEPTH);
  /** Next array index of each open frame, or -1 for a document. */
  private counters: StaticArray<i32> = new StaticArray<i32>(MAX_DEPTH);
  private depth: i32 = 0;
  private rootDone: bool = false;

  constructor(initialCapacity: i32 = 256) {
    this.buf = new Uint8Array(max(initialCapacity, 16));
  }

  /** Bytes written so far. */
  get length(): i32 { return this.pos; }

  /** Resets to an empty writer, keeping the buffer. */
  reset(): void {
    this.pos = 0;
    this.depth = 0;
    this.rootDone = false;
  }

  // --- low level ---------------------------------------------------------------------------

  /** Makes room for `n` more bytes and returns the address to write them at. */
  reserve(n: i32): usize {
    const need = this.pos + n;
    if (need > this.buf.length) {
      let cap = this.buf.length << 1;
      while (cap < need) cap <<= 1;
      const nb = new Uint8Array(cap);
      memory.copy(nb.dataStart, this.buf.dataStart, <usize>this.pos);
      this.buf = nb;
    }
    const p = this.buf.dataStart + <usize>this.pos;
    this.pos = need;
    return p;
  }

  putU8(v: u8): void { store<u8>(this.reserve(1), v); }
  putI32(v: i32): void { store<i32>(this.reserve(4), v); }
  putI64(v: i64): void { store<i64>(this.reserve(8), v); }
  putF64(v: f64): void { store<f64>(this.reserve(8), v); }
  putBytes(ptr: usize, len: i32): void { memory.copy(this.reserve(len), ptr, <usize>len); }

  /** Writes `s[from,to)` as UTF-8 (optionally NUL-terminated). */
  putStringRange(s: string, from: i32, to: i32, nul: bool): void {
    const n = utf8LengthRange(s, from, to);
    const p = this.reserve(n + (nul ? 1 : 0));
    utf8EncodeRange(s, from, to, p);
    if (nul) store<u8>(p + <usize>n, 0);
  }

  /** Writes a BSON string value: int32 length, UTF-8 bytes, NUL. */
  putStringValue(s: string): void {
    const n = utf8LengthRange(s, 0, s.length);
    const p = this.reserve(n + 5);
    store<i32>(p, n + 1);
    utf8EncodeRange(s, 0, s.length, p + 4);
    store<u8>(p + 4 + <usize>n, 0);
  }

  /** True when the innermost open frame is an array (names are replaced by indexes). */
  get inArray(): bool { return this.depth > 0 && unchecked(this.counters[this.depth - 1]) >= 0; }

  private checkOpen(): void {
    if (this.depth == 0) throw new Error("BSON writer: no open document (call startDoc first)");
  }

  /** Writes the array index key if inside an array; returns true when it did. */
  private indexKey(): bool {
    const c = unchecked(this.counters[this.depth - 1]);
    if (c < 0) return false;
    unchecked(this.counters[this.depth - 1] = c + 1);
    let digits = 1;
    let x = c;
    while (x >= 10) { x /= 10; digits++; }
    const p = this.reserve(digits + 1);
    store<u8>(p + <usize>digits, 0);
    let q = p + <usize>digits;
    x = c;
    do { q--; store<u8>(q, <u8>(0x30 + x % 10)); x /= 10; } while (x > 0);
    return true;
  }

  /** Writes an element header: type byte and name (or the array index). */
  beginElement(type: u8, name: string): void {
    this.beginElementRange(type, name, 0, name.length);
  }

  /** Element header with the name `s[from, to)` (used for path segments, no allocation). */
  beginElementRange(type: u8, s: string, from: i32, to: i32): void {
    this.checkOpen();
    this.putU8(type);
    if (!this.indexKey()) this.putStringRange(s, from, to, true);
  }

  /** Element header with a name given as `len` UTF-8 bytes at `ptr`. */
  beginElementUtf8(type: u8, ptr: usize, len: i32): void {
    this.checkOpen();
    this.putU8(type);
    if (!this.indexKey()) {
      const p = this.reserve(len + 1);
      memory.copy(p, ptr, <usize>len);
      store<u8>(p + <usize>len, 0);
    }
  }

  /** Opens a document or array body right after its header (or as the root). */
  openBody(isArray: bool): void {
    if (this.depth >= MAX_DEPTH) throw new Error("BSON writer: nesting deeper than 128");
    if (this.depth == 0) {
      if (this.rootDone) throw new Error("BSON writer: root document already finished");
    }
    unchecked(this.starts[this.depth] = this.pos);
    unchecked(this.counters[this.depth] = isArray ? 0 : -1);
    this.depth++;
    this.putI32(0); // patched by closeBody
  }

  /** Closes the innermost document or array and patches its length. */
  closeBody(isArray: bool): void {
    if (this.depth == 0) throw new Error("BSON writer: end without start");
    if ((unchecked(this.counters[this.depth - 1]) >= 0) != isArray) {
      throw new Error(isArray ? "BSON writer: endArray closes a document" : "BSON writer: endDoc closes an array");
    }
    this.putU8(0);
    this.depth--;
    const start = unchecked(this.starts[this.depth]);
    store<i32>(this.buf.dataStart + <usize>start, this.pos - start);
    if (this.depth == 0) this.rootDone = true;
  }

  // --- documents and arrays ----------------------------------------------------------------

  /** Starts the root document (when nothing is open) or an embedded document named `name`. */
  startDoc(name: string = ""): void {
    if (this.depth > 0) this.beginElement(BsonType.DOCUMENT, name);
    this.openBody(false);
  }

  endDoc(): void { this.closeBody(false); }

  /** Starts an array named `name` (must be inside a document). */
  startArray(name: string = ""): void {
    this.beginElement(BsonType.ARRAY, name);
    this.openBody(true);
  }

  endArray(): void { this.closeBody(true); }

  // --- values ------------------------------------------------------------------------------

  writeDouble(name: string, v: f64): void { this.beginElement(BsonType.DOUBLE, name); this.putF64(v); }
  /** Alias of writeDouble. */
  writeF64(name: string, v: f64): void { this.writeDouble(name, v); }

  writeString(name: string, v: string): void { this.beginElement(BsonType.STRING, name); this.putStringValue(v); }

  /** A string value given as `len` UTF-8 bytes at `ptr`. */
  writeStringUtf8(name: string, ptr: usize, len: i32): void {
    this.beginElement(BsonType.STRING, name);
    this.putI32(len + 1);
    this.putBytes(ptr, len);
    this.putU8(0);
  }

  /** An embedded document from its complete raw bytes (length prefix .. terminator). */
  writeDocBytes(name: string, raw: Uint8Array): void {
    this.beginElement(BsonType.DOCUMENT, name);
    this.putBytes(raw.dataStart, raw.length);
  }

  /** An embedded document copied from a reader view. */
  writeDoc(name: string, doc: BsonDoc): void {
    this.beginElement(doc.isArray ? BsonType.ARRAY : BsonType.DOCUMENT, name);
    this.putBytes(doc.ptr, doc.length);
  }

  /** An array from its complete raw bytes (keys must already be "0","1",...). */
  writeArrayBytes(name: string, raw: Uint8Array): void {
    this.beginElement(BsonType.ARRAY, name);
    this.putBytes(raw.dataStart, raw.length);
  }

  writeBinary(name: string, subtype: u8, data: Uint8Array): void {
    this.writeBinaryPtr(name, subtype, data.dataStart, data.length);
  }

  writeBinaryPtr(name: string, subtype: u8, ptr: usize, len: i32): void {
    this.beginElement(BsonType.BINARY, name);
    this.putI32(len);
    this.putU8(subtype);
    this.putBytes(ptr, len);
  }

  /** ObjectId from its 12 bytes. */
  writeObjectId(name: string, bytes12: Uint8Array): void {
    if (bytes12.length != 12) throw new Error("BSON writer: ObjectId needs 12 bytes");
    this.beginElement(BsonType.OBJECT_ID, name);
    this.putBytes(bytes12.dataStart, 12);
  }

  /** ObjectId from 24 hex digits. */
  writeObjectIdHex(name: string, hex: string): void {
    if (hex.length != 24) throw new Error("BSON writer: ObjectId hex needs 24 digits");
    this.beginElement(BsonType.OBJECT_ID, name);
    const p = this.reserve(12);
    for (let i = 0; i < 12; i++) {
      const hi = hexDigit(hex.charCodeAt(i << 1));
      const lo = hexDigit(hex.charCodeAt((i << 1) + 1));
      if ((hi | lo) < 0) throw new Error("BSON writer: bad ObjectId hex");
      store<u8>(p + <usize>i, <u8>((hi << 4) | lo));
    }
  }

  writeBool(name: string, v: bool): void { this.beginElement(BsonType.BOOL, name); this.putU8(v ? 1 : 0); }

  /** UTC datetime, milliseconds since the epoch. */
  writeDate(name: string, ms: i64): void { this.beginElement(BsonType.DATE, name); this.putI64(ms); }

  writeNull(name: string): void { this.beginElement(BsonType.NULL, name); }

  /** Regular expression; options are written as given (MongoDB expects them sorted). */
  writeRegex(name: string, pattern: string, options: string): void {
    this.beginElement(BsonType.REGEX, name);
    this.putStringRange(pattern, 0, pattern.length, true);
    this.putStringRange(options, 0, options.length, true);
  }

  writeI32(name: string, v: i32): void { this.beginElement(BsonType.INT32, name); this.putI32(v); }

  /** Timestamp: t = seconds, i = increment. */
  writeTimestamp(name: string, t: u32, i: u32): void {
    this.beginElement(BsonType.TIMESTAMP, name);
    const p = this.reserve(8);
    store<u32>(p, i);
    store<u32>(p + 4, t);
  }

  writeI64(name: string, v: i64): void { this.beginElement(BsonType.INT64, name); this.putI64(v); }

  /** Decimal128 from its 16 little-endian bytes. */
  writeDecimal128(name: string, bytes16: Uint8Array): void {
    if (bytes16.length != 16) throw new Error("BSON writer: decimal128 needs 16 bytes");
    this.beginElement(BsonType.DECIMAL128, name);
    this.putBytes(bytes16.dataStart, 16);
  }

  writeMinKey(name: string): void { this.beginElement(BsonType.MIN_KEY, name); }
  writeMaxKey(name: string): void { this.beginElement(BsonType.MAX_KEY, name); }

  /** Any value from its type and raw value bytes (exactly as they appear after the name). */
  writeRawValue(name: string, type: u8, raw: Uint8Array): void {
    this.beginElement(type, name);
    this.putBytes(raw.dataStart, raw.length);
  }

  /** Copies an element from a reader unchanged (inside an array its key becomes the index). */
  appendRawElement(el: BsonValue): void {
    this.checkOpen();
    if (this.inArray) {
      this.putU8(el.type);
      this.indexKey();
      this.putBytes(el.valuePtr, el.valueLength);
    } else {
      this.putBytes(el.elementPtr, el.elementLength);
    }
  }

  /** Copies an element's value under a new name. */
  appendRawValue(name: string, el: BsonValue): void {
    this.beginElement(el.type, name);
    this.putBytes(el.valuePtr, el.valueLength);
  }

  /** Copies every element of `doc` into the open document. */
  appendAll(doc: BsonDoc): void {
    const it = doc.iter();
    while (it.next()) this.appendRawElement(it.value);
  }

  /** Returns a copy of the finished document. Aborts if a document is still open. */
  finish(): Uint8Array {
    if (this.depth != 0 || !this.rootDone) throw new Error("BSON writer: finish with an open or missing root document");
    const out = new Uint8Array(this.pos);
    memory.copy(out.dataStart, this.buf.dataStart, <usize>this.pos);
    return out;
  }

  /** Zero-copy access to the finished bytes (valid until the writer is used again). */
  get dataPtr(): usize { return this.buf.dataStart; }
}

function hexDigit(c: i32): i32 {
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  if (c >= 0x61 && c <= 0x66) return c - 0x61 + 10;
  if (c >= 0x41 && c <= 0x46) return c - 0x41 + 10;
  return -1;
}
