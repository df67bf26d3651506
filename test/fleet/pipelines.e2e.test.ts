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
