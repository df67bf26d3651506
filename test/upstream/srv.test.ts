// mongodb+srv:// upstreams, against a DNS server started here (test/helpers/dns-server.ts) whose
// SRV, TXT and A records point at embedded upstreams listening with TLS (certificates made here
// with openssl). The proxy is told to ask that server with upstream.dns_servers; clients are the
// real Node driver. Covers the seedlist rules of MongoDB's "Initial DNS Seedlist Discovery"
// specification (one host, no port, targets inside the parent domain, one TXT record with only
// authSource/replicaSet/loadBalanced, URI options over TXT options, TLS on by default) and the
// periodic rescan.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MongoClient, MongoServerError } from 'mongodb';
import { DevDbServer } from '../../runtime/devdb/index.ts';
import { ConfigError, parseConfig } from '../../runtime/config/index.ts';
import type { RunningProxy } from '../../runtime/app/serve.ts';
import { Closes, withProxy } from '../helpers/proxy.ts';
import { parseUpstreamUri, resolveUpstreamUri, type UpstreamAddress, type UpstreamConnection } from '../../runtime/upstream/index.ts';
import { SrvHostSource, targetInDomain } from '../../runtime/upstream/srv.ts';
import { Logger } from '../../runtime/log/index.ts';
import { TestDnsServer } from '../helpers/dns-server.ts';
import { DevMongos } from '../../runtime/devdb/replica-set.ts';
import { until } from '../helpers/until.ts';

const dir = mkdtempSync(join(tmpdir(), 'proxy-srv-'));
const running = new Closes();
const clients: MongoClient[] = [];
const devdbs: DevDbServer[] = [];
const addresses: UpstreamAddress[] = [];
const dns = new TestDnsServer();
const dnsServer = await dns.start();
after(async () => {
  for (const c of clients) await c.close(true).catch(() => {});
  await running.run().catch(() => {});
  for (const d of devdbs) await d.close().catch(() => {});
  for (const a of addresses) a.hosts.close();
  await dns.close();
  rmSync(dir, { recursive: true, force: true });
});

const f = (name: string) => join(dir, name);
function openssl(...args: string[]): void {
  execFileSync('openssl', args, { stdio: 'pipe' });
}
openssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '2', '-subj', '/CN=srv-test-ca', '-keyout', f('ca.key'), '-out', f('ca.pem'));
openssl('req', '-newkey', 'rsa:2048', '-nodes', '-subj', '/CN=db.srv.test', '-keyout', f('db.key'), '-out', f('db.csr'));
writeFileSync(f('db.ext'), 'subjectAltName=DNS:db1.srv.test,DNS:db2.srv.test,DNS:db3.srv.test,DNS:localhost\nextendedKeyUsage=serverAuth\n');
openssl('x509', '-req', '-in', f('db.csr'), '-CA', f('ca.pem'), '-CAkey', f('ca.key'), '-set_serial', '0x5001', '-days', '2', '-extfile', f('db.ext'),
  '-out', f('db.pem'));
const CA = f('ca.pem');

/** Log lines (JSON) of a proxy or resolver, for the warnings the tests expect. */
function capture(): { log: Logger; lines: string[] } {
  const lines: string[] = [];
  return { log: new Logger('test', 'info', 'json', { write: (s: string) => { lines.push(s); } }), lines };
}
const quiet = new Logger('test', 'error', 'json', { write: () => {} });

async function devdb(opts: { tls?: boolean; users?: Record<string, string>; authDb?: string } = {}): Promise<{ db: DevDbServer; port: number }> {
  const db = new DevDbServer(undefined, {
    tls: opts.tls === false ? undefined : { cert: readFileSync(f('db.pem')), key: readFileSync(f('db.key')) },
    users: opts.users, authDb: opts.authDb,
  });
  devdbs.push(db);
  return { db, port: (await db.listen(0, '127.0.0.1')).port };
}

async function proxyTo(uri: string, upstream: Record<string, unknown> = {}, log: Logger = quiet): Promise<RunningProxy> {
  const { proxy } = await withProxy(running, { upstream: { uri, connect_timeout_ms: 3000, dns_servers: [dnsServer], ...upstream } }, { log });
  return proxy;
}

function client(uri: string): MongoClient {
  const c = new MongoClient(uri, { serverSelectionTimeoutMS: 5000 });
  clients.push(c);
  return c;
}

