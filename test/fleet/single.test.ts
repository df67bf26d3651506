// One proxy without fleet configuration: the embedded store; GET /api/v1/fleet lists this one
// instance as its own leader, and `proxy fleet status` prints it. A fleet.store: etcd without
// endpoints, or with TLS files that cannot be read, is refused at start, naming the key.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { withProxy } from '../helpers/proxy.ts';
import { parseConfig, ConfigError } from '../../runtime/config/index.ts';
import { startProxy } from '../../runtime/app/serve.ts';

const TOKEN = 'single-fleet-token-0123456789';

test('one instance: GET /api/v1/fleet and proxy fleet status show the embedded store with this instance leading', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'fleet-single-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const { proxy } = await withProxy(t, { control_plane: { port: 0, tokens: [TOKEN] }, canary: { data_dir: join(dir, 'canary') },
    notifications: { outbox_path: join(dir, 'outbox.db') }, fleet: { instance_id: 'solo' } });
  const res = await fetch(`${proxy.controlPlaneUrl}/api/v1/fleet`, { headers: { authorization: `Bearer ${TOKEN}` } });
  assert.equal(res.status, 200);
  const body = await res.json() as any;
  assert.equal(body.store, 'sqlite');
  assert.equal(body.leader, 'solo');
  assert.equal(body.evaluating, true);
  assert.deepEqual(body.instances.map((i: any) => [i.instance_id, i.leader, i.address, i.control_url]),
    [['solo', true, `127.0.0.1:${proxy.port}`, proxy.controlPlaneUrl]]);
  const unauth = await fetch(`${proxy.controlPlaneUrl}/api/v1/fleet`);
  assert.equal(unauth.status, 401);
  const { stdout } = await promisify(execFile)(process.execPath, ['bin/proxy.mjs', 'fleet', 'status', '--url', proxy.controlPlaneUrl!, '--token',
    TOKEN]);
  assert.match(stdout, /fleet store sqlite; asked solo; leader solo; store reachable/);
  assert.match(stdout, /^solo\s+yes\s+127\.0\.0\.1:\d+/m);
});

test('fleet.store: etcd without endpoints is refused at start, naming fleet.endpoints', async () => {
  const config = parseConfig({ listen: '127.0.0.1:0', fleet: { store: 'etcd' }, control_plane: { port: 0 } }, null);
  await assert.rejects(startProxy(config), (err: unknown) => err instanceof ConfigError && /fleet\.endpoints/.test(err.message));
});

test('fleet.tls files that cannot be read are refused at start, naming the key, before etcd is asked', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'fleet-tls-'));
  try {
    const config = parseConfig({ listen: '127.0.0.1:0', control_plane: { port: 0 }, fleet: { store: 'etcd', endpoints: ['https://127.0.0.1:1'],
      tls: { ca_file: join(dir, 'missing-ca.pem'), cert_file: join(dir, 'missing-client.pem') } } }, null);
    await assert.rejects(startProxy(config), (err: unknown) => err instanceof ConfigError &&
      /fleet\.tls\.ca_file: cannot read .*missing-ca\.pem/.test(err.message) && /fleet\.tls\.cert_file: cannot read/.test(err.message));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
