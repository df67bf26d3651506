// Candidate modules by content hash across three real proxy processes on a real etcd: a module only
// the receiving instance has is published by its SHA-256 and every instance loads those bytes; a
// module one instance cannot fetch (too big for etcd, and not in the directory that instance reads)
// fails the create naming it, and no instance moves any traffic. Once a canary ends, its module
// leaves etcd and the instances' caches after fleet.artifact_grace, while a running canary's stays.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { copyFileSync, existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Etcd3 } from 'etcd3';
import { until } from '../helpers/until.ts';
import { BUILTIN_PLUGIN_DIR } from '../../runtime/app/serve.ts';
import { arms, startFleet, traffic, type Extra } from './stack.ts';

const RULES = { rules: [{ name: 'no-bad', action: 'deny', field: { path: 'filter.k', equals: 'bad' } }] };

/** Only instance 2 has (and allows) the candidate's module, filter-v2.wasm. */
const onlyOnTwo = (more: (i: number, dir: string) => Record<string, unknown> = () => ({})): Extra => (i, dir) => {
  const plugins = join(dir, 'plugins');
  mkdirSync(plugins, { recursive: true });
  if (i === 2) copyFileSync(join(BUILTIN_PLUGIN_DIR, 'filter.wasm'), join(plugins, 'filter-v2.wasm'));
  return { canary: { data_dir: join(dir, 'canary'), plugin_dirs: [plugins] }, ...more(i, dir) };
};

test('a module only instance 2 has is kept in etcd by its hash: all three load the same bytes and split', async (t) => {
  const fleet = await startFleet(t, 3, { extra: onlyOnTwo() });
  const loads = fleet.instances.map((x) => traffic(x.uri, 1000));
  t.after(() => Promise.all(loads.map((l) => l.stop())));
  const module = join(fleet.dir, 'i2', 'plugins', 'filter-v2.wasm');
  const created = await fleet.byId('i2').call('POST', '/api/v1/canary', {
    pipeline_id: 'default', candidate_config: { steps: [{ type: 'filter', plugin_id: module, config: RULES }] }, auto_promote: false,
  });
  assert.equal(created.status, 201, JSON.stringify(created.body));
  const id = created.body.canary_id as string;
  for (const x of fleet.instances) {
    await until(`${x.id} to split`, async () => (await arms(x)).candidate > 5, 30_000, 100);
    const s = (await x.call('GET', `/api/v1/canary/${id}`)).body;
    assert.equal(s.candidate_version, created.body.candidate_version);
  }
  const check = await fleet.byId('i1').call('POST', '/api/v1/fleet/check', {
    pipeline_id: 'default', candidate_config: { steps: [{ type: 'filter', plugin_id: module, config: RULES }] },
  });
  assert.equal(check.status, 400, 'instance 1 still does not load the path itself: only the published bytes');
});

test('a module one instance cannot fetch: the create fails naming it, and no instance moves any traffic', async (t) => {
  // Over artifact_max_bytes, the module goes to artifact_dir: instances 1 and 2 read the shared
  // directory, instance 3 another one, where it is not.
  assert.ok(statSync(join(BUILTIN_PLUGIN_DIR, 'filter.wasm')).size > 1024);
  const fleet = await startFleet(t, 3, {
    extra: onlyOnTwo(),
    fleetOf: (i, root) => {
      const dir = join(root, i === 3 ? 'elsewhere' : 'shared');
      mkdirSync(dir, { recursive: true });
      return { artifact_max_bytes: 1024, artifact_dir: dir };
    },
  });
  const module = join(fleet.dir, 'i2', 'plugins', 'filter-v2.wasm');
  const created = await fleet.byId('i2').call('POST', '/api/v1/canary', {
    pipeline_id: 'default', candidate_config: { steps: [{ type: 'filter', plugin_id: module, config: RULES }] }, auto_promote: false,
  });
  assert.equal(created.status, 400, JSON.stringify(created.body));
  assert.equal(created.body.error.code, 'PROXY_ERR_CANARY_CANDIDATE_REFUSED');
  assert.deepEqual(created.body.error.details.instances.map((x: any) => x.instance_id), ['i3']);
  assert.match(created.body.error.details.instances[0].error, /neither in the fleet store nor in fleet\.artifact_dir/);
  await new Promise((r) => setTimeout(r, 1500));
  for (const x of fleet.instances) {
    assert.equal((await x.call('GET', '/api/v1/canary')).body.total, 0, `${x.id} has no canary`);
    assert.equal((await x.call('GET', '/api/v1/fleet/evidence/default')).body.arms.candidate, null, `${x.id} splits nothing`);
  }
});

