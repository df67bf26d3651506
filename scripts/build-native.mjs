#!/usr/bin/env node
// Compiles the project's own addons (native/<name>/binding.gyp) with node-gyp, which ships with npm:
// native/shm (N-API), the file mapping behind `profiling.storage: mmap`, and native/clock (V8 API,
// so built for the Node that runs the build), the profiler's step clock. Part of `npm run build`.
// Skipped when native/<name>/build/Release/<name>.node is newer than every file of the addon.
// The headers come from the local Node installation (<prefix>/include/node) when it has them, so a
// fresh machine needs no download; otherwise node-gyp's own lookup (nodedir, its cache) applies.
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const ADDONS = ['shm', 'clock'];

function nodeGyp() {
  // npm sets npm_config_node_gyp for scripts it runs; outside npm, the copy beside npm.
  const candidates = [
    process.env.npm_config_node_gyp,
    join(dirname(process.execPath), '..', 'lib', 'node_modules', 'npm', 'node_modules', 'node-gyp', 'bin', 'node-gyp.js'),
  ];
  const found = candidates.find((p) => p !== undefined && p !== '' && existsSync(p));
  if (found === undefined) throw new Error('node-gyp not found (it ships with npm): cannot build native/');
  return found;
}

export function buildNative({ force = false, log = console.log } = {}) {
  const built = [];
  for (const name of ADDONS) {
    const dir = join(root, 'native', name);
    const out = join(dir, 'build', 'Release', `${name}.node`);
    const sources = readdirSync(dir).filter((f) => f !== 'build').map((f) => statSync(join(dir, f)).mtimeMs);
    if (!force && existsSync(out) && statSync(out).mtimeMs >= Math.max(...sources)) continue;
    const args = [nodeGyp(), 'rebuild', '--release'];
    const prefix = resolve(dirname(process.execPath), '..');
    if (existsSync(join(prefix, 'include', 'node', 'node_api.h'))) args.push(`--nodedir=${prefix}`);
    const r = spawnSync(process.execPath, args, { cwd: dir, encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`node-gyp failed for native/${name}:\n${r.stdout}${r.stderr}`);
    log(`built ${out.slice(root.length + 1)}`);
    built.push(name);
  }
  return built;
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  try {
    buildNative({ force: process.argv.includes('--force') });
  } catch (err) {
    console.error(err.message);
    process.exit(1);
  }
}
