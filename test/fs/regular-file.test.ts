// runtime/fs/regular-file.ts: only regular files are read; a FIFO, a device or a directory is
// refused at once with the same reason, and the file is judged by the descriptor that is read, not
// by a look at its path first (a path found regular could be swapped for a FIFO before the open).
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs, { closeSync, constants, mkdtempSync, openSync, rmSync, writeFileSync } from 'node:fs';
import { syncBuiltinESMExports } from 'node:module';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readRegularFile, readRegularFileSync } from '../../runtime/fs/index.ts';

const NOT_REGULAR = /^not a regular file \(a device, pipe or directory is not read\)$/;
const dir = mkdtempSync(join(tmpdir(), 'proxy-regular-file-'));
const fifos: string[] = [];

/** A named pipe nobody writes to; null where mkfifo is not available. */
function fifo(name: string): string | null {
  const path = join(dir, name);
  const r = spawnSync('mkfifo', [path]);
  if (r.error !== undefined || r.status !== 0) return null;
  fifos.push(path);
  return path;
}

after(() => {
  // Ends a read still waiting on a pipe (only without the check): a writer opens and closes each.
  for (const path of fifos) {
    try {
      closeSync(openSync(path, constants.O_RDWR | constants.O_NONBLOCK));
    } catch { /* gone */ }
  }
  rmSync(dir, { recursive: true, force: true });
});

/** Both readers' outcome for `path`: the bytes, or the error. */
async function both(path: string): Promise<[Buffer | Error, Buffer | Error]> {
  let sync: Buffer | Error;
  try {
    sync = readRegularFileSync(path);
  } catch (err) {
    sync = err as Error;
  }
  const async = await readRegularFile(path).catch((err: Error) => err);
  return [sync, async];
}

test('a regular file is read whole, by both readers', async () => {
  const file = join(dir, 'cert.pem');
  writeFileSync(file, 'x'.repeat(100_000));
  for (const r of await both(file)) assert.deepEqual(r, Buffer.from('x'.repeat(100_000)));
});

test('a FIFO nobody writes to is refused at once, not waited on', { timeout: 10_000 }, async (t) => {
  const path = fifo('key.pem');
  if (path === null) return t.skip('mkfifo is not available');
  for (const r of await both(path)) assert.match((r as Error).message, NOT_REGULAR);
});

test('/dev/zero is refused (it has no end)', async () => {
  for (const r of await both('/dev/zero')) assert.match((r as Error).message, NOT_REGULAR);
});

test('a directory is refused', async () => {
  for (const r of await both(dir)) assert.match((r as Error).message, NOT_REGULAR);
});

test('a UNIX socket is refused with the same reason (its open fails with ENXIO)', async () => {
  const path = join(dir, 'ca.pem');
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(path, resolve));
  try {
    for (const r of await both(path)) assert.match((r as Error).message, NOT_REGULAR);
  } finally {
    await new Promise((resolve) => server.close(resolve));
  }
});

test('a missing file keeps its ENOENT error', async () => {
  const path = join(dir, 'missing.pem');
  for (const r of await both(path)) {
    assert.equal((r as NodeJS.ErrnoException).code, 'ENOENT');
    assert.match((r as Error).message, /^ENOENT: no such file or directory, \w+ '.*missing\.pem'$/);
  }
});

test('the file is judged by the open descriptor: the path is never stat\'ed before the open', async () => {
  const file = join(dir, 'step.wasm');
  writeFileSync(file, 'module');
  // A stat of the path is where a swap for a FIFO would slip in: fail the test if either reader makes one.
  const calls: string[] = [];
  const targets: Array<[Record<string, unknown>, string]> = [
    [fs, 'stat'], [fs, 'statSync'], [fs, 'lstat'], [fs, 'lstatSync'], [fs.promises, 'stat'], [fs.promises, 'lstat'],
  ];
  const saved = targets.map(([o, name]) => o[name] as (...a: unknown[]) => unknown);
  targets.forEach(([o, name], i) => {
    o[name] = (...a: unknown[]) => {
      calls.push(name);
      return saved[i](...a);
    };
  });
  syncBuiltinESMExports();
  try {
    for (const r of await both(file)) assert.deepEqual(r, Buffer.from('module'));
  } finally {
    targets.forEach(([o, name], i) => { o[name] = saved[i]; });
    syncBuiltinESMExports();
  }
  assert.deepEqual(calls, []);
});
