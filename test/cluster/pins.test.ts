// Cursors and transactions across workers: `proxy serve --workers 2` in front of a devdb replica
// set of 3 (each member refuses a getMore for a cursor it did not open). The real driver, with a
// pool of 16 connections spread over both workers, reads from secondaries in small batches — its
// getMores land on connections of either worker — and runs transactions: zero CursorNotFound, zero
// transaction errors, and the primary answered where other workers' cursors live. In front of a
// mongos list, every statement of a transaction reaches the router it started on, whichever worker
// receives it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MongoClient } from 'mongodb';
import { DevMongos, DevReplicaSet } from '../../runtime/devdb/index.ts';
import { freePort } from '../helpers/ports.ts';
import { spawnServe } from '../helpers/serve.ts';
import type { WorkersView } from '../../runtime/http/surface.ts';

const TOKEN = 'pins-test-token-0123456';

test('with 2 workers and a replica set: getMores and transactions reach their server whichever worker gets them', { timeout: 240_000 }, async () => {
  const rs = await DevReplicaSet.start(3);
  const [port, adminPort] = [await freePort(), await freePort()];
  const file = join(mkdtempSync(join(tmpdir(), 'proxy-pins-')), 'proxy.json');
  writeFileSync(file, JSON.stringify({
    listen: `127.0.0.1:${port}`, log: { level: 'warn' }, upstream: { uri: rs.uri() },
    admin: { listen: `127.0.0.1:${adminPort}`, token: TOKEN, reload_on_change: false },
  }));
  const served = await spawnServe(['--config', file, '--workers', '2']);
  const client = new MongoClient(`mongodb://127.0.0.1:${port}/?maxPoolSize=16&minPoolSize=16`);
  try {
    const col = client.db('pins').collection<{ i?: number; j?: number; k?: number }>('c');
    await col.insertMany(Array.from({ length: 200 }, (_, i) => ({ i })));
    const workers = async () => (await (await fetch(`http://127.0.0.1:${adminPort}/api/v1/workers`, {
      headers: { authorization: `Bearer ${TOKEN}` } })).json()) as WorkersView;
    const errors: string[] = [];
    let complete = 0;
    await Promise.all(Array.from({ length: 16 }, async () => {
      for (let k = 0; k < 5; k++) {
        try {
          const docs = await col.find({ i: { $exists: true } }, { batchSize: 10, readPreference: 'secondary' }).toArray();
          if (docs.length === 200) complete++;
        } catch (err) {
          errors.push((err as Error).message);
        }
      }
    }));
    assert.deepEqual(errors, [], 'no CursorNotFound (nor any other error)');
    assert.equal(complete, 80, 'every cursor read to its end');
    const view = await workers();
    assert.ok(view.workers.every((w) => w.connections_active > 0), 'the pool spans both workers');
    assert.ok(view.pin_lookups.found > 0, `getMores crossed workers and found their cursor: ${JSON.stringify(view.pin_lookups)}`);
    const txnErrors: string[] = [];
    await Promise.all(Array.from({ length: 8 }, async (_, j) => {
      const session = client.startSession();
      try {
        await session.withTransaction(async () => {
          for (let k = 0; k < 5; k++) await col.insertOne({ j, k }, { session });
          assert.equal((await col.find({ j }, { session }).toArray()).length, 5);
        });
      } catch (err) {
        txnErrors.push((err as Error).message);
      } finally {
        await session.endSession();
      }
    }));
    assert.deepEqual(txnErrors, [], 'no transaction error');
    assert.equal(await col.countDocuments({ j: { $exists: true } }), 40);
  } finally {
    await client.close();
    assert.equal(await served.stop(), 0);
    await rs.close();
  }
});

test('with 2 workers and a mongos list: every statement of a transaction reaches the router it started on', { timeout: 240_000 }, async () => {
  const routers = await DevMongos.startMany(3);
  const [port, adminPort] = [await freePort(), await freePort()];
  const file = join(mkdtempSync(join(tmpdir(), 'proxy-pins-')), 'proxy.json');
  writeFileSync(file, JSON.stringify({
    // Every router within the latency window, so each transaction starts on any of the three.
    listen: `127.0.0.1:${port}`, log: { level: 'warn' }, upstream: { uri: `mongodb://${routers.map((r) => r.address).join(',')}/`,
      local_threshold_ms: 10_000 },
    admin: { listen: `127.0.0.1:${adminPort}`, token: TOKEN, reload_on_change: false },
  }));
  const served = await spawnServe(['--config', file, '--workers', '2']);
  const client = new MongoClient(`mongodb://127.0.0.1:${port}/?maxPoolSize=16&minPoolSize=16`);
  try {
    const col = client.db('pins').collection<{ _id: string; n: number }>('txn');
    await col.insertOne({ _id: 'warm', n: 0 });
    const used = new Set<number>();
    // Each worker picks routers round robin, so a run whose every transaction makes the same number
    // of selections could start them all on one router: reads of varying number in between move
    // the rotation, and the run goes on (up to 30) until transactions started on two routers.
    for (let k = 0; k < 30 && (k < 10 || used.size < 2); k++) {
      for (let i = 0; i <= k % 4; i++) await col.findOne({ _id: 'warm' });
      for (const r of routers) r.resetCounts();
      const session = client.startSession();
      try {
        session.startTransaction();
        // The first statement starts the transaction; the next four go out at once, on four pooled
        // connections (the driver reuses the last returned connection for sequential operations).
        await col.insertOne({ _id: `${k}-0`, n: 0 }, { session });
        await Promise.all([1, 2, 3, 4].map((i) => col.insertOne({ _id: `${k}-${i}`, n: i }, { session })));
        await session.commitTransaction();
      } finally {
        await session.endSession();
      }
      const on = routers.findIndex((r) => r.count('commitTransaction') === 1);
      assert.ok(on >= 0, 'committed on one router');
      assert.equal(routers[on].count('insert'), 5, `every insert on router ${on}`);
      assert.equal(routers.reduce((n, r) => n + r.count('insert'), 0), 5, 'nothing elsewhere');
      used.add(on);
    }
    const view = await (await fetch(`http://127.0.0.1:${adminPort}/api/v1/workers`, { headers: { authorization: `Bearer ${TOKEN}` } })).json() as WorkersView;
    assert.ok(view.pin_lookups.found > 0, `statements crossed workers and found their router: ${JSON.stringify(view.pin_lookups)}`);
    assert.ok(used.size >= 2, 'transactions started on several routers (so staying on one is not an accident)');
  } finally {
    await client.close();
    assert.equal(await served.stop(), 0);
    for (const r of routers) await r.server!.close();
  }
});
