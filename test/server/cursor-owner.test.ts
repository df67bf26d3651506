// Cursors tied to the proxy user that opened them (client authentication on): every proxy user
// reaches the upstream as the URI's user, so the proxy hands each client a sealed cursor id (a
// permutation keyed by its user: runtime/server/cursor-seal.ts) and opens the ids a client sends
// back with that client's key. Another user's id reaches no cursor: getMore gets CursorNotFound
// (43), killCursors reports it in cursorsNotFound, and the owner still reads its cursor to the
// end. The devdb upstream here checks neither sessions nor users: only the proxy keeps users apart.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Binary, Double, Int32, Long, deserialize, serialize, type Document } from 'bson';
import { MongoClient, MongoServerError, type Db } from 'mongodb';
import { DevDbServer } from '../../runtime/devdb/index.ts';
import { scramUserEntry } from '../../runtime/cli/user.ts';
import { ScramClient } from '../../runtime/upstream/index.ts';
import { CursorSeal, deriveCursorSeal, renameNotFoundCursor, sealReply } from '../../runtime/server/cursor-seal.ts';
import { CommandPeek } from '../../runtime/wire/index.ts';
import { RawClient, opMsg, opQuery } from '../helpers/wire.ts';
import { Closes, withProxy } from '../helpers/proxy.ts';
import { freePort } from '../helpers/ports.ts';
import { spawnServe } from '../helpers/serve.ts';
import { saltOf } from '../helpers/scram.ts';

const ANN = 'ann-pw';
const BOB = 'bob-pw';
const USERS = [scramUserEntry('ann', 'admin', ANN, 4096), scramUserEntry('bob', 'admin', BOB, 4096)];

const devdb = new DevDbServer(undefined, { users: { svc: 'upstream-pw' } });
const devdbAddress = devdb.listen(0);
const proxies = new Closes();
after(async () => {
  await proxies.run();
  await devdb.close();
});

const upstreamUri = async () => `mongodb://svc:upstream-pw@127.0.0.1:${(await devdbAddress).port}/?authSource=admin`;

async function start(auth: Record<string, unknown>, extra: Record<string, unknown> = {}): Promise<number> {
  return (await startProxy(auth, extra)).port;
}

async function startProxy(auth: Record<string, unknown>, extra: Record<string, unknown> = {}) {
  const { proxy } = await withProxy(proxies, {
    log: { level: 'error' }, upstream: { uri: await upstreamUri(), connect_timeout_ms: 3000 }, auth, ...extra,
  });
  return proxy;
}

function client(port: number, user?: string, password?: string, params = ''): MongoClient {
  const cred = user === undefined ? '' : `${user}:${password!}@`;
  return new MongoClient(`mongodb://${cred}127.0.0.1:${port}/${params}`, { serverSelectionTimeoutMS: 5000, retryReads: false, retryWrites: false });
}

const isCode = (code: number) => (e: unknown) => {
  assert.ok(e instanceof MongoServerError, `expected a server error, got ${String(e)}`);
  assert.equal(e.code, code, e.message);
  return true;
};

const ids = (v: unknown) => (v as Long[]).map((l) => BigInt(l.toString()));

/** Ten documents in cursors.c (fresh each time). */
async function seed(db: Db, coll = 'c'): Promise<void> {
  await db.collection(coll).deleteMany({});
  await db.collection(coll).insertMany(Array.from({ length: 10 }, (_, i) => ({ _id: i, i } as Document)));
}

// ---- the permutation ----------------------------------------------------------------------------

test('Speck64/128 matches the published test vector', () => {
  const key = Buffer.alloc(16);
  [0x03020100, 0x0b0a0908, 0x13121110, 0x1b1a1918].forEach((w, i) => key.writeUInt32LE(w, 4 * i));
  assert.deepEqual(new CursorSeal(key).encryptBlock(0x3b726574, 0x7475432d), [0x8c6fa548, 0x454e028b]);
});

