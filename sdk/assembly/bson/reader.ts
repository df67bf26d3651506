// Zero-copy BSON reader.
//
// Error policy (one rule everywhere):
//  * MALFORMED INPUT NEVER TRAPS. `BsonDoc.fromBytes/fromPtr` return null when the outer frame is
//    bad (length < 5, length larger than the bytes given, last byte not 0). Elements are checked
//    lazily as they are reached: an element whose name or value would leave its enclosing
//    document (bad string/doc/binary length, missing NUL, unknown type byte, early terminator)
//    ends iteration — `get`/`path`/`firstElement`/`next` return null and `BsonIterator.error` is
//    set. `BsonDoc.validate()` checks a whole document tree up front.
//  * A BsonValue that exists has been bounds-checked, so its getters never read outside the
//    document. Calling a typed getter on the wrong type is a programming error and aborts with
//    "BSON: <getter> on type 0x..": check `type` (or `isNumber()`) first.
//
// The reader keeps a reference to the Uint8Array it was built from (when built from one) so the
// garbage collector does not free the bytes while views exist. With `fromPtr` the caller keeps
// the memory alive.

import { utf8EqualsRange, parseIndex, hexOf } from "./utf8";

export namespace BsonType {
  export const DOUBLE: u8 = 0x01;
  export const STRING: u8 = 0x02;
  export const DOCUMENT: u8 = 0x03;
  export const ARRAY: u8 = 0x04;
  export const BINARY: u8 = 0x05;
  export const UNDEFINED: u8 = 0x06; // deprecated
  export const OBJECT_ID: u8 = 0x07;
  export const BOOL: u8 = 0x08;
  export const DATE: u8 = 0x09;
  export const NULL: u8 = 0x0a;
  export const REGEX: u8 = 0x0b;
  export const DB_POINTER: u8 = 0x0c; // deprecated
  export const JAVASCRIPT: u8 = 0x0d;
  export const SYMBOL: u8 = 0x0e; // deprecated
  export const JAVASCRIPT_WITH_SCOPE: u8 = 0x0f; // deprecated
  export const INT32: u8 = 0x10;
  export const TIMESTAMP: u8 = 0x11;
  export const INT64: u8 = 0x12;
  export const DECIMAL128: u8 = 0x13;
  export const MIN_KEY: u8 = 0xff;
  export const MAX_KEY: u8 = 0x7f;
}

/** Binary value: subtype and a copy of the payload (use `binaryPtr/binaryLength` for zero-copy). */
export class BsonBinary {
  constructor(public subtype: u8, public data: Uint8Array) {}
}

export class BsonRegex {
  constructor(public pattern: string, public options: string) {}
}

export class BsonTimestamp {
  constructor(public t: u32, public i: u32) {}
}

/** Size of the value at `v` of `type` when it fits in `[v, end)`; -1 when malformed. */
export function valueSize(type: u8, v: usize, end: usize): i32 {
  const room = <i64>end - <i64>v;
  if (room < 0) return -1;
  switch (type) {
    case BsonType.DOUBLE:
    case BsonType.DATE:
    case BsonType.TIMESTAMP:
    case BsonType.INT64: return room >= 8 ? 8 : -1;
    case BsonType.INT32: return room >= 4 ? 4 : -1;
    case BsonType.BOOL: return room >= 1 ? 1 : -1;
    case BsonType.OBJECT_ID: return room >= 12 ? 12 : -1;
    case BsonType.DECIMAL128: return room >= 16 ? 16 : -1;
    case BsonType.NULL:
    case BsonType.UNDEFINED:
    case BsonType.MIN_KEY:
    case BsonType.MAX_KEY: return 0;
    case BsonType.STRING:
    case BsonType.JAVASCRIPT:
    case BsonType.SYMBOL: return stringSize(v, room);
    case BsonType.DB_POINTER: {
      const s = stringSize(v, room);
      if (s < 0 || <i64>s + 12 > room) return -1;
      return s + 12;
    }
    case BsonType.DOCUMENT:
    case BsonType.ARRAY: return docSize(v, room);
    case BsonType.BINARY: {
      if (room < 5) return -1;
      const n = load<i32>(v);
      if (n < 0 || <i64>n + 5 > room) return -1;
      return n + 5;
    }
    case BsonType.REGEX: {
      const a = cstringLen(v, end);
      if (a < 0) return -1;
      const b = cstringLen(v + <usize>a + 1, end);
      if (b < 0) return -1;
      return a + b + 2;
    }
    case BsonType.JAVASCRIPT_WITH_SCOPE: {
      if (room < 4) return -1;
      const n = load<i32>(v);
      if (n < 14 || <i64>n > room) return -1;
      const s = stringSize(v + 4, <i64>n - 4);
      if (s < 0) return -1;
      const d = docSize(v + 4 + <usize>s, <i64>n - 4 - <i64>s);
      if (d < 0 || 4 + s + d != n) return -1;
      return n;
    }
    default: return -1;
  }
}

