// Pipeline match globs are tested against what clients send (a collection name, a database, an
// appName), so matching must not backtrack: with a RegExp, `collection: "*_*_archive"` took
// seconds on one command naming a long collection of `_` (quadratic in the name), during which the
// proxy served no one. Through a real proxy with the official driver.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MongoClient } from 'mongodb';
import { withProxy } from '../helpers/proxy.ts';
import { compileGlob, globRegExp } from '../../runtime/config/index.ts';

test('a command naming a 100,000-character collection against a two-star collection glob is routed at once; another client is not held', async (t) => {
  const { uri } = await withProxy(t, {
    pipelines: [
      { id: 'archive', match: { collection: '*_*_archive' }, request: [], response: [] },
      { id: 'default', request: [], response: [] },
    ],
  });
  const hostile = new MongoClient(uri, { serverSelectionTimeoutMS: 5000 });
  const other = new MongoClient(uri, { serverSelectionTimeoutMS: 5000 });
  t.after(async () => { await hostile.close(); await other.close(); });
  await hostile.db('app').command({ ping: 1 });
  await other.db('app').command({ ping: 1 });
  const t0 = performance.now();
  const hostileCall = hostile.db('app').command({ find: '_'.repeat(100_000), filter: {} }).catch((err: Error) => err);
  // The other client's request is queued behind the hostile one on the proxy's event loop.
  await new Promise((r) => setImmediate(r));
  await other.db('app').collection('x_y_archive').findOne({});
  const otherMs = performance.now() - t0;
  await hostileCall;
  const ms = performance.now() - t0;
  assert.ok(ms < 3000, `the long collection name took ${Math.round(ms)} ms`);
  assert.ok(otherMs < 3000, `the other client waited ${Math.round(otherMs)} ms`);
});

test('the glob matcher agrees with the glob\'s RegExp (`*` any run, `?` one character, the rest literal)', () => {
  const alphabet = ['a', 'b', '_', '*', '?', '.', 'é'];
  let seed = 7;
  const rand = (n: number) => { seed = (seed * 1103515245 + 12345) % 2 ** 31; return seed % n; };
  const word = (max: number) => Array.from({ length: rand(max) }, () => alphabet[rand(alphabet.length)]).join('');
  for (let k = 0; k < 20_000; k++) {
    const p = word(7);
    const s = word(9).replaceAll('*', 'a').replaceAll('?', 'b');
    assert.equal(compileGlob(p)(s), globRegExp(p).test(s), `${JSON.stringify(p)} on ${JSON.stringify(s)}`);
  }
  assert.ok(compileGlob('*-*-*-*-*x')('-'.repeat(128) + 'x'));
  assert.ok(!compileGlob('*-*-*-*-*x')('-'.repeat(128)));
});
