// canary.data_dir under operator mistakes, through a real `proxy serve`: a canary.db that is not a
// SQLite database, a data_dir that is a file and a store locked by another process stop the start
// with a message naming the file and what to do (better-sqlite3's own says neither); canary.db
// deleted or replaced while the proxy runs is reported once and written anew, so the canaries
// survive the next restart.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { CanaryStore } from '../../runtime/canary/index.ts';
import { freePort } from '../helpers/ports.ts';
import { until } from '../helpers/until.ts';

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

const TOKEN = 'tok-0123456789abcdef';

/** `proxy serve` running until stopped: its JSON log lines as they come. */
function running(file: string): Promise<{ child: ChildProcess; lines: Array<Record<string, unknown>>; stop: () => Promise<void> }> {
  const child = spawn(process.execPath, [bin, 'serve', '--config', file, '--workers', '1'], { stdio: ['ignore', 'pipe', 'pipe'] });
  const lines: Array<Record<string, unknown>> = [];
  let text = '';
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGTERM');
    await exited;
  };
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => { child.kill('SIGKILL'); reject(new Error(`not ready: ${text}`)); }, 60_000);
    // Log lines go to stderr; the start banner to stdout.
    let partial = '';
    child.stderr!.on('data', (d: Buffer) => {
      text += d;
      const parts = (partial + String(d)).split('\n');
      partial = parts.pop()!;
      for (const line of parts) {
        try {
          lines.push(JSON.parse(line));
        } catch {
          // not a log line
        }
      }
      if (lines.some((l) => l.msg === 'canary control plane listening')) { clearTimeout(timer); resolve({ child, lines, stop }); }
    });
    child.stdout!.on('data', (d) => { text += d; });
    child.once('exit', (code) => { clearTimeout(timer); reject(new Error(`exited ${code}: ${text}`)); });
  });
}

async function call(cp: number, method: string, path: string, body?: unknown): Promise<{ status: number; body: any }> {
  const r = await fetch(`http://127.0.0.1:${cp}/api/v1/canary${path}`, {
    method, headers: { authorization: `Bearer ${TOKEN}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: r.status, body: await r.json() };
}

for (const how of ['deleted', 'replaced'] as const) {
  test(`canary.db ${how} while the proxy runs: logged at error once, written anew at the next write; the canary survives a restart`,
    { timeout: 120_000 }, async () => {
      const base = join(dir, `live-${how}`);
      const data = join(base, 'data');
      const cp = await freePort();
      const file = join(dir, `live-${how}.json`);
      writeFileSync(file, JSON.stringify({
        listen: '127.0.0.1:0', log: { level: 'info', format: 'json' },
        pipeline: { request: ['filter'], response: [] }, steps: { filter: { config: { rules: [], default: 'allow' } } },
        profiling: { enabled: true, port: 0 }, control_plane: { port: cp, tokens: [TOKEN] }, canary: { data_dir: data },
      }));
      let p = await running(file);
      try {
        const created = await call(cp, 'POST', '', {
          pipeline_id: 'default', auto_promote: false, candidate_config: { steps: [{ type: 'logging', config: {} }] },
          stages: [{ traffic_pct: 10, min_duration: '1h', min_requests: 0 }, { traffic_pct: 30, min_duration: '1h', min_requests: 0 },
            { traffic_pct: 60, min_duration: '1h', min_requests: 0 }, { traffic_pct: 100, min_duration: '0', min_requests: 0 }],
        });
        assert.equal(created.status, 201, JSON.stringify(created.body));
        const id = created.body.canary_id;
        const db = join(data, 'canary.db');
        if (how === 'deleted') rmSync(data, { recursive: true, force: true }); // rm -rf data_dir
        else {
          rmSync(db);
          const other = new Database(db);
          other.exec('CREATE TABLE unrelated (x)');
          other.close();
        }
        // A write: the store notices before it.
        assert.equal((await call(cp, 'POST', `/${id}/promote?force=true`)).body.current_stage, 2);
        const errors = () => p.lines.filter((l) => l.level === 'error' && String(l.msg).startsWith(`the canary store ${db} was ${how}`));
        await until('the error line', () => errors().length > 0, 10_000);
        const e = errors()[0];
        assert.equal(e.file, db);
        assert.match(String(e.msg), /written to a new .*canary\.db, so nothing is lost/);
        assert.match(String(e.msg), /Stop the proxy before deleting, moving or restoring canary\.data_dir/);
        assert.ok(existsSync(db), 'written anew');
        if (how === 'replaced') {
          assert.match(String(e.moved_aside), /canary\.db\.replaced-\d{4}-\d\d-\d\dT\d{6}\.\d{3}Z$/);
          const kept = new Database(String(e.moved_aside), { readonly: true });
          assert.equal((kept.prepare("SELECT count(*) AS n FROM sqlite_master WHERE name = 'unrelated'").get() as { n: number }).n, 1,
            'the replacing file is kept, not overwritten');
          kept.close();
        }
        // Later writes go to the new file, and are not reported again.
        assert.equal((await call(cp, 'POST', `/${id}/promote?force=true`)).body.current_stage, 3);
        await p.stop();
        assert.equal(errors().length, 1, 'reported once');
        assert.deepEqual(readdirSync(data).filter((n) => n.endsWith('.recovering')), []);

        p = await running(file);
        const after = await call(cp, 'GET', `/${id}`);
        assert.equal(after.status, 200, JSON.stringify(after.body));
        assert.equal(after.body.status, 'active');
        assert.equal(after.body.current_stage, 3);
        assert.equal(after.body.traffic_pct, 60);
        const hist = (await call(cp, 'GET', `/${id}/history`)).body.history.map((x: { event: string }) => x.event);
        assert.deepEqual(hist, ['started', 'promoted', 'promoted', 'resumed']);
      } finally {
        await p.stop();
      }
    });
}

test('without writes, the store notices a deleted canary.db within checkMs and writes it anew (what a graceful stop then keeps)', async () => {
  const data = join(dir, 'timer');
  const errors: string[] = [];
  const store = new CanaryStore(data, 100, { checkMs: 50, log: { info: () => {}, error: (m) => { errors.push(m); } } });
  try {
    store.setPromotion('default', {
      pipeline_id: 'default', canary_id: 'c1', promoted_at: 1, config: { id: 'default', request: [], response: [], steps: {} } as never,
      version: 'v1', file_fingerprint: 'f',
    });
    rmSync(join(data, 'canary.db'));
    await until('the error line', () => errors.length === 1, 5000);
    assert.ok(existsSync(join(data, 'canary.db')));
  } finally {
    store.close();
  }
  const again = new CanaryStore(data, 100, { checkMs: 0 });
  assert.equal(again.promotion('default')?.canary_id, 'c1');
  again.close();
});
