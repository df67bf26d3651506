// The etcd fleet store against a real etcd (test/helpers/etcd.ts): compare-and-set conflicts, a
// registry entry that goes with its lease, the leadership handed over when the leader goes, and a
// former leader's write fenced off by the transaction itself.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Etcd3 } from 'etcd3';
import { startEtcd } from '../helpers/etcd.ts';
import { until } from '../helpers/until.ts';
import type { Cleanup } from '../helpers/proxy.ts';
import { EtcdFleetStore } from '../../runtime/fleet/etcd.ts';
import type { InstanceInfo } from '../../runtime/fleet/store.ts';

async function store(t: Cleanup, endpoint: string, id: string, ttl = 2): Promise<EtcdFleetStore> {
  const s = new EtcdFleetStore({ endpoints: [endpoint], prefix: '/pp-test', instanceId: id, leaseTtlSeconds: ttl });
  await s.start();
  t.after(() => s.close());
  return s;
}

/** A member in its own process (test/fixtures/fleet-member.ts), killed after the test. */
async function member(t: Cleanup, endpoint: string, id: string, ttl = 2): Promise<ChildProcess> {
  const args = ['--import', 'tsx', 'test/fixtures/fleet-member.ts', endpoint, id, String(ttl)];
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'] });
  t.after(() => { child.kill('SIGKILL'); });
  let out = '';
  child.stdout!.on('data', (d: Buffer) => { out += d.toString(); });
  await until(() => `member ${id} to start (${out})`, () => out.includes('ready'), 30_000);
  return child;
}

const info = (id: string): InstanceInfo => ({ instance_id: id, address: `127.0.0.1:1${id.length}`, control_url: null, version: '0.0.0', workers: 1,
  graph_generation: 0, started_at: new Date().toISOString() });

test('compare-and-set: the first write at a revision wins, the second gets a conflict with the current revision', async (t) => {
  const etcd = await startEtcd(t);
  const a = await store(t, etcd.endpoint, 'a');
  const b = await store(t, etcd.endpoint, 'b');
  const created = await a.cas('canaries/x', { n: 1 }, 0);
  assert.ok(created.ok);
  const again = await b.cas('canaries/x', { n: 9 }, 0);
  assert.deepEqual(again, { ok: false, reason: 'conflict', revision: created.revision });
  const read = await b.get<{ n: number }>('canaries/x');
  assert.deepEqual(read, { key: 'canaries/x', value: { n: 1 }, revision: created.revision });
  const [one, two] = await Promise.all([a.cas('canaries/x', { n: 2 }, read!.revision), b.cas('canaries/x', { n: 3 }, read!.revision)]);
  assert.equal([one, two].filter((r) => r.ok).length, 1, 'exactly one of two writes at the same revision lands');
  assert.equal([one, two].filter((r) => !r.ok && r.reason === 'conflict').length, 1);
  // A guard on another key: the write lands only while that key is at the revision given.
  const lock = await a.cas('running/p', 'c1', 0);
  assert.ok(lock.ok);
  assert.equal((await a.cas('canaries/y', { n: 1 }, 0, { guard: { key: 'running/p', revision: 0 } })).ok, false);
  assert.equal((await a.cas('canaries/y', { n: 1 }, 0, { guard: { key: 'running/p', revision: lock.revision } })).ok, true);
  const seen: unknown[] = [];
  const stop = a.watch<{ n: number }>('canaries/', (e) => seen.push(e.value));
  t.after(stop);
  await new Promise((r) => setTimeout(r, 200));
  const now = (await a.get<{ n: number }>('canaries/x'))!;
  assert.ok((await b.cas('canaries/x', { n: 4 }, now.revision)).ok);
  await until('the watch to see the write', () => seen.some((v) => (v as { n: number }).n === 4));
});

