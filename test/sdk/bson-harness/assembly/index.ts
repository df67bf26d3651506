// @ts-nocheck — AssemblyScript, compiled by test/sdk/bson.test.ts with asc (not by tsc).
//
// Test harness around sdk/assembly/bson. Marshalling: the JS side calls alloc(slot, len) and
// copies bytes to the returned address (slot 0: a BSON document, 1: a path, 2: a value or name);
// every operation leaves its result in `out` (read through outPtr()) and returns its length,
// or -1 when the SDK returned null / found nothing, -2 when the document frame was refused.

import {
  BsonDoc, BsonValue, BsonType, BsonWriter, hexOf,
  setString as sdkSetString, setI32 as sdkSetI32, setI64 as sdkSetI64, setF64 as sdkSetF64,
  setBool as sdkSetBool, setNull as sdkSetNull, setDoc as sdkSetDoc, setDate as sdkSetDate,
  unset as sdkUnset, rename as sdkRename, redact as sdkRedact,
} from "../../../../sdk/assembly/bson/index";

const slots = new StaticArray<Uint8Array | null>(4);
let out: Uint8Array = new Uint8Array(0);

export function alloc(slot: i32, len: i32): usize {
  const b = new Uint8Array(len);
  slots[slot] = b;
  return b.dataStart;
}

export function outPtr(): usize {
  return out.dataStart;
}

function arg(i: i32): Uint8Array {
  const b = slots[i];
  return b ? b : new Uint8Array(0);
}

function argStr(i: i32): string {
  const b = arg(i);
  return String.UTF8.decodeUnsafe(b.dataStart, <usize>b.length);
}

function emit(b: Uint8Array | null): i32 {
  if (b == null) return -1;
  out = b;
  return b.length;
}

function emitStr(s: string): i32 {
  return emit(Uint8Array.wrap(String.UTF8.encode(s)));
}

function q(s: string): string {
  return "\"" + s + "\"";
}

function hexStr(s: string): string {
  const b = String.UTF8.encode(s);
  return q(hexOf(changetype<usize>(b), b.byteLength));
}

function f64Json(f: f64): string {
  return isNaN(f) ? q("NaN") : q(reinterpret<u64>(f).toString(16));
}

/** JSON description of one value, compared by the JS test with what `bson` deserializes. */
function render(v: BsonValue): string {
  const t = v.type;
  let s = "{\"t\":" + (<i32>t).toString() + ",\"name\":" + hexStr(v.name);
  if (!v.nameEquals(v.name)) s += ",\"nameEqualsFailed\":true";
  switch (t) {
    case BsonType.DOUBLE: s += ",\"v\":" + f64Json(v.asF64()) + ",\"n\":" + f64Json(v.asNumber()); break;
    case BsonType.INT32: s += ",\"v\":" + q(v.asI32().toString()) + ",\"n\":" + f64Json(v.asNumber()); break;
    case BsonType.INT64: s += ",\"v\":" + q(v.asI64().toString()) + ",\"n\":" + f64Json(v.asNumber()); break;
    case BsonType.STRING: {
      const str = v.asString();
      s += ",\"v\":" + hexStr(str);
      if (!v.stringEquals(str)) s += ",\"stringEqualsFailed\":true";
      break;
    }
    case BsonType.DOCUMENT:
    case BsonType.ARRAY: {
      const d = v.asDoc();
      const keys = d.keys();
      s += ",\"keys\":[";
      for (let i = 0; i < keys.length; i++) s += (i ? "," : "") + hexStr(keys[i]);
      s += "],\"count\":" + d.count().toString();
      break;
    }
    case BsonType.BINARY: {
      const b = v.asBinary();
      s += ",\"sub\":" + (<i32>b.subtype).toString() + ",\"v\":" + q(hexOf(b.data.dataStart, b.data.length));
      break;
    }
    case BsonType.OBJECT_ID: s += ",\"v\":" + q(v.asObjectIdHex()); break;
    case BsonType.BOOL: s += ",\"v\":" + (v.asBool() ? "true" : "false"); break;
    case BsonType.DATE: s += ",\"v\":" + q(v.asDateMs().toString()); break;
    case BsonType.REGEX: {
      const r = v.asRegex();
      s += ",\"p\":" + hexStr(r.pattern) + ",\"o\":" + hexStr(r.options);
      break;
    }
    case BsonType.TIMESTAMP: {
      const ts = v.asTimestamp();
      s += ",\"ts\":" + ts.t.toString() + ",\"ti\":" + ts.i.toString();
      if (ts.t != v.timestampT || ts.i != v.timestampI) s += ",\"tsMismatch\":true";
      break;
    }
    case BsonType.DECIMAL128: {
      const d = v.asDecimal128();
      s += ",\"v\":" + q(hexOf(d.dataStart, 16));
      break;
    }
    default: break; // null, minKey, maxKey, undefined: the type says it all
  }
  return s + "}";
}

