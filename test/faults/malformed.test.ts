// Malformed input on raw sockets: each case gets a clean error document or a closed connection for
// that connection only, while a driver connection and a raw bystander connection keep being
// served (checked after every case), and the proxy keeps accepting new connections.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { MongoClient, type Collection } from 'mongodb';
import { serialize, type Document } from 'bson';
import { startStack, type Stack } from '../helpers/stack.ts';
import { RawClient, opMsg, opQuery, header, decodeReply, requestId, OP_MSG, OP_REPLY } from '../helpers/wire.ts';

const T = { timeout: 30_000 };

describe('malformed frames', () => {
  let stack: Stack;
  let driver: MongoClient;
  let coll: Collection;
  let bystander: RawClient;
  let checks = 0;

  before(async () => {
    stack = await startStack();
    driver = new MongoClient(stack.uri, { serverSelectionTimeoutMS: 5000 });
    coll = driver.db('faults_malformed').collection('probe');
    await coll.insertMany([{ _id: 1 as never, v: 'one' }, { _id: 2 as never, v: 'two' }]);
    bystander = await RawClient.connect(stack.proxy.port);
    await bystander.hello();
  });

  after(async () => {
    bystander?.destroy();
    await driver?.close();
    await stack?.close();
  });

  /** Others are unaffected: the driver reads, the bystander pings, a new connection works. */
  async function othersStillServed(): Promise<void> {
    checks++;
    const docs = await coll.find({}, { sort: { _id: 1 } }).toArray();
    assert.deepEqual(docs.map((d) => d.v), ['one', 'two']);
    const r = await bystander.roundTrip(opMsg({ ping: 1, $db: 'admin' }));
    assert.equal(r.body?.ok, 1, 'bystander ping');
    const fresh = await RawClient.connect(stack.proxy.port);
    try {
      const f = await fresh.roundTrip(opMsg({ find: 'probe', filter: { _id: 2 }, $db: 'faults_malformed' }));
      assert.equal(f.body?.ok, 1);
      assert.equal(f.body?.cursor.firstBatch[0].v, 'two');
    } finally {
      fresh.destroy();
    }
  }

  /** Writes `bytes` and returns the error reply's body, or null if the connection was closed. */
  async function errorOrClose(c: RawClient, bytes: Buffer, reqId?: number): Promise<Document | null> {
    c.write(bytes);
    const f = await c.next(5000);
    if (f === null) return null;
    if (reqId !== undefined) assert.equal(f.responseTo, reqId, 'error reply answers the offending request');
    const r = decodeReply(f);
    const body = r.body ?? r.docs?.[0];
    assert.ok(body, 'reply has a document');
    assert.equal(body.ok, 0, `expected an error document, got ${JSON.stringify(body)}`);
    assert.equal(typeof body.errmsg, 'string');
    assert.equal(typeof body.code, 'number');
    return body;
  }

  test('message length below 16 → error or close, others unaffected', T, async () => {
    const c = await RawClient.connect(stack.proxy.port);
    try {
      const h = header(10, requestId(), 0, OP_MSG);
      const body = await errorOrClose(c, h);
      if (body !== null) {
        // After the error the stream cannot be resynchronised: it must close.
        await Promise.race([c.closedPromise, new Promise((_, rej) => setTimeout(() => rej(new Error('not closed')), 5000))]);
      }
      assert.ok(c.closed || body !== null);
    } finally {
      c.destroy();
    }
    await othersStillServed();
  });

  test('message length above 48,000,000 → refused at once (no waiting for the body), others unaffected', T, async () => {
    const c = await RawClient.connect(stack.proxy.port);
    try {
      const id = requestId();
      const started = Date.now();
      const body = await errorOrClose(c, header(48_000_001 + 1_000_000, id, 0, OP_MSG), id);
      if (body !== null) assert.match(String(body.errmsg), /length/i);
      await Promise.race([c.closedPromise, new Promise((_, rej) => setTimeout(() => rej(new Error('connection not closed after an oversized length')), 5000))]);
      assert.ok(Date.now() - started < 5000);
    } finally {
      c.destroy();
    }
    await othersStillServed();
  });

  test('unknown opcode → error document, and the connection still works', T, async () => {
    const c = await RawClient.connect(stack.proxy.port);
    try {
      const id = requestId();
      const payload = Buffer.alloc(8);
      const body = await errorOrClose(c, Buffer.concat([header(24, id, 0, 4242), payload]), id);
      assert.ok(body !== null, 'an unknown opcode with a valid length deserves an error document, not a close');
      assert.match(String(body.errmsg), /4242|opcode/i);
      const ping = await c.roundTrip(opMsg({ ping: 1, $db: 'admin' }));
      assert.equal(ping.body?.ok, 1);
    } finally {
      c.destroy();
    }
    await othersStillServed();
  });

  test('legacy OP_INSERT (2002) → clear error document', T, async () => {
    const c = await RawClient.connect(stack.proxy.port);
    try {
      const id = requestId();
      const ns = Buffer.from('faults_malformed.probe\0');
      const doc = Buffer.from(serialize({ _id: 'legacy' }));
      const payload = Buffer.concat([Buffer.alloc(4), ns, doc]);
      const body = await errorOrClose(c, Buffer.concat([header(16 + payload.length, id, 0, 2002), payload]), id);
      assert.ok(body !== null);
      assert.match(String(body.errmsg), /OP_INSERT|not supported/i);
    } finally {
      c.destroy();
    }
    assert.equal(await coll.countDocuments({ _id: 'legacy' as never }), 0);
    await othersStillServed();
  });

  // Legacy opcodes of pre-3.6 drivers (OP_QUERY aside): each answered with a clear error naming
  // the opcode, counted as a decode error, nothing logged at error level; the connection is served on.
  const legacy: Array<[string, number, Buffer]> = [
    ['OP_UPDATE', 2001, Buffer.concat([Buffer.alloc(4), Buffer.from('faults_malformed.probe\0'), Buffer.alloc(4),
      Buffer.from(serialize({ _id: 1 })), Buffer.from(serialize({ $set: { v: 'legacy' } }))])],
    ['OP_GET_MORE', 2005, Buffer.concat([Buffer.alloc(4), Buffer.from('faults_malformed.probe\0'), Buffer.alloc(4), Buffer.alloc(8, 1)])],
    ['OP_DELETE', 2006, Buffer.concat([Buffer.alloc(4), Buffer.from('faults_malformed.probe\0'), Buffer.alloc(4), Buffer.from(serialize({}))])],
    ['OP_KILL_CURSORS', 2007, Buffer.concat([Buffer.alloc(4), Buffer.from([1, 0, 0, 0]), Buffer.alloc(8, 1)])],
  ];
  for (const [name, op, payload] of legacy) {
    test(`legacy ${name} (${op}) → error document naming it, counted, nothing at error level; the connection still works`, T, async () => {
      const ring = stack.proxy.logRing!;
      const linesBefore = ring.recent(1000).length;
      const decodeErrors = stack.proxy.server.stats.decodeErrors;
      const c = await RawClient.connect(stack.proxy.port);
      try {
        const id = requestId();
        const body = await errorOrClose(c, Buffer.concat([header(16 + payload.length, id, 0, op), payload]), id);
        assert.ok(body !== null, `${name} deserves an error document, not a close`);
        assert.match(String(body.errmsg), new RegExp(`${name} is not supported`));
        assert.equal(stack.proxy.server.stats.decodeErrors, decodeErrors + 1, 'counted as a decode error');
        assert.deepEqual(ring.recent(1000).slice(linesBefore), [], 'nothing logged at error level');
        const ping = await c.roundTrip(opMsg({ ping: 1, $db: 'admin' }));
        assert.equal(ping.body?.ok, 1);
      } finally {
        c.destroy();
      }
      await othersStillServed();
    });
  }

  test('unknown OP_MSG section kind → error (or close)', T, async () => {
    const c = await RawClient.connect(stack.proxy.port);
    try {
      const good = opMsg({ ping: 1, $db: 'admin' });
      // Append a section of kind 7 after the body.
      const extra = Buffer.concat([Buffer.from([7]), Buffer.from(serialize({ x: 1 }))]);
      const frame = Buffer.concat([good, extra]);
      frame.writeInt32LE(frame.length, 0);
      const id = frame.readInt32LE(4);
      const body = await errorOrClose(c, frame, id);
      if (body !== null) assert.match(String(body.errmsg), /section kind/i);
    } finally {
      c.destroy();
    }
    await othersStillServed();
  });

  test('document sequences: several in one message served; a lying or zero size, a duplicate identifier → error, the connection stays usable', T, async () => {
    const c = await RawClient.connect(stack.proxy.port);
    /** An insert whose kind-1 sections are given as raw bytes. */
    const insertWith = (sections: Buffer[]): Buffer => {
      const body = opMsg({ insert: 'seqs', ordered: true, $db: 'faults_malformed' });
      const frame = Buffer.concat([body, ...sections]);
      frame.writeInt32LE(frame.length, 0);
      return frame;
    };
    const seq = (id: string, docs: Document[], lie = 0): Buffer => {
      const idBytes = Buffer.from(`${id}\0`);
      const docBytes = Buffer.concat(docs.map((d) => Buffer.from(serialize(d))));
      const size = Buffer.alloc(4);
      size.writeInt32LE(lie === -Infinity ? 0 : 4 + idBytes.length + docBytes.length + lie);
      return Buffer.concat([Buffer.from([1]), size, idBytes, docBytes]);
    };
    try {
      const two = await c.roundTrip(insertWith([seq('documents', [{ _id: 's1' }, { _id: 's2' }]), seq('unused', [{ x: 1 }])]));
      assert.equal(two.body?.ok, 1, JSON.stringify(two.body));
      assert.equal(two.body?.n, 2);
      const cases: Array<[string, Buffer, RegExp]> = [
        ['size too long', insertWith([seq('documents', [{ _id: 'l' }], 1)]), /document sequence size \d+ exceeds the message/],
        ['size too short', insertWith([seq('documents', [{ _id: 't1' }, { _id: 't2' }], -5)]), /exceeds its container|section kind|BSON/],
        ['size zero', insertWith([seq('documents', [{ _id: 'z' }], -Infinity)]), /document sequence size 0 is below 5/],
        ['duplicate identifier', insertWith([seq('documents', [{ _id: 'd1' }]), seq('documents', [{ _id: 'd2' }])]),
          /duplicate document sequence identifier "documents"/],
      ];
      for (const [name, frame, message] of cases) {
        const id = frame.readInt32LE(4);
        const body = await errorOrClose(c, frame, id);
        assert.ok(body !== null, `${name}: the frame was read whole, so an error document, not a close`);
        assert.match(String(body.errmsg), message, name);
      }
      const ping = await c.roundTrip(opMsg({ ping: 1, $db: 'admin' }));
      assert.equal(ping.body?.ok, 1);
    } finally {
      c.destroy();
    }
    // Only the two documents of the well-formed message reached the collection.
    assert.deepEqual((await driver.db('faults_malformed').collection('seqs').find({}, { sort: { _id: 1 } }).toArray()).map((d) => d._id), ['s1', 's2']);
    await othersStillServed();
  });

  test('truncated BSON in the body → error (or close)', T, async () => {
    const c = await RawClient.connect(stack.proxy.port);
    try {
      const doc = Buffer.from(serialize({ find: 'probe', filter: {}, $db: 'faults_malformed' }));
      const cut = doc.subarray(0, doc.length - 9); // declared length says more than there is
      const frame = opMsg(cut);
      const id = frame.readInt32LE(4);
      const body = await errorOrClose(c, frame, id);
      if (body !== null) assert.ok([17, 22].includes(body.code as number), `code ${body.code}`);
    } finally {
      c.destroy();
    }
    await othersStillServed();
  });

  test('BSON whose inner element overruns its document → error (or close)', T, async () => {
    const c = await RawClient.connect(stack.proxy.port);
    try {
      const doc = Buffer.from(serialize({ find: 'probe', $db: 'faults_malformed', s: 'abcdef' }));
      // Corrupt the string length of "s" so it points past the end of the document.
      const at = doc.indexOf(Buffer.from([0x02, 0x73, 0x00])) + 3; // type 2, key "s"
      assert.ok(at > 3);
      doc.writeInt32LE(1000, at);
      const frame = opMsg(doc);
      const body = await errorOrClose(c, frame, frame.readInt32LE(4));
      if (body !== null) assert.ok([17, 22].includes(body.code as number), `code ${body.code}`);
    } finally {
      c.destroy();
    }
    await othersStillServed();
  });

  test('checksumPresent with a wrong CRC-32C → error; a correct CRC is accepted', T, async () => {
    const c = await RawClient.connect(stack.proxy.port);
    try {
      const bad = opMsg({ find: 'probe', filter: {}, $db: 'faults_malformed' }, { badChecksum: true });
      const body = await errorOrClose(c, bad, bad.readInt32LE(4));
      assert.ok(body !== null, 'a bad checksum on a well-framed message deserves an error document');
      assert.match(String(body.errmsg), /checksum/i);
      if (!c.closed) {
        const good = await c.roundTrip(opMsg({ find: 'probe', filter: { _id: 1 }, $db: 'faults_malformed' }, { checksum: true }));
        assert.equal(good.body?.ok, 1);
        assert.equal(good.body?.cursor.firstBatch[0].v, 'one');
      }
    } finally {
      c.destroy();
    }
    const c2 = await RawClient.connect(stack.proxy.port);
    try {
      const good = await c2.roundTrip(opMsg({ find: 'probe', filter: { _id: 1 }, $db: 'faults_malformed' }, { checksum: true }));
      assert.equal(good.body?.ok, 1, JSON.stringify(good.body));
      assert.equal(good.body?.cursor.firstBatch[0].v, 'one');
    } finally {
      c2.destroy();
    }
    await othersStillServed();
  });

  test('unknown required flag bit → error', T, async () => {
    const c = await RawClient.connect(stack.proxy.port);
    try {
      const frame = opMsg({ ping: 1, $db: 'admin' }, { flags: 1 << 4 });
      const body = await errorOrClose(c, frame, frame.readInt32LE(4));
      assert.ok(body !== null);
      assert.match(String(body.errmsg), /flag/i);
      // An unknown *optional* bit (high 16) is ignored.
      if (!c.closed) {
        const ok = await c.roundTrip(opMsg({ ping: 1, $db: 'admin' }, { flags: 1 << 20 }));
        assert.equal(ok.body?.ok, 1);
      }
    } finally {
      c.destroy();
    }
    await othersStillServed();
  });

  test('legacy OP_QUERY that is not a command → OP_REPLY with QueryFailure', T, async () => {
    const c = await RawClient.connect(stack.proxy.port);
    try {
      const q = opQuery('faults_malformed.probe', { _id: 1 });
      c.write(q);
      const f = await c.next(5000);
      assert.ok(f !== null, 'expected an OP_REPLY, got a close');
      assert.equal(f.opCode, OP_REPLY);
      assert.equal(f.responseTo, q.readInt32LE(4));
      const r = decodeReply(f);
      assert.ok((r.flags & 2) !== 0, `QueryFailure flag not set: ${r.flags}`);
      assert.equal(r.docs?.length, 1);
      const doc = r.docs![0];
      assert.ok(typeof doc.$err === 'string' || typeof doc.errmsg === 'string', JSON.stringify(doc));
      // The legacy handshake on the same connection still works.
      c.write(opQuery('admin.$cmd', { isMaster: 1, helloOk: true }, { numberToReturn: -1 }));
      const h = await c.next(5000);
      assert.ok(h !== null);
      assert.equal(h.opCode, OP_REPLY);
      const hr = decodeReply(h);
      assert.equal(hr.docs?.[0].msg, 'isdbgrid');
      assert.equal(hr.flags & 2, 0);
    } finally {
      c.destroy();
    }
    await othersStillServed();
  });

  test('moreToCome insert (flag 2) then a find on the same connection sees the document', T, async () => {
    const c = await RawClient.connect(stack.proxy.port);
    try {
      for (let i = 0; i < 20; i++) {
        c.write(opMsg({ insert: 'mtc', $db: 'faults_malformed', writeConcern: { w: 0 } }, {
          flags: 2, sequences: [{ id: 'documents', docs: [{ _id: i, i }] }],
        }));
      }
      // No reply may come for those; the find is written right behind them.
      const r = await c.roundTrip(opMsg({ find: 'mtc', filter: {}, sort: { _id: 1 }, $db: 'faults_malformed' }));
      assert.equal(r.frame.responseTo !== 0, true);
      assert.equal(r.body?.ok, 1);
      assert.deepEqual(r.body?.cursor.firstBatch.map((d: Document) => d._id), Array.from({ length: 20 }, (_, i) => i));
    } finally {
      c.destroy();
    }
    await othersStillServed();
  });

  test('frames split byte by byte and frames coalesced in one write are both handled', T, async () => {
    const c = await RawClient.connect(stack.proxy.port);
    try {
      const a = opMsg({ ping: 1, $db: 'admin' });
      for (let i = 0; i < a.length; i++) {
        c.write(a.subarray(i, i + 1));
        if (i % 7 === 0) await new Promise((r) => setImmediate(r));
      }
      const r1 = await c.next(5000);
      assert.ok(r1 !== null);
      assert.equal(r1.responseTo, a.readInt32LE(4));
      const frames = [1, 2, 3].map((k) => opMsg({ find: 'probe', filter: { _id: k }, $db: 'faults_malformed' }));
      c.write(Buffer.concat(frames));
      for (const f of frames) {
        const r = await c.next(5000);
        assert.ok(r !== null);
        assert.equal(r.responseTo, f.readInt32LE(4), 'replies in request order');
        assert.equal(decodeReply(r).body?.ok, 1);
      }
    } finally {
      c.destroy();
    }
    await othersStillServed();
  });

  test('connections closed for a framing error are forgotten by the server (no leak)', T, async () => {
    const stats = stack.proxy.server.stats;
    await new Promise((r) => setTimeout(r, 200));
    const baseline = stats.connectionsActive;
    for (let i = 0; i < 5; i++) {
      const c = await RawClient.connect(stack.proxy.port);
      c.write(header(10, requestId(), 0, OP_MSG));
      await c.next(5000);
      await Promise.race([c.closedPromise, new Promise((_, rej) => setTimeout(() => rej(new Error('not closed')), 5000))]);
    }
    const deadline = Date.now() + 3000;
    while (stats.connectionsActive > baseline && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    assert.equal(stats.connectionsActive, baseline, 'connectionsActive after 5 connections closed for bad lengths');
    await othersStillServed();
  });

  test('the proxy stayed up throughout', T, async () => {
    assert.ok(checks >= 10, `bystander checks ran: ${checks}`);
    assert.ok(stack.proxy.server.stats.decodeErrors > 0);
  });
});
