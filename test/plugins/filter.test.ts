import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { Verdict } from '../../sdk/testing/index.ts';
import { load, refuses } from './helpers.ts';

const RULES = {
  rules: [
    { name: 'no-drop', action: 'deny', ops: ['drop', 'dropDatabase'] },
    { name: 'evil-email', action: 'deny', ops: ['find'], field: { path: 'filter.email', regex: '@evil\\.(com|org)$', flags: 'i' } },
    { name: 'admin-role', action: 'deny', ops: ['insert'], field: { path: 'documents.*.role', equals: 'admin' } },
    { name: 'no-where', action: 'deny', field: { path: 'filter.$where', exists: true } },
    { name: 'app-reads', action: 'allow', dbs: ['app'], ops: ['find', 'aggregate', 'count'] },
    { name: 'logs', action: 'allow', collections: ['logs_*'] },
  ],
  default: 'deny',
};

test('filter: first matching rule decides, default deny names no rule', async () => {
  const h = await load('filter', RULES);
  assert.equal(h.request({ find: 'users', filter: { email: 'a@good.com' }, $db: 'app' }).verdict, Verdict.Continue);
  const drop = h.request({ drop: 'users', $db: 'app' });
  assert.equal(drop.verdict, Verdict.Reject);
  assert.equal(drop.reject?.code, 13);
  assert.equal(drop.reject?.codeName, 'Unauthorized');
  assert.match(drop.reject!.message, /filter rule "no-drop"/);
  const other = h.request({ update: 'users', updates: [], $db: 'app' });
  assert.equal(other.verdict, Verdict.Reject);
  assert.match(other.reject!.message, /default policy/);
  assert.equal(h.request({ insert: 'logs_2024', documents: [{ a: 1 }], $db: 'x' }).verdict, Verdict.Continue);
});

test('filter: regex predicate (case-insensitive) runs as sub-operation regex.eval', async () => {
  const h = await load('filter', RULES);
  const r = h.request({ find: 'users', filter: { email: 'Bob@EVIL.com' }, $db: 'app' });
  assert.equal(r.verdict, Verdict.Reject);
  assert.match(r.reject!.message, /"evil-email"/);
  assert.equal(h.request({ find: 'users', filter: { email: 'bob@evil.company' }, $db: 'app' }).verdict, Verdict.Continue);
  assert.ok(h.subops.some((s) => s.name === 'regex.eval'));
  // an array of strings matches when any element does
  assert.equal(h.request({ find: 'users', filter: { email: ['x@ok.com', 'y@evil.org'] }, $db: 'app' }).verdict, Verdict.Reject);
});

test('filter: equals through wildcard paths and document sequences; exists', async () => {
  const h = await load('filter', RULES);
  const seq = h.request({ insert: 'logs_a', $db: 'app' }, { sequences: [{ id: 'documents', docs: [{ role: 'user' }, { role: 'admin' }] }] });
  assert.equal(seq.verdict, Verdict.Reject);
  assert.match(seq.reject!.message, /admin-role/);
  assert.equal(h.request({ insert: 'logs_a', documents: [{ role: 'user' }], $db: 'app' }).verdict, Verdict.Continue);
  const where = h.request({ find: 'users', filter: { $where: 'sleep(1)' }, $db: 'app' });
  assert.match(where.reject!.message, /no-where/);
});

test('filter: default allow with no rules lets everything through; response phase untouched', async () => {
  const h = await load('filter', {});
  const r = h.roundTrip({ drop: 'x', $db: 'a' }, { ok: 1 });
  assert.equal(r.verdict, Verdict.Continue);
  assert.equal(r.newReply, null);
});

test('filter: regex subset semantics', async () => {
  const cases: [string, string, string, boolean][] = [
    ['^abc$', '', 'abc', true], ['^abc$', '', 'abcd', false], ['b+c', '', 'abbbc', true],
    ['colou?r', '', 'color', true], ['^\\d{3}-\\d{2,4}$', '', '123-4567', true], ['^\\d{3}-\\d{2,4}$', '', '123-45678', false],
    ['[^a-z]', '', 'abc', false], ['[^a-z]', '', 'abC', true], ['^[\\w.+-]+@x\\.io$', '', 'a.b+c@x.io', true],
    ['^(a|b)*c$', '', 'ababc', true], ['^(a|b)*c$', '', 'abxc', false], ['\\bcat\\b', '', 'a cat!', true],
    ['\\bcat\\b', '', 'concat', false], ['HELLO', 'i', 'say hello', true], ['^(a+)+$', '', 'a'.repeat(5000) + 'b', false],
    ['\\s', '', 'nospace', false], ['a.c', '', 'a\nc', false], ['^(?:ab)+?$', '', 'abab', true], ['x{2}', '', 'axxb', true],
  ];
  for (const [regex, flags, input, want] of cases) {
    const h = await load('filter', { rules: [{ action: 'deny', field: { path: 'v', regex, flags } }] });
    const r = h.request({ find: 'c', v: input, $db: 'd' });
    assert.equal(r.verdict === Verdict.Reject, want, `/${regex}/${flags} on ${JSON.stringify(input.slice(0, 20))}`);
    // (skip V8 on the catastrophic-backtracking case: it would not finish)
    if (input.length < 100) assert.equal(new RegExp(regex, flags).test(input), want, 'case agrees with JS RegExp');
  }
});

