// examples/redact: unit tests with the sdk/testing harness, then end to end with the `mongodb`
// driver through a proxy running the example (embedded devdb upstream).
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { join, resolve } from 'node:path';
import { Long } from 'bson';
import { MongoClient } from 'mongodb';
import { buildPlugins } from '../../scripts/build-plugins.mjs';
import { PluginHarness, Verdict } from '../../sdk/testing/index.ts';
import type { RunningProxy } from '../../runtime/app/serve.ts';
import { Logger } from '../../runtime/log/index.ts';
import { Closes, withProxy } from '../helpers/proxy.ts';

const OUT = resolve('build/plugins');
const CONFIG = { fields: ['ssn', 'card.number'], replacement: '***', collections: ['users'] };
let built: Promise<unknown> | null = null;
let seq = 0;

async function wasm(): Promise<string> {
  built ??= buildPlugins({ bases: ['examples'], outDir: OUT, log: () => {} });
  await built;
  return join(OUT, 'redact.wasm');
}

/** A harness under a fresh step name and pipeline id, so metrics of one test don't leak into another. */
async function load(config: Record<string, unknown> = CONFIG): Promise<PluginHarness> {
  seq++;
  return PluginHarness.load(await wasm(), { name: `redact_t${seq}`, pipelineId: `redact_p${seq}`, config });
}

const alice = { _id: 1, name: 'alice', ssn: '123-45-6789', card: { number: '4111111111111111', exp: '12/30' } };
const bob = { _id: 2, name: 'bob', ssn: 987654321, card: { exp: '01/29' } };
const carol = { _id: 3, name: 'carol' };

describe('redact with the harness', () => {
  test('find: fields of cursor.firstBatch are redacted, other fields and the envelope kept', async () => {
    const h = await load();
    const r = h.roundTrip({ find: 'users', filter: {}, $db: 'app' },
      { cursor: { firstBatch: [alice, bob, carol], id: new Long(0), ns: 'app.users' }, ok: 1 });
    assert.equal(r.verdict, Verdict.Continue);
    assert.deepEqual(r.newReply, {
      cursor: {
        firstBatch: [
          { _id: 1, name: 'alice', ssn: '***', card: { number: '***', exp: '12/30' } },
          { _id: 2, name: 'bob', ssn: '***', card: { exp: '01/29' } },
          carol,
        ],
        id: 0, ns: 'app.users',
      },
      ok: 1,
    });
    assert.match(await h.metrics(), new RegExp(`proxy_plugin_redact_fields_total\\{pipeline_id="${h.pipeline.id}",pipeline="baseline"\\} 3\\b`));
  });

  test('getMore: cursor.nextBatch is redacted (collection from the command)', async () => {
    const h = await load();
    const r = h.roundTrip({ getMore: new Long(42), collection: 'users', $db: 'app' },
      { cursor: { nextBatch: [alice], id: new Long(42), ns: 'app.users' }, ok: 1 }, { collection: 'users' });
    assert.deepEqual((r.newReply?.cursor as { nextBatch: unknown[] }).nextBatch,
      [{ _id: 1, name: 'alice', ssn: '***', card: { number: '***', exp: '12/30' } }]);
  });

  test('aggregate and findAndModify replies are redacted', async () => {
    const h = await load();
    const agg = h.roundTrip({ aggregate: 'users', pipeline: [], cursor: {}, $db: 'app' },
      { cursor: { firstBatch: [alice], id: new Long(0), ns: 'app.users' }, ok: 1 });
    assert.equal((agg.newReply?.cursor as { firstBatch: { ssn: string }[] }).firstBatch[0]!.ssn, '***');
    const fam = h.roundTrip({ findAndModify: 'users', query: { _id: 1 }, update: { $set: { x: 1 } }, $db: 'app' },
      { lastErrorObject: { n: 1, updatedExisting: true }, value: alice, ok: 1 });
    assert.deepEqual(fam.newReply, {
      lastErrorObject: { n: 1, updatedExisting: true },
      value: { _id: 1, name: 'alice', ssn: '***', card: { number: '***', exp: '12/30' } },
      ok: 1,
    });
  });

  test('field.redact is recorded as a sub-operation of wasm:<name> in the response phase', async () => {
    const h = await load();
    h.roundTrip({ find: 'users', filter: {}, $db: 'app' }, { cursor: { firstBatch: [alice], id: new Long(0), ns: 'app.users' }, ok: 1 });
    assert.deepEqual(h.subops.map((s) => [s.step, s.phase, s.name]), [[`wasm:${h.name}`, 1, 'field.redact']]);
  });

  test('h.records times each step call (docs/plugins.md §6): step, phase, durationNs, error', async () => {
    const h = await load();
    h.roundTrip({ find: 'users', filter: {}, $db: 'app' }, { cursor: { firstBatch: [alice], id: new Long(0), ns: 'app.users' }, ok: 1 });
    const response = h.records.filter((r) => r.phase === 1);
    assert.deepEqual(response.map((r) => [r.step, r.error]), [[`wasm:${h.name}`, false]]);
    assert.ok(h.records.every((r) => Number.isInteger(r.durationNs) && r.durationNs > 0 && !r.error), JSON.stringify(h.records));
    // The sub-operation is inside the step call that opened it.
    assert.ok(h.subops[0]!.durationNs <= response[0]!.durationNs);
  });

  test('other collections, other commands and replies with nothing to redact are left alone', async () => {
    const h = await load();
    const reply = { cursor: { firstBatch: [alice], id: new Long(0), ns: 'app.orders' }, ok: 1 };
    assert.equal(h.roundTrip({ find: 'orders', filter: {}, $db: 'app' }, reply).newReply, null);
    assert.equal(h.roundTrip({ insert: 'users', $db: 'app' }, { n: 1, ok: 1 }).newReply, null);
    assert.equal(h.roundTrip({ find: 'users', filter: {}, $db: 'app' },
      { cursor: { firstBatch: [carol], id: new Long(0), ns: 'app.users' }, ok: 1 }).newReply, null);
  });

  test('without collections every collection is redacted; the replacement is configurable', async () => {
    const h = await load({ fields: ['ssn'], replacement: '[hidden]' });
    const r = h.roundTrip({ find: 'orders', filter: {}, $db: 'app' },
      { cursor: { firstBatch: [{ _id: 9, ssn: 'x' }], id: new Long(0), ns: 'app.orders' }, ok: 1 });
    assert.deepEqual((r.newReply?.cursor as { firstBatch: unknown[] }).firstBatch, [{ _id: 9, ssn: '[hidden]' }]);
  });

  test('a config without fields (or with bad fields) is refused with the reason logged', async () => {
    const path = await wasm();
    for (const [bad, why] of [
      [{ replacement: '***' }, /config\.fields is required/],
      [{ fields: [] }, /non-empty array/],
      [{ fields: ['ssn', 3] }, /non-empty array of non-empty strings/],
      [{ fields: ['ssn'], collections: 'users' }, /collections must be an array/],
    ] as const) {
      const h = await load();
      const before = h.logs.length;
      await assert.rejects(h.reload(path, { config: bad as Record<string, unknown> }), /refused its config/);
      assert.ok(h.logs.slice(before).some((l) => l.level === 'error' && why.test(l.msg)), `${JSON.stringify(bad)}: ${why}`);
    }
  });
});

