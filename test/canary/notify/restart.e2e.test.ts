// The outbox across a kill -9 of a real proxy: a canary starts while its webhook receiver is down,
// the proxy is killed with SIGKILL while the message is pending, the receiver comes up, and the
// restarted proxy delivers the message exactly once; the delivery shows in /metrics. A channel
// given inline at start (the candidate file's `notifications`) is used instead of the configured one.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { promisify } from 'node:util';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { verifySignature } from '../../../runtime/canary/notify/index.ts';
import { httpReceiver, outboxRows } from './helpers.ts';
import { until } from '../../helpers/until.ts';
import { freePort } from '../../helpers/ports.ts';

const bin = join(process.cwd(), 'bin/proxy.mjs');
const dir = mkdtempSync(join(tmpdir(), 'proxy-outbox-restart-'));
const TOKEN = 'restart-control-token-0123456789';
const SECRET = 'restart-webhook-secret-0123456789';

async function serve(config: string): Promise<{ child: ChildProcess; out: () => string }> {
  let out = '';
  const child = spawn(process.execPath, [bin, 'serve', '--config', config, '--workers', '1'], { stdio: ['ignore', 'pipe', 'pipe'] });
  child.stdout!.on('data', (d: Buffer) => { out += d; });
  child.stderr!.on('data', (d: Buffer) => { out += d; });
  await until('the proxy', () => out.includes('is ready') || child.exitCode !== null, 60_000);
  assert.ok(out.includes('is ready'), out);
  return { child, out: () => out };
}

test('kill -9 with a message pending: the restarted proxy delivers it once, to the inline channel, and counts it in /metrics', async () => {
  const controlPort = await freePort();
  const profilingPort = await freePort();
  const hookPort = await freePort(); // nothing listens there yet
  const configuredHook = await httpReceiver(); // the configured default: must receive nothing
  const outbox = join(dir, 'outbox.sqlite');
  const config = join(dir, 'proxy.json');
  writeFileSync(config, JSON.stringify({
    listen: '127.0.0.1:0',
    log: { level: 'info', format: 'json' },
    pipeline: { id: 'default', request: [], response: [] },
    profiling: { enabled: true, port: profilingPort },
    control_plane: { port: controlPort, tokens: [TOKEN] },
    canary: { data_dir: join(dir, 'canary') },
    notifications: {
      instance_name: 'restart-proxy', webhook_secret: SECRET, outbox_path: outbox, initial_backoff_ms: 100, max_backoff_ms: 300,
      channels: [{ type: 'webhook', url: configuredHook.url }],
    },
  }));
  const candidate = join(dir, 'candidate.json');
  writeFileSync(candidate, JSON.stringify({
    candidate_config: { steps: [{ type: 'rate_limit', config: { max_rps: 1000 } }] },
    notifications: { channels: [{ type: 'webhook', url: `http://127.0.0.1:${hookPort}/hook`, events: ['canary.started'] }] },
  }));

  const first = await serve(config);
  let second: ChildProcess | null = null;
  const hook = { close: async () => {} } as { close(): Promise<void> };
  try {
    // Asynchronously: a blocked event loop would neither answer from the in-process receivers nor
    // drain the proxy's stdout pipe (a proxy writing a full pipe waits, and the CLI with it).
    const r = await promisify(execFile)(process.execPath, [bin, 'canary', 'start', '--pipeline', 'default', '--candidate-config', candidate, '--json'], {
      env: { ...process.env, PROXY_CONTROL_URL: `http://127.0.0.1:${controlPort}`, PROXY_CONTROL_TOKEN: TOKEN }, encoding: 'utf8',
    });
    const canaryId = JSON.parse(r.stdout).canary_id as string;
    await until('two failed attempts', () => outboxRows(outbox).some((row) => row.attempts >= 2), 20_000);
    first.child.kill('SIGKILL');
    await new Promise((res) => first.child.once('exit', res));
    const before = outboxRows(outbox);
    assert.equal(before.length, 1, 'one message: one channel, one event (the inline channel wants only canary.started)');
    assert.equal(before[0].state, 'pending');

    const rx = await httpReceiver(hookPort);
    hook.close = rx.close;
    second = (await serve(config)).child;
    await until('the delivery after the restart', () => rx.received.length >= 1, 20_000);
    await until('the row marked delivered', () => outboxRows(outbox)[0].state === 'delivered');
    await new Promise((res) => setTimeout(res, 1000));
    assert.equal(rx.received.length, 1, 'exactly once');
    const got = rx.received[0];
    const body = JSON.parse(got.body);
    assert.equal(body.type, 'canary.started');
    assert.equal(body.canary.canary_id, canaryId);
    assert.equal(body.instance, 'restart-proxy');
    assert.equal(got.headers['x-proxy-event-id'], before[0].event_id);
    assert.ok(Number(got.headers['x-proxy-delivery-attempt']) >= 3, 'the attempts made before the kill count');
    assert.ok(verifySignature(SECRET, String(got.headers['x-proxy-timestamp']), got.body, String(got.headers['x-proxy-signature'])));
    assert.equal(configuredHook.received.length, 0, 'the inline channels replace the configured ones');

    const metrics = await (await fetch(`http://127.0.0.1:${profilingPort}/metrics`)).text();
    assert.match(metrics, /^proxy_notifications_delivered_total\{channel="webhook"\} 1$/m);
    assert.match(metrics, /^proxy_notifications_pending 0$/m);
  } finally {
    if (first.child.exitCode === null && first.child.signalCode === null) first.child.kill('SIGKILL');
    if (second !== null) {
      second.kill('SIGTERM');
      await new Promise((res) => second!.once('exit', res));
    }
    await hook.close();
    await configuredHook.close();
  }
});
