import { test } from 'node:test';
import assert from 'node:assert/strict';
import { load, refuses } from './helpers.ts';

const CFG = {
  rules: [
    { dbs: ['archive'], upstream: 'mongodb://archive:27018' },
    { collections: ['events'], ops: ['aggregate'], upstream: 'mongodb://analytics-1:27017,analytics-2:27017/?replicaSet=rs0' },
    { dbs: ['tenant_*'], upstream: 'mongodb://[::1]:27020' },
  ],
  default: 'mongodb://primary:27017',
};

test('route: first matching rule sets the route; else the default', async () => {
  const h = await load('route', CFG);
  assert.equal(h.request({ find: 'x', $db: 'archive' }).route, 'mongodb://archive:27018');
  assert.equal(h.request({ aggregate: 'events', pipeline: [], cursor: {}, $db: 'app' }).route, 'mongodb://analytics-1:27017,analytics-2:27017/?replicaSet=rs0');
  assert.equal(h.request({ find: 'events', $db: 'app' }).route, 'mongodb://primary:27017');
  assert.equal(h.request({ find: 'c', $db: 'tenant_42' }).route, 'mongodb://[::1]:27020');
});

test('route: without default, unmatched requests keep the proxy default upstream', async () => {
  const h = await load('route', { rules: [{ dbs: ['archive'], upstream: 'mongodb://archive' }] });
  assert.equal(h.request({ find: 'x', $db: 'app' }).route, null);
  assert.equal(h.request({ find: 'x', $db: 'archive' }).route, 'mongodb://archive');
});

test('route: SPEC shape {upstream} routes everything', async () => {
  const h = await load('route', { upstream: 'mongodb://canary:27017' });
  assert.equal(h.request({ insert: 'x', documents: [], $db: 'a' }).route, 'mongodb://canary:27017');
});

test('route: bad configs are refused', async () => {
  await refuses('route', CFG, { rules: [{ dbs: ['a'], upstream: 'http://x:1' }] }, /must start with mongodb:\/\//);
  await refuses('route', CFG, { rules: [{ dbs: ['a'], upstream: 'mongodb://x:99999' }] }, /port out of range/);
  await refuses('route', CFG, { rules: [{ dbs: ['a'], upstream: 'mongodb://:27017' }] }, /empty host/);
  await refuses('route', CFG, { rules: [{ dbs: ['a'], upstream: 'mongodb://h:2x' }] }, /bad port/);
  await refuses('route', CFG, { rules: [{ dbs: ['a'] }] }, /upstream is required/);
  await refuses('route', CFG, {}, /needs rules or a default/);
  await refuses('route', CFG, { default: 'mongodb://' }, /has no host/);
});
