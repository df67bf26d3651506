// One canary across `proxy serve --workers 2` (a real child process, the embedded devdb upstream):
// the primary's controller splits on both workers (GET /api/v1/workers shows each worker's arms), a
// change of split, a manual rollback and an automatic one (decided on both workers' merged arms)
// reach both workers before the control plane answers, with one history entry per transition; a
// candidate that cannot be built fails the create with nothing moved; a worker killed mid-canary is
// replaced and serves the canary as the other does (shadow canaries with workers: shadow.test.ts).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '../helpers/ports.ts';
import { until } from '../helpers/until.ts';
import { spawnServe, type Served } from '../helpers/serve.ts';
import { RawClient, opMsg } from '../helpers/wire.ts';
import { callJson } from '../helpers/http.ts';
import type { WorkersView } from '../../runtime/http/surface.ts';

const TOKEN = 'cluster-canary-token-0123';
const NO_BAD = { steps: [{ type: 'filter', config: { rules: [{ name: 'no-bad', action: 'deny', field: { path: 'filter.k', equals: 'bad' } }] } }] };
const MANUAL_RULES = { check_interval: '1h' };

let served: Served;
let port: number;
let adminUrl: string;
let cpUrl: string;
const clients: RawClient[] = [];

const call = (base: string, method: string, path: string, body?: unknown) => callJson(base, TOKEN, method, path, body);

const canary = (method: string, path: string, body?: unknown) => call(cpUrl, method, `/api/v1/canary${path}`, body);
const workers = async () => (await call(adminUrl, 'GET', '/api/v1/workers')).body as WorkersView;

/** One find per client for k=`k`: how many were denied by the candidate's filter, how many answered ok. */
async function findAll(k: string): Promise<{ ok: number; denied: number }> {
  const out = { ok: 0, denied: 0 };
  await Promise.all(clients.map(async (c) => {
    const r = await c.roundTrip(opMsg({ find: 'items', filter: { k }, $db: 'app' }), 15_000);
    if (r.body?.ok === 1) out.ok++;
    else if (/no-bad/.test(String(r.body?.errmsg))) out.denied++;
    else assert.fail(`unexpected answer ${JSON.stringify(r.body)}`);
  }));
  return out;
}

/** Connects clients until both workers hold some (round-robin: a few suffice). */
async function connectOnBoth(): Promise<void> {
  for (;;) {
    const w = await workers();
    if (w.workers.length === 2 && w.workers.every((x) => x.connections_active >= 2)) return;
    clients.push(await RawClient.connect(port));
    assert.ok(clients.length < 40, `connections spread over both workers: ${JSON.stringify(w)}`);
  }
}

before(async () => {
  const dir = mkdtempSync(join(tmpdir(), 'proxy-cluster-canary-'));
  [port] = [await freePort()];
  const [adminPort, cpPort] = [await freePort(), await freePort()];
  const file = join(dir, 'proxy.json');
  writeFileSync(file, JSON.stringify({
    listen: `127.0.0.1:${port}`, log: { level: 'warn' }, pipeline: { response: ['metrics'] },
    admin: { listen: `127.0.0.1:${adminPort}`, token: TOKEN, reload_on_change: false },
    control_plane: { port: cpPort, tokens: [TOKEN] }, canary: { data_dir: join(dir, 'canary') },
  }));
  served = await spawnServe(['--config', file, '--workers', '2']);
  adminUrl = `http://127.0.0.1:${adminPort}`;
  cpUrl = `http://127.0.0.1:${cpPort}`;
  await connectOnBoth();
});

after(async () => {
  for (const c of clients) c.destroy();
  await served?.stop();
});

