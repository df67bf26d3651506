// Every example configuration loads against the schema, and the pipeline it describes starts:
// each plugin accepts its config (a refused config fails the load).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { execFileSync } from 'node:child_process';
import { loadConfig } from '../../runtime/config/index.ts';
import { PipelineManager } from '../../runtime/pipeline/index.ts';
import { BUILTIN_PLUGIN_DIR } from '../../runtime/app/serve.ts';

const files = ['examples/proxy.yaml', 'examples/builtins.yaml', 'examples/redact/proxy.yaml'];

test('example configurations are valid and their pipelines load', async () => {
  execFileSync(process.execPath, ['scripts/build-plugins.mjs'], { stdio: 'inherit' });
  for (const file of files) {
    const { config } = await loadConfig({ file });
    const manager = new PipelineManager({ pluginDir: BUILTIN_PLUGIN_DIR, logger: { trace() {}, debug() {}, info() {}, warn() {}, error() {} } });
    const p = await manager.load({ pipeline: config.pipeline, steps: config.steps });
    assert.equal(p.requestSteps.length, config.pipeline.request.length, file);
    assert.equal(p.responseSteps.length, config.pipeline.response.length, file);
  }
  // Nothing in examples/ is forgotten by this test.
  const yamls = readdirSync('examples', { recursive: true }).map(String).filter((f) => /proxy\.ya?ml$|builtins\.yaml$/.test(f));
  assert.deepEqual(yamls.map((f) => join('examples', f)).sort(), [...files].sort());
});
