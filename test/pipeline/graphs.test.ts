// Two graphs of one pipeline side by side: each request runs through the graph the selector picks
// for it, keys identify graph and generation, and rejections are counted per graph, step and code.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { PipelineManager, PercentSelector, Verdict, type PipelineConfig } from '../../runtime/pipeline/index.ts';
import { BUILTIN_PLUGIN_DIR } from '../../runtime/app/serve.ts';
import { makeExchange } from '../../sdk/testing/index.ts';

const quiet = { trace() {}, debug() {}, info() {}, warn() {}, error() {} };

function filterConfig(id: string, denied: string[]): PipelineConfig {
  return {
    pipeline: { id, request: ['filter'], response: [] },
    steps: {
      filter: {
        module: join(BUILTIN_PLUGIN_DIR, 'filter.wasm'), max_memory_pages: 64,
        config: { rules: [{ name: 'deny-some', action: 'deny', ops: denied }], default: 'allow' },
      },
    },
  };
}

test('baseline and candidate run side by side; the selector picks per request; keys name variant and generation', async () => {
  const m = new PipelineManager({ logger: quiet, pluginDir: BUILTIN_PLUGIN_DIR });
  const base = await m.load(filterConfig('orders', ['drop']));
  assert.equal(base.key.toString(), 'orders/baseline#1');
  const cand = await m.build(filterConfig('orders', ['drop', 'delete']), 'candidate');
  assert.equal(cand.key.toString(), 'orders/candidate#1');
  const slot = m.slot('orders');
  assert.equal(slot.pick(ANY_CLIENT, NO_BODY, -1), base, 'no candidate yet: the baseline serves');

  // A draw sequence makes the split deterministic: 10 → candidate (below 30), 50 → baseline.
  const draws = [0.1, 0.5, 0.2, 0.9];
  let i = 0;
  m.setCandidate('orders', cand, new PercentSelector(30, () => draws[i++ % draws.length]));
  const verdicts: string[] = [];
  for (let k = 0; k < 4; k++) {
    const g = slot.pick(ANY_CLIENT, NO_BODY, -1);
    const ex = makeExchange({ delete: 'c', deletes: [], $db: 'app' }, 'orders');
    g.runRequest(ex);
    verdicts.push(`${g.key.variant}:${ex.verdict === Verdict.Reject ? 'rejected' : 'passed'}`);
  }
  assert.deepEqual(verdicts, ['candidate:rejected', 'baseline:passed', 'candidate:rejected', 'baseline:passed']);

  // Rejections are counted per graph, step and code; the baseline's stay separate.
  const counts = new Map([...m.rejectionCounts()].map(([k, c]) => [k.replace('\0', '/'), [...c.all()]]));
  assert.deepEqual(counts.get('orders/candidate')?.map((r) => [r.step, r.count]), [['wasm:filter', 2]]);
  assert.equal(counts.get('orders/baseline')?.length ?? 0, 0);

  // A reload bumps the generation and keeps the candidate; removing the candidate leaves the baseline.
  const base2 = await m.load(filterConfig('orders', ['drop']));
  assert.equal(base2.key.toString(), 'orders/baseline#2');
  assert.equal(slot.baseline, base2);
  assert.equal(slot.candidate, cand);
  m.setCandidate('orders', null);
  assert.equal(slot.pick(ANY_CLIENT, NO_BODY, -1), base2);
  assert.throws(() => m.setCandidate('orders', base2), /not a candidate/);
});

test('rejection counts are capped per graph: past the cap a pair counts as code "other"', async () => {
  const { RejectionCounts, MAX_REJECTION_SERIES } = await import('../../runtime/pipeline/index.ts');
  const c = new RejectionCounts();
  for (let code = 0; code < MAX_REJECTION_SERIES + 10; code++) c.add('wasm:x', code);
  const all = [...c.all()];
  assert.equal(all.length, MAX_REJECTION_SERIES + 1);
  assert.equal(all.find((r) => r.code === 'other')?.count, 10);
  assert.equal(c.total(), MAX_REJECTION_SERIES + 10);
});

// ---- host state per graph: kv stores ------------------------------------------------------

import { Long, serialize } from 'bson';

/** Who asks, for slot.pick(): any client, a command without an lsid. */
const ANY_CLIENT = { id: 1, appName: '', clientAddress: '127.0.0.1:1', user: '' };
const NO_BODY = new Uint8Array(0);

function cacheConfig(id: string, ttlMs: number, kvMaxBytes?: number): PipelineConfig {
  return {
    pipeline: { id, request: ['cache'], response: ['cache'] },
    steps: {
      cache: {
        module: join(BUILTIN_PLUGIN_DIR, 'cache.wasm'), max_memory_pages: 64, config: { ttl_ms: ttlMs },
        ...(kvMaxBytes !== undefined ? { kv_max_bytes: kvMaxBytes } : {}),
      },
    },
  };
}

