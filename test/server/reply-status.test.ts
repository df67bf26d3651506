// A response step's reply_ok and reply_code (here the logging step's `status` and `code`) are the
// upstream reply's, whether the connection has already read them (profiling records the request)
// or not: through a real proxy, the Node driver and the embedded upstream, with profiling off and
// on. And the exchange keeps a status handed to it only until a step replaces the reply.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { serialize } from 'bson';
import { MongoClient, MongoServerError } from 'mongodb';
import { DevDbServer } from '../../runtime/devdb/index.ts';
import { Logger } from '../../runtime/log/index.ts';
import { Exchange } from '../../runtime/pipeline/index.ts';
import { Closes, withProxy } from '../helpers/proxy.ts';

const running = new Closes();
let devdb: DevDbServer | null = null;
let devUri = '';
after(async () => {
  await running.run();
  await devdb?.close();
});

interface Line { op?: string; status?: string; code?: number; collection?: string }

async function statuses(profiling: boolean): Promise<Line[]> {
  if (devdb === null) {
    devdb = new DevDbServer();
    devUri = (await devdb.listen(0)).uri;
  }
  const lines: Line[] = [];
  const log = new Logger('proxy', 'info', 'json', { write(line: string) { lines.push(JSON.parse(line) as Line); } });
  const raw: Record<string, unknown> = {
    upstream: { uri: devUri },
    pipeline: { request: [], response: ['logging'] },
    steps: { logging: { config: { sample_rate: 1 } } },
  };
  if (profiling) raw.profiling = { enabled: true, port: 0 };
  const { proxy } = await withProxy(running, raw, { log });
  const client = await new MongoClient(proxy.uri, { retryReads: false, retryWrites: false }).connect();
  try {
    const db = client.db('status');
    const coll = db.collection<{ _id: number }>(profiling ? 'on' : 'off');
    await coll.insertOne({ _id: 1 });
    await assert.rejects(coll.insertOne({ _id: 1 }), (e: unknown) => e instanceof MongoServerError && e.code === 11000);
    await assert.rejects(db.command({ noSuchCommand: 1 }), (e: unknown) => e instanceof MongoServerError && e.code === 59);
    await coll.findOne({ _id: 1 });
  } finally {
    await client.close();
  }
  return lines.filter((l) => l.status !== undefined && l.op !== 'endSessions')
    .map((l) => (l.code === undefined ? { op: l.op, status: l.status } : { op: l.op, status: l.status, code: l.code }));
}

test('reply_ok and reply_code are the upstream reply\'s, with profiling off and on', async () => {
  const expected = [
    { op: 'insert', status: 'ok' },
    // a duplicate key is a write error in an ok: 1 reply
    { op: 'insert', status: 'ok' },
    { op: 'noSuchCommand', status: 'error', code: 59 },
    { op: 'find', status: 'ok' },
  ];
  assert.deepEqual(await statuses(false), expected);
  assert.deepEqual(await statuses(true), expected);
});

test('a status handed to the exchange is used for its reply until a step replaces the reply', () => {
  const conn = { id: 1, appName: '', clientAddress: '', user: '' };
  const ex = new Exchange(conn, 'p', 'find', 'db', 'c', serialize({ find: 'c' }), null, 0);
  // Not a BSON document: read, it would be "not ok, code 0".
  const reply = Buffer.from([1, 2, 3]);
  ex.replyBody = reply;
  ex.knownStatus(reply, false, 11600);
  assert.equal(ex.replyOk(), 0);
  assert.equal(ex.replyCode(), 11600);
  ex.knownStatus(reply, true, NaN);
  assert.deepEqual([ex.replyOk(), ex.replyCode()], [1, 0]);
  ex.newReply = serialize({ ok: 0, code: 13, codeName: 'Unauthorized' });
  assert.deepEqual([ex.replyOk(), ex.replyCode()], [0, 13]);
});
