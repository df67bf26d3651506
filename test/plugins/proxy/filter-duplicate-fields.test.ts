// A command that names a field twice must not let a step judge one copy while the upstream acts on
// the other. The filter step's path lookup reads the first `filter`, devdb (and the BSON library)
// the last: a find whose first filter was harmless and whose second asked for what a deny rule
// forbids was answered with the forbidden documents. The proxy now refuses any repeated top-level
// name (and a document sequence named like a body field) with FailedToParse before a step or the
// upstream sees it, as mongod's parsers do; the connection stays usable and others are served.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { serialize } from 'bson';
import { startPipelineProxy } from './_proxy.ts';
import { RawClient, opMsg } from '../../helpers/wire.ts';

/** A document of the given one-key parts, in order, duplicates kept. */
function doc(...parts: Record<string, unknown>[]): Buffer {
  const els = parts.map((p) => { const b = Buffer.from(serialize(p)); return b.subarray(4, b.length - 1); });
  const h = Buffer.alloc(4);
  h.writeInt32LE(4 + els.reduce((a, e) => a + e.length, 0) + 1, 0);
  return Buffer.concat([h, ...els, Buffer.from([0])]);
}

test('filter: a repeated field cannot smuggle what a rule denies past the step', { timeout: 60_000 }, async () => {
  const p = await startPipelineProxy({
    id: 'px_filter_dup', request: ['filter'],
    steps: {
      filter: {
        config: {
          rules: [
            { name: 'no-evil-mail', action: 'deny', field: { path: 'filter.email', regex: '@evil\\.com$', flags: 'i' } },
            { name: 'locked', action: 'deny', dbs: ['locked'] },
          ],
          default: 'allow',
        },
      },
    },
  });
  const raw = await RawClient.connect(p.proxy.port);
  try {
    const client = await p.client();
    await client.db('app').collection('users').insertMany([{ _id: 1, email: 'a@ok.com' }, { _id: 2, email: 'x@evil.com' }] as never[]);
    await client.db('app').collection('many').insertOne({ _id: 1 } as never);
    const before = p.upstreamCommands.length;

    const dupFilter = await raw.roundTrip(opMsg(doc({ find: 'users' }, { filter: { email: 'a@ok.com' } }, { filter: { email: 'x@evil.com' } },
      { $db: 'app' })));
    assert.equal(dupFilter.body?.ok, 0, JSON.stringify(dupFilter.body));
    assert.equal(dupFilter.body?.code, 9);
    assert.equal(dupFilter.body?.codeName, 'FailedToParse');
    assert.match(dupFilter.body?.errmsg, /BSON field 'filter' is a duplicate field/);

    const dupDb = await raw.roundTrip(opMsg(doc({ find: 'users' }, { $db: 'locked' }, { $db: 'app' })));
    assert.equal(dupDb.body?.codeName, 'FailedToParse', JSON.stringify(dupDb.body));
    assert.match(dupDb.body?.errmsg, /'\$db' is a duplicate field/);

    const bodyAndSeq = await raw.roundTrip(opMsg(doc({ insert: 'users' }, { documents: [{ email: 'b@ok.com' }] }, { $db: 'app' }),
      { sequences: [{ id: 'documents', docs: [{ email: 'y@evil.com' }] }] }));
    assert.equal(bodyAndSeq.body?.codeName, 'FailedToParse', JSON.stringify(bodyAndSeq.body));
    assert.match(bodyAndSeq.body?.errmsg, /document sequence "documents" is also a field of the command body/);

    // Past the pairwise bound (more than 16 fields), the repeated name is found too.
    const extra = Array.from({ length: 30 }, (_, i) => ({ [`comment${i}`]: i }));
    const late = await raw.roundTrip(opMsg(doc({ find: 'users' }, { filter: { email: 'a@ok.com' } }, ...extra, { filter: { email: 'x@evil.com' } },
      { $db: 'app' })));
    assert.equal(late.body?.codeName, 'FailedToParse', JSON.stringify(late.body));

    assert.equal(p.upstreamCommands.length, before, 'no refused command reached the upstream');

    // The same connection is still served, and so is the driver; the rule still holds for one filter.
    const ok = await raw.roundTrip(opMsg({ find: 'users', filter: { email: 'a@ok.com' }, $db: 'app' }));
    assert.deepEqual(ok.body?.cursor.firstBatch, [{ _id: 1, email: 'a@ok.com' }]);
    const denied = await raw.roundTrip(opMsg({ find: 'users', filter: { email: 'x@evil.com' }, $db: 'app' }));
    assert.equal(denied.body?.code, 13);
    assert.deepEqual(await client.db('app').collection('users').find({ _id: 1 } as never).toArray(), [{ _id: 1, email: 'a@ok.com' }]);
    // A driver insert of several documents (an OP_MSG document sequence) is unaffected.
    await client.db('app').collection('users').insertMany([{ _id: 3 }, { _id: 4 }] as never[]);
    assert.equal(await client.db('app').collection('users').countDocuments(), 4);
  } finally {
    raw.destroy();
    await p.close();
  }
});
