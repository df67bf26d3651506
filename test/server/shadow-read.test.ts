// What a shadow canary's own read sends (runtime/server/shadow-read.ts): the candidate's command
// without the client's lsid, a find with singleBatch: true (replacing the client's), everything
// else as it was and in order.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { deserialize, serialize, UUID } from 'bson';
import { shadowReadCommand } from '../../runtime/server/shadow-read.ts';

test('a find loses its lsid and gets singleBatch: true; a count keeps its fields but the lsid', () => {
  const lsid = { id: new UUID() };
  const find = deserialize(shadowReadCommand(Buffer.from(serialize({ find: 'c', filter: { a: 1 }, lsid, singleBatch: false, limit: 1, $db: 'app' }))));
  assert.deepEqual(Object.keys(find), ['find', 'filter', 'limit', '$db', 'singleBatch']);
  assert.equal(find.singleBatch, true);
  assert.deepEqual(find.filter, { a: 1 });
  const count = deserialize(shadowReadCommand(Buffer.from(serialize({ count: 'c', query: {}, lsid, $db: 'app' }))));
  assert.deepEqual(count, { count: 'c', query: {}, $db: 'app' });
});
