// Files a configuration names besides itself (a step's module, the client TLS certificate and key)
// are read only when they are regular files. A device has no end (/dev/zero: a module or a
// certificate "read" from it grew the proxy past 20 GB) and a FIFO blocks until a writer comes (a
// reload hung, and a start never finished): both are refused with the path and the reason — a
// reload answers 422 at once and the running graph and clients are untouched; a start exits 2
// before any port opens. FIFOs stand in for /dev/zero here, so that without the check the test
// hangs (and is cut off) instead of eating the machine's memory. The configuration file itself may
// be a FIFO on purpose (written by another process): it is read, but a silent one fails the start
// (exit 2) or the reload (422, the running configuration stays) after 5 s instead of hanging.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, execFileSync, spawn, spawnSync } from 'node:child_process';
import { closeSync, constants, mkdtempSync, openSync, writeFileSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MongoClient } from 'mongodb';
import { parseConfig } from '../../runtime/config/index.ts';
import { startProxy, type RunningProxy } from '../../runtime/app/serve.ts';
import { Logger } from '../../runtime/log/index.ts';
import { freePort } from '../helpers/ports.ts';

const TOKEN = 'special-files-token-0123';
const dir = mkdtempSync(join(tmpdir(), 'proxy-special-files-'));
const fifos: string[] = [];

/** A named pipe nobody writes to. */
function fifo(name: string): string {
  const path = join(dir, name);
  execFileSync('mkfifo', [path]);
  fifos.push(path);
  return path;
}

/** Ends any read still waiting on the pipes (only without the check): a writer opens and closes each. */
function releaseFifos(): void {
  for (const path of fifos) {
    try {
      closeSync(openSync(path, constants.O_RDWR | constants.O_NONBLOCK));
    } catch { /* gone */ }
  }
}

let proxy: RunningProxy;
const base = {
  listen: '127.0.0.1:0',
  log: { level: 'error' as const },
  admin: { listen: '127.0.0.1:0', token: TOKEN, reload_on_change: false },
};

before(async () => {
  proxy = await startProxy(parseConfig(base, null), { log: new Logger('test', 'error') });
});

after(async () => {
  releaseFifos();
  await proxy?.close();
});

test('a reload whose step module is a FIFO is refused at once with 422; clients are served throughout', { timeout: 30_000 }, async () => {
  const module = fifo('step.wasm');
  const client = await new MongoClient(proxy.uri, { serverSelectionTimeoutMS: 5000 }).connect();
  try {
    const res = await fetch(`${proxy.adminUrl}/api/v1/reload`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ ...base, pipeline: { request: ['wasm:z'] }, steps: { z: { module } } }),
      signal: AbortSignal.timeout(10_000),
    }).catch((err: Error) => {
      releaseFifos();
      throw new Error(`the reload did not answer: ${err.message}`);
    });
    const body = await res.json() as { error: { code: string; message: string } };
    assert.equal(res.status, 422, JSON.stringify(body));
    assert.equal(body.error.code, 'PROXY_ERR_PLUGIN');
    assert.match(body.error.message, /cannot read .*step\.wasm.*not a regular file/);
    assert.deepEqual(await client.db('admin').command({ ping: 1 }), { ok: 1 });
    const p = await (await fetch(`${proxy.adminUrl}/api/v1/pipeline`, { headers: { authorization: `Bearer ${TOKEN}` } })).json() as { request: string[] };
    assert.deepEqual(p.request, [], 'the running graph is kept');
  } finally {
    await client.close();
  }
});

