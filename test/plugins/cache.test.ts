import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { Long, Timestamp } from 'bson';
import { Verdict } from '../../sdk/testing/index.ts';
import { load, refuses } from './helpers.ts';

const findCmd = (filter: object, extra: object = {}) => ({ find: 'users', filter, ...extra, $db: 'app' });
const reply = (docs: object[], id = 0n) => ({ cursor: { firstBatch: docs, id: Long.fromBigInt(id), ns: 'app.users' }, ok: 1 });

function metric(text: string, name: string, pipeline: string): number {
  const m = new RegExp(`^${name}\\{pipeline_id="${pipeline}",pipeline="baseline"\\} (\\S+)$`, 'm').exec(text);
  return m ? Number(m[1]) : 0;
}

test('cache: miss stores, hit answers locally; session/gossip fields and field order do not matter', async () => {
  const h = await load('cache', {});
  const first = h.roundTrip(findCmd({ a: 1 }, { lsid: { id: 1 }, limit: 5 }),
    { ...reply([{ _id: 1, a: 1 }]), $clusterTime: { clusterTime: new Timestamp({ t: 1, i: 1 }) }, operationTime: new Timestamp({ t: 1, i: 1 }) });
  assert.equal(first.verdict, Verdict.Continue);
  const hit = h.request({ find: 'users', limit: 5, filter: { a: 1 }, lsid: { id: 2 }, $readPreference: { mode: 'primary' }, $db: 'app' });
  assert.equal(hit.verdict, Verdict.LocalReply);
  assert.deepEqual(hit.localReply, { cursor: { firstBatch: [{ _id: 1, a: 1 }], id: 0, ns: 'app.users' }, ok: 1 });
  assert.equal(h.request(findCmd({ a: 2 }, { limit: 5 })).verdict, Verdict.Continue, 'other filter misses');
  assert.equal(h.request({ find: 'users', filter: { a: 1 }, limit: 5, $db: 'other' }).verdict, Verdict.Continue, 'other db misses');
  const text = await h.metrics();
  assert.equal(metric(text, 'proxy_plugin_cache_hits_total', h.pipeline.id), 1);
  assert.equal(metric(text, 'proxy_plugin_cache_misses_total', h.pipeline.id), 3);
  assert.ok(h.subops.some((s) => s.name === 'cache.lookup'));
  assert.ok(h.subops.some((s) => s.name === 'cache.store'));
});

test('cache: only complete ok:1 replies of reads outside transactions are cached', async () => {
  const h = await load('cache', {});
  h.roundTrip(findCmd({ b: 1 }), reply([{ _id: 1 }], 42n)); // open cursor
  assert.equal(h.request(findCmd({ b: 1 })).verdict, Verdict.Continue);
  h.roundTrip(findCmd({ b: 2 }), { ok: 0, code: 50, errmsg: 'timeout' });
  assert.equal(h.request(findCmd({ b: 2 })).verdict, Verdict.Continue);
  h.roundTrip(findCmd({ b: 3 }, { autocommit: false, txnNumber: Long.fromNumber(1) }), reply([]));
  assert.equal(h.request(findCmd({ b: 3 }, { autocommit: false, txnNumber: Long.fromNumber(2) })).verdict, Verdict.Continue);
  h.roundTrip({ aggregate: 'users', pipeline: [{ $match: {} }, { $out: 'copy' }], cursor: {}, $db: 'app' }, reply([]));
  assert.equal(h.request({ aggregate: 'users', pipeline: [{ $match: {} }, { $out: 'copy' }], cursor: {}, $db: 'app' }).verdict, Verdict.Continue);
  // count and distinct (no cursor) are cached
  h.roundTrip({ count: 'users', query: {}, $db: 'app' }, { n: 3, ok: 1 });
  assert.deepEqual(h.request({ count: 'users', query: {}, $db: 'app' }).localReply, { n: 3, ok: 1 });
  h.roundTrip({ distinct: 'users', key: 'a', $db: 'app' }, { values: [1, 2], ok: 1 });
  assert.equal(h.request({ distinct: 'users', key: 'a', $db: 'app' }).verdict, Verdict.LocalReply);
  // `ok` is 1 as the host's status reads it: 1 as int32, int64 or double, or true; nothing else
  const okAs: [unknown, boolean][] = [[true, true], [Long.fromNumber(1), true], [1.0, true], [false, false], [0.5, false], [2, false],
    ['1', false], [{ v: 1 }, false]];
  for (const [i, [ok, cached]] of okAs.entries()) {
    const cmd = { count: 'users', query: { i }, $db: 'app' };
    h.roundTrip(cmd, { n: i, ok });
    assert.equal(h.request(cmd).verdict, cached ? Verdict.LocalReply : Verdict.Continue, `ok: ${JSON.stringify(ok)}`);
  }
});

