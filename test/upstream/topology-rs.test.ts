// A replica set behind the proxy: discovery from one seed, writes to the primary, read preference to
// secondaries (mode, tags, maxStalenessSeconds), cursors continued on the member that opened them,
// and failover under load with the real Node driver. The upstream is devdb as a replica set (one
// process, one data engine, a port per member); each member counts the commands it served, and
// refuses what a real member would (writes on a secondary, getMore of a cursor it did not open).
import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import { performance } from 'node:perf_hooks';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { MongoClient, ReadPreference, type CommandFailedEvent } from 'mongodb';
import { DevReplicaSet } from '../../runtime/devdb/index.ts';
import type { RunningProxy } from '../../runtime/app/serve.ts';
import { until } from '../helpers/until.ts';
import { Closes, withProxy } from '../helpers/proxy.ts';

let rs: DevReplicaSet;
const proxies = new Closes();
const clients: MongoClient[] = [];

before(async () => {
  rs = await DevReplicaSet.start(3, 'rs0');
});
after(async () => {
  for (const c of clients) await c.close(true);
  await proxies.run();
  await rs.close();
});

async function proxyFor(uri: string, upstream: Record<string, unknown> = {}): Promise<RunningProxy> {
  const { proxy } = await withProxy(proxies, { upstream: { uri, connect_timeout_ms: 2000, ...upstream } });
  return proxy;
}

function client(p: RunningProxy, opts: ConstructorParameters<typeof MongoClient>[1] = {}): MongoClient {
  const c = new MongoClient(p.uri, { serverSelectionTimeoutMS: 15000, ...opts });
  clients.push(c);
  return c;
}

const sum = (name: string, idx: number[]) => idx.reduce((n, i) => n + rs.members[i].count(name), 0);

test('discovery from a seed list of one secondary: all three members found, the primary known', async () => {
  const p = await proxyFor(rs.uri([1]));
  const t = p.server.router.topology!;
  assert.ok(t !== null, 'a replicaSet= URI runs a topology');
  await until('three members and a primary', () => t.usableServers.length === 3 && t.primary !== null);
  assert.equal(t.kind, 'ReplicaSet');
  assert.equal(t.setName, 'rs0');
  assert.equal(t.primary!.address, rs.members[0].address);
});

test('writes and primary reads go to the primary; readPreference=secondary reads go to secondaries', async () => {
  const p = await proxyFor(rs.uri([0]));
  await until('a primary', () => p.server.router.topology!.primary !== null && p.server.router.topology!.usableServers.length === 3);
  rs.resetCounts();
  const c = client(p);
  const col = c.db('app').collection<{ _id: number; v: number }>('rp');
  for (let i = 0; i < 10; i++) await col.insertOne({ _id: i, v: i });
  assert.equal(rs.members[0].count('insert'), 10, 'every insert on the primary');
  assert.equal(sum('insert', [1, 2]), 0);
  for (let i = 0; i < 5; i++) assert.equal((await col.findOne({ _id: i }))?.v, i);
  assert.equal(rs.members[0].count('find'), 5, 'primary reads on the primary');
  const sec = client(p, { readPreference: 'secondary' }).db('app').collection<{ _id: number; v: number }>('rp');
  for (let i = 0; i < 20; i++) assert.equal((await sec.findOne({ _id: i % 10 }))?.v, i % 10);
  assert.equal(rs.members[0].count('find'), 5, 'no secondary read reached the primary');
  assert.equal(sum('find', [1, 2]), 20);
  assert.ok(rs.members[1].count('find') > 0 && rs.members[2].count('find') > 0, 'spread over both secondaries');
});

test('PyMongo: writes reach the primary, readPreference=secondary reads a secondary', async () => {
  const p = await proxyFor(rs.uri([2]));
  const t = p.server.router.topology!;
  await until('three members', () => t.usableServers.length === 3 && t.primary !== null);
  rs.resetCounts();
  const script = [
    'import sys, pymongo',
    'c = pymongo.MongoClient(sys.argv[1], serverSelectionTimeoutMS=10000)',
    'c.app.py.insert_one({"_id": "py"})',
    'sec = c.get_database("app", read_preference=pymongo.ReadPreference.SECONDARY).py',
    'print(sum(1 for _ in range(5) if sec.find_one({"_id": "py"}) is not None))',
  ].join('\n');
  // Asynchronously: the proxy runs in this process and must keep answering.
  const out = (await promisify(execFile)('/usr/bin/python3', ['-c', script, p.uri], { timeout: 60_000 })).stdout.trim();
  assert.equal(out, '5');
  assert.equal(rs.members[0].count('insert'), 1);
  assert.equal(sum('find', [1, 2]), 5);
  assert.equal(rs.members[0].count('find'), 0);
});