/** readPath: slot 0 document, slot 1 dotted path. */
export function readPath(): i32 {
  const d = BsonDoc.fromBytes(arg(0));
  if (d == null) return -2;
  const v = d.path(argStr(1));
  if (v == null) return -1;
  return emitStr(render(v));
}

/** keys of the document at slot 1's path (empty path: the root), JSON array of hex names. */
export function keysAt(): i32 {
  const d = BsonDoc.fromBytes(arg(0));
  if (d == null) return -2;
  const p = argStr(1);
  let target: BsonDoc = d;
  if (p.length > 0) {
    const v = d.path(p);
    if (v == null || (v.type != BsonType.DOCUMENT && v.type != BsonType.ARRAY)) return -1;
    target = v.asDoc();
  }
  const keys = target.keys();
  let s = "[";
  for (let i = 0; i < keys.length; i++) s += (i ? "," : "") + hexStr(keys[i]);
  return emitStr(s + "]");
}

function copyTyped(w: BsonWriter, d: BsonDoc): bool {
  const it = d.iter();
  while (it.next()) {
    const v = it.value;
    const name = v.name;
    switch (v.type) {
      case BsonType.DOUBLE: w.writeDouble(name, v.asF64()); break;
      case BsonType.STRING: w.writeString(name, v.asString()); break;
      case BsonType.DOCUMENT: {
        w.startDoc(name);
        if (!copyTyped(w, v.asDoc())) return false;
        w.endDoc();
        break;
      }
      case BsonType.ARRAY: {
        w.startArray(name);
        if (!copyTyped(w, v.asArray())) return false;
        w.endArray();
        break;
      }
      case BsonType.BINARY: { const b = v.asBinary(); w.writeBinary(name, b.subtype, b.data); break; }
      case BsonType.OBJECT_ID: w.writeObjectIdHex(name, v.asObjectIdHex()); break;
      case BsonType.BOOL: w.writeBool(name, v.asBool()); break;
      case BsonType.DATE: w.writeDate(name, v.asDateMs()); break;
      case BsonType.NULL: w.writeNull(name); break;
      case BsonType.REGEX: { const r = v.asRegex(); w.writeRegex(name, r.pattern, r.options); break; }
      case BsonType.INT32: w.writeI32(name, v.asI32()); break;
      case BsonType.TIMESTAMP: { const ts = v.asTimestamp(); w.writeTimestamp(name, ts.t, ts.i); break; }
      case BsonType.INT64: w.writeI64(name, v.asI64()); break;
      case BsonType.DECIMAL128: w.writeDecimal128(name, v.asDecimal128()); break;
      case BsonType.MIN_KEY: w.writeMinKey(name); break;
      case BsonType.MAX_KEY: w.writeMaxKey(name); break;
      default: w.appendRawElement(v); break; // deprecated types
    }
  }
  return !it.error;
}

function copyRaw(w: BsonWriter, d: BsonDoc): bool {
  let v = d.firstElement();
  while (v != null) {
    w.appendRawElement(v);
    v = v.next();
  }
  return true;
}

/** Re-encodes slot 0 element by element: mode 0 typed writer calls, 1 appendRawElement. */
export function roundtrip(mode: i32): i32 {
  const d = BsonDoc.fromBytes(arg(0));
  if (d == null) return -2;
  if (!d.validate()) return -1;
  const w = new BsonWriter(16);
  w.startDoc();
  const ok = mode == 0 ? copyTyped(w, d) : copyRaw(w, d);
  if (!ok) return -1;
  w.endDoc();
  return emit(w.finish());
}

