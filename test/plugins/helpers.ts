// Builds the built-in plugins (plugins/*) once per test process and returns their .wasm paths.
// The build script only watches each plugin's own folder and sdk/assembly; the shared sources
// (plugins/_shared, plugins/auth/assembly/sha256.ts used by cache) are checked here.
import assert from 'node:assert/strict';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { buildPlugins } from '../../scripts/build-plugins.mjs';
import { PluginHarness, type HarnessOptions } from '../../sdk/testing/index.ts';

export const PLUGIN_DIR = resolve('build/plugins');
let built: Promise<unknown> | null = null;

function newest(dir: string): number {
  let t = 0;
  if (!existsSync(dir)) return 0;
  for (const n of readdirSync(dir)) {
    const p = join(dir, n);
    const s = statSync(p);
    t = Math.max(t, s.isDirectory() ? newest(p) : s.mtimeMs);
  }
  return t;
}

function sharedStale(): boolean {
  const shared = Math.max(newest(resolve('plugins/_shared')), newest(resolve('plugins/auth/assembly')));
  for (const n of readdirSync(resolve('plugins'))) {
    if (!existsSync(resolve('plugins', n, 'assembly', 'index.ts'))) continue;
    const out = join(PLUGIN_DIR, `${n}.wasm`);
    if (!existsSync(out) || statSync(out).mtimeMs < shared) return true;
  }
  return false;
}

export async function pluginPath(name: string): Promise<string> {
  built ??= buildPlugins({ bases: ['plugins'], outDir: PLUGIN_DIR, force: sharedStale(), log: () => {} });
  await built;
  return join(PLUGIN_DIR, `${name}.wasm`);
}

let seq = 0;
/** Loads built-in `name` with `config` under a fresh step name (own kv store and metrics pipeline). */
export async function load(name: string, config: Record<string, unknown>, opts: HarnessOptions = {}): Promise<PluginHarness> {
  seq++;
  return PluginHarness.load(await pluginPath(name), { name: `${name}_t${seq}`, pipelineId: `p${seq}`, config, ...opts });
}

/** Asserts that the plugin refuses `bad` (loaded over a harness configured with `good`) and that
 *  it logged the reason, matching `why`. */
export async function refuses(name: string, good: Record<string, unknown>, bad: unknown, why: RegExp): Promise<void> {
  const h = await load(name, good);
  const before = h.logs.length;
  await assert.rejects(h.reload(await pluginPath(name), { config: bad as Record<string, unknown> }), /refused its config/,
    `expected ${JSON.stringify(bad)} refused`);
  const lines = h.logs.slice(before).filter((l) => l.level === 'error').map((l) => l.msg);
  assert.ok(lines.some((m) => why.test(m)), `reason ${why} not in ${JSON.stringify(lines)}`);
}
