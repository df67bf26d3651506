import { test } from 'node:test';
import assert from 'node:assert/strict';
import { KvStore } from '../../runtime/wasm/index.ts';

const v = (...b: number[]) => new Uint8Array(b);
const bytes = (n: number) => new Uint8Array(n);
/** Present and live at `now` (a read: it marks the entry used). */
const has = (kv: KvStore, key: string, now = 0) => kv.get(key, now) !== undefined;

test('kv: a full store evicts the least recently used entry and admits the new one', () => {
  // 'a'..'d' are 1 UTF-16 char (2 bytes) + 48 bytes = 50 bytes each; the cap holds two.
  const kv = new KvStore(100);
  assert.equal(kv.set('a', bytes(48), 0, 0), true);
  assert.equal(kv.set('b', bytes(48), 0, 0), true);
  assert.equal(kv.set('c', bytes(48), 0, 0), true, 'admitted: a (least recently used) goes');
  assert.equal(kv.bytesUsed, 100);
  assert.equal(kv.evictions, 1);
  assert.equal(kv.get('a', 0), undefined);
  // A read makes b the most recently used: the next eviction takes c.
  assert.ok(kv.get('b', 0) !== undefined);
  assert.equal(kv.set('d', bytes(48), 0, 0), true);
  assert.equal(kv.get('c', 0), undefined, 'c was least recently used');
  assert.ok(has(kv, 'b') && has(kv, 'd'));
  // A write makes an entry the most recently used too (same size: in place).
  kv.set('b', bytes(48), 0, 0);
  kv.set('e', bytes(48), 0, 0);
  assert.equal(kv.get('d', 0), undefined);
  assert.ok(has(kv, 'b') && has(kv, 'e'));
  assert.equal(kv.size, 2);
});

test('kv: eviction order over many entries is least recently used first', () => {
  const kv = new KvStore(10 * (2 + 8)); // ten entries of a 1-char key and 8 bytes
  for (const k of 'abcdefghij') kv.set(k, bytes(8), 0, 0);
  // Touch the odd ones: the even ones are now the least recently used, in insertion order.
  for (const k of 'bdfhj') kv.get(k, 0);
  const expected = 'acegi';
  for (let i = 0; i < 5; i++) {
    kv.set(String.fromCharCode(0x41 + i), bytes(8), 0, 0);
    // (a read of an absent key changes no order; reads of present keys would)
    assert.equal(kv.get(expected[i], 0), undefined, `insert ${i + 1} evicts ${expected[i]}`);
    assert.equal(kv.evictions, i + 1);
    assert.equal(kv.size, 10);
  }
  for (const k of 'bdfhjABCDE') assert.ok(has(kv, k), `${k} kept`);
});

test('kv: a full store keeps admitting new entries, far past its cap, in constant space', () => {
  const kv = new KvStore(64 * 1024);
  const value = bytes(100);
  let refused = 0;
  for (let i = 0; i < 50_000; i++) if (!kv.set(`key-${i}`, value, 60_000, i)) refused++;
  assert.equal(refused, 0, 'every write admitted');
  assert.ok(kv.bytesUsed <= kv.maxBytes, `bytesUsed ${kv.bytesUsed} within the cap`);
  assert.ok(kv.bytesUsed > kv.maxBytes - 200, 'and the cap is used');
  const newest = kv.get('key-49999', 50_000);
  assert.ok(newest !== undefined, 'the last write is readable');
  assert.equal(kv.get('key-0', 50_000), undefined, 'the first is long gone');
  assert.equal(kv.evictions, 50_000 - kv.size);
  assert.ok(kv.arenaBytes <= 3 * kv.maxBytes, `the arena (${kv.arenaBytes} bytes) stays within 3× the cap`);
});