/** A driver straight to one devdb (not through the proxy), to see where documents landed. */
function direct(port: number): MongoClient {
  return client(`mongodb://localhost:${port}/?tls=true&tlsCAFile=${CA}&directConnection=true`);
}

dns.zone.a.set('db1.srv.test', ['127.0.0.1']);
dns.zone.a.set('db2.srv.test', ['127.0.0.1']);
dns.zone.a.set('db3.srv.test', ['127.0.0.1']);

test('mongodb+srv: hosts from the SRV record, names from upstream.dns_servers, TLS on by default; the Node driver inserts and finds through the ' +
  'proxy', { timeout: 60_000 }, async () => {
  const a = await devdb();
  dns.zone.srv.set('_mongodb._tcp.cluster.srv.test', [{ target: 'db1.srv.test.', port: a.port }]);
  // tlsCAFile without tls=true is refused for mongodb:// URIs; here TLS is implied by +srv.
  const proxy = await proxyTo(`mongodb+srv://cluster.srv.test/?tlsCAFile=${CA}`);
  assert.equal(proxy.pool.describe(), `db1.srv.test:${a.port}`);
  assert.ok(proxy.pool.address.tls !== null, 'TLS is on without tls=true');
  const col = client(proxy.uri).db('app').collection<{ _id: number; v: string }>('c');
  await col.insertOne({ _id: 1, v: 'via srv' });
  assert.deepEqual(await col.findOne({ _id: 1 }), { _id: 1, v: 'via srv' });
  assert.deepEqual(await direct(a.port).db('app').collection('c').findOne({ _id: 1 as never }), { _id: 1, v: 'via srv' },
    'the document is on the SRV target');
  assert.ok(dns.questions.includes('SRV _mongodb._tcp.cluster.srv.test') && dns.questions.includes('TXT cluster.srv.test')
    && dns.questions.includes('A db1.srv.test'), 'SRV, TXT and the target\'s address came from the configured server');
});

test('mongodb+srv with tls=false in the URI connects in plain TCP', { timeout: 60_000 }, async () => {
  const plain = await devdb({ tls: false });
  dns.zone.srv.set('_mongodb._tcp.plain.srv.test', [{ target: 'db2.srv.test', port: plain.port }]);
  const proxy = await proxyTo('mongodb+srv://plain.srv.test/?tls=false');
  assert.equal(proxy.pool.address.tls, null);
  assert.equal((await client(proxy.uri).db('t').command({ ping: 1 })).ok, 1);
});

test('TXT record options: authSource from the TXT record is used for upstream logins; the URI\'s own authSource overrides it', { timeout: 60_000 },
  async () => {
  // The user exists in "accounts" only; the URI's path says "app", which would be the authSource without the TXT record.
    const secured = await devdb({ users: { svc: 'pw' }, authDb: 'accounts' });
    dns.zone.srv.set('_mongodb._tcp.auth.srv.test', [{ target: 'db3.srv.test', port: secured.port }]);
    dns.zone.txt.set('auth.srv.test', [['authSource=accounts&', 'loadBalanced=false']]);
    const proxy = await proxyTo(`mongodb+srv://svc:pw@auth.srv.test/app?tlsCAFile=${CA}`);
    assert.equal(proxy.pool.address.credentials?.source, 'accounts');
    assert.equal(proxy.pool.address.options.get('loadbalanced'), 'false', 'a TXT record of several strings is read as one');
    const col = client(proxy.uri).db('app').collection<{ _id: number }>('c');
    await col.insertOne({ _id: 7 });
    assert.deepEqual(await col.findOne({ _id: 7 }), { _id: 7 });

    const overridden = await proxyTo(`mongodb+srv://svc:pw@auth.srv.test/app?tlsCAFile=${CA}&authSource=app`);
    assert.equal(overridden.pool.address.credentials?.source, 'app');
    const c = new MongoClient(overridden.uri, { retryReads: false, serverSelectionTimeoutMS: 5000 });
    clients.push(c);
    await assert.rejects(c.db('app').collection('c').findOne({}), (e: unknown) =>
      e instanceof MongoServerError && /authentication of "svc".*authSource app.*failed/.test(e.message), 'a login against "app" fails');
  });

