// `proxy user add`: the printed entry is a SCRAM-SHA-256 credential (no password in it) that a
// proxy accepts as auth.users, and the Node driver logs in with the password that made it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { join, resolve } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { parse as parseToml } from 'smol-toml';
import { MongoClient, MongoServerError } from 'mongodb';
import { parseConfig } from '../../runtime/config/index.ts';
import { withProxy } from '../helpers/proxy.ts';

const PROXY = join(resolve('.'), 'bin', 'proxy.mjs');
const { NODE_TEST_CONTEXT: _inner, ...ENV } = process.env;

function userAdd(args: string[], stdin: string) {
  return spawnSync(process.execPath, [PROXY, 'user', 'add', ...args], { input: stdin, encoding: 'utf8', env: ENV, timeout: 60_000 });
}

test('proxy user add prints an entry a proxy accepts, and the password logs in', { timeout: 120_000 }, async (t) => {
  const password = 'correct horse battery';
  const r = userAdd(['carol', '--iterations', '4096'], `${password}\n`);
  assert.equal(r.status, 0, r.stderr);
  const entry = JSON.parse(r.stdout) as Record<string, unknown>;
  assert.deepEqual(Object.keys(entry).sort(), ['db', 'iterations', 'name', 'salt', 'server_key', 'stored_key']);
  assert.equal(entry.name, 'carol');
  assert.equal(entry.db, 'admin');
  assert.equal(entry.iterations, 4096);
  assert.ok(!r.stdout.includes(password), 'the password is not in the output');
  const { proxy: p } = await withProxy(t, { auth: { users: [entry] } });
  for (const [pw, expect] of [[password, 'ok'], ['correct horse', 'fail']] as const) {
    const c = new MongoClient(`mongodb://carol:${encodeURIComponent(pw)}@127.0.0.1:${p.port}/`, { serverSelectionTimeoutMS: 5000, retryReads: false });
    try {
      if (expect === 'ok') assert.equal((await c.db('app').command({ count: 'x' })).ok, 1);
      else await assert.rejects(c.db('app').command({ count: 'x' }), (e: unknown) => e instanceof MongoServerError && e.code === 18);
    } finally {
      await c.close();
    }
  }
});

test('proxy user add: --db, yaml and toml fragments; each salt is new', () => {
  const y = userAdd(['dave', '--db', 'app', '--format', 'yaml', '--iterations', '4096'], 'pw\n');
  assert.equal(y.status, 0, y.stderr);
  const fromYaml = parseYaml(y.stdout) as { auth: { users: Array<Record<string, unknown>> } };
  assert.equal(fromYaml.auth.users[0].db, 'app');
  const t = userAdd(['dave', '--db', 'app', '--format', 'toml', '--iterations', '4096'], 'pw\n');
  assert.equal(t.status, 0, t.stderr);
  const fromToml = parseToml(t.stdout) as unknown as { auth: { users: Array<Record<string, unknown>> } };
  assert.doesNotThrow(() => parseConfig(fromToml, null));
  assert.doesNotThrow(() => parseConfig(fromYaml, null));
  assert.notEqual(fromYaml.auth.users[0].salt, fromToml.auth.users[0].salt);
});

test('proxy user add refuses bad input with exit code 2 and a reason', () => {
  const cases: Array<[string[], string, RegExp]> = [
    [['erin', '--iterations', '100'], 'pw\n', /--iterations must be an integer >= 4096/],
    [['erin', '--format', 'xml'], 'pw\n', /unknown --format "xml"/],
    [['erin'], '\n', /empty password/],
    [[], 'pw\n', /missing user name/],
  ];
  for (const [args, stdin, why] of cases) {
    const r = userAdd(args, stdin);
    assert.equal(r.status, 2, `${args.join(' ')}: ${r.stdout}${r.stderr}`);
    assert.match(r.stderr, why);
  }
});