test('artifacts are removed after fleet.artifact_grace once their canary ends (rollback or promotion), while a running canary\'s stays', async (t) => {
  const GRACE_MS = 2000;
  // Two pipelines, so two canaries run at once; their modules differ (a custom section appended to
  // filter.wasm: the same plugin, other bytes, another hash).
  const fleet = await startFleet(t, 3, {
    fleet: { artifact_grace: '2s' },
    extra: onlyOnTwo((i, dir) => {
      if (i === 2) {
        const bytes = readFileSync(join(BUILTIN_PLUGIN_DIR, 'filter.wasm'));
        writeFileSync(join(dir, 'plugins', 'filter-v3.wasm'), Buffer.concat([bytes, Buffer.from([0, 5, 4, ...Buffer.from('pad3')])]));
      }
      return { pipelines: [{ id: 'reports', match: { app_name: 'reports-*' }, request: [], response: [] }] };
    }),
  });
  const etcd = new Etcd3({ hosts: fleet.etcd.endpoint });
  t.after(() => etcd.close());
  const inEtcd = async (hex: string) => (await etcd.get(`/fleet-e2e/artifacts/${hex}`).string()) !== null;
  const cached = (hex: string) => fleet.instances.filter((x) => existsSync(join(fleet.dir, x.id, 'canary', 'artifacts', `${hex}.wasm`))).map((x) => x.id);
  const plugins = join(fleet.dir, 'i2', 'plugins');
  const hash = (f: string) => createHash('sha256').update(readFileSync(join(plugins, f))).digest('hex');
  const [a, b] = [hash('filter-v2.wasm'), hash('filter-v3.wasm')];
  assert.notEqual(a, b);
  const i2 = fleet.byId('i2');
  const create = async (pipeline: string, file: string) => {
    const res = await i2.call('POST', '/api/v1/canary', {
      pipeline_id: pipeline, candidate_config: { steps: [{ type: 'filter', plugin_id: join(plugins, file), config: RULES }] }, auto_promote: false,
      stages: [{ traffic_pct: 10, min_duration: '1h', min_requests: 0 }, { traffic_pct: 100, min_duration: '0', min_requests: 0 }],
    });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    return res.body.canary_id as string;
  };
  const ca = await create('default', 'filter-v2.wasm');
  const cb = await create('reports', 'filter-v3.wasm');
  await until(() => `every instance to load both candidates (cached on ${cached(a).join()} / ${cached(b).join()})`,
    () => cached(a).length === 3 && cached(b).length === 3, 30_000, 100);

  // Running: kept past the grace period.
  await new Promise((r) => setTimeout(r, GRACE_MS + 2000));
  assert.ok(await inEtcd(a) && await inEtcd(b), 'the artifacts of running canaries stay in etcd');
  assert.equal(cached(a).length, 3);

  // Rolled back: gone after the grace period — from etcd and from every instance's cache.
  const rolled = await fleet.byId('i1').call('POST', `/api/v1/canary/${ca}/rollback`, { reason: 'test' });
  assert.equal(rolled.status, 200, JSON.stringify(rolled.body));
  const endedAt = Date.now();
  await new Promise((r) => setTimeout(r, GRACE_MS / 2));
  assert.ok(await inEtcd(a), 'still there within the grace period');
  await until('the rolled-back candidate\'s artifact to leave etcd', async () => !await inEtcd(a), 30_000, 100);
  assert.ok(Date.now() - endedAt >= GRACE_MS, 'not before the grace period');
  await until('every instance to remove its cached copy', () => cached(a).length === 0, 30_000, 100);
  assert.ok(await inEtcd(b), 'the running canary\'s artifact stays');
  assert.equal(cached(b).length, 3, 'and so do its cached copies');

  // Promoted to completion: gone from etcd; each instance keeps its copy, which its promoted baseline runs.
  const done = await fleet.byId('i3').call('POST', `/api/v1/canary/${cb}/promote`, { force: true });
  assert.equal(done.body.status, 'completed', JSON.stringify(done.body));
  await until('the completed candidate\'s artifact to leave etcd', async () => !await inEtcd(b), 30_000, 100);
  await new Promise((r) => setTimeout(r, GRACE_MS + 1500));
  assert.equal(cached(b).length, 3, 'the promoted baselines\' modules stay cached');
  for (const x of fleet.instances) assert.match(x.output(), /fleet artifact removed from the cache/, `${x.id} logged its removal`);
  assert.match(fleet.instances.map((x) => x.output()).join(''), /fleet artifact removed: no active or paused canary/);
});
