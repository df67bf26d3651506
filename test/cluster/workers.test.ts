// `proxy serve --workers 2` (node:cluster), a real child process: connections spread over both
// workers; the primary's /api/profile, /metrics and /api/v1/workers count what every worker served
// (?worker=<i> what one did)
// (a killed worker's counts too); a killed worker is replaced while the other one's clients carry on;
// a reload reaches every worker before it is answered; kill -9 of the primary ends the workers.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execFileSync } from 'node:child_process';
import { until } from '../helpers/until.ts';
import { admin, startWorkers, type Started } from '../helpers/workers.ts';
import { RawClient, opMsg } from '../helpers/wire.ts';
import { promtoolFindings } from '../helpers/promtool.ts';
import type { WorkersView } from '../../runtime/http/surface.ts';
import { workerExecArgv } from '../../runtime/cluster/machine.ts';
import { METRICS, type MetricSpec } from '../../runtime/metrics/index.ts';

const dir = mkdtempSync(join(tmpdir(), 'proxy-workers-'));
const start = (name: string, extra: Record<string, unknown> = {}) => startWorkers(dir, name, extra);

async function totalRequests(s: Started): Promise<number> {
  const res = await fetch(`${s.profiling}/api/profile`);
  return (await res.json() as { total_requests: number }).total_requests;
}

function metric(text: string, name: string): number {
  const m = new RegExp(`^${name} (\\d+)$`, 'm').exec(text);
  assert.ok(m !== null, `${name} in /metrics`);
  return Number(m[1]);
}

/** `n` finds on `client`, one after the other; each answered ok. */
async function finds(client: RawClient, n: number): Promise<void> {
  for (let i = 0; i < n; i++) {
    const r = await client.roundTrip(opMsg({ find: 'items', filter: {}, $db: 'workers' }), 15_000);
    assert.equal(r.body?.ok, 1);
  }
}

test('workers get the young generation\'s floor unless the proxy was started with a semi-space size of its own', () => {
  assert.deepEqual(workerExecArgv(['--enable-source-maps']), ['--enable-source-maps', '--min-semi-space-size=16']);
  assert.deepEqual(workerExecArgv(['--max-semi-space-size=64']), ['--max-semi-space-size=64']);
  assert.deepEqual(workerExecArgv(['--min-semi-space-size=4']), ['--min-semi-space-size=4']);
});

