// Host-side key/value store, one per plugin name, so state survives instance rebuilds and
// pipeline reloads. Byte accounting is key (UTF-16 bytes) + value.
//
// A full store evicts the least recently used entries and admits the new one: every operation is
// O(1) (a Map lookup plus a few pointer writes in an intrusive doubly-linked list ordered by
// use), whatever the number of entries. get() and set() mark an entry used; an expired entry is
// absent to readers and is dropped when it reaches the LRU end, when its key is written again
// (which reuses it), or by delete()/sweep(). Nothing scans the store on the hot path.
//
// Why not `lru-cache`: measured with the same operations (bench/RESULTS.md, "Cache when full"),
// this list is faster on get and set, and the store needs what lru-cache does not give in one
// call: a caller-supplied clock (tests and the plugin host pass `now`), expired entries kept for
// in-place reuse, and the same-size overwrite without re-accounting.

/** One entry, also a node of the use-ordered list (the sentinel is one too: a single shape). */
class Entry {
  key: string;
  value: Uint8Array;
  /** performance.now() ms at which the entry expires; 0 = never. */
  expiresAt: number;
  bytes: number;
  /** Neighbour towards the most recently used end (the MRU entry's is the sentinel). */
  prev: Entry;
  /** Neighbour towards the least recently used end (the LRU entry's is the sentinel). */
  next: Entry;

  constructor(key: string, value: Uint8Array, expiresAt: number, bytes: number) {
    this.key = key;
    this.value = value;
    this.expiresAt = expiresAt;
    this.bytes = bytes;
    this.prev = this;
    this.next = this;
  }
}

const EMPTY = new Uint8Array(0);

export class KvStore {
  readonly maxBytes: number;
  private readonly map = new Map<string, Entry>();
  /** Circular list: head.next is the most recently used entry, head.prev the least. */
  private readonly head = new Entry('', EMPTY, 0, 0);
  private used = 0;
  private evicted = 0;

  constructor(maxBytes: number) {
    this.maxBytes = maxBytes;
  }

  get bytesUsed(): number { return this.used; }

  /** Entries held, expired ones not yet dropped included. */
  get size(): number { return this.map.size; }

  /** Entries removed to make room since the store was created. */
  get evictions(): number { return this.evicted; }

  get(key: string, now = performance.now()): Uint8Array | undefined {
    const e = this.map.get(key);
    if (e === undefined) return undefined;
    // Expired: absent to readers. It stays (unmoved, so it drifts to the LRU end) because the
    // usual next call is a set of the same key, which then reuses it in place.
    if (e.expiresAt !== 0 && e.expiresAt <= now) return undefined;
    if (this.head.next !== e) this.toFront(e);
    return e.value;
  }

  /**
   * Copies `value`. Evicts least recently used entries until it fits; returns false (and changes
   * nothing) only when key + value alone exceed the cap.
   */
  set(key: string, value: Uint8Array, ttlMs: number, now = performance.now()): boolean {
    const bytes = key.length * 2 + value.byteLength;
    if (bytes > this.maxBytes) return false;
    const expiresAt = ttlMs > 0 ? now + ttlMs : 0;
    const cur = this.map.get(key);
    if (cur !== undefined) {
      if (cur.value.length === value.length) {
        // Same size (a counter, a bucket, a version, a re-stored entry): overwrite in place, no
        // allocation, no accounting. Readers copy values out at once (into plugin memory or
        // through jco), so nobody holds the old bytes.
        cur.value.set(value);
        cur.expiresAt = expiresAt;
        if (this.head.next !== cur) this.toFront(cur);
        return true;
      }
      // Replaced by a value of another size: out of the list while room is made, so eviction
      // never picks the entry being written.
      this.unlink(cur);
      this.used -= cur.bytes;
      this.makeRoom(bytes);
      cur.value = value.slice();
      cur.expiresAt = expiresAt;
      cur.bytes = bytes;
      this.linkFront(cur);
    } else {
      this.makeRoom(bytes);
      const e = new Entry(key, value.slice(), expiresAt, bytes);
      this.map.set(key, e);
      this.linkFront(e);
    }
    this.used += bytes;
    return true;
  }

  /** Removes the key; true when it was present (not expired). */
  delete(key: string, now = performance.now()): boolean {
    const e = this.map.get(key);
    if (e === undefined) return false;
    this.drop(e);
    return e.expiresAt === 0 || e.expiresAt > now;
  }

  /** Drops every expired entry: a full scan, for maintenance and tests, never on the hot path. */
  sweep(now = performance.now()): void {
    const head = this.head;
    for (let e = head.next; e !== head;) {
      const next = e.next;
      if (e.expiresAt !== 0 && e.expiresAt <= now) this.drop(e);
      e = next;
    }
  }

  clear(): void {
    this.map.clear();
    this.head.next = this.head;
    this.head.prev = this.head;
    this.used = 0;
  }

  /** Evicts from the LRU end (expired entries are there first, being unused) until `bytes` fit. */
  private makeRoom(bytes: number): void {
    const head = this.head;
    while (this.used + bytes > this.maxBytes) {
      const lru = head.prev;
      if (lru === head) return; // empty (cannot happen: bytes <= maxBytes)
      this.drop(lru);
      this.evicted++;
    }
  }

  private drop(e: Entry): void {
    this.map.delete(e.key);
    this.unlink(e);
    this.used -= e.bytes;
  }

  private toFront(e: Entry): void {
    this.unlink(e);
    this.linkFront(e);
  }

  private unlink(e: Entry): void {
    e.prev.next = e.next;
    e.next.prev = e.prev;
  }

  private linkFront(e: Entry): void {
    const head = this.head;
    const first = head.next;
    e.prev = head;
    e.next = first;
    first.prev = e;
    head.next = e;
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
