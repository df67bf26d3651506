// WebAssembly components as pipeline steps: examples/component-js (JavaScript, built with
// componentize-js by scripts/build-components.mjs) loaded through jco by PipelineManager, then
// through the proxy end to end with the mongodb driver. Also prints the per-call cost of a
// component step next to an AssemblyScript core module.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { MongoClient, MongoServerError } from 'mongodb';
import { PluginHarness, Verdict } from '../../sdk/testing/index.ts';
import { isComponentHeader, CALL_FAILED, PluginConfigRefusedError } from '../../runtime/wasm/index.ts';
import type { RunningProxy } from '../../runtime/app/serve.ts';
import { fixture } from './fixtures.ts';
import { Closes, withProxy } from '../helpers/proxy.ts';

const COMPONENT = resolve('build/components/component_js.wasm');
let built = false;

/** Runs the build script in a child process (it skips an up-to-date output). */
function buildComponent(): string {
  if (!built) {
    const r = spawnSync(process.execPath, ['scripts/build-components.mjs', 'component-js'], { encoding: 'utf8' });
    assert.equal(r.status, 0, `component build failed:\n${r.stdout}\n${r.stderr}`);
    built = true;
  }
  assert.ok(existsSync(COMPONENT));
  return COMPONENT;
}

let seq = 0;
// The embedded JS engine starts with 145 pages (9 MiB) of memory: above the harness default cap.
async function load(config: Record<string, unknown> = {}, onError: 'open' | 'closed' = 'open', fuel?: number): Promise<PluginHarness> {
  seq++;
  return PluginHarness.load(buildComponent(), {
    name: `component_js_t${seq}`, pipelineId: `comp${seq}`, config, on_error: onError, max_memory_pages: 256,
    ...(fuel !== undefined ? { fuel } : {}),
  });
}

test('component detection by header', async () => {
  assert.equal(isComponentHeader(readFileSync(buildComponent())), true);
  assert.equal(isComponentHeader(readFileSync(await fixture('continue'))), false);
  assert.equal(isComponentHeader(new Uint8Array([0, 0x61, 0x73, 0x6d, 1, 0, 0, 0])), false);
  assert.equal(isComponentHeader(new Uint8Array([0, 0x61, 0x73, 0x6d, 0x0d, 0, 1, 0])), true);
});

test('component step through PipelineManager: local reply, reject, pass-through, log, metric', async () => {
  const h = await load();
  const hello = h.request({ componentHello: 1, $db: 'admin' }, { op: 'componentHello' });
  assert.equal(hello.verdict, Verdict.LocalReply);
  assert.deepEqual(hello.localReply, { ok: 1, from: 'component' });
  // set-user and the wall-clock property (WIT `host`): the user is visible to later calls.
  const who = h.request({ componentWhoami: 1, $db: 'admin' }, { op: 'componentWhoami' });
  assert.deepEqual(who.localReply, { ok: 1, user: 'component-user', clock: 'wall' });
  assert.equal(who.exchange.conn.user, 'component-user');

  // body-find, the elapsed-ns property and log-fields (structured record)
  const inspect = h.request({ componentInspect: 1, needle: 'x', $db: 'admin' }, { op: 'componentInspect' });
  const offset = (inspect.localReply as { found: number }).found;
  assert.ok(offset > 0, 'the field name was found in the command bytes');
  assert.deepEqual(inspect.localReply, { ok: 1, found: offset, elapsed: 'yes' });
  const rec = h.logs.find((l) => l.fields.inspect === true);
  assert.ok(rec !== undefined, 'a structured record');
  assert.equal(rec.fields.found, offset);
  assert.equal(rec.fields.step, `wasm:component_js_t${seq}`);
  const missing = h.request({ componentInspect: 1, $db: 'admin' }, { op: 'componentInspect' });
  assert.equal((missing.localReply as { found: number }).found, -1);

  const drop = h.request({ drop: 'c', $db: 'x' }, { op: 'drop', db: 'x', collection: 'c' });
  assert.equal(drop.verdict, Verdict.Reject);
  assert.deepEqual(drop.reject, { code: 13, codeName: 'Unauthorized', message: 'component_js: drop is not allowed through this proxy' });

  const find = h.request({ find: 'c', filter: {}, $db: 'x' }, { op: 'find', db: 'x', collection: 'c' });
  assert.equal(find.verdict, Verdict.Continue);
  assert.equal(find.newRequest, null);
  assert.ok(h.logs.some((l) => l.level === 'info' && l.msg.startsWith('component_js: find x.c') && l.fields.step === `wasm:component_js_t${seq}`));
  assert.match(await h.metrics(), new RegExp(`proxy_plugin_component_js_ops_total\\{pipeline_id="comp${seq}",pipeline="baseline"\\} 6`));
});