test('sealing is a permutation: round trips over random ids, 0 stays 0, the sign is kept, keys differ per user', () => {
  const secret = randomBytes(32);
  const user = (name: string) => ({ db: 'admin', name, serverKey: Buffer.alloc(32, name.length) });
  const ann = deriveCursorSeal(secret, user('ann'));
  const bob = deriveCursorSeal(secret, user('bob'));
  const anon = deriveCursorSeal(secret, null);
  assert.equal(ann.seal(0n), 0n);
  assert.equal(ann.unseal(0n), 0n);
  const seen = new Set<bigint>();
  const buf = Buffer.alloc(8);
  for (let i = 0; i < 20_000; i++) {
    const id = randomBytes(8).readBigInt64LE(0);
    if (id === 0n) continue;
    for (const s of [ann, bob, anon]) {
      const sealed = s.seal(id);
      assert.notEqual(sealed, 0n);
      assert.equal(sealed > 0n, id > 0n, `sign kept for ${id}`);
      assert.equal(s.unseal(sealed), id, `round trip of ${id}`);
      assert.equal(s.seal(s.unseal(id)), id, `inverse round trip of ${id}`);
    }
    const sealed = ann.seal(id);
    assert.ok(!seen.has(sealed), 'no two ids seal alike');
    seen.add(sealed);
    assert.notEqual(bob.unseal(sealed), id, "another user's key does not open ann's id");
    assert.notEqual(anon.unseal(sealed), id);
    buf.writeBigInt64LE(id);
    ann.sealAt(buf, 0);
    assert.equal(buf.readBigInt64LE(0), sealed, 'in place as by value');
  }
  // The smallest and largest ids of each sign.
  for (const id of [1n, 2n, (1n << 63n) - 1n, -1n, -(1n << 63n)]) {
    const sealed = ann.seal(id);
    assert.equal(sealed > 0n, id > 0n);
    assert.equal(ann.unseal(sealed), id);
  }
  // Stateless: the same secret and user give the same seal (every worker agrees).
  assert.equal(deriveCursorSeal(secret, user('ann')).seal(12345n), ann.seal(12345n));
  assert.notEqual(deriveCursorSeal(randomBytes(32), user('ann')).seal(12345n), ann.seal(12345n));
  // Another password for the same name: another key.
  assert.notEqual(deriveCursorSeal(secret, { ...user('ann'), serverKey: Buffer.alloc(32, 9) }).seal(12345n), ann.seal(12345n));
});

test('sealReply: cursor.id in place (8 bytes, nothing re-encoded), killCursors arrays, and a copy when asked', () => {
  const s = deriveCursorSeal(randomBytes(32), null);
  const reply = Buffer.from(serialize({ cursor: { firstBatch: [{ a: 1 }], id: Long.fromBigInt(77n), ns: 'd.c' }, ok: 1 }));
  const before = Buffer.from(reply);
  const copy = sealReply(reply, 0, 'find', s, true);
  assert.notEqual(copy, reply, 'a copy');
  assert.deepEqual(reply, before, 'the original untouched');
  assert.equal(sealReply(reply, 0, 'find', s, false), reply);
  assert.deepEqual(reply, copy);
  assert.equal(reply.length, before.length);
  const diff = [...reply.keys()].filter((i) => reply[i] !== before[i]);
  assert.ok(diff.length > 0 && diff.every((i) => i >= diff[0] && i < diff[0] + 8), 'only the id changed');
  // Not a cursor command: not even scanned.
  const other = Buffer.from(before);
  sealReply(other, 0, 'insert', s, false);
  assert.deepEqual(other, before);
  const zero = Buffer.from(serialize({ cursor: { firstBatch: [], id: Long.fromBigInt(0n), ns: 'd.c' }, ok: 1 }));
  assert.equal(sealReply(zero, 0, 'find', s, true), zero, 'id 0: nothing to seal, no copy');
  const kill = Buffer.from(serialize({
    cursorsKilled: [Long.fromBigInt(1n)], cursorsNotFound: [Long.fromBigInt(2n)],
    cursorsAlive: [Long.fromBigInt(3n)], cursorsUnknown: [Long.fromBigInt(4n)], ok: 1,
  }));
  sealReply(kill, 0, 'killCursors', s, false);
  const k = deserialize(kill, { useBigInt64: true });
  assert.deepEqual([k.cursorsKilled[0], k.cursorsNotFound[0], k.cursorsAlive[0], k.cursorsUnknown[0]], [1n, 2n, 3n, 4n].map((i) => s.seal(i)));
});

