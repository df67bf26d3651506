// Candidate modules by content hash across three real proxy processes on a real etcd: a module only
// the receiving instance has is published by its SHA-256 and every instance loads those bytes; a
// module one instance cannot fetch (too big for etcd, and not in the directory that instance reads)
// fails the create naming it, and no instance moves any traffic.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { copyFileSync, mkdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
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
