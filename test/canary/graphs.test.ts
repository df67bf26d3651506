// The candidate graph: candidate_config laid over the baseline (replace a step's module or config in
// place, add a step to a phase, reorder), its content-hash version, a package version check, and the
// split published beside the baseline.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { copyFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PipelineManager } from '../../runtime/pipeline/index.ts';
import { PipelineCanaryGraphs, candidatePipelineConfig } from '../../runtime/canary/index.ts';
import { BUILTIN_PLUGIN_DIR } from '../../runtime/app/serve.ts';

/** Who asks, for slot.pick(): any client, a command without an lsid. */
const ANY_CLIENT = { id: 1, appName: '', clientAddress: '127.0.0.1:1', user: '' };
const NO_BODY = new Uint8Array(0);

const BASE = {
  pipeline: { id: 'default', request: ['logging', 'wasm:redact'], response: ['metrics'] },
  steps: { redact: { module: join(BUILTIN_PLUGIN_DIR, 'redact.wasm'), config: { fields: ['ssn'] }, max_memory_pages: 256 } },
};

test('overlay: a step named by the baseline keeps its place and takes the new module and config; a new one is appended to its phase', () => {
  const c = candidatePipelineConfig(BASE, { steps: [
    { type: 'wasm:redact', plugin_id: 'plugins/redact-v2.wasm', config: { fields: ['ssn', 'email'] } },
    { type: 'rate_limit', config: { max_rps: 100 } },
    { type: 'transform', phase: 'response', config: {} },
  ] });
  assert.deepEqual(c.pipeline.request, ['logging', 'wasm:redact', 'rate_limit']);
  assert.deepEqual(c.pipeline.response, ['metrics', 'transform']);
  assert.equal(c.steps.redact.module, 'plugins/redact-v2.wasm');
  assert.deepEqual(c.steps.redact.config, { fields: ['ssn', 'email'] });
  assert.deepEqual(c.steps.rate_limit.config, { max_rps: 100 });
  // The baseline's configuration is untouched.
  assert.equal(BASE.steps.redact.module, join(BUILTIN_PLUGIN_DIR, 'redact.wasm'));
  const ordered = candidatePipelineConfig(BASE, { steps: [], pipeline: { request: ['wasm:redact'] } });
  assert.deepEqual(ordered.pipeline.request, ['wasm:redact']);
  assert.deepEqual(ordered.pipeline.response, ['metrics']);
  const pkg = candidatePipelineConfig(BASE, { steps: [{ type: 'redact', plugin_id: '@acme/redact@2.0.0' }] });
  assert.equal(pkg.steps.redact.package, '@acme/redact');
  assert.equal(pkg.steps.redact.module, undefined);
});

test('versions are content hashes: same configuration and module bytes → same version; other bytes → another', async () => {
  const manager = new PipelineManager({ pluginDir: BUILTIN_PLUGIN_DIR });
  const graphs = new PipelineCanaryGraphs(manager, [BASE]);
  const dir = mkdtempSync(join(tmpdir(), 'canary-graphs-'));
  copyFileSync(join(BUILTIN_PLUGIN_DIR, 'redact.wasm'), join(dir, 'same.wasm'));
  copyFileSync(join(BUILTIN_PLUGIN_DIR, 'filter.wasm'), join(dir, 'other.wasm'));
  const baseVersion = graphs.baselineVersion('default');
  assert.match(baseVersion, /^sha256:[0-9a-f]{12}$/);
  const same = await graphs.prepare('default', { steps: [{ type: 'redact', plugin_id: join(dir, 'same.wasm') }] }, [dir]);
  assert.equal(same.version, baseVersion, 'a copy of the same module with the same config is the same graph');
  const v2 = await graphs.prepare('default', { steps: [{ type: 'redact', plugin_id: join(dir, 'same.wasm'), config: { fields: ['email'] } }] }, [dir]);
  assert.notEqual(v2.version, baseVersion);
  await assert.rejects(graphs.prepare('default', { steps: [{ type: 'redact', plugin_id: join(dir, 'missing.wasm') }] }, [dir]));
  await assert.rejects(graphs.prepare('default', { steps: [{ type: 'redact', plugin_id: 'valibot@0.0.1' }] }), /valibot is version/);
  await assert.rejects(graphs.prepare('default', { steps: [{ type: 'redact', plugin_id: 'no-such-package-here@1.0.0' }] }), /not an allowed plugin/);
});

test('activate publishes the split (one draw per request), setTraffic changes it, remove puts 100 % on the baseline', async () => {
  const manager = new PipelineManager({ pluginDir: BUILTIN_PLUGIN_DIR });
  await manager.load(BASE);
  let draw = 0.5;
  const graphs = new PipelineCanaryGraphs(manager, [BASE], () => draw);
  const p = await graphs.prepare('default', { steps: [{ type: 'rate_limit', config: { max_rps: 1000 } }] });
  const slot = manager.slot('default');
  assert.equal(slot.pick(ANY_CLIENT, NO_BODY, -1), manager.get('default'), 'nothing split before activate');
  graphs.activate(p, 60);
  assert.equal(slot.pick(ANY_CLIENT, NO_BODY, -1), p.graph); // 50 < 60
  graphs.setTraffic('default', 40);
  assert.equal(slot.pick(ANY_CLIENT, NO_BODY, -1), manager.get('default')); // 50 ≥ 40
  draw = 0.399;
  assert.equal(slot.pick(ANY_CLIENT, NO_BODY, -1), p.graph);
  graphs.remove('default');
  assert.equal(slot.pick(ANY_CLIENT, NO_BODY, -1), manager.get('default'));
  assert.equal(manager.candidate('default'), null);
});
