// Client authentication (config `auth`): the proxy is the SCRAM-SHA-256 server for its clients,
// against users stored as SCRAM credentials, while it logs in to the upstream with the URI's own
// user. The upstream here is a devdb that requires its own user ("svc"), which knows nothing of
// the proxy's users ("ann", "bob"): a client login that leaked upstream could not succeed.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, connect, type Socket } from 'node:net';
import { deserialize, Binary, type Document } from 'bson';
import { MongoClient, MongoServerError } from 'mongodb';
import { DevDbServer } from '../../runtime/devdb/index.ts';
import type { RunningProxy } from '../../runtime/app/serve.ts';
import { ConfigError, parseConfig } from '../../runtime/config/index.ts';
import { Logger, LogRing } from '../../runtime/log/index.ts';
import { ScramClient } from '../../runtime/upstream/index.ts';
import { scramUserEntry } from '../../runtime/cli/user.ts';
import { ScramServerConversation, parseClientFirst } from '../../runtime/server/client-auth-scram.ts';
import { RawClient, opMsg, opQuery, decodeReply } from '../helpers/wire.ts';
import { pymongoLoginCheck, pythonSkip } from '../helpers/python.ts';
import { Closes, withProxy } from '../helpers/proxy.ts';

const ANN = 'ann-s3cret,=é';
const BOB = 'bob-pw';
// 4096 iterations (the minimum) keep the test quick; the format is the one `proxy user add` prints.
const USERS = [scramUserEntry('ann', 'admin', ANN, 4096), scramUserEntry('bob', 'admin', BOB, 4096)];

const devdb = new DevDbServer(undefined, { users: { svc: 'upstream-pw' } });
const devdbAddress = devdb.listen(0);
const proxies = new Closes();
const taps: Recorder[] = [];
after(async () => {
  await proxies.run();
  for (const t of taps) await t.close();
  await devdb.close();
});

/** A TCP forwarder that keeps every byte each way, so a test can read the frames that passed. */
class Recorder {
  /** Per connection, the chunks each way. */
  readonly conns: Array<{ toServer: Buffer[]; toClient: Buffer[] }> = [];
  port = 0;
  private readonly sockets = new Set<Socket>();
  private readonly server = createServer((client) => {
    const up = connect({ host: '127.0.0.1', port: this.target });
    this.sockets.add(client).add(up);
    const rec = { toServer: [] as Buffer[], toClient: [] as Buffer[] };
    this.conns.push(rec);
    client.on('data', (c: Buffer) => { rec.toServer.push(c); up.write(c); });
    up.on('data', (c: Buffer) => { rec.toClient.push(c); client.write(c); });
    const end = () => { client.destroy(); up.destroy(); };
    client.on('close', end).on('error', end);
    up.on('close', end).on('error', end);
  });
  constructor(private readonly target: number) {}
  async listen(): Promise<number> {
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', () => r()));
    this.port = (this.server.address() as { port: number }).port;
    taps.push(this);
    return this.port;
  }
  /** Command documents of one direction, in order (OP_MSG bodies, OP_QUERY queries, OP_REPLY documents). */
  commands(dir: 'toServer' | 'toClient'): Document[] {
    const out: Document[] = [];
    for (const rec of this.conns) this.parse(Buffer.concat(rec[dir]), out);
    return out;
  }
  private parse(buf: Buffer, out: Document[]): void {
    while (buf.length >= 16 && buf.length >= buf.readInt32LE(0)) {
      const len = buf.readInt32LE(0);
      const f = buf.subarray(0, len);
      buf = buf.subarray(len);
      const op = f.readInt32LE(12);
      if (op === 2013) out.push(decodeReply({ length: len, requestId: 0, responseTo: 0, opCode: op, raw: f }).body!);
      else if (op === 1) out.push(...decodeReply({ length: len, requestId: 0, responseTo: 0, opCode: op, raw: f }).docs!);
      else if (op === 2004) {
        const nameEnd = f.indexOf(0, 20);
        const q = f.subarray(nameEnd + 9);
        out.push(deserialize(q.subarray(0, q.readInt32LE(0))));
      }
    }
  }
  bytes(dir: 'toServer' | 'toClient'): Buffer {
    return Buffer.concat(this.conns.flatMap((r) => r[dir]));
  }
  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((r) => this.server.close(() => r()));
  }
}

interface Started { proxy: RunningProxy; lines: string[] }

