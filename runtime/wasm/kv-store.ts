// Host-side key/value store of a step: its state survives instance rebuilds and reloads.
// Byte accounting (the cap, bytesUsed) is key (UTF-16 bytes) + value.
//
// Keys are UTF-16LE bytes. A core-module plugin's key is read where it lies in plugin memory
// (getAt/setAt/deleteAt: a pointer and a byte length, as the ABI passes it), so a call decodes no
// string and leaves no garbage: a cache's keys are distinct per request, and decoding each into a
// string cost more than the table operation. The string methods (components, tests) write the key
// into a scratch buffer and take the same path.
//
// A full store evicts the least recently used entries and admits the new one. Every operation is
// O(1) whatever the number of entries; with a million entries it costs ~1.4× what it does with a
// hundred (the cache misses of a large table; a Map-based LRU: ~6×, bench/cache-full.ts --store),
// because the store holds no JavaScript object per entry:
//   - an open-addressing hash table (linear probing, backward-shift deletion) of (slot, hash);
//   - slots in one typed array: the use-ordered doubly-linked list, hash, expiry, record position;
//   - one byte arena holding each record, [slot][record length][key as UTF-16][value], used as a
//     ring: records are written at `top` and the oldest bytes are reclaimed at `tail`. A freed
//     record is a hole; when `top` needs room, `tail` moves forward over the records after it,
//     skipping holes and moving each live record it meets to `top`. Cache entries mostly leave
//     in the order they came (LRU, FIFO ledgers, TTLs), so the bytes at `tail` are mostly holes
//     and nothing moves: a full store writes each record where an old one was. A live record
//     moves at most once per turn of the ring, and the arena is kept at least a third free
//     (resized to twice the live bytes when more would be in use): amortised O(1) per byte
//     written, and no call moves the whole arena — a whole-arena compaction at a million
//     entries (282 MB) stalled the event loop ~80 ms.
// Why not a Map (a list of our own, or `lru-cache`, which also keys a Map): with a million
// entries, V8's Map and the objects per entry (key string, value array, its ArrayBuffer) made
// each operation 3–6× slower than with a hundred — cache misses along the Map's chains, and the
// garbage collector marking and promoting millions of objects. Figures in bench/RESULTS.md,
// "Cache when full".
//
// `now` (ms, performance.now()'s clock) is an argument for tests; absent, the clock is read only
// when an answer depends on it (a TTL to set, an expiry to check), not on every call: a miss, or a
// key without TTL, reads none.
//
// get() and set() mark an entry used. An expired entry is absent to readers but stays where it
// is (its key's next write reuses it in place); it goes when it reaches the LRU end, or on
// delete()/sweep(). Values handed out by get() are views into the arena, valid until the next
// write: readers copy them at once (through jco). A core module's reads and writes use getInto()
// and setFrom(), which copy between the arena and its memory directly: no view per call (short
// values by a loop, which costs less than making the view TypedArray#set needs).

/** Table cell / list link value meaning "none"; slot 0 is the list's sentinel, never an entry. */
const NONE = 0;
/** Whether typed arrays read and write little-endian (see KvStore.words and encode). */
const LITTLE_ENDIAN = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;
// A slot is 8 int32s of one Int32Array (32 bytes, so one cache line or half of one): the list
// links, the hash, the record's offset, the key and value lengths, and the expiry as a float64
// (a Float64Array over the same buffer, index 4s + 3).
const NEXT = 0; // towards the least recently used end; next of the sentinel = most recently used
const PREV = 1; // towards the most recently used end; prev of the sentinel = least recently used
const HASH = 2;
const OFF = 3;
const KEYLEN = 4;
const VALLEN = 5;
const STRIDE = 8;
const HEADER = 8; // i32 slot (0 = dead record or the padding before a wrap), i32 record length
/** Records are multiples of 8 bytes, so the room left before the arena's end is 0 or fits a header. */
const ALIGN = 8;
const MIN_ARENA = 4096;
const MAX_ARENA = 2 ** 31 - 8; // a typed array index stays a small integer
const MIN_SLOTS = 16;

