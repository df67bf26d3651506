// `proxy serve` refuses a bad configuration before opening a port: exit 2 with the key path and
// reason; a plugin refusing its config exits 1 with the reason the plugin gave (as does the admin
// API's reload answer). A good one prints the connection string.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '../helpers/ports.ts';

const dir = mkdtempSync(join(tmpdir(), 'proxy-serve-'));
const bin = join(process.cwd(), 'bin/proxy.mjs');

/** A `proxy serve` child with one worker, what it has printed so far, and ways to wait on it. */
class Serve {
  readonly child: ChildProcess;
  out = '';
  err = '';
  /** Resolves once the process has ended and its output is all read, with its exit code (null: killed by a signal). */
  readonly closed: Promise<number | null>;

  constructor(args: readonly string[], cwd?: string) {
    this.child = spawn(process.execPath, [bin, 'serve', ...args, '--workers', '1'], { stdio: ['ignore', 'pipe', 'pipe'], cwd });
    this.child.stdout!.setEncoding('utf8').on('data', (d: string) => { this.out += d; });
    this.child.stderr!.setEncoding('utf8').on('data', (d: string) => { this.err += d; });
    this.closed = new Promise((resolve) => this.child.once('close', resolve));
  }

  /** Resolves once stdout ('out') or stderr ('err') holds `text`; rejects if the process ends first, or after 60 s. */
  waitFor(stream: 'out' | 'err', text: string): Promise<void> {
    const source = stream === 'out' ? this.child.stdout! : this.child.stderr!;
    return new Promise((resolve, reject) => {
      const finish = (err?: Error): void => {
        clearTimeout(timer);
        source.off('data', onData);
        this.child.off('close', onClose);
        if (err === undefined) resolve();
        else reject(err);
      };
      // Added after the constructor's listener, so the chunk is already in this[stream].
      const onData = (): void => { if (this[stream].includes(text)) finish(); };
      const onClose = (code: number | null): void => finish(new Error(`exited ${code} before "${text}": ${this.out}${this.err}`));
      const timer = setTimeout(() => finish(new Error(`no "${text}" within 60 s: ${this.out}${this.err}`)), 60_000);
      source.on('data', onData);
      this.child.once('close', onClose);
      onData();
    });
  }

  /** Waits for the process to end by itself (SIGTERM after 60 s): its exit code and all it printed. */
  async exit(): Promise<{ status: number | null; stdout: string; stderr: string }> {
    const timer = setTimeout(() => this.child.kill('SIGTERM'), 60_000);
    const status = await this.closed;
    clearTimeout(timer);
    return { status, stdout: this.out, stderr: this.err };
  }

  /** SIGTERM, then waits for the exit (nothing when it has ended already). */
  async stop(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    const exited = new Promise((r) => this.child.once('exit', r));
    this.child.kill('SIGTERM');
    await exited;
  }
}

