// End to end with mongosh: `mongosh <proxy uri> --quiet --eval <js>` inserting, finding and
// aggregating through the proxy; stdout is asserted. Also with wire compression (zlib, snappy),
// proven by a TCP tap counting OP_COMPRESSED frames.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { startStack, type Stack } from '../helpers/stack.ts';
import { TcpTap, OP_COMPRESSED } from '../helpers/wire.ts';

const MONGOSH = resolve('node_modules/.bin/mongosh');
const installed = existsSync(MONGOSH);
// Outside CI a missing mongosh skips; under CI (CI=true) the tests run and fail loudly instead.
const skip = installed || process.env.CI ? false : `mongosh is not installed (${MONGOSH} missing); .ci/run installs it`;

function mongosh(uri: string, js: string, home: string): Promise<{ stdout: string; stderr: string }> {
  return new Promise((res, rej) => {
    execFile(MONGOSH, [uri, '--quiet', '--norc', '--eval', js], {
      timeout: 60_000, env: { ...process.env, HOME: home, MONGOSH_NO_UPDATE_CHECK: '1', DO_NOT_TRACK: '1' },
    }, (err, stdout, stderr) => {
      if (err) rej(new Error(`mongosh failed: ${err.message}\nstdout: ${stdout}\nstderr: ${stderr}`));
      else res({ stdout, stderr });
    });
  });
}

/** The last line of stdout that parses as JSON. */
function lastJson(stdout: string): unknown {
  const lines = stdout.trim().split('\n').reverse();
  for (const l of lines) {
    try { return JSON.parse(l); } catch { /* not JSON */ }
  }
  throw new Error(`no JSON line in mongosh output:\n${stdout}`);
}

const SCRIPT = (coll: string) => `
  const c = db.getSiblingDB('e2e_mongosh').getCollection('${coll}');
  c.drop();
  c.insertMany([{ _id: 1, k: 'a', v: 1 }, { _id: 2, k: 'b', v: 2 }, { _id: 3, k: 'a', v: 3 }, { _id: 4, k: 'c', v: 4 }]);
  c.insertOne({ _id: 5, k: 'b', v: 5 });
  c.updateOne({ _id: 4 }, { $set: { v: 40 } });
  c.deleteOne({ _id: 2 });
  const found = c.find({ v: { $gte: 3 } }).sort({ _id: 1 }).toArray().map(d => d._id);
  const many = []; for (let i = 0; i < 250; i++) many.push({ i });
  db.getSiblingDB('e2e_mongosh').getCollection('${coll}_many').insertMany(many);
  let seen = 0; db.getSiblingDB('e2e_mongosh').getCollection('${coll}_many').find().batchSize(10).forEach(() => seen++);
  const agg = c.aggregate([{ $match: { v: { $gt: 0 } } }, { $group: { _id: '$k', total: { $sum: '$v' } } }, { $sort: { _id: 1 } }]).toArray();
  let dup = null; try { c.insertOne({ _id: 1 }); } catch (e) { dup = e.code; }
  const hello = db.hello();
  print(JSON.stringify({ found, seen, agg, count: c.countDocuments({}), dup, msg: hello.msg, compression: hello.compression ?? null }));
`;

describe('mongosh through the proxy', { skip }, () => {
  let stack: Stack;
  let home: string;
  before(async () => {
    stack = await startStack();
    home = mkdtempSync(join(tmpdir(), 'mongosh-home-'));
  });
  after(async () => {
    await stack?.close();
    if (home) rmSync(home, { recursive: true, force: true });
  });

  test('insert, find, aggregate, errors', { timeout: 90_000 }, async () => {
    const { stdout } = await mongosh(stack.uri, SCRIPT('plain'), home);
    assert.deepEqual(lastJson(stdout), {
      found: [3, 4, 5],
      seen: 250,
      agg: [{ _id: 'a', total: 4 }, { _id: 'b', total: 5 }, { _id: 'c', total: 40 }],
      count: 4,
      dup: 11000,
      msg: 'isdbgrid',
      compression: null,
    });
  });

  for (const name of ['zlib', 'snappy'] as const) {
    test(`with compressors=${name}`, { timeout: 90_000 }, async () => {
      const tap = new TcpTap(stack.proxy.port);
      const base = await tap.listen();
      try {
        const { stdout } = await mongosh(`${base}?compressors=${name}`, SCRIPT(name), home);
        const out = lastJson(stdout) as Record<string, unknown>;
        assert.deepEqual(out.found, [3, 4, 5]);
        assert.equal(out.seen, 250);
        assert.equal(out.count, 4);
        assert.equal(out.dup, 11000);
        assert.deepEqual(out.compression, [name]);
        assert.ok(tap.count('toServer', OP_COMPRESSED) > 5, `client→proxy compressed: ${tap.count('toServer', OP_COMPRESSED)}`);
        assert.ok(tap.count('toClient', OP_COMPRESSED) > 5, `proxy→client compressed: ${tap.count('toClient', OP_COMPRESSED)}`);
      } finally {
        await tap.close();
      }
    });
  }
});
