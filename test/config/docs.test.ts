import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { CONFIG_DOCS_PATH, EXAMPLE_CONFIG, renderConfigDocs } from '../../runtime/config/docs.ts';
import { parseConfig } from '../../runtime/config/load.ts';
import { schemaKeys } from '../../runtime/config/schema.ts';

test('docs/configuration.md is the output of renderConfigDocs (regenerate: node --import tsx runtime/config/docs.ts)', () => {
  assert.equal(readFileSync(CONFIG_DOCS_PATH, 'utf8'), renderConfigDocs());
});

test('every schema key path appears in the docs', () => {
  const docs = renderConfigDocs();
  for (const key of schemaKeys()) assert.ok(docs.includes(`\`${key.path}\``), `${key.path} is not documented`);
});

test('the documented example is a valid config', () => {
  const cfg = parseConfig(EXAMPLE_CONFIG, 'docs example');
  assert.deepEqual(cfg.pipeline.request, ['logging', 'wasm:redact']);
});

test('the profiling block\'s reload note names every profiling key that needs a restart', () => {
  const keys = schemaKeys();
  const block = keys.find((k) => k.path === 'profiling');
  assert.ok(block?.applies?.on === 'partial');
  const note = block.applies.note;
  const restart = keys.filter((k) => k.path.startsWith('profiling.') && k.applies?.on === 'restart').map((k) => k.path.slice('profiling.'.length));
  assert.ok(restart.includes('flamegraph_frames'));
  for (const key of restart) {
    const named = note.includes(`\`${key}\``) || (key.startsWith('snapshot_') && note.includes('`snapshot_*`'));
    assert.ok(named, `profiling.${key} needs a restart but the block's note does not name it: ${note}`);
  }
});

test('a number key without its own phrase is documented, and refused, with its integer and range checks', () => {
  const types = new Map(schemaKeys().map((k) => [k.path, k.type]));
  assert.equal(types.get('control_plane.port'), 'integer 0..65535');
  assert.equal(types.get('fleet.lease_ttl_s'), 'integer 1..300');
  assert.equal(types.get('canary.judge.confidence'), 'number 0.5..0.9999');
  for (const [path, type] of types) assert.notEqual(type, 'number', `${path} is documented as a bare "number" though its schema checks more`);
  assert.throws(() => parseConfig({ control_plane: { port: 70000 } }, 'proxy.yaml'),
    (err: Error) => err.message.includes('control_plane.port: expected integer 0..65535, received 70000'));
});

test('duration keys are documented, and refused, as durations; strings with a minimum length say so', () => {
  const types = new Map(schemaKeys().map((k) => [k.path, k.type]));
  for (const path of ['rollback_rules.check_interval', 'canary.stages[].min_duration', 'fleet.fail_safe_after']) {
    assert.match(types.get(path) ?? '', /^duration like "30s"/, path);
  }
  assert.equal(types.get('control_plane.tokens'), 'array of string of at least 16 characters');
  assert.throws(() => parseConfig({ rollback_rules: { check_interval: '5x' } }, 'proxy.yaml'),
    (err: Error) => err.message.includes('rollback_rules.check_interval: expected duration like "30s"') && err.message.includes('received "5x"'));
  assert.throws(() => parseConfig({ control_plane: { tokens: ['short'] } }, 'proxy.yaml'),
    (err: Error) => err.message.includes('control_plane.tokens[0]: expected string of at least 16 characters, received "short"'));
});
