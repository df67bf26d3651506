// examples/component-js refuses a bad config the way the docs describe: it logs the reason at error
// level and returns false, and the host's refusal (startup error, admin reload answer) carries it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { resolve } from 'node:path';
import { PluginHarness } from '../../sdk/testing/index.ts';
import { PluginConfigRefusedError } from '../../runtime/wasm/index.ts';

const COMPONENT = resolve('build/components/component_js.wasm');

test('component-js: a refused config names the reason the component logged', async () => {
  const r = spawnSync(process.execPath, ['scripts/build-components.mjs', 'component-js'], { encoding: 'utf8' });
  assert.equal(r.status, 0, `component build failed:\n${r.stdout}\n${r.stderr}`);
  // The embedded JS engine starts with 145 pages of memory: above the harness default cap.
  await assert.rejects(
    PluginHarness.load(COMPONENT, { name: 'component_js_refuse', config: { log_level: 'loud' }, max_memory_pages: 256 }),
    (err: unknown) => err instanceof PluginConfigRefusedError &&
      err.message === 'plugin wasm:component_js_refuse refused its config: component_js: bad config: log_level must be trace, debug, info, warn or ' +
        'error, got "loud"',
  );
});