async function start(auth: Record<string, unknown>, extra: Record<string, unknown> = {}, upstreamPort?: number): Promise<Started> {
  const d = await devdbAddress;
  const lines: string[] = [];
  const log = new Logger('proxy', 'info', 'json', { write: (l) => { lines.push(l); } }, new LogRing(0));
  const { proxy } = await withProxy(proxies, {
    log: { level: 'info' },
    upstream: { uri: `mongodb://svc:upstream-pw@127.0.0.1:${upstreamPort ?? d.port}/?authSource=admin`, connect_timeout_ms: 3000 },
    auth, ...extra,
  }, { log });
  return { proxy, lines };
}

function uri(p: RunningProxy | number, user?: string, password?: string, params = ''): string {
  const port = typeof p === 'number' ? p : p.port;
  const cred = user === undefined ? '' : `${encodeURIComponent(user)}:${encodeURIComponent(password!)}@`;
  return `mongodb://${cred}127.0.0.1:${port}/${params}`;
}

async function withClient<T>(u: string, fn: (c: MongoClient) => Promise<T>): Promise<T> {
  const c = new MongoClient(u, { serverSelectionTimeoutMS: 5000, retryReads: false, retryWrites: false });
  try {
    return await fn(c);
  } finally {
    await c.close();
  }
}

const isCode = (code: number, msg?: RegExp) => (e: unknown) => {
  assert.ok(e instanceof MongoServerError, `expected a server error, got ${String(e)}`);
  assert.equal(e.code, code, e.message);
  if (msg !== undefined) assert.match(e.message, msg);
  return true;
};

test('the Node driver with correct credentials works through the proxy; the upstream sees only the URI\'s user', async () => {
  const { proxy } = await start({ users: USERS });
  const d = await devdbAddress;
  // The proxy's upstream connections go through a recorder: they must carry svc's login, never ann's.
  const upstreamTap = new Recorder(d.port);
  await upstreamTap.listen();
  const { proxy: tapped } = await start({ users: USERS }, {}, upstreamTap.port);
  for (const p of [proxy, tapped]) {
    await withClient(uri(p, 'ann', ANN), async (c) => {
      const col = c.db('app').collection<{ _id: number; v: string }>('ca_ok');
      await col.deleteMany({});
      await col.insertOne({ _id: 1, v: 'logged in' });
      assert.deepEqual(await col.findOne({ _id: 1 }), { _id: 1, v: 'logged in' });
    });
    assert.ok(p.server.stats.authSucceeded >= 1);
  }
  const up = upstreamTap.bytes('toServer').toString('latin1');
  assert.match(up, /n=svc,r=/, 'the upstream login is svc\'s');
  assert.doesNotMatch(up, /n=ann/, 'the client\'s login never goes upstream');
});

test('speculative authentication: the Node driver logs in inside hello (no saslStart command)', async () => {
  const { proxy } = await start({ users: USERS });
  const tap = new Recorder(proxy.port);
  await tap.listen();
  // One pooled connection (plus the monitor, which does not authenticate).
  await withClient(uri(tap.port, 'ann', ANN, '?maxPoolSize=1'), async (c) => {
    await c.db('app').command({ ping: 1 });
    await c.db('app').collection('ca_spec').findOne({});
  });
  const sent = tap.commands('toServer');
  const hellos = sent.filter((d) => d.ismaster !== undefined || d.isMaster !== undefined || d.hello !== undefined);
  const spec = hellos.find((h) => h.speculativeAuthenticate !== undefined);
  assert.ok(spec !== undefined, 'the driver offered speculativeAuthenticate');
  assert.equal(spec.speculativeAuthenticate.mechanism, 'SCRAM-SHA-256');
  assert.equal(sent.filter((d) => d.saslStart !== undefined).length, 0, 'no separate saslStart was needed');
  assert.ok(sent.some((d) => d.saslContinue !== undefined), 'the conversation continued with saslContinue');
  const replies = tap.commands('toClient');
  const specReply = replies.find((r) => r.speculativeAuthenticate !== undefined);
  assert.ok(specReply !== undefined, 'the hello reply carried the server-first message');
  assert.equal(specReply.speculativeAuthenticate.done, false);
  assert.match(Buffer.from((specReply.speculativeAuthenticate.payload as Binary).buffer).toString(), /^r=.+,s=.+,i=4096$/);
  assert.deepEqual(specReply.saslSupportedMechs, ['SCRAM-SHA-256']);
});

