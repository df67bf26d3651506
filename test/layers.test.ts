// Layers point one way: a folder of runtime/ imports only from folders below it (type-only imports
// too: a type cycle is still a cycle). A folder that needs something of a higher one declares an
// interface the higher one satisfies (runtime/http/surface.ts, which app/ implements).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, normalize, relative } from 'node:path';

/** Each top folder's rank: a folder may import only from folders of a lower rank (and itself). */
const RANK: Record<string, number> = {
  errors: 0, log: 0, fs: 0,
  'version.ts': 1, 'step-clock.ts': 1, wire: 1, config: 1, metrics: 1,
  upstream: 2, wasm: 2,
  pipeline: 3, devdb: 3,
  profiling: 4, telemetry: 4, canary: 4, bench: 4,
  server: 5, fleet: 5, ipc: 5,
  http: 6,
  app: 7,
  cluster: 8,
  cli: 9,
};

function sources(): string[] {
  return readdirSync('runtime', { withFileTypes: true, recursive: true })
    .filter((d) => d.isFile() && /\.(ts|mts|mjs)$/.test(d.name))
    .map((d) => join(d.parentPath, d.name));
}

/** [importing folder, imported folder, file] of every relative import that leaves its folder. */
function crossings(): Array<[string, string, string]> {
  const out: Array<[string, string, string]> = [];
  for (const file of sources()) {
    const from = relative('runtime', file).split('/')[0];
    for (const m of readFileSync(file, 'utf8').matchAll(/(?:from|import)\s*\(?\s*'(\.\.?\/[^']+)'/g)) {
      const target = relative('runtime', normalize(join(dirname(file), m[1]))).split('/')[0];
      if (target !== from && !target.startsWith('..')) out.push([from, target, file]);
    }
  }
  return out;
}

test('every folder of runtime/ has a rank (a new folder is placed in the layers)', () => {
  const folders = readdirSync('runtime', { withFileTypes: true }).filter((d) => d.isDirectory() && d.name !== 'dashboard').map((d) => d.name);
  for (const f of folders) assert.ok(f in RANK, `runtime/${f} has no rank in test/layers.test.ts`);
});

test('no folder of runtime/ imports from a folder above it', () => {
  const found = crossings();
  assert.ok(found.some(([from, to]) => from === 'app' && to === 'http'), 'the scan sees imports (app imports http)');
  const upward = found.filter(([from, to]) => RANK[to] === undefined || RANK[to] >= RANK[from]).map(([from, to, file]) => `${file}: ${from} → ${to}`);
  assert.deepEqual(upward, []);
});
