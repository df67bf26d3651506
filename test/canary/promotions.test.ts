// Promotions on their own, over a real SQLite store: the fingerprint ignores key order and unlisted
// steps; choose() decides without changing anything; settle() records; a canary completing while a
// reload builds its graphs is said in a warning and still applies at the next reload.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CanaryStore, Promotions, stepsFingerprint } from '../../runtime/canary/index.ts';
import type { PipelineConfig } from '../../runtime/pipeline/index.ts';

const cfg = (request: string[], steps: Record<string, unknown> = {}): PipelineConfig =>
  ({ pipeline: { id: 'default', request, response: [] }, steps: steps as PipelineConfig['steps'] });

function setup() {
  const store = new CanaryStore(mkdtempSync(join(tmpdir(), 'promotions-')));
  const warnings: string[] = [];
  const infos: string[] = [];
  const p = new Promotions(store, { info: (m) => infos.push(m), warn: (m) => warnings.push(m), error: (m) => warnings.push(m) });
  return { store, p, warnings, infos };
}

test('the fingerprint: step order and listed steps\' settings count; key order and unlisted steps do not', () => {
  const a = cfg(['filter'], { filter: { config: { a: 1, b: 2 }, max_memory_pages: 256 }, cache: { config: {} } });
  const b = cfg(['wasm:filter'], { filter: { max_memory_pages: 256, config: { b: 2, a: 1 } } });
  assert.equal(stepsFingerprint(a), stepsFingerprint(b));
  assert.notEqual(stepsFingerprint(a), stepsFingerprint(cfg(['filter'], { filter: { config: { a: 2, b: 2 }, max_memory_pages: 256 } })));
  assert.notEqual(stepsFingerprint(cfg(['filter', 'logging'])), stepsFingerprint(cfg(['logging', 'filter'])));
});

test('choose changes nothing; settle drops a superseded promotion with a warning', () => {
  const { store, p, warnings } = setup();
  p.settle(p.choose(cfg([])), 'start');
  p.promote('default', 'c-1', cfg(['filter']), 'sha256:x', 1);
  const kept = p.choose(cfg([]));
  assert.deepEqual(kept.config.pipeline.request, ['filter']);
  const edited = p.choose(cfg(['logging']));
  assert.equal(edited.superseded?.canary_id, 'c-1');
  assert.equal(store.promotion('default')?.canary_id, 'c-1', 'choose alone drops nothing (a refused reload changes nothing)');
  p.settle(edited, 'reload');
  assert.equal(store.promotion('default'), null);
  assert.match(warnings.at(-1)!, /changed the steps of pipeline "default"/);
});

test('a canary completing while a reload builds: a warning, and the next reload applies the promotion', () => {
  const { store, p, warnings } = setup();
  p.settle(p.choose(cfg([])), 'start');
  const during = p.choose(cfg([])); // the reload decides (no promotion yet) ...
  p.promote('default', 'c-2', cfg(['filter']), 'sha256:y', 2); // ... a canary completes meanwhile ...
  p.settle(during, 'reload'); // ... and the reload publishes what it decided.
  assert.match(warnings.at(-1)!, /canary c-2 completed on pipeline "default" while the configuration was being reloaded/);
  assert.equal(store.promotion('default')?.canary_id, 'c-2');
  assert.deepEqual(p.choose(cfg([])).config.pipeline.request, ['filter'], 'the next reload runs the promotion');
});