test('kv: the arena is a ring — entries leaving oldest first free the bytes the next ones are written to, so none move', () => {
  const kv = new KvStore(64 * 1024);
  const value = bytes(100);
  for (let i = 0; i < 50_000; i++) kv.set(`key-${String(i).padStart(6, '0')}`, value, 0, 0);
  assert.ok(kv.evictions > 49_000);
  assert.equal(kv.movedBytes, 0, 'no live record was moved');
  assert.ok(kv.arenaBytes <= 3 * kv.maxBytes);
});

test('kv: live records met where room is reclaimed are moved intact, at most about twice the bytes written', () => {
  // Every value names its key. Ten hot entries, read every 20 writes, stay while thousands of
  // others come and go, so the ring keeps meeting them among the holes of the evicted ones.
  const kv = new KvStore(32 * 1024);
  const valueOf = (i: number) => { const b = bytes(60 + (i % 5) * 8); b.fill(i & 0xff); b[0] = i >> 8; return b; };
  const check = (key: string, i: number) => {
    const got = kv.get(key, 0);
    assert.ok(got !== undefined, `${key} present`);
    assert.deepEqual([...got], [...valueOf(i)], `value of ${key}`);
  };
  let written = 0;
  for (let h = 0; h < 10; h++) { kv.set(`hot${h}`, valueOf(h), 0, 0); written += 8 + valueOf(h).length; }
  for (let i = 10; i < 20_000; i++) {
    kv.set(`k${i}`, valueOf(i), 0, 0);
    written += `k${i}`.length * 2 + valueOf(i).length;
    check(`k${i}`, i);
    if (i % 20 === 0) for (let h = 0; h < 10; h++) check(`hot${h}`, h);
  }
  assert.ok(kv.movedBytes > 0, 'live records were met and moved');
  assert.ok(kv.movedBytes <= 2 * written, `moved ${kv.movedBytes} bytes for ${written} written`);
  assert.ok(kv.arenaBytes <= 3 * kv.maxBytes);
});

test('kv: an entry larger than the cap on its own is refused and changes nothing', () => {
  const kv = new KvStore(100);
  kv.set('a', bytes(40), 0, 0);
  kv.set('b', bytes(40), 0, 0);
  assert.equal(kv.set('big', bytes(95), 0, 0), false, '6 + 95 bytes > 100');
  assert.ok(has(kv, 'a') && has(kv, 'b'), 'nothing evicted for a refused write');
  assert.equal(kv.set('a', bytes(99), 0, 0), false);
  assert.deepEqual(kv.get('a', 0)!.length, 40, 'the old value of a refused overwrite stays');
  assert.equal(kv.set('c', bytes(98), 0, 0), true, 'exactly the cap fits');
  assert.equal(kv.bytesUsed, 100);
  assert.equal(kv.size, 1);
});

test('kv: TTL — expired entries are absent, and the first to go when the store is full', () => {
  const kv = new KvStore(100);
  assert.equal(kv.set('t', bytes(48), 10, 0), true);
  assert.ok(kv.get('t', 9) !== undefined);
  assert.equal(kv.get('t', 10), undefined, 'expired at its deadline');
  assert.equal(kv.get('t', 15), undefined, 'and stays absent (a read does not revive it)');
  assert.equal(kv.set('p', bytes(48), 0, 20), true, 'no TTL: never expires');
  // Full: the expired entry is at the LRU end (reads of expired entries do not refresh them).
  assert.equal(kv.set('n', bytes(48), 0, 30), true);
  assert.equal(kv.size, 2);
  assert.ok(has(kv, 'p', 1e12) && has(kv, 'n', 1e12));
  assert.equal(kv.delete('t', 30), false);
});

