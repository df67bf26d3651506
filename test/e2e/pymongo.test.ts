// End to end with PyMongo (Debian's python3-pymongo on /usr/bin/python3): CRUD, cursors, bulk and
// errors through the proxy, plain and with zlib, snappy and zstd wire compression. A TCP tap
// between PyMongo and the proxy counts OP_COMPRESSED frames and the compressor ids used.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { startStack, type Stack } from '../helpers/stack.ts';
import { TcpTap, OP_COMPRESSED } from '../helpers/wire.ts';

const PY = '/usr/bin/python3';
const SCRIPT = fileURLToPath(new URL('./py/crud.py', import.meta.url));
const probe = spawnSync(PY, ['-c', 'import pymongo, snappy, zstandard'], { timeout: 30_000 });
// Outside CI a missing PyMongo skips; under CI (CI=true) the tests run and fail loudly instead.
const skip = probe.status === 0 || process.env.CI ? false
  : `PyMongo with snappy/zstandard is not installed for ${PY} (apt-get install python3-pymongo python3-snappy python3-zstandard; .ci/run does)`;

function runPy(uri: string, dbName: string): Promise<Record<string, unknown>> {
  return new Promise((res, rej) => {
    execFile(PY, [SCRIPT, uri, dbName], { timeout: 120_000, maxBuffer: 16 << 20 }, (err, stdout, stderr) => {
      if (err) {
        rej(new Error(`crud.py failed: ${err.message}\nstdout: ${stdout}\nstderr: ${stderr}`));
        return;
      }
      res(JSON.parse(stdout.trim().split('\n').pop()!) as Record<string, unknown>);
    });
  });
}

function checkCommon(out: Record<string, unknown>): void {
  assert.equal(out.msg, 'isdbgrid');
  assert.equal(out.server_info_ok, 1);
  // _id 1 has k "a"; _id i (2..10) has k "abc"[i % 3]: k "a" on 1, 3, 6, 9.
  assert.equal(out.update_many_matched, 4);
  // 3 was replaced (v -3), so v >= 1000 leaves 1, 6, 9 to delete.
  assert.equal(out.delete_many, 3);
  assert.deepEqual(out.remaining, [2, 3, 4, 7, 8, 10]);
  assert.deepEqual(out.distinct, ['b', 'c', 'z']);
  assert.deepEqual(out.agg, [{ _id: 'b', n: 3 }, { _id: 'c', n: 2 }, { _id: 'z', n: 1 }]);
  assert.equal(out.cursor_seen, 3000);
  assert.equal(out.bulk_big_count, 120);
  assert.equal(out.dup, 11000);
  assert.equal(out.dup_msg_has_dup, true);
  assert.deepEqual(out.bulk_err, [11000]);
  assert.equal(out.bulk_err_inserted, 1);
  assert.equal(out.unknown, 59);
}

describe('PyMongo through the proxy', { skip }, () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack({ compression: ['snappy', 'zlib', 'zstd'] });
  });
  after(async () => {
    await stack?.close();
  });

  test('CRUD, cursors, bulk, errors (no compression)', { timeout: 150_000 }, async () => {
    const out = await runPy(stack.uri, 'e2e_py_plain');
    checkCommon(out);
    assert.equal(out.compression, null);
  });

  const IDS = { snappy: 1, zlib: 2, zstd: 3 } as const;
  for (const name of ['zlib', 'snappy', 'zstd'] as const) {
    test(`with compressors=${name}`, { timeout: 150_000 }, async () => {
      const tap = new TcpTap(stack.proxy.port);
      const base = await tap.listen();
      try {
        const out = await runPy(`${base}?compressors=${name}`, `e2e_py_${name}`);
        checkCommon(out);
        assert.deepEqual(out.compression, [name]);
        const up = tap.count('toServer', OP_COMPRESSED);
        const down = tap.count('toClient', OP_COMPRESSED);
        assert.ok(up >= 10, `client→proxy OP_COMPRESSED frames: ${up}`);
        assert.ok(down >= 10, `proxy→client OP_COMPRESSED frames: ${down}`);
        assert.deepEqual([...tap.compressors.keys()], [IDS[name]]);
      } finally {
        await tap.close();
      }
    });
  }
});