test('connections land on both workers, and the merged counts equal the requests sent', { timeout: 180_000 }, async () => {
  const s = await start('counts');
  const clients: RawClient[] = [];
  try {
    for (let i = 0; i < 6; i++) clients.push(await RawClient.connect(s.port));
    await Promise.all(clients.map((c) => finds(c, 10)));
    const { body } = await admin<WorkersView>(s, '/api/v1/workers');
    assert.equal(body.workers.length, 2);
    assert.notEqual(body.workers[0].pid, body.workers[1].pid);
    for (const w of body.workers) {
      // Each worker keeps a young generation of at least 16 MiB per semi-space (runtime/cluster/machine.ts).
      const argv = readFileSync(`/proc/${w.pid}/cmdline`, 'utf8').split('\0');
      assert.ok(argv.includes('--min-semi-space-size=16'), `worker ${w.worker}'s node options: ${argv.join(' ')}`);
    }
    for (const w of body.workers) assert.ok(w.connections_active >= 1, `worker ${w.worker} holds connections: ${JSON.stringify(body.workers)}`);
    assert.equal(body.workers.reduce((n, w) => n + w.requests, 0), 60);
    assert.equal(await totalRequests(s), 60, 'the profile counts every worker\'s requests');
    const text = await (await fetch(`${s.profiling}/metrics`)).text();
    assert.equal(metric(text, 'proxy_wire_requests_total'), 60);
    assert.equal(metric(text, 'proxy_client_connections'), 6);
    assert.match(text, /^proxy_requests_total\{pipeline_id="default",pipeline="baseline",status="ok"\} 60$/m);
    // The primary's own series: the workers serving, none replaced.
    assert.match(text, /^proxy_workers 2$/m);
    assert.match(text, /^proxy_worker_restarts_total\{reason="exited"\} 0$/m);
    assert.match(text, /^proxy_worker_start_failures_total 0$/m);
    for (const [name, spec] of Object.entries(METRICS as Record<string, MetricSpec>).filter(([, m]) => m.owner === 'machine')) {
      assert.ok(text.includes(`# HELP ${name} ${spec.help}\n# TYPE ${name} ${spec.type}\n`), `${name} with the metric table's help and type`);
    }
    // Only the unit lint on the µs histograms (the step latency's, and the built-in metrics step's, which keeps its documented name).
    const findings = promtoolFindings(text, /proxy_(step_latency|plugin_request_duration)_us.*(abbreviated|units|non-base)/i);
    if (findings !== null) assert.deepEqual(findings, [], `promtool findings on the machine's /metrics: ${findings.join(' | ')}`);
    const flame = await (await fetch(`${s.profiling}/api/profile/flamegraph?format=folded`)).text();
    assert.ok(flame.length > 0, 'the flame graph has frames');
    // ?worker=<i>: one worker's figures; together they make the machine's.
    const one = await Promise.all([0, 1].map(async (i) => (await (await fetch(`${s.profiling}/api/profile?worker=${i}`)).json() as {
      total_requests: number }).total_requests));
    assert.ok(one.every((n) => n > 0), `both workers served requests: ${one}`);
    assert.equal(one[0] + one[1], 60);
    for (const w of body.workers) {
      assert.equal(metric(await (await fetch(`${s.profiling}/metrics?worker=${w.worker}`)).text(), 'proxy_wire_requests_total'), w.requests);
    }
    // proxy profile reads the machine, or one worker with --worker.
    const cli = (args: string[]) => JSON.parse(execFileSync(process.execPath, [join(process.cwd(), 'bin/proxy.mjs'), 'profile', '--url', s.profiling,
      '--json', ...args], { encoding: 'utf8', timeout: 60_000 })) as { total_requests: number };
    assert.equal(cli([]).total_requests, 60);
    assert.equal(cli(['--worker', '1']).total_requests, one[1]);
    const bad = await fetch(`${s.profiling}/api/profile?worker=7`);
    assert.equal(bad.status, 400);
    assert.equal((await bad.json() as { error: { code: string } }).error.code, 'PROXY_ERR_BAD_QUERY');
    // A reset reaches every worker: the machine counts from zero again.
    assert.equal((await fetch(`${s.profiling}/api/profile/reset`, { method: 'POST' })).status, 200);
    assert.equal(await totalRequests(s), 0);
    await Promise.all(clients.map((c) => finds(c, 1)));
    assert.equal(await totalRequests(s), 6);
  } finally {
    for (const c of clients) c.destroy();
    assert.equal(await s.served.stop(), 0);
  }
});

test('a killed worker is replaced; the other worker\'s clients are not affected and the killed one\'s counts are kept', { timeout: 180_000 }, async () => {
  const s = await start('kill');
  const clients: RawClient[] = [];
  try {
    for (let i = 0; i < 4; i++) clients.push(await RawClient.connect(s.port));
    await Promise.all(clients.map((c) => finds(c, 5)));
    assert.equal(await totalRequests(s), 20);
    const before = (await admin<WorkersView>(s, '/api/v1/workers')).body;
    const victim = before.workers[0];
    // Round-robin hands connections out in turn, but the split of 4 need not be exactly 2 and 2.
    const onVictim = victim.connections_active;
    assert.ok(onVictim >= 1 && onVictim <= 3, `both workers hold clients: ${JSON.stringify(before.workers)}`);
    process.kill(victim.pid, 'SIGKILL');
    // The killed worker's clients see their connection close; the others answer on.
    const outcome = await Promise.all(clients.map(async (c) => {
      try {
        await finds(c, 5);
        return 'served';
      } catch {
        return 'closed';
      }
    }));
    assert.equal(outcome.filter((o) => o === 'served').length, 4 - onVictim, `the survivor's clients carry on: ${outcome}`);
    assert.equal(outcome.filter((o) => o === 'closed').length, onVictim);
    await until('a replacement worker', async () => {
      const v = (await admin<WorkersView>(s, '/api/v1/workers')).body;
      return v.replaced === 1 && v.workers.length === 2 && v.workers.every((w) => w.pid !== victim.pid);
    }, 90_000, 200);
    // The 20 requests before the kill (the killed worker's included) and the survivors' 5 each.
    const afterKill = 20 + 5 * (4 - onVictim);
    assert.equal(await totalRequests(s), afterKill);
    const fresh = await RawClient.connect(s.port);
    const again = await RawClient.connect(s.port);
    clients.push(fresh, again);
    await finds(fresh, 1);
    await finds(again, 1);
    assert.equal(await totalRequests(s), afterKill + 2);
  } finally {
    for (const c of clients) c.destroy();
    assert.equal(await s.served.stop(), 0);
  }
});