// @ts-ignore: decorator
@inline
function stringSize(v: usize, room: i64): i32 {
  if (room < 5) return -1;
  const n = load<i32>(v);
  if (n < 1 || <i64>n + 4 > room) return -1;
  if (load<u8>(v + 4 + <usize>n - 1) != 0) return -1;
  return n + 4;
}

// @ts-ignore: decorator
@inline
function docSize(v: usize, room: i64): i32 {
  if (room < 5) return -1;
  const n = load<i32>(v);
  if (n < 5 || <i64>n > room) return -1;
  if (load<u8>(v + <usize>n - 1) != 0) return -1;
  return n;
}

/** Length of the NUL-terminated string at `p` (terminator not counted), -1 if no NUL before `end`. */
function cstringLen(p: usize, end: usize): i32 {
  let q = p;
  while (q < end) {
    if (load<u8>(q) == 0) return <i32>(q - p);
    q++;
  }
  return -1;
}

function typeError(getter: string, type: u8): void {
  throw new Error("BSON: " + getter + " on type 0x" + (<i32>type).toString(16));
}

/** A read-only view of one document (or array: its keys are "0", "1", ...). */
export class BsonDoc {
  /** Address of the int32 length prefix. */
  ptr: usize;
  /** Declared total length (prefix .. terminator inclusive). */
  length: i32;
  isArray: bool;
  /** Keeps the underlying bytes alive; null for `fromPtr` views. */
  owner: Uint8Array | null;

  constructor(ptr: usize, length: i32, isArray: bool, owner: Uint8Array | null) {
    this.ptr = ptr;
    this.length = length;
    this.isArray = isArray;
    this.owner = owner;
  }

  /** View over `bytes` (the document may be shorter than the array). Null if the frame is bad. */
  static fromBytes(bytes: Uint8Array): BsonDoc | null {
    return BsonDoc.frame(bytes.dataStart, bytes.length, bytes);
  }

  /** View over `len` bytes at `ptr` in linear memory. Null if the frame is bad. */
  static fromPtr(ptr: usize, len: i32): BsonDoc | null {
    return BsonDoc.frame(ptr, len, null);
  }

  private static frame(ptr: usize, len: i32, owner: Uint8Array | null): BsonDoc | null {
    const n = docSize(ptr, <i64>len);
    if (n < 0) return null;
    return new BsonDoc(ptr, n, false, owner);
  }

  /** Address one past the last element (the terminating NUL). */
  // @ts-ignore: decorator
  @inline get endPtr(): usize { return this.ptr + <usize>this.length - 1; }

  /** First element, or null when empty or malformed. */
  firstElement(): BsonValue | null {
    return BsonValue.parse(this.ptr + 4, this.endPtr, this.owner);
  }

  /** An allocation-light iterator that reuses one BsonValue for every element. */
  iter(): BsonIterator {
    return new BsonIterator(this);
  }

