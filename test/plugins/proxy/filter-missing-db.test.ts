// A command without `$db` must not pass a rule on `dbs`: the filter step judged it by an empty
// database name while devdb ran it on admin, so `{ listCollections: 1 }` with no `$db` was answered
// past a deny rule on admin. The proxy now refuses an OP_MSG command whose `$db` is absent, not a
// string, or empty (InvalidNamespace, 73; mongod refuses each too) before any step or the upstream
// sees it. The handshake (hello, authentication) is not affected, legacy OP_QUERY takes its
// database from the namespace, and the connection stays usable.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startPipelineProxy } from './_proxy.ts';
import { RawClient, opMsg, opQuery } from '../../helpers/wire.ts';

test('filter: leaving $db out does not get past a rule on dbs', { timeout: 60_000 }, async () => {
  const p = await startPipelineProxy({
    id: 'px_filter_nodb', request: ['filter'],
    steps: { filter: { config: { rules: [{ name: 'no-admin', action: 'deny', dbs: ['admin'], ops: ['listCollections', 'insert'] }], default: 'allow' } } },
  });
  const raw = await RawClient.connect(p.proxy.port);
  try {
    const hello = await raw.roundTrip(opMsg({ hello: 1 }));
    assert.equal(hello.body?.ok, 1, 'the handshake needs no $db');
    const before = p.upstreamCommands.length;
    const denied = await raw.roundTrip(opMsg({ listCollections: 1, $db: 'admin' }));
    assert.equal(denied.body?.code, 13, JSON.stringify(denied.body));
    for (const [body, re] of [
      [{ listCollections: 1 }, /OP_MSG requests require a \$db argument/],
      [{ insert: 'x', documents: [{ a: 1 }] }, /OP_MSG requests require a \$db argument/],
      [{ listCollections: 1, $db: 5 }, /\$db must be a non-empty string/],
      [{ listCollections: 1, $db: '' }, /\$db must be a non-empty string/],
    ] as const) {
      const r = await raw.roundTrip(opMsg(body));
      assert.equal(r.body?.ok, 0, `${JSON.stringify(body)}: ${JSON.stringify(r.body)}`);
      assert.equal(r.body?.code, 73);
      assert.equal(r.body?.codeName, 'InvalidNamespace');
      assert.match(r.body?.errmsg, re);
    }
    assert.equal(p.upstreamCommands.length, before, 'nothing reached the upstream');
    // A legacy command takes its database from the namespace (and is judged by it).
    const legacy = await raw.roundTrip(opQuery('admin.$cmd', { listCollections: 1 }));
    assert.equal(legacy.docs?.[0].code, 13, JSON.stringify(legacy.docs));
    // The connection and the driver are still served.
    assert.equal((await raw.roundTrip(opMsg({ ping: 1, $db: 'app' }))).body?.ok, 1);
    const client = await p.client();
    await client.db('app').collection('c').insertOne({ a: 1 });
    assert.equal(await client.db('app').collection('c').countDocuments(), 1);
  } finally {
    raw.destroy();
    await p.close();
  }
});
