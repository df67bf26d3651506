// The eviction ledger: a FIFO of the entries this instance stored, to keep them within
// max_bytes. All entries share one TTL, so insertion order is expiry order; an entry's kv key is
// rebuilt from its prefix and hash when it must be removed. It lives in plugin memory: after an
// instance rebuild, older entries are only reclaimed by their TTL.
import { nowNs, Gauge, Counter } from "../../../sdk/assembly/index";
import { proxy_kv_set, proxy_kv_delete } from "../../../sdk/assembly/host";
import { KvKey } from "./key";

export class Ledger {
  maxBytes: i64 = 1 << 20;
  ttlMs: i32 = 60000;
  lPrefix: Array<string | null> = [];
  lHash: u64[] = [];
  lBytes: i32[] = [];
  lExp: i64[] = [];
  lHead: i32 = 0;
  used: i64 = 0;
  stores: Counter | null = null;
  bytes: Gauge | null = null;

  /** Stores entry[0, len) under prefix + hash (built into `key`), evicting the oldest entries to
   *  stay within maxBytes; skipped when the host refuses it even with nothing left to evict. */
  store(prefix: string, hash: u64, entry: usize, len: i32, key: KvKey): void {
    const now = nowNs();
    // drop ledger entries that have expired in the host store
    while (this.lHead < this.lPrefix.length && unchecked(this.lExp[this.lHead]) <= now) this.dropHead(false, key);
    const size = ((prefix.length + 16) << 1) + len;
    while (this.used + size > this.maxBytes && this.evictOne(key)) {}
    if (this.used + size > this.maxBytes) return;
    for (;;) {
      key.build(prefix, hash); // (evictOne reuses the key buffer)
      if (proxy_kv_set(key.buf.dataStart, key.len, entry, len, this.ttlMs) == 0) break;
      if (!this.evictOne(key)) return; // host cap (kv_max_bytes) reached: skip
    }
    this.lPrefix.push(prefix);
    this.lHash.push(hash);
    this.lBytes.push(size);
    this.lExp.push(now + <i64>this.ttlMs * 1000000);
    this.used += size;
    this.stores!.inc();
    this.bytes!.set(<f64>this.used);
    if (this.lHead > 1024 && this.lHead * 2 > this.lPrefix.length) this.compact();
  }

  /** Removes the oldest entry (its kv key is built into `key`); false when there is none. */
  evictOne(key: KvKey): bool {
    if (this.lHead >= this.lPrefix.length) return false;
    this.dropHead(true, key);
    return true;
  }

  dropHead(remove: bool, key: KvKey): void {
    const i = this.lHead;
    if (remove) {
      key.build(this.lPrefix[i]!, this.lHash[i]);
      proxy_kv_delete(key.buf.dataStart, key.len);
    }
    this.used -= this.lBytes[i];
    this.lPrefix[i] = null;
    this.lHead++;
    if (remove) this.bytes!.set(<f64>this.used);
  }

  compact(): void {
    this.lPrefix = this.lPrefix.slice(this.lHead);
    this.lHash = this.lHash.slice(this.lHead);
    this.lBytes = this.lBytes.slice(this.lHead);
    this.lExp = this.lExp.slice(this.lHead);
    this.lHead = 0;
  }
}
