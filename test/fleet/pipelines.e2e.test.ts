// The fleet's pipeline configuration through etcd, with three real proxy processes: a generation
// published on instance 1 is applied by all three (each reports it in the registry, and requests
// through instance 3 run the new graph); an invalid one is refused before anything is published;
// a canary then compares the same baseline everywhere.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MongoClient, MongoServerError } from 'mongodb';
import { until } from '../helpers/until.ts';
import { TOKEN, startFleet } from './stack.ts';
import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';

const DENY = { filter: { config: { rules: [{ name: 'fleet-deny', action: 'deny', field: { path: 'filter.k', equals: 'probe' } }] } } };

async function denied(uri: string): Promise<boolean> {
  const c = new MongoClient(uri, { serverSelectionTimeoutMS: 10_000 });
  try {
    await c.db('app').collection('items').find({ k: 'probe' }).limit(1).toArray();
    return false;
  } catch (err) {
    if (err instanceof MongoServerError && err.code === 13) return true;
    throw err;
  } finally {
    await c.close();
  }
}

test('a pipeline generation published on one instance is served by all three, each reporting it; a bad one is refused', async (t) => {
  const fleet = await startFleet(t, 3);
  const [i1, , i3] = fleet.instances;
  assert.equal(await denied(i3.uri), false, 'the file\'s empty pipeline lets the probe through');
  const bad = await i1.call('POST', '/api/v1/fleet/pipelines', { pipeline: { request: ['wasm:nope'] } });
  assert.equal(bad.status, 400, JSON.stringify(bad.body));
  assert.equal(bad.body.error.code, 'PROXY_ERR_BAD_BODY');
  assert.equal((await i1.call('GET', '/api/v1/fleet/pipelines')).body.generation, 0);
  const published = await i1.call('POST', '/api/v1/fleet/pipelines', { pipeline: { request: ['wasm:filter'] }, steps: DENY });
  assert.equal(published.status, 201, JSON.stringify(published.body));
  assert.equal(published.body.generation, 1);
  await until('every instance to serve generation 1', async () => {
    const s = (await i3.call('GET', '/api/v1/fleet')).body;
    return s.instances.length === 3 && s.instances.every((x: any) => x.graph_generation === 1);
  }, 20_000, 100);
  for (const x of fleet.instances) assert.equal(await denied(x.uri), true, `${x.id} runs the published graph`);
  const g = (await i3.call('GET', '/api/v1/fleet/pipelines')).body;
  assert.equal(g.generation, 1);
  assert.equal(g.served_here, 1);
  assert.equal(g.config.published_by, 'i1');
  // The next generation, from a file with `proxy fleet publish`, goes everywhere too.
  const file = join(fleet.dir, 'next.yaml');
  writeFileSync(file, 'listen: 127.0.0.1:1\npipeline:\n  request: []\n');
  const cli = await promisify(execFile)(process.execPath, ['bin/proxy.mjs', 'fleet', 'publish', '--config', file, '--url',
    fleet.byId('i2').controlUrl, '--token', TOKEN]);
  assert.match(cli.stdout, /as fleet generation 2;/);
  await until('every instance to serve generation 2', async () => {
    const s = (await i1.call('GET', '/api/v1/fleet')).body;
    return s.instances.every((x: any) => x.graph_generation === 2);
  }, 20_000, 100);
  for (const x of fleet.instances) assert.equal(await denied(x.uri), false, `${x.id} runs generation 2`);
});

test('a completed canary is the baseline on all three; restore-baseline sent to one instance restores the old baseline on all three', async (t) => {
  const fleet = await startFleet(t, 3);
  const created = await fleet.byId('i1').call('POST', '/api/v1/canary', {
    pipeline_id: 'default', candidate_config: { steps: [{ type: 'filter', config: DENY.filter.config }] }, auto_promote: false,
    stages: [{ traffic_pct: 100, min_duration: '0', min_requests: 0 }],
  });
  assert.equal(created.status, 201, JSON.stringify(created.body));
  const id = created.body.canary_id as string;
  for (const x of fleet.instances) {
    await until(`${x.id} to see the completion`, async () => (await x.call('GET', `/api/v1/canary/${id}`)).body.status === 'completed', 10_000, 100);
    await until(`${x.id} to run the promoted graph`, () => denied(x.uri), 10_000, 200);
  }
  const restored = await fleet.byId('i3').call('POST', `/api/v1/canary/${id}/restore-baseline`);
  assert.equal(restored.status, 200, JSON.stringify(restored.body));
  for (const x of fleet.instances) await until(`${x.id} to run the old baseline again`, async () => !(await denied(x.uri)), 10_000, 200);
  const history = (await fleet.byId('i2').call('GET', `/api/v1/canary/${id}/history`)).body.history as any[];
  assert.equal(history.filter((e) => e.event === 'baseline_restored').length, 1);
});