test('a canary splits on both workers; a traffic change and a manual rollback reach both before they are answered; one history entry each',
  { timeout: 180_000 }, async () => {
    const created = await canary('POST', '', { pipeline_id: 'default', auto_promote: false, candidate_config: NO_BAD,
      stages: [{ traffic_pct: 50, min_duration: '1h', min_requests: 0 }, { traffic_pct: 100, min_duration: '0', min_requests: 0 }],
      rollback_rules: MANUAL_RULES });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const id = created.body.canary_id as string;
    // Both graphs counted on both workers.
    await until('both arms counted on both workers', async () => {
      await findAll('good');
      const w = await workers();
      return w.workers.length === 2 && w.workers.every((x) => (x.canary?.default?.baseline ?? 0) > 0 && (x.canary?.default?.candidate ?? 0) > 0);
    }, 60_000, 50);
    // 100 % on every worker once the PATCH is answered: every k=bad find is denied, on either worker.
    const patched = await canary('PATCH', `/${id}`, { traffic_pct: 100 });
    assert.equal(patched.status, 200, JSON.stringify(patched.body));
    for (const x of (await workers()).workers) assert.equal(x.canary?.default?.traffic_pct, 100, `worker ${x.worker}`);
    assert.deepEqual(await findAll('bad'), { ok: 0, denied: clients.length });
    // Rolled back on every worker once answered: the very next requests are the baseline's.
    const rolled = await canary('POST', `/${id}/rollback`, { reason: 'test' });
    assert.equal(rolled.status, 200, JSON.stringify(rolled.body));
    assert.deepEqual(await findAll('bad'), { ok: clients.length, denied: 0 });
    for (const x of (await workers()).workers) assert.deepEqual(x.canary, {}, `worker ${x.worker} has no split left`);
    const history = (await canary('GET', `/${id}/history`)).body as { history: Array<{ event: string }> };
    assert.deepEqual(history.history.map((e) => e.event), ['started', 'traffic_changed', 'rolled_back'], 'one entry per transition');
  });

test('an automatic rollback, decided on both workers\' merged arms, reaches both before the canary reads rolled back', { timeout: 180_000 }, async () => {
  const created = await canary('POST', '', { pipeline_id: 'default', auto_promote: false, candidate_config: NO_BAD,
    stages: [{ traffic_pct: 50, min_duration: '1h', min_requests: 100_000 }, { traffic_pct: 100, min_duration: '0', min_requests: 0 }],
    rollback_rules: { error_rate_delta_pct: 5, latency_p95_delta_ms: 1000, sustained_duration: '2s', check_interval: '500ms', min_window_requests: 5 } });
  assert.equal(created.status, 201, JSON.stringify(created.body));
  const id = created.body.canary_id as string;
  let status = '';
  await until('the automatic rollback', async () => {
    await findAll('good');
    await findAll('bad');
    status = (await canary('GET', `/${id}`)).body.status as string;
    return status !== 'active';
  }, 90_000, 20).catch(async (e: Error) => {
    throw new Error(`${e.message}: ${JSON.stringify((await canary('GET', `/${id}/metrics`)).body)}\n${served.err().slice(-3000)}`);
  });
  assert.equal(status, 'rolled_back');
  // The read that showed it rolled back was answered after every worker dropped the candidate.
  assert.deepEqual(await findAll('bad'), { ok: clients.length, denied: 0 });
  const report = (await canary('GET', `/${id}/report`)).body;
  assert.equal(report.triggering_rules?.[0]?.rule, 'error_rate_delta_pct', JSON.stringify(report));
  const history = (await canary('GET', `/${id}/history`)).body as { history: Array<{ event: string }> };
  const events = history.history.map((e) => e.event);
  assert.equal(events[0], 'started');
  assert.deepEqual(events.filter((e) => e === 'rolled_back' || e === 'started'), ['started', 'rolled_back'], `one entry per transition: ${events}`);
});

test('custom_metrics read a plugin metric of every worker, summed (the metrics step: one request per request on both graphs)', { timeout: 180_000 },
  async (t) => {
    const created = await canary('POST', '', { pipeline_id: 'default', auto_promote: false, candidate_config: { steps: [{ type: 'logging', config: {} }] },
      stages: [{ traffic_pct: 50, min_duration: '1h', min_requests: 0 }, { traffic_pct: 100, min_duration: '0', min_requests: 0 }],
      rollback_rules: { check_interval: '300ms', min_window_requests: 5, custom_metrics: [{ metric: 'proxy_plugin_requests_total',
        threshold_delta: 0.5, comparison: 'greater_than' }] } });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const id = created.body.canary_id as string;
    t.after(() => canary('POST', `/${id}/rollback`, {}));
    let rule: { state: string; value: number; met: boolean } | undefined;
    await until('a custom reading with evidence', async () => {
      await findAll('good');
      rule = ((await canary('GET', `/${id}`)).body.rules as Array<{ rule: string; state: string; value: number; met: boolean }>)
        .find((x) => x.rule === 'custom:proxy_plugin_requests_total');
      // The first window also counts the baseline's requests from before the canary (custom-metrics.ts);
      // the next ones are the windows' own.
      return rule !== undefined && rule.state !== 'no_data' && Math.abs(rule.value) < 0.05;
    }, 60_000, 50);
    // The primary serves no request: a reading at all comes from the workers' registries, and a
    // per-request delta of 0 from their counters and arms summed alike.
    assert.equal(rule!.met, false);
  });

