// ClientMatch: appName globs, users, client CIDR blocks (IPv4, IPv6, IPv4-mapped IPv6 peers); every
// key given must hold, any value of a list may.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ClientMatch, globRegExp, hostOf } from '../../runtime/pipeline/client-match.ts';

const conn = (appName: string, user: string, clientAddress: string) => ({ id: 1, appName, user, clientAddress });

test('app_name is a glob: * any run, ? one character, the rest literal', () => {
  assert.ok(globRegExp('reports-*').test('reports-v2'));
  assert.ok(!globRegExp('reports-*').test('xreports-v2'));
  assert.ok(globRegExp('a?c').test('abc'));
  assert.ok(!globRegExp('a.c').test('abc'), 'a dot is literal');
});

test('user and client: exact users, CIDR blocks; all given keys must hold', () => {
  const m = new ClientMatch({ user: ['alice', 'bob'], client: ['10.1.0.0/16', '::1/128'] });
  assert.ok(m.matches(conn('', 'alice', '10.1.2.3:5000')));
  assert.ok(m.matches(conn('', 'bob', '::ffff:10.1.9.9:5000')), 'an IPv4-mapped peer is its IPv4 address');
  assert.ok(m.matches(conn('', 'bob', '::1:5000')));
  assert.ok(!m.matches(conn('', 'carol', '10.1.2.3:5000')), 'user does not hold');
  assert.ok(!m.matches(conn('', 'alice', '10.2.0.1:5000')), 'client does not hold');
  assert.equal(hostOf('[::1]:27017'), '::1');
});

test('bad settings are refused with the key', () => {
  assert.throws(() => new ClientMatch({}), /at least one/);
  assert.throws(() => new ClientMatch({ client: 'nope' }), /match\.client: "nope"/);
  assert.throws(() => new ClientMatch({ client: '10.0.0.0/40' }), /prefix length/);
  assert.throws(() => new ClientMatch({ user: [] }), /match\.user: an empty list/);
});
