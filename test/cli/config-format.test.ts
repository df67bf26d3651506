// `proxy serve --config <(…)` (bash process substitution: /dev/fd/63, no extension) and any file
// without an extension: --config-format json|yaml|toml names the format, at start and for every
// reload from the file (SIGHUP, POST /api/v1/reload without a body). Without it the start exits 2
// saying the file has no extension to tell the format. A pipe is read once: a reload that opens it
// again finds it ended without data, and is refused (before, that read as an empty file: a reload
// to the defaults).
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '../helpers/ports.ts';
import { until } from '../helpers/until.ts';

const bin = join(process.cwd(), 'bin/proxy.mjs');
const dir = mkdtempSync(join(tmpdir(), 'proxy-config-format-'));
after(() => rmSync(dir, { recursive: true, force: true }));
const TOKEN = 'format-admin-token-0123456789';

/** A command line run by bash (for its process substitution), to the end: exit code and stderr. */
const bash = (line: string) => new Promise<{ code: number | null; stderr: string }>((resolve) => {
  const child = execFile('bash', ['-c', line], { encoding: 'utf8', timeout: 30_000 }, (_err, _stdout, stderr) => resolve({ code: child.exitCode,
    stderr }));
});

/** A proxy started by `args` (argv, or a bash line), its output as it comes. */
async function serve(args: string[]): Promise<{ child: ChildProcess; out: () => string }> {
  const child = spawn(args[0], args.slice(1), { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout!.on('data', (d: Buffer) => { out += d; });
  child.stderr!.on('data', (d: Buffer) => { out += d; });
  await until('the proxy', () => out.includes('admin API listening') || child.exitCode !== null, 60_000);
  assert.ok(out.includes('admin API listening'), out);
  return { child, out: () => out };
}

async function reload(admin: number): Promise<{ status: number; body: { reloaded?: boolean; error?: { code: string; message: string } } }> {
  const r = await fetch(`http://127.0.0.1:${admin}/api/v1/reload`, { method: 'POST', headers: { authorization: `Bearer ${TOKEN}` } });
  return { status: r.status, body: await r.json() as { reloaded?: boolean; error?: { code: string; message: string } } };
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  await exited;
}

test('--config <(…) without --config-format: exit 2, the file has no extension to tell the format; a bad --config-format: exit 2', async () => {
  const none = await bash(`exec "${process.execPath}" "${bin}" serve --workers 1 --config <(printf 'listen: 127.0.0.1:0\\n')`);
  assert.equal(none.code, 2, none.stderr);
  assert.match(none.stderr, /\/dev\/fd\/\d+: no file extension to tell the format \(use \.json, \.yaml, \.yml or \.toml; `proxy serve --config-format json\|yaml\|toml`/);
  const bad = await bash(`exec "${process.execPath}" "${bin}" serve --config-format yml --config <(printf 'listen: 127.0.0.1:0\\n')`);
  assert.equal(bad.code, 2, bad.stderr);
  assert.equal(bad.stderr, 'proxy serve: --config-format must be json, yaml, toml, got "yml"\n');
  const alone = await bash(`exec "${process.execPath}" "${bin}" serve --config-format yaml`);
  assert.equal(alone.code, 2, alone.stderr);
  assert.equal(alone.stderr, 'proxy serve: --config-format goes with --config <file>\n');
});

test('--config-format yaml --config <(…): the proxy starts on it; a reload from the pipe is refused and the running configuration stays', {
  timeout: 90_000 }, async () => {
  const admin = await freePort();
  const yaml = `listen: 127.0.0.1:0\nlog: { level: info, format: json }\nadmin: { listen: "127.0.0.1:${admin}", token: ${TOKEN}, ` +
    'reload_on_change: false }\npipeline: { request: [logging] }\n';
  const p = await serve(['bash', '-c', `exec "${process.execPath}" "${bin}" serve --workers 1 --config-format yaml --config <(printf '%s' '${yaml}')`]);
  try {
    assert.match(p.out(), /"file":"\/dev\/fd\/\d+","msg":"configuration loaded"/);
    assert.match(p.out(), /"request":\["wasm:logging"\]/);
    const r = await reload(admin);
    assert.equal(r.status, 400, JSON.stringify(r.body));
    assert.equal(r.body.error?.code, 'PROXY_ERR_CONFIG');
    assert.match(r.body.error!.message, /cannot read file: the pipe ended without data/);
    p.child.kill('SIGHUP');
    await until('the SIGHUP refusal', () => /"trigger":"SIGHUP".*the pipe ended without data.*"msg":"configuration reload refused/.test(p.out()), 10_000);
    assert.doesNotMatch(p.out(), /configuration reloaded/);
    assert.equal((await reload(admin)).status, 400, 'still the configuration it started with (admin API where it was)');
  } finally {
    await stop(p.child);
  }
});

test('--config-format toml --config <file without extension>: read as TOML at start, on POST /api/v1/reload and on SIGHUP', { timeout: 90_000 },
  async () => {
    const admin = await freePort();
    const file = join(dir, 'proxy-config');
    const toml = (request: string) => `listen = "127.0.0.1:0"\n[log]\nlevel = "info"\nformat = "json"\n[admin]\nlisten = "127.0.0.1:${admin}"\n` +
      `token = "${TOKEN}"\nreload_on_change = false\n[pipeline]\nrequest = [${request}]\n`;
    writeFileSync(file, toml(''));
    const p = await serve([process.execPath, bin, 'serve', '--workers', '1', '--config-format', 'toml', '--config', file]);
    try {
      writeFileSync(file, toml('"logging"'));
      const r = await reload(admin);
      assert.equal(r.status, 200, JSON.stringify(r.body));
      assert.equal(r.body.reloaded, true);
      await until('the reloaded graph', () => /"graph":"default\/baseline#2","request":\["wasm:logging"\]/.test(p.out()), 10_000);
      writeFileSync(file, toml('"logging", "metrics"'));
      p.child.kill('SIGHUP');
      await until('the SIGHUP reload', () => /"graph":"default\/baseline#3","request":\["wasm:logging","wasm:metrics"\]/.test(p.out()), 10_000);
      assert.doesNotMatch(p.out(), /configuration reload refused/);
    } finally {
      await stop(p.child);
    }
  });