test('a wrong password gets AuthenticationFailed (18); an unknown user gets exactly the same answer', async () => {
  const { proxy, lines } = await start({ users: USERS });
  const messages: string[] = [];
  for (const [user, pw] of [['ann', 'not-it'], ['nobody', ANN]] as const) {
    await withClient(uri(proxy, user, pw), async (c) => {
      await assert.rejects(c.db('app').collection('ca_bad').findOne({}), (e: unknown) => {
        isCode(18)(e);
        messages.push((e as Error).message);
        return true;
      });
    });
  }
  assert.equal(messages[0], messages[1]);
  assert.equal(messages[0], 'Authentication failed.');
  assert.ok(proxy.server.stats.authFailed >= 2);
  assert.ok(lines.some((l) => /client authentication failed/.test(l) && /"user":"ann"/.test(l) && /wrong password/.test(l)), 'the reason is logged ' +
    'for the operator');
  // The proxy keeps serving: the right password works right after.
  await withClient(uri(proxy, 'ann', ANN), (c) => c.db('app').command({ ping: 1 }));
});

test('no credentials: a find gets Unauthorized (13) while hello and ping still answer', async () => {
  const { proxy } = await start({ users: USERS });
  await withClient(uri(proxy), async (c) => {
    assert.equal((await c.db('admin').command({ ping: 1 })).ok, 1);
    await assert.rejects(c.db('app').collection('ca_anon').findOne({}), isCode(13, /Command find requires authentication/));
    await assert.rejects(c.db('app').collection('ca_anon').insertOne({ x: 1 }), isCode(13, /requires authentication/));
  });
});

test('mode optional: anonymous clients are served, credentials must still be right', async () => {
  const { proxy } = await start({ mode: 'optional', users: USERS });
  await withClient(uri(proxy), async (c) => {
    await c.db('app').collection('ca_opt').insertOne({ anon: true });
  });
  await withClient(uri(proxy, 'bob', 'nope'), async (c) => {
    await assert.rejects(c.db('app').collection('ca_opt').findOne({}), isCode(18));
  });
  await withClient(uri(proxy, 'bob', BOB), async (c) => {
    assert.equal((await c.db('app').collection('ca_opt').findOne({ anon: true }))?.anon, true);
  });
});

test('without auth configured, a client with credentials gets AuthenticationFailed saying so', async () => {
  const d = await devdbAddress;
  const { proxy } = await withProxy(proxies, { upstream: { uri: `mongodb://svc:upstream-pw@127.0.0.1:${d.port}/?authSource=admin` } });
  await withClient(uri(proxy, 'ann', ANN), async (c) => {
    await assert.rejects(c.db('app').collection('x').findOne({}), isCode(18, /client authentication is not enabled on this proxy/));
  });
});

const pySkip = pythonSkip(['pymongo'], 'python3-pymongo');

test('PyMongo with credentials works; with a wrong password it gets 18', { skip: pySkip, timeout: 120_000 }, async () => {
  const { proxy } = await start({ users: USERS });
  const out = await pymongoLoginCheck(uri(proxy, 'bob', BOB), uri(proxy, 'bob', 'wrong'), 'app', 'ca_py');
  assert.deepEqual(out.doc, { _id: 1, by: 'pymongo' });
  assert.equal(out.bad, 18);
  assert.ok(proxy.server.stats.authSucceeded >= 1);
});

test('the logged-in user is a request property: the auth step allows by user, the logging step writes it', async () => {
  const { proxy, lines } = await start({ users: USERS }, {
    pipeline: { request: ['auth'], response: ['logging'] },
    steps: { auth: { config: { provider: 'static', users: ['ann'], user_source: 'connection' } } },
  });
  await withClient(uri(proxy, 'ann', ANN), async (c) => {
    await c.db('app').collection('ca_step').insertOne({ by: 'ann' });
  });
  await withClient(uri(proxy, 'bob', BOB), async (c) => {
    await assert.rejects(c.db('app').collection('ca_step').findOne({}), isCode(13, /auth: user "bob" is not allowed/));
  });
  const logged = lines.filter((l) => /"step":"wasm:logging"/.test(l) && /"op":"insert"/.test(l) && /"collection":"ca_step"/.test(l));
  assert.ok(logged.length >= 1, 'the insert was logged');
  assert.match(logged[0], /"user":"ann"/);
});