test('a changed SRV record is picked up after srv_rescan_interval_ms: new connections go to the new target; a DNS failure keeps the last list and ' +
  'warns once', { timeout: 90_000 }, async () => {
  const a = await devdb();
  const b = await devdb();
  dns.zone.srv.set('_mongodb._tcp.moving.srv.test', [{ target: 'db1.srv.test', port: a.port }]);
  const { log, lines } = capture();
  const proxy = await proxyTo(`mongodb+srv://moving.srv.test/?tlsCAFile=${CA}`, { srv_rescan_interval_ms: 200 }, log);
  const source = proxy.pool.address.hosts as SrvHostSource;
  const col = client(proxy.uri).db('app').collection<{ _id: string }>('moves');
  await col.insertOne({ _id: 'before' });
  // A connection leased out (as during a request) when the list changes.
  const leased = await new Promise<UpstreamConnection>((resolve, reject) => proxy.pool.acquire({ onConnection: resolve, onPoolError: reject }));
  assert.equal(leased.host, 'db1.srv.test');

  dns.zone.srv.set('_mongodb._tcp.moving.srv.test', [{ target: 'db2.srv.test', port: b.port }]);
  await until('the proxy uses the new target', () => proxy.pool.describe() === `db2.srv.test:${b.port}`);
  assert.equal(source.version, 2);
  assert.ok(leased.alive && leased.retired, 'a busy connection to the dropped host is not cut, only marked');
  proxy.pool.release(leased);
  assert.equal(leased.alive, false, 'and it is closed when released instead of pooled');
  await col.insertOne({ _id: 'after' });
  assert.deepEqual(await direct(a.port).db('app').collection('moves').find().toArray(), [{ _id: 'before' }]);
  assert.deepEqual(await direct(b.port).db('app').collection('moves').find().toArray(), [{ _id: 'after' }],
    'after the rescan the pool dropped its connections to the old target and opened new ones to the new one');
  assert.ok(lines.some((l) => /SRV rescan: upstream host list changed/.test(l)), 'the change is logged');

  dns.fail = true;
  const before = source.rescans;
  try {
    await until('three rescans have failed', () => source.rescans >= before + 3);
    assert.deepEqual(source.current(), [{ host: 'db2.srv.test', port: b.port }], 'the last good list stays');
    const warnings = lines.filter((l) => /SRV rescan failed; keeping the last host list/.test(l));
    assert.equal(warnings.length, 1, 'one warning for the whole failure streak');
    assert.match(warnings[0], /ESERVFAIL/);
    assert.match(warnings[0], /_mongodb\._tcp\.moving\.srv\.test/);
    assert.deepEqual(await col.findOne({ _id: 'after' }), { _id: 'after' }, 'requests keep working on the last list');
  } finally {
    dns.fail = false;
  }
  await until('the rescan succeeds again', () => lines.some((l) => /SRV rescan succeeded again/.test(l)));
});

test('rescan: targets outside the parent domain are skipped with a warning; an empty result keeps the list', { timeout: 30_000 }, async () => {
  dns.zone.srv.set('_mongodb._tcp.skip.srv.test', [{ target: 'db1.srv.test', port: 1111 }]);
  const { log, lines } = capture();
  const a = await resolveUpstreamUri('mongodb+srv://skip.srv.test/', { dnsServers: [dnsServer], rescanIntervalMs: 60_000, log });
  addresses.push(a);
  const source = a.hosts as SrvHostSource;
  const changes: string[][] = [];
  source.onChange((hosts) => changes.push(hosts.map((h) => `${h.host}:${h.port}`)));
  dns.zone.srv.set('_mongodb._tcp.skip.srv.test', [{ target: 'db1.srv.test', port: 1111 }, { target: 'db9.elsewhere.test', port: 2222 },
    { target: 'db2.srv.test', port: 3333 }]);
  await source.rescan();
  assert.deepEqual(changes, [['db1.srv.test:1111', 'db2.srv.test:3333']], 'the host that stayed keeps its place; the new valid one is appended');
  assert.ok(lines.some((l) => /skipped targets outside the parent domain/.test(l) && /db9\.elsewhere\.test:2222/.test(l)));
  dns.zone.srv.set('_mongodb._tcp.skip.srv.test', [{ target: 'evil.example.com', port: 1 }]);
  await source.rescan();
  assert.equal(changes.length, 1, 'no valid target: the list is kept');
  assert.ok(lines.some((l) => /SRV rescan failed/.test(l) && /no SRV record inside the parent domain/.test(l)));
});