export class KvStore {
  private max: number;
  private used = 0;
  private count = 0;
  private evicted = 0;

  // Slots (slot 0: the sentinel of the circular use-ordered list) and their expiry view.
  private slots: Int32Array;
  private exp: Float64Array;
  private freeSlots: Int32Array;
  private freeTop = 0;
  private slotTop = 1;

  // Hash table: a power-of-two number of (slot, hash) cells, at most half of them used.
  private table: Int32Array;
  private mask: number;

  // Record arena, a ring (see the header); the two views share one buffer. Records (live, dead
  // or padding) fill `span` bytes from `tail` forward to `top`, wrapping at the arena's end.
  private arena: Uint8Array;
  private a32: Int32Array;
  private top = 0;
  private tail = 0;
  private span = 0;
  private live = 0;
  private moved = 0;
  /** Where the string methods write their key, and the same bytes as UTF-16 units. */
  private keyBuf = new Uint8Array(256);
  private key16 = new Uint16Array(this.keyBuf.buffer);
  /** The last key source (a plugin's memory) and its buffer as int32s: a key at a 4-byte-aligned
   *  address is hashed, compared and copied a word at a time (see words()). */
  private srcU8: Uint8Array | null = null;
  private src32: Int32Array<ArrayBufferLike> = new Int32Array(0);
  /** srcU8's byteOffset (read once per view: the getter is a builtin call V8 does not inline here). */
  private srcOff = 0;

  constructor(maxBytes: number) {
    this.max = maxBytes;
    this.slots = new Int32Array(MIN_SLOTS * STRIDE);
    this.exp = new Float64Array(this.slots.buffer);
    this.freeSlots = new Int32Array(MIN_SLOTS);
    this.table = new Int32Array(MIN_SLOTS * 2 * 2);
    this.mask = MIN_SLOTS * 2 - 1;
    this.arena = new Uint8Array(MIN_ARENA);
    this.a32 = new Int32Array(this.arena.buffer);
  }

  get maxBytes(): number { return this.max; }

  /** A new cap (a reload may change it): least recently used entries go until the store fits. */
  setMaxBytes(maxBytes: number): void {
    this.max = maxBytes;
    this.makeRoom(0);
  }

  get bytesUsed(): number { return this.used; }

  /** Entries held, expired ones not yet dropped included. */
  get size(): number { return this.count; }

  /** Entries removed to make room since the store was created. */
  get evictions(): number { return this.evicted; }

  /** Bytes the record arena holds (live records, holes and free room). */
  get arenaBytes(): number { return this.arena.length; }

  /** Bytes of live records moved within the arena to reclaim room (not counting resizes). */
  get movedBytes(): number { return this.moved; }

  get(key: string, now?: number): Uint8Array | undefined {
    const n = this.encode(key);
    return this.getAt(this.keyBuf, 0, n, now);
  }

  /**
   * Copies `value`. Evicts least recently used entries until it fits; returns false (and changes
   * nothing) only when key + value alone exceed the cap.
   */
  set(key: string, value: Uint8Array, ttlMs: number, now?: number): boolean {
    const n = this.encode(key);
    return this.setAt(this.keyBuf, 0, n, value, ttlMs, now);
  }

  /** Removes the key; true when it was present (not expired). */
  delete(key: string, now?: number): boolean {
    const n = this.encode(key);
    return this.deleteAt(this.keyBuf, 0, n, now);
  }

  /** get() with the key at src[at, at + bytes) as UTF-16LE (an odd last byte is not part of it). */
  getAt(src: Uint8Array, at: number, bytes: number, now?: number): Uint8Array | undefined {
    const s = this.lookup(src, at, bytes, now);
    if (s === NONE) return undefined;
    const v = this.valueAt(s);
    return this.arena.subarray(v, v + this.slots[s * STRIDE + VALLEN]);
  }

