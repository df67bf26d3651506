// `proxy plugin new`: the scaffold builds and passes its own tests as generated, inside the
// repository (relative paths to sdk/) and outside it (through node_modules/pipeline-proxy).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync, type SpawnSyncReturns } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

const ROOT = resolve('.');
const PROXY = join(ROOT, 'bin', 'proxy.mjs');
const T = { timeout: 180_000 };

// NODE_TEST_CONTEXT would make the child test runner report to this one instead of printing TAP.
const { NODE_TEST_CONTEXT: _inner, ...ENV } = process.env;

function run(cmd: string, args: string[], cwd: string): SpawnSyncReturns<string> {
  return spawnSync(cmd, args, { cwd, encoding: 'utf8', env: { ...ENV, npm_config_loglevel: 'error' } });
}

function proxy(args: string[], cwd = ROOT): SpawnSyncReturns<string> {
  return run(process.execPath, [PROXY, ...args], cwd);
}

function ok(r: SpawnSyncReturns<string>, what: string): void {
  assert.equal(r.status, 0, `${what} failed (${r.status}):\n${r.stdout}\n${r.stderr}`);
}

test('inside the repository: the scaffold builds with npm run build and passes npm test', T, () => {
  mkdirSync(join(ROOT, 'tmp'), { recursive: true });
  const parent = mkdtempSync(join(ROOT, 'tmp', 'plugin-new-'));
  try {
    const r = proxy(['plugin', 'new', 'my_step', '--dir', parent]);
    ok(r, 'proxy plugin new');
    const dir = join(parent, 'my_step');
    for (const f of ['assembly/index.ts', 'asconfig.json', 'package.json', 'test/my_step.test.mjs', 'README.md']) {
      assert.ok(existsSync(join(dir, f)), f);
    }
    assert.match(readFileSync(join(dir, 'assembly', 'index.ts'), 'utf8'), /from "\.\.\/\.\.\/\.\.\/\.\.\/sdk\/assembly\/index"/);
    ok(run('npm', ['run', 'build'], dir), 'npm run build');
    assert.ok(existsSync(join(dir, 'build', 'my_step.wasm')));
    const t = run('npm', ['test'], dir);
    ok(t, 'npm test');
    assert.match(t.stdout, /# pass 2/);
    assert.match(t.stdout, /# fail 0/);
  } finally {
    rmSync(parent, { recursive: true, force: true });
  }
});

test('outside the repository: imports go through node_modules/pipeline-proxy, and it builds and tests', T, () => {
  const parent = mkdtempSync(join(tmpdir(), 'plugin-new-'));
  try {
    ok(proxy(['plugin', 'new', 'ext-step'], parent), 'proxy plugin new (default parent: cwd)');
    const dir = join(parent, 'ext-step');
    const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { devDependencies: Record<string, string>; wasm: string };
    assert.ok(pkg.devDependencies['pipeline-proxy'] !== undefined);
    assert.equal(pkg.wasm, 'build/ext-step.wasm');
    assert.match(readFileSync(join(dir, 'assembly', 'index.ts'), 'utf8'), /from "\.\.\/node_modules\/pipeline-proxy\/sdk\/assembly\/index"/);
    assert.match(readFileSync(join(dir, 'test', 'ext-step.test.mjs'), 'utf8'), /from '\.\.\/node_modules\/pipeline-proxy\/sdk\/testing\/index\.ts'/);
    // Stand-in for `npm install` (offline): link the packages the generated package.json names.
    mkdirSync(join(dir, 'node_modules'));
    symlinkSync(ROOT, join(dir, 'node_modules', 'pipeline-proxy'), 'dir');
    for (const p of ['assemblyscript', 'tsx']) symlinkSync(join(ROOT, 'node_modules', p), join(dir, 'node_modules', p), 'dir');
    // The package scripts, with the binaries npm would put on PATH spelled out.
    ok(run(process.execPath, [join(dir, 'node_modules', 'assemblyscript', 'bin', 'asc.js'), 'assembly/index.ts', '--config', 'asconfig.json',
      '--target', 'release', '--outFile', 'build/ext-step.wasm'], dir), 'asc');
    const t = run(process.execPath, ['--import', 'tsx', '--test', 'test/ext-step.test.mjs'], dir);
    ok(t, 'node --test');
    assert.match(t.stdout, /# pass 2/);
  } finally {
    rmSync(parent, { recursive: true, force: true });
  }
});

test('a bad name or an existing folder is refused with exit 2 and a clear message', T, () => {
  const parent = mkdtempSync(join(tmpdir(), 'plugin-new-'));
  try {
    for (const bad of ['Bad', '1abc', 'a.b', 'x!', 'a/b', '_a']) {
      const r = proxy(['plugin', 'new', bad, '--dir', parent]);
      assert.equal(r.status, 2, bad);
      assert.match(r.stderr, /invalid plugin name/, bad);
    }
    mkdirSync(join(parent, 'taken'));
    const r = proxy(['plugin', 'new', 'taken', '--dir', parent]);
    assert.equal(r.status, 2);
    assert.match(r.stderr, /already exists/);
    assert.equal(proxy(['plugin', 'new', '--dir', parent]).status, 2);
    assert.equal(proxy(['plugin', 'remove', 'x', '--dir', parent]).status, 2);
  } finally {
    rmSync(parent, { recursive: true, force: true });
  }
});