test('a reload is applied by every worker before it is answered: one generation served, by a replaced worker too', { timeout: 180_000 }, async () => {
  const s = await start('reload');
  const clients: RawClient[] = [];
  let load = true;
  try {
    for (let i = 0; i < 4; i++) clients.push(await RawClient.connect(s.port));
    // Requests keep flowing on every worker while the reload applies.
    const running = clients.map(async (c) => { while (load) await finds(c, 1); });
    const before = (await admin<WorkersView>(s, '/api/v1/workers')).body;
    assert.deepEqual(before.workers.map((w) => w.generations.default), [1, 1]);
    const next = { ...s.config, pipeline: { request: ['logging'], response: ['metrics'] } };
    const r = await admin<{ reloaded: boolean }>(s, '/api/v1/reload', { method: 'POST', body: JSON.stringify(next) });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    const after = (await admin<WorkersView>(s, '/api/v1/workers')).body;
    assert.deepEqual(after.workers.map((w) => w.generations.default), [2, 2], 'both workers serve the new graph once the reload is answered');
    // A reload a plugin refuses is refused by the primary before any worker changes.
    const bad = { ...s.config, pipeline: { request: ['route'] }, steps: { route: { config: { rules: 'nope' } } } };
    const refused = await admin<{ error: { code: string } }>(s, '/api/v1/reload', { method: 'POST', body: JSON.stringify(bad) });
    assert.equal(refused.status, 422);
    assert.deepEqual((await admin<WorkersView>(s, '/api/v1/workers')).body.workers.map((w) => w.generations.default), [2, 2]);
    load = false;
    await Promise.all(running);
    // A worker started in place of one that died serves the machine's generation, with the new steps.
    process.kill(after.workers[1].pid, 'SIGKILL');
    await until('a replacement worker', async () => {
      const v = (await admin<WorkersView>(s, '/api/v1/workers')).body;
      return v.replaced === 1 && v.workers.length === 2;
    }, 90_000, 200);
    assert.deepEqual((await admin<WorkersView>(s, '/api/v1/workers')).body.workers.map((w) => w.generations.default), [2, 2]);
  } finally {
    load = false;
    for (const c of clients) c.destroy();
    assert.equal(await s.served.stop(), 0);
  }
});

test('SIGTERM during a reload that waits on a stopped worker drains within the drain timeout, not the reload\'s 2 minutes', { timeout: 240_000 }, async () => {
  const s = await start('hung', { shutdown: { drain_timeout_ms: 1000 } });
  const pids = (await admin<WorkersView>(s, '/api/v1/workers')).body.workers.map((w) => w.pid);
  assert.equal(pids.length, 2);
  process.kill(pids[1], 'SIGSTOP');
  try {
    // The reload waits for the stopped worker's answer (for up to two minutes).
    const next = { ...s.config, pipeline: { request: ['logging'], response: ['metrics'] } };
    const reload = admin(s, '/api/v1/reload', { method: 'POST', body: JSON.stringify(next) }).catch(() => null);
    await new Promise((r) => setTimeout(r, 1500));
    const t0 = Date.now();
    const code = await s.served.stop('SIGTERM');
    const tookMs = Date.now() - t0;
    // The reload gets one second (the drain timeout), the workers' drain one more plus the ten
    // seconds a worker is given to answer before it is ended.
    assert.ok(tookMs < 40_000, `the proxy exited ${tookMs} ms after SIGTERM`);
    assert.equal(code, 0);
    await reload;
  } finally {
    for (const pid of pids) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch { /* exited */ }
    }
  }
});

test('kill -9 of the primary takes the workers with it', { timeout: 180_000 }, async () => {
  const s = await start('orphans');
  const pids = (await admin<WorkersView>(s, '/api/v1/workers')).body.workers.map((w) => w.pid);
  assert.equal(pids.length, 2);
  await s.served.stop('SIGKILL');
  const alive = (pid: number) => {
    try {
      process.kill(pid, 0);
      return true;
    } catch {
      return false;
    }
  };
  await until('the workers exit', () => pids.every((p) => !alive(p)), 30_000, 100);
});
