// A real proxy (`proxy serve` as a child process) with the canary control plane and a webhook
// notification channel, and the real `proxy canary` CLI run against it: shared by the CLI's
// end-to-end test files (split so each file stays well within the runner's per-file time limit on
// a loaded machine: every CLI run starts a Node process).
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { httpReceiver, type HttpReceiver } from '../canary/notify/helpers.ts';
import { freePort } from '../helpers/ports.ts';
import { until } from '../helpers/until.ts';

export const bin = join(process.cwd(), 'bin/proxy.mjs');
export const TOKEN = 'e2e-control-token-0123456789';
export const SECRET = 'e2e-webhook-secret-0123456789';

export interface Run { code: number; stdout: string; stderr: string }

export interface Stack {
  dir: string;
  controlUrl: string;
  hook: HttpReceiver;
  /** `proxy canary <args>` with PROXY_CONTROL_URL and PROXY_CONTROL_TOKEN set (env overrides them). */
  cli(args: string[], env?: Record<string, string>): Promise<Run>;
  close(): Promise<void>;
}

export async function startStack(): Promise<Stack> {
  const dir = mkdtempSync(join(tmpdir(), 'proxy-canary-cli-'));
  const hook = await httpReceiver();
  const port = await freePort();
  const controlUrl = `http://127.0.0.1:${port}`;
  const config = join(dir, 'proxy.json');
  writeFileSync(config, JSON.stringify({
    listen: '127.0.0.1:0',
    log: { level: 'info', format: 'json' },
    pipeline: { id: 'default', request: [], response: [] },
    control_plane: { port, tokens: [TOKEN] },
    canary: { data_dir: join(dir, 'canary') },
    notifications: {
      instance_name: 'e2e-proxy', webhook_secret: SECRET, initial_backoff_ms: 50, max_backoff_ms: 200,
      channels: [{ type: 'webhook', url: hook.url }],
    },
  }));
  let out = '';
  const proxy: ChildProcess = spawn(process.execPath, [bin, 'serve', '--config', config, '--workers', '1'], { stdio: ['ignore', 'pipe', 'pipe'] });
  proxy.stdout!.on('data', (d: Buffer) => { out += d; });
  proxy.stderr!.on('data', (d: Buffer) => { out += d; });
  await until('the proxy', () => out.includes('is ready') || proxy.exitCode !== null, 60_000);
  assert.ok(out.includes('is ready'), out);
  const cli = (args: string[], env: Record<string, string> = {}): Promise<Run> => new Promise((resolve) => {
    const child = spawn(process.execPath, [bin, 'canary', ...args], {
      env: { ...process.env, PROXY_CONTROL_URL: controlUrl, PROXY_CONTROL_TOKEN: TOKEN, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => { stdout += d; });
    child.stderr.on('data', (d: Buffer) => { stderr += d; });
    child.on('close', (code) => resolve({ code: code ?? -1, stdout, stderr }));
  });
  return {
    dir, controlUrl, hook, cli,
    async close() {
      proxy.kill('SIGTERM');
      await new Promise((r) => proxy.once('exit', r));
      await hook.close();
    },
  };
}