test('filter: bad configs are refused with a reason', async () => {
  await refuses('filter', {}, { rules: [{ action: 'block' }] }, /action must be one of allow\|deny/);
  await refuses('filter', {}, { rules: [{ ops: ['find'] }] }, /action is required/);
  await refuses('filter', {}, { rules: [{ action: 'deny', field: { path: 'a', regex: '(a' } }] }, /missing '\)'/);
  await refuses('filter', {}, { rules: [{ action: 'deny', field: { path: 'a', regex: '(?=a)' } }] }, /lookaround/);
  await refuses('filter', {}, { rules: [{ action: 'deny', field: { path: 'a', regex: 'a', equals: 1 } }] }, /exactly one/);
  await refuses('filter', {}, { rules: [{ action: 'deny', field: { path: 'a..b', exists: true } }] }, /empty segment/);
  await refuses('filter', {}, { rule: [] }, /unknown key "rule"/);
  await refuses('filter', {}, { default: 'maybe' }, /default must be one of/);
});

test('filter: scope answers kept for a repeated op, database and collection follow every change of them', async () => {
  const h = await load('filter', { default: 'allow', rules: [
    { name: 'no-admin-writes', action: 'deny', ops: ['insert', 'update'], dbs: ['admin', 'sys_*'], collections: ['users'] },
  ] });
  const req = (op: string, db: string, coll: string) => h.request({ [op]: coll, $db: db }).verdict;
  const [C, R] = [Verdict.Continue, Verdict.Reject];
  assert.deepEqual([
    req('insert', 'admin', 'users'), req('insert', 'admin', 'users'), req('insert', 'app', 'users'), req('insert', 'admin', 'users'),
    req('find', 'admin', 'users'), req('update', 'admin', 'users'), req('update', 'admin', 'other'), req('update', 'admin', 'users'),
    req('update', 'sys_1', 'users'), req('update', 'sys', 'users'), req('update', 'sys_2', 'users'),
  ], [R, R, C, R, C, R, C, R, R, C, R]);
});

test('filter: the rules docs/operations.md gives to keep proxy users out of each other\'s operations and sessions deny them, and nothing else', async () => {
  const doc = readFileSync('docs/operations.md', 'utf8');
  const at = doc.indexOf('**Sessions and operations are not kept apart by user.**');
  assert.ok(at > 0);
  const block = /```yaml\n([\s\S]*?)```/.exec(doc.slice(at));
  assert.ok(block !== null);
  const config = (parseYaml(block[1]) as { filter: { config: Record<string, unknown> } }).filter.config;
  const h = await load('filter', config);
  const denied: Record<string, unknown>[] = [
    { currentOp: 1, $all: true, $db: 'admin' },
    { killOp: 1, op: 12345, $db: 'admin' },
    { killSessions: [{ id: 'x' }], $db: 'admin' },
    { killAllSessions: [], $db: 'admin' },
    { killAllSessionsByPattern: [], $db: 'admin' },
    { aggregate: 1, pipeline: [{ $currentOp: { allUsers: true } }, { $match: {} }], cursor: {}, $db: 'admin' },
    { aggregate: 1, pipeline: [{ $listLocalSessions: { allUsers: true } }], cursor: {}, $db: 'admin' },
    { aggregate: 'system.sessions', pipeline: [{ $listSessions: {} }], cursor: {}, $db: 'config' },
  ];
  for (const cmd of denied) {
    const r = h.request(cmd);
    assert.equal(r.verdict, Verdict.Reject, JSON.stringify(cmd));
    assert.equal(r.reject?.code, 13, JSON.stringify(cmd));
  }
  const allowed: Record<string, unknown>[] = [
    { find: 'c', filter: {}, $db: 'app' },
    { aggregate: 'c', pipeline: [{ $match: { currentOp: 1 } }, { $group: { _id: '$killOp' } }], cursor: {}, $db: 'app' },
    { endSessions: [{ id: 'x' }], $db: 'admin' },
    { getMore: 1, collection: 'c', $db: 'app' },
  ];
  for (const cmd of allowed) assert.equal(h.request(cmd).verdict, Verdict.Continue, JSON.stringify(cmd));
});