test('renameNotFoundCursor: a getMore\'s CursorNotFound names the id the client sent, the rest of the reply kept; other replies untouched', () => {
  const s = deriveCursorSeal(randomBytes(32), null);
  const upstream = 5317663433239072815n;
  const sent = s.seal(upstream);
  const peek = new CommandPeek();
  peek.read(Buffer.from(serialize({ getMore: Long.fromBigInt(upstream), collection: 'c', $db: 'd' })));
  assert.equal(peek.cursorId, upstream);
  const reply = (code: number, errmsg: string) => Buffer.from(serialize({ ok: 0, errmsg, code, codeName: 'CursorNotFound', $clusterTime: { t: 1 } }));
  const out = renameNotFoundCursor(reply(43, `cursor id ${upstream} not found`), 0, peek, s);
  assert.ok(out !== null);
  assert.deepEqual(deserialize(out), { ok: 0, errmsg: `cursor id ${sent} not found`, code: 43, codeName: 'CursorNotFound', $clusterTime: { t: 1 } });
  // mongos' form, and a longer number that only contains the id's digits.
  const mongos = renameNotFoundCursor(reply(43, `Cursor not found (namespace: 'd.c', id: ${upstream}).`), 0, peek, s);
  assert.equal(deserialize(mongos!).errmsg, `Cursor not found (namespace: 'd.c', id: ${sent}).`);
  assert.equal(renameNotFoundCursor(reply(43, `cursor id 9${upstream} not found`), 0, peek, s), null);
  assert.equal(renameNotFoundCursor(reply(50, `cursor id ${upstream} timed out`), 0, peek, s), null, 'another code: as it is');
  const find = new CommandPeek();
  find.read(Buffer.from(serialize({ find: 'c', $db: 'd' })));
  assert.equal(renameNotFoundCursor(reply(43, `cursor id ${upstream} not found`), 0, find, s), null, 'not a getMore');
});

// ---- through the proxy ------------------------------------------------------------------------

/** find with batchSize 2 over the ten documents: the client-visible cursor id. */
async function openFind(db: Db): Promise<bigint> {
  const r = await db.command({ find: 'c', filter: {}, sort: { _id: 1 }, batchSize: 2 });
  const id = BigInt((r.cursor as Document).id.toString());
  assert.notEqual(id, 0n);
  return id;
}

async function getMore(db: Db, id: bigint, coll = 'c', batchSize = 2): Promise<Document> {
  return (await db.command({ getMore: Long.fromBigInt(id), collection: coll, batchSize })).cursor as Document;
}