test('read preference tags and maxStalenessSeconds pick the matching, fresh secondary', async () => {
  rs.members[1].tags = { dc: 'west' };
  rs.members[2].tags = { dc: 'east' };
  const p = await proxyFor(rs.uri([0]));
  const t = p.server.router.topology!;
  await until('tags seen', () => t.usableServers.some((s) => s.tags.dc === 'east') && t.usableServers.length === 3);
  rs.resetCounts();
  const east = client(p, { readPreference: new ReadPreference('secondary', [{ dc: 'east' }]) }).db('app').collection('rp');
  for (let i = 0; i < 6; i++) await east.findOne({});
  assert.equal(rs.members[2].count('find'), 6);
  assert.equal(rs.members[1].count('find'), 0);
  // No secondary matches the tag set: secondaryPreferred reads the primary.
  const none = client(p, { readPreference: new ReadPreference('secondaryPreferred', [{ dc: 'mars' }]) }).db('app').collection('rp');
  await none.findOne({});
  assert.equal(rs.members[0].count('find'), 1);
  rs.resetCounts();
  // Member 1 lags 200 s: with maxStalenessSeconds 90 only member 2 is fresh enough.
  rs.members[1].lagMs = 200_000;
  rs.members[1].tags = {};
  rs.members[2].tags = {};
  await until('lag seen', () => t.usableServers.some((s) => s.address === rs.members[1].address && Date.now() - s.lastWriteDate > 150_000), 15000);
  const fresh = client(p, { readPreference: new ReadPreference('secondary', undefined, { maxStalenessSeconds: 90 }) }).db('app').collection('rp');
  for (let i = 0; i < 6; i++) await fresh.findOne({});
  assert.equal(rs.members[2].count('find'), 6);
  assert.equal(rs.members[1].count('find'), 0);
  rs.members[1].lagMs = 0;
});

test('an invalid $readPreference is answered with an error document; the connection keeps working', async () => {
  const p = await proxyFor(rs.uri([0]));
  await until('a primary', () => p.server.router.topology!.primary !== null);
  const db = client(p).db('app');
  await assert.rejects(db.command({ find: 'rp', $readPreference: { mode: 'sideways' } }), (e: Error & { code?: number }) =>
    e.code === 9 && /mode "sideways"/.test(e.message));
  await assert.rejects(db.command({ find: 'rp', $readPreference: { mode: 'secondary', maxStalenessSeconds: 5 } }), (e: Error & { code?: number }) =>
    e.code === 2 && /maxStalenessSeconds 5/.test(e.message));
  assert.equal((await db.command({ ping: 1 })).ok, 1);
});

test('a cursor opened on a secondary is continued there (getMore, killCursors) and its pin is dropped at the end', async () => {
  const p = await proxyFor(rs.uri([0]));
  const t = p.server.router.topology!;
  await until('three members', () => t.usableServers.length === 3);
  const w = client(p).db('app').collection<{ _id: number }>('cur');
  await w.insertMany(Array.from({ length: 60 }, (_, i) => ({ _id: i })));
  rs.resetCounts();
  const col = client(p, { readPreference: 'secondary' }).db('app').collection<{ _id: number }>('cur');
  // Several cursors at once, so both secondaries open some; devdb refuses a getMore elsewhere.
  const cursors = Array.from({ length: 4 }, () => col.find({}, { batchSize: 7 }));
  const firsts = await Promise.all(cursors.map((c) => c.next()));
  assert.ok(firsts.every((d) => d !== null));
  assert.ok(p.server.router.pinnedCursors >= 4, `pins: ${p.server.router.pinnedCursors}`);
  const all = await Promise.all(cursors.map(async (c) => 1 + (await c.toArray()).length));
  assert.deepEqual(all, [60, 60, 60, 60]);
  assert.ok(sum('getMore', [1, 2]) >= 4 * 8, 'getMores on the secondaries');
  assert.equal(rs.members[0].count('getMore'), 0);
  assert.equal(p.server.router.pinnedCursors, 0, 'exhausted cursors are unpinned');
  const open = col.find({}, { batchSize: 5 });
  await open.next();
  assert.equal(p.server.router.pinnedCursors, 1);
  await open.close();
  assert.equal(p.server.router.pinnedCursors, 0, 'killCursors drops the pin');
  assert.equal(sum('killCursors', [1, 2]), 1);
});

test('a transaction in a replica set runs on the primary; after a step-down mid-transaction the driver runs it again on the new primary', async () => {
  const p = await proxyFor(rs.uri([0]));
  const t = p.server.router.topology!;
  await until('primary 0', () => t.primary?.address === rs.members[0].address && t.usableServers.length === 3);
  rs.resetCounts();
  const c = client(p);
  const col = c.db('app').collection<{ _id: string }>('txn');
  let attempts = 0;
  const session = c.startSession();
  try {
    await session.withTransaction(async () => {
      attempts++;
      await col.insertOne({ _id: `t${attempts}-a` }, { session });
      if (attempts === 1) {
        assert.equal(p.server.router.pinnedTransactions, 1);
        rs.stepDown(1);
      }
      await col.insertOne({ _id: `t${attempts}-b` }, { session });
    });
  } finally {
    await session.endSession();
  }
  assert.equal(attempts, 2, 'the first attempt failed on the old primary, the second succeeded');
  assert.equal(rs.members[0].count('insert'), 2, 'first attempt: both statements went to the pinned primary');
  assert.equal(rs.members[1].count('insert'), 2, 'second attempt: on the new primary');
  assert.equal(rs.members[1].count('commitTransaction'), 1);
  assert.equal(rs.members[0].count('commitTransaction') + rs.members[2].count('commitTransaction'), 0);
  assert.equal(p.server.router.pinnedTransactions, 0);
  rs.stepDown(0);
});

