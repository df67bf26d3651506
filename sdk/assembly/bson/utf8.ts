// UTF-8 helpers that compare or encode parts of AssemblyScript (UTF-16) strings without allocating.

/** Decodes the code point of `s` at UTF-16 index `i` (a lone surrogate stays as it is, like WTF-8). */
// @ts-ignore: decorator
@inline
function codePointAt(s: string, i: i32, end: i32): u32 {
  const c = <u32>s.charCodeAt(i);
  if (c >= 0xd800 && c < 0xdc00 && i + 1 < end) {
    const d = <u32>s.charCodeAt(i + 1);
    if (d >= 0xdc00 && d < 0xe000) return 0x10000 + ((c - 0xd800) << 10) + (d - 0xdc00);
  }
  return c;
}

/** Number of UTF-8 bytes that encode `s[from, to)` (WTF-8 for lone surrogates). */
export function utf8LengthRange(s: string, from: i32, to: i32): i32 {
  let n = 0;
  let i = from;
  while (i < to) {
    const cp = codePointAt(s, i, to);
    if (cp < 0x80) n += 1;
    else if (cp < 0x800) n += 2;
    else if (cp < 0x10000) n += 3;
    else { n += 4; i++; }
    i++;
  }
  return n;
}

/** Writes the UTF-8 encoding of `s[from, to)` at `dst`; returns the number of bytes written. */
export function utf8EncodeRange(s: string, from: i32, to: i32, dst: usize): i32 {
  let p = dst;
  let i = from;
  while (i < to) {
    const cp = codePointAt(s, i, to);
    if (cp < 0x80) {
      store<u8>(p++, <u8>cp);
    } else if (cp < 0x800) {
      store<u8>(p++, <u8>(0xc0 | (cp >> 6)));
      store<u8>(p++, <u8>(0x80 | (cp & 0x3f)));
    } else if (cp < 0x10000) {
      store<u8>(p++, <u8>(0xe0 | (cp >> 12)));
      store<u8>(p++, <u8>(0x80 | ((cp >> 6) & 0x3f)));
      store<u8>(p++, <u8>(0x80 | (cp & 0x3f)));
    } else {
      store<u8>(p++, <u8>(0xf0 | (cp >> 18)));
      store<u8>(p++, <u8>(0x80 | ((cp >> 12) & 0x3f)));
      store<u8>(p++, <u8>(0x80 | ((cp >> 6) & 0x3f)));
      store<u8>(p++, <u8>(0x80 | (cp & 0x3f)));
      i++;
    }
    i++;
  }
  return <i32>(p - dst);
}

/**
 * True when the `len` UTF-8 bytes at `ptr` encode exactly `s[from, to)`. Allocation-free: the
 * string is encoded on the fly and compared byte by byte, stopping at the first difference.
 */
export function utf8EqualsRange(ptr: usize, len: i32, s: string, from: i32, to: i32): bool {
  // Every UTF-16 unit is at least one UTF-8 byte: fewer bytes than units cannot match.
  if (len < to - from) return false;
  let p = ptr;
  const end = ptr + <usize>len;
  let i = from;
  // Fast path: ASCII units compared with bytes directly until a non-ASCII unit shows up.
  const sp = changetype<usize>(s);
  while (i < to) {
    const c = <u32>load<u16>(sp + (<usize>i << 1));
    if (c >= 0x80) break;
    if (p >= end || <u32>load<u8>(p) != c) return false;
    p += 1;
    i++;
  }
  while (i < to) {
    const cp = codePointAt(s, i, to);
    if (cp < 0x80) {
      if (p >= end || <u32>load<u8>(p) != cp) return false;
      p += 1;
    } else if (cp < 0x800) {
      if (p + 2 > end) return false;
      if (<u32>load<u8>(p) != (0xc0 | (cp >> 6)) || <u32>load<u8>(p + 1) != (0x80 | (cp & 0x3f))) return false;
      p += 2;
    } else if (cp < 0x10000) {
      if (p + 3 > end) return false;
      if (<u32>load<u8>(p) != (0xe0 | (cp >> 12)) ||
          <u32>load<u8>(p + 1) != (0x80 | ((cp >> 6) & 0x3f)) ||
          <u32>load<u8>(p + 2) != (0x80 | (cp & 0x3f))) return false;
      p += 3;
    } else {
      if (p + 4 > end) return false;
      if (<u32>load<u8>(p) != (0xf0 | (cp >> 18)) ||
          <u32>load<u8>(p + 1) != (0x80 | ((cp >> 12) & 0x3f)) ||
          <u32>load<u8>(p + 2) != (0x80 | ((cp >> 6) & 0x3f)) ||
          <u32>load<u8>(p + 3) != (0x80 | (cp & 0x3f))) return false;
      p += 4;
      i++;
    }
    i++;
  }
  return p == end;
}

/** True when two byte ranges are equal. */
export function bytesEqual(a: usize, aLen: i32, b: usize, bLen: i32): bool {
  if (aLen != bLen) return false;
  return memory.compare(a, b, <usize>aLen) == 0;
}

/** Parses `s[from, to)` as a non-negative decimal index; -1 when it is not one (or too large). */
export function parseIndex(s: string, from: i32, to: i32): i32 {
  if (from >= to || to - from > 9) return -1;
  if (to - from > 1 && s.charCodeAt(from) == 0x30) return -1; // no leading zeros ("01")
  let n = 0;
  for (let i = from; i < to; i++) {
    const c = s.charCodeAt(i) - 0x30;
    if (<u32>c > 9) return -1;
    n = n * 10 + c;
  }
  return n;
}

const HEX = "0123456789abcdef";

/** Lower-case hex of `len` bytes at `ptr`. */
export function hexOf(ptr: usize, len: i32): string {
  let out = "";
  // Build through a UTF-16 buffer to avoid quadratic concatenation.
  const buf = new StaticArray<u16>(len << 1);
  for (let i = 0; i < len; i++) {
    const b = <i32>load<u8>(ptr + <usize>i);
    unchecked(buf[i << 1] = <u16>HEX.charCodeAt(b >> 4));
    unchecked(buf[(i << 1) + 1] = <u16>HEX.charCodeAt(b & 15));
  }
  out = String.UTF16.decodeUnsafe(changetype<usize>(buf), <usize>(len << 2));
  return out;
}
