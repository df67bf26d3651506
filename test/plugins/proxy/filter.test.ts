// filter through the proxy with the real driver: deny/allow rules, field regex on an insert
// document (sent by the driver as an OP_MSG document sequence), other collections unaffected.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MongoServerError } from 'mongodb';
import { startPipelineProxy, type Doc } from './_proxy.ts';

const isUnauthorized = (re: RegExp) => (e: unknown) => {
  assert.ok(e instanceof MongoServerError, String(e));
  assert.equal(e.code, 13);
  assert.equal(e.codeName, 'Unauthorized');
  assert.match(e.errmsg ?? e.message, re);
  return true;
};

test('filter: deny rule, allow rule, field regex on inserted documents, default', { timeout: 60_000 }, async () => {
  const p = await startPipelineProxy({
    id: 'px_filter', request: ['filter'],
    steps: {
      filter: {
        config: {
          rules: [
            { name: 'no-secrets', action: 'deny', collections: ['secrets'] },
            { name: 'no-admin-role', action: 'deny', ops: ['insert'], field: { path: 'documents.*.role', regex: '^admin$', flags: 'i' } },
            { name: 'no-evil-mail', action: 'deny', field: { path: 'filter.email', regex: '@evil\\.com$', flags: 'i' } },
            { name: 'locked-reads', action: 'allow', dbs: ['locked'], ops: ['find'] },
            { name: 'locked-rest', action: 'deny', dbs: ['locked'] },
          ],
          default: 'allow',
        },
      },
    },
  });
  try {
    const client = await p.client();
    const app = client.db('app');
    // deny rule on a collection: every op
    await assert.rejects(app.collection<Doc>('secrets').find({}).toArray(), isUnauthorized(/denied by filter rule "no-secrets" \(find on app\.secrets\)/));
    await assert.rejects(app.collection<Doc>('secrets').insertOne({ a: 1 }), isUnauthorized(/denied by filter rule "no-secrets" \(insert on app\.secrets\)/));
    // other collections unaffected
    await app.collection<Doc>('users').insertOne({ _id: 1, role: 'user', email: 'a@ok.com' } as never);
    assert.equal((await app.collection<Doc>('users').find({}).toArray()).length, 1);
    // field regex on a document of the insert's document sequence (second document)
    await assert.rejects(
      app.collection<Doc>('users').insertMany([{ _id: 2, role: 'user' }, { _id: 3, role: 'ADMIN' }] as never[]),
      isUnauthorized(/denied by filter rule "no-admin-role" \(insert on app\.users\)/),
    );
    // nothing of the rejected insert reached the upstream
    assert.equal(p.upstreamCommands.filter((c) => c.insert === 'users').length, 1);
    assert.deepEqual((await app.collection<Doc>('users').find({}).toArray()).map((d) => d._id), [1]);
    // field regex on a filter
    await assert.rejects(app.collection<Doc>('users').find({ email: 'x@EVIL.com' }).toArray(), isUnauthorized(/no-evil-mail/));
    assert.deepEqual(await app.collection<Doc>('users').find({ email: 'a@ok.com' }).toArray(), [{ _id: 1, role: 'user', email: 'a@ok.com' }]);
    // allow rule wins over a later deny rule for the same db; other ops hit the deny rule
    assert.deepEqual(await client.db('locked').collection<Doc>('c').find({}).toArray(), []);
    await assert.rejects(client.db('locked').collection<Doc>('c').insertOne({ a: 1 }),
      isUnauthorized(/denied by filter rule "locked-rest" \(insert on locked\.c\)/));
  } finally {
    await p.close();
  }
});

test('filter: default deny names the op and namespace', { timeout: 60_000 }, async () => {
  const p = await startPipelineProxy({
    id: 'px_filter_default', request: ['filter'],
    steps: { filter: { config: { rules: [{ name: 'reads', action: 'allow', ops: ['find'] }], default: 'deny' } } },
  });
  try {
    const client = await p.client();
    assert.deepEqual(await client.db('app').collection<Doc>('c').find({}).toArray(), []);
    await assert.rejects(client.db('app').collection<Doc>('c').insertOne({ a: 1 }),
      isUnauthorized(/denied by filter default policy: no rule allows insert on app\.c/));
  } finally {
    await p.close();
  }
});

test('filter: a rule on a command holds for the other spelling mongod accepts (findAndModify / findandmodify)', { timeout: 60_000 }, async () => {
  const p = await startPipelineProxy({
    id: 'px_filter_alias', request: ['filter'],
    steps: { filter: { config: { rules: [{ name: 'no-fam', action: 'deny', ops: ['findAndModify'] }], default: 'allow' } } },
  });
  try {
    const client = await p.client();
    const db = client.db('app');
    await db.collection<Doc>('c').insertOne({ _id: 1, n: 0 } as never);
    for (const name of ['findAndModify', 'findandmodify']) {
      await assert.rejects(db.command({ [name]: 'c', query: { _id: 1 }, update: { $inc: { n: 1 } } }), isUnauthorized(/denied by filter rule "no-fam"/));
    }
    assert.deepEqual(await db.collection<Doc>('c').findOne({ _id: 1 }), { _id: 1, n: 0 }, 'neither spelling reached the upstream');
  } finally {
    await p.close();
  }
});
