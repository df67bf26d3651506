// The eviction ledger: a FIFO of the entries this instance stored, to keep them within
// max_bytes. All entries share one TTL, so insertion order is expiry order; an entry's kv key is
// rebuilt from its prefix and hash when it must be removed.
//
// A queue of fixed-size chunks (4,096 entries, 96 KiB each): every operation is O(1), a full cache
// that keeps evicting allocates nothing (the chunk the head leaves is reused at the tail), and
// the memory is 24 bytes per entry held. Chunks of one size, rather than arrays doubled when
// full, because the allocator cannot reuse the smaller blocks a doubling frees for the larger
// ones: a doubled ring took about four times its size (a million entries overran 64 MiB).
// After an instance rebuild, the entries stored before are left to their TTL and to the host
// store's own LRU eviction.
//
// A delete that finds its key gone means the host store evicted it: its own cap (kv_max_bytes,
// below max_bytes) binds first and its LRU already drops entries as new ones come. From then on
// the entries this ledger drops to stay within max_bytes leave its accounting without a delete:
// most are gone already, and deleting one whose key was stored again since (a miss for a key the
// host evicted) would drop the newer entry. One drop in PROBE_EVERY still deletes: when that
// delete finds its key, the host no longer evicts on its own (another instance sharing the store
// during a reload had deleted keys first, or kv_max_bytes was raised) and every drop deletes
// again, so max_bytes binds as before with at most PROBE_EVERY - 1 entries left to their TTL.
// Deletes to make room the host refused (a counter, an entry it would not admit) always happen.
//
// When max_bytes is at or above the store's cap (kv_max_bytes; the defaults are equal), the host's
// cap binds before the ledger's budget can: the host holds the generation counters too, and it
// evicts its least recently used keys as each entry comes. The ledger then never deletes
// (hostBound): it only keeps its accounting, and each store costs one host call rather than a
// delete of the oldest key plus the store (0.16 µs less per store into a full 16 MiB store:
// bench/cache-full.ts --sizes 16m-16m). Eviction is then least recently used, not oldest first:
// a hit keeps an entry.
import { nowNs, kv, Gauge, Counter } from "../../../sdk/assembly/index";
import { KvKey, HASH_UNITS } from "./key";

const CHUNK_BITS = 12;
const CHUNK = 1 << CHUNK_BITS;
/** While the host store evicts on its own, one drop in this many still deletes (a power of two). */
const PROBE_EVERY = 64;
/** Emptied chunks kept for reuse (beyond these, they are left to the collector). */
const MAX_SPARE = 4;

class Chunk {
  prefix: StaticArray<string | null> = new StaticArray<string | null>(CHUNK);
  hash: StaticArray<u64> = new StaticArray<u64>(CHUNK);
  size: StaticArray<i32> = new StaticArray<i32>(CHUNK);
  expires: StaticArray<i64> = new StaticArray<i64>(CHUNK);
}

export class Ledger {
  maxBytes: i64 = 1 << 20;
  ttlMs: i32 = 60000;
  /** The queue: entry k (0 = oldest) is at chunks[(head + k) >> CHUNK_BITS], index (head + k) & (CHUNK - 1). */
  chunks: Chunk[] = [];
  spare: Chunk[] = [];
  head: i32 = 0;
  count: i32 = 0;
  used: i64 = 0;
  stores: Counter | null = null;
  bytes: Gauge | null = null;
  /** Whether the last delete found its key gone: the host store evicts on its own (see the top). */
  hostEvicts: bool = false;
  /** Drops without a delete since the last probe. */
  skipped: i32 = 0;
  /** max_bytes ≥ the host store's cap: the host evicts, the ledger never deletes (see the top). */
  hostBound: bool = false;
  /** The host store's cap (kv_max_bytes), when hostBound: the gauge never reports more. */
  hostCap: i64 = 0;

  /** Stores entry[0, len) under prefix + hash (built into `key`), evicting the oldest entries to
   *  stay within maxBytes; skipped when the host refuses it even with nothing left to evict. */
  store(prefix: string, hash: u64, entry: usize, len: i32, key: KvKey): void {
    const now = nowNs();
    // drop ledger entries that have expired in the host store
    while (this.count > 0 && unchecked(unchecked(this.chunks[0]).expires[this.head]) <= now) this.dropHead(false, key);
    const size = ((prefix.length + HASH_UNITS) << 1) + len; // the kv key's bytes + the entry
    // (the gauge is set once, below, however many entries go)
    const bound = this.hostBound;
    while (this.used + size > this.maxBytes && this.count > 0) this.dropHead(!bound && (!this.hostEvicts || (++this.skipped & (PROBE_EVERY - 1)) == 0), key);
    if (this.used + size > this.maxBytes) { this.setGauge(); return; }
    for (;;) {
      key.build(prefix, hash); // (removeOldest reuses the key buffer)
      if (kv.setUtf16(key.buf, key.len, entry, len, this.ttlMs)) break;
      // Refused: the entry alone is above the host's cap (when hostBound, deleting others cannot help).
      if (bound || !this.removeOldest(key)) { this.setGauge(); return; }
    }
    const at = this.head + this.count;
    const ci = at >> CHUNK_BITS;
    if (ci == this.chunks.length) this.chunks.push(this.spare.length > 0 ? this.spare.pop() : new Chunk());
    const c = unchecked(this.chunks[ci]);
    const i = at & (CHUNK - 1);
    unchecked(c.prefix[i] = prefix);
    unchecked(c.hash[i] = hash);
    unchecked(c.size[i] = size);
    unchecked(c.expires[i] = now + <i64>this.ttlMs * 1000000);
    this.count++;
    this.used += size;
    this.stores!.inc();
    this.setGauge();
  }

  /** proxy_plugin_cache_bytes: the bytes of the entries held (when hostBound, at most the host's cap). */
  setGauge(): void {
    const used = this.used;
    this.bytes!.set(<f64>(this.hostBound && used > this.hostCap ? this.hostCap : used));
  }

  /** Removes the oldest entry (its kv key is built into `key`); false when there is none. */
  evictOne(key: KvKey): bool {
    if (this.hostBound || !this.removeOldest(key)) return false;
    this.setGauge();
    return true;
  }

  /** evictOne without setting the gauge (store sets it once for all it evicts). */
  removeOldest(key: KvKey): bool {
    if (this.count == 0) return false;
    this.dropHead(true, key);
    return true;
  }

  dropHead(remove: bool, key: KvKey): void {
    const c = unchecked(this.chunks[0]);
    const i = this.head;
    if (remove) {
      key.build(unchecked(c.prefix[i])!, unchecked(c.hash[i]));
      this.hostEvicts = !kv.removeUtf16(key.buf, key.len);
    }
    this.used -= unchecked(c.size[i]);
    unchecked(c.prefix[i] = null);
    this.count--;
    if (++this.head == CHUNK) {
      // the oldest chunk is done: recycle it
      this.chunks.shift();
      if (this.spare.length < MAX_SPARE) this.spare.push(c);
      this.head = 0;
    } else if (this.count == 0) {
      this.head = 0;
    }
  }
}
