// A candidate's plugin_id loads only from allowed places (issue 19, item 9): a .wasm path whose real
// location is inside the built-in plugin directory, a directory of a configured step's module, or
// canary.plugin_dirs; otherwise an installed npm package by a valid name. Every refusal is one error
// with one message, so a token holder cannot tell whether a file exists (no existence oracle), and
// `..` or a symlink cannot lead outside.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { copyFileSync, mkdirSync, mkdtempSync, realpathSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { PipelineManager } from '../../runtime/pipeline/index.ts';
import { PipelineCanaryGraphs } from '../../runtime/canary/index.ts';
import { parseConfig } from '../../runtime/config/index.ts';
import { startProxy, BUILTIN_PLUGIN_DIR } from '../../runtime/app/serve.ts';
import { Logger } from '../../runtime/log/index.ts';
import { harness } from './helpers.ts';

const root = mkdtempSync(join(tmpdir(), 'canary-plugin-paths-'));
after(() => rmSync(root, { recursive: true, force: true }));
/** Outside every allowed directory. */
const outside = join(root, 'outside');
/** Holds the module a configured step loads. */
const configured = join(root, 'configured');
/** Listed in canary.plugin_dirs. */
const listed = join(root, 'listed');
for (const d of [outside, configured, listed]) mkdirSync(d);
const filterWasm = join(BUILTIN_PLUGIN_DIR, 'filter.wasm');
copyFileSync(filterWasm, join(outside, 'secret.wasm'));
copyFileSync(filterWasm, join(configured, 'base.wasm'));
copyFileSync(filterWasm, join(configured, 'other.wasm'));
copyFileSync(filterWasm, join(listed, 'mine.wasm'));
// Links inside allowed directories that lead outside, and one that stays inside.
symlinkSync(join(outside, 'secret.wasm'), join(listed, 'link-out.wasm'));
symlinkSync(outside, join(listed, 'dir-out'));
symlinkSync(join(listed, 'mine.wasm'), join(configured, 'link-in.wasm'));

const BASE = {
  pipeline: { id: 'default', request: ['base'], response: [] as string[] },
  steps: { base: { module: join(configured, 'base.wasm'), config: { rules: [] }, max_memory_pages: 256 } },
};
const step = (pluginId: string) => ({ steps: [{ type: 'probe', plugin_id: pluginId, config: { rules: [] } }] });

function graphs(): PipelineCanaryGraphs {
  return new PipelineCanaryGraphs(new PipelineManager({ pluginDir: BUILTIN_PLUGIN_DIR }), [BASE]);
}

/** The error prepare() refuses `pluginId` with. */
async function refusal(g: PipelineCanaryGraphs, pluginId: string): Promise<string> {
  try {
    await g.prepare('default', step(pluginId), [listed]);
  } catch (err) {
    return (err as Error).message;
  }
  throw new Error(`${pluginId} was loaded`);
}

/** The message with the echoed plugin_id taken out: what remains must not depend on the file. */
const shape = (message: string, pluginId: string) => message.replace(JSON.stringify(pluginId), '<id>');

test('allowed: the built-in directory, a configured step\'s module directory, canary.plugin_dirs, a link that stays inside; what loads is the real ' +
  'path', async () => {
  const g = graphs();
  for (const id of [filterWasm, join(configured, 'other.wasm'), join(listed, 'mine.wasm'), relative(process.cwd(), join(listed, 'mine.wasm'))]) {
    const p = await g.prepare('default', step(id), [listed]);
    assert.equal(p.config.steps.probe.module, realpathSync(id), id);
  }
  const viaLink = await g.prepare('default', step(join(configured, 'link-in.wasm')), [listed]);
  assert.equal(viaLink.config.steps.probe.module, realpathSync(join(listed, 'mine.wasm')));
  // Without canary.plugin_dirs the listed directory is not allowed.
  await assert.rejects(g.prepare('default', step(join(listed, 'mine.wasm'))), /not an allowed plugin/);
});

