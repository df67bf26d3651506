// A step's `config` nested past MAX_STEP_CONFIG_DEPTH is refused by the schema, with its key path:
// deeper nesting overflowed the host's stack (JSON.stringify, hashing the config for the kv store)
// or the plugin's JSON parser while the pipeline loaded, and the start failed with "Maximum call
// stack size exceeded" (or a bare abort), naming neither the key nor the reason. The same holds
// for a canary's candidate steps (an HTTP body).
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseConfig, MAX_STEP_CONFIG_DEPTH } from '../../runtime/config/index.ts';
import { CanaryError, defaultsFromConfig, parseStartRequest } from '../../runtime/canary/index.ts';

const dir = mkdtempSync(join(tmpdir(), 'step-depth-'));
after(() => rmSync(dir, { recursive: true, force: true }));

/** An object nesting `levels` levels (itself included). */
function nested(levels: number): Record<string, unknown> {
  let o: Record<string, unknown> = { leaf: 1 };
  for (let i = 1; i < levels; i++) o = { a: o };
  return o;
}

const stepConfig = (config: unknown) => ({ pipeline: { response: ['redact'] }, steps: { redact: { module: 'build/plugins/redact.wasm', config } } });

test(`a step config nested ${MAX_STEP_CONFIG_DEPTH} levels loads; one level more is refused with its key path`, () => {
  assert.equal(MAX_STEP_CONFIG_DEPTH, 100);
  parseConfig(stepConfig({ fields: ['x'], deep: nested(MAX_STEP_CONFIG_DEPTH - 1) }), null);
  assert.throws(() => parseConfig(stepConfig({ fields: ['x'], deep: nested(MAX_STEP_CONFIG_DEPTH) }), null),
    /steps\.redact\.config: nested deeper than 100 levels \(objects and arrays\)/);
  let list: unknown[] = [1];
  for (let i = 1; i < MAX_STEP_CONFIG_DEPTH; i++) list = [list];
  assert.throws(() => parseConfig(stepConfig({ fields: ['x'], list }), null), /steps\.redact\.config: nested deeper than 100 levels/, 'arrays count');
  assert.throws(() => parseConfig({ pipelines: [{ id: 'p', match: { db: 'a' }, response: ['redact'],
    steps: { redact: { module: 'x.wasm', config: nested(100_000) } } }] }, null), /pipelines\[0\]\.steps\.redact\.config: nested deeper than 100 levels/);
});

test('proxy serve: a step config nested 100,000 levels exits 2 with the key path, before the plugin is loaded', () => {
  const deep = '{"a":'.repeat(100_000) + '1' + '}'.repeat(100_000);
  const file = join(dir, 'deep.json');
  writeFileSync(file, `{"listen":"127.0.0.1:0","upstream":{"uri":"mongodb://127.0.0.1:1"},"pipeline":{"response":["redact"]},` +
    `"steps":{"redact":{"module":"build/plugins/redact.wasm","config":{"fields":["x"],"deep":${deep}}}}}`);
  const r = spawnSync(process.execPath, ['bin/proxy.mjs', 'serve', '--config', file, '--workers', '1'], { encoding: 'utf8', timeout: 60_000 });
  assert.equal(r.status, 2, r.stderr);
  assert.match(r.stderr, /steps\.redact\.config: nested deeper than 100 levels/);
  assert.doesNotMatch(r.stderr, /call stack/);
});

test('canary: a candidate step whose config nests too deep is a 400 (PROXY_ERR_BAD_BODY), not a failed load', () => {
  const defaults = defaultsFromConfig(parseConfig({}, null));
  assert.throws(() => parseStartRequest({ candidate_config: { steps: [{ type: 'redact', plugin_id: 'build/plugins/redact.wasm', phase: 'response',
    config: { fields: ['x'], deep: nested(100_000) } }] } }, defaults), (err: unknown) => {
    assert.ok(err instanceof CanaryError);
    assert.equal(err.code, 'PROXY_ERR_BAD_BODY');
    assert.match(err.message, /nested deeper than 100 levels/);
    return true;
  });
});