test('a write only while nothing under a prefix changed since it was read (etcd\'s range compare); keys listed with their revisions; ' +
  'a pin vanishes with its own lease or when unpinned', async (t) => {
  const etcd = await startEtcd(t);
  const a = await store(t, etcd.endpoint, 'a');
  const c1 = await a.cas('canaries/c1', { n: 1 }, 0);
  const art = await a.cas('artifacts/h', 'bytes', 0);
  assert.ok(c1.ok && art.ok);
  assert.deepEqual(await a.revisions('artifacts/'), [{ key: 'artifacts/h', revision: art.revision }]);
  const newest = Math.max(...(await a.revisions('canaries/')).map((x) => x.revision));
  // A canary written after the read: the delete is refused (here a new key; a changed one is refused the same way).
  const c2 = await a.cas('canaries/c2', { n: 2 }, 0);
  assert.ok(c2.ok);
  assert.equal((await a.cas('artifacts/h', null, art.revision, { unchanged: { prefix: 'canaries/', revision: newest } })).ok, false);
  assert.equal((await a.cas('artifacts/h', null, art.revision, { unchanged: { prefix: 'canaries/', revision: c1.revision } })).ok, false);
  assert.ok((await a.get('artifacts/h')) !== null);
  // Nothing written since: it lands (a key merely sorting after the prefix does not count).
  assert.ok((await a.cas('canariesX', 1, 0)).ok);
  assert.equal((await a.cas('artifacts/h', null, art.revision, { unchanged: { prefix: 'canaries/', revision: c2.revision } })).ok, true);
  assert.equal(await a.get('artifacts/h'), null);
  await a.pin('pins/h/a-1', 1);
  await a.pin('pins/h/a-2', 60);
  assert.deepEqual((await a.revisions('pins/')).map((x) => x.key), ['pins/h/a-1', 'pins/h/a-2']);
  await a.unpin('pins/h/a-2');
  await until('the 1 s pin to expire with its lease', async () => (await a.revisions('pins/')).length === 0, 10_000, 100);
});

test('a registry entry lives with its lease: an instance that stops renewing disappears within the TTL', async (t) => {
  const etcd = await startEtcd(t);
  const a = await store(t, etcd.endpoint, 'a', 2);
  await a.register(info('a'));
  const b = await member(t, etcd.endpoint, 'bb', 2);
  assert.deepEqual((await a.instances()).map((i) => i.instance_id).sort(), ['a', 'bb']);
  b.kill('SIGKILL');
  const since = Date.now();
  await until('b to leave the registry', async () => (await a.instances()).length === 1, 10_000, 100);
  assert.ok(Date.now() - since < 2 * 2000 + 1500, `gone within the TTL (${Date.now() - since} ms)`);
  assert.deepEqual((await a.instances()).map((i) => i.instance_id), ['a']);
});

test('election: one leader at a time; when it resigns or dies, another instance takes over', async (t) => {
  const etcd = await startEtcd(t);
  // The first leader is a process of its own, so it can die without resigning.
  const m = await member(t, etcd.endpoint, 'm', 2);
  const a = await store(t, etcd.endpoint, 'a');
  const b = await store(t, etcd.endpoint, 'b');
  await a.campaign();
  await b.campaign();
  await until('everybody to see m lead', () => a.leader() === 'm' && b.leader() === 'm');
  assert.equal(a.isLeader() || b.isLeader(), false, 'nobody else believes it leads');
  m.kill('SIGKILL');
  const since = Date.now();
  await until('another leader after m\'s lease expired', () => a.isLeader() || b.isLeader(), 10_000, 50);
  assert.ok(Date.now() - since < 2 * 2000 + 1500, `taken over within the TTL (${Date.now() - since} ms)`);
  const second = a.isLeader() ? a : b;
  const other = second === a ? b : a;
  await until('the other to see the new leader', () => other.leader() === second.instanceId);
  assert.equal(other.isLeader(), false);
  await second.resign();
  await until('the other to take over on resignation', () => other.isLeader(), 5000);
  assert.equal(second.isLeader(), false);
});

test('fencing: a former leader whose lease expired cannot write, even before it knows it lost', async (t) => {
  const etcd = await startEtcd(t);
  const a = await store(t, etcd.endpoint, 'a');
  const b = await store(t, etcd.endpoint, 'b');
  await a.campaign();
  await until('a leads', () => a.isLeader());
  const created = await a.cas('canaries/x', { stage: 1 }, 0, { fenced: true });
  assert.ok(created.ok, 'the leader writes');
  // a's lease is revoked behind its back (as an expiry while it was paused); b takes over.
  const admin = new Etcd3({ hosts: etcd.endpoint });
  t.after(() => admin.close());
  const leaseId = (a as unknown as { leaseId: string }).leaseId;
  // Keep a's local belief for the write below: freeze what its watch would tell it.
  const token = (a as unknown as { token: string }).token;
  await admin.leaseClient.leaseRevoke({ ID: leaseId });
  await b.campaign();
  await until('b leads', () => b.isLeader());
  (a as unknown as { token: string | null }).token = token;
  const stale = await a.cas('canaries/x', { stage: 2 }, created.revision, { fenced: true });
  assert.deepEqual(stale, { ok: false, reason: 'fenced', revision: created.revision }, 'the transaction itself refuses the former leader');
  assert.equal(a.isLeader(), false, 'and it knows it no longer leads');
  const read = await b.get<{ stage: number }>('canaries/x');
  assert.equal(read!.value.stage, 1);
  assert.ok((await b.cas('canaries/x', { stage: 2 }, read!.revision, { fenced: true })).ok, 'the new leader writes');
  const follower = await b.cas('canaries/y', { stage: 1 }, 0, { fenced: true });
  assert.ok(follower.ok);
  assert.deepEqual(await a.cas('canaries/y', { stage: 9 }, follower.revision, { fenced: true }), { ok: false, reason: 'fenced', revision: -1 },
    'a follower does not even try a fenced write');
});