test('kv: expiry, in-place overwrite of same-size values, reuse of expired entries, delete', () => {
  const kv = new KvStore(1000);
  assert.equal(kv.set('k', v(1, 2, 3), 10, 0), true);
  const first = kv.get('k', 5)!;
  assert.deepEqual([...first], [1, 2, 3]);
  assert.equal(kv.get('k', 10), undefined, 'expired at its deadline');
  const used = kv.bytesUsed;
  assert.equal(kv.set('k', v(4, 5, 6), 10, 20), true, 'an expired entry is written again');
  assert.deepEqual([...kv.get('k', 25)!], [4, 5, 6]);
  assert.equal(kv.bytesUsed, used, 'same key and size: same accounting');
  const src = v(7, 8, 9);
  kv.set('k', src, 0, 30);
  src[0] = 99;
  assert.deepEqual([...kv.get('k', 40)!], [7, 8, 9], 'the store keeps a copy, not the caller\'s array');
  kv.set('k', v(1), 0, 50);
  assert.deepEqual([...kv.get('k', 60)!], [1], 'a different size replaces the value');
  assert.equal(kv.bytesUsed, 2 + 1);
  kv.set('gone', v(1), 5, 100);
  assert.equal(kv.delete('gone', 200), false, 'deleting an expired key reports it absent');
  assert.equal(kv.delete('k', 200), true);
  assert.equal(kv.delete('k', 200), false, 'already deleted');
  assert.equal(kv.bytesUsed, 0);
  assert.equal(kv.size, 0);
});

test('kv: byte accounting is UTF-16 key bytes + value bytes, through every kind of write', () => {
  const kv = new KvStore(1000);
  kv.set('ab', bytes(10), 0, 0); // 4 + 10
  kv.set('cde', bytes(20), 0, 0); // 6 + 20
  assert.equal(kv.bytesUsed, 40);
  kv.set('ab', bytes(10), 5, 0); // same size: unchanged
  assert.equal(kv.bytesUsed, 40);
  kv.set('ab', bytes(30), 0, 1); // grows by 20
  assert.equal(kv.bytesUsed, 60);
  kv.set('cde', bytes(1), 0, 2); // shrinks by 19
  assert.equal(kv.bytesUsed, 41);
  kv.set('é€', bytes(2), 0, 3); // two UTF-16 units, whatever their UTF-8 length
  assert.equal(kv.bytesUsed, 41 + 4 + 2);
  kv.delete('ab', 4);
  assert.equal(kv.bytesUsed, 7 + 6);
  kv.sweep(10);
  assert.equal(kv.bytesUsed, 13, 'nothing expired: the sweep keeps everything');
  kv.set('x', bytes(1), 1, 10);
  kv.sweep(20);
  assert.equal(kv.bytesUsed, 13, 'the sweep drops the expired entry');
  kv.clear();
  assert.equal(kv.bytesUsed, 0);
  assert.equal(kv.size, 0);
  assert.equal(kv.set('y', bytes(1), 0, 30), true, 'usable after clear');
  assert.equal(kv.bytesUsed, 3);
});

test('kv: an overwrite that grows evicts others, never the entry being written', () => {
  const kv = new KvStore(100);
  kv.set('a', bytes(28), 0, 0); // 30
  kv.set('b', bytes(28), 0, 0); // 30
  kv.set('c', bytes(28), 0, 0); // 30
  kv.get('a', 0); // a most recently used: order (least → most recent) b, c, a
  assert.equal(kv.set('a', bytes(78), 0, 0), true, 'a grows to 80: b and c must go');
  assert.equal(kv.size, 1);
  assert.equal(kv.get('a', 0)!.length, 78);
  assert.equal(kv.bytesUsed, 80);
  assert.equal(kv.evictions, 2);
});

