// devdb's wire server refuses an OP_MSG command that does not name its database as mongod does:
// `$db` absent (40571), not a string (TypeMismatch) or empty (InvalidNamespace). It used to run a
// command without `$db` on admin. The connection stays in step: the next command is answered.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { DevDbServer } from '../../runtime/devdb/server.ts';
import { RawClient, decodeReply, opMsg } from '../helpers/wire.ts';

let server: DevDbServer;
let port: number;

before(async () => {
  server = new DevDbServer();
  ({ port } = await server.listen());
});
after(async () => {
  await server?.close();
});

async function answer(c: RawClient, body: Record<string, unknown>) {
  c.write(opMsg(body));
  const f = await c.next(3000);
  assert.ok(f !== null, 'devdb closed the connection');
  return decodeReply(f).body!;
}

test('an OP_MSG command without $db, with a $db that is not a string, or an empty one is refused as mongod refuses it', async () => {
  const c = await RawClient.connect(port);
  try {
    // Something to find on admin: a command without $db used to run there and return it.
    assert.equal((await answer(c, { insert: 'secrets', documents: [{ _id: 1 }], $db: 'admin' })).ok, 1);
    for (const [body, code, codeName, errmsg] of [
      [{ find: 'secrets', filter: {} }, 40571, 'Location40571', 'OP_MSG requests require a $db argument'],
      [{ find: 'secrets', filter: {}, $db: 7 }, 14, 'TypeMismatch', /\$db/],
      [{ find: 'secrets', filter: {}, $db: '' }, 73, 'InvalidNamespace', /Invalid database name/],
    ] as const) {
      const r = await answer(c, body);
      assert.equal(r.ok, 0, JSON.stringify(r));
      assert.equal(r.code, code);
      assert.equal(r.codeName, codeName);
      if (typeof errmsg === 'string') assert.equal(r.errmsg, errmsg);
      else assert.match(r.errmsg as string, errmsg);
      assert.equal(r.cursor, undefined, 'no documents');
    }
    const ok = await answer(c, { find: 'secrets', filter: {}, $db: 'admin' });
    assert.equal(ok.ok, 1);
    assert.deepEqual((ok.cursor as { firstBatch: unknown[] }).firstBatch, [{ _id: 1 }]);
  } finally {
    c.destroy();
  }
});
