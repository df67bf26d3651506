// TLS on both sides. Upstream: the URI's TLS options as drivers spell them, against the embedded
// upstream listening with TLS (certificates made here with openssl). Client side: the listener's
// `tls` block, client certificates, and a reload that renews the certificate without dropping open
// connections. Every client is the real Node driver.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect as tlsConnect } from 'node:tls';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MongoClient } from 'mongodb';
import { DevDbServer } from '../../runtime/devdb/index.ts';
import { parseConfig } from '../../runtime/config/index.ts';
import type { RunningProxy } from '../../runtime/app/serve.ts';
import { Closes, withProxy } from '../helpers/proxy.ts';
import { parseUpstreamUri } from '../../runtime/upstream/uri.ts';
import { Logger } from '../../runtime/log/index.ts';

const dir = mkdtempSync(join(tmpdir(), 'proxy-tls-'));
const running = new Closes();
const clients: MongoClient[] = [];
const devdbs: DevDbServer[] = [];
const quiet = new Logger('test', 'error', 'json', { write: () => {} });
after(async () => {
  for (const c of clients) await c.close(true).catch(() => {});
  await running.run().catch(() => {});
  for (const d of devdbs) await d.close().catch(() => {});
  rmSync(dir, { recursive: true, force: true });
});

const f = (name: string) => join(dir, name);
function openssl(...args: string[]): void {
  execFileSync('openssl', args, { stdio: 'pipe' });
}
/** A CA, and certificates it signs: `name`.pem / `name`.key, with the given subjectAltName. */
function ca(name: string): void {
  openssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '2', '-subj', `/CN=${name}`, '-keyout', f(`${name}.key`), '-out', f(`${name}.pem`));
}
function issue(caName: string, name: string, san: string, serial: string, clientAuth = false): void {
  openssl('req', '-newkey', 'rsa:2048', '-nodes', '-subj', `/CN=${name}`, '-keyout', f(`${name}.key`), '-out', f(`${name}.csr`));
  writeFileSync(f(`${name}.ext`), `subjectAltName=${san}\nextendedKeyUsage=${clientAuth ? 'clientAuth' : 'serverAuth'}\n`);
  openssl('x509', '-req', '-in', f(`${name}.csr`), '-CA', f(`${caName}.pem`), '-CAkey', f(`${caName}.key`), '-set_serial', serial,
    '-days', '2', '-extfile', f(`${name}.ext`), '-out', f(`${name}.pem`));
  writeFileSync(f(`${name}.both.pem`), readFileSync(f(`${name}.pem`), 'utf8') + readFileSync(f(`${name}.key`), 'utf8'));
}

ca('ca');
ca('otherca');
issue('ca', 'upstream', 'DNS:localhost', '0x1001');
issue('ca', 'proxy1', 'DNS:localhost,IP:127.0.0.1', '0x2001');
issue('ca', 'proxy2', 'DNS:localhost,IP:127.0.0.1', '0x2002');
issue('ca', 'app', 'DNS:app', '0x3001', true);
issue('otherca', 'stranger', 'DNS:stranger', '0x4001', true);

async function tlsDevdb(): Promise<number> {
  const db = new DevDbServer(undefined, { tls: { cert: readFileSync(f('upstream.pem')), key: readFileSync(f('upstream.key')) } });
  devdbs.push(db);
  return (await db.listen(0, '127.0.0.1')).port;
}

async function proxyTo(uri: string, extra: Record<string, unknown> = {}, configFile: string | null = null): Promise<RunningProxy> {
  const { proxy } = await withProxy(running, { upstream: { uri, connect_timeout_ms: 3000 }, ...extra }, { log: quiet, configFile });
  return proxy;
}

function client(uri: string, opts: Record<string, unknown> = {}): MongoClient {
  const c = new MongoClient(uri, { serverSelectionTimeoutMS: 4000, ...opts });
  clients.push(c);
  return c;
}

test('upstream TLS: tls=true with tlsCAFile verifies the upstream\'s certificate and name; requests go through', { timeout: 60_000 }, async () => {
  const port = await tlsDevdb();
  const proxy = await proxyTo(`mongodb://localhost:${port}/?tls=true&tlsCAFile=${f('ca.pem')}`);
  const c = client(proxy.uri);
  await c.db('t').collection('c').insertOne({ _id: 1 as never, v: 'over tls' });
  assert.equal((await c.db('t').collection('c').findOne({ _id: 1 as never }))?.v, 'over tls');
  assert.ok(proxy.pool.describe().length > 0);
});