test('cache: writes invalidate their collection (and only it); dropDatabase, $out, commit', async () => {
  const h = await load('cache', {});
  const prime = () => {
    h.roundTrip(findCmd({}), reply([{ _id: 1 }]));
    h.roundTrip({ find: 'orders', filter: {}, $db: 'app' }, reply([]));
    assert.equal(h.request(findCmd({})).verdict, Verdict.LocalReply);
  };
  prime();
  h.roundTrip({ insert: 'users', documents: [{ _id: 2 }], $db: 'app' }, { n: 1, ok: 1 });
  assert.equal(h.request(findCmd({})).verdict, Verdict.Continue, 'users invalidated');
  assert.equal(h.request({ find: 'orders', filter: {}, $db: 'app' }).verdict, Verdict.LocalReply, 'orders still cached');
  for (const write of [
    { update: 'users', updates: [{ q: {}, u: { $set: { x: 1 } } }], $db: 'app' },
    { delete: 'users', deletes: [], $db: 'app' },
    { findAndModify: 'users', query: {}, remove: true, $db: 'app' },
    { drop: 'users', $db: 'app' },
    { dropDatabase: 1, $db: 'app' },
    { aggregate: 'orders', pipeline: [{ $merge: { into: 'users' } }], cursor: {}, $db: 'app' },
    { renameCollection: 'app.users', to: 'app.people', $db: 'admin' },
  ]) {
    prime();
    h.roundTrip(write, { ok: 1 }, { collection: typeof Object.values(write)[0] === 'string' ? String(Object.values(write)[0]) : '' });
    assert.equal(h.request(findCmd({})).verdict, Verdict.Continue, `${Object.keys(write)[0]} invalidates`);
  }
  prime();
  h.roundTrip({ commitTransaction: 1, $db: 'admin' }, { ok: 1 });
  assert.equal(h.request(findCmd({})).verdict, Verdict.Continue, 'commit flushes');
});

test('cache: entries expire after ttl_ms', async () => {
  const h = await load('cache', { ttl_ms: 40 });
  h.roundTrip(findCmd({ t: 1 }), reply([]));
  assert.equal(h.request(findCmd({ t: 1 })).verdict, Verdict.LocalReply);
  await sleep(70);
  assert.equal(h.request(findCmd({ t: 1 })).verdict, Verdict.Continue);
});

test('cache: max_bytes evicts the oldest entries; max_entry_bytes skips big replies', async () => {
  const h = await load('cache', { max_bytes: 2048, max_entry_bytes: 1000 });
  const pad = 'x'.repeat(400);
  for (let i = 0; i < 6; i++) h.roundTrip(findCmd({ i }), reply([{ pad }]));
  assert.equal(h.request(findCmd({ i: 0 })).verdict, Verdict.Continue, 'oldest evicted');
  assert.equal(h.request(findCmd({ i: 5 })).verdict, Verdict.LocalReply, 'newest kept');
  assert.ok(h.kv.bytesUsed <= 2048 + 400, `kv holds ${h.kv.bytesUsed}`);
  h.roundTrip(findCmd({ big: 1 }), reply([{ pad: 'y'.repeat(1200) }]));
  assert.equal(h.request(findCmd({ big: 1 })).verdict, Verdict.Continue, 'too big to cache');
});

test('cache: proxy_plugin_cache_bytes is what the entries held take in the host store, as they are stored and evicted', async () => {
  const h = await load('cache', { max_bytes: 4096 });
  // Host bytes of everything but the entries: the generation counters and the version key.
  const counters = () => ['v', 'epoch', 'd:app', 'n:app.users'].reduce((n, k) => n + (h.kv.get(k) === undefined ? 0 : k.length * 2 + h.kv.get(k)!.length), 0);
  let evicting = false;
  for (let i = 0; i < 40; i++) {
    h.roundTrip(findCmd({ i }), reply([{ pad: 'x'.repeat(i * 7) }]));
    const gauge = metric(await h.metrics(), 'proxy_plugin_cache_bytes', h.pipeline.id);
    assert.equal(gauge, h.kv.bytesUsed - counters(), `after store ${i}`);
    assert.ok(gauge <= 4096);
    if (h.request(findCmd({ i: 0 })).verdict === Verdict.Continue) evicting = true;
  }
  assert.ok(evicting, 'the oldest entries were evicted along the way');
});

