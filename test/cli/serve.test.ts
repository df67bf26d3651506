// `proxy serve` refuses a bad configuration before opening a port: exit 2 with the key path and
// reason; a plugin refusing its config exits 1. A good one prints the connection string.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const dir = mkdtempSync(join(tmpdir(), 'proxy-serve-'));
const bin = join(process.cwd(), 'bin/proxy.mjs');

async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as { port: number }).port;
  await new Promise((r) => s.close(r));
  return port;
}

test('a configuration the schema refuses: exit 2 with key path and reason, never ready', async () => {
  const port = await freePort();
  const file = join(dir, 'bad.yaml');
  writeFileSync(file, `listen: "127.0.0.1:${port}"\nupstream:\n  pool_size: many\n  colour: blue\n`);
  const r = spawnSync(process.execPath, [bin, 'serve', '--config', file], { encoding: 'utf8', timeout: 60_000 });
  assert.equal(r.status, 2, r.stderr);
  assert.match(r.stderr, /upstream\.pool_size: expected integer >= 1, received "many"/);
  assert.match(r.stderr, /upstream\.colour: unknown key "colour"/);
  assert.doesNotMatch(r.stdout, /mongodb:\/\//, 'never printed a connection string');
});

test('a plugin refusing its config: exit 1 before listening', () => {
  const file = join(dir, 'refused.json');
  writeFileSync(file, JSON.stringify({ listen: '127.0.0.1:0', pipeline: { request: ['route'] }, steps: { route: { config: { rules: 'nope' } } } }));
  const r = spawnSync(process.execPath, [bin, 'serve', '--config', file], { encoding: 'utf8', timeout: 60_000 });
  assert.equal(r.status, 1, r.stderr);
  assert.match(r.stderr, /could not start: .*wasm:route refused its config/);
  assert.doesNotMatch(r.stdout, /ready/);
});

test('a good configuration starts and prints the connection string', async () => {
  const port = await freePort();
  const file = join(dir, 'good.toml');
  writeFileSync(file, `listen = "127.0.0.1:${port}"\n[log]\nlevel = "warn"\n`);
  const child = spawn(process.execPath, [bin, 'serve', '--config', file], { stdio: ['ignore', 'pipe', 'pipe'] });
  try {
    const out = await new Promise<string>((resolve, reject) => {
      let text = '';
      const timer = setTimeout(() => reject(new Error(`no ready line: ${text}`)), 60_000);
      child.stdout.on('data', (d) => {
        text += d;
        if (text.includes('mongodb://')) { clearTimeout(timer); resolve(text); }
      });
      child.once('exit', (code) => reject(new Error(`exited ${code}: ${text}`)));
    });
    assert.match(out, new RegExp(`mongodb://127\\.0\\.0\\.1:${port}/`));
  } finally {
    child.kill('SIGTERM');
    await new Promise((r) => child.once('exit', r));
  }
});