describe('redact end to end: mongodb driver → proxy → devdb', () => {
  let proxy: RunningProxy;
  let client: MongoClient;
  let getMores = 0;
  const proxies = new Closes();

  before(async () => {
    const module = await wasm();
    ({ proxy } = await withProxy(proxies, {
      pipeline: { response: ['wasm:redact'] },
      steps: { redact: { module, config: CONFIG } },
    }, { log: new Logger('test', 'error') }));
    client = new MongoClient(proxy.uri, { serverSelectionTimeoutMS: 5000, monitorCommands: true });
    client.on('commandStarted', (e) => { if (e.commandName === 'getMore') getMores++; });
    await client.connect();
  });

  after(async () => {
    await client?.close();
    await proxies.run();
  });

  test('every ssn and card.number is redacted across find and getMore batches; the rest is untouched', { timeout: 60_000 }, async () => {
    const db = client.db('redact_e2e');
    const col = (name: string) => db.collection<{ _id: number; [k: string]: unknown }>(name);
    const users = Array.from({ length: 25 }, (_, i) => ({
      _id: i, name: `user${i}`, ssn: `000-00-${String(i).padStart(4, '0')}`,
      card: { number: `4000${String(i).padStart(12, '0')}`, exp: '12/30' }, tags: ['a', 'b'],
    }));
    await col('users').insertMany(users);
    await col('orders').insertMany(users.map((u) => ({ _id: u._id, ssn: u.ssn, card: u.card })));

    const found = await col('users').find({}, { batchSize: 4, sort: { _id: 1 } }).toArray();
    assert.equal(found.length, users.length);
    assert.ok(getMores >= 6, `find used getMore batches (${getMores})`);
    for (const [i, doc] of found.entries()) {
      const u = users[i]!;
      assert.deepEqual(doc, { ...u, ssn: '***', card: { number: '***', exp: '12/30' } });
    }

    const agg = await col('users').aggregate([{ $match: { _id: { $lt: 10 } } }, { $sort: { _id: 1 } }], { batchSize: 3 }).toArray();
    assert.equal(agg.length, 10);
    assert.ok(agg.every((d) => d.ssn === '***' && d.card.number === '***' && d.name === `user${d._id}`));

    const fam = await col('users').findOneAndUpdate({ _id: 0 }, { $set: { seen: true } }, { returnDocument: 'after' });
    assert.equal(fam?.ssn, '***');
    assert.equal(fam?.seen, true);

    const orders = await col('orders').find({}, { batchSize: 4, sort: { _id: 1 } }).toArray();
    assert.deepEqual(orders, users.map((u) => ({ _id: u._id, ssn: u.ssn, card: u.card })));

    const metrics = await proxy.pipelines.host.registry.metrics();
    const m = /proxy_plugin_redact_fields_total\{pipeline_id="default",pipeline="baseline"\} (\d+)/.exec(metrics);
    assert.equal(Number(m?.[1]), 2 * 25 + 2 * 10 + 2, 'two fields per user: find, aggregate, findAndModify');
  });
});