test('cache: a full host store (kv_max_bytes below max_bytes) evicts least recently used entries and keeps caching', async () => {
  const h = await load('cache', { max_bytes: 1 << 20 }, { kv_max_bytes: 1500 });
  const pad = 'x'.repeat(400);
  for (let i = 0; i < 8; i++) assert.notEqual(h.roundTrip(findCmd({ k: i }), reply([{ pad }])).verdict, Verdict.Reject);
  assert.ok(h.kv.bytesUsed <= 1500, `kv holds ${h.kv.bytesUsed}`);
  assert.equal(h.request(findCmd({ k: 7 })).verdict, Verdict.LocalReply, 'the newest entry is cached');
  assert.equal(h.request(findCmd({ k: 6 })).verdict, Verdict.LocalReply, 'and the one before');
  assert.equal(h.request(findCmd({ k: 0 })).verdict, Verdict.Continue, 'the oldest was evicted');
  h.roundTrip(findCmd({ k: 8 }), reply([{ pad }]));
  assert.equal(h.request(findCmd({ k: 8 })).verdict, Verdict.LocalReply, 'still admitting new entries');
  h.roundTrip({ insert: 'users', documents: [{}], $db: 'app' }, { ok: 1 });
  assert.equal(h.request(findCmd({ k: 8 })).verdict, Verdict.Continue, 'invalidation still works when full');
});

test('cache: with max_bytes at kv_max_bytes the host store evicts least recently used entries and the step deletes none', async () => {
  const h = await load('cache', { max_bytes: 4096 }, { kv_max_bytes: 4096 });
  let deletes = 0;
  const kv = h.kv as unknown as { deleteAt: (...a: unknown[]) => boolean };
  const deleteAt = kv.deleteAt.bind(kv);
  kv.deleteAt = (...a) => { deletes++; return deleteAt(...a); };
  const pad = 'x'.repeat(400);
  for (let i = 0; i < 3; i++) h.roundTrip(findCmd({ k: i }), reply([{ pad }]));
  assert.equal(h.request(findCmd({ k: 0 })).verdict, Verdict.LocalReply, 'k = 0 is hit, so the host keeps it');
  for (let i = 3; i < 12; i++) {
    h.roundTrip(findCmd({ k: i }), reply([{ pad }]));
    assert.equal(h.request(findCmd({ k: 0 })).verdict, Verdict.LocalReply, `k = 0 still hit after storing k = ${i}`);
  }
  assert.ok(h.kv.evictions > 0, 'the host store evicted');
  assert.equal(deletes, 0, 'the step deleted nothing');
  assert.ok(h.kv.bytesUsed <= 4096, `kv holds ${h.kv.bytesUsed}`);
  assert.equal(h.request(findCmd({ k: 0 })).verdict, Verdict.LocalReply, 'the entry kept hot is still cached (LRU, not oldest first)');
  assert.equal(h.request(findCmd({ k: 1 })).verdict, Verdict.Continue, 'an old entry never hit was evicted');
  assert.equal(h.request(findCmd({ k: 11 })).verdict, Verdict.LocalReply, 'the newest entry is cached');
  const gauge = metric(await h.metrics(), 'proxy_plugin_cache_bytes', h.pipeline.id);
  assert.ok(gauge > 0 && gauge <= 4096, `proxy_plugin_cache_bytes ${gauge}`);
  h.roundTrip({ insert: 'users', documents: [{}], $db: 'app' }, { ok: 1 });
  assert.equal(h.request(findCmd({ k: 11 })).verdict, Verdict.Continue, 'invalidation still works');
});

