// Metered modules are kept on disk by content, limits and instrumentation (runtime/wasm/compile.ts):
// a second load of the same module, in a fresh host (no in-memory cache), does not start binaryen;
// a damaged cache file is dropped and the module metered again; the folder keeps the most recently
// used files only.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { compilePluginBytes, METERED_CACHE_FILES } from '../../runtime/wasm/compile.ts';
import { meteringWorkerRunning, setMeteringIdleMs } from '../../runtime/wasm/metering.ts';
import { until } from '../helpers/until.ts';

const FILTER = readFileSync('build/plugins/filter.wasm');

async function idle(): Promise<void> {
  await until('the metering worker to stop', () => !meteringWorkerRunning(), 5000, 10);
}

test('a module metered once loads from the disk cache without binaryen; a damaged file is metered again; the folder keeps the newest', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'metered-cache-'));
  const was = setMeteringIdleMs(50);
  t.after(() => {
    setMeteringIdleMs(was);
    rmSync(dir, { recursive: true, force: true });
  });
  const opts = { name: 'wasm:filter', fuel: 1000, maxMemoryPages: 64, config: {}, meteredCacheDir: dir };
  const first = await compilePluginBytes(FILTER, opts);
  const files = readdirSync(dir);
  assert.equal(files.length, 1, 'the metered module is written');
  assert.match(files[0]!, /^[0-9a-f]{64}-[0-9a-f]{16}-1000-64\.wasm$/, 'named by content, instrumentation and limits');
  await idle();

  // A fresh load (no in-memory cache): read from disk, the worker is not started.
  const second = await compilePluginBytes(FILTER, opts);
  assert.equal(meteringWorkerRunning(), false, 'binaryen was not started');
  assert.deepEqual(WebAssembly.Module.exports(second.module), WebAssembly.Module.exports(first.module));
  assert.ok(WebAssembly.Module.exports(second.module).some((e) => e.name === '__proxy_fuel'), 'the cached module is the metered one');

  // Other limits are another file.
  await compilePluginBytes(FILTER, { ...opts, fuel: 2000 });
  assert.equal(readdirSync(dir).length, 2);
  await idle();

  // A damaged file: dropped and metered again (the worker runs), the file replaced by a good one.
  const path = join(dir, files[0]!);
  writeFileSync(path, readFileSync(path).subarray(0, 100));
  const third = await compilePluginBytes(FILTER, opts);
  assert.ok(WebAssembly.Module.exports(third.module).length > 0);
  assert.equal(meteringWorkerRunning(), true, 'metered again');
  assert.equal(readFileSync(path).length > 100, true, 'the damaged file was replaced');

  // Full: the least recently used go. 64 old files, then a new module's file.
  for (let i = 0; i < METERED_CACHE_FILES; i++) {
    const f = join(dir, `${String(i).padStart(64, '0')}-old-1-1.wasm`);
    writeFileSync(f, 'x');
    utimesSync(f, new Date(1000 + i * 1000), new Date(1000 + i * 1000));
  }
  await compilePluginBytes(FILTER, { ...opts, fuel: 3000 });
  const left = readdirSync(dir);
  assert.equal(left.length, METERED_CACHE_FILES);
  assert.ok(left.includes(files[0]!), 'a file just used stays');
  assert.ok(!left.some((n) => n.startsWith(`${'0'.repeat(64)}-old`)), 'the oldest went');
  assert.ok(statSync(path).mtimeMs > 1_000_000, 'a read touches the file');
});

test('a cache folder that cannot be written: the module is metered and loads all the same', async (t) => {
  const dir = join(mkdtempSync(join(tmpdir(), 'metered-cache-')), 'file');
  writeFileSync(dir, 'a file, not a folder');
  t.after(() => rmSync(join(dir, '..'), { recursive: true, force: true }));
  const c = await compilePluginBytes(FILTER, { name: 'wasm:filter', fuel: 1000, maxMemoryPages: 64, config: {}, meteredCacheDir: dir });
  assert.ok(c.exportsRequest);
});