  /**
   * getAt() that copies the value into dst[dstAt, dstAt + max) when it fits, instead of handing
   * out a view (no allocation: a plugin's kv read lands in its memory directly). Returns the
   * value's length (larger than max: nothing copied), -1 when absent or expired.
   */
  getInto(src: Uint8Array, at: number, bytes: number, dst: Uint8Array, dstAt: number, max: number, now?: number): number {
    const s = this.lookup(src, at, bytes, now);
    if (s === NONE) return -1;
    const len = this.slots[s * STRIDE + VALLEN];
    if (len <= max) {
      // (as TypedArray#set would: a destination past dst's end is an error, not a partial copy)
      if (dstAt < 0 || dstAt + len > dst.length) throw new RangeError('offset is out of bounds');
      copyBytes(this.arena, this.valueAt(s), dst, dstAt, len);
    }
    return len;
  }

  /** The live slot of the key at src[at, at + bytes), marked used; NONE when absent or expired. */
  private lookup(src: Uint8Array, at: number, bytes: number, now: number | undefined): number {
    const units = bytes >> 1;
    const w = this.words(src, at);
    const s = this.find(src, at, units, w, hashKey(src, at, units, w, this.srcOff));
    if (s === NONE) return NONE;
    const exp = this.exp[s * (STRIDE / 2) + 3];
    // Expired: absent to readers, left unmoved (it drifts to the LRU end) because the usual next
    // call is a set of the same key, which then reuses it in place.
    if (exp !== 0 && exp <= (now ?? performance.now())) return NONE;
    if (this.slots[NEXT] !== s) this.toFront(s);
    return s;
  }

  /** set() with the key at src[at, at + bytes) as UTF-16LE (src must not be this store's arena). */
  setAt(src: Uint8Array, at: number, bytes: number, value: Uint8Array, ttlMs: number, now?: number): boolean {
    return this.setFrom(src, at, bytes, value, 0, value.byteLength, ttlMs, now);
  }

  /**
   * setAt() with the value at vsrc[vAt, vAt + vLen) (a plugin's memory, like the key): no view of
   * it is made. Returns false (and changes nothing) only when key + value alone exceed the cap.
   */
  setFrom(src: Uint8Array, at: number, bytes: number, vsrc: Uint8Array, vAt: number, vLen: number, ttlMs: number, now?: number): boolean {
    if (vAt < 0 || vLen < 0 || vAt + vLen > vsrc.length) throw new RangeError('value out of bounds');
    const units = bytes >> 1;
    const total = units * 2 + vLen;
    if (total > this.max) return false;
    // A view into the arena (a value just read) would move under a compaction: copy it first. A
    // value in the key's own source (a plugin's memory) is not one: src is never the arena.
    if (vsrc !== src && vsrc.buffer === this.arena.buffer) {
      vsrc = vsrc.slice(vAt, vAt + vLen);
      vAt = 0;
    }
    const expiresAt = ttlMs > 0 ? (now ?? performance.now()) + ttlMs : 0;
    const w = this.words(src, at);
    const h = hashKey(src, at, units, w, this.srcOff);
    let s = this.find(src, at, units, w, h);
    if (s !== NONE) {
      const slot = s * STRIDE;
      if (this.slots[slot + VALLEN] === vLen) {
        // Same size (a counter, a bucket, a version, a re-stored entry): overwrite in place, no
        // allocation, no accounting.
        copyBytes(vsrc, vAt, this.arena, this.valueAt(s), vLen);
        this.exp[s * (STRIDE / 2) + 3] = expiresAt;
        if (this.slots[NEXT] !== s) this.toFront(s);
        return true;
      }
      // Another size: a new record. The slot leaves the list while room is made, so eviction
      // never picks the entry being written.
      this.unlink(s);
      this.used -= this.slots[slot + KEYLEN] * 2 + this.slots[slot + VALLEN];
      this.freeRecord(s);
      this.makeRoom(total);
    } else {
      this.makeRoom(total);
      s = this.newSlot();
      this.slots[s * STRIDE + HASH] = h;
      this.slots[s * STRIDE + KEYLEN] = units;
      this.tableInsert(s, h);
      this.count++;
    }
    this.writeRecord(s, src, at, units, w, vsrc, vAt, vLen);
    this.exp[s * (STRIDE / 2) + 3] = expiresAt;
    this.linkFront(s);
    this.used += total;
    return true;
  }