test('cache: a max_bytes above the step\'s kv_max_bytes is accepted with a warning naming both; none when the store holds it', async () => {
  const over = await load('cache', { max_bytes: 2 << 20 });
  const warnings = over.logs.filter((l) => l.level === 'warn').map((l) => l.msg);
  assert.equal(warnings.length, 1, warnings.join('\n'));
  assert.match(warnings[0]!, /max_bytes \(2097152\) is above the step's kv_max_bytes \(1048576\)/);
  assert.match(warnings[0]!, /raise kv_max_bytes/);
  const fits = await load('cache', { max_bytes: 2 << 20 }, { kv_max_bytes: 4 << 20 });
  assert.deepEqual(fits.logs.filter((l) => l.level === 'warn'), []);
  const dflt = await load('cache', {});
  assert.deepEqual(dflt.logs.filter((l) => l.level === 'warn'), [], 'the defaults (1 MiB each) fit');
});

test('cache: once the host store evicts on its own, the ledger no longer deletes an entry stored again since', async () => {
  // Entries of ~600 bytes: kv_max_bytes holds three, max_bytes six; the host's LRU binds first.
  const h = await load('cache', { max_bytes: 4000 }, { kv_max_bytes: 2000 });
  const pad = 'x'.repeat(400);
  for (let i = 0; i < 7; i++) h.roundTrip(findCmd({ k: i }), reply([{ pad }]));
  assert.ok(h.kv.evictions > 0, 'the host store evicted entries itself');
  // k = 2 is gone from the host but still in the ledger: a miss stores it again.
  assert.equal(h.request(findCmd({ k: 2 })).verdict, Verdict.Continue);
  h.roundTrip(findCmd({ k: 2 }), reply([{ pad }]));
  // Storing k = 7 drops the ledger's older record of k = 2 to stay within max_bytes; the entry
  // stored again stays in the host.
  h.roundTrip(findCmd({ k: 7 }), reply([{ pad }]));
  assert.equal(h.request(findCmd({ k: 2 })).verdict, Verdict.LocalReply, 'the entry stored again is still cached');
  assert.equal(h.request(findCmd({ k: 7 })).verdict, Verdict.LocalReply, 'the newest entry is cached');
  assert.ok(h.kv.bytesUsed <= 2000, `kv holds ${h.kv.bytesUsed}`);
});

test('cache: when deletes find their keys again, the ledger deletes again and max_bytes binds', async () => {
  // The host store holds far more than max_bytes (three entries of ~600 bytes).
  const h = await load('cache', { max_bytes: 2048 });
  const pad = 'x'.repeat(400);
  let n = 0;
  const store = (count: number) => { for (let i = 0; i < count; i++) h.roundTrip(findCmd({ n: n++ }), reply([{ pad }])); };
  store(10);
  const steady = h.kv.bytesUsed;
  assert.ok(steady <= 2048 + 400, `within max_bytes: kv holds ${steady}`);
  // Keys gone from under the ledger (as when another instance sharing the store deleted them):
  // its next delete finds nothing, and it stops deleting.
  h.kv.clear();
  store(100);
  const skipping = h.kv.bytesUsed;
  assert.ok(skipping > 4 * steady, `entries were dropped without a delete: kv holds ${skipping}`);
  // One drop in 64 still deletes; it finds its key, so every drop deletes again: no more growth.
  store(200);
  assert.ok(h.kv.bytesUsed <= skipping, `no growth once deleting again: ${h.kv.bytesUsed} after ${skipping}`);
  assert.ok(h.kv.bytesUsed < 64 * 700, `at most 63 entries left to their TTL beyond max_bytes: kv holds ${h.kv.bytesUsed}`);
  assert.equal(h.request(findCmd({ n: n - 1 })).verdict, Verdict.LocalReply, 'the newest entry is cached');
});

test('cache: an evicted generation counter never brings back entries from before a write', async () => {
  const h = await load('cache', {});
  h.roundTrip(findCmd({ s: 1 }), reply([{ _id: 1, v: 'old' }]));
  h.roundTrip({ insert: 'users', documents: [{ _id: 2 }], $db: 'app' }, { n: 1, ok: 1 });
  assert.equal(h.request(findCmd({ s: 1 })).verdict, Verdict.Continue, 'invalidated by the insert');
  h.roundTrip(findCmd({ s: 1 }), reply([{ _id: 1, v: 'new' }]));
  assert.equal(h.request(findCmd({ s: 1 })).verdict, Verdict.LocalReply);
  // A full store drops its least recently used keys: here the collection's counter and the version key.
  h.kv.delete('n:app.users');
  h.kv.delete('v');
  assert.equal(h.request(findCmd({ s: 1 })).verdict, Verdict.Continue, 'a miss: neither the entry from before the insert nor a stale one');
  h.roundTrip(findCmd({ s: 1 }), reply([{ _id: 1, v: 'new' }]));
  assert.deepEqual(h.request(findCmd({ s: 1 })).localReply, { cursor: { firstBatch: [{ _id: 1, v: 'new' }], id: 0, ns: 'app.users' }, ok: 1 });
});

test('cache: bad configs are refused', async () => {
  await refuses('cache', {}, { ttl_ms: 0 }, /ttl_ms must be/);
  await refuses('cache', {}, { max_bytes: 10 }, /max_bytes must be/);
  await refuses('cache', {}, { max_bytes: 4096, max_entry_bytes: 8192 }, /max_entry_bytes must be/);
  await refuses('cache', {}, { ops: ['insert'] }, /not cacheable/);
  await refuses('cache', {}, { ttl: 5 }, /unknown key "ttl"/);
});