test('reload: a removed user\'s open connection must log in again; an added user can log in', async () => {
  const { proxy } = await start({ users: [USERS[0]] });
  const c = new MongoClient(uri(proxy, 'ann', ANN), { serverSelectionTimeoutMS: 5000, retryReads: false, maxPoolSize: 1 });
  try {
    await c.db('app').collection('ca_reload').findOne({});
    await proxy.reload(parseConfig({ ...structuredClone(proxy.config), auth: { users: [USERS[1]] } }, null));
    await assert.rejects(c.db('app').collection('ca_reload').findOne({}), isCode(13));
  } finally {
    await c.close();
  }
  await withClient(uri(proxy, 'bob', BOB), (b) => b.db('app').collection('ca_reload').findOne({}));
});

// ---- the protocol, with the proxy's own SCRAM client (checked against RFC 7677) ------------------

function sasl(cmd: Document): Buffer {
  return opMsg({ ...cmd, $db: 'admin' });
}

test('SCRAM server: RFC 7677 test vector (user "user", password "pencil")', () => {
  const salt = Buffer.from('W22ZaJ0SNY7soEsUEjb6gQ==', 'base64');
  const e = scramUserEntry('user', 'admin', 'pencil', 4096, salt);
  const credential = { name: 'user', db: 'admin', iterations: 4096, salt, storedKey: Buffer.from(e.stored_key, 'base64'),
    serverKey: Buffer.from(e.server_key, 'base64') };
  const conv = new ScramServerConversation(parseClientFirst(Buffer.from('n,,n=user,r=rOprNGfwEbeRWgbNEkqO')), credential, true,
    '%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0');
  assert.equal(conv.serverFirst, 'r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096');
  const final = conv.verify(Buffer.from('c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ='));
  assert.equal(final, 'v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=');
  const wrong = new ScramServerConversation(parseClientFirst(Buffer.from('n,,n=user,r=rOprNGfwEbeRWgbNEkqO')), credential, true,
    '%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0');
  assert.throws(() => wrong.verify(Buffer.from('c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=')), /wrong password/);
});

test('wire: saslStart without skipEmptyExchange takes the three-step exchange; the server proves it knows the key', async () => {
  const { proxy } = await start({ users: USERS });
  const raw = await RawClient.connect(proxy.port);
  try {
    const client = new ScramClient({ username: 'bob', password: BOB, source: 'admin', mechanism: 'SCRAM-SHA-256' });
    const first = (await raw.roundTrip(sasl({ saslStart: 1, mechanism: 'SCRAM-SHA-256', payload: new Binary(client.first()) }))).body!;
    assert.equal(first.ok, 1);
    assert.equal(first.done, false);
    const cf = client.next(Buffer.from((first.payload as Binary).buffer));
    const second = (await raw.roundTrip(sasl({ saslContinue: 1, conversationId: first.conversationId, payload: new Binary(cf) }))).body!;
    assert.equal(second.ok, 1);
    assert.equal(second.done, false, 'without skipEmptyExchange the server waits for the empty message');
    client.finish(Buffer.from((second.payload as Binary).buffer)); // throws unless v= is right
    // Not logged in yet: the conversation is not over.
    assert.equal((await raw.roundTrip(sasl({ find: 'x', filter: {} }))).body!.code, 13);
  } finally {
    raw.destroy();
  }
});

test('wire: the empty final message completes the login; legacy OP_QUERY handshake with speculativeAuthenticate works too', async () => {
  const { proxy } = await start({ users: USERS });
  const raw = await RawClient.connect(proxy.port);
  try {
    const client = new ScramClient({ username: 'ann', password: ANN, source: 'admin', mechanism: 'SCRAM-SHA-256' });
    const hello = await raw.roundTrip(opQuery('admin.$cmd', {
      isMaster: 1, helloOk: true, saslSupportedMechs: 'admin.ann',
      speculativeAuthenticate: { saslStart: 1, mechanism: 'SCRAM-SHA-256', payload: new Binary(client.first()), db: 'admin' },
    }));
    const h = hello.docs![0];
    assert.deepEqual(h.saslSupportedMechs, ['SCRAM-SHA-256']);
    const cf = client.next(Buffer.from((h.speculativeAuthenticate.payload as Binary).buffer));
    const r1 = (await raw.roundTrip(sasl({ saslContinue: 1, conversationId: 1, payload: new Binary(cf) }))).body!;
    client.finish(Buffer.from((r1.payload as Binary).buffer));
    assert.equal(r1.done, false);
    const r2 = (await raw.roundTrip(sasl({ saslContinue: 1, conversationId: 1, payload: new Binary(Buffer.alloc(0)) }))).body!;
    assert.equal(r2.done, true);
    assert.equal(r2.ok, 1);
    const found = (await raw.roundTrip(sasl({ find: 'ca_raw', filter: {}, $db: 'app' }))).body!;
    assert.equal(found.ok, 1, JSON.stringify(found));
    // logout ends the login.
    assert.equal((await raw.roundTrip(sasl({ logout: 1 }))).body!.ok, 1);
    assert.equal((await raw.roundTrip(sasl({ find: 'ca_raw', filter: {} }))).body!.code, 13);
  } finally {
    raw.destroy();
  }
});