/** The obvious LRU (a Map in use order), to check the store against under random operations. */
class ModelLru {
  readonly map = new Map<string, { value: number[]; expiresAt: number }>();
  used = 0;
  constructor(readonly maxBytes: number) {}
  get(key: string, now: number): number[] | undefined {
    const e = this.map.get(key);
    if (e === undefined || (e.expiresAt !== 0 && e.expiresAt <= now)) return undefined;
    this.map.delete(key);
    this.map.set(key, e);
    return e.value;
  }
  set(key: string, value: number[], ttl: number, now: number): boolean {
    const bytes = key.length * 2 + value.length;
    if (bytes > this.maxBytes) return false;
    const cur = this.map.get(key);
    if (cur !== undefined) { this.map.delete(key); this.used -= key.length * 2 + cur.value.length; }
    for (const [k, e] of this.map) {
      if (this.used + bytes <= this.maxBytes) break;
      this.map.delete(k);
      this.used -= k.length * 2 + e.value.length;
    }
    this.map.set(key, { value, expiresAt: ttl > 0 ? now + ttl : 0 });
    this.used += bytes;
    return true;
  }
  delete(key: string, now: number): boolean {
    const e = this.map.get(key);
    if (e === undefined) return false;
    this.map.delete(key);
    this.used -= key.length * 2 + e.value.length;
    return e.expiresAt === 0 || e.expiresAt > now;
  }
}

test('kv: random gets, sets and deletes agree with a reference LRU (table, list, arena ring)', () => {
  let seed = 12345;
  let moved = 0;
  const rnd = (n: number) => { seed = (Math.imul(seed, 1103515245) + 12345) >>> 0; return (seed >>> 8) % n; };
  for (const cap of [300, 5000, 100_000]) {
    const kv = new KvStore(cap);
    const model = new ModelLru(cap);
    const keys = Array.from({ length: 400 }, (_, i) => `k${i}${'é'.repeat(i % 7)}`);
    for (let step = 0, now = 0; step < 40_000; step++, now += rnd(3)) {
      const key = keys[rnd(keys.length)];
      const op = rnd(10);
      if (op < 4) {
        const a = kv.get(key, now);
        const b = model.get(key, now);
        assert.deepEqual(a === undefined ? undefined : [...a], b, `get ${key} at step ${step}`);
      } else if (op < 9) {
        const value = Array.from({ length: rnd(4) === 0 ? rnd(400) : rnd(24) }, () => rnd(256));
        const ttl = rnd(3) === 0 ? 1 + rnd(50) : 0;
        assert.equal(kv.set(key, new Uint8Array(value), ttl, now), model.set(key, value, ttl, now), `set ${key} at step ${step}`);
      } else {
        assert.equal(kv.delete(key, now), model.delete(key, now), `delete ${key} at step ${step}`);
      }
      assert.equal(kv.bytesUsed, model.used, `bytesUsed at step ${step}`);
      assert.equal(kv.size, model.map.size, `size at step ${step}`);
    }
    moved += kv.movedBytes;
  }
  assert.ok(moved > 0, 'the ring moved live records on the way (the path is covered)');
});

test('kv: lowering the cap evicts least recently used entries until the store fits', () => {
  const kv = new KvStore(1000);
  for (const k of 'abcde') kv.set(k, bytes(98), 0, 0); // 100 bytes each
  kv.get('a', 0);
  kv.setMaxBytes(300);
  assert.equal(kv.maxBytes, 300);
  assert.equal(kv.bytesUsed, 300);
  assert.equal(kv.get('b', 0), undefined);
  assert.equal(kv.get('c', 0), undefined);
  assert.ok(has(kv, 'a') && has(kv, 'd') && has(kv, 'e'));
  kv.setMaxBytes(1000);
  assert.equal(kv.set('f', bytes(598), 0, 0), true, 'a raised cap admits more');
  assert.equal(kv.bytesUsed, 900);
});

