// A fleet member with workers, on a real etcd: instance i1 runs one process, i2 runs `--workers 2`.
// The registry reports each one's worker count; a canary created on i1 splits on both workers of
// i2; i2's evidence is its workers' arms merged, and the leader's evaluation counts every request
// of the three processes (its windows add up to the requests sent); a stage change and a rollback
// made on i1 reach both workers of i2; a fleet pipeline generation is served by both workers.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { until } from '../helpers/until.ts';
import { freePort } from '../helpers/ports.ts';
import { callJson } from '../helpers/http.ts';
import { RawClient, opMsg } from '../helpers/wire.ts';
import type { WorkersView } from '../../runtime/http/surface.ts';
import { TOKEN, arms, startFleet } from './stack.ts';

const FILTER = { steps: [{ type: 'filter', config: { rules: [{ name: 'no-bad', action: 'deny', field: { path: 'filter.k', equals: 'bad' } }] } }] };

/** One find per client for k=`k`: how many answered ok, how many the candidate's filter denied. */
async function findAll(clients: RawClient[], k: string): Promise<{ ok: number; denied: number }> {
  const out = { ok: 0, denied: 0 };
  await Promise.all(clients.map(async (c) => {
    const r = await c.roundTrip(opMsg({ find: 'items', filter: { k }, $db: 'app' }), 15_000);
    if (r.body?.ok === 1) out.ok++;
    else if (/deny|no-bad/.test(String(r.body?.errmsg))) out.denied++;
    else assert.fail(`unexpected answer ${JSON.stringify(r.body)}`);
  }));
  return out;
}

