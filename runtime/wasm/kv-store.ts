// Host-side key/value store, one per plugin name, so state survives instance rebuilds and
// pipeline reloads. Byte accounting is key (UTF-16 bytes) + value; expiry is checked lazily on
// read, and expired entries are swept when a write would exceed the cap.

interface Entry { value: Uint8Array; expiresAt: number; bytes: number }

export class KvStore {
  readonly maxBytes: number;
  private readonly map = new Map<string, Entry>();
  private used = 0;

  constructor(maxBytes: number) {
    this.maxBytes = maxBytes;
  }

  get bytesUsed(): number { return this.used; }

  get(key: string, now = performance.now()): Uint8Array | undefined {
    const e = this.map.get(key);
    if (e === undefined) return undefined;
    // An expired entry stays until a sweep (or a set of the same key, which then reuses its
    // bytes in place): absent to readers, counted in bytesUsed meanwhile.
    if (e.expiresAt !== 0 && e.expiresAt <= now) return undefined;
    return e.value;
  }

  /** Copies `value`. Returns false when the cap would be exceeded (after sweeping expired entries). */
  set(key: string, value: Uint8Array, ttlMs: number, now = performance.now()): boolean {
    const bytes = key.length * 2 + value.byteLength;
    let cur = this.map.get(key);
    if (this.used + bytes - (cur === undefined ? 0 : cur.bytes) > this.maxBytes) {
      this.sweep(now);
      cur = this.map.get(key);
      if (this.used + bytes - (cur === undefined ? 0 : cur.bytes) > this.maxBytes) return false;
    }
    const expiresAt = ttlMs > 0 ? now + ttlMs : 0;
    if (cur !== undefined) {
      if (cur.value.length === value.length) {
        // Same size (a counter, a bucket, a version, a re-stored entry): overwrite in place, no
        // allocation. Readers copy values out at once (into plugin memory or through jco).
        cur.value.set(value);
        cur.expiresAt = expiresAt;
        return true;
      }
      this.used -= cur.bytes;
      cur.value = value.slice();
      cur.expiresAt = expiresAt;
      cur.bytes = bytes;
    } else {
      this.map.set(key, { value: value.slice(), expiresAt, bytes });
    }
    this.used += bytes;
    return true;
  }

  /** Removes the key; true when it was present (not expired). */
  delete(key: string, now = performance.now()): boolean {
    const e = this.map.get(key);
    if (e === undefined) return false;
    this.drop(key, e);
    return e.expiresAt === 0 || e.expiresAt > now;
  }

  sweep(now = performance.now()): void {
    for (const [k, e] of this.map) if (e.expiresAt !== 0 && e.expiresAt <= now) this.drop(k, e);
  }

  clear(): void { this.map.clear(); this.used = 0; }

  private drop(key: string, e: Entry): void {
    this.map.delete(key);
    this.used -= e.bytes;
  }
}

/** Default per-plugin cap. */
export const DEFAULT_KV_MAX_BYTES = 1 << 20;

const stores = new Map<string, KvStore>();

/** The store of plugin `name` (created on first use; its cap is fixed by the first caller). */
export function kvStoreFor(name: string, maxBytes = DEFAULT_KV_MAX_BYTES): KvStore {
  let s = stores.get(name);
  if (s === undefined) {
    s = new KvStore(maxBytes);
    stores.set(name, s);
  }
  return s;
}
