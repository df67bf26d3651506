// Legacy OP_QUERY commands the proxy decodes and re-encodes as OP_MSG: a `$query` that is no
// document (an array, a Binary, a Code) and a command whose fields the BSON library mistakes for
// one of its own types (a field named _bsontype) are the client's bad input. Each is answered with
// an error document naming it, counted as a decode error and logged at warn without a stack —
// never an InternalError with a stack at error level — and the connection keeps being served.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { MongoClient } from 'mongodb';
import { Binary, Code, serialize } from 'bson';
import { startStack, type Stack } from '../helpers/stack.ts';
import { RawClient, decodeReply, opQuery, OP_REPLY } from '../helpers/wire.ts';

const T = { timeout: 30_000 };

/** A BSON document from raw elements (type byte, name, value bytes): what `serialize` refuses to write. */
function rawDoc(elements: Array<[number, string, Buffer]>): Buffer {
  const body = Buffer.concat(elements.map(([type, name, value]) => Buffer.concat([Buffer.from([type]), Buffer.from(`${name}\0`), value])));
  const len = Buffer.alloc(4);
  len.writeInt32LE(4 + body.length + 1);
  return Buffer.concat([len, body, Buffer.from([0])]);
}
function int32(v: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeInt32LE(v);
  return b;
}
function bsonString(s: string): Buffer {
  const bytes = Buffer.from(`${s}\0`);
  return Buffer.concat([int32(bytes.length), bytes]);
}

describe('legacy OP_QUERY commands that cannot become OP_MSG', () => {
  let stack: Stack;
  let driver: MongoClient;

  before(async () => {
    stack = await startStack({ logLevel: 'error' }); // the ring keeps error lines only: there must be none
    driver = new MongoClient(stack.uri, { serverSelectionTimeoutMS: 5000 });
    await driver.db('legacy_q').collection('c').insertOne({ v: 1 });
  });

  after(async () => {
    await driver?.close();
    await stack?.close();
  });

  const cases: Array<[string, Buffer, number, RegExp]> = [
    ['$query an array', Buffer.from(serialize({ $query: [{ ping: 1 }] })), 17, /\$query must be a document, got an array/],
    ['$query a Binary', Buffer.from(serialize({ $query: new Binary(Buffer.from('abc')) })), 17, /\$query must be a document, got a Binary/],
    ['$query a Code', Buffer.from(serialize({ $query: new Code('x') })), 17, /\$query must be a document, got a Code/],
    ['a field named _bsontype', rawDoc([[0x10, 'ping', int32(1)], [0x02, '_bsontype', bsonString('ObjectId')]]), 22, /cannot be re-encoded/],
    ['a nested _bsontype', rawDoc([[0x10, 'ping', int32(1)], [0x03, 'x', rawDoc([[0x02, '_bsontype', bsonString('Long')]])]]), 22, /cannot be re-encoded/],
  ];

  for (const [name, query, code, message] of cases) {
    test(`${name} → an error document, counted, no stack at error level; the connection still works`, T, async () => {
      const ring = stack.proxy.logRing!;
      const linesBefore = ring.recent(1000).length;
      const decodeErrors = stack.proxy.server.stats.decodeErrors;
      const c = await RawClient.connect(stack.proxy.port);
      try {
        const r = await c.roundTrip(opQuery('admin.$cmd', query));
        assert.equal(r.opCode, OP_REPLY);
        const doc = r.docs![0];
        assert.equal(doc.ok, 0);
        assert.equal(doc.code, code, `expected code ${code}, got ${JSON.stringify(doc)}`);
        assert.match(doc.errmsg, message);
        assert.equal(stack.proxy.server.stats.decodeErrors, decodeErrors + 1, 'counted as a decode error');
        const errorLines = ring.recent(1000).slice(linesBefore);
        assert.deepEqual(errorLines, [], 'nothing is logged at error level (bad input is logged at warn, without a stack)');
        // The same connection is served on.
        const ping = await c.roundTrip(opQuery('admin.$cmd', { ping: 1 }));
        assert.equal(decodeReply(ping.frame).docs![0].ok, 1);
      } finally {
        c.destroy();
      }
      assert.equal((await driver.db('legacy_q').collection('c').findOne({}))?.v, 1);
    });
  }
});