  /** Element named `name` (compares UTF-8 bytes, no allocation per field), or null. */
  get(name: string): BsonValue | null {
    return this.getRange(name, 0, name.length);
  }

  /** Element whose name equals `s[from, to)`. */
  getRange(s: string, from: i32, to: i32): BsonValue | null {
    const end = this.endPtr;
    const it = new BsonValue();
    let p = this.ptr + 4;
    while (p < end) {
      if (!it.parseAt(p, end, this.owner)) return null;
      if (utf8EqualsRange(it.namePtr, it.nameLength, s, from, to)) return it;
      p = it.nextPtr;
    }
    return null;
  }

  /** Element whose name equals the `len` UTF-8 bytes at `namePtr`. */
  getUtf8(namePtr: usize, len: i32): BsonValue | null {
    const end = this.endPtr;
    const it = new BsonValue();
    let p = this.ptr + 4;
    while (p < end) {
      if (!it.parseAt(p, end, this.owner)) return null;
      if (it.nameLength == len && memory.compare(it.namePtr, namePtr, <usize>len) == 0) return it;
      p = it.nextPtr;
    }
    return null;
  }

  /** The `index`-th element (0-based, by position), or null. */
  at(index: i32): BsonValue | null {
    if (index < 0) return null;
    const end = this.endPtr;
    const it = new BsonValue();
    let p = this.ptr + 4;
    let i = 0;
    while (p < end) {
      if (!it.parseAt(p, end, this.owner)) return null;
      if (i == index) return it;
      i++;
      p = it.nextPtr;
    }
    return null;
  }

  /**
   * Element at a dotted path such as "filter.tags.0.name". In an array a segment must be a
   * decimal index (positional); in a document it is a field name. Null when any segment is
   * missing, goes through a scalar, or the document is malformed on the way.
   */
  path(path: string): BsonValue | null {
    let doc: BsonDoc = this;
    let from = 0;
    const n = path.length;
    while (true) {
      let to = path.indexOf(".", from);
      if (to < 0) to = n;
      let v: BsonValue | null;
      if (doc.isArray) {
        const idx = parseIndex(path, from, to);
        if (idx < 0) return null;
        v = doc.at(idx);
      } else {
        v = doc.getRange(path, from, to);
      }
      if (v == null || to == n) return v;
      if (v.type != BsonType.DOCUMENT && v.type != BsonType.ARRAY) return null;
      doc = v.asDoc();
      from = to + 1;
    }
  }

  /** Field names in order (allocates one string per field). Stops at a malformed element. */
  keys(): string[] {
    const out = new Array<string>();
    const it = this.iter();
    while (it.next()) out.push(it.value.name);
    return out;
  }

  /** Number of elements (stops at a malformed element). */
  count(): i32 {
    let n = 0;
    const it = this.iter();
    while (it.next()) n++;
    return n;
  }

  /** Copy of the document's bytes. */
  toBytes(): Uint8Array {
    const out = new Uint8Array(this.length);
    memory.copy(out.dataStart, this.ptr, <usize>this.length);
    return out;
  }

  /**
   * Checks the whole tree: every element's bounds, nested documents, array keys being "0","1",...
   * (only when `strictArrayKeys`), booleans being 0/1. True when well formed.
   */
  validate(strictArrayKeys: bool = false, depthLimit: i32 = 100): bool {
    if (depthLimit <= 0) return false;
    const end = this.endPtr;
    const v = new BsonValue();
    let p = this.ptr + 4;
    let i = 0;
    while (p < end) {
      if (!v.parseAt(p, end, this.owner)) return false;
      if (this.isArray && strictArrayKeys && !v.nameIsIndex(i)) return false;
      const t = v.type;
      if (t == BsonType.DOCUMENT || t == BsonType.ARRAY) {
        if (!v.asDoc().validate(strictArrayKeys, depthLimit - 1)) return false;
      } else if (t == BsonType.BOOL) {
        if (load<u8>(v.valuePtr) > 1) return false;
      } else if (t == BsonType.JAVASCRIPT_WITH_SCOPE) {
        const s = load<i32>(v.valuePtr + 4);
        const scope = new BsonDoc(v.valuePtr + 8 + <usize>s, v.valueLength - 8 - s, false, this.owner);
        if (!scope.validate(strictArrayKeys, depthLimit - 1)) return false;
      }
      p = v.nextPtr;
      i++;
    }
    return p == end;
  }
}