  /** delete() with the key at src[at, at + bytes) as UTF-16LE. */
  deleteAt(src: Uint8Array, at: number, bytes: number, now?: number): boolean {
    const units = bytes >> 1;
    const w = this.words(src, at);
    const s = this.find(src, at, units, w, hashKey(src, at, units, w, this.srcOff));
    if (s === NONE) return false;
    const exp = this.exp[s * (STRIDE / 2) + 3];
    this.drop(s);
    return exp === 0 || exp > (now ?? performance.now());
  }

  /** src's buffer as int32s when the key at src[at] is 4-byte aligned (and the platform little
   *  endian, so a word is its four bytes as hashKey reads them); null otherwise. */
  private words(src: Uint8Array, at: number): Int32Array | null {
    if (!LITTLE_ENDIAN) return null;
    // Kept by the view's identity, cheaper to check than its buffer's (a plugin instance passes
    // the same view until its memory grows, and then a new one).
    if (src !== this.srcU8) {
      this.srcU8 = src;
      this.srcOff = src.byteOffset;
      this.src32 = new Int32Array(src.buffer, 0, src.buffer.byteLength >> 2);
    }
    return ((this.srcOff + at) & 3) === 0 ? this.src32 : null;
  }

  /** Writes `key` as UTF-16LE into keyBuf (grown when needed); its byte length. */
  private encode(key: string): number {
    const n = key.length * 2;
    if (n > this.keyBuf.length) {
      this.keyBuf = new Uint8Array(Math.max(n, this.keyBuf.length * 2));
      this.key16 = new Uint16Array(this.keyBuf.buffer);
    }
    if (LITTLE_ENDIAN) {
      const k = this.key16;
      for (let i = 0; i < key.length; i++) k[i] = key.charCodeAt(i);
    } else {
      const b = this.keyBuf;
      for (let i = 0; i < key.length; i++) {
        const c = key.charCodeAt(i);
        b[2 * i] = c & 0xff;
        b[2 * i + 1] = c >>> 8;
      }
    }
    return n;
  }

  /** Drops every expired entry: a full scan, for maintenance and tests, never on the hot path. */
  sweep(now = performance.now()): void {
    for (let s = this.slots[NEXT]; s !== 0;) {
      const after = this.slots[s * STRIDE + NEXT];
      const exp = this.exp[s * (STRIDE / 2) + 3];
      if (exp !== 0 && exp <= now) this.drop(s);
      s = after;
    }
  }

  clear(): void {
    this.table.fill(NONE);
    this.slots[NEXT] = 0;
    this.slots[PREV] = 0;
    this.freeTop = 0;
    this.slotTop = 1;
    this.count = 0;
    this.used = 0;
    this.top = 0;
    this.tail = 0;
    this.span = 0;
    this.live = 0;
  }

  // ---- eviction and the use-ordered list ----

  /** Evicts from the LRU end (expired entries are there first, being unused) until `bytes` fit. */
  private makeRoom(bytes: number): void {
    while (this.used + bytes > this.max) {
      const lru = this.slots[PREV];
      if (lru === 0) return; // empty (cannot happen: bytes <= maxBytes)
      this.drop(lru);
      this.evicted++;
    }
  }

  private drop(s: number): void {
    this.tableRemove(s);
    this.unlink(s);
    this.used -= this.slots[s * STRIDE + KEYLEN] * 2 + this.slots[s * STRIDE + VALLEN];
    this.freeRecord(s);
    this.freeSlots[this.freeTop++] = s;
    this.count--;
  }