test('a configuration the schema refuses: exit 2 with key path and reason, never ready', async () => {
  const port = await freePort();
  const file = join(dir, 'bad.yaml');
  writeFileSync(file, `listen: "127.0.0.1:${port}"\nupstream:\n  pool_size: many\n  colour: blue\n`);
  const r = await new Serve(['--config', file]).exit();
  assert.equal(r.status, 2, r.stderr);
  assert.match(r.stderr, /upstream\.pool_size: expected integer >= 1, received "many"/);
  assert.match(r.stderr, /upstream\.colour: unknown key "colour"/);
  assert.doesNotMatch(r.stdout, /mongodb:\/\//, 'never printed a connection string');
});

test('a plugin refusing its config: exit 1 before listening, with the plugin\'s reason', async () => {
  const file = join(dir, 'refused.json');
  writeFileSync(file, JSON.stringify({ listen: '127.0.0.1:0', pipeline: { request: ['route'] }, steps: { route: { config: { rules: 'nope' } } } }));
  const r = await new Serve(['--config', file]).exit();
  assert.equal(r.status, 1, r.stderr);
  assert.match(r.stderr, /could not start: plugin wasm:route refused its config: route: bad config: rules must be an array, got string\n/);
  assert.doesNotMatch(r.stderr, /on_configure returned/);
  assert.doesNotMatch(r.stdout, /ready/);
});

test('a good configuration starts and prints the connection string', async () => {
  const port = await freePort();
  const file = join(dir, 'good.toml');
  writeFileSync(file, `listen = "127.0.0.1:${port}"\n[log]\nlevel = "warn"\n`);
  const proxy = new Serve(['--config', file]);
  try {
    await proxy.waitFor('out', 'mongodb://');
    assert.match(proxy.out, new RegExp(`mongodb://127\\.0\\.0\\.1:${port}/`));
  } finally {
    await proxy.stop();
  }
});

test('a reload a plugin refuses: the admin API answers 422 with the plugin\'s reason', async () => {
  const adminPort = await freePort();
  const token = 'serve-test-token-0123';
  const good = {
    listen: '127.0.0.1:0', log: { level: 'warn' },
    admin: { listen: `127.0.0.1:${adminPort}`, token, reload_on_change: false },
    pipeline: { request: ['route'] }, steps: { route: { config: { default: 'mongodb://127.0.0.1:1' } } },
  };
  const file = join(dir, 'admin.json');
  writeFileSync(file, JSON.stringify(good));
  const proxy = new Serve(['--config', file]);
  try {
    await proxy.waitFor('out', 'mongodb://');
    const bad = { ...good, steps: { route: { config: { default: 'mongodb://' } } } };
    const res = await fetch(`http://127.0.0.1:${adminPort}/api/v1/reload`, {
      method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify(bad),
    });
    assert.equal(res.status, 422);
    const body = await res.json() as { error: { code: string; message: string } };
    assert.equal(body.error.code, 'PROXY_ERR_PLUGIN');
    assert.equal(body.error.message, 'plugin wasm:route refused its config: route: bad config: default upstream "mongodb://" has no host');
  } finally {
    await proxy.stop();
  }
});

test('a SIGHUP while the proxy is starting does not end it: it is held and the file is reloaded once the proxy is up', async () => {
  const port = await freePort();
  const file = join(dir, 'hup.json');
  const config = (request: string[]) => JSON.stringify({
    listen: `127.0.0.1:${port}`, log: { level: 'info' }, admin: { reload_on_change: false },
    // Steps to compile make the start take long enough (about a second here) for the signal to
    // land while the proxy is still starting, whatever the machine's load.
    pipeline: { request, response: ['metrics', 'logging', 'filter'] }, steps: {},
  });
  writeFileSync(file, config(['logging', 'filter']));
  const proxy = new Serve(['--config', file]);
  const { child } = proxy;
  try {
    // "configuration loaded" is logged before the plugins compile and the port opens: the proxy is
    // still starting. The file changes, then the signal arrives.
    await proxy.waitFor('err', 'configuration loaded');
    assert.ok(!proxy.out.includes('mongodb://'), 'not ready yet when the signal is sent');
    writeFileSync(file, config(['metrics']));
    child.kill('SIGHUP');
    const until = Date.now() + 60_000;
    while (!proxy.err.includes('configuration reloaded') && Date.now() < until) {
      assert.equal(child.exitCode, null, `the proxy ended on the SIGHUP: ${proxy.err}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    assert.equal(child.exitCode, null, 'still running');
    const reloaded = proxy.err.split('\n').find((l) => l.includes('configuration reloaded'));
    assert.ok(reloaded !== undefined, `the held SIGHUP reloaded the file: ${proxy.err}`);
    assert.deepEqual(JSON.parse(reloaded).request, ['metrics'], 'the file as it was when the signal came');
    assert.match(proxy.out, new RegExp(`mongodb://127\\.0\\.0\\.1:${port}/`));
  } finally {
    await proxy.stop();
  }
});

/** True when process `pid` has a handler for SIGHUP (Linux: the SigCgt mask of /proc/<pid>/status). */
function catchesHup(pid: number): boolean {
  const m = /^SigCgt:\s*([0-9a-f]+)$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m !== null && (BigInt(`0x${m[1]}`) & 1n) === 1n;
}

test('a SIGHUP while the modules are still loading, before the configuration is read, is held too', async () => {
  const port = await freePort();
  const file = join(dir, 'hup-early.json');
  writeFileSync(file, JSON.stringify({ listen: `127.0.0.1:${port}`, log: { level: 'info' }, admin: { reload_on_change: false } }));
  const proxy = new Serve(['--config', file]);
  const { child } = proxy;
  try {
    // The signal is sent as soon as the process handles it: that must be before the modules have
    // loaded (about a second), let alone the configuration.
    const until = Date.now() + 60_000;
    while (child.exitCode === null && child.pid !== undefined && !catchesHup(child.pid) && Date.now() < until) {
      await new Promise((r) => setTimeout(r, 5));
    }
    // The step clock's addon is loaded when the modules are (runtime/step-clock.ts): not yet.
    assert.ok(!readFileSync(`/proc/${child.pid}/maps`, 'utf8').includes('clock.node'), 'SIGHUP is held before the modules have loaded');
    child.kill('SIGHUP');
    const applied = /configuration (reloaded|unchanged since the last reload)/;
    while (!applied.test(proxy.err) && child.exitCode === null && Date.now() < until) {
      await new Promise((r) => setTimeout(r, 50));
    }
    assert.equal(child.exitCode, null, `the proxy ended on the SIGHUP: ${proxy.err}`);
    assert.match(proxy.err, applied, 'the held SIGHUP was applied once the proxy was up');
    assert.match(proxy.out, new RegExp(`mongodb://127\\.0\\.0\\.1:${port}/`));
  } finally {
    await proxy.stop();
  }
});

test('--listen overrides the configuration\'s listen, also across a reload; the ready banner names the admin API and the control plane', async () => {
  const [configured, wanted, adminPort, controlPort] = [await freePort(), await freePort(), await freePort(), await freePort()];
  const file = join(dir, 'listen.json');
  writeFileSync(file, JSON.stringify({
    listen: `127.0.0.1:${configured}`, log: { level: 'info', format: 'json' },
    admin: { listen: `127.0.0.1:${adminPort}`, token: 'serve-test-token-0123', reload_on_change: false },
    control_plane: { port: controlPort, tokens: ['serve-test-control-0123'] },
    canary: { data_dir: join(dir, 'canary-listen') },
  }));
  const proxy = new Serve(['--config', file, '--listen', `127.0.0.1:${wanted}`]);
  const { child } = proxy;
  try {
    const deadline = Date.now() + 60_000;
    while (!proxy.out.includes('Control plane:') && child.exitCode === null && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    assert.match(proxy.out, new RegExp(`mongosh "mongodb://127\\.0\\.0\\.1:${wanted}/"`), `${proxy.out}\n${proxy.err}`);
    assert.match(proxy.out, new RegExp(`^Admin API: http://127\\.0\\.0\\.1:${adminPort} `, 'm'));
    assert.match(proxy.out, new RegExp(`^Control plane: http://127\\.0\\.0\\.1:${controlPort} `, 'm'));
    assert.doesNotMatch(proxy.out, /Dashboard:/, 'no profiling block: no dashboard line');
    const hello = await ping(wanted);
    assert.equal(hello, true, 'clients connect on the --listen address');
    // A reload from the file (which says another port) keeps --listen and names no restart key.
    child.kill('SIGHUP');
    while (!/"msg":"configuration reloaded/.test(proxy.err) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    const line = proxy.err.split('\n').find((l) => l.includes('"msg":"configuration reloaded'));
    assert.ok(line !== undefined, proxy.err);
    assert.equal(JSON.parse(line).keys, undefined, `no key reported as needing a restart: ${line}`);
  } finally {
    await proxy.stop();
  }
});

test('--listen is validated as the configuration\'s listen is: exit 2 with the reason', async () => {
  const r = await new Serve(['--listen', 'localhost'], dir).exit();
  assert.equal(r.status, 2, r.stderr);
  assert.match(r.stderr, /configuration refused\n.*--listen: listen: /);
  assert.doesNotMatch(r.stdout, /ready/);
});

/** True when a MongoDB hello on 127.0.0.1:port is answered (the mongodb driver, one connection). */
async function ping(port: number): Promise<boolean> {
  const { MongoClient } = await import('mongodb');
  const client = new MongoClient(`mongodb://127.0.0.1:${port}/?directConnection=true`, { serverSelectionTimeoutMS: 10_000 });
  try {
    const r = await client.db('admin').command({ ping: 1 });
    return r.ok === 1;
  } finally {
    await client.close();
  }
}
