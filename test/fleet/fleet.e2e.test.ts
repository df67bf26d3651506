// Three real proxy processes in one fleet on a real etcd: a canary created on one instance splits
// on all three; the registry and leader are visible from every instance; two concurrent promotes
// from two instances: exactly one wins, the other gets 409. (Shadow canaries in a fleet: shadow.e2e.test.ts.)
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { until } from '../helpers/until.ts';
import { TOKEN, arms, startFleet, traffic } from './stack.ts';

const FILTER = { steps: [{ type: 'filter', config: { rules: [{ name: 'no-bad', action: 'deny', field: { path: 'filter.k', equals: 'bad' } }] } }] };

test('a canary created on instance 2 splits traffic on all three; GET /api/v1/fleet lists them with the leader; two concurrent starts or promotes: ' +
  'one 409',
async (t) => {
  const fleet = await startFleet(t, 3);
  const [i1, i2, i3] = fleet.instances;
  const status = await i3.call('GET', '/api/v1/fleet');
  assert.equal(status.status, 200);
  assert.deepEqual(status.body.instances.map((x: any) => x.instance_id), ['i1', 'i2', 'i3']);
  assert.equal(status.body.store, 'etcd');
  assert.ok(['i1', 'i2', 'i3'].includes(status.body.leader));
  assert.equal(status.body.instances.filter((x: any) => x.leader).length, 1);
  for (const x of status.body.instances) assert.match(x.control_url, /^http:\/\/127\.0\.0\.1:\d+$/);
  const cli = await promisify(execFile)(process.execPath, ['bin/proxy.mjs', 'fleet', 'status', '--url', i1.controlUrl, '--token', TOKEN]);
  for (const id of ['i1', 'i2', 'i3']) assert.match(cli.stdout, new RegExp(`^${id}\\s`, 'm'), cli.stdout);
  assert.match(cli.stdout, new RegExp(`leader ${status.body.leader as string}`));
  const loads = fleet.instances.map((x) => traffic(x.uri, 1000));
  t.after(() => Promise.all(loads.map((l) => l.stop())));
  // Two starts on one pipeline at once, from two instances: one canary, the other 409.
  const race = { pipeline_id: 'default', candidate_config: FILTER, auto_promote: false };
  const [s1, s3] = await Promise.all([i1.call('POST', '/api/v1/canary', race), i3.call('POST', '/api/v1/canary', race)]);
  assert.deepEqual([s1.status, s3.status].sort(), [201, 409], `${JSON.stringify(s1.body)} ${JSON.stringify(s3.body)}`);
  assert.equal((s1.status === 409 ? s1 : s3).body.error.code, 'PROXY_ERR_CANARY_EXISTS');
  const first = (s1.status === 201 ? s1 : s3).body.canary_id as string;
  for (const x of fleet.instances) {
    await until(`${x.id} to hold exactly the winner`, async () => {
      const l = (await x.call('GET', '/api/v1/canary')).body;
      return l.total === 1 && l.canaries[0].canary_id === first;
    }, 10_000, 100);
  }
  assert.equal((await i2.call('POST', `/api/v1/canary/${first}/rollback`, { reason: 'race over' })).status, 200);
  for (const x of fleet.instances) await until(`${x.id} to split no more`, async () => (await arms(x)).candidate === 0, 10_000, 100);
  const created = await i2.call('POST', '/api/v1/canary', {
    pipeline_id: 'default', candidate_config: FILTER, auto_promote: false,
    stages: [{ traffic_pct: 30, min_duration: '0', min_requests: 0 }, { traffic_pct: 60, min_duration: '0', min_requests: 0 },
      { traffic_pct: 100, min_duration: '0', min_requests: 0 }],
    rollback_rules: { check_interval: '1s', min_window_requests: 5 },
  });
  assert.equal(created.status, 201, JSON.stringify(created.body));
  const id = created.body.canary_id as string;
  for (const x of fleet.instances) {
    await until(`instance ${x.id} to serve the candidate`, async () => (await arms(x)).candidate > 20, 30_000, 200);
    const s = await x.call('GET', `/api/v1/canary/${id}`);
    assert.equal(s.body.traffic_pct, 30, `${x.id} reads the canary's state`);
    assert.equal((await x.call('GET', '/api/v1/canary?status=active')).body.total, 1);
  }
  // Two promotes at once from two instances, at the same version: one wins.
  const version = (await i1.call('GET', `/api/v1/canary/${id}`)).body.version;
  const [a, b] = await Promise.all([
    i1.call('POST', `/api/v1/canary/${id}/promote`, { expected_version: version, force: true }),
    i3.call('POST', `/api/v1/canary/${id}/promote`, { expected_version: version, force: true }),
  ]);
  assert.deepEqual([a.status, b.status].sort(), [200, 409], `${JSON.stringify(a.body)} ${JSON.stringify(b.body)}`);
  const loser = a.status === 409 ? a : b;
  assert.equal(loser.body.error.code, 'PROXY_ERR_CANARY_CONFLICT');
  for (const x of fleet.instances) {
    await until(`instance ${x.id} at stage 2 (60%)`, async () => (await x.call('GET', `/api/v1/canary/${id}`)).body.traffic_pct === 60, 5000, 100);
  }
  const history = (await i2.call('GET', `/api/v1/canary/${id}/history`)).body;
  const promotions = history.history.filter((e: any) => e.event === 'promoted');
  assert.equal(promotions.length, 1, 'exactly one promotion was recorded');
  for (const l of loads) assert.equal(l.counts.failed, 0);
});
