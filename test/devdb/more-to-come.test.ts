// devdb's wire server and OP_MSG moreToCome: such a request never gets a reply frame — not even an
// error. One it cannot process makes devdb close the connection (as mongod does); a valid one is
// executed silently and the connection stays in step for the next request.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { serialize } from 'bson';
import { DevDbServer } from '../../runtime/devdb/server.ts';
import { OP_MSG, RawClient, decodeReply, header, opMsg, requestId } from '../helpers/wire.ts';

const MORE_TO_COME = 1 << 1;

/** Waits for the next frame; null means devdb closed the connection without sending one. */
async function nextOrClose(c: RawClient): Promise<ReturnType<typeof decodeReply> | null> {
  const f = await c.next(3000);
  return f === null ? null : decodeReply(f);
}

describe('devdb server: OP_MSG moreToCome', () => {
  let server: DevDbServer;
  let port: number;

  before(async () => {
    server = new DevDbServer();
    ({ port } = await server.listen());
  });
  after(async () => {
    await server?.close();
  });

  it('a moreToCome message whose body is not valid BSON gets no reply and the connection is closed', async () => {
    const c = await RawClient.connect(port);
    try {
      const body = Buffer.from(serialize({ insert: 'x', $db: 'mtc' }));
      body[4] = 0x7e; // first element's type byte: not a BSON type (deserialize fails, framing is intact)
      c.write(opMsg(body, { flags: MORE_TO_COME }));
      assert.equal(await nextOrClose(c), null, 'devdb sent a frame in answer to a moreToCome request');
      assert.equal(c.closed, true);
    } finally {
      c.destroy();
    }
  });

  it('a moreToCome message that does not parse as OP_MSG gets no reply and the connection is closed', async () => {
    const c = await RawClient.connect(port);
    try {
      const flags = Buffer.alloc(4);
      flags.writeUInt32LE(MORE_TO_COME, 0);
      const body = Buffer.from(serialize({ ping: 1, $db: 'admin' }));
      const payload = Buffer.concat([flags, Buffer.from([0]), body, Buffer.from([9, 1, 2, 3])]); // section kind 9
      c.write(Buffer.concat([header(16 + payload.length, requestId(), 0, OP_MSG), payload]));
      assert.equal(await nextOrClose(c), null, 'devdb sent a frame in answer to a moreToCome request');
    } finally {
      c.destroy();
    }
  });

  it('the same corrupt body without moreToCome still gets an error reply (connection kept)', async () => {
    const c = await RawClient.connect(port);
    try {
      const body = Buffer.from(serialize({ insert: 'x', $db: 'mtc' }));
      body[4] = 0x7e;
      const r = await c.roundTrip(opMsg(body));
      assert.equal(r.body!.ok, 0);
      assert.equal((await c.roundTrip(opMsg({ ping: 1, $db: 'admin' }))).body!.ok, 1);
    } finally {
      c.destroy();
    }
  });

  it('a valid moreToCome insert gets no reply, is applied, and the next reply answers the next request', async () => {
    const c = await RawClient.connect(port);
    try {
      c.write(opMsg({ insert: 'items', documents: [{ _id: 1, v: 'quiet' }], $db: 'mtc' }, { flags: MORE_TO_COME }));
      // a failing moreToCome write (duplicate key) gets no reply either, and keeps the connection
      c.write(opMsg({ insert: 'items', documents: [{ _id: 1 }], $db: 'mtc' }, { flags: MORE_TO_COME }));
      const findId = requestId();
      const r = await c.roundTrip(opMsg({ find: 'items', filter: {}, $db: 'mtc' }, { reqId: findId }));
      assert.equal(r.frame.responseTo, findId, 'first frame back was not the answer to find');
      assert.equal(r.body!.ok, 1);
      assert.deepEqual(r.body!.cursor.firstBatch, [{ _id: 1, v: 'quiet' }]);
      assert.equal(c.closed, false);
    } finally {
      c.destroy();
    }
  });
});