test('upstream TLS: an untrusted certificate and a name mismatch are refused with the reason, unless allowed by the URI', { timeout: 60_000 }, async () => {
  const port = await tlsDevdb();
  const untrusted = await proxyTo(`mongodb://localhost:${port}/?tls=true&tlsCAFile=${f('otherca.pem')}`);
  const err1 = await client(untrusted.uri).db('t').command({ ping: 1 }).then(() => null, (e: Error) => e);
  assert.ok(err1 !== null, 'ping through a proxy that cannot verify its upstream fails');
  assert.match(err1.message, /TLS: .*(certificate|self.signed)/i, err1.message);

  const allowed = await proxyTo(`mongodb://localhost:${port}/?tls=true&tlsAllowInvalidCertificates=true`);
  assert.equal((await client(allowed.uri).db('t').command({ ping: 1 })).ok, 1);

  // The certificate names localhost only: 127.0.0.1 does not match it.
  const mismatch = await proxyTo(`mongodb://127.0.0.1:${port}/?tls=true&tlsCAFile=${f('ca.pem')}`);
  const err2 = await client(mismatch.uri).db('t').command({ ping: 1 }).then(() => null, (e: Error) => e);
  assert.ok(err2 !== null);
  assert.match(err2.message, /TLS: .*(Hostname|IP).*(does not match|not in the cert)/i, err2.message);
  const hostsAllowed = await proxyTo(`mongodb://127.0.0.1:${port}/?tls=true&tlsCAFile=${f('ca.pem')}&tlsAllowInvalidHostnames=true`);
  assert.equal((await client(hostsAllowed.uri).db('t').command({ ping: 1 })).ok, 1);
  const insecure = await proxyTo(`mongodb://127.0.0.1:${port}/?TLS=true&tlsInsecure=true`);
  assert.equal((await client(insecure.uri).db('t').command({ ping: 1 })).ok, 1, 'option names are case-insensitive; tlsInsecure allows both');
});

test('upstream URI TLS options: contradictions, unreadable files and TLS options without tls=true are refused with the reason', () => {
  assert.throws(() => parseUpstreamUri('mongodb://h/?tls=true&tlsInsecure=true&tlsAllowInvalidHostnames=true'), /tlsInsecure cannot be combined/);
  assert.throws(() => parseUpstreamUri('mongodb://h/?tls=true&ssl=false'), /tls and ssl disagree/);
  assert.throws(() => parseUpstreamUri(`mongodb://h/?tls=true&tlsCAFile=${f('missing.pem')}`), /tlsCAFile: cannot read .*missing\.pem: ENOENT/);
  assert.throws(() => parseUpstreamUri(`mongodb://h/?tlsCAFile=${f('ca.pem')}`), /TLS options \(tlscafile\) but not tls=true/);
  assert.throws(() => parseUpstreamUri('mongodb://h/?tls=yes'), /tls=yes: expected true or false/);
  const a = parseUpstreamUri(`mongodb://h/?ssl=true&tlsCertificateKeyFile=${f('app.both.pem')}`);
  assert.ok(a.tls !== null && a.tls.certificateKey !== null && a.tls.ca === null && !a.tls.allowInvalidCertificates);
  assert.equal(parseUpstreamUri('mongodb://h/').tls, null);
});

/** The serial number of the certificate a TLS listener presents to a new connection. */
function servedSerial(port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = tlsConnect({ host: '127.0.0.1', port, ca: readFileSync(f('ca.pem')) }, () => {
      resolve(s.getPeerCertificate().serialNumber);
      s.destroy();
    });
    s.once('error', reject);
  });
}