test('failover under load: the primary steps down; no hang, retryable errors only, the driver retries, traffic resumes on the new primary', async () => {
  const p = await proxyFor(rs.uri([0, 1, 2]));
  const t = p.server.router.topology!;
  await until('primary 0', () => t.primary?.address === rs.members[0].address && t.usableServers.length === 3);
  const c = client(p, { monitorCommands: true, maxPoolSize: 20 });
  const failures: CommandFailedEvent[] = [];
  c.on('commandFailed', (e) => failures.push(e));
  const col = c.db('app').collection<{ _id: string; w: number }>('failover');
  let stop = false;
  let ok = 0;
  let slowest = 0;
  const errors: Error[] = [];
  const worker = async (w: number) => {
    for (let i = 0; !stop; i++) {
      const t0 = performance.now();
      try {
        await col.insertOne({ _id: `${w}-${i}`, w });
        await col.findOne({ _id: `${w}-${i}` });
        ok++;
      } catch (err) {
        errors.push(err as Error);
      }
      slowest = Math.max(slowest, performance.now() - t0);
    }
  };
  const running = Array.from({ length: 8 }, (_, w) => worker(w));
  await until('some traffic', () => ok > 50);
  const before = rs.members[1].count('insert');
  const steppedAt = performance.now();
  // The replSetStepDown command, sent to the primary directly.
  const direct = new MongoClient(`mongodb://${rs.members[0].address}/?directConnection=true`);
  clients.push(direct);
  assert.equal((await direct.db('admin').command({ replSetStepDown: 60 })).ok, 1);
  await until('inserts on the new primary', () => rs.members[1].count('insert') > before + 20, 10000);
  const resumedMs = performance.now() - steppedAt;
  const okAtResume = ok;
  await until('more traffic after the failover', () => ok > okAtResume + 50);
  stop = true;
  await Promise.all(running);
  assert.deepEqual(errors.map((e) => e.message), [], 'every operation succeeded (with the driver\'s retry)');
  assert.ok(resumedMs < 8000, `traffic resumed after ${Math.round(resumedMs)} ms`);
  assert.ok(slowest < 15000, `no operation hung (slowest ${Math.round(slowest)} ms)`);
  assert.equal(t.primary?.address, rs.members[1].address);
  assert.ok(failures.length > 0, 'the step-down hit requests in flight (the old primary refused them)');
  for (const f of failures) {
    const code = (f.failure as { code?: number }).code;
    const labels = (f.failure as { errorLabels?: string[] }).errorLabels ?? [];
    assert.ok(labels.includes('RetryableWriteError') || [6, 89, 133].includes(code ?? -1),
      `a retryable error: ${f.commandName} ${code} ${f.failure.message} ${labels}`);
    // The old primary's NotWritablePrimary / NotPrimaryNoSecondaryOk reach the driver as
    // HostUnreachable: a state-change code would make it mark the proxy itself Unknown.
    assert.ok(![10107, 13435, 11602, 13436, 189, 91, 11600].includes(code ?? -1), `no state-change code reaches the driver: ${f.commandName} ${code}`);
  }
  assert.ok(p.server.stats.stateChangeErrorsRewritten > 0, 'the old primary\'s refusals were rewritten');
  rs.stepDown(0);
});

test('failover when the primary dies: network errors are retryable, the new primary takes the traffic', async () => {
  const p = await proxyFor(rs.uri([0, 1, 2]));
  const t = p.server.router.topology!;
  await until('primary 0', () => t.primary?.address === rs.members[0].address && t.usableServers.length === 3, 15000);
  const c = client(p, { maxPoolSize: 10 });
  const col = c.db('app').collection<{ _id: string }>('dies');
  let stop = false;
  let ok = 0;
  const errors: Error[] = [];
  const running = Array.from({ length: 4 }, async (_, w) => {
    for (let i = 0; !stop; i++) {
      try {
        await col.insertOne({ _id: `${w}-${i}` });
        ok++;
      } catch (err) {
        errors.push(err as Error);
      }
    }
  });
  await until('some traffic', () => ok > 30);
  rs.stepDown(2);
  await rs.kill(0);
  const at = ok;
  await until('traffic on member 2', () => rs.members[2].count('insert') > 30 && ok > at + 30, 10000);
  stop = true;
  await Promise.all(running);
  assert.deepEqual(errors.map((e) => e.message), []);
  assert.equal(t.primary?.address, rs.members[2].address);
});
