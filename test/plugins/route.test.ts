import { test } from 'node:test';
import assert from 'node:assert/strict';
import { load, refuses } from './helpers.ts';
import { parseUpstreamUri } from '../../runtime/upstream/index.ts';

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

// The host opens only mongodb:// URIs (runtime/upstream/uri.ts): what it would refuse per request
// is refused at configure instead, with the reason.
test('route: mongodb+srv:// and unsupported auth mechanisms are refused at configure', async () => {
  await refuses('route', CFG, { rules: [{ dbs: ['a'], upstream: 'mongodb+srv://cluster0.example.net/' }] },
    /^route: bad config: rules\[0\]\.upstream "mongodb\+srv:\/\/cluster0\.example\.net\/" is a mongodb\+srv:\/\/ URI: not supported, list the hosts as mongodb:\/\/host:port,host:port$/);
  await refuses('route', CFG, { default: 'mongodb+srv://u:p@cluster0.example.net' }, /default upstream .* is a mongodb\+srv:\/\/ URI: not supported/);
  await refuses('route', CFG, { upstream: 'mongodb://u:p@h:27017/?authMechanism=PLAIN' }, /has authMechanism "PLAIN": use SCRAM-SHA-256 or SCRAM-SHA-1/);
  const h = await load('route', { rules: [{ dbs: ['a'], upstream: 'mongodb://u:p@h:27017/admin?authSource=admin&authMechanism=SCRAM-SHA-1' }] });
  assert.equal(h.request({ find: 'x', $db: 'a' }).route, 'mongodb://u:p@h:27017/admin?authSource=admin&authMechanism=SCRAM-SHA-1');
});

test('route: what configure accepts, the host can open', async () => {
  const uris = ['mongodb://h', 'mongodb://[::1]:27020/db?replicaSet=rs0', 'mongodb://u:p@a:1,b:2/?authMechanism=SCRAM-SHA-256', 'mongodb://h/?authMechanism=X'];
  for (const uri of uris) {
    const h = await load('route', { default: uri });
    assert.equal(h.request({ find: 'x', $db: 'a' }).route, uri);
    assert.doesNotThrow(() => parseUpstreamUri(uri), uri);
  }
});