  private toFront(s: number): void {
    this.unlink(s);
    this.linkFront(s);
  }

  private unlink(s: number): void {
    const slots = this.slots;
    const p = slots[s * STRIDE + PREV];
    const n = slots[s * STRIDE + NEXT];
    slots[p * STRIDE + NEXT] = n;
    slots[n * STRIDE + PREV] = p;
  }

  private linkFront(s: number): void {
    const slots = this.slots;
    const first = slots[NEXT];
    slots[s * STRIDE + PREV] = 0;
    slots[s * STRIDE + NEXT] = first;
    slots[first * STRIDE + PREV] = s;
    slots[NEXT] = s;
  }

  private newSlot(): number {
    if (this.freeTop > 0) return this.freeSlots[--this.freeTop];
    if (this.slotTop * STRIDE === this.slots.length) this.growSlots();
    return this.slotTop++;
  }

  private growSlots(): void {
    const n = this.freeSlots.length * 2;
    const slots = new Int32Array(n * STRIDE);
    slots.set(this.slots);
    this.slots = slots;
    this.exp = new Float64Array(slots.buffer);
    const free = new Int32Array(n);
    free.set(this.freeSlots);
    this.freeSlots = free;
  }

  // ---- hash table: cells of two int32s (slot, hash), so probing and backward shifts read the
  // table alone; a slot's record is read only to compare the key once the hashes match ----

  private find(src: Uint8Array, at: number, units: number, w: Int32Array | null, h: number): number {
    const table = this.table;
    const mask = this.mask;
    for (let i = h & mask; ; i = (i + 1) & mask) {
      const s = table[i * 2];
      if (s === NONE) return NONE;
      if (table[i * 2 + 1] === h && this.keyEquals(s, src, at, units, w)) return s;
    }
  }

  private keyEquals(s: number, src: Uint8Array, at: number, units: number, w: Int32Array | null): boolean {
    if (this.slots[s * STRIDE + KEYLEN] !== units) return false;
    const base = this.slots[s * STRIDE + OFF] + HEADER; // 4-byte aligned
    const n = units * 2;
    let i = 0;
    if (w !== null) {
      const a32 = this.a32;
      for (let a = base >> 2, k = (this.srcOff + at) >> 2; i + 4 <= n; i += 4) if (a32[a++] !== w[k++]) return false;
    }
    const arena = this.arena;
    for (; i < n; i++) if (arena[base + i] !== src[at + i]) return false;
    return true;
  }

  private tableInsert(s: number, h: number): void {
    if ((this.count + 1) * 2 > this.mask + 1) this.growTable();
    const table = this.table;
    const mask = this.mask;
    let i = h & mask;
    while (table[i * 2] !== NONE) i = (i + 1) & mask;
    table[i * 2] = s;
    table[i * 2 + 1] = h;
  }

  /** Backward-shift deletion: later cells of the probe run move into the hole when their home
   *  position allows it, so lookups never meet tombstones. */
  private tableRemove(s: number): void {
    const table = this.table;
    const mask = this.mask;
    let hole = this.slots[s * STRIDE + HASH] & mask;
    while (table[hole * 2] !== s) hole = (hole + 1) & mask;
    for (let j = hole; ;) {
      j = (j + 1) & mask;
      const t = table[j * 2];
      if (t === NONE) break;
      const th = table[j * 2 + 1];
      if (((j - (th & mask)) & mask) >= ((j - hole) & mask)) {
        table[hole * 2] = t;
        table[hole * 2 + 1] = th;
        hole = j;
      }
    }
    table[hole * 2] = NONE;
  }

  private growTable(): void {
    const cells = (this.mask + 1) * 2;
    const table = new Int32Array(cells * 2);
    const mask = cells - 1;
    const old = this.table;
    for (let c = 0; c < old.length; c += 2) {
      const s = old[c];
      if (s === NONE) continue;
      const h = old[c + 1];
      let i = h & mask;
      while (table[i * 2] !== NONE) i = (i + 1) & mask;
      table[i * 2] = s;
      table[i * 2 + 1] = h;
    }
    this.table = table;
    this.mask = mask;
  }