/** 1 when slot 0 is a well-formed document tree, 0 when not, -2 when the frame is refused. */
export function validate(strictArrayKeys: i32): i32 {
  const d = BsonDoc.fromBytes(arg(0));
  if (d == null) return -2;
  return d.validate(strictArrayKeys != 0) ? 1 : 0;
}

function walkDoc(d: BsonDoc, depth: i32): i32 {
  if (depth > 200) return -1;
  let n = 0;
  const it = d.iter();
  while (it.next()) {
    const v = it.value;
    n++;
    if (v.type == BsonType.DOCUMENT || v.type == BsonType.ARRAY) {
      const c = walkDoc(v.asDoc(), depth + 1);
      if (c < 0) return -1;
      n += c;
    } else {
      render(v); // touches every typed getter for the type
    }
  }
  return it.error ? -1 : n;
}

/** Visits every element without validating first (for malformed input): count, or -1 on error. */
export function walk(): i32 {
  const d = BsonDoc.fromBytes(arg(0));
  if (d == null) return -2;
  return walkDoc(d, 0);
}

function editDoc(): BsonDoc | null {
  return BsonDoc.fromBytes(arg(0));
}

export function setString(): i32 { const d = editDoc(); return d ? emit(sdkSetString(d, argStr(1), argStr(2))) : -2; }
export function setI32(v: i32): i32 { const d = editDoc(); return d ? emit(sdkSetI32(d, argStr(1), v)) : -2; }
export function setI64(v: i64): i32 { const d = editDoc(); return d ? emit(sdkSetI64(d, argStr(1), v)) : -2; }
export function setF64(v: f64): i32 { const d = editDoc(); return d ? emit(sdkSetF64(d, argStr(1), v)) : -2; }
export function setBool(v: i32): i32 { const d = editDoc(); return d ? emit(sdkSetBool(d, argStr(1), v != 0)) : -2; }
export function setDate(v: i64): i32 { const d = editDoc(); return d ? emit(sdkSetDate(d, argStr(1), v)) : -2; }
export function setNull(): i32 { const d = editDoc(); return d ? emit(sdkSetNull(d, argStr(1))) : -2; }
export function setDoc(): i32 { const d = editDoc(); return d ? emit(sdkSetDoc(d, argStr(1), arg(2))) : -2; }
export function unset(): i32 { const d = editDoc(); return d ? emit(sdkUnset(d, argStr(1))) : -2; }
export function rename(): i32 { const d = editDoc(); return d ? emit(sdkRename(d, argStr(1), argStr(2))) : -2; }
export function redact(): i32 { const d = editDoc(); return d ? emit(sdkRedact(d, argStr(1), argStr(2))) : -2; }

/** Builds a fixed document exercising every writer method (compared with `bson` in JS). */
export function buildAll(): i32 {
  const w = new BsonWriter();
  w.startDoc();
  w.writeDouble("d", -0.0);
  w.writeString("s", "héllo ✓ 𝄞");
  w.startDoc("doc"); w.writeI32("x", 1); w.endDoc();
  w.startArray("arr"); w.writeI32("ignored", 1); w.writeString("", "two"); w.startDoc(""); w.endDoc(); w.endArray();
  const bin = new Uint8Array(3); bin[0] = 1; bin[1] = 2; bin[2] = 255;
  w.writeBinary("bin", 0, bin);
  w.writeObjectIdHex("oid", "0123456789abcdef01234567");
  w.writeBool("t", true);
  w.writeDate("date", 1700000000123);
  w.writeNull("nul");
  w.writeRegex("re", "^a.*b$", "im");
  w.writeI32("i32", -2147483648);
  w.writeTimestamp("ts", 4294967295, 7);
  w.writeI64("i64", 9223372036854775807);
  const dec = new Uint8Array(16); dec[0] = 1; dec[15] = 0x30; // bytes only
  w.writeDecimal128("dec", dec);
  w.writeMinKey("min");
  w.writeMaxKey("max");
  w.endDoc();
  return emit(w.finish());
}

/** Deliberate misuse (kind 0: asI32 on slot 0's field "b"; 1: endDoc with nothing open). */
export function misuse(kind: i32): i32 {
  if (kind == 0) {
    const d = BsonDoc.fromBytes(arg(0));
    if (d == null) return -2;
    const v = d.get("b");
    return v ? v.asI32() : -1;
  }
  const w = new BsonWriter();
  w.endDoc();
  return 0;
}
