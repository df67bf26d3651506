// Entry encoding: a stored entry is [u32 length of the normalised command][normalised command]
// [reply without $clusterTime and operationTime], built in and fetched into one reused buffer.
// The kv key is a 64-bit hash, so a hit counts only when the stored command is byte-for-byte the
// one looked up.
import { kv } from "../../../sdk/assembly/index";
import { BsonValue, BsonType } from "../../../sdk/assembly/bson/index";
import { KvKey } from "./key";

export class EntryBuffer {
  buf: Uint8Array = new Uint8Array(4096);
  cur: BsonValue = new BsonValue();
  inner: BsonValue = new BsonValue();

  /** kv value of `key` into `buf` (grown when larger); its length, or -1 when absent. */
  fetch(key: KvKey): i32 {
    let n = kv.getIntoUtf16(key.buf, key.len, this.buf);
    if (n > this.buf.length) {
      this.buf = new Uint8Array(n);
      n = kv.getIntoUtf16(key.buf, key.len, this.buf);
    }
    return n;
  }

  /** Where the reply of the fetched entry (`len` bytes) starts, when the entry was stored for
   *  the normalised command norm[0, n); 0 otherwise. */
  replyFor(len: i32, norm: usize, n: i32): usize {
    if (len < 4) return 0;
    const e = this.buf.dataStart;
    const m = load<u32>(e);
    if (<i32>m == n && <i32>m + 4 <= len && memory.compare(e + 4, norm, n) == 0) return e + 4 + <usize>m;
    return 0;
  }

  /** The entry for normalised command norm[0, n) and `reply` into `buf`; its length, or 0 when
   *  the reply must not be cached (not `ok: 1`, open cursor, larger than maxEntry, malformed).
   *  `ok` is read on the way, as the host reads it (the last top-level `ok` that is not a
   *  document; 1 as a number or `true`), so the step need not ask the host for it. */
  build(reply: Uint8Array, size: i32, norm: Uint8Array, n: i32, maxEntry: i32): i32 {
    if (size < 5 || load<i32>(reply.dataStart) != size) return 0;
    const start = reply.dataStart;
    const end = start + <usize>size - 1;
    const need = 4 + n + size;
    if (size > maxEntry + 64) return 0;
    if (this.buf.length < need) this.buf = new Uint8Array(need + 1024);
    const e = this.buf.dataStart;
    store<u32>(e, <u32>n);
    memory.copy(e + 4, norm.dataStart, n);
    const docStart = e + 4 + <usize>n;
    let out = docStart + 4;
    const cur = this.cur;
    let q = start + 4;
    let ok = false;
    while (q < end) {
      if (!cur.parseAt(q, end, reply)) return 0;
      q = cur.nextPtr;
      const nl = cur.nameLength;
      if (nl == 2 && load<u16>(cur.namePtr) == OK_NAME && cur.type != BsonType.DOCUMENT) ok = isOne(cur);
      if ((nl == 12 && cur.nameEquals("$clusterTime")) || (nl == 13 && cur.nameEquals("operationTime"))) continue;
      if (nl == 6 && cur.type == BsonType.DOCUMENT && cur.nameEquals("cursor") && !cursorDone(cur, this.inner)) return 0;
      const len = cur.elementLength;
      memory.copy(out, cur.elementPtr, len);
      out += <usize>len;
    }
    if (!ok) return 0;
    store<u8>(out++, 0);
    const docLen = <i32>(out - docStart);
    if (docLen > maxEntry) return 0;
    store<i32>(docStart, docLen);
    return <i32>(out - e);
  }
}

/** "ok" as the u16 its two UTF-8 bytes load as (little-endian). */
const OK_NAME: u16 = 0x6b6f;

/** The value is 1 as the host's status peek counts it: int32, int64 or double 1, or a boolean byte of 1. */
function isOne(v: BsonValue): bool {
  const t = v.type;
  if (t == BsonType.INT32) return load<i32>(v.valuePtr) == 1;
  if (t == BsonType.INT64) return load<i64>(v.valuePtr) == 1;
  if (t == BsonType.DOUBLE) return load<f64>(v.valuePtr) == 1;
  if (t == BsonType.BOOL) return load<u8>(v.valuePtr) == 1;
  return false;
}

/** A `cursor` sub-document whose `id` is 0 (the result is complete). */
function cursorDone(cur: BsonValue, inner: BsonValue): bool {
  const start = cur.valuePtr;
  const end = start + <usize>cur.valueLength - 1;
  let q = start + 4;
  while (q < end) {
    if (!inner.parseAt(q, end, cur.owner)) return false;
    q = inner.nextPtr;
    if (!inner.nameEquals("id")) continue;
    if (inner.type == BsonType.INT64) return load<i64>(inner.valuePtr) == 0;
    if (inner.type == BsonType.INT32) return load<i32>(inner.valuePtr) == 0;
    if (inner.type == BsonType.DOUBLE) return load<f64>(inner.valuePtr) == 0;
    return false;
  }
  return true;
}