test('refused with one error whether the file exists or not: outside, `..`, symlinks leading out, directories, absent files, bad or absent packages',
  async () => {
    const g = graphs();
    const refused = [
      join(outside, 'secret.wasm'), // exists, outside
      join(outside, 'absent.wasm'), // absent, outside
      join(listed, 'absent.wasm'), // absent, inside
      join(listed, '..', 'outside', 'secret.wasm'), // `..` out of an allowed directory
    `${BUILTIN_PLUGIN_DIR}/../../../../../../../../etc/passwd.wasm`,
    join(listed, 'link-out.wasm'), // a link in an allowed directory to a file outside
    join(listed, 'dir-out', 'secret.wasm'), // through a linked directory
    join(listed, 'dir-out') + '.wasm', // not a file
    '/etc/passwd', // not .wasm: must be a package name, and is not one
    '../../etc/passwd',
    'no-such-package-here',
    'no-such-package-here@1.0.0',
    '@scope/../../x',
    ];
    const shapes = new Set<string>();
    for (const id of refused) {
      const m = await refusal(g, id);
      assert.match(m, /is not an allowed plugin/, id);
      shapes.add(shape(m, id));
    }
    assert.equal(shapes.size, 1, `one message for every refusal: ${[...shapes].join(' | ')}`);
    // The same path before and after the file appears outside: the very same error.
    const later = join(outside, 'later.wasm');
    const before = await refusal(g, later);
    copyFileSync(filterWasm, later);
    assert.equal(await refusal(g, later), before);
    // An installed package is allowed; its version is checked as before.
    await assert.rejects(g.prepare('default', step('valibot@0.0.1')), /valibot is version/);
  });

test('through the control plane: an existing file and an absent one outside the allowed directories get the same 400 body', async () => {
  const TOKEN = 'canary-plugin-paths-token-0123';
  const proxy = await startProxy(parseConfig({
    listen: '127.0.0.1:0', log: { level: 'error' }, control_plane: { port: 0, tokens: [TOKEN] },
    canary: { data_dir: join(root, 'data'), plugin_dirs: [listed] },
  }, null), { log: new Logger('test', 'error') });
  try {
    const start = async (pluginId: string) => {
      const res = await fetch(`${proxy.controlPlaneUrl}/api/v1/canary`, {
        method: 'POST', headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify({ pipeline_id: 'default', candidate_config: { steps: [{ type: 'filter', plugin_id: pluginId, config: { rules: [] } }] } }),
      });
      return { status: res.status, body: await res.json() as any };
    };
    const exists = await start(join(outside, 'secret.wasm'));
    const absent = await start(join(outside, 'nothing-here.wasm'));
    assert.equal(exists.status, 400);
    assert.equal(exists.body.error.code, 'PROXY_ERR_CANARY_CANDIDATE_REFUSED');
    assert.deepEqual({ status: absent.status, code: absent.body.error.code, message: shape(absent.body.error.message, join(outside, 'nothing-here.wasm')) },
      { status: exists.status, code: exists.body.error.code, message: shape(exists.body.error.message, join(outside, 'secret.wasm')) });
    assert.equal(proxy.pipelines.candidate('default'), null);
    // canary.plugin_dirs allows its directory.
    const ok = await start(join(listed, 'mine.wasm'));
    assert.equal(ok.status, 201, JSON.stringify(ok.body));
  } finally {
    await proxy.close();
  }
});

test('resume after a restart: a candidate whose module canary.plugin_dirs no longer allows is rolled back with the reason', async () => {
  const first = harness({ config: { canary: { plugin_dirs: [listed] } } });
  const { canary_id: id } = await first.controller.start({
    pipeline_id: 'default', candidate_config: { steps: [{ type: 'filter', plugin_id: join(listed, 'mine.wasm'), config: { rules: [] } }] },
  }) as { canary_id: string };
  assert.equal(first.controller.record(id).status, 'active');
  await first.controller.close();
  first.store.close();
  const second = harness({ dir: first.dir, clock: first.clock, config: { canary: { plugin_dirs: [] } } });
  await second.controller.resume();
  const r = second.controller.record(id);
  assert.equal(r.status, 'rolled_back');
  assert.match(r.outcome!.reason, /^candidate failed to load on resume: step filter: plugin_id ".*" is not an allowed plugin/);
  assert.equal(second.manager.candidate('default'), null);
  await second.controller.close();
  second.store.close();
});
