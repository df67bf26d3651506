// devdb cursor batches are capped at 16 MiB as mongod caps them (issue 19, item 10): a batch stops
// before the document that would take its array past 16 MiB — counting each element as the array
// encodes it, not only the documents — the first batch defaults to 101 documents, a getMore without
// batchSize fills up to 16 MiB, and one document always goes in. Read with the official driver
// through a relay that measures every reply frame the devdb writes.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createServer, connect, type Server, type Socket } from 'node:net';
import { MongoClient, type CommandSucceededEvent } from 'mongodb';
import { DevDbServer } from '../../runtime/devdb/server.ts';

const MiB = 1024 * 1024;
/** A reply's envelope around its batch array: OP_MSG header and section, cursor id, ns, ok. */
const ENVELOPE = 1024;

/** Forwards a client to `port`, noting the length of every frame the server sends. */
function relay(port: number): Promise<{ server: Server; port: number; replies: number[] }> {
  const replies: number[] = [];
  const server = createServer((client: Socket) => {
    const upstream = connect(port, '127.0.0.1');
    let pending: Buffer = Buffer.alloc(0);
    upstream.on('data', (chunk: Buffer) => {
      pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk]);
      while (pending.length >= 4 && pending.length >= pending.readInt32LE(0)) {
        const len = pending.readInt32LE(0);
        replies.push(len);
        pending = pending.subarray(len);
      }
      client.write(chunk);
    });
    client.on('data', (c: Buffer) => upstream.write(c));
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
    client.on('error', () => upstream.destroy());
    upstream.on('error', () => client.destroy());
  });
  return new Promise((r) => server.listen(0, '127.0.0.1', () => r({ server, port: (server.address() as { port: number }).port, replies })));
}

describe('devdb cursor batches: 16 MiB as mongod', () => {
  let devdb: DevDbServer;
  let link: Awaited<ReturnType<typeof relay>>;
  let client: MongoClient;
  /** Documents per batch of each find/aggregate/getMore reply, in order. */
  const batches: Array<{ command: string; docs: number }> = [];

  before(async () => {
    devdb = new DevDbServer();
    const { port } = await devdb.listen();
    link = await relay(port);
    client = new MongoClient(`mongodb://127.0.0.1:${link.port}/?directConnection=true`, { monitorCommands: true });
    client.on('commandSucceeded', (ev: CommandSucceededEvent) => {
      const cur = (ev.reply as { cursor?: { firstBatch?: unknown[]; nextBatch?: unknown[] } }).cursor;
      const b = cur?.firstBatch ?? cur?.nextBatch;
      if (b !== undefined) batches.push({ command: ev.commandName, docs: b.length });
    });
    await client.connect();
  });

  after(async () => {
    await client?.close();
    link?.server.close();
    await devdb?.close();
  });

  it('450,000 small documents: every one read by find and by aggregate, each getMore filled to under 16 MiB of array', async () => {
    const coll = client.db('big').collection<{ _id: number; s: string }>('small');
    const N = 450_000;
    // 82 bytes each: a 16 MiB batch holds ~186,000 of them, whose array element headers add ~1.4 MB
    // — what used to take a reply past js-bson's 17 MiB serialization buffer.
    for (let i = 0; i < N; i += 50_000) {
      await coll.insertMany(Array.from({ length: 50_000 }, (_, k) => ({ _id: i + k, s: 'x'.repeat(60) })), { ordered: false });
    }
    for (const read of [() => coll.find().toArray(), () => coll.aggregate([{ $match: {} }]).toArray()]) {
      batches.length = 0;
      link.replies.length = 0;
      const docs = await read();
      assert.equal(docs.length, N);
      assert.equal(docs[N - 1]._id, N - 1);
      assert.equal(batches[0].docs, 101, 'the first batch defaults to 101 documents');
      assert.equal(batches.reduce((n, b) => n + b.docs, 0), N);
      const more = batches.slice(1);
      assert.ok(more.length >= 2 && more.slice(0, -1).every((b) => b.docs > 150_000), `getMore batches fill up: ${JSON.stringify(more)}`);
      const largest = Math.max(...link.replies);
      assert.ok(largest <= 16 * MiB + ENVELOPE, `largest reply ${largest} bytes`);
      assert.ok(largest > 16 * MiB - 200, `a full batch is close to 16 MiB: ${largest} bytes`);
    }
  });

  it('9 MiB documents: one per batch (two would pass 16 MiB), the first batch included; an explicit batchSize still stops at 16 MiB', async () => {
    const coll = client.db('big').collection<{ _id: number; s: string }>('large');
    const N = 4;
    for (let i = 0; i < N; i++) await coll.insertOne({ _id: i, s: 'y'.repeat(9 * MiB) });
    for (const batchSize of [undefined, 10]) {
      batches.length = 0;
      link.replies.length = 0;
      const docs = await coll.find({}, batchSize === undefined ? {} : { batchSize }).toArray();
      assert.equal(docs.length, N);
      assert.deepEqual(batches.map((b) => b.docs), [1, 1, 1, 1]);
      assert.ok(Math.max(...link.replies) <= 16 * MiB + ENVELOPE);
    }
  });
});