test('component config: refusal is PluginConfigRefusedError, deny list from config', async () => {
  await assert.rejects(load({ log_level: 'loud' }), (err: unknown) => err instanceof PluginConfigRefusedError && /refused its config/.test(err.message));
  const h = await load({ deny: ['insert'], log: false });
  assert.equal(h.request({ insert: 'c', documents: [], $db: 'x' }, { op: 'insert' }).reject?.code, 13);
  assert.equal(h.request({ drop: 'c', $db: 'x' }, { op: 'drop' }).verdict, Verdict.Continue);
  assert.equal(h.logs.filter((l) => l.msg.startsWith('component_js:')).length, 0);
});

test('component trap: counted, instance rebuilt, on_error open continues, closed rejects', async () => {
  const h = await load({}, 'open');
  const slot = h.pipeline.steps.get(`component_js_t${seq}`)!.slot;
  const r = h.request({ componentTrap: 1, $db: 'x' }, { op: 'componentTrap' });
  assert.equal(r.verdict, Verdict.Continue, 'fail open');
  assert.equal(slot.traps, 1);
  assert.match(slot.lastError, /unreachable|trap/);
  assert.equal(slot.live, false);
  assert.deepEqual(h.request({ componentHello: 1, $db: 'admin' }, { op: 'componentHello' }).localReply, { ok: 1, from: 'component' }, 'fresh instance');
  assert.equal(slot.rebuilds, 1);
  assert.match(await h.metrics(),
    new RegExp(`proxy_step_errors_total\\{pipeline_id="comp${seq}",pipeline="baseline",step="wasm:component_js_t${seq}",phase="request"\\} 1`));

  const c = await load({}, 'closed');
  const rc = c.request({ componentTrap: 1, $db: 'x' }, { op: 'componentTrap' });
  assert.equal(rc.verdict, Verdict.Reject);
  assert.equal(rc.reject?.codeName, 'InternalError');
  const cslot = c.pipeline.steps.get(`component_js_t${seq}`)!.slot;
  for (let i = 0; i < 4; i++) c.request({ componentTrap: 1, $db: 'x' }, { op: 'componentTrap' });
  assert.equal(cslot.disabled, true, 'crash loop: disabled for the backoff period');
  assert.equal(cslot.call(c.request({ find: 'a', $db: 'x' }).exchange, 0), CALL_FAILED);
});

test('component that never returns: fuel runs out, the call fails, the next call works', async () => {
  const h = await load({}, 'open', 20_000_000);
  const slot = h.pipeline.steps.get(`component_js_t${seq}`)!.slot;
  const t0 = performance.now();
  const r = h.request({ componentSpin: 1, $db: 'x' }, { op: 'componentSpin' });
  const ms = performance.now() - t0;
  assert.equal(r.verdict, Verdict.Continue, 'fail open');
  assert.equal(slot.traps, 1);
  assert.match(slot.lastError, /fuel/i);
  assert.ok(ms < 30_000, `stopped after ${ms.toFixed(0)} ms`);
  // a normal call gets a full budget again (the host refuels every metered core instance)
  for (let i = 0; i < 3; i++) {
    assert.deepEqual(h.request({ componentHello: 1, $db: 'admin' }, { op: 'componentHello' }).localReply, { ok: 1, from: 'component' });
  }
  assert.equal(slot.traps, 1);
});