test('srvServiceName picks the SRV service; srvMaxHosts keeps that many targets, at random', { timeout: 30_000 }, async () => {
  const targets = [1, 2, 3, 4].map((i) => ({ target: `db${i}.srv.test`, port: 40000 + i }));
  dns.zone.srv.set('_custom._tcp.many.srv.test', targets);
  const seen = new Set<string>();
  for (let i = 0; i < 12; i++) {
    const a = await resolveUpstreamUri('mongodb+srv://many.srv.test/?srvServiceName=custom&srvMaxHosts=2', { dnsServers: [dnsServer], log: quiet });
    addresses.push(a);
    const hosts = a.hosts.current();
    assert.equal(hosts.length, 2);
    for (const h of hosts) seen.add(h.host);
  }
  assert.ok(seen.size > 2, `12 draws of 2 out of 4 hosts picked more than 2 distinct hosts (${[...seen].join(', ')})`);
  const all = await resolveUpstreamUri('mongodb+srv://many.srv.test/?srvServiceName=custom', { dnsServers: [dnsServer], log: quiet });
  addresses.push(all);
  assert.equal(all.hosts.current().length, 4, 'srvMaxHosts 0 (the default): every target');
});

test('invalid SRV and TXT records are refused at startup with the record and the reason', { timeout: 30_000 }, async () => {
  dns.zone.srv.set('_mongodb._tcp.bad.srv.test', [{ target: 'db1.srv.test', port: 1 }, { target: 'db.evil.test', port: 2 }]);
  await assert.rejects(proxyTo('mongodb+srv://bad.srv.test/'),
    /SRV record _mongodb\._tcp\.bad\.srv\.test points at db\.evil\.test, which is not inside srv\.test/);

  dns.zone.srv.set('_mongodb._tcp.twotxt.srv.test', [{ target: 'db1.srv.test', port: 1 }]);
  dns.zone.txt.set('twotxt.srv.test', [['authSource=a'], ['replicaSet=b']]);
  await assert.rejects(proxyTo('mongodb+srv://twotxt.srv.test/'), /twotxt\.srv\.test has 2 TXT records; at most one is allowed/);

  dns.zone.srv.set('_mongodb._tcp.ssltxt.srv.test', [{ target: 'db1.srv.test', port: 1 }]);
  dns.zone.txt.set('ssltxt.srv.test', [['ssl=false']]);
  await assert.rejects(proxyTo('mongodb+srv://ssltxt.srv.test/'),
    /TXT record of ssltxt\.srv\.test \("ssl=false"\) sets ssl; only authSource, replicaSet and loadBalanced/);

  await assert.rejects(proxyTo('mongodb+srv://missing.srv.test/'),
    /upstream\.uri mongodb\+srv: DNS SRV lookup of _mongodb\._tcp\.missing\.srv\.test failed: ENOTFOUND/);

  dns.zone.srv.set('_mongodb._tcp.replset.srv.test', [{ target: 'db1.srv.test', port: 1 }]);
  dns.zone.txt.set('replset.srv.test', [['replicaSet=rs0']]);
  await assert.rejects(resolveUpstreamUri('mongodb+srv://replset.srv.test/?srvMaxHosts=1', { dnsServers: [dnsServer], log: quiet }),
    /srvMaxHosts=1 cannot be combined with replicaSet/, 'checked after the TXT options are merged');
});

