// auth.secret_file: the secret the cursor seals and the decoy salts are derived from, shared by
// every proxy instance given the same file (and kept across a restart). Real `proxy serve`
// processes in front of one upstream: a cursor opened through one instance is continued through
// another by its user (without the file: CursorNotFound), an unknown user gets the same salt from
// both, and a file that is too short, too open or missing stops `serve` with the key path.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { chmodSync, chownSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Document, Long } from 'bson';
import { MongoClient, MongoServerError } from 'mongodb';
import { DevDbServer } from '../../runtime/devdb/index.ts';
import { scramUserEntry } from '../../runtime/cli/user.ts';
import { parseConfig, restartKeys } from '../../runtime/config/index.ts';
import { freePort } from '../helpers/ports.ts';
import { spawnServe, type Served } from '../helpers/serve.ts';
import { saltOf } from '../helpers/scram.ts';
import { until } from '../helpers/until.ts';

const ANN = 'ann-pw';
const BOB = 'bob-pw';
const USERS = [scramUserEntry('ann', 'admin', ANN, 4096), scramUserEntry('bob', 'admin', BOB, 4096)];
const SECRET = 'k2Q9vXr7LmP4sT8wYb3nHc6fJd1gZa5eRu0iOp2qWx7yVt4A'; // 48 characters

const dir = mkdtempSync(join(tmpdir(), 'proxy-auth-secret-'));
const devdb = new DevDbServer(undefined, { users: { svc: 'upstream-pw' } });
const devdbAddress = devdb.listen(0);
const served: Served[] = [];
after(async () => {
  for (const s of served) await s.stop();
  await devdb.close();
  rmSync(dir, { recursive: true, force: true });
});

const upstreamUri = async () => `mongodb://svc:upstream-pw@127.0.0.1:${(await devdbAddress).port}/?authSource=admin`;

function keyFile(name: string, content: string, mode = 0o600): string {
  const file = join(dir, name);
  writeFileSync(file, content);
  chmodSync(file, mode);
  return file;
}

async function configFile(name: string, auth: Record<string, unknown>, port = 0): Promise<string> {
  const file = join(dir, `${name}.json`);
  writeFileSync(file, JSON.stringify({ listen: `127.0.0.1:${port}`, log: { level: 'warn' }, upstream: { uri: await upstreamUri() }, auth }));
  return file;
}

/** A `proxy serve` process; resolves with its port once it is ready. */
async function serve(config: string, port: number, args: string[] = []): Promise<{ port: number; proc: Served }> {
  const proc = await spawnServe(['--config', config, ...args]);
  served.push(proc);
  return { port, proc };
}

/** Two instances with this `auth` (each on its own port, one upstream). */
async function pair(name: string, auth: Record<string, unknown>): Promise<[number, number]> {
  const ports: number[] = [];
  for (const i of [1, 2]) {
    const port = await freePort();
    await serve(await configFile(`${name}-${i}`, auth, port), port);
    ports.push(port);
  }
  return [ports[0], ports[1]];
}

function client(port: number, user: string, password: string): MongoClient {
  return new MongoClient(`mongodb://${user}:${password}@127.0.0.1:${port}/`, { serverSelectionTimeoutMS: 5000, retryReads: false, retryWrites: false });
}

/** A cursor opened by ann through `port` with the driver (batchSize 2: the first batch holds _id 0 and 1); its id as the client got it. */
async function openCursor(port: number): Promise<{ id: Long; close: () => Promise<void> }> {
  const c = client(port, 'ann', ANN);
  const coll = c.db('secretdb').collection('c');
  await coll.deleteMany({});
  await coll.insertMany(Array.from({ length: 10 }, (_, i) => ({ _id: i, i } as Document)));
  const cursor = coll.find({}, { batchSize: 2, sort: { _id: 1 } });
  assert.equal((await cursor.next())?._id, 0);
  const id = cursor.id!;
  assert.notEqual(id.toString(), '0');
  return { id, close: () => c.close() };
}

