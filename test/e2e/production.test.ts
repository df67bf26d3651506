// A production-shaped deployment end to end: TLS on both sides and SCRAM on both sides at once.
// Clients (the real Node driver and PyMongo) connect to the proxy over TLS and log in as a user of
// the proxy's own `auth` list; the proxy connects to the embedded upstream over TLS (the URI's
// tlsCAFile) and logs in there with the URI's own user. Certificates are made here with openssl;
// no key is committed. The upstream is watched through a recording TCP relay: the clients'
// credentials never reach it.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, connect, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MongoClient, MongoServerError } from 'mongodb';
import { DevDbServer } from '../../runtime/devdb/index.ts';
import { Logger } from '../../runtime/log/index.ts';
import { scramUserEntry } from '../../runtime/cli/user.ts';
import { pymongoLoginCheck, pythonSkip } from '../helpers/python.ts';
import { withProxy } from '../helpers/proxy.ts';

const dir = mkdtempSync(join(tmpdir(), 'proxy-production-'));
const f = (name: string) => join(dir, name);
function openssl(...args: string[]): void {
  execFileSync('openssl', args, { stdio: 'pipe' });
}
function issue(name: string, san: string, serial: string): void {
  openssl('req', '-newkey', 'rsa:2048', '-nodes', '-subj', `/CN=${name}`, '-keyout', f(`${name}.key`), '-out', f(`${name}.csr`));
  writeFileSync(f(`${name}.ext`), `subjectAltName=${san}\nextendedKeyUsage=serverAuth\n`);
  openssl('x509', '-req', '-in', f(`${name}.csr`), '-CA', f('ca.pem'), '-CAkey', f('ca.key'), '-set_serial', serial,
    '-days', '2', '-extfile', f(`${name}.ext`), '-out', f(`${name}.pem`));
}
openssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '2', '-subj', '/CN=test-ca', '-keyout', f('ca.key'), '-out', f('ca.pem'));
issue('upstream', 'DNS:localhost', '0x5001');
issue('proxy', 'DNS:localhost,IP:127.0.0.1', '0x5002');

const APP_PASSWORD = 'app-pw-ünïcode';
const UPSTREAM_PASSWORD = 'svc-upstream-pw';
const quiet = new Logger('test', 'error', 'json', { write: () => {} });

const devdb = new DevDbServer(undefined, {
  users: { svc: UPSTREAM_PASSWORD },
  tls: { cert: readFileSync(f('upstream.pem')), key: readFileSync(f('upstream.key')) },
});
const devdbPort = (await devdb.listen(0, '127.0.0.1')).port;

/** A TCP relay in front of the upstream that keeps every byte the proxy sends it (TLS records). */
interface Relay { port: number; sent: Buffer[]; server: Server }
async function relay(target: number): Promise<Relay> {
  const sent: Buffer[] = [];
  const sockets: Socket[] = [];
  const server = createServer((client) => {
    const up = connect({ host: '127.0.0.1', port: target });
    sockets.push(client, up);
    client.on('data', (d: Buffer) => { sent.push(d); up.write(d); });
    up.on('data', (d: Buffer) => client.write(d));
    const end = () => { client.destroy(); up.destroy(); };
    client.on('close', end).on('error', end);
    up.on('close', end).on('error', end);
  });
  server.on('close', () => { for (const s of sockets) s.destroy(); });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { port: (server.address() as { port: number }).port, sent, server };
}

const upstreamRelay = await relay(devdbPort);
// Closed by the file's first after hook, before the relay and the upstream.
const { proxy } = await withProxy({ after }, {
  // The upstream's name is checked against its certificate (DNS:localhost), through the relay.
  upstream: { uri: `mongodb://svc:${UPSTREAM_PASSWORD}@localhost:${upstreamRelay.port}/?tls=true&tlsCAFile=${f('ca.pem')}` },
  tls: { cert_file: f('proxy.pem'), key_file: f('proxy.key') },
  auth: { users: [scramUserEntry('app', 'admin', APP_PASSWORD, 4096)] },
}, { log: quiet });

after(async () => {
  upstreamRelay.server.close();
  await devdb.close();
  rmSync(dir, { recursive: true, force: true });
});

const proxyPort = new URL(proxy.uri.replace('mongodb://', 'http://')).port;
const clientUri = (password: string) =>
  `mongodb://app:${encodeURIComponent(password)}@127.0.0.1:${proxyPort}/?tls=true&tlsCAFile=${encodeURIComponent(f('ca.pem'))}`;

test('the Node driver over TLS, logged in to the proxy, writes and reads through a TLS + SCRAM upstream', { timeout: 60_000 }, async () => {
  const c = new MongoClient(clientUri(APP_PASSWORD), { serverSelectionTimeoutMS: 10_000 });
  try {
    const coll = c.db('prod').collection('orders');
    await coll.insertOne({ _id: 1 as never, item: 'widget', qty: 3 });
    assert.deepEqual(await coll.findOne({ _id: 1 as never }), { _id: 1, item: 'widget', qty: 3 });
  } finally {
    await c.close(true);
  }
  // The upstream only ever saw TLS records (content type 22 handshake, 23 application data), never
  // a plaintext OP_MSG, so neither the clients' nor the proxy's credentials crossed in the clear.
  const bytes = Buffer.concat(upstreamRelay.sent);
  assert.ok(bytes.length > 0, 'the proxy talked to the upstream');
  assert.equal(bytes[0], 22, 'the upstream connection starts with a TLS handshake record');
  assert.ok(!bytes.includes(Buffer.from('saslStart')), 'no plaintext SCRAM on the upstream connection');
  assert.ok(!bytes.includes(Buffer.from('prod')), 'no plaintext command on the upstream connection');
});

test('the client\'s login is the proxy\'s: a wrong password gets AuthenticationFailed (18) over TLS', { timeout: 60_000 }, async () => {
  const c = new MongoClient(clientUri('wrong-password'), { serverSelectionTimeoutMS: 10_000 });
  try {
    await assert.rejects(c.db('prod').collection('orders').findOne({}), (e: unknown) => (e as MongoServerError).code === 18);
  } finally {
    await c.close(true);
  }
});

test('a client without TLS is not served by the TLS listener', { timeout: 30_000 }, async () => {
  const c = new MongoClient(`mongodb://app:${encodeURIComponent(APP_PASSWORD)}@127.0.0.1:${proxyPort}/`, { serverSelectionTimeoutMS: 2000 });
  try {
    await assert.rejects(c.db('prod').collection('orders').findOne({}));
  } finally {
    await c.close(true);
  }
});

const pySkip = pythonSkip(['pymongo'], 'python3-pymongo');

test('PyMongo over TLS with SCRAM through the same proxy; a wrong password gets 18', { skip: pySkip, timeout: 120_000 }, async () => {
  const out = await pymongoLoginCheck(clientUri(APP_PASSWORD), clientUri('nope'), 'prod', 'py_orders');
  assert.deepEqual(out.doc, { _id: 1, by: 'pymongo' });
  assert.equal(out.bad, 18);
});
