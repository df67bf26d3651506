// Key building: the command's cache identity (the normalised command), its 64-bit hash, and the
// kv key (generation prefix + hash) written into a reused buffer. Nothing here allocates per
// request.
import { BsonValue, BsonType } from "../../../sdk/assembly/bson/index";

/** Top-level fields a normalised command can have at most (more: not cached). */
const MAX_FIELDS = 32;

export const NOT_CACHEABLE = -1;

const F_OTHER = 0;
const F_IGNORED = 1;
const F_TXN = 2;
const F_TAILABLE = 3;
const F_DB = 4;

/** The normalised command, in a reused buffer; the field table of the walk is reused too. */
export class CommandKey {
  fPtr: StaticArray<u32> = new StaticArray<u32>(MAX_FIELDS);
  fLen: StaticArray<i32> = new StaticArray<i32>(MAX_FIELDS);
  fName: StaticArray<u32> = new StaticArray<u32>(MAX_FIELDS);
  fNameLen: StaticArray<i32> = new StaticArray<i32>(MAX_FIELDS);
  norm: Uint8Array = new Uint8Array(1024);
  normLen: i32 = 0;
  cur: BsonValue = new BsonValue();

  /** Writes the command's cache identity into `norm`: the database, a NUL, the command element,
   *  then every other top-level element except those that do not change the result (sessions,
   *  gossip, routing, transactions), sorted by name so field order does not matter. Returns its
   *  length, or NOT_CACHEABLE (inside a transaction, tailable, malformed, too many fields). */
  normalise(body: Uint8Array, size: i32): i32 {
    if (size < 5 || load<i32>(body.dataStart) != size) return NOT_CACHEABLE;
    const start = body.dataStart;
    const end = start + <usize>size - 1;
    const cur = this.cur;
    let p = start + 4;
    let count = 0;
    let total = 0;
    let dbPtr: usize = 0;
    let dbLen = -1;
    while (p < end) {
      if (!cur.parseAt(p, end, body)) return NOT_CACHEABLE;
      p = cur.nextPtr;
      const np = cur.namePtr;
      const nl = cur.nameLength;
      if (count > 0) {
        const c = classifyField(np, nl);
        if (c == F_TXN) return NOT_CACHEABLE;
        if (c == F_TAILABLE) { if (cur.type == BsonType.BOOL && load<u8>(cur.valuePtr) != 0) return NOT_CACHEABLE; }
        else if (c == F_DB) { if (cur.type == BsonType.STRING) { dbPtr = cur.valuePtr + 4; dbLen = load<i32>(cur.valuePtr) - 1; } continue; }
        else if (c == F_IGNORED) continue;
      }
      if (count == MAX_FIELDS) return NOT_CACHEABLE;
      // insertion sort by name (the command element stays first)
      let j = count;
      if (count > 0) while (j > 1 && nameLess(np, nl, unchecked(this.fName[j - 1]), unchecked(this.fNameLen[j - 1]))) {
        unchecked(this.fPtr[j] = this.fPtr[j - 1]); unchecked(this.fLen[j] = this.fLen[j - 1]);
        unchecked(this.fName[j] = this.fName[j - 1]); unchecked(this.fNameLen[j] = this.fNameLen[j - 1]);
        j--;
      }
      const len = cur.elementLength;
      unchecked(this.fPtr[j] = <u32>cur.elementPtr); unchecked(this.fLen[j] = len);
      unchecked(this.fName[j] = <u32>np); unchecked(this.fNameLen[j] = nl);
      count++;
      total += len;
    }
    if (dbLen < 0) return NOT_CACHEABLE;
    const normSize = dbLen + 1 + total;
    if (this.norm.length < normSize) this.norm = new Uint8Array(normSize + 256);
    let out = this.norm.dataStart;
    memory.copy(out, dbPtr, dbLen);
    out += <usize>dbLen;
    store<u8>(out++, 0);
    for (let i = 0; i < count; i++) {
      const l = unchecked(this.fLen[i]);
      memory.copy(out, <usize>unchecked(this.fPtr[i]), l);
      out += <usize>l;
    }
    this.normLen = normSize;
    return normSize;
  }
}

/** UTF-16 units of the hash at the end of a kv key. */
export const HASH_UNITS = 4;

/** The kv key `prefix` + the hash's 8 bytes as they are (HASH_UNITS UTF-16 units, any values:
 *  the host reads a key as bytes and never decodes it), in a reused buffer. Shorter than the
 *  hash as 16 hex digits, and every byte of a key costs: the host hashes, compares and copies it,
 *  and counts it in max_bytes and kv_max_bytes. */
export class KvKey {
  buf: Uint8Array = new Uint8Array(512);
  len: i32 = 0;

  build(prefix: string, hash: u64): void {
    const pl = prefix.length << 1;
    const need = pl + (HASH_UNITS << 1);
    if (this.buf.length < need) this.buf = new Uint8Array(need + 64);
    const k = this.buf.dataStart;
    memory.copy(k, changetype<usize>(prefix), pl);
    store<u64>(k + <usize>pl, hash);
    this.len = need;
  }
}

/** What a top-level field means for caching, from its UTF-8 name (no allocation). */
function classifyField(p: usize, n: i32): i32 {
  switch (n) {
    case 3: if (utf8Is(p, n, "$db")) return F_DB; break;
    case 4: if (utf8Is(p, n, "lsid")) return F_IGNORED; break;
    case 8: if (utf8Is(p, n, "tailable")) return F_TAILABLE; break;
    case 9: if (utf8Is(p, n, "txnNumber") || utf8Is(p, n, "signature")) return F_IGNORED; break;
    case 10: if (utf8Is(p, n, "autocommit")) return F_TXN; break;
    case 11: if (utf8Is(p, n, "readConcern")) return F_IGNORED; break;
    case 12: if (utf8Is(p, n, "$clusterTime")) return F_IGNORED; break;
    case 15: if (utf8Is(p, n, "$readPreference")) return F_IGNORED; break;
    case 16: if (utf8Is(p, n, "startTransaction")) return F_TXN; break;
  }
  return F_OTHER;
}

/** ASCII name at p (n bytes) equals s. */
function utf8Is(p: usize, n: i32, s: string): bool {
  if (s.length != n) return false;
  const q = changetype<usize>(s);
  for (let i = 0; i < n; i++) if (<u32>load<u8>(p + <usize>i) != <u32>load<u16>(q + (<usize>i << 1))) return false;
  return true;
}

/** Byte order of two names. */
function nameLess(a: usize, al: i32, b: usize, bl: i32): bool {
  const c = memory.compare(a, b, al < bl ? al : bl);
  return c < 0 || (c == 0 && al < bl);
}

/** A fast 64-bit hash (multiply-xorshift over 8-byte words), not cryptographic. */
export function hash64(ptr: usize, len: i32): u64 {
  const K: u64 = 0x9e3779b97f4a7c15;
  let h: u64 = 0xcbf29ce484222325 ^ (<u64>len * K);
  let i = 0;
  for (; i + 8 <= len; i += 8) {
    h = (h ^ load<u64>(ptr + <usize>i)) * K;
    h ^= h >> 29;
  }
  let tail: u64 = 0;
  for (let j = 0; i + j < len; j++) tail |= (<u64>load<u8>(ptr + <usize>(i + j))) << (<u64>(j * 8));
  h = (h ^ tail) * K;
  h ^= h >> 32;
  h *= 0xff51afd7ed558ccd;
  h ^= h >> 33;
  return h;
}
