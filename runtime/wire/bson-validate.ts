// Structural validation of a whole BSON document, without decoding it: every element's type is
// known, every length stays inside its container, strings and names are NUL-terminated and valid
// UTF-8, nested documents are checked recursively (depth-capped). This is what mongod's wire object check does
// before it parses a request; the proxy runs it on everything it forwards so that a request it
// cannot vouch for is refused here, with InvalidBSON, and never reaches a shared upstream connection.
// Layout: https://bsonspec.org/spec.html
//
// Cost: one pass over the bytes, no allocation (a walk, not a decode); see bench/wire-bench.ts.

import {
  BSON_ARRAY, BSON_BINARY, BSON_BOOLEAN, BSON_CODE, BSON_CODE_W_SCOPE, BSON_DATE, BSON_DBPOINTER,
  BSON_DECIMAL128, BSON_DOCUMENT, BSON_DOUBLE, BSON_INT32, BSON_INT64, BSON_MAX_KEY, BSON_MIN_KEY,
  BSON_NULL, BSON_OBJECTID, BSON_REGEX, BSON_STRING, BSON_SYMBOL, BSON_TIMESTAMP, BSON_UNDEFINED,
} from './bson-peek.ts';
import { WireError } from './errors.ts';

/** Nesting deeper than this is refused (mongod's own limit for stored documents is 100 levels; commands add a few). */
export const MAX_BSON_DEPTH = 128;

function bad(message: string): never {
  throw new WireError('PROXY_ERR_BAD_BSON', message, true);
}

function i32(buf: Uint8Array, off: number): number {
  return buf[off] | (buf[off + 1] << 8) | (buf[off + 2] << 16) | (buf[off + 3] << 24);
}

/**
 * Checks that [from, to) is well-formed UTF-8 (RFC 3629: shortest forms only, no surrogates,
 * nothing above U+10FFFF). ASCII, the usual case, costs one comparison per byte.
 */
export function checkUtf8(buf: Uint8Array, from: number, to: number): void {
  let i = from;
  while (i < to) {
    const b = buf[i];
    if (b < 0x80) { i++; continue; }
    let need: number;
    let min: number;
    let cp: number;
    if (b >= 0xc2 && b <= 0xdf) { need = 1; min = 0x80; cp = b & 0x1f; }
    else if (b >= 0xe0 && b <= 0xef) { need = 2; min = 0x800; cp = b & 0x0f; }
    else if (b >= 0xf0 && b <= 0xf4) { need = 3; min = 0x10000; cp = b & 0x07; }
    else return bad(`invalid UTF-8 byte 0x${b.toString(16)} in a string`);
    if (i + need >= to) bad('truncated UTF-8 sequence in a string');
    for (let k = 1; k <= need; k++) {
      const c = buf[i + k];
      if ((c & 0xc0) !== 0x80) bad('invalid UTF-8 continuation byte in a string');
      cp = (cp << 6) | (c & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) bad('invalid UTF-8 sequence in a string');
    i += need + 1;
  }
}

/** Offset just past the NUL of a C string at `off` that must end before `limit`. */
function cstring(buf: Uint8Array, off: number, limit: number): number {
  for (let i = off; i < limit; i++) {
    if (buf[i] === 0) {
      checkUtf8(buf, off, i);
      return i + 1;
    }
  }
  return bad('unterminated C string');
}

/** Offset just past a BSON string (int32 length incl. NUL, bytes, NUL) at `off`. */
function string(buf: Uint8Array, off: number, limit: number): number {
  if (off + 4 > limit) bad('truncated string length');
  const n = i32(buf, off);
  if (n < 1 || off + 4 + n > limit) bad(`string length ${n} runs past its document`);
  if (buf[off + 4 + n - 1] !== 0) bad('string is missing its terminating NUL');
  checkUtf8(buf, off + 4, off + 4 + n - 1);
  return off + 4 + n;
}

/**
 * Validates the document at `off` (which must end at or before `limit`) and everything inside it.
 * Returns its length. Throws WireError PROXY_ERR_BAD_BSON naming what is wrong.
 */
export function validateDocument(buf: Uint8Array, off: number, limit: number, depth = 0): number {
  if (depth > MAX_BSON_DEPTH) bad(`BSON nesting deeper than ${MAX_BSON_DEPTH} levels`);
  if (off + 5 > limit) bad('truncated BSON document');
  const len = i32(buf, off);
  if (len < 5 || off + len > limit) bad(`BSON document length ${len} exceeds its container`);
  const end = off + len - 1; // offset of the trailing NUL
  if (buf[end] !== 0) bad('BSON document is missing its terminating NUL');
  let p = off + 4;
  while (p < end) {
    const type = buf[p];
    p = cstring(buf, p + 1, end);
    switch (type) {
      case BSON_DOUBLE: case BSON_DATE: case BSON_TIMESTAMP: case BSON_INT64: p += 8; break;
      case BSON_INT32: p += 4; break;
      case BSON_OBJECTID: p += 12; break;
      case BSON_DECIMAL128: p += 16; break;
      case BSON_BOOLEAN:
        if (p < end && buf[p] > 1) bad(`boolean byte ${buf[p]} is neither 0 nor 1`);
        p += 1;
        break;
      case BSON_UNDEFINED: case BSON_NULL: case BSON_MIN_KEY: case BSON_MAX_KEY: break;
      case BSON_STRING: case BSON_CODE: case BSON_SYMBOL: p = string(buf, p, end); break;
      case BSON_DOCUMENT: case BSON_ARRAY: p += validateDocument(buf, p, end, depth + 1); break;
      case BSON_BINARY: {
        if (p + 5 > end) bad('truncated binary');
        const n = i32(buf, p);
        if (n < 0 || p + 5 + n > end) bad(`binary length ${n} runs past its document`);
        p += 5 + n;
        break;
      }
      case BSON_REGEX: p = cstring(buf, cstring(buf, p, end), end); break;
      case BSON_DBPOINTER: p = string(buf, p, end) + 12; break;
      case BSON_CODE_W_SCOPE: {
        if (p + 4 > end) bad('truncated code with scope');
        const n = i32(buf, p);
        if (n < 14 || p + n > end) bad(`code-with-scope length ${n} runs past its document`);
        const afterCode = string(buf, p + 4, p + n);
        if (afterCode + validateDocument(buf, afterCode, p + n, depth + 1) !== p + n) bad('code-with-scope length disagrees with its parts');
        p += n;
        break;
      }
      default: bad(`unknown BSON element type 0x${type.toString(16)}`);
    }
    if (p > end) bad('BSON value runs past the end of its document');
  }
  return len;
}

/** Validates a run of concatenated documents filling [off, limit) exactly (an OP_MSG document sequence). */
export function validateDocuments(buf: Uint8Array, off: number, limit: number): void {
  let p = off;
  while (p < limit) p += validateDocument(buf, p, limit);
}
