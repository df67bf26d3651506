// transform through the proxy with the real driver: request edits (rename/set on inserted
// documents, set on the command) visible on devdb and in results; response redact/unset visible
// in find results, in firstBatch and in getMore batches.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MongoClient } from 'mongodb';
import { startPipelineProxy, type Doc } from './_proxy.ts';

test('transform: request rename/set and response redact/unset through find, getMore and findAndModify', { timeout: 60_000 }, async () => {
  const p = await startPipelineProxy({
    id: 'px_transform', request: ['transform'], response: ['transform'],
    steps: {
      transform: {
        config: {
          request: [
            { op: 'rename', path: 'documents.*.nm', to: 'name', ops: ['insert'] },
            { op: 'set', path: 'documents.*.via', value: 'proxy', ops: ['insert'] },
            { op: 'set', path: 'comment', value: 'via-proxy', ops: ['find'] },
          ],
          response: [
            { op: 'redact', path: 'ssn', collections: ['users'] },
            { op: 'redact', path: 'card.number', replacement: 'XXXX', collections: ['users'] },
            { op: 'unset', path: 'internal' },
          ],
        },
      },
    },
  });
  const direct = new MongoClient(p.devdbUri, { directConnection: true });
  try {
    await direct.connect();
    const client = await p.client();
    const users = client.db('app').collection<Doc>('users');
    const docs = Array.from({ length: 7 }, (_, i) => ({ _id: i, nm: `u${i}`, ssn: `00${i}`, card: { number: `41${i}`, exp: '1/30' }, internal: true }));
    await users.insertMany(docs as never[]);
    // request edits reached devdb (documents came as a document sequence from the driver)
    const stored = await direct.db('app').collection<Doc>('users').find({}).sort({ _id: 1 }).toArray();
    assert.equal(stored.length, 7);
    for (const [i, d] of stored.entries()) {
      assert.equal(d.name, `u${i}`, `renamed: ${JSON.stringify(d)}`);
      assert.ok(!('nm' in d));
      assert.equal(d.via, 'proxy');
      assert.equal(d.ssn, `00${i}`, 'stored unredacted');
    }
    // request set on find's command body
    await users.find({}).toArray();
    const f = p.upstreamCommands.filter((c) => c.find === 'users').at(-1)!;
    assert.equal(f.comment, 'via-proxy');
    // response redaction in firstBatch and every getMore batch
    const got = await users.find({}, { batchSize: 2 }).toArray();
    assert.equal(got.length, 7);
    assert.ok(p.upstreamCommands.filter((c) => c.getMore !== undefined).length >= 3);
    for (const [i, d] of got.entries()) {
      assert.deepEqual(d, { _id: i, name: `u${i}`, ssn: '***', card: { number: 'XXXX', exp: '1/30' }, via: 'proxy' });
    }
    // aggregate cursors too
    const agg = await users.aggregate([{ $sort: { _id: -1 } }], { cursor: { batchSize: 3 } }).toArray();
    assert.ok(agg.every((d) => d.ssn === '***' && !('internal' in d)));
    // findAndModify's value
    const fam = await users.findOneAndUpdate({ _id: 0 }, { $set: { x: 1 } }, { returnDocument: 'after' });
    assert.equal(fam?.ssn, '***');
    assert.ok(fam !== null && !('internal' in fam));
    // collections: [users] — another collection keeps ssn, but unset (no collection list) applies
    const other = client.db('app').collection<Doc>('other');
    await direct.db('app').collection<Doc>('other').insertOne({ _id: 1, ssn: 'visible', internal: 1 });
    assert.deepEqual(await other.find({}).toArray(), [{ _id: 1, ssn: 'visible' }]);
  } finally {
    await direct.close();
    await p.close();
  }
});