  // ---- record arena ----

  private valueAt(s: number): number {
    return this.slots[s * STRIDE + OFF] + HEADER + this.slots[s * STRIDE + KEYLEN] * 2;
  }

  private writeRecord(s: number, src: Uint8Array, at: number, units: number, w: Int32Array | null, vsrc: Uint8Array, vAt: number,
    vLen: number): void {
    const kb = units * 2;
    const len = (HEADER + kb + vLen + ALIGN - 1) & -ALIGN;
    this.reserve(len);
    const off = this.top;
    this.top = off + len === this.arena.length ? 0 : off + len;
    this.span += len;
    this.live += len;
    this.a32[off >> 2] = s;
    this.a32[(off >> 2) + 1] = len;
    const arena = this.arena;
    const base = off + HEADER;
    let i = 0;
    if (w !== null) {
      const a32 = this.a32;
      for (let a = base >> 2, k = (this.srcOff + at) >> 2; i + 4 <= kb; i += 4) a32[a++] = w[k++]!;
    }
    for (; i < kb; i++) arena[base + i] = src[at + i]!;
    copyBytes(vsrc, vAt, arena, base + kb, vLen);
    this.slots[s * STRIDE + OFF] = off;
    this.slots[s * STRIDE + VALLEN] = vLen;
  }

  private freeRecord(s: number): void {
    const off = this.slots[s * STRIDE + OFF];
    this.a32[off >> 2] = 0;
    this.live -= this.a32[(off >> 2) + 1];
  }

  /** Room for `len` bytes at `top`, contiguous: the arena resized when more than two thirds
   *  would be in use (or less than a quarter), then bytes reclaimed at `tail`. */
  private reserve(len: number): void {
    if (this.span === 0) this.top = this.tail = 0;
    const top = this.top;
    const length = this.arena.length;
    // Not wrapped (records in [tail, top)): free to the end. Wrapped: free up to tail.
    if ((top > this.tail || this.span === 0 ? length : this.tail) - top >= len) return;
    const need = this.live + len;
    if (need * 3 > length * 2 || (need * 4 < length && length > MIN_ARENA)) {
      const cap = arenaSize(2 * need);
      if (cap !== length) this.resize(cap);
    }
    // Past the largest arena (a store of more than a gigabyte): make room in it by evicting.
    while (this.live + len > this.arena.length && this.slots[PREV] !== 0) {
      this.drop(this.slots[PREV]);
      this.evicted++;
    }
    this.reclaim(len);
  }

  /** Moves `tail` forward until `len` bytes are free at `top`: holes are skipped, live records
   *  moved to `top`. Ends: live + len fit in the arena (reserve), so a turn of the ring frees enough. */
  private reclaim(len: number): void {
    const a32 = this.a32;
    const length = this.arena.length;
    for (;;) {
      if (this.span === 0) this.top = this.tail = 0;
      const top = this.top;
      const tail = this.tail;
      if (top > tail || this.span === 0) {
        // Records in [tail, top): free to the end, then from the start. Pad to the end and wrap.
        if (length - top >= len) return;
        a32[top >> 2] = 0;
        a32[(top >> 2) + 1] = length - top;
        this.span += length - top;
        this.top = 0;
        continue;
      }
      // Wrapped (or full: top === tail): free is [top, tail).
      if (tail - top >= len) return;
      const s = a32[tail >> 2];
      const rlen = a32[(tail >> 2) + 1];
      if (s !== 0) {
        if (top !== tail) this.arena.copyWithin(top, tail, tail + rlen);
        this.slots[s * STRIDE + OFF] = top;
        this.moved += rlen;
        this.top = top + rlen === length ? 0 : top + rlen; // (equal only when full: top === tail)
      } else {
        this.span -= rlen;
      }
      this.tail = tail + rlen === length ? 0 : tail + rlen;
    }
  }