test('mongodb+srv URI mistakes are refused before any DNS query: a port, two hosts, a bad srvServiceName; srv options need +srv', async () => {
  const asked = dns.questions.length;
  const opts = { dnsServers: [dnsServer], log: quiet };
  await assert.rejects(resolveUpstreamUri('mongodb+srv://cluster.srv.test:27017/', opts), /must be a DNS name without a port/);
  await assert.rejects(resolveUpstreamUri('mongodb+srv://a.srv.test,b.srv.test/', opts), /takes exactly one host name/);
  await assert.rejects(resolveUpstreamUri('mongodb+srv://cluster.srv.test/?srvServiceName=_bad', opts), /srvServiceName=_bad/);
  await assert.rejects(resolveUpstreamUri('mongodb+srv://cluster.srv.test/?srvMaxHosts=-1', opts), /srvMaxHosts=-1: expected a non-negative integer/);
  await assert.rejects(resolveUpstreamUri('mongodb+srv://cluster.srv.test/?tls=maybe', opts), /tls=maybe: expected true or false/);
  assert.equal(dns.questions.length, asked, 'no DNS question was asked');
  assert.throws(() => parseUpstreamUri('mongodb://h:1/?srvMaxHosts=2'), /srvMaxHosts is only allowed with mongodb\+srv/);
  assert.throws(() => parseUpstreamUri('mongodb+srv://cluster.srv.test/'), /resolved for the configured upstream\.uri only/);
});

test('target domain rule: three or more labels drop the first; one or two labels need one more level', () => {
  assert.ok(targetInDomain('db1.srv.test', 'cluster.srv.test'));
  assert.ok(targetInDomain('a.b.srv.test.', 'cluster.srv.test'));
  assert.ok(!targetInDomain('srv.test', 'cluster.srv.test'));
  assert.ok(!targetInDomain('db1.evilsrv.test', 'cluster.srv.test'));
  assert.ok(targetInDomain('db1.mongo.local', 'mongo.local'));
  assert.ok(!targetInDomain('mongo.local', 'mongo.local'), 'a two-label name: the target needs one more level');
  assert.ok(!targetInDomain('db1.other.local', 'mongo.local'));
  assert.ok(targetInDomain('db1.localhost', 'localhost'));
  assert.ok(!targetInDomain('localhost', 'localhost'));
});

test('upstream.dns_servers and srv_rescan_interval_ms are validated with the key path', () => {
  assert.throws(() => parseConfig({ upstream: { dns_servers: ['dns.example.com'] } }, null),
    (e: unknown) => e instanceof ConfigError && /upstream\.dns_servers/.test(e.message));
  assert.throws(() => parseConfig({ upstream: { srv_rescan_interval_ms: 5 } }, null),
    (e: unknown) => e instanceof ConfigError && /upstream\.srv_rescan_interval_ms/.test(e.message));
  const c = parseConfig({ upstream: { dns_servers: ['127.0.0.1:5353', '10.0.0.2', '[::1]:53'] } }, null);
  assert.deepEqual(c.upstream.dns_servers, ['127.0.0.1:5353', '10.0.0.2', '[::1]:53']);
  assert.equal(c.upstream.srv_rescan_interval_ms, 60000);
});

test('mongodb+srv naming several mongos routers: a mongos list over the SRV targets, and a rescan adds and removes routers', { timeout: 90_000 }, async () => {
  const routers = await DevMongos.startMany(3);
  after(async () => { for (const r of routers) await r.server!.close().catch(() => {}); });
  const name = '_mongodb._tcp.routers.srv.test';
  dns.zone.srv.set(name, [{ target: 'db1.srv.test', port: routers[0].port }, { target: 'db2.srv.test', port: routers[1].port }]);
  const proxy = await proxyTo('mongodb+srv://routers.srv.test/?tls=false', { srv_rescan_interval_ms: 200, heartbeat_ms: 500 });
  const col = client(proxy.uri).db('app').collection('routed');
  const finds = () => routers.map((r) => r.count('find'));
  await until('both SRV targets serve finds', async () => {
    await col.findOne({});
    const f = finds();
    return f[0] > 0 && f[1] > 0;
  });
  assert.equal(finds()[2], 0, 'the router not in the SRV records gets nothing');

  // The records now name routers 1 and 2: router 0 is left out, router 2 joins.
  dns.zone.srv.set(name, [{ target: 'db2.srv.test', port: routers[1].port }, { target: 'db3.srv.test', port: routers[2].port }]);
  await until('the new router serves finds', async () => {
    await col.findOne({});
    return finds()[2] > 0;
  });
  for (const r of routers) r.resetCounts();
  for (let i = 0; i < 30; i++) await col.findOne({});
  const f = finds();
  assert.equal(f[0], 0, `the router dropped from the SRV records gets no more requests (${f.join('/')})`);
  assert.ok(f[1] > 0 && f[2] > 0, `requests spread over the two listed routers (${f.join('/')})`);
});