/** A getMore of `id` (as the client sent it) through `port` as `user`. */
async function getMore(port: number, user: string, password: string, id: Long): Promise<Document> {
  const c = client(port, user, password);
  try {
    return await c.db('secretdb').command({ getMore: id, collection: 'c', batchSize: 2 });
  } finally {
    await c.close();
  }
}

/** The CursorNotFound a getMore of `id` gets; its message names the id the client sent, never the upstream's. */
async function notFound(port: number, user: string, password: string, id: Long): Promise<void> {
  await assert.rejects(getMore(port, user, password, id), (e: unknown) => {
    assert.ok(e instanceof MongoServerError, String(e));
    assert.equal(e.code, 43, e.message);
    assert.match(e.message, new RegExp(`\\b${id.toString()}\\b`), `the message names the id the client sent (${id.toString()}): ${e.message}`);
    return true;
  });
}

test('with one auth.secret_file, a cursor opened through one instance is continued through another (and after a restart) by its user ' +
  'only; an unknown user gets one salt from both', { timeout: 180_000 }, async () => {
  // Two files of the same secret (one with a trailing newline, as `openssl rand` writes it): the content counts, trimmed.
  const auth = (file: string) => ({ users: USERS, secret_file: file });
  const [p1, p2] = await pair('shared', auth(keyFile('shared.key', `${SECRET}\n`)));
  const cursor = await openCursor(p1);
  try {
    const more = await getMore(p2, 'ann', ANN, cursor.id);
    assert.equal(more.ok, 1, JSON.stringify(more));
    assert.deepEqual(((more.cursor as Document).nextBatch as Document[]).map((d) => d._id), [2, 3]);
    assert.equal((more.cursor as Document).id.toString(), cursor.id.toString(), 'the same sealed id on both instances');
    // Another user, with the shared secret too: the id opens to nothing.
    await notFound(p2, 'bob', BOB, cursor.id);
    await notFound(p1, 'bob', BOB, cursor.id);
    // Instance 2 restarted with the same secret (another file of the same content), now with two
    // workers (the primary hands them the file's secret): ann continues on either worker.
    await served[served.length - 1].stop();
    await serve(await configFile('shared-2b', auth(keyFile('shared-b.key', `  ${SECRET}  `)), p2), p2, ['--workers', '2']);
    for (const next of [[4, 5], [6, 7]]) {
      const after = await getMore(p2, 'ann', ANN, cursor.id);
      assert.equal(after.ok, 1, JSON.stringify(after));
      assert.deepEqual(((after.cursor as Document).nextBatch as Document[]).map((d) => d._id), next);
    }
  } finally {
    await cursor.close();
  }
  // An unknown user's decoy salt: the same from both instances (and so across restarts).
  assert.equal((await saltOf(p1, 'nobody-here')).salt, (await saltOf(p2, 'nobody-here')).salt);
});

test('without auth.secret_file, each instance has its own secret: the other instance answers CursorNotFound (naming the client\'s id), ' +
  'and an unknown user\'s salt differs', { timeout: 180_000 }, async () => {
  const [p1, p2] = await pair('own', { users: USERS });
  const cursor = await openCursor(p1);
  try {
    await notFound(p2, 'ann', ANN, cursor.id);
    // Through the instance that opened it, the cursor is alive.
    const more = await getMore(p1, 'ann', ANN, cursor.id);
    assert.equal(more.ok, 1, JSON.stringify(more));
  } finally {
    await cursor.close();
  }
  assert.notEqual((await saltOf(p1, 'nobody-here')).salt, (await saltOf(p2, 'nobody-here')).salt);
});

/** `proxy serve --config file` that is expected to exit: its status and stderr. */
function serveExit(config: string, wrap: readonly string[] = []): Promise<{ status: number | null; stderr: string }> {
  const argv = [process.execPath, join(process.cwd(), 'bin/proxy.mjs'), 'serve', '--config', config, '--workers', '1'];
  const [cmd, ...args] = [...wrap, ...argv];
  return new Promise((resolve) => {
    execFile(cmd, args, { timeout: 60_000 },
      (err, _stdout, stderr) => resolve({ status: err === null ? 0 : (err as { code?: number }).code ?? null, stderr }));
  });
}