/** One element: type, name and value bounds (absolute addresses), plus typed getters. */
export class BsonValue {
  type: u8 = 0;
  /** Address of the type byte (start of the whole element). */
  elementPtr: usize = 0;
  namePtr: usize = 0;
  nameLength: i32 = 0;
  valuePtr: usize = 0;
  valueLength: i32 = 0;
  /** End of the enclosing document's element area (its terminator), for `next()`. */
  parentEnd: usize = 0;
  owner: Uint8Array | null = null;

  /** Parses the element at `p` in a document whose terminator is at `end`; null if malformed. */
  static parse(p: usize, end: usize, owner: Uint8Array | null): BsonValue | null {
    if (p >= end) return null;
    const v = new BsonValue();
    return v.parseAt(p, end, owner) ? v : null;
  }

  /** Re-points this object at the element at `p`; false if malformed (this object is then stale). */
  parseAt(p: usize, end: usize, owner: Uint8Array | null): bool {
    if (p >= end) return false;
    const t = load<u8>(p);
    const n = cstringLen(p + 1, end);
    if (n < 0) return false;
    const v = p + 2 + <usize>n;
    const size = valueSize(t, v, end);
    if (size < 0) return false;
    this.type = t;
    this.elementPtr = p;
    this.namePtr = p + 1;
    this.nameLength = n;
    this.valuePtr = v;
    this.valueLength = size;
    this.parentEnd = end;
    // A walk re-points one value along one document: storing the same owner again would still
    // cost a GC write barrier per element.
    if (changetype<usize>(this.owner) != changetype<usize>(owner)) this.owner = owner;
    return true;
  }

  /** Address just after this element. */
  // @ts-ignore: decorator
  @inline get nextPtr(): usize { return this.valuePtr + <usize>this.valueLength; }

  /** Whole element size in bytes (type byte + name + NUL + value). */
  // @ts-ignore: decorator
  @inline get elementLength(): i32 { return <i32>(this.nextPtr - this.elementPtr); }

  /** Value offset relative to the start of the owning Uint8Array (or the raw address for fromPtr). */
  get valueOffset(): i32 {
    const o = this.owner;
    return o ? <i32>(this.valuePtr - o.dataStart) : <i32>this.valuePtr;
  }

  /** Next sibling, or null at the end or at a malformed element. */
  next(): BsonValue | null {
    return BsonValue.parse(this.nextPtr, this.parentEnd, this.owner);
  }

  /** Field name (allocates). */
  get name(): string {
    return String.UTF8.decodeUnsafe(this.namePtr, <usize>this.nameLength);
  }

  /** Compares the name with `s` as UTF-8 bytes without allocating. */
  nameEquals(s: string): bool {
    return utf8EqualsRange(this.namePtr, this.nameLength, s, 0, s.length);
  }

  /** True when the name is the decimal form of `i` (array keys). */
  nameIsIndex(i: i32): bool {
    let digits = 1;
    let x = i;
    while (x >= 10) { x /= 10; digits++; }
    if (this.nameLength != digits) return false;
    let q = this.namePtr + <usize>digits;
    x = i;
    do {
      q--;
      if (<i32>load<u8>(q) != 0x30 + x % 10) return false;
      x /= 10;
    } while (x > 0);
    return true;
  }

  /** Copy of the raw value bytes. */
  rawValue(): Uint8Array {
    const out = new Uint8Array(this.valueLength);
    memory.copy(out.dataStart, this.valuePtr, <usize>this.valueLength);
    return out;
  }

