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
  assert.equal(slot.pick(), base, 'no candidate yet: the baseline serves');

  // A draw sequence makes the split deterministic: 10 → candidate (below 30), 50 → baseline.
  const draws = [0.1, 0.5, 0.2, 0.9];
  let i = 0;
  m.setCandidate('orders', cand, new PercentSelector(30, () => draws[i++ % draws.length]));
  const verdicts: string[] = [];
  for (let k = 0; k < 4; k++) {
    const g = slot.pick();
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
  assert.equal(slot.pick(), base2);
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
