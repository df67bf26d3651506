// Durations past Node's 32-bit timer limit (2^31 - 1 ms, about 24.8 days) on a real proxy: a
// check_interval of "600h" must not evaluate every millisecond, and a baseline_grace_period of
// "720h" must keep the old baseline restorable (both fired at once, with a TimeoutOverflowWarning).
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseConfig } from '../../runtime/config/index.ts';
import { startProxy, type RunningProxy } from '../../runtime/app/serve.ts';
import { Logger } from '../../runtime/log/index.ts';
import { longInterval, longTimeout, MAX_TIMER_MS } from '../../runtime/canary/long-timers.ts';

const TOKEN = 'canary-long-token-0123456789';
let proxy: RunningProxy | null = null;
after(async () => { await proxy?.close(); });

async function call(base: string, method: string, path: string, body?: unknown) {
  const headers: Record<string, string> = { authorization: `Bearer ${TOKEN}` };
  if (body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(`${base}/api/v1/canary${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  return { status: res.status, body: await res.json() as any };
}

test('check_interval and baseline_grace_period longer than 24.8 days: no evaluation every millisecond, the old baseline stays restorable', async () => {
  proxy = await startProxy(parseConfig({
    listen: '127.0.0.1:0', log: { level: 'error' },
    control_plane: { port: 0, tokens: [TOKEN] },
    canary: { data_dir: mkdtempSync(join(tmpdir(), 'canary-long-')), baseline_grace_period: '720h' },
    rollback_rules: { check_interval: '600h' },
  }, null), { log: new Logger('test', 'error') });
  const base = proxy.controlPlaneUrl!;
  const started = await call(base, 'POST', '', { candidate_config: { steps: [{ type: 'logging', config: {} }] }, auto_promote: false,
    stages: [{ traffic_pct: 10, min_duration: '0', min_requests: 0 }, { traffic_pct: 100, min_duration: '0', min_requests: 0 }] });
  assert.equal(started.status, 201, JSON.stringify(started.body));
  const id = started.body.canary_id as string;
  await sleep(300);
  const samples = await call(base, 'GET', `/${id}/metrics`);
  assert.equal(samples.status, 200);
  assert.equal(samples.body.samples.length, 0, 'no evaluation within 300 ms of a 600h check_interval');
  const promoted = await call(base, 'POST', `/${id}/promote`, {});
  assert.equal(promoted.status, 200, JSON.stringify(promoted.body));
  assert.equal(promoted.body.status, 'completed');
  await sleep(200);
  const history = await call(base, 'GET', `/${id}/history`);
  assert.ok(!history.body.history.some((h: { event: string }) => h.event === 'baseline_released'), JSON.stringify(history.body.history));
  const restored = await call(base, 'POST', `/${id}/restore-baseline`);
  assert.equal(restored.status, 200, JSON.stringify(restored.body));
});

test('longTimeout and longInterval: a delay up to the limit runs as a plain timer; a cancel stops them', async () => {
  let n = 0;
  const stop = longInterval(5, () => { n++; });
  await sleep(60);
  stop();
  const seen = n;
  assert.ok(seen >= 2, `ran ${seen} times`);
  await sleep(30);
  assert.equal(n, seen, 'no call after cancel');
  let fired = false;
  const cancel = longTimeout(MAX_TIMER_MS + 1, () => { fired = true; });
  await sleep(30);
  cancel();
  assert.equal(fired, false);
  const cancelEvery = longInterval(MAX_TIMER_MS * 2, () => { fired = true; });
  await sleep(30);
  cancelEvery();
  assert.equal(fired, false);
});