test('component memory is capped: a cap below its initial memory refuses the load', async () => {
  seq++;
  await assert.rejects(
    PluginHarness.load(buildComponent(), { name: `component_js_t${seq}`, pipelineId: `comp${seq}`, config: {}, max_memory_pages: 64 }),
    /pages at start, cap is 64/,
  );
});

test('per-call cost: component vs AssemblyScript core module', async () => {
  const N = 20_000;
  const measure = (h: PluginHarness, name: string, phase: 0 | 1, command: Record<string, unknown>, op: string): number => {
    const slot = h.pipeline.steps.get(name)!.slot;
    const ex = h.request(command, { op }).exchange;
    ex.phase = phase;
    for (let i = 0; i < 2000; i++) slot.call(ex, phase);
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < N; i++) slot.call(ex, phase);
    return Number(process.hrtime.bigint() - t0) / N;
  };
  const comp = await load({ log: false });
  const compName = `component_js_t${seq}`;
  const core = await PluginHarness.load(await fixture('continue'), { name: 'continue_cost', pipelineId: 'cost', record: false });
  const cmd = { find: 'c', filter: { a: 1 }, $db: 'x' };
  const rows = {
    'core idle on_response': measure(core, 'continue_cost', 1, cmd, 'find'),
    'component on-response (no host call)': measure(comp, compName, 1, cmd, 'find'),
    'core idle on_request': measure(core, 'continue_cost', 0, cmd, 'find'),
    'component on-request (get-property + increment-metric)': measure(comp, compName, 0, cmd, 'find'),
  };
  for (const [k, v] of Object.entries(rows)) console.log(`# cost ${k}: ${(v / 1000).toFixed(2)} µs/call`);
  assert.ok(rows['component on-response (no host call)'] < 1_000_000, 'a component call stays under 1 ms');
});

describe('component step through the proxy (mongodb driver)', () => {
  let proxy: RunningProxy;
  let client: MongoClient;
  const proxies = new Closes();

  before(async () => {
    ({ proxy } = await withProxy(proxies, {
      pipeline: { request: ['wasm:component_js'] },
      steps: { component_js: { module: buildComponent(), on_error: 'closed' } },
    }));
    client = new MongoClient(proxy.uri, { serverSelectionTimeoutMS: 5000, connectTimeoutMS: 5000 });
    await client.connect();
  });

  after(async () => {
    await client?.close();
    await proxies.run();
  });

  test('local reply, drop rejected with 13, CRUD passes, trap fails closed', { timeout: 60_000 }, async () => {
    const admin = client.db('admin');
    assert.deepEqual(await admin.command({ componentHello: 1 }), { ok: 1, from: 'component' });

    const c = client.db('comp_e2e').collection('items');
    await c.insertMany([{ _id: 1 as never, n: 1 }, { _id: 2 as never, n: 2 }]);
    assert.deepEqual(await c.find({ n: { $gte: 2 } }).toArray(), [{ _id: 2, n: 2 }]);
    assert.equal((await c.updateOne({ _id: 1 as never }, { $inc: { n: 10 } })).modifiedCount, 1);
    assert.equal((await c.deleteOne({ _id: 2 as never })).deletedCount, 1);
    assert.deepEqual(await c.find().toArray(), [{ _id: 1, n: 11 }]);

    await assert.rejects(c.drop(), (err: unknown) => err instanceof MongoServerError && err.code === 13 && /drop is not allowed/.test(err.message));
    assert.equal(await c.countDocuments(), 1, 'the drop did not reach the upstream');

    await assert.rejects(admin.command({ componentTrap: 1 }), (err: unknown) => err instanceof MongoServerError && err.code === 1 &&
      /component_js failed/.test(err.message));
    assert.match(await proxy.pipelines.host.registry.metrics(),
      /proxy_step_errors_total\{pipeline_id="default",pipeline="baseline",step="wasm:component_js",phase="request"\} 1/);
    assert.deepEqual(await admin.command({ componentHello: 1 }), { ok: 1, from: 'component' }, 'rebuilt after the trap');
  });
});