test("another user's getMore and killCursors do not reach a cursor; the owner reads it to the end", async () => {
  const port = await start({ users: USERS });
  const ann = client(port, 'ann', ANN);
  const bob = client(port, 'bob', BOB);
  try {
    const a = ann.db('cursors');
    const b = bob.db('cursors');
    await seed(a);
    const id = await openFind(a);
    await assert.rejects(getMore(b, id), (e: unknown) => isCode(43)(e) && (e as Error).message === `cursor id ${id} not found`);
    const killed = await b.command({ killCursors: 'c', cursors: [Long.fromBigInt(id)] });
    assert.deepEqual(ids(killed.cursorsNotFound), [id], 'not found for bob, under the id bob sent');
    assert.deepEqual(ids(killed.cursorsKilled), []);
    // Ann's cursor is untouched: four more batches of two, the last one closes it.
    const seen: number[] = [0, 1];
    let cur = await getMore(a, id);
    for (;;) {
      seen.push(...(cur.nextBatch as Document[]).map((d) => d.i as number));
      const next = BigInt(cur.id.toString());
      if (next === 0n) break;
      assert.equal(next, id, 'the same client-visible id on every batch');
      cur = await getMore(a, id);
    }
    assert.deepEqual(seen, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    // Her own killCursors works; her getMore after it is refused as mongod refuses an unknown cursor.
    const id2 = await openFind(a);
    const own = await a.command({ killCursors: 'c', cursors: [Long.fromBigInt(id2)] });
    assert.deepEqual(ids(own.cursorsKilled), [id2]);
    await assert.rejects(getMore(a, id2), isCode(43));
    // Bob's getMore arriving after ann's killCursors named nothing of his.
    const id3 = await openFind(b);
    assert.equal((await getMore(b, id3)).nextBatch.length, 2);
  } finally {
    await ann.close();
    await bob.close();
  }
});

test('aggregate, listCollections and driver iteration over many batches work; other users cannot continue them', async () => {
  const port = await start({ users: USERS });
  const ann = client(port, 'ann', ANN);
  const bob = client(port, 'bob', BOB);
  try {
    const a = ann.db('cursors2');
    const b = bob.db('cursors2');
    await seed(a);
    await seed(a, 'd');
    await seed(a, 'e');
    // The driver continues its cursors itself: every batch's getMore names the sealed id.
    assert.equal((await a.collection('c').find({}, { batchSize: 2 }).toArray()).length, 10);
    assert.equal((await a.collection('c').aggregate([{ $match: {} }], { batchSize: 3 }).toArray()).length, 10);
    const names = (await a.listCollections({}, { batchSize: 1 }).toArray()).map((c) => c.name).sort();
    assert.deepEqual(names, ['c', 'd', 'e']);
    // An aggregate cursor and a listCollections cursor of ann's: bob cannot continue or kill them.
    const agg = await a.command({ aggregate: 'c', pipeline: [], cursor: { batchSize: 2 } });
    const aggId = BigInt((agg.cursor as Document).id.toString());
    const lc = await a.command({ listCollections: 1, cursor: { batchSize: 1 } });
    const lcId = BigInt((lc.cursor as Document).id.toString());
    assert.notEqual(aggId, 0n);
    assert.notEqual(lcId, 0n);
    await assert.rejects(getMore(b, aggId), isCode(43));
    await assert.rejects(getMore(b, lcId, '$cmd.listCollections', 1), isCode(43));
    assert.equal((await getMore(a, aggId, 'c', 100)).nextBatch.length, 8);
    assert.equal((await getMore(a, lcId, '$cmd.listCollections', 100)).nextBatch.length, 2);
  } finally {
    await ann.close();
    await bob.close();
  }
});

test('a reply a response step replaced is sealed too (in a copy): its batches continue for its user only', async () => {
  const port = await start({ users: USERS }, {
    pipeline: { response: ['transform'] },
    steps: { transform: { config: { response: [{ op: 'redact', path: 'secret' }] } } },
  });
  const ann = client(port, 'ann', ANN);
  const bob = client(port, 'bob', BOB);
  try {
    const a = ann.db('cursors4');
    await a.collection('c').deleteMany({});
    await a.collection('c').insertMany(Array.from({ length: 10 }, (_, i) => ({ _id: i, secret: `s${i}` } as Document)));
    const all = await a.collection('c').find({}, { batchSize: 2 }).toArray();
    assert.equal(all.length, 10);
    assert.ok(all.every((d) => d.secret === '***'), 'the step replaced every batch');
    const r = await a.command({ find: 'c', filter: {}, batchSize: 2 });
    const id = BigInt((r.cursor as Document).id.toString());
    assert.equal((r.cursor as Document).firstBatch[0].secret, '***');
    await assert.rejects(getMore(bob.db('cursors4'), id), isCode(43));
    const more = await getMore(a, id, 'c', 100);
    assert.equal(more.nextBatch.length, 8);
    assert.equal(BigInt(more.id.toString()), 0n);
  } finally {
    await ann.close();
    await bob.close();
  }
});

test('a shadow canary on every request: the client gets sealed ids (baseline reply unchanged or replaced by a step)', async () => {
  const TOKEN = 'cursor-owner-token-0123456789';
  const dir = mkdtempSync(join(tmpdir(), 'cursor-owner-shadow-'));
  try {
    // The baseline redacts `secret` (collection s: replies replaced) and `nothing` (collection p: left as the upstream sent them).
    const proxy = await startProxy({ users: USERS }, {
      control_plane: { port: 0, tokens: [TOKEN] }, canary: { data_dir: dir },
      pipeline: { response: ['transform'] }, steps: { transform: { config: { response: [{ op: 'redact', path: 'secret' }] } } },
    });
    const res = await fetch(`${proxy.controlPlaneUrl!}/api/v1/canary`, {
      method: 'POST', headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        mode: 'shadow', shadow_pct: 100, auto_promote: false,
        candidate_config: { steps: [{ type: 'transform', config: { response: [{ op: 'redact', path: 'other' }] } }] },
        stages: [{ traffic_pct: 0, min_duration: '1h', min_requests: 1_000_000 }, { traffic_pct: 100, min_duration: '0', min_requests: 0 }],
      }),
    });
    assert.equal(res.status, 201, await res.text());
    const ann = client(proxy.port, 'ann', ANN);
    const bob = client(proxy.port, 'bob', BOB);
    try {
      const a = ann.db('cursors5');
      for (const [coll, field] of [['s', 'secret'], ['p', 'plain']]) {
        await a.collection(coll).deleteMany({});
        await a.collection(coll).insertMany(Array.from({ length: 10 }, (_, i) => ({ _id: i, [field]: i } as Document)));
        const all = await a.collection(coll).find({}, { batchSize: 2 }).toArray();
        assert.equal(all.length, 10, coll);
        const r = await a.command({ find: coll, filter: {}, batchSize: 2 });
        const id = BigInt((r.cursor as Document).id.toString());
        await assert.rejects(getMore(bob.db('cursors5'), id, coll), isCode(43));
        assert.equal((await getMore(a, id, coll, 100)).nextBatch.length, 8, coll);
      }
    } finally {
      await ann.close();
      await bob.close();
    }
    assert.ok(proxy.server.stats.requests > 0);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('auth.mode optional: a connection without a login and a user do not reach each other\'s cursors', async () => {
  const port = await start({ mode: 'optional', users: USERS });
  const ann = client(port, 'ann', ANN);
  const anon = client(port);
  try {
    const a = ann.db('cursors3');
    const n = anon.db('cursors3');
    await seed(a);
    const annId = await openFind(a);
    const anonId = await openFind(n);
    await assert.rejects(getMore(n, annId), isCode(43));
    await assert.rejects(getMore(a, anonId), isCode(43));
    assert.deepEqual(ids((await n.command({ killCursors: 'c', cursors: [Long.fromBigInt(annId)] })).cursorsNotFound), [annId]);
    assert.equal((await getMore(a, annId, 'c', 100)).nextBatch.length, 8);
    assert.equal((await getMore(n, anonId, 'c', 100)).nextBatch.length, 8);
    // Anonymous clients share one identity: another anonymous connection continues the cursor.
    const anon2 = client(port);
    try {
      const id = await openFind(n);
      assert.equal((await getMore(anon2.db('cursors3'), id)).nextBatch.length, 2);
    } finally {
      await anon2.close();
    }
  } finally {
    await ann.close();
    await anon.close();
  }
});

test('legacy OP_QUERY commands are sealed and opened alike; a cursor id of another type than long is refused', async () => {
  const port = await start({ users: USERS });
  const ann = await rawLogin(port, 'ann', ANN, false);
  const bob = await rawLogin(port, 'bob', BOB, false);
  const legacy = async (raw: RawClient, cmd: Document) => (await raw.roundTrip(opQuery('cursorsl.$cmd', cmd, { numberToReturn: -1 }))).docs![0];
  try {
    await rawCommand(ann.raw, { delete: 'c', deletes: [{ q: {}, limit: 0 }], $db: 'cursorsl' });
    await rawCommand(ann.raw, { insert: 'c', documents: Array.from({ length: 10 }, (_, i) => ({ _id: i })), $db: 'cursorsl' });
    const found = await legacy(ann.raw, { find: 'c', filter: {}, batchSize: 2 });
    const id = (found.cursor as Document).id as Long;
    assert.equal((await legacy(bob.raw, { getMore: id, collection: 'c' })).code, 43);
    assert.deepEqual(ids((await legacy(bob.raw, { killCursors: 'c', cursors: [id] })).cursorsNotFound), [BigInt(id.toString())]);
    const more = await legacy(ann.raw, { getMore: id, collection: 'c', batchSize: 2 });
    assert.equal(more.ok, 1, JSON.stringify(more));
    assert.equal(((more.cursor as Document).id as Long).toString(), id.toString(), 'the same sealed id back over OP_REPLY');
    // Only a long is opened: another type would reach the upstream unopened, naming its ids directly.
    for (const bad of [new Double(Number(id.toString())), new Int32(7)]) {
      const r = await rawCommand(bob.raw, { getMore: bad, collection: 'c', $db: 'cursorsl' });
      assert.equal(r.code, 14, JSON.stringify(r));
      const k = await rawCommand(bob.raw, { killCursors: 'c', cursors: [bad], $db: 'cursorsl' });
      assert.equal(k.code, 14, JSON.stringify(k));
    }
    assert.equal((await rawCommand(ann.raw, { getMore: id, collection: 'c', batchSize: 100, $db: 'cursorsl' })).cursor.nextBatch.length, 6);
  } finally {
    ann.raw.destroy();
    bob.raw.destroy();
  }
});

// ---- several workers ----------------------------------------------------------------------------

/** A raw connection logged in as `user` (with a load-balanced hello, its serviceId names the worker process). */
async function rawLogin(port: number, user: string, password: string, loadBalanced = true): Promise<{ raw: RawClient; worker: string }> {
  const raw = await RawClient.connect(port);
  const hello = await raw.hello(loadBalanced ? { loadBalanced: true } : {});
  const c = new ScramClient({ username: user, password, source: 'admin', mechanism: 'SCRAM-SHA-256' });
  const first = (await raw.roundTrip(opMsg({
    saslStart: 1, mechanism: 'SCRAM-SHA-256', payload: new Binary(c.first()), options: { skipEmptyExchange: true }, $db: 'admin',
  }))).body!;
  assert.equal(first.ok, 1, JSON.stringify(first));
  const proof = c.next(Buffer.from((first.payload as Binary).buffer));
  const fin = (await raw.roundTrip(opMsg({ saslContinue: 1, conversationId: first.conversationId, payload: new Binary(proof), $db: 'admin' }))).body!;
  assert.equal(fin.done, true, JSON.stringify(fin));
  return { raw, worker: String(hello.serviceId) };
}

async function rawCommand(raw: RawClient, cmd: Document): Promise<Document> {
  return (await raw.roundTrip(opMsg(cmd.$db === undefined ? { ...cmd, $db: 'cursorsw' } : cmd), 10_000)).body!;
}

const WORKERS_TEST = 'with --workers 2: a find on one worker is continued on the other by its user, and by nobody else; ' +
  'an unknown user gets one salt from both';
test(WORKERS_TEST, { timeout: 180_000 }, async () => {
  const port = await freePort();
  const file = join(mkdtempSync(join(tmpdir(), 'proxy-cursor-owner-')), 'proxy.json');
  writeFileSync(file, JSON.stringify({
    listen: `127.0.0.1:${port}`, log: { level: 'warn' }, upstream: { uri: await upstreamUri() }, auth: { users: USERS },
  }));
  const served = await spawnServe(['--config', file, '--workers', '2']);
  const raws: RawClient[] = [];
  const pool = client(port, 'ann', ANN, '?maxPoolSize=8&minPoolSize=8');
  try {
    // Connections until ann has one on each worker, and bob one on the second.
    const byWorker = new Map<string, RawClient>();
    for (let i = 0; i < 12 && byWorker.size < 2; i++) {
      const c = await rawLogin(port, 'ann', ANN);
      raws.push(c.raw);
      if (!byWorker.has(c.worker)) byWorker.set(c.worker, c.raw);
    }
    assert.equal(byWorker.size, 2, 'connections on both workers');
    const [[w1, onFirst], [w2, onSecond]] = [...byWorker];
    let bobRaw: RawClient | null = null;
    for (let i = 0; i < 12 && bobRaw === null; i++) {
      const c = await rawLogin(port, 'bob', BOB);
      raws.push(c.raw);
      if (c.worker === w2) bobRaw = c.raw;
    }
    assert.ok(bobRaw !== null && w1 !== w2);
    await pool.db('cursorsw').collection('c').deleteMany({});
    await pool.db('cursorsw').collection('c').insertMany(Array.from({ length: 10 }, (_, i) => ({ _id: i, i } as Document)));
    const found = await rawCommand(onFirst, { find: 'c', filter: {}, sort: { _id: 1 }, batchSize: 2 });
    const id = (found.cursor as Document).id as Long;
    assert.notEqual(BigInt(id.toString()), 0n);
    const refused = await rawCommand(bobRaw, { getMore: id, collection: 'c', batchSize: 2 });
    assert.equal(refused.code, 43, JSON.stringify(refused));
    const notKilled = await rawCommand(bobRaw, { killCursors: 'c', cursors: [id] });
    assert.deepEqual(ids(notKilled.cursorsNotFound), [BigInt(id.toString())]);
    // Ann, on the other worker: the rest of her cursor, batch by batch.
    let n = 2;
    for (;;) {
      const more = await rawCommand(onSecond, { getMore: id, collection: 'c', batchSize: 2 });
      assert.equal(more.ok, 1, JSON.stringify(more));
      n += ((more.cursor as Document).nextBatch as Document[]).length;
      if (BigInt(((more.cursor as Document).id as Long).toString()) === 0n) break;
    }
    assert.equal(n, 10);
    // The driver's pool spans both workers: many cursors, each read to its end.
    const docs = await Promise.all(Array.from({ length: 16 }, () => pool.db('cursorsw').collection('c').find({}, { batchSize: 2 }).toArray()));
    assert.ok(docs.every((d) => d.length === 10));
    // An unknown user's decoy salt is the same whichever worker answers (a salt that changed
    // between workers, while a real user's does not, would tell which users exist).
    const salts = new Map<string, string>();
    for (let i = 0; i < 12 && salts.size < 2; i++) {
      const a = await saltOf(port, 'nobody-here');
      salts.set(a.worker, a.salt);
    }
    assert.equal(salts.size, 2, 'answers from both workers');
    assert.equal(new Set(salts.values()).size, 1, JSON.stringify([...salts]));
  } finally {
    for (const r of raws) r.destroy();
    await pool.close();
    assert.equal(await served.stop(), 0);
  }
});
