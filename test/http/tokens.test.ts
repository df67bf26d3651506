// The live token holder (runtime/http/tokens.ts) and the base's check against it: tokens replaced
// while an app runs apply from the next request on (the old ones refused at once), and an empty
// holder refuses everything unless the app is open without a token (the profiling endpoint).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createApp, listenApp, Tokens } from '../../runtime/http/index.ts';

test('Tokens: exact token match against every held token, the Bearer scheme in any case; empty refuses unless open', () => {
  const t = new Tokens(['first-token-0123456789', 'second-token-0123456789']);
  assert.equal(t.allows('Bearer first-token-0123456789'), true);
  assert.equal(t.allows('Bearer second-token-0123456789'), true);
  assert.equal(t.allows('Bearer first-token-012345678'), false);
  assert.equal(t.allows('bearer first-token-0123456789'), true, 'the scheme name is case-insensitive');
  assert.equal(t.allows('BEARER second-token-0123456789'), true);
  assert.equal(t.allows('bearer First-token-0123456789'), false, 'the token itself is exact');
  assert.equal(t.allows('Basic first-token-0123456789'), false);
  assert.equal(t.allows('Bearerfirst-token-0123456789'), false);
  assert.equal(t.allows('first-token-0123456789'), false);
  assert.equal(t.allows(undefined), false);
  t.replace([]);
  assert.equal(t.allows('Bearer first-token-0123456789'), false);
  assert.equal(new Tokens([]).allows(undefined), false);
  assert.equal(new Tokens([''], false).allows('Bearer '), false, 'an empty token is no token');
  const open = new Tokens([], true);
  assert.equal(open.allows(undefined), true);
  open.replace(['now-a-token-0123456789']);
  assert.equal(open.allows(undefined), false);
  assert.equal(open.allows('Bearer now-a-token-0123456789'), true);
});

test('an app checks its live holder on every request: replaced tokens apply at once, on an open connection too', async () => {
  const tokens = new Tokens(['old-token-0123456789']);
  const app = createApp({ tokens, bodyLimit: 1024 });
  app.get('/x', async () => ({ ok: true }));
  const url = await listenApp(app, '127.0.0.1', 0);
  try {
    const get = async (token: string) => (await fetch(`${url}/x`, { headers: { authorization: `Bearer ${token}` } })).status;
    assert.equal(await get('old-token-0123456789'), 200);
    tokens.replace(['new-token-0123456789']);
    assert.equal(await get('old-token-0123456789'), 401);
    assert.equal(await get('new-token-0123456789'), 200);
  } finally {
    await app.close();
  }
});
