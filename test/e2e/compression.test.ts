// End to end with wire compression: the Node driver negotiates zlib or snappy with the proxy; a TCP
// tap between driver and proxy counts OP_COMPRESSED frames (opcode 2012) in both directions, so the
// test proves compression actually happened rather than trusting the handshake.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { MongoClient } from 'mongodb';
import { startStack, type Stack } from '../helpers/stack.ts';
import { TcpTap, OP_COMPRESSED, OP_MSG } from '../helpers/wire.ts';

const IDS = { snappy: 1, zlib: 2, zstd: 3 } as const;

async function crudAndCursor(client: MongoClient, tag: string): Promise<void> {
  const c = client.db('e2e_compression').collection(tag);
  await c.insertMany(Array.from({ length: 300 }, (_, i) => ({ _id: i as never, tag, text: `row ${i} `.repeat(20) })));
  assert.equal((await c.updateMany({ _id: { $lt: 100 } as never }, { $set: { low: true } })).modifiedCount, 100);
  assert.equal((await c.deleteOne({ _id: 299 as never })).deletedCount, 1);
  const doc = await c.findOne({ _id: 5 as never });
  assert.equal(doc?.low, true);
  assert.equal(doc?.text, 'row 5 '.repeat(20));
  let n = 0;
  const ids = new Set<number>();
  for await (const d of c.find({}, { batchSize: 11 })) {
    ids.add(d._id as unknown as number);
    n++;
  }
  assert.equal(n, 299);
  assert.equal(ids.size, 299);
  assert.equal(await c.countDocuments({ low: true }), 100);
}

describe('driver compression through the proxy', () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack({ compression: ['snappy', 'zlib', 'zstd'] });
  });
  after(async () => {
    await stack?.close();
  });

  for (const name of ['zlib', 'snappy'] as const) {
    test(`compressors: ['${name}'] — CRUD and a cursor, OP_COMPRESSED both ways`, { timeout: 60_000 }, async () => {
      const tap = new TcpTap(stack.proxy.port);
      const uri = await tap.listen();
      const client = new MongoClient(uri, { compressors: [name], serverSelectionTimeoutMS: 5000 });
      try {
        const hello = await client.db('admin').command({ hello: 1 });
        assert.deepEqual(hello.compression, [name], 'hello.compression is the intersection');
        await crudAndCursor(client, name);
        const up = tap.count('toServer', OP_COMPRESSED);
        const down = tap.count('toClient', OP_COMPRESSED);
        assert.ok(up >= 10, `client→proxy OP_COMPRESSED frames: ${up}`);
        assert.ok(down >= 10, `proxy→client OP_COMPRESSED frames: ${down}`);
        assert.deepEqual([...tap.compressors.keys()], [IDS[name]], 'only the negotiated compressor is used');
        // Nothing after the handshake goes uncompressed from the proxy: every plain OP_MSG reply
        // answers a plain request (hello/monitoring), so the counts must match.
        assert.equal(tap.count('toClient', OP_MSG), tap.count('toServer', OP_MSG));
      } finally {
        await client.close();
        await tap.close();
      }
    });
  }

  test('no common compressor → no compression, still works', { timeout: 60_000 }, async () => {
    const only = await startStack({ compression: ['zlib'] });
    const tap = new TcpTap(only.proxy.port);
    const uri = await tap.listen();
    const client = new MongoClient(uri, { compressors: ['snappy'], serverSelectionTimeoutMS: 5000 });
    try {
      const hello = await client.db('admin').command({ hello: 1 });
      assert.equal(hello.compression, undefined);
      await crudAndCursor(client, 'none');
      assert.equal(tap.count('toServer', OP_COMPRESSED) + tap.count('toClient', OP_COMPRESSED), 0);
    } finally {
      await client.close();
      await tap.close();
      await only.close();
    }
  });
});