test('proxy serve with a FIFO as tls.cert_file exits 2 naming the key, before any port opens', { timeout: 60_000 }, () => {
  const file = join(dir, 'tls.json');
  writeFileSync(file, JSON.stringify({ listen: '127.0.0.1:0', tls: { cert_file: fifo('cert.pem'), key_file: fifo('key.pem') } }));
  const r = spawnSync(process.execPath, [join(process.cwd(), 'bin/proxy.mjs'), 'serve', '--config', file, '--workers', '1'],
    { encoding: 'utf8', timeout: 20_000, killSignal: 'SIGKILL' });
  assert.equal(r.signal, null, `the start hung reading the FIFO (killed after 20 s): ${r.stderr}`);
  assert.equal(r.status, 2, r.stderr);
  assert.match(r.stderr, /tls\.cert_file: cannot read .*cert\.pem: not a regular file/);
  assert.doesNotMatch(r.stdout, /mongodb:\/\//, 'never printed a connection string');
});

const bin = join(process.cwd(), 'bin/proxy.mjs');

test('proxy serve with a configuration FIFO nobody writes to exits 2 after 5 s naming the file, instead of hanging', { timeout: 60_000 }, async () => {
  const file = fifo('silent.json');
  const started = Date.now();
  const r = await new Promise<{ code: number | null; signal: string | null; stderr: string }>((resolve) => {
    execFile(process.execPath, [bin, 'serve', '--config', file, '--workers', '1'], { timeout: 20_000, killSignal: 'SIGKILL' },
      (err, _stdout, stderr) => resolve({ code: err === null ? 0 : typeof err.code === 'number' ? err.code : null, signal: err?.signal ?? null,
        stderr }));
  });
  assert.equal(r.signal, null, `the start hung reading the FIFO (killed after 20 s): ${r.stderr}`);
  assert.equal(r.code, 2, r.stderr);
  assert.match(r.stderr, new RegExp(`^proxy: configuration refused\n.*${file.replace(/[.]/g, '\\.')}: cannot read file: a pipe with no data and ` +
    'no end of file for 5 s', 'm'));
  assert.ok(Date.now() - started >= 4500, 'waited for a writer first');
});

test('a configuration FIFO written by another process starts the proxy; a reload from it with no writer is refused after 5 s (400), the ' +
  'running configuration stays', { timeout: 90_000 }, async () => {
  const file = fifo('written.json');
  const admin = await freePort();
  const config = JSON.stringify({ listen: '127.0.0.1:0', log: { level: 'info', format: 'json' },
    admin: { listen: `127.0.0.1:${admin}`, token: TOKEN, reload_on_change: false } });
  const child = spawn(process.execPath, [bin, 'serve', '--config', file, '--workers', '1'], { stdio: ['ignore', 'pipe', 'pipe'] });
  try {
    let out = '';
    child.stdout.on('data', (d) => { out += d; });
    child.stderr.on('data', (d) => { out += d; });
    // The writer comes after the proxy opened the file (process substitution's writer may be slower still).
    await new Promise((r) => setTimeout(r, 500));
    await writeFile(file, config);
    const end = Date.now() + 30_000;
    while (!/mongodb:\/\/127\.0\.0\.1:\d+/.test(out) || !out.includes('admin API listening')) {
      if (Date.now() > end || child.exitCode !== null) throw new Error(`did not start: ${out}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    const uri = /mongodb:\/\/127\.0\.0\.1:\d+/.exec(out)![0];
    const started = Date.now();
    const res = await fetch(`http://127.0.0.1:${admin}/api/v1/reload`, { method: 'POST', headers: { authorization: `Bearer ${TOKEN}` },
      signal: AbortSignal.timeout(20_000) }).catch((err: Error) => {
      releaseFifos();
      throw new Error(`the reload did not answer: ${err.message}`);
    });
    const body = await res.json() as { error: { code: string; message: string } };
    assert.equal(res.status, 400, JSON.stringify(body));
    assert.equal(body.error.code, 'PROXY_ERR_CONFIG');
    assert.match(body.error.message, /written\.json: cannot read file: a pipe with no data and no end of file for 5 s/);
    assert.ok(Date.now() - started >= 4500);
    const client = await new MongoClient(uri, { serverSelectionTimeoutMS: 5000 }).connect();
    try {
      assert.deepEqual(await client.db('admin').command({ ping: 1 }), { ok: 1 }, 'still serving');
    } finally {
      await client.close();
    }
    assert.equal(child.exitCode, null);
  } finally {
    child.kill('SIGKILL');
  }
});