test('client-facing TLS: drivers connect with tls=true; plain TCP is refused; a reload renews the certificate for new connections and keeps open ' +
  'ones', { timeout: 60_000 }, async () => {
  const cfgFile = f('proxy-tls.json');
  const tlsBlock = (cert: string) => ({ cert_file: f(`${cert}.pem`), key_file: f(`${cert}.key`) });
  writeFileSync(cfgFile, JSON.stringify({ tls: tlsBlock('proxy1') }));
  const proxy = await proxyTo(`mongodb://localhost:${await tlsDevdb()}/?tls=true&tlsCAFile=${f('ca.pem')}`, { tls: tlsBlock('proxy1') }, cfgFile);
  assert.match(proxy.uri, /\?tls=true$/, 'the printed connection string says tls=true');
  const secure = client(proxy.uri, { tlsCAFile: f('ca.pem') });
  assert.equal((await secure.db('t').command({ ping: 1 })).ok, 1);
  const plain = client(`mongodb://127.0.0.1:${proxy.port}/`, { serverSelectionTimeoutMS: 1500 });
  await assert.rejects(plain.db('t').command({ ping: 1 }), 'a plain-TCP client cannot talk to a TLS listener');
  assert.ok(proxy.server.stats.tlsHandshakeFailures >= 1, 'failed handshakes are counted');
  const metrics = await proxy.metrics.metrics();
  assert.match(metrics, /^proxy_client_tls_handshake_failures_total [1-9]/m);

  assert.equal((await servedSerial(proxy.port)).replace(/^0+/, ''), '2001');
  await proxy.reload(parseConfig({ ...proxy.config, tls: tlsBlock('proxy2') } as never, null));
  assert.equal((await servedSerial(proxy.port)).replace(/^0+/, ''), '2002', 'new connections get the renewed certificate');
  assert.equal((await secure.db('t').command({ ping: 1 })).ok, 1, 'the open connection keeps working');
  const fresh = client(proxy.uri, { tlsCAFile: f('ca.pem') });
  assert.equal((await fresh.db('t').command({ ping: 1 })).ok, 1);

  // A reload whose files cannot be read is refused; the running certificate stays.
  await assert.rejects(proxy.reload(parseConfig({ ...proxy.config, tls: { cert_file: f('nope.pem'), key_file: f('proxy2.key') } } as never, null)),
    /tls\.cert_file: cannot read .*nope\.pem/);
  assert.equal((await servedSerial(proxy.port)).replace(/^0+/, ''), '2002');
});

test('client certificates: "required" refuses a client without one or with one from another CA; "optional" lets one without in', { timeout: 60_000 },
  async () => {
    const upstream = `mongodb://localhost:${await tlsDevdb()}/?tls=true&tlsCAFile=${f('ca.pem')}`;
    const base = { cert_file: f('proxy1.pem'), key_file: f('proxy1.key'), ca_file: f('ca.pem') };
    const required = await proxyTo(upstream, { tls: { ...base, client_certificates: 'required' } });
    const withCert = client(required.uri, { tlsCAFile: f('ca.pem'), tlsCertificateKeyFile: f('app.both.pem') });
    assert.equal((await withCert.db('t').command({ ping: 1 })).ok, 1);
    await assert.rejects(client(required.uri, { tlsCAFile: f('ca.pem'), serverSelectionTimeoutMS: 1500 }).db('t').command({ ping: 1 }));
    await assert.rejects(client(required.uri, { tlsCAFile: f('ca.pem'), tlsCertificateKeyFile: f('stranger.both.pem'),
      serverSelectionTimeoutMS: 1500 }).db('t').command({ ping: 1 }));

    const optional = await proxyTo(upstream, { tls: { ...base, client_certificates: 'optional' } });
    assert.equal((await client(optional.uri, { tlsCAFile: f('ca.pem') }).db('t').command({ ping: 1 })).ok, 1, 'no certificate: let in');
    assert.equal((await client(optional.uri, { tlsCAFile: f('ca.pem'), tlsCertificateKeyFile: f('app.both.pem') }).db('t').command({ ping: 1 })).ok, 1);
    await assert.rejects(client(optional.uri, { tlsCAFile: f('ca.pem'), tlsCertificateKeyFile: f('stranger.both.pem'),
      serverSelectionTimeoutMS: 1500 }).db('t').command({ ping: 1 }),
    'a certificate that does not verify: refused');

    assert.throws(() => parseConfig({ tls: { cert_file: 'a', key_file: 'b', client_certificates: 'required' } }, null),
      /tls\.client_certificates: .*needs tls\.ca_file/);
  });