test('a fleet member with 2 workers: registered with its worker count, split on both workers, its merged arms in the leader\'s evaluation, ' +
  'a stage change, a rollback and a pipeline generation from another instance reach both workers', { timeout: 300_000 }, async (t) => {
  const adminPort = await freePort();
  const fleet = await startFleet(t, 2, {
    workersOf: (i) => (i === 2 ? 2 : 1),
    extra: (i) => (i === 2 ? { admin: { listen: `127.0.0.1:${adminPort}`, token: TOKEN, reload_on_change: false } } : {}),
  });
  const [i1, i2] = fleet.instances;
  const adminUrl = `http://127.0.0.1:${adminPort}`;
  const workers = async () => (await callJson(adminUrl, TOKEN, 'GET', '/api/v1/workers')).body as WorkersView;
  const registry = (await i1.call('GET', '/api/v1/fleet')).body;
  assert.deepEqual(registry.instances.map((x: any) => [x.instance_id, x.workers]), [['i1', 1], ['i2', 2]]);

  // Clients on i1, and on both workers of i2 (round-robin hand-off: a few connections suffice).
  const on1: RawClient[] = [];
  const on2: RawClient[] = [];
  t.after(() => { for (const c of [...on1, ...on2]) c.destroy(); });
  const port = (uri: string) => Number(/:(\d+)\//.exec(uri)![1]);
  for (let k = 0; k < 4; k++) on1.push(await RawClient.connect(port(i1.uri)));
  for (;;) {
    const w = await workers();
    if (w.workers.length === 2 && w.workers.every((x) => x.connections_active >= 3)) break;
    on2.push(await RawClient.connect(port(i2.uri)));
    assert.ok(on2.length < 40, `connections spread over both workers: ${JSON.stringify(w)}`);
  }

  const created = await i1.call('POST', '/api/v1/canary', {
    pipeline_id: 'default', candidate_config: FILTER, auto_promote: false,
    stages: [{ traffic_pct: 50, min_duration: '1h', min_requests: 0 }, { traffic_pct: 100, min_duration: '1h', min_requests: 0 }],
    // No rule can trip on good requests (the split stays until the test moves it).
    rollback_rules: { check_interval: '1s', min_window_requests: 1, error_rate_delta_pct: 50, latency_p95_delta_ms: 10_000 },
  });
  assert.equal(created.status, 201, JSON.stringify(created.body));
  const id = created.body.canary_id as string;
  await until('i2 to split on both workers', async () => {
    const w = await workers();
    return w.workers.length === 2 && w.workers.every((x) => x.canary?.default?.traffic_pct === 50);
  }, 30_000, 100);
  await until('i1 to split', async () => (await i1.call('GET', `/api/v1/canary/${id}`)).body.traffic_pct === 50, 10_000, 100);

  // A known number of requests through the three processes.
  const rounds = 10;
  let sent2 = 0;
  let sent1 = 0;
  for (let r = 0; r < rounds; r++) {
    const [a, b] = await Promise.all([findAll(on1, 'good'), findAll(on2, 'good')]);
    sent1 += a.ok;
    sent2 += b.ok;
  }
  assert.equal(sent1 + sent2, rounds * (on1.length + on2.length), 'every find answered');
  // Both arms served on both workers of i2, and i2's evidence is their sum.
  const w = await workers();
  for (const x of w.workers) {
    assert.ok((x.canary?.default?.baseline ?? 0) > 0 && (x.canary?.default?.candidate ?? 0) > 0, `worker ${x.worker} split: ${JSON.stringify(x)}`);
  }
  const perWorker = w.workers.reduce((n, x) => n + x.canary!.default.baseline + x.canary!.default.candidate, 0);
  const merged = await arms(i2);
  assert.equal(merged.baseline + merged.candidate, sent2, 'i2\'s evidence counts every request its workers served');
  assert.equal(perWorker, sent2);
  const single = await arms(i1);
  assert.equal(single.baseline + single.candidate, sent1);

  // The leader's evaluation windows add up to every request of the three processes.
  const leader = fleet.byId((await fleet.leader())!);
  let counted = 0;
  await until(() => `the leader's windows to count ${sent1 + sent2} requests (${counted})`, async () => {
    const samples = (await leader.call('GET', `/api/v1/canary/${id}/metrics`)).body.samples as any[];
    counted = samples.reduce((n, s) => n + s.baseline.requests + s.candidate.requests, 0);
    return counted >= sent1 + sent2;
  }, 30_000, 200);
  assert.equal(counted, sent1 + sent2, 'merged requests equal requests sent');

  // A stage change made on i1 reaches both workers of i2: every k=bad find there is the candidate's.
  const version = (await i1.call('GET', `/api/v1/canary/${id}`)).body.version;
  const promoted = await i1.call('POST', `/api/v1/canary/${id}/promote`, { expected_version: version, force: true });
  assert.equal(promoted.status, 200, JSON.stringify(promoted.body));
  await until('both workers of i2 at 100 %', async () => (await workers()).workers.every((x) => x.canary?.default?.traffic_pct === 100), 10_000, 100);
  assert.deepEqual(await findAll(on2, 'bad'), { ok: 0, denied: on2.length });

  // A rollback made on i1 reaches both workers of i2.
  assert.equal((await i1.call('POST', `/api/v1/canary/${id}/rollback`, { reason: 'test' })).status, 200);
  await until('both workers of i2 to split no more', async () => (await workers()).workers.every((x) => JSON.stringify(x.canary) === '{}'),
    10_000, 100);
  assert.deepEqual(await findAll(on2, 'bad'), { ok: on2.length, denied: 0 });

  // A fleet pipeline generation published on i1: both workers of i2 serve it, and i2 reports it.
  const deny = { filter: { config: { rules: [{ name: 'fleet-deny', action: 'deny', field: { path: 'filter.k', equals: 'bad' } }] } } };
  const published = await i1.call('POST', '/api/v1/fleet/pipelines', { pipeline: { request: ['wasm:filter'] }, steps: deny });
  assert.equal(published.status, 201, JSON.stringify(published.body));
  await until('i2 to serve generation 1', async () => (await i1.call('GET', '/api/v1/fleet')).body.instances.every((x: any) => x.graph_generation === 1),
    30_000, 100);
  assert.deepEqual(await findAll(on2, 'bad'), { ok: 0, denied: on2.length }, 'both workers run the published graph');
  const generations = (await workers()).workers.map((x) => x.generations.default);
  assert.equal(new Set(generations).size, 1, `one graph generation on both workers: ${generations}`);
});
