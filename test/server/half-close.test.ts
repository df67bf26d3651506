// A client that pipelines requests and then half-closes its side (FIN after its last request) is
// answered every request it sent, in order, and then the connection ends — as mongod does: it reads
// and answers one message at a time until the end of the stream. Before, the listener did not keep
// half-open sockets, so Node ended the writable side at the client's FIN and every reply still owed
// was lost (0 of 20 in the first case below). A frame cut short by the FIN is dropped; an idle
// half-closed connection ends at once; the server forgets every such connection; a bystander is
// served throughout.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startStack, type Stack } from '../helpers/stack.ts';
import { RawClient, decodeReply, opMsg, opQuery, type Frame } from '../helpers/wire.ts';

const T = { timeout: 30_000 };

/** Every frame until the proxy closes the connection (fails if it does not within `ms`). */
async function framesUntilClose(c: RawClient, ms = 5000): Promise<Frame[]> {
  const out: Frame[] = [];
  const deadline = Date.now() + ms;
  for (;;) {
    const f = await c.next(Math.max(1, deadline - Date.now()));
    if (f === null) return out;
    out.push(f);
  }
}

describe('half-closed clients', () => {
  let stack: Stack;
  let bystander: RawClient;

  before(async () => {
    stack = await startStack();
    bystander = await RawClient.connect(stack.proxy.port);
    await bystander.hello();
  });

  after(async () => {
    bystander?.destroy();
    await stack?.close();
  });

  async function bystanderServed(): Promise<void> {
    const r = await bystander.roundTrip(opMsg({ ping: 1, $db: 'admin' }));
    assert.equal(r.body?.ok, 1, 'bystander ping');
  }

  test('twenty pipelined requests then FIN: twenty replies in order, then the connection ends', T, async () => {
    const c = await RawClient.connect(stack.proxy.port);
    const ids: number[] = [];
    const frames: Buffer[] = [];
    for (let i = 0; i < 20; i++) {
      ids.push(7000 + i);
      frames.push(i % 2 === 0
        ? opMsg({ insert: 'half', documents: [{ _id: i }], $db: 'half_close' }, { reqId: 7000 + i })
        : opMsg({ find: 'half', filter: { _id: i - 1 }, $db: 'half_close' }, { reqId: 7000 + i }));
    }
    c.socket.end(Buffer.concat(frames));
    const got = await framesUntilClose(c);
    assert.deepEqual(got.map((f) => f.responseTo), ids, 'every request answered, in order');
    for (let i = 0; i < got.length; i++) {
      const body = decodeReply(got[i]).body!;
      assert.equal(body.ok, 1, `reply ${i}`);
      if (i % 2 === 1) assert.deepEqual(body.cursor.firstBatch, [{ _id: i - 1 }], `find ${i} sees the insert before it`);
    }
    assert.ok(c.closed, 'the proxy ended the connection');
    await bystanderServed();
  });

  test('a legacy OP_QUERY handshake then FIN is answered (OP_REPLY), then the connection ends', T, async () => {
    const c = await RawClient.connect(stack.proxy.port);
    c.socket.end(opQuery('admin.$cmd', { isMaster: 1, helloOk: true }, { reqId: 7100 }));
    const got = await framesUntilClose(c);
    assert.equal(got.length, 1);
    assert.equal(got[0].responseTo, 7100);
    assert.equal(decodeReply(got[0]).docs?.[0].ok, 1);
    await bystanderServed();
  });

  test('FIN in the middle of a frame: the whole frames before it are answered, the cut one is dropped', T, async () => {
    const c = await RawClient.connect(stack.proxy.port);
    const cut = opMsg({ ping: 1, $db: 'admin' }, { reqId: 7203 });
    c.socket.end(Buffer.concat([opMsg({ ping: 1, $db: 'admin' }, { reqId: 7201 }), opMsg({ ping: 1, $db: 'admin' }, { reqId: 7202 }),
      cut.subarray(0, cut.length - 3)]));
    const got = await framesUntilClose(c);
    assert.deepEqual(got.map((f) => f.responseTo), [7201, 7202]);
    await bystanderServed();
  });

  test('an idle connection that half-closes ends at once, and the server forgets it', T, async () => {
    const stats = stack.proxy.server.stats;
    const before = stats.connectionsActive;
    const c = await RawClient.connect(stack.proxy.port);
    await c.hello();
    c.socket.end();
    assert.deepEqual(await framesUntilClose(c, 2000), []);
    const deadline = Date.now() + 5000;
    while (stats.connectionsActive > before && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    assert.equal(stats.connectionsActive, before, 'connection released');
    await bystanderServed();
  });
});
