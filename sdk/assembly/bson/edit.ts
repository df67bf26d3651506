// Copy-on-write edits: each function reads `doc` and returns a NEW document (Uint8Array) with one
// dotted path changed. The source is never modified.
//
// Paths: "a.b.c"; inside an array a segment must be a decimal index ("items.2.qty").
// Semantics (close to MongoDB's update operators):
//  * set*:   replaces the value in place (same position, same name). Missing fields are appended
//            to their parent, missing intermediate documents are created (a numeric segment under
//            a missing parent creates a document with that key, as MongoDB does). Setting index n
//            past the end of an array pads it with nulls. Fails (null) when a segment goes
//            through an existing scalar or uses a non-numeric segment on an array.
//  * unset:  removes the field; an array element is replaced by null (indexes stay stable, as
//            MongoDB's $unset does). Missing path: unchanged copy.
//  * rename: renames the last segment in place; an existing field with the new name in the same
//            document is dropped (it is overwritten). Missing source: unchanged copy. Fails (null)
//            when the parent is an array.
//  * redact: replaces the value (any type) with the given string. Missing path: unchanged copy.
// All return null for an empty path or empty segment ("a..b") and when the document is
// malformed along the path; they never trap on malformed input.

import { BsonDoc, BsonType, BsonValue } from "./reader";
import { BsonWriter } from "./writer";
import { parseIndex, utf8EqualsRange, utf8LengthRange, utf8EncodeRange } from "./utf8";

const OP_SET = 1;
const OP_UNSET = 2;
const OP_RENAME = 3;
const OP_REDACT = 4;

class EditOp {
  kind: i32 = 0;
  type: u8 = 0;
  valuePtr: usize = 0;
  valueLen: i32 = 0;
  /** Keeps the value bytes alive. */
  value: Uint8Array | null = null;
  text: string = "";
}

function validPath(path: string): bool {
  const n = path.length;
  if (n == 0) return false;
  let prev = -1;
  for (let i = 0; i <= n; i++) {
    if (i == n || path.charCodeAt(i) == 0x2e) {
      if (i - prev == 1) return false;
      prev = i;
    }
  }
  return true;
}

function run(doc: BsonDoc, path: string, op: EditOp): Uint8Array | null {
  if (!validPath(path)) return null;
  if (op.kind == OP_RENAME && (op.text.length == 0 || op.text.indexOf(".") >= 0)) return null;
  const w = new BsonWriter(doc.length + 32);
  w.openBody(false);
  if (!rewrite(w, doc, path, 0, op)) return null;
  w.closeBody(false);
  return w.finish();
}

function writeOpValue(w: BsonWriter, op: EditOp): void {
  w.putBytes(op.valuePtr, op.valueLen);
}

function rewrite(w: BsonWriter, doc: BsonDoc, path: string, from: i32, op: EditOp): bool {
  let to = path.indexOf(".", from);
  const last = to < 0;
  if (last) to = path.length;
  const isArray = doc.isArray;
  let idx = -1;
  if (isArray) {
    idx = parseIndex(path, from, to);
    if (idx < 0) {
      if (op.kind == OP_SET || (last && op.kind == OP_RENAME)) return false;
    }
  }
  if (last && op.kind == OP_RENAME && isArray) return false;
  // rename drops an existing field with the target name, but only when the source exists
  let dropTarget = false;
  if (last && op.kind == OP_RENAME) {
    dropTarget = doc.getRange(path, from, to) != null && !utf8Same(path, from, to, op.text);
  }

  let found = false;
  const it = doc.iter();
  while (it.next()) {
    const v = it.value;
    const match = !found && (isArray ? it.index == idx : utf8EqualsRange(v.namePtr, v.nameLength, path, from, to));
    if (!match) {
      if (dropTarget && v.nameEquals(op.text)) continue;
      w.appendRawElement(v);
      continue;
    }
    found = true;
    if (last) {
      switch (op.kind) {
        case OP_SET: {
          w.beginElementUtf8(op.type, v.namePtr, v.nameLength);
          writeOpValue(w, op);
          break;
        }
        case OP_UNSET: {
          if (isArray) w.beginElementUtf8(BsonType.NULL, v.namePtr, v.nameLength);
          break;
        }
        case OP_RENAME: {
          w.beginElement(v.type, op.text);
          w.putBytes(v.valuePtr, v.valueLength);
          break;
        }
        case OP_REDACT: {
          w.beginElementUtf8(BsonType.STRING, v.namePtr, v.nameLength);
          w.putStringValue(op.text);
          break;
        }
      }
      continue;
    }
    const t = v.type;
    if (t == BsonType.DOCUMENT || t == BsonType.ARRAY) {
      w.beginElementUtf8(t, v.namePtr, v.nameLength);
      w.openBody(t == BsonType.ARRAY);
      if (!rewrite(w, v.asDoc(), path, to + 1, op)) return false;
      w.closeBody(t == BsonType.ARRAY);
      continue;
    }
    if (op.kind == OP_SET) return false; // cannot go through a scalar
    w.appendRawElement(v);
  }
  if (it.error) return false;

  if (!found && op.kind == OP_SET) {
    if (isArray) {
      for (let i = it.index + 1; i < idx; i++) w.writeNull("");
    }
    if (last) {
      w.beginElementRange(op.type, path, from, to);
      writeOpValue(w, op);
    } else {
      w.beginElementRange(BsonType.DOCUMENT, path, from, to);
      w.openBody(false);
      create(w, path, to + 1, op);
      w.closeBody(false);
    }
  }
  return true;
}

