// etcd stops under a three-instance fleet with a bad candidate splitting: every instance keeps
// serving with the weights it last applied, no rollback is decided and writes answer 503; when
// etcd returns, the decision is made (the rollback reaches all three). A create, like every other
// write, answers 503 while etcd is down.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { until } from '../helpers/until.ts';
import { arms, startFleet, traffic } from './stack.ts';
import { httpReceiver } from '../canary/notify/helpers.ts';

const FILTER = { steps: [{ type: 'filter', config: { rules: [{ name: 'no-bad', action: 'deny', field: { path: 'filter.k', equals: 'bad' } }] } }] };

test('etcd stopped: traffic continues with the last weights and nothing is decided; decisions resume when it returns', async (t) => {
  const fleet = await startFleet(t, 3);
  const loads = fleet.instances.map((x) => traffic(x.uri, 5));
  t.after(() => Promise.all(loads.map((l) => l.stop())));
  const created = await fleet.instances[1].call('POST', '/api/v1/canary', {
    pipeline_id: 'default', candidate_config: FILTER, auto_promote: false,
    stages: [{ traffic_pct: 50, min_duration: '0', min_requests: 0 }, { traffic_pct: 100, min_duration: '0', min_requests: 0 }],
    rollback_rules: { error_rate_delta_pct: 5, latency_p95_delta_ms: 5000, sustained_duration: '4s', check_interval: '1s', min_window_requests: 5 },
  });
  assert.equal(created.status, 201, JSON.stringify(created.body));
  const id = created.body.canary_id as string;
  for (const x of fleet.instances) await until(`${x.id} to split`, async () => (await arms(x)).candidate > 5, 20_000, 100);
  await fleet.etcd.stop();
  const stoppedAt = Date.now();
  const before = await Promise.all(fleet.instances.map((x) => arms(x)));
  // Past the sustained window: the breach goes on, but without the store nothing is decided.
  await new Promise((r) => setTimeout(r, 8000));
  for (const [i, x] of fleet.instances.entries()) {
    const s = (await x.call('GET', `/api/v1/canary/${id}`)).body;
    assert.equal(s.status, 'active', `${x.id} still splits`);
    assert.equal(s.traffic_pct, 50);
    const now = await arms(x);
    assert.ok(now.candidate > before[i].candidate + 10, `${x.id} keeps sending traffic to the candidate at the last weights`);
    const f = (await x.call('GET', '/api/v1/fleet')).body;
    assert.equal(f.reachable, false);
    assert.ok(f.store_unreachable_since !== null);
  }
  const refused = await fleet.instances[0].call('PATCH', `/api/v1/canary/${id}`, { traffic_pct: 10 });
  assert.equal(refused.status, 503);
  assert.equal(refused.body.error.code, 'PROXY_ERR_CANARY_STORE_UNREACHABLE');
  const history = (await fleet.instances[0].call('GET', `/api/v1/canary/${id}/history`)).body.history as any[];
  assert.ok(!history.some((e) => e.event === 'rolled_back' && Date.parse(e.at) >= stoppedAt));
  await fleet.etcd.restart();
  const back = Date.now();
  await until(() => `the rollback on all three once etcd is back; logs:\n${fleet.instances.map((x) => `${x.id}: ${x.output().slice(-2500)}`).join('\n')}`,
    async () => {
      const s = await Promise.all(fleet.instances.map((x) => x.call('GET', `/api/v1/canary/${id}`)));
      return s.every((x) => x.body.status === 'rolled_back');
    }, 40_000, 200);
  console.log(`rolled back on all three ${Date.now() - back} ms after etcd was back`);
  for (const x of fleet.instances) assert.equal((await arms(x)).candidate, 0);
  for (const l of loads) assert.equal(l.counts.failed, 0, 'no request failed while the store was down');
});