  // --- type tests -------------------------------------------------------------------------

  isNull(): bool { return this.type == BsonType.NULL; }
  isUndefined(): bool { return this.type == BsonType.UNDEFINED; }
  isMinKey(): bool { return this.type == BsonType.MIN_KEY; }
  isMaxKey(): bool { return this.type == BsonType.MAX_KEY; }
  isDoc(): bool { return this.type == BsonType.DOCUMENT; }
  isArray(): bool { return this.type == BsonType.ARRAY; }
  isString(): bool { return this.type == BsonType.STRING; }
  /** int32, int64 or double. */
  isNumber(): bool {
    const t = this.type;
    return t == BsonType.INT32 || t == BsonType.INT64 || t == BsonType.DOUBLE;
  }

  // --- typed getters (abort on the wrong type) --------------------------------------------

  asF64(): f64 {
    if (this.type != BsonType.DOUBLE) typeError("asF64", this.type);
    return load<f64>(this.valuePtr);
  }

  asI32(): i32 {
    if (this.type != BsonType.INT32) typeError("asI32", this.type);
    return load<i32>(this.valuePtr);
  }

  asI64(): i64 {
    if (this.type != BsonType.INT64) typeError("asI64", this.type);
    return load<i64>(this.valuePtr);
  }

  /** int32, int64 (may lose precision beyond 2^53) or double as f64. */
  asNumber(): f64 {
    const t = this.type;
    if (t == BsonType.DOUBLE) return load<f64>(this.valuePtr);
    if (t == BsonType.INT32) return <f64>load<i32>(this.valuePtr);
    if (t == BsonType.INT64) return <f64>load<i64>(this.valuePtr);
    typeError("asNumber", t);
    return 0;
  }

  asBool(): bool {
    if (this.type != BsonType.BOOL) typeError("asBool", this.type);
    return load<u8>(this.valuePtr) != 0;
  }

  /** UTC datetime in milliseconds since the epoch. */
  asDateMs(): i64 {
    if (this.type != BsonType.DATE) typeError("asDateMs", this.type);
    return load<i64>(this.valuePtr);
  }

  /** string (also JavaScript code and symbol) decoded to an AssemblyScript string. */
  asString(): string {
    const t = this.type;
    if (t != BsonType.STRING && t != BsonType.JAVASCRIPT && t != BsonType.SYMBOL) typeError("asString", t);
    return String.UTF8.decodeUnsafe(this.valuePtr + 4, <usize>(load<i32>(this.valuePtr) - 1));
  }

  /** Address of the UTF-8 bytes of a string value (zero-copy; no terminator). */
  get stringPtr(): usize {
    if (this.type != BsonType.STRING) typeError("stringPtr", this.type);
    return this.valuePtr + 4;
  }

  /** Byte length of a string value (without the terminator). */
  get stringLength(): i32 {
    if (this.type != BsonType.STRING) typeError("stringLength", this.type);
    return load<i32>(this.valuePtr) - 1;
  }

  /** True when a string value equals `s` (UTF-8 comparison, no allocation). */
  stringEquals(s: string): bool {
    if (this.type != BsonType.STRING) return false;
    return utf8EqualsRange(this.valuePtr + 4, load<i32>(this.valuePtr) - 1, s, 0, s.length);
  }

  /** Embedded document or array as a view. */
  asDoc(): BsonDoc {
    const t = this.type;
    if (t != BsonType.DOCUMENT && t != BsonType.ARRAY) typeError("asDoc", t);
    return new BsonDoc(this.valuePtr, this.valueLength, t == BsonType.ARRAY, this.owner);
  }

  /** Array as a view (keys "0", "1", ...; paths index it by position). */
  asArray(): BsonDoc {
    if (this.type != BsonType.ARRAY) typeError("asArray", this.type);
    return new BsonDoc(this.valuePtr, this.valueLength, true, this.owner);
  }

