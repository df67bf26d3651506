// The eviction ledger: a FIFO of the entries this instance stored, to keep them within
// max_bytes. All entries share one TTL, so insertion order is expiry order; an entry's kv key is
// rebuilt from its prefix and hash when it must be removed.
//
// A ring buffer (power-of-two capacity, doubled when full, never compacted): every operation is
// O(1), and a full cache that keeps evicting allocates nothing. It takes 24 bytes of plugin
// memory per entry (a million entries: 24 MiB, 48 MiB while doubling; see the step's
// max_memory_pages). After an instance rebuild, the entries stored before are left to their TTL
// and to the host store's own LRU eviction.
import { nowNs, Gauge, Counter } from "../../../sdk/assembly/index";
import { proxy_kv_set, proxy_kv_delete } from "../../../sdk/assembly/host";
import { KvKey } from "./key";

const INITIAL = 1024;

export class Ledger {
  maxBytes: i64 = 1 << 20;
  ttlMs: i32 = 60000;
  /** Ring of entries, oldest at `head`; `count` of them in use. */
  prefix: StaticArray<string | null> = new StaticArray<string | null>(INITIAL);
  hash: StaticArray<u64> = new StaticArray<u64>(INITIAL);
  size: StaticArray<i32> = new StaticArray<i32>(INITIAL);
  expires: StaticArray<i64> = new StaticArray<i64>(INITIAL);
  mask: i32 = INITIAL - 1;
  head: i32 = 0;
  count: i32 = 0;
  used: i64 = 0;
  stores: Counter | null = null;
  bytes: Gauge | null = null;

  /** Stores entry[0, len) under prefix + hash (built into `key`), evicting the oldest entries to
   *  stay within maxBytes; skipped when the host refuses it even with nothing left to evict. */
  store(prefix: string, hash: u64, entry: usize, len: i32, key: KvKey): void {
    const now = nowNs();
    // drop ledger entries that have expired in the host store
    while (this.count > 0 && unchecked(this.expires[this.head]) <= now) this.dropHead(false, key);
    const size = ((prefix.length + 16) << 1) + len;
    while (this.used + size > this.maxBytes && this.evictOne(key)) {}
    if (this.used + size > this.maxBytes) return;
    for (;;) {
      key.build(prefix, hash); // (evictOne reuses the key buffer)
      if (proxy_kv_set(key.buf.dataStart, key.len, entry, len, this.ttlMs) == 0) break;
      if (!this.evictOne(key)) return; // host cap (kv_max_bytes) reached: skip
    }
    if (this.count > this.mask) this.grow();
    const i = (this.head + this.count) & this.mask;
    unchecked(this.prefix[i] = prefix);
    unchecked(this.hash[i] = hash);
    unchecked(this.size[i] = size);
    unchecked(this.expires[i] = now + <i64>this.ttlMs * 1000000);
    this.count++;
    this.used += size;
    this.stores!.inc();
    this.bytes!.set(<f64>this.used);
  }

  /** Removes the oldest entry (its kv key is built into `key`); false when there is none. */
  evictOne(key: KvKey): bool {
    if (this.count == 0) return false;
    this.dropHead(true, key);
    return true;
  }

  dropHead(remove: bool, key: KvKey): void {
    const i = this.head;
    if (remove) {
      key.build(unchecked(this.prefix[i])!, unchecked(this.hash[i]));
      proxy_kv_delete(key.buf.dataStart, key.len);
    }
    this.used -= unchecked(this.size[i]);
    unchecked(this.prefix[i] = null);
    this.head = (i + 1) & this.mask;
    this.count--;
    if (remove) this.bytes!.set(<f64>this.used);
  }

  /** Doubles the ring, the oldest entry moving to index 0. */
  grow(): void {
    const cap = (this.mask + 1) << 1;
    const prefix = new StaticArray<string | null>(cap);
    const hash = new StaticArray<u64>(cap);
    const size = new StaticArray<i32>(cap);
    const expires = new StaticArray<i64>(cap);
    for (let k = 0; k < this.count; k++) {
      const i = (this.head + k) & this.mask;
      unchecked(prefix[k] = this.prefix[i]);
      unchecked(hash[k] = this.hash[i]);
      unchecked(size[k] = this.size[i]);
      unchecked(expires[k] = this.expires[i]);
    }
    this.prefix = prefix;
    this.hash = hash;
    this.size = size;
    this.expires = expires;
    this.mask = cap - 1;
    this.head = 0;
  }
}
