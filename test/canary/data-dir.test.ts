// canary.data_dir under operator mistakes, through a real `proxy serve`: a canary.db that is not a
// SQLite database, a data_dir that is a file and a store locked by another process stop the start
// with a message naming the file and what to do (better-sqlite3's own says neither).
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';

const bin = join(process.cwd(), 'bin/proxy.mjs');
const dir = mkdtempSync(join(tmpdir(), 'proxy-canary-data-'));
after(() => rmSync(dir, { recursive: true, force: true }));

function config(name: string, dataDir: string): string {
  const file = join(dir, `${name}.json`);
  writeFileSync(file, JSON.stringify({
    listen: '127.0.0.1:0', log: { level: 'info', format: 'json' },
    pipeline: { request: ['filter'], response: [] }, steps: { filter: { config: { rules: [], default: 'allow' } } },
    profiling: { enabled: true, port: 0 }, control_plane: { port: 0, tokens: ['tok-0123456789abcdef'] }, canary: { data_dir: dataDir },
  }));
  return file;
}

/** `proxy serve` that is expected to stop at start: its exit code and stderr. */
function serve(file: string): Promise<{ status: number | null; stderr: string }> {
  const child = spawn(process.execPath, [bin, 'serve', '--config', file, '--workers', '1'], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  child.stdout.on('data', (d) => { if (/mongosh/.test(String(d))) child.kill('SIGKILL'); });
  child.stderr.on('data', (d) => { stderr += d; });
  const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
  return new Promise((resolve) => child.on('close', (status) => { clearTimeout(timer); resolve({ status, stderr }); }));
}

test('a canary.db that is not a SQLite database: the start stops naming the file and what to do', { timeout: 90_000 }, async () => {
  const data = join(dir, 'corrupt');
  mkdirSync(data);
  writeFileSync(join(data, 'canary.db'), Buffer.alloc(8192, 0x5a));
  const r = await serve(config('corrupt', data));
  assert.equal(r.status, 1, r.stderr);
  assert.match(r.stderr, new RegExp(`cannot open the canary store ${join(data, 'canary.db')}: file is not a database; it is not a readable ` +
    'SQLite database: move it aside \\(it is then created empty\\) or restore it from a backup'));
});

test('a data_dir that is a file: the start stops naming it', { timeout: 90_000 }, async () => {
  const data = join(dir, 'a-file');
  writeFileSync(data, 'x');
  const r = await serve(config('file', data));
  assert.equal(r.status, 1, r.stderr);
  assert.match(r.stderr, /cannot open the notification outbox .*a-file\/outbox\.sqlite: EEXIST.*; its directory \(from notifications\.outbox_path, or canary\.data_dir\) is a file/);
});

test('a canary.db locked by another process: the start stops after the busy timeout, saying so', { timeout: 90_000 }, async () => {
  const data = join(dir, 'locked');
  mkdirSync(data);
  const db = new Database(join(data, 'canary.db'));
  db.pragma('journal_mode = WAL');
  db.exec('CREATE TABLE t (x); BEGIN EXCLUSIVE; INSERT INTO t VALUES (1)');
  try {
    const r = await serve(config('locked', data));
    assert.equal(r.status, 1, r.stderr);
    assert.match(r.stderr, /cannot open the canary store .*locked\/canary\.db: database is locked; another process holds it \(one proxy per canary\.data_dir\)/);
  } finally {
    db.close();
  }
});