test('a leader paused past its lease (SIGSTOP) is replaced, and after SIGCONT it follows the new leader', async (t) => {
  const etcd = await startEtcd(t);
  const m = await member(t, etcd.endpoint, 'm', 1);
  let out = '';
  m.stdout!.on('data', (d: Buffer) => { out += d.toString(); });
  const a = await store(t, etcd.endpoint, 'a', 1);
  await a.campaign();
  await until('a to see m lead', () => a.leader() === 'm');
  m.kill('SIGSTOP');
  await until('a to take over from the paused leader', () => a.isLeader(), 10_000, 50);
  m.kill('SIGCONT');
  await until(() => `m to report a as leader and itself as a follower (it printed: ${out})`, () => out.includes('leader a false'), 10_000);
  assert.equal(a.isLeader(), true, 'the new leader keeps the leadership');
});

test('with etcd\'s authentication on, the store connects with fleet.username and password; without them, or with a wrong one, it cannot start',
  async (t) => {
    const etcd = await startEtcd(t);
    const admin = new Etcd3({ hosts: etcd.endpoint });
    await admin.role('root').create();
    await admin.user('root').create('root-password');
    await admin.user('root').addRole('root');
    await admin.auth.authEnable();
    admin.close();
    const ok = new EtcdFleetStore({ endpoints: [etcd.endpoint], prefix: '/pp-auth', instanceId: 'a', leaseTtlSeconds: 2,
      auth: { username: 'root', password: 'root-password' } });
    await ok.start();
    t.after(() => ok.close());
    assert.ok((await ok.cas('canaries/x', { n: 1 }, 0)).ok);
    for (const auth of [null, { username: 'root', password: 'wrong' }]) {
      const s = new EtcdFleetStore({ endpoints: [etcd.endpoint], prefix: '/pp-auth', instanceId: 'b', leaseTtlSeconds: 2, auth });
      await assert.rejects(s.start(), /auth|permission|user|password/i);
      await s.close();
    }
  });

test('TLS to etcd: with fleet.tls (the authority, and a client certificate etcd requires) the store works; without the certificate it cannot start',
  async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'fleet-tls-'));
    t.after(() => rmSync(dir, { recursive: true, force: true }));
    const f = (name: string) => join(dir, name);
    const openssl = (...args: string[]) => execFileSync('openssl', args, { stdio: 'pipe' });
    openssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '2', '-subj', '/CN=fleet-ca', '-keyout', f('ca.key'), '-out', f('ca.pem'));
    for (const [name, usage, serial] of [['server', 'serverAuth', '0x1001'], ['client', 'clientAuth', '0x1002']]) {
      openssl('req', '-newkey', 'rsa:2048', '-nodes', '-subj', `/CN=${name}`, '-keyout', f(`${name}.key`), '-out', f(`${name}.csr`));
      writeFileSync(f(`${name}.ext`), `subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=${usage}\n`);
      openssl('x509', '-req', '-in', f(`${name}.csr`), '-CA', f('ca.pem'), '-CAkey', f('ca.key'), '-set_serial', serial, '-days', '2',
        '-extfile', f(`${name}.ext`), '-out', f(`${name}.pem`));
    }
    const etcd = await startEtcd(t, { tls: { cert: f('server.pem'), key: f('server.key'), ca: f('ca.pem'), clientCa: f('ca.pem'),
      clientCert: f('client.pem'), clientKey: f('client.key') } });
    assert.match(etcd.endpoint, /^https:/);
    const ok = new EtcdFleetStore({ endpoints: [etcd.endpoint], prefix: '/pp-tls', instanceId: 'a', leaseTtlSeconds: 2,
      tls: { ca: f('ca.pem'), cert: f('client.pem'), key: f('client.key') } });
    await ok.start();
    t.after(() => ok.close());
    assert.ok((await ok.cas('canaries/x', { n: 1 }, 0)).ok);
    await ok.register(info('a'));
    assert.deepEqual((await ok.instances()).map((i) => i.instance_id), ['a']);
    const noCert = new EtcdFleetStore({ endpoints: [etcd.endpoint], prefix: '/pp-tls', instanceId: 'b', leaseTtlSeconds: 2,
      tls: { ca: f('ca.pem'), cert: null, key: null } });
    await assert.rejects(noCert.start());
    await noCert.close();
  });
