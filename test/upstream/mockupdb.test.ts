// Protocol cases scripted on the upstream side with PyMongo's mockupdb (Debian python3-mockupdb,
// importable from /usr/bin/python3): an error document in the middle of a cursor, an upstream that
// hangs up instead of answering, exhaust getMores, a mongos list whose members fail their hello or
// stop, and malformed replies. Each test starts a Python process whose MockupDB servers play the
// upstream (the script below prints their ports, then one JSON line per command it served), puts
// the proxy in front of them and drives it with the real Node driver (a raw socket only where the
// driver cannot send what the case needs: an exhaustAllowed getMore).
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { createInterface } from 'node:readline';
import { connect, type Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import { BSON, MongoClient, type Document, type MongoClientOptions } from 'mongodb';
import type { RunningProxy } from '../../runtime/app/serve.ts';
import { Logger } from '../../runtime/log/index.ts';
import { until } from '../helpers/until.ts';
import { Closes, withProxy } from '../helpers/proxy.ts';

const PY = '/usr/bin/python3';
const probe = spawnSync(PY, ['-c', 'import mockupdb'], { timeout: 30_000 });
const skip = probe.status === 0 || process.env.CI ? false : `mockupdb is not installed for ${PY} (apt-get install python3-mockupdb)`;

// The upstream: argv kind ('standalone' | 'mongos') and how many servers. Cursors return documents
// _id 0..6 in batches of batchSize (the cursor id says where the next batch starts); the collection
// name picks the case. stdin takes "hello-error N" (server N answers hello with an error),
// "hello-hangup N K" (server N hangs up on the next K hellos) and "stop N" (server N stops:
// listener and connections closed).
const SCRIPT = String.raw`
import json, random, struct, sys, threading
import bson
from bson.int64 import Int64
from mockupdb import MockupDB, OP_MSG_FLAGS

MORE_TO_COME = OP_MSG_FLAGS['moreToCome']
EXHAUST_ALLOWED = OP_MSG_FLAGS['exhaustAllowed']
kind = sys.argv[1]            # 'standalone' or 'mongos'
count = int(sys.argv[2])
lock = threading.Lock()
state = [{'hello': 'ok', 'hangups': {}, 'hello_hangups': 0} for _ in range(count)]
DOCS = 7                      # every cursor in this script returns documents _id 0..6

def emit(ev):
    with lock:
        sys.stdout.write(json.dumps(ev) + '\n')
        sys.stdout.flush()

def frame(response_to, flags, doc, raw=None):
    body = struct.pack('<I', flags) + b'\x00' + (raw if raw is not None else bson.BSON.encode(doc))
    request_id = random.randint(1, 1 << 30)
    return request_id, struct.pack('<iiii', 16 + len(body), request_id, response_to, 2013) + body

def hello_doc():
    doc = {'ismaster': True, 'isWritablePrimary': True, 'helloOk': True, 'minWireVersion': 0, 'maxWireVersion': 17,
           'maxBsonObjectSize': 16777216, 'maxMessageSizeBytes': 48000000, 'maxWriteBatchSize': 100000,
           'logicalSessionTimeoutMinutes': 30, 'ok': 1}
    if kind == 'mongos':
        doc['msg'] = 'isdbgrid'
    return doc

def batch(start, n):
    return [{'_id': i} for i in range(start, min(start + n, DOCS))]

def cursor(coll, first, docs, next_start):
    # The cursor id says where the next batch starts.
    cid = Int64(1000 + next_start) if next_start < DOCS else Int64(0)
    return {'cursor': {'id': cid, 'ns': 'app.' + coll, first: docs}, 'ok': 1}

def handler(i):
    def handle(request):
        name = request.command_name or ''
        doc = request.doc
        st = state[i]
        coll = doc.get('find') or doc.get('collection') or ''
        if name.lower() in ('hello', 'ismaster'):
            if st['hello'] == 'error':
                return request.command_err(code=91, errmsg='mockupdb: shutting down', codeName='ShutdownInProgress')
            if st['hello_hangups'] > 0:
                st['hello_hangups'] -= 1
                emit({'server': i, 'cmd': 'hello-hangup', 'coll': '', 'flags': 0, 'port': request.client_port})
                return request.hangup()
            return request.replies(hello_doc())
        emit({'server': i, 'cmd': name, 'coll': coll, 'flags': request.flags or 0, 'port': request.client_port})
        size = doc.get('batchSize', 2)
        if name == 'find':
            if coll == 'hangup':
                # Hang up on the first "hangups" finds with this tag.
                tag = doc['filter']['tag']
                if st['hangups'].get(tag, 0) < doc['filter']['hangups']:
                    st['hangups'][tag] = st['hangups'].get(tag, 0) + 1
                    return request.hangup()
            if coll == 'badbson':
                raw = bytearray(bson.BSON.encode(cursor(coll, 'firstBatch', batch(0, DOCS), DOCS)))
                raw[0:4] = struct.pack('<i', len(raw) + 100)   # the document claims more bytes than it has
                request._client.sendall(frame(request.request_id, 0, None, bytes(raw))[1])
                return True
            if coll == 'badheader':
                # A header whose length is below the 16-byte header itself.
                request._client.sendall(struct.pack('<iiii', 8, 1, request.request_id, 2013))
                return True
            if coll == 'huge':
                # A header announcing a 100 MB reply (above maxMessageSizeBytes); the body never comes.
                request._client.sendall(struct.pack('<iiii', 100 * 1000 * 1000, 1, request.request_id, 2013))
                return True
            docs = batch(0, size)
            return request.replies(cursor(coll, 'firstBatch', docs, DOCS if doc.get('singleBatch') else len(docs)))
        if name == 'getMore':
            if coll == 'cursornotfound':
                return request.command_err(code=43, errmsg='cursor id %d not found' % doc['getMore'], codeName='CursorNotFound')
            start = int(doc['getMore']) - 1000
            if request.flags & EXHAUST_ALLOWED:
                # Exhaust: every remaining batch, each reply answering the one before it.
                response_to = request.request_id
                while True:
                    docs = batch(start, size)
                    start += len(docs)
                    last = start >= DOCS
                    response_to, data = frame(response_to, 0 if last else MORE_TO_COME, cursor(coll, 'nextBatch', docs, start))
                    request._client.sendall(data)
                    if last:
                        return True
            docs = batch(start, size)
            return request.replies(cursor(coll, 'nextBatch', docs, start + len(docs)))
        return request.replies({'ok': 1})
    return handle

servers = []
for i in range(count):
    s = MockupDB(request_timeout=int(1e6))
    s.autoresponds(handler(i))
    servers.append(s)
emit({'ports': [s.run() for s in servers]})
for line in sys.stdin:
    words = line.split()
    if not words:
        continue
    if words[0] == 'hello-error':
        state[int(words[1])]['hello'] = 'error'
    elif words[0] == 'hello-hangup':
        state[int(words[1])]['hello_hangups'] = int(words[2])
    elif words[0] == 'stop':
        servers[int(words[1])].stop()
    emit({'done': line.strip()})
for s in servers:
    s.stop()
`;

const quiet = new Logger('test', 'error', 'json', { write: () => {} });
const proxies = new Closes();
const clients: MongoClient[] = [];
const upstreams: Mockup[] = [];
after(async () => {
  for (const c of clients) await c.close(true).catch(() => {});
  await proxies.run().catch(() => {});
  for (const u of upstreams) await u.close();
});

interface Served { server: number; cmd: string; coll: string; flags: number; port: number }

/** The Python process and what its servers report. */
class Mockup {
  readonly served: Served[] = [];
  readonly done: string[] = [];
  ports: number[] = [];
  stderr = '';
  private constructor(private readonly proc: ChildProcessWithoutNullStreams) {}

  static async start(kind: 'standalone' | 'mongos', count: number): Promise<Mockup> {
    const proc = spawn(PY, ['-c', SCRIPT, kind, String(count)], { stdio: ['pipe', 'pipe', 'pipe'] });
    const m = new Mockup(proc);
    upstreams.push(m);
    proc.stderr.setEncoding('utf8').on('data', (s: string) => { m.stderr += s; });
    createInterface({ input: proc.stdout }).on('line', (line) => {
      const ev = JSON.parse(line) as Document;
      if (Array.isArray(ev.ports)) m.ports = ev.ports as number[];
      else if (typeof ev.done === 'string') m.done.push(ev.done);
      else m.served.push(ev as Served);
    });
    await until(() => `mockupdb to listen (stderr: ${m.stderr})`, () => m.ports.length === count, 30_000);
    return m;
  }

  uri(...servers: number[]): string {
    return `mongodb://${servers.map((i) => `127.0.0.1:${this.ports[i]}`).join(',')}`;
  }

  /** Sends a control line and waits until the script has carried it out. */
  async control(line: string): Promise<void> {
    this.proc.stdin.write(`${line}\n`);
    await until(() => `mockupdb to do "${line}" (stderr: ${this.stderr})`, () => this.done.includes(line), 20_000);
  }

  of(cmd: string, coll?: string): Served[] {
    return this.served.filter((s) => s.cmd === cmd && (coll === undefined || s.coll === coll));
  }

  async close(): Promise<void> {
    if (this.proc.exitCode !== null) return;
    const exited = new Promise((r) => this.proc.once('exit', r));
    this.proc.stdin.end();
    const timer = setTimeout(() => this.proc.kill('SIGKILL'), 15_000);
    await exited;
    clearTimeout(timer);
  }
}

async function proxyFor(uri: string, upstream: Record<string, unknown> = {}): Promise<RunningProxy> {
  const { proxy } = await withProxy(proxies, { upstream: { uri, connect_timeout_ms: 3000, ...upstream } }, { log: quiet });
  return proxy;
}

function client(p: RunningProxy, opts: MongoClientOptions = {}): MongoClient {
  const c = new MongoClient(p.uri, { serverSelectionTimeoutMS: 15_000, ...opts });
  clients.push(c);
  return c;
}

const ALL = [0, 1, 2, 3, 4, 5, 6];
const ids = (docs: Document[]) => docs.map((d) => d._id as number);

/** The proxy still serves: a whole cursor (four batches) comes back in order. */
async function stillServes(c: MongoClient, coll = 'plain'): Promise<void> {
  assert.deepEqual(ids(await c.db('app').collection(coll).find({}, { batchSize: 2 }).toArray()), ALL);
}

test('an error document in the middle of a cursor (getMore → CursorNotFound) reaches the client; the next request works', { skip, timeout: 120_000 },
  async () => {
    const up = await Mockup.start('standalone', 1);
    const p = await proxyFor(up.uri(0));
    const c = client(p);
    const cursor = c.db('app').collection('cursornotfound').find({}, { batchSize: 2 });
    assert.deepEqual([(await cursor.next())?._id, (await cursor.next())?._id], [0, 1], 'the first batch arrives');
    await assert.rejects(cursor.next(), (err: Document) => {
      assert.equal(err.code, 43);
      assert.equal(err.codeName, 'CursorNotFound');
      assert.match(String(err.errmsg ?? err.message), /cursor id 1002 not found/);
      return true;
    });
    assert.equal(up.of('getMore', 'cursornotfound').length, 1, 'the getMore reached the upstream once');
    await stillServes(c);
  });

test('an upstream that hangs up instead of replying: the client gets a retryable HostUnreachable, the retry goes out on a new connection',
  { skip, timeout: 120_000 }, async () => {
    const up = await Mockup.start('standalone', 1);
    const p = await proxyFor(up.uri(0));
    const noRetry = client(p, { retryReads: false });
    const col = noRetry.db('app').collection('hangup');
    await assert.rejects(col.find({ tag: 'a', hangups: 1 }).toArray(), (err: Document) => {
    // An error document from the proxy (the client's own connection stays up), with a code the
    // retryable reads/writes specifications list as retryable.
      assert.equal(err.name, 'MongoServerError', `${err.name}: ${err.message}`);
      assert.equal(err.code, 6);
      assert.equal(err.codeName, 'HostUnreachable');
      assert.match(err.message, /upstream connection lost during find/);
      return true;
    });
    const finds = up.of('find', 'hangup');
    assert.equal(finds.length, 1);
    assert.deepEqual(ids(await col.find({ tag: 'a', hangups: 1 }).toArray()), ALL, 'the retry works');
    const again = up.of('find', 'hangup');
    assert.equal(again.length, 2);
    assert.notEqual(again[1].port, again[0].port, 'the retry came on another upstream connection');
    await stillServes(noRetry);

    // A driver with retryable reads (the default) retries by itself: the application sees no error.
    const retrying = client(p);
    assert.deepEqual(ids(await retrying.db('app').collection('hangup').find({ tag: 'b', hangups: 1 }).toArray()), ALL);
    assert.equal(up.of('find', 'hangup').length, 4, 'hung up on once, then served');
  });

test('an upstream that hangs up during the connection handshake: the request is retried, the pool counts its connections right',
  { skip, timeout: 120_000 }, async () => {
    const up = await Mockup.start('standalone', 1);
    await up.control('hello-hangup 0 1');
    // The pool's first connection (opened at start) is hung up on mid-handshake.
    const p = await proxyFor(up.uri(0));
    const pool = p.server.router.serverPools()[0];
    const c = client(p);
    await stillServes(c);
    assert.equal(up.of('hello-hangup').length, 1);
    await c.close();
    await until('the pool to settle', () => pool.waitingCount === 0 && pool.idleCount > 0, 20_000);
    assert.equal(pool.size, pool.idleCount, `pool size ${pool.size} = its idle connections ${pool.idleCount} (a failed handshake counted once)`);
    assert.equal(pool.stats.failedConnects, 1);
  });

test('exhaust getMore: exhaustAllowed is cleared (docs/operations.md), each getMore is answered once and every batch arrives in order',
  { skip, timeout: 120_000 }, async () => {
    const up = await Mockup.start('standalone', 1);
    const p = await proxyFor(up.uri(0));
    // The Node driver never sends exhaustAllowed on a getMore (only on its monitoring hello), and
    // PyMongo refuses exhaust cursors against a mongos (which the proxy says it is): a raw socket
    // sends the OP_MSG a driver with exhaust cursors would.
    const wire = await RawClient.open(p);
    try {
      let reply = await wire.command(0, { find: 'exhaust', filter: {}, batchSize: 2, $db: 'app' });
      assert.equal(reply.flags & MORE_TO_COME, 0);
      const got = ids(reply.doc.cursor.firstBatch as Document[]);
      let id = reply.doc.cursor.id as BSON.Long;
      let getMores = 0;
      while (!id.isZero()) {
        reply = await wire.command(EXHAUST_ALLOWED, { getMore: id, collection: 'exhaust', batchSize: 2, $db: 'app' });
        getMores++;
        assert.equal(Number(reply.doc.ok), 1, JSON.stringify(reply.doc));
        assert.equal(reply.flags & MORE_TO_COME, 0, 'the proxy answers each getMore with one reply (no moreToCome)');
        got.push(...ids(reply.doc.cursor.nextBatch as Document[]));
        id = reply.doc.cursor.id as BSON.Long;
      }
      assert.deepEqual(got, ALL, 'every batch, in order');
      assert.equal(getMores, 3);
      const seen = up.of('getMore', 'exhaust');
      assert.equal(seen.length, 3, 'the upstream answered each getMore separately');
      for (const g of seen) assert.equal(g.flags & EXHAUST_ALLOWED, 0, 'no getMore reached the upstream with exhaustAllowed');
      // Nothing else is queued on the connection: the next reply is the ping's.
      assert.equal(Number((await wire.command(0, { ping: 1, $db: 'admin' })).doc.ok), 1);
    } finally {
      wire.close();
    }
    await stillServes(client(p), 'exhaust');
  });

test('a mongos list: a router whose hello fails, then one that stops, is left out; requests keep flowing to the other', { skip, timeout: 150_000 },
  async () => {
    const up = await Mockup.start('mongos', 3);
    const p = await proxyFor(up.uri(0, 1, 2), { heartbeat_ms: 500 });
    const t = p.server.router.topology!;
    await until(() => `three routers: ${t.describe?.() ?? ''}`, () => t.usableServers.length === 3, 20_000);
    assert.equal(t.kind, 'Sharded');
    const col = client(p).db('app').collection('spread');
    const finds = (server: number) => up.of('find', 'spread').filter((s) => s.server === server).length;
    for (let i = 0; i < 30; i++) assert.equal((await col.findOne({}))?._id, 0);
    assert.ok(finds(0) > 0 && finds(1) > 0 && finds(2) > 0, `spread: ${finds(0)} / ${finds(1)} / ${finds(2)}`);

    await up.control('hello-error 1');
    await until('router 1 to be left out', () => t.usableServers.length === 2, 20_000);
    await up.control('stop 2');
    // Requests keep working while the proxy finds out router 2 is gone (its pooled connections fail,
    // the driver retries the read, the monitor drops the router).
    for (let i = 0; i < 30; i++) assert.equal((await col.findOne({}))?._id, 0);
    await until('router 2 to be left out', () => t.usableServers.length === 1, 20_000);
    const before = [finds(0), finds(1), finds(2)];
    for (let i = 0; i < 30; i++) assert.equal((await col.findOne({}))?._id, 0);
    assert.deepEqual([finds(0) - before[0], finds(1) - before[1], finds(2) - before[2]], [30, 0, 0], 'everything on router 0');
    assert.equal(t.usableServers[0].address, `127.0.0.1:${up.ports[0]}`);
  });

for (const [coll, what] of [
  ['badbson', 'a reply whose BSON document claims more bytes than the message holds'],
  ['badheader', 'a reply header whose length is below the header size'],
  ['huge', 'a reply header announcing 100 MB (above maxMessageSizeBytes)'],
] as const) {
  test(`a malformed reply (${what}): the client gets a clear error, the proxy keeps serving`, { skip, timeout: 120_000 }, async () => {
    const up = await Mockup.start('standalone', 1);
    const p = await proxyFor(up.uri(0));
    const c = client(p, { retryReads: false });
    await assert.rejects(c.db('app').collection(coll).find({}).toArray(), (err: Document) => {
      assert.equal(err.name, 'MongoServerError', `${err.name}: ${err.message}`);
      assert.equal(err.code, 6);
      assert.match(err.message, /upstream connection lost during find/);
      return true;
    });
    const bad = up.of('find', coll);
    assert.equal(bad.length, 1);
    await stillServes(c);
    assert.notEqual(up.of('find', 'plain')[0].port, bad[0].port, 'the connection that sent the bad reply is not used again');
  });
}

const MORE_TO_COME = 1 << 1;
const EXHAUST_ALLOWED = 1 << 16;

/** OP_MSG over a plain socket: one command at a time, replies framed by their length. */
class RawClient {
  private buf = Buffer.alloc(0);
  private waiting: (() => void) | null = null;
  private nextId = 1;
  private constructor(private readonly socket: Socket) {
    socket.on('data', (d: Buffer) => {
      this.buf = Buffer.concat([this.buf, d]);
      this.waiting?.();
    });
  }

  static open(p: RunningProxy): Promise<RawClient> {
    const { port } = new URL(p.uri);
    return new Promise((resolve, reject) => {
      const s = connect(Number(port), '127.0.0.1', () => resolve(new RawClient(s)));
      s.once('error', reject);
    });
  }

  async command(flags: number, doc: Document): Promise<{ flags: number; doc: Document }> {
    const body = BSON.serialize(doc);
    const header = Buffer.alloc(21);
    const id = this.nextId++;
    header.writeInt32LE(21 + body.length, 0);
    header.writeInt32LE(id, 4);
    header.writeInt32LE(0, 8);
    header.writeInt32LE(2013, 12);
    header.writeUInt32LE(flags, 16);
    header.writeUInt8(0, 20);
    this.socket.write(Buffer.concat([header, body]));
    const frame = await this.frame();
    assert.equal(frame.readInt32LE(8), id, 'the reply answers this request');
    return { flags: frame.readUInt32LE(16), doc: BSON.deserialize(frame.subarray(21), { promoteLongs: false }) };
  }

  private async frame(): Promise<Buffer> {
    const deadline = performance.now() + 30_000;
    while (this.buf.length < 4 || this.buf.length < this.buf.readInt32LE(0)) {
      if (performance.now() > deadline) throw new Error('no reply within 30 s');
      await new Promise<void>((r) => { this.waiting = r; setTimeout(r, 100); });
    }
    const len = this.buf.readInt32LE(0);
    const f = this.buf.subarray(0, len);
    this.buf = this.buf.subarray(len);
    return f;
  }

  close(): void {
    this.socket.destroy();
  }
}