test('a secret file too short, open to its group or others, or missing stops serve: exit 2, the key path and the reason', async () => {
  const cases: Array<[string, string, RegExp]> = [
    ['short', keyFile('short.key', `  ${'x'.repeat(31)}\n`), /auth\.secret_file: .*short\.key holds 31 characters .*at least 32/],
    ['group', keyFile('group.key', SECRET, 0o640), /auth\.secret_file: permissions on .*group\.key are too open \(mode 0640\)/],
    ['others', keyFile('others.key', SECRET, 0o604), /auth\.secret_file: permissions on .*others\.key are too open \(mode 0604\)/],
    ['missing', join(dir, 'absent.key'), /auth\.secret_file: cannot read .*absent\.key: ENOENT/],
    ['large', keyFile('large.key', 'y'.repeat(2000)), /auth\.secret_file: cannot read .*large\.key: larger than 1024 bytes/],
  ];
  for (const [name, file, reason] of cases) {
    if (process.platform === 'win32' && (name === 'group' || name === 'others')) continue;
    const r = await serveExit(await configFile(`bad-${name}`, { users: USERS, secret_file: file }));
    assert.equal(r.status, 2, `${name}: ${r.stderr}`);
    assert.match(r.stderr, /proxy: configuration refused\n/, name);
    assert.match(r.stderr, reason, `${name}: ${r.stderr}`);
    assert.doesNotMatch(r.stderr, /\n\s+at /, `${name}: no stack trace`);
  }
});

test('a secret file the proxy may not read stops serve: exit 2, the key path and EACCES', { skip: process.platform === 'win32' }, async () => {
  // Owned by another user, readable by its owner alone: how a service account meets a key it was not given.
  const file = keyFile('unreadable.key', SECRET);
  let wrap: string[] = [];
  if (process.getuid!() === 0) {
    // Root reads any file: the proxy runs as root without the capabilities that override file permissions (util-linux's setpriv).
    chownSync(file, 65534, 65534);
    wrap = ['setpriv', '--bounding-set=-dac_override,-dac_read_search'];
  } else {
    chmodSync(file, 0o000);
  }
  const r = await serveExit(await configFile('bad-unreadable', { users: USERS, secret_file: file }), wrap);
  assert.equal(r.status, 2, r.stderr);
  assert.match(r.stderr, /proxy: configuration refused\n/);
  assert.match(r.stderr, /auth\.secret_file: cannot read .*unreadable\.key: EACCES: permission denied/, r.stderr);
  assert.doesNotMatch(r.stderr, /\n\s+at /, 'no stack trace');
});

test('auth.secret_file takes effect at a restart: a reload that changes it names it', () => {
  const a = parseConfig({ auth: { users: USERS, secret_file: 'a.key' } }, null);
  const b = parseConfig({ auth: { users: USERS, secret_file: 'b.key' } }, null);
  assert.deepEqual(restartKeys(a, b), ['auth.secret_file']);
  assert.deepEqual(restartKeys(parseConfig({}, null), b), ['auth.secret_file']);
});

test('a reload to a secret file the next start could not use is refused, naming auth.secret_file; the running configuration stays', async () => {
  const good = keyFile('reload-good.key', SECRET);
  const open = keyFile('reload-open.key', SECRET, 0o644);
  const config = await configFile('reload', { users: USERS, secret_file: good });
  const { proc } = await serve(config, 0);
  writeFileSync(config, JSON.stringify({ listen: '127.0.0.1:0', log: { level: 'warn' }, upstream: { uri: await upstreamUri() },
    auth: { users: USERS, secret_file: open } }));
  proc.child.kill('SIGHUP');
  await until('the refused reload', () => /configuration reload refused/.test(proc.err()), 10_000);
  assert.match(proc.err(), /auth\.secret_file: permissions on [^"]*reload-open\.key are too open \(mode 0644\)/);
  assert.doesNotMatch(proc.err(), /configuration reloaded/);
  assert.equal(proc.child.exitCode, null, 'the proxy still runs');
});
