// Every example configuration loads against the schema, and the pipeline it describes starts:
// each plugin accepts its config (a refused config fails the load).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { execFileSync } from 'node:child_process';
import { loadConfig } from '../../runtime/config/index.ts';
import { PipelineManager } from '../../runtime/pipeline/index.ts';
import { BUILTIN_PLUGIN_DIR } from '../../runtime/app/serve.ts';
import { pipelineConfigs } from '../../runtime/app/pipelines.ts';

const files = ['examples/proxy.yaml', 'examples/builtins.yaml', 'examples/redact/proxy.yaml', 'examples/tracing/proxy.yaml', 'examples/pipelines/proxy.yaml'];

test('example configurations are valid and their pipelines load', async () => {
  execFileSync(process.execPath, ['scripts/build-plugins.mjs'], { stdio: 'inherit' });
  for (const file of files) {
    const { config } = await loadConfig({ file });
    const manager = new PipelineManager({ pluginDir: BUILTIN_PLUGIN_DIR, logger: { trace() {}, debug() {}, info() {}, warn() {}, error() {} } });
    // Every pipeline of the file (config `pipelines`; else the one `pipeline`).
    for (const c of pipelineConfigs(config)) {
      const p = await manager.load(c);
      assert.equal(p.requestSteps.length, c.pipeline.request.length, `${file}: ${c.pipeline.id}`);
      assert.equal(p.responseSteps.length, c.pipeline.response.length, `${file}: ${c.pipeline.id}`);
    }
  }
  // Nothing in examples/ is forgotten by this test.
  const yamls = readdirSync('examples', { recursive: true }).map(String).filter((f) => /proxy\.ya?ml$|builtins\.yaml$/.test(f));
  assert.deepEqual(yamls.map((f) => join('examples', f)).sort(), [...files].sort());
});

// A module path a reader copies from an example or the guide must be where the build writes it:
// build/plugins/<name>.wasm (scripts/build-plugins.mjs, examples/<name>/assembly or plugins/<name>)
// or build/components/<name>.wasm (scripts/build-components.mjs, examples/<name with - for _>/step.js).
// docs/configuration.md is generated from runtime/config/docs.ts; its example is checked here too.
test('module paths in examples/, README.md and the hand-written docs are where the build puts modules', () => {
  const texts = [
    'README.md',
    ...readdirSync('docs').filter((f) => f.endsWith('.md')).map((f) => join('docs', f)),
    ...readdirSync('examples', { recursive: true }).map(String).filter((f) => /\.(ya?ml|md|toml|json)$/.test(f)).map((f) => join('examples', f)),
  ];
  const found: string[] = [];
  for (const file of texts) {
    for (const m of readFileSync(file, 'utf8').matchAll(/module["']?\s*[:=]\s*["']?([^\s"',}]+\.wasm)/g)) {
      const path = m[1]!;
      found.push(`${file}: ${path}`);
      const plugin = /^build\/plugins\/([a-z0-9_-]+)\.wasm$/.exec(path);
      const component = /^build\/components\/([a-z0-9_]+)\.wasm$/.exec(path);
      const ok = plugin !== null
        ? existsSync(join('plugins', plugin[1]!, 'assembly', 'index.ts')) || existsSync(join('examples', plugin[1]!, 'assembly', 'index.ts'))
        : component !== null && existsSync(join('examples', component[1]!.replace(/_/g, '-'), 'step.js'));
      assert.ok(ok, `${file}: module ${path} is not a path the build writes`);
    }
  }
  assert.ok(found.some((f) => f.startsWith('examples/proxy.yaml:')), `examples/proxy.yaml names no module: ${found.join(', ')}`);
});