  /** A new arena of `cap` bytes holding the live records, in ring order from its start. */
  private resize(cap: number): void {
    const from = this.arena;
    const a32 = this.a32;
    const slots = this.slots;
    const to = new Uint8Array(cap);
    const length = from.length;
    let p = this.tail;
    let left = this.span;
    let dst = 0;
    // Runs of adjacent live records are copied at once.
    let run = -1;
    let runDst = 0;
    while (left > 0) {
      const s = a32[p >> 2];
      const rlen = a32[(p >> 2) + 1];
      if (s !== 0) {
        if (run < 0) { run = p; runDst = dst; }
        slots[s * STRIDE + OFF] = dst;
        dst += rlen;
      } else if (run >= 0) {
        to.set(from.subarray(run, p), runDst);
        run = -1;
      }
      left -= rlen;
      p += rlen;
      if (p === length) {
        if (run >= 0) to.set(from.subarray(run, p), runDst);
        run = -1;
        p = 0;
      }
    }
    if (run >= 0) to.set(from.subarray(run, p), runDst);
    this.arena = to;
    this.a32 = new Int32Array(to.buffer);
    this.tail = 0;
    this.span = dst;
    this.top = dst === cap ? 0 : dst;
  }
}

/** Multiply-xorshift over the key's bytes four at a time, as little-endian int32s (read from `w`,
 *  src's buffer as int32s, when given: the key is then 4-byte aligned, at word (srcOff + at) / 4 of
 *  it, srcOff being src's byteOffset), then a finish for the low
 *  bits the table uses. A cache key is tens of bytes: hashing it one UTF-16 unit at a time (from a
 *  decoded string) was the largest part of the cache step's kv calls. */
function hashKey(src: Uint8Array, at: number, units: number, w: Int32Array | null, srcOff: number): number {
  let h = 0x811c9dc5 ^ units;
  const end = at + units * 2;
  let i = at;
  if (w !== null) {
    for (let k = (srcOff + at) >> 2; i + 4 <= end; i += 4) {
      h = Math.imul(h ^ w[k++]!, 0x9e3779b1);
      h ^= h >>> 15;
    }
  } else {
    for (; i + 4 <= end; i += 4) {
      h = Math.imul(h ^ (src[i]! | (src[i + 1]! << 8) | (src[i + 2]! << 16) | (src[i + 3]! << 24)), 0x9e3779b1);
      h ^= h >>> 15;
    }
  }
  if (i < end) h = Math.imul(h ^ (src[i]! | (src[i + 1]! << 8)), 0x9e3779b1);
  h = Math.imul(h ^ (h >>> 16), 0x45d9f3b);
  return h ^ (h >>> 16);
}

/** Values up to this many bytes are copied by a loop: a subarray view for TypedArray#set costs an
 *  allocation, more than the loop for a short value (a bucket, a counter, a version). */
const COPY_LOOP_MAX = 64;

/** to[toAt, toAt + n) = from[fromAt, fromAt + n) (different buffers). */
function copyBytes(from: Uint8Array, fromAt: number, to: Uint8Array, toAt: number, n: number): void {
  if (n <= COPY_LOOP_MAX) {
    for (let i = 0; i < n; i++) to[toAt + i] = from[fromAt + i]!;
  } else {
    to.set(fromAt === 0 && n === from.length ? from : from.subarray(fromAt, fromAt + n), toAt);
  }
}

/** `bytes` rounded up to a multiple of 4 KiB, within [MIN_ARENA, MAX_ARENA]. */
function arenaSize(bytes: number): number {
  return Math.min(MAX_ARENA, Math.max(MIN_ARENA, Math.ceil(bytes / 4096) * 4096));
}

/** Default per-plugin cap. */
export const DEFAULT_KV_MAX_BYTES = 1 << 20;