/** One find through `g`: request phase, then (unless answered locally) the response phase over `docs`. */
function find(g: import('../../runtime/pipeline/index.ts').Pipeline, docs: object[]): Verdict {
  const ex = makeExchange({ find: 'users', filter: { a: 1 }, $db: 'app' }, g.id);
  g.runRequest(ex);
  if (ex.verdict === Verdict.LocalReply) return ex.verdict;
  ex.replyBody = serialize({ cursor: { firstBatch: docs, id: Long.fromNumber(0), ns: 'app.users' }, ok: 1 });
  g.runResponse(ex);
  return Verdict.Continue;
}

test('the same plugin in baseline and candidate keeps separate kv data: neither graph\'s cache answers the other', async () => {
  const m = new PipelineManager({ logger: quiet, pluginDir: BUILTIN_PLUGIN_DIR });
  const base = await m.load(cacheConfig('shop', 60_000));
  const cand = await m.build(cacheConfig('shop', 30_000), 'candidate');
  m.setCandidate('shop', cand, new PercentSelector(50));
  const baseKv = base.steps.get('cache')!.slot.kv;
  const candKv = cand.steps.get('cache')!.slot.kv;
  assert.notEqual(baseKv, candKv);

  assert.equal(find(base, [{ _id: 1, from: 'baseline' }]), Verdict.Continue, 'baseline miss, stored');
  assert.equal(find(base, []), Verdict.LocalReply, 'baseline hit');
  assert.equal(find(cand, [{ _id: 1, from: 'candidate' }]), Verdict.Continue, 'the candidate does not see the baseline entry');
  assert.equal(find(cand, []), Verdict.LocalReply, 'candidate hit on its own entry');
  assert.ok(baseKv.bytesUsed > 0 && candKv.bytesUsed > 0);
  // The host reads a plugin metric per graph (what the canary's custom rules compare).
  find(cand, []);
  assert.equal(m.host.pluginMetrics.value('proxy_plugin_cache_hits_total', 'shop', 'baseline'), 1);
  assert.equal(m.host.pluginMetrics.value('proxy_plugin_cache_hits_total', 'shop', 'candidate'), 2);
  assert.match(await m.host.registry.metrics(), /proxy_plugin_cache_hits_total\{pipeline_id="shop",pipeline="candidate"\} 2/);

  // The same config in both graphs still gives two stores.
  const twin = await m.build(cacheConfig('shop', 60_000), 'candidate');
  assert.notEqual(twin.steps.get('cache')!.slot.kv, baseKv);
});

test('a reload keeps a step\'s kv data while its config is unchanged; a changed config starts empty; kv_max_bytes follows a reload', async () => {
  const m = new PipelineManager({ logger: quiet, pluginDir: BUILTIN_PLUGIN_DIR });
  const g1 = await m.load(cacheConfig('inv', 60_000, 1 << 20));
  find(g1, [{ _id: 1 }]);
  const kv1 = g1.steps.get('cache')!.slot.kv;

  const g2 = await m.load(cacheConfig('inv', 60_000, 1 << 20));
  assert.equal(g2.steps.get('cache')!.slot.kv, kv1, 'same config: same store');
  assert.equal(find(g2, []), Verdict.LocalReply, 'the entry stored before the reload still answers');

  const g3 = await m.load(cacheConfig('inv', 60_000, 65_536));
  const kv3 = g3.steps.get('cache')!.slot.kv;
  assert.equal(kv3, kv1, 'only kv_max_bytes changed: same store');
  assert.equal(kv3.maxBytes, 65_536, 'the new cap applies');
  assert.equal(find(g3, []), Verdict.LocalReply, 'data that fits is kept');

  const g4 = await m.load(cacheConfig('inv', 5_000, 65_536));
  const kv4 = g4.steps.get('cache')!.slot.kv;
  assert.notEqual(kv4, kv1, 'changed config: a new store');
  assert.equal(find(g4, [{ _id: 2 }]), Verdict.Continue, 'and it starts empty');
  assert.equal(m.host.kv.size, 1, 'the old store is let go once no published graph uses it');
});

test('two managers (two proxies in one process) share no host state', async () => {
  const a = new PipelineManager({ logger: quiet, pluginDir: BUILTIN_PLUGIN_DIR });
  const b = new PipelineManager({ logger: quiet, pluginDir: BUILTIN_PLUGIN_DIR });
  const ga = await a.load(cacheConfig('same', 60_000));
  const gb = await b.load(cacheConfig('same', 60_000));
  assert.notEqual(a.host, b.host);
  assert.notEqual(ga.steps.get('cache')!.slot.kv, gb.steps.get('cache')!.slot.kv);
  find(ga, [{ _id: 1 }]);
  assert.equal(find(ga, []), Verdict.LocalReply);
  assert.equal(find(gb, [{ _id: 9 }]), Verdict.Continue, 'the other proxy\'s cache is its own');
  assert.notEqual(a.host.registry, b.host.registry);
  assert.match(await a.host.registry.metrics(), /proxy_plugin_cache_hits_total\{pipeline_id="same",pipeline="baseline"\} 1/);
  assert.match(await b.host.registry.metrics(), /proxy_plugin_cache_hits_total\{pipeline_id="same",pipeline="baseline"\} 0/);
});