/** Writes the rest of a path that does not exist yet as nested documents ending in the value. */
function create(w: BsonWriter, path: string, from: i32, op: EditOp): void {
  let to = path.indexOf(".", from);
  if (to < 0) {
    w.beginElementRange(op.type, path, from, path.length);
    writeOpValue(w, op);
    return;
  }
  w.beginElementRange(BsonType.DOCUMENT, path, from, to);
  w.openBody(false);
  create(w, path, to + 1, op);
  w.closeBody(false);
}

function utf8Same(path: string, from: i32, to: i32, s: string): bool {
  if (to - from != s.length) return false;
  for (let i = 0; i < s.length; i++) if (path.charCodeAt(from + i) != s.charCodeAt(i)) return false;
  return true;
}

function setOp(type: u8, value: Uint8Array): EditOp {
  const op = new EditOp();
  op.kind = OP_SET;
  op.type = type;
  op.value = value;
  op.valuePtr = value.dataStart;
  op.valueLen = value.length;
  return op;
}

// --- public API ------------------------------------------------------------------------------

/** Sets `path` to a value given by its BSON type and raw value bytes. */
export function setValue(doc: BsonDoc, path: string, type: u8, rawValue: Uint8Array): Uint8Array | null {
  return run(doc, path, setOp(type, rawValue));
}

/** Sets `path` to a copy of an element's value read from any document. */
export function setElementValue(doc: BsonDoc, path: string, v: BsonValue): Uint8Array | null {
  const op = new EditOp();
  op.kind = OP_SET;
  op.type = v.type;
  op.valuePtr = v.valuePtr;
  op.valueLen = v.valueLength;
  op.value = v.owner;
  return run(doc, path, op);
}

export function setString(doc: BsonDoc, path: string, v: string): Uint8Array | null {
  const n = utf8LengthRange(v, 0, v.length);
  const b = new Uint8Array(n + 5);
  store<i32>(b.dataStart, n + 1);
  utf8EncodeRange(v, 0, v.length, b.dataStart + 4);
  return setValue(doc, path, BsonType.STRING, b);
}

export function setI32(doc: BsonDoc, path: string, v: i32): Uint8Array | null {
  const b = new Uint8Array(4);
  store<i32>(b.dataStart, v);
  return setValue(doc, path, BsonType.INT32, b);
}

export function setI64(doc: BsonDoc, path: string, v: i64): Uint8Array | null {
  const b = new Uint8Array(8);
  store<i64>(b.dataStart, v);
  return setValue(doc, path, BsonType.INT64, b);
}

export function setF64(doc: BsonDoc, path: string, v: f64): Uint8Array | null {
  const b = new Uint8Array(8);
  store<f64>(b.dataStart, v);
  return setValue(doc, path, BsonType.DOUBLE, b);
}

export function setBool(doc: BsonDoc, path: string, v: bool): Uint8Array | null {
  const b = new Uint8Array(1);
  b[0] = v ? 1 : 0;
  return setValue(doc, path, BsonType.BOOL, b);
}

export function setDate(doc: BsonDoc, path: string, ms: i64): Uint8Array | null {
  const b = new Uint8Array(8);
  store<i64>(b.dataStart, ms);
  return setValue(doc, path, BsonType.DATE, b);
}

export function setNull(doc: BsonDoc, path: string): Uint8Array | null {
  return setValue(doc, path, BsonType.NULL, new Uint8Array(0));
}

/** Sets `path` to an embedded document given as complete raw BSON bytes (null if they are not one). */
export function setDoc(doc: BsonDoc, path: string, raw: Uint8Array): Uint8Array | null {
  const d = BsonDoc.fromBytes(raw);
  if (d == null || d.length != raw.length) return null;
  return setValue(doc, path, BsonType.DOCUMENT, raw);
}

/** Sets `path` to an array given as complete raw BSON bytes. */
export function setArray(doc: BsonDoc, path: string, raw: Uint8Array): Uint8Array | null {
  const d = BsonDoc.fromBytes(raw);
  if (d == null || d.length != raw.length) return null;
  return setValue(doc, path, BsonType.ARRAY, raw);
}

export function unset(doc: BsonDoc, path: string): Uint8Array | null {
  const op = new EditOp();
  op.kind = OP_UNSET;
  return run(doc, path, op);
}

/** Renames the field at `path` to `newName` (a plain name, no dots), keeping its position. */
export function rename(doc: BsonDoc, path: string, newName: string): Uint8Array | null {
  const op = new EditOp();
  op.kind = OP_RENAME;
  op.text = newName;
  return run(doc, path, op);
}

/** Replaces the value at `path` (whatever its type) with the string `replacement`. */
export function redact(doc: BsonDoc, path: string, replacement: string): Uint8Array | null {
  const op = new EditOp();
  op.kind = OP_REDACT;
  op.text = replacement;
  return run(doc, path, op);
}