test('kv: a key given as UTF-16LE bytes in place (getAt/setAt/deleteAt) is the same key as its string', () => {
  const kv = new KvStore(1000);
  // A plugin's memory: the key "kéy€" at offset 5 (odd: keys need no alignment), junk around it.
  const mem = new Uint8Array(32).fill(0xee);
  Buffer.from('kéy€', 'utf16le').copy(mem, 5);
  assert.equal(kv.setAt(mem, 5, 8, v(1, 2, 3), 0, 0), true);
  assert.deepEqual(kv.get('kéy€', 0), v(1, 2, 3), 'the string reads what the bytes wrote');
  assert.equal(kv.bytesUsed, 8 + 3, 'accounted as UTF-16 key bytes + value');
  kv.set('kéy€', v(4, 5), 0, 0);
  assert.deepEqual(kv.getAt(mem, 5, 8, 0), v(4, 5), 'the bytes read what the string wrote');
  assert.equal(kv.getAt(mem, 5, 6, 0), undefined, 'a prefix of the key is another key');
  assert.deepEqual(kv.getAt(mem, 5, 9, 0), v(4, 5), 'an odd last byte is not part of the key');
  mem[6] = 0x01; // "\u016b" instead of "k": same length, other key
  assert.equal(kv.getAt(mem, 5, 8, 0), undefined);
  mem[6] = 0x00;
  assert.equal(kv.deleteAt(mem, 5, 8, 0), true);
  assert.equal(kv.get('kéy€', 0), undefined);
  assert.equal(kv.bytesUsed, 0);
  // The stored key is a copy: changing the memory afterwards changes nothing stored.
  kv.setAt(mem, 5, 8, v(9), 0, 0);
  mem.fill(0);
  assert.deepEqual(kv.get('kéy€', 0), v(9));
});

test('kv: getInto/setFrom copy values between the store and a plugin\'s memory in place, short and long alike', () => {
  const kv = new KvStore(10_000);
  const mem = new Uint8Array(1024).fill(0xee);
  Buffer.from('k', 'utf16le').copy(mem, 0);
  // Short (copied by a loop) and long (copied at once) values, from and into any offset.
  for (const n of [0, 1, 16, 64, 65, 300]) {
    const val = Uint8Array.from({ length: n }, (_, i) => (i * 7 + n) & 0xff);
    mem.set(val, 101);
    assert.equal(kv.setFrom(mem, 0, 2, mem, 101, n, 0, 0), true);
    mem.fill(0, 101, 101 + n);
    assert.deepEqual(kv.get('k', 0), val, `${n} bytes stored from [101, ${101 + n})`);
    const dst = new Uint8Array(400).fill(0xaa);
    assert.equal(kv.getInto(mem, 0, 2, dst, 7, 393, 0), n);
    assert.deepEqual(dst.subarray(7, 7 + n), val, `${n} bytes copied to [7, ${7 + n})`);
    assert.equal(dst[6], 0xaa, 'nothing before the destination');
    assert.equal(dst[7 + n], 0xaa, 'nothing after it');
  }
  // A value larger than max: its length, nothing copied; an absent key: -1.
  const dst = new Uint8Array(8).fill(0xaa);
  assert.equal(kv.getInto(mem, 0, 2, dst, 0, 8, 0), 300);
  assert.deepEqual(dst, new Uint8Array(8).fill(0xaa));
  Buffer.from('x', 'utf16le').copy(mem, 2);
  assert.equal(kv.getInto(mem, 2, 2, dst, 0, 8, 0), -1);
  // A destination past the memory's end is an error (the plugin traps), as TypedArray#set's is.
  kv.set('s', v(1, 2, 3), 0, 0);
  Buffer.from('s', 'utf16le').copy(mem, 4);
  assert.throws(() => kv.getInto(mem, 4, 2, mem, 1022, 3, 0), RangeError);
  assert.throws(() => kv.setFrom(mem, 4, 2, mem, 1020, 8, 0, 0), RangeError);
  // Same-size overwrite in place, TTL and accounting as setAt.
  mem.set([9, 9, 9], 200);
  assert.equal(kv.setFrom(mem, 4, 2, mem, 200, 3, 1000, 0), true);
  assert.deepEqual(kv.get('s', 999), v(9, 9, 9));
  assert.equal(kv.get('s', 1000), undefined, 'expired at its TTL');
  assert.equal(kv.bytesUsed, 2 + 300 + 2 + 3);
});