  get binarySubtype(): u8 {
    if (this.type != BsonType.BINARY) typeError("binarySubtype", this.type);
    return load<u8>(this.valuePtr + 4);
  }

  get binaryPtr(): usize {
    if (this.type != BsonType.BINARY) typeError("binaryPtr", this.type);
    return this.valuePtr + 5;
  }

  get binaryLength(): i32 {
    if (this.type != BsonType.BINARY) typeError("binaryLength", this.type);
    return load<i32>(this.valuePtr);
  }

  /** Binary subtype and a copy of its bytes. */
  asBinary(): BsonBinary {
    const n = this.binaryLength;
    const data = new Uint8Array(n);
    memory.copy(data.dataStart, this.valuePtr + 5, <usize>n);
    return new BsonBinary(load<u8>(this.valuePtr + 4), data);
  }

  /** Address of the 12 ObjectId bytes (zero-copy). */
  get objectIdPtr(): usize {
    if (this.type != BsonType.OBJECT_ID) typeError("objectIdPtr", this.type);
    return this.valuePtr;
  }

  /** Copy of the 12 ObjectId bytes. */
  asObjectId(): Uint8Array {
    const out = new Uint8Array(12);
    memory.copy(out.dataStart, this.objectIdPtr, 12);
    return out;
  }

  /** ObjectId as 24 lower-case hex digits. */
  asObjectIdHex(): string {
    return hexOf(this.objectIdPtr, 12);
  }

  asRegex(): BsonRegex {
    if (this.type != BsonType.REGEX) typeError("asRegex", this.type);
    const end = this.valuePtr + <usize>this.valueLength;
    const a = cstringLen(this.valuePtr, end);
    const optPtr = this.valuePtr + <usize>a + 1;
    const b = cstringLen(optPtr, end);
    return new BsonRegex(
      String.UTF8.decodeUnsafe(this.valuePtr, <usize>a),
      String.UTF8.decodeUnsafe(optPtr, <usize>b),
    );
  }

  /** Timestamp as (t = seconds, i = increment). */
  asTimestamp(): BsonTimestamp {
    if (this.type != BsonType.TIMESTAMP) typeError("asTimestamp", this.type);
    return new BsonTimestamp(load<u32>(this.valuePtr + 4), load<u32>(this.valuePtr));
  }

  /** Seconds part of a timestamp (no allocation). */
  get timestampT(): u32 {
    if (this.type != BsonType.TIMESTAMP) typeError("timestampT", this.type);
    return load<u32>(this.valuePtr + 4);
  }

  /** Increment part of a timestamp (no allocation). */
  get timestampI(): u32 {
    if (this.type != BsonType.TIMESTAMP) typeError("timestampI", this.type);
    return load<u32>(this.valuePtr);
  }

  /** Copy of the 16 little-endian IEEE 754-2008 decimal128 bytes. */
  asDecimal128(): Uint8Array {
    if (this.type != BsonType.DECIMAL128) typeError("asDecimal128", this.type);
    const out = new Uint8Array(16);
    memory.copy(out.dataStart, this.valuePtr, 16);
    return out;
  }
}

/**
 * Iterates a document without allocating per element:
 *   const it = doc.iter(); while (it.next()) { const v = it.value; ... }
 * `value` is the same object each step — copy what you need before calling next() again.
 * After the loop, `error` tells whether iteration stopped at a malformed element.
 */
export class BsonIterator {
  value: BsonValue = new BsonValue();
  error: bool = false;
  /** Position of the current element in the document. */
  index: i32 = -1;
  private p: usize;
  private end: usize;
  private owner: Uint8Array | null;

  constructor(doc: BsonDoc) {
    this.p = doc.ptr + 4;
    this.end = doc.endPtr;
    this.owner = doc.owner;
  }

  next(): bool {
    if (this.p >= this.end || this.error) return false;
    if (!this.value.parseAt(this.p, this.end, this.owner)) {
      this.error = true;
      return false;
    }
    this.p = this.value.nextPtr;
    this.index++;
    return true;
  }
}