test('a candidate that cannot be built fails the create, and nothing moves on any worker', { timeout: 120_000 }, async () => {
  const r = await canary('POST', '', { pipeline_id: 'default', auto_promote: false, rollback_rules: MANUAL_RULES,
    candidate_config: { steps: [{ type: 'filter', config: { rules: [{ name: 'broken', action: 'nonsense' }] } }] } });
  assert.equal(r.status, 400, JSON.stringify(r.body));
  assert.equal(r.body.error.code, 'PROXY_ERR_CANARY_CANDIDATE_REFUSED');
  const active = (await canary('GET', '?status=active')).body as { canaries: unknown[] };
  assert.deepEqual(active.canaries, [], JSON.stringify(active));
  for (const x of (await workers()).workers) assert.deepEqual(x.canary, {}, `worker ${x.worker}`);
  assert.deepEqual(await findAll('bad'), { ok: clients.length, denied: 0 });
});

test('a completion makes the candidate the baseline on both workers, a reload keeps it there, and a restore reaches both before it is answered',
  { timeout: 180_000 }, async (t) => {
    const created = await canary('POST', '', { pipeline_id: 'default', auto_promote: false, candidate_config: NO_BAD, rollback_rules: MANUAL_RULES,
      stages: [{ traffic_pct: 50, min_duration: '1h', min_requests: 0 }, { traffic_pct: 100, min_duration: '0', min_requests: 0 }] });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const id = created.body.canary_id as string;
    t.after(() => canary('POST', `/${id}/rollback`, {}));
    const promoted = await canary('POST', `/${id}/promote`, { force: true });
    assert.equal(promoted.status, 200, JSON.stringify(promoted.body));
    assert.equal((await canary('GET', `/${id}`)).body.status, 'completed');
    assert.deepEqual(await findAll('bad'), { ok: 0, denied: clients.length }, 'the candidate is every worker\'s baseline');
    for (const x of (await workers()).workers) assert.deepEqual(x.canary, {}, `worker ${x.worker} has no split left`);
    // A reload of the unchanged file keeps the promoted graph on every worker, as in the primary.
    const reloaded = await call(adminUrl, 'POST', '/api/v1/reload');
    assert.equal(reloaded.status, 200, JSON.stringify(reloaded.body));
    assert.deepEqual(await findAll('bad'), { ok: 0, denied: clients.length }, 'still the promoted baseline after a reload');
    const restored = await canary('POST', `/${id}/restore-baseline`, {});
    assert.equal(restored.status, 200, JSON.stringify(restored.body));
    assert.deepEqual(await findAll('bad'), { ok: clients.length, denied: 0 }, 'the old baseline again on every worker');
  });

test('a worker killed during a canary is replaced and serves the canary before it takes clients', { timeout: 180_000 }, async () => {
  const created = await canary('POST', '', { pipeline_id: 'default', auto_promote: false, candidate_config: NO_BAD, rollback_rules: MANUAL_RULES,
    stages: [{ traffic_pct: 100, min_duration: '1h', min_requests: 0 }, { traffic_pct: 100, min_duration: '0', min_requests: 0 }] });
  assert.equal(created.status, 201, JSON.stringify(created.body));
  const id = created.body.canary_id as string;
  const before = await workers();
  process.kill(before.workers[0].pid, 'SIGKILL');
  await until('the replacement worker serving the canary', async () => {
    const w = await workers();
    return w.replaced >= before.replaced + 1 && w.workers.length === 2 && w.workers.every((x) => x.canary?.default?.traffic_pct === 100);
  }, 120_000, 200);
  // Fresh connections, on both workers: every k=bad find is the candidate's.
  for (const c of clients.splice(0)) c.destroy();
  await connectOnBoth();
  assert.deepEqual(await findAll('bad'), { ok: 0, denied: clients.length });
  assert.equal((await canary('POST', `/${id}/rollback`, {})).status, 200);
  assert.deepEqual(await findAll('bad'), { ok: clients.length, denied: 0 });
});