test('kv: a key reads the same at an aligned address (a word at a time) and at any other, whatever its length', () => {
  const kv = new KvStore(1 << 16);
  const mem = new Uint8Array(256);
  // Lengths around the 4-byte word: 1 to 13 UTF-16 units (odd and even), long keys too.
  const keys = ['a', 'ab', 'abc', 'abcd', 'abcde', 'e:1.lx9.1:ly0.2:lz1.3:0123456789abcdef', 'x'.repeat(13), 'é€'.repeat(21)];
  for (const [i, key] of keys.entries()) {
    const n = Buffer.from(key, 'utf16le').copy(mem, 8); // 8: aligned
    assert.equal(kv.setAt(mem, 8, n, v(i), 0, 0), true);
    Buffer.from(key, 'utf16le').copy(mem, 101); // 101: not aligned
    assert.deepEqual(kv.getAt(mem, 101, n, 0), v(i), `${key}: written aligned, read unaligned`);
    assert.deepEqual(kv.get(key, 0), v(i), `${key}: and as a string`);
  }
  assert.equal(kv.size, keys.length, 'no two of them the same key');
  for (const [i, key] of keys.entries()) {
    const n = Buffer.from(key, 'utf16le').copy(mem, 101);
    assert.equal(kv.setAt(mem, 101, n, v(i, i), 0, 0), true);
    Buffer.from(key, 'utf16le').copy(mem, 12);
    assert.deepEqual(kv.getAt(mem, 12, n, 0), v(i, i), `${key}: written unaligned, read aligned`);
    mem[12 + n - 1] ^= 1; // the last byte differs: another key (the tail after the last whole word is compared)
    assert.equal(kv.getAt(mem, 12, n, 0), undefined, `${key}: last byte compared`);
  }
  assert.equal(kv.size, keys.length);
});

test('kv: keys read through views at different offsets of one buffer, used in turn, find the same entries', () => {
  // The store keeps the last source view's word view and byteOffset: a view at another offset of
  // the same memory (aligned, then not) must not reuse them.
  const kv = new KvStore(1 << 16);
  const buf = new ArrayBuffer(512);
  const views = [new Uint8Array(buf, 0, 256), new Uint8Array(buf, 4, 256), new Uint8Array(buf, 6, 256), new Uint8Array(buf, 1, 256)];
  const keys = ['k', 'key-two', 'e:1.lx9.1:ly0.2:lz1.3:0123456789abcdef'];
  for (const [i, key] of keys.entries()) {
    const w = views[i % views.length]!;
    const n = Buffer.from(key, 'utf16le').copy(w, 16);
    w.set([i, i, i], 200);
    assert.equal(kv.setFrom(w, 16, n, w, 200, 3, 0, 0), true);
  }
  for (let round = 0; round < 2; round++) {
    for (const view of views) {
      for (const [i, key] of keys.entries()) {
        const n = Buffer.from(key, 'utf16le').copy(view, 40);
        assert.deepEqual(kv.getAt(view, 40, n, 0), v(i, i, i), `${key} through a view at offset ${view.byteOffset}`);
        const got = new Uint8Array(3);
        assert.equal(kv.getInto(view, 40, n, got, 0, 3, 0), 3);
        assert.deepEqual(got, v(i, i, i));
      }
    }
  }
  assert.equal(kv.size, keys.length);
});

test('kv: without a `now` argument the clock decides expiry (it is read only when an answer needs it)', async () => {
  const kv = new KvStore(1000);
  kv.set('t', v(1), 30);
  kv.set('forever', v(2), 0);
  assert.deepEqual(kv.get('t'), v(1), 'live before its TTL');
  await new Promise((r) => setTimeout(r, 60));
  assert.equal(kv.get('t'), undefined, 'absent after its TTL');
  assert.deepEqual(kv.get('forever'), v(2), 'no TTL: never expires');
  assert.equal(kv.delete('t'), false, 'deleting an expired entry reports it absent');
  assert.equal(kv.delete('forever'), true);
  kv.set('u', v(3), 60_000);
  assert.equal(kv.delete('u'), true, 'deleting a live entry reports it present');
});
