// SHA-256 (FIPS 180-4), HMAC-SHA256 (RFC 2104) and base64url (RFC 4648 §5) for the hmac_jwt
// provider; the cache step reuses sha256 for its keys. Checked against the FIPS/RFC 4231 test
// vectors in test/plugins/auth.test.ts (through the plugin's `selftest` config).

const K: StaticArray<u32> = [
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
  0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
  0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
  0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
  0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
  0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
  0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
  0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
];

const W = new StaticArray<u32>(64);
const H = new StaticArray<u32>(8);

function compress(block: usize): void {
  for (let t = 0; t < 16; t++) unchecked(W[t] = bswap<u32>(load<u32>(block + (<usize>t << 2))));
  for (let t = 16; t < 64; t++) {
    const w15 = unchecked(W[t - 15]);
    const w2 = unchecked(W[t - 2]);
    const s0 = rotr<u32>(w15, 7) ^ rotr<u32>(w15, 18) ^ (w15 >>> 3);
    const s1 = rotr<u32>(w2, 17) ^ rotr<u32>(w2, 19) ^ (w2 >>> 10);
    unchecked(W[t] = unchecked(W[t - 16]) + s0 + unchecked(W[t - 7]) + s1);
  }
  let a = unchecked(H[0]), b = unchecked(H[1]), c = unchecked(H[2]), d = unchecked(H[3]);
  let e = unchecked(H[4]), f = unchecked(H[5]), g = unchecked(H[6]), h = unchecked(H[7]);
  for (let t = 0; t < 64; t++) {
    const S1 = rotr<u32>(e, 6) ^ rotr<u32>(e, 11) ^ rotr<u32>(e, 25);
    const ch = (e & f) ^ (~e & g);
    const t1 = h + S1 + ch + unchecked(K[t]) + unchecked(W[t]);
    const S0 = rotr<u32>(a, 2) ^ rotr<u32>(a, 13) ^ rotr<u32>(a, 22);
    const maj = (a & b) ^ (a & c) ^ (b & c);
    const t2 = S0 + maj;
    h = g; g = f; f = e; e = d + t1; d = c; c = b; b = a; a = t1 + t2;
  }
  unchecked(H[0] = H[0] + a); unchecked(H[1] = H[1] + b); unchecked(H[2] = H[2] + c); unchecked(H[3] = H[3] + d);
  unchecked(H[4] = H[4] + e); unchecked(H[5] = H[5] + f); unchecked(H[6] = H[6] + g); unchecked(H[7] = H[7] + h);
}

const tail = new StaticArray<u8>(128);

/** SHA-256 of `len` bytes at `ptr` into a new 32-byte array. */
export function sha256Ptr(ptr: usize, len: i32): Uint8Array {
  H[0] = 0x6a09e667; H[1] = 0xbb67ae85; H[2] = 0x3c6ef372; H[3] = 0xa54ff53a;
  H[4] = 0x510e527f; H[5] = 0x9b05688c; H[6] = 0x1f83d9ab; H[7] = 0x5be0cd19;
  const full = len & ~63;
  for (let off = 0; off < full; off += 64) compress(ptr + <usize>off);
  const rest = len - full;
  const tp = changetype<usize>(tail);
  memory.fill(tp, 0, 128);
  memory.copy(tp, ptr + <usize>full, <usize>rest);
  store<u8>(tp + <usize>rest, 0x80);
  const tailLen = rest + 9 <= 64 ? 64 : 128;
  const bits = <u64>len << 3;
  store<u64>(tp + <usize>tailLen - 8, bswap<u64>(bits));
  compress(tp);
  if (tailLen == 128) compress(tp + 64);
  const out = new Uint8Array(32);
  for (let i = 0; i < 8; i++) store<u32>(out.dataStart + (<usize>i << 2), bswap<u32>(unchecked(H[i])));
  return out;
}

export function sha256(data: Uint8Array): Uint8Array { return sha256Ptr(data.dataStart, data.length); }

/** HMAC-SHA256(key, message). */
export function hmacSha256(key: Uint8Array, msg: Uint8Array): Uint8Array {
  let k = key;
  if (k.length > 64) k = sha256(k);
  const inner = new Uint8Array(64 + msg.length);
  const outer = new Uint8Array(64 + 32);
  for (let i = 0; i < 64; i++) {
    const b: u8 = i < k.length ? k[i] : 0;
    inner[i] = b ^ 0x36;
    outer[i] = b ^ 0x5c;
  }
  inner.set(msg, 64);
  outer.set(sha256(inner), 64);
  return sha256(outer);
}

/** UTF-8 bytes of a string. */
export function utf8(s: string): Uint8Array { return Uint8Array.wrap(String.UTF8.encode(s)); }

const HEX = "0123456789abcdef";
export function toHex(b: Uint8Array): string {
  let out = "";
  for (let i = 0; i < b.length; i++) { out += HEX.charAt(b[i] >> 4); out += HEX.charAt(b[i] & 15); }
  return out;
}

/** Constant-time comparison (same length required). */
export function equalBytes(a: Uint8Array, b: Uint8Array): bool {
  if (a.length != b.length) return false;
  let d: u32 = 0;
  for (let i = 0; i < a.length; i++) d |= <u32>(a[i] ^ b[i]);
  return d == 0;
}

function b64val(c: i32): i32 {
  if (c >= 0x41 && c <= 0x5a) return c - 0x41;
  if (c >= 0x61 && c <= 0x7a) return c - 0x61 + 26;
  if (c >= 0x30 && c <= 0x39) return c - 0x30 + 52;
  if (c == 0x2d) return 62; // -
  if (c == 0x5f) return 63; // _
  return -1;
}

/** Decodes unpadded base64url (RFC 7515 §2); null on a bad character or length. */
export function base64UrlDecode(s: string, from: i32, to: i32): Uint8Array | null {
  const n = to - from;
  if (n % 4 == 1) return null;
  const out = new Uint8Array((n * 3) >> 2);
  let acc: u32 = 0, bits = 0, o = 0;
  for (let i = from; i < to; i++) {
    const v = b64val(s.charCodeAt(i));
    if (v < 0) return null;
    acc = (acc << 6) | <u32>v;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out[o++] = <u8>((acc >> bits) & 0xff);
    }
  }
  return out;
}