test('wire: a reload that removes the user during a conversation fails its login', async () => {
  const { proxy } = await start({ users: USERS });
  const raw = await RawClient.connect(proxy.port);
  try {
    const client = new ScramClient({ username: 'bob', password: BOB, source: 'admin', mechanism: 'SCRAM-SHA-256' });
    const first = (await raw.roundTrip(sasl({ saslStart: 1, mechanism: 'SCRAM-SHA-256', payload: new Binary(client.first()),
      options: { skipEmptyExchange: true } }))).body!;
    await proxy.reload(parseConfig({ ...structuredClone(proxy.config), auth: { users: [USERS[0]] } }, null));
    const cf = client.next(Buffer.from((first.payload as Binary).buffer));
    const r = (await raw.roundTrip(sasl({ saslContinue: 1, conversationId: 1, payload: new Binary(cf) }))).body!;
    assert.equal(r.code, 18);
    assert.equal((await raw.roundTrip(sasl({ find: 'x', filter: {} }))).body!.code, 13);
  } finally {
    raw.destroy();
  }
});

test('wire: bad input gets an error document and the connection keeps serving', async () => {
  const { proxy } = await start({ users: USERS });
  const raw = await RawClient.connect(proxy.port);
  try {
    const sha1 = (await raw.roundTrip(sasl({ saslStart: 1, mechanism: 'SCRAM-SHA-1', payload: new Binary(Buffer.from('n,,n=ann,r=abc')) }))).body!;
    assert.equal(sha1.code, 334);
    assert.equal(sha1.codeName, 'MechanismUnavailable');
    const orphan = (await raw.roundTrip(sasl({ saslContinue: 1, conversationId: 1, payload: new Binary(Buffer.from('c=biws,r=x,p=AA==')) }))).body!;
    assert.equal(orphan.code, 18);
    const cb = (await raw.roundTrip(sasl({ saslStart: 1, mechanism: 'SCRAM-SHA-256', payload: new Binary(Buffer.from('p=tls-unique,,n=ann,r=abc')) }))).body!;
    assert.equal(cb.code, 18);
    assert.match(String(cb.errmsg), /channel binding/);
    const notBinary = (await raw.roundTrip(sasl({ saslStart: 1, mechanism: 'SCRAM-SHA-256', payload: 5 }))).body!;
    assert.equal(notBinary.ok, 0);
    const xcr = (await raw.roundTrip(sasl({ authenticate: 1, mechanism: 'MONGODB-X509' }))).body!;
    assert.equal(xcr.code, 334);
    // Still a working connection.
    const h = await raw.hello();
    assert.equal(h.ok, 1);
    assert.equal((await raw.roundTrip(sasl({ ping: 1 }))).body!.ok, 1);
  } finally {
    raw.destroy();
  }
});

test('config: a bad credential is refused with its key path; duplicate users too', () => {
  const refused = (auth: unknown): string => {
    try {
      parseConfig({ auth }, null);
    } catch (err) {
      assert.ok(err instanceof ConfigError);
      return err.message;
    }
    assert.fail('accepted');
  };
  assert.match(refused({ users: [{ ...USERS[0], stored_key: 'AAAA' }] }), /auth\.users\[0\]\.stored_key: .*base64 string of 32 bytes/);
  assert.match(refused({ users: [{ ...USERS[0], iterations: 100 }] }), /auth\.users\[0\]\.iterations/);
  assert.match(refused({ users: [{ ...USERS[0], password: 'x' }] }), /auth\.users\[0\].*password/);
  assert.match(refused({ users: [] }), /auth\.users/);
  assert.match(refused({ users: [USERS[0], USERS[0]] }), /auth\.users\[1\]\.name: duplicate user "ann" in db "admin"/);
  assert.match(refused({ mode: 'sometimes', users: USERS }), /auth\.mode/);
});
