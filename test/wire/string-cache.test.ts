// The string cache hands back the string decoded before for the same bytes, and a correct one always.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { serialize } from 'bson';
import { CommandPeek, COMMAND_STRINGS } from '../../runtime/wire/command-peek.ts';
import { StringCache } from '../../runtime/wire/string-cache.ts';

const at = (s: string, pad = 3): [Buffer, number, number] => {
  const b = Buffer.concat([Buffer.alloc(pad, 0x7a), Buffer.from(s, 'utf8'), Buffer.alloc(2, 0x7a)]);
  return [b, pad, pad + Buffer.byteLength(s)];
};

test('the same bytes give the string decoded the first time, without decoding again', () => {
  const c = new StringCache();
  const a = c.get(...at('orders'));
  assert.equal(a, 'orders');
  assert.equal(c.decoded, 1);
  // Other buffers, other offsets, same bytes.
  for (let i = 0; i < 100; i++) assert.equal(c.get(...at('orders', i % 7)), 'orders');
  assert.equal(c.decoded, 1);
});

test('every answer is the bytes decoded, through misses, slot collisions and replacements', () => {
  const c = new StringCache();
  // 5,000 distinct names over 256 slots: most collide; each is read back twice in a shuffled order.
  const names = Array.from({ length: 5000 }, (_, i) => `coll${i}`);
  names.push('', 'ünïcødé', '日本語', 'x'.repeat(64), 'y'.repeat(65), 'z'.repeat(500));
  let seed = 12345;
  const rnd = () => (seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 2 ** 32;
  for (let round = 0; round < 3; round++) {
    for (let i = 0; i < names.length; i++) {
      const n = names[Math.floor(rnd() * names.length)]!;
      assert.equal(c.get(...at(n, i % 5)), n);
    }
  }
  // A name and another differing in its last byte only, alternately: never confused.
  for (let i = 0; i < 50; i++) {
    assert.equal(c.get(...at('ordersA')), 'ordersA');
    assert.equal(c.get(...at('ordersB')), 'ordersB');
  }
});

test('invalid UTF-8 reads as Buffer#toString reads it', () => {
  const c = new StringCache();
  const b = Buffer.from([0x61, 0xff, 0xfe, 0x62, 0xc3]);
  const want = b.toString('utf8', 0, b.length);
  assert.equal(c.get(b, 0, b.length), want);
  assert.equal(c.get(b, 0, b.length), want);
});

test('runs longer than the cache keeps are decoded every time', () => {
  const c = new StringCache();
  const long = 'q'.repeat(65);
  c.get(...at(long));
  c.get(...at(long));
  assert.equal(c.decoded, 2);
  const short = 'q'.repeat(64);
  c.get(...at(short));
  c.get(...at(short));
  assert.equal(c.decoded, 3);
});

test('a command peek decodes a repeated command\'s name, database and collection once', () => {
  const p = new CommandPeek();
  const cmd = Buffer.from(serialize({ find: 'peek_cache_orders', filter: { a: 1 }, $db: 'peek_cache_shop' }));
  p.read(cmd);
  const before = COMMAND_STRINGS.decoded;
  for (let i = 0; i < 50; i++) {
    p.read(Buffer.from(cmd));
    assert.equal(p.op, 'find');
    assert.equal(p.db, 'peek_cache_shop');
    assert.equal(p.collection, 'peek_cache_orders');
  }
  assert.equal(COMMAND_STRINGS.decoded, before);
  const more = Buffer.from(serialize({ getMore: 1n, collection: 'peek_cache_orders', $db: 'peek_cache_shop' }));
  p.read(more);
  const after = COMMAND_STRINGS.decoded;
  p.read(more);
  assert.equal(p.collection, 'peek_cache_orders');
  assert.equal(COMMAND_STRINGS.decoded, after);
});