test('fleet.fail_safe_after: with etcd gone that long every instance sends all traffic to the baseline and says so (log and the canary\'s ' +
  'channels: canary.store_unreachable, then canary.fail_safe, from each instance); the store\'s weights return with it', async (t) => {
  const hook = await httpReceiver();
  t.after(() => hook.close());
  const fleet = await startFleet(t, 3, { fleet: { fail_safe_after: '5s' } });
  const loads = fleet.instances.map((x) => traffic(x.uri, 1000));
  t.after(() => Promise.all(loads.map((l) => l.stop())));
  const created = await fleet.instances[0].call('POST', '/api/v1/canary', {
    pipeline_id: 'default', candidate_config: FILTER, auto_promote: false,
    stages: [{ traffic_pct: 50, min_duration: '0', min_requests: 0 }, { traffic_pct: 100, min_duration: '0', min_requests: 0 }],
    rollback_rules: { check_interval: '1s', min_window_requests: 5 },
    notifications: { channels: [{ type: 'webhook', url: hook.url, secret: 'fleet-e2e-secret-0123456789' }] },
  });
  assert.equal(created.status, 201, JSON.stringify(created.body));
  const id = created.body.canary_id as string;
  for (const x of fleet.instances) await until(`${x.id} to split`, async () => (await arms(x)).candidate > 5, 20_000, 100);
  await fleet.etcd.stop();
  const stoppedAt = Date.now();
  for (const x of fleet.instances) {
    await until(`${x.id} to engage the fail-safe`, async () => (await x.call('GET', '/api/v1/fleet')).body.fail_safe === true, 20_000, 200);
  }
  await new Promise((r) => setTimeout(r, 500));
  const held = await Promise.all(fleet.instances.map((x) => arms(x)));
  await new Promise((r) => setTimeout(r, 2000));
  for (const [i, x] of fleet.instances.entries()) {
    const now = await arms(x);
    assert.equal(now.candidate, held[i].candidate, `${x.id} sends nothing to the candidate`);
    assert.ok(now.baseline > held[i].baseline + 10, `${x.id} serves on the baseline`);
    assert.match(x.output(), /every canary's traffic goes to the baseline \(fleet\.fail_safe_after\)/);
  }
  // Each instance told the canary's channel itself, both conditions, in order, naming itself.
  const told = () => hook.received.map((r) => JSON.parse(r.body)).filter((b) => Date.parse(b.at) >= stoppedAt);
  await until('canary.store_unreachable and canary.fail_safe from all three instances', async () =>
    fleet.instances.every((x) => ['canary.store_unreachable', 'canary.fail_safe'].every((type) =>
      told().some((b) => b.type === type && b.fleet?.instance_id === x.id))), 20_000, 200);
  for (const x of fleet.instances) {
    const mine = told().filter((b) => b.fleet?.instance_id === x.id);
    assert.deepEqual(mine.map((b) => b.type), ['canary.store_unreachable', 'canary.fail_safe'], `${x.id}: once each, in order`);
    for (const b of mine) {
      assert.equal(b.canary.canary_id, id);
      assert.match(b.summary, /unreachable for \d+ s/);
      assert.equal(b.fleet.fail_safe, b.type === 'canary.fail_safe');
    }
  }
  await fleet.etcd.restart();
  for (const [i, x] of fleet.instances.entries()) {
    await until(`${x.id} to split again at the store's weights`, async () => (await arms(x)).candidate > held[i].candidate + 5, 30_000, 200);
    assert.equal((await x.call('GET', '/api/v1/fleet')).body.fail_safe, false);
  }
});

test('etcd stopped: a canary create and GET /api/v1/fleet/pipelines answer 503 PROXY_ERR_CANARY_STORE_UNREACHABLE, and the create works once it is back',
  async (t) => {
    const fleet = await startFleet(t, 1);
    const [x] = fleet.instances;
    const body = { pipeline_id: 'default', candidate_config: FILTER, auto_promote: false, stages: [{ traffic_pct: 10, min_duration: '0', min_requests: 0 }] };
    await fleet.etcd.stop();
    // At once (the lease not yet expired: the registry read fails) and once the instance knows the store is gone.
    const early = await x.call('POST', '/api/v1/canary', body);
    assert.equal(early.status, 503, JSON.stringify(early.body));
    assert.equal(early.body.error.code, 'PROXY_ERR_CANARY_STORE_UNREACHABLE');
    await until('the instance to see the store unreachable', async () => (await x.call('GET', '/api/v1/fleet')).body.reachable === false, 15_000, 100);
    for (const [method, path, b] of [['POST', '/api/v1/canary', body], ['GET', '/api/v1/fleet/pipelines', undefined]] as const) {
      const r = await x.call(method, path, b);
      assert.equal(r.status, 503, `${method} ${path}: ${JSON.stringify(r.body)}`);
      assert.equal(r.body.error.code, 'PROXY_ERR_CANARY_STORE_UNREACHABLE');
    }
    assert.equal((await x.call('GET', '/api/v1/canary')).body.total, 0, 'nothing was started');
    await fleet.etcd.restart();
    await until('the store reachable again', async () => (await x.call('GET', '/api/v1/fleet')).body.reachable === true, 30_000, 100);
    const created = await x.call('POST', '/api/v1/canary', body);
    assert.equal(created.status, 201, JSON.stringify(created.body));
  });
