// The off-loop decompression pool: large messages come back whole (header included) from a worker
// thread, bombs are refused there at their declared size, the declared bytes in workers stay
// under the pool's bound, a cancelled message is never reported, and a worker left holding a
// large message's memory is ended once idle.
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import { performance } from 'node:perf_hooks';
import { deflateSync } from 'node:zlib';
import {
  initCompression, compressFrame, compressedSize, InflatePool, WireError, type InflateOwner, HEADER_SIZE,
} from '../../runtime/wire/index.ts';
import { opMsg } from '../helpers/wire.ts';
import { SNAPPY, ZLIB, ZSTD, compressedFrame, zstdZeros } from '../helpers/compressed.ts';
import { until } from '../helpers/until.ts';

before(() => initCompression());

/** Inflates through `pool`; resolves to the frame or the error. Checks the owner is never told synchronously. */
function inflate(pool: InflatePool, frame: Buffer): Promise<Buffer | Error> {
  const size = compressedSize(frame);
  return new Promise((resolve) => {
    let sync = true;
    const owner: InflateOwner = {
      onInflated(f) { assert.equal(sync, false, 'told later, not during inflate()'); resolve(f); },
      onInflateFailed(e) { assert.equal(sync, false, 'told later, not during inflate()'); resolve(e); },
    };
    pool.inflate(frame, size, owner);
    sync = false;
  });
}

test('large messages come back whole from a worker, with every compressor', async () => {
  const pool = new InflatePool({ workers: 1 });
  try {
    const msg = opMsg({ insert: 'c', documents: [{ _id: 1, s: 'abc'.repeat(200_000) }], $db: 'd' }, { reqId: 4242 });
    for (const id of [SNAPPY, ZLIB, ZSTD]) {
      const out = await inflate(pool, compressFrame(msg, id));
      assert.ok(Buffer.isBuffer(out), String(out));
      assert.deepEqual(out, msg, `compressor ${id}`);
      assert.equal(out.readInt32LE(4), 4242);
    }
    assert.equal(pool.stats.inflated, 3);
    assert.equal(pool.stats.workersStarted, 1, 'one worker, reused');
  } finally {
    await pool.close();
  }
});

test('bombs in a worker stop at the declared size, with the message the event loop would give', async () => {
  const pool = new InflatePool({ workers: 1 });
  // The bombs are built before the clock starts: deflating 256 MiB is the test's own work (about a
  // second on a loaded machine), not the pool's. Inflated whole they would take seconds more.
  const zstdFrame = compressedFrame(ZSTD, 1_000_000, zstdZeros(2 ** 30, null));
  const zlibFrame = compressedFrame(ZLIB, 1_000_000, deflateSync(Buffer.alloc(256 * 1024 * 1024)));
  try {
    const t = performance.now();
    const zstdBomb = await inflate(pool, zstdFrame);
    assert.ok(zstdBomb instanceof WireError && zstdBomb.code === 'PROXY_ERR_BAD_COMPRESSION');
    assert.match(zstdBomb.message, /zstd data decompresses to more than the 1000000 bytes the message declares \(decompression stopped there\)/);
    const zlibBomb = await inflate(pool, zlibFrame);
    assert.ok(zlibBomb instanceof WireError);
    assert.match(zlibBomb.message, /zlib data inflates to more than the 1000000 bytes/);
    assert.ok(performance.now() - t < 2000, `took ${(performance.now() - t).toFixed(0)} ms`);
    assert.equal(pool.stats.failed, 2);
  } finally {
    await pool.close();
  }
});

test('the declared bytes in workers stay under maxInflatingBytes; the other messages wait', async () => {
  const MB8 = 8 * 1024 * 1024;
  const pool = new InflatePool({ workers: 3, maxInflatingBytes: 20 * 1024 * 1024 });
  try {
    const frames = Array.from({ length: 6 }, (_, i) => compressedFrame(ZLIB, MB8, deflateSync(Buffer.alloc(MB8, i)), { reqId: i + 1 }));
    const done: number[] = [];
    const all = frames.map((f) => inflate(pool, f).then((r) => {
      assert.ok(Buffer.isBuffer(r), String(r));
      done.push(r.readInt32LE(4));
      assert.equal(r[HEADER_SIZE + 100], r.readInt32LE(4) - 1, 'its own content');
    }));
    assert.ok(pool.queued >= 4, `${pool.queued} waiting: only two 8 MiB messages fit under 20 MiB`);
    await Promise.all(all);
    assert.equal(done.length, 6);
    assert.ok(pool.stats.peakInflatingBytes <= 20 * 1024 * 1024, `peak ${pool.stats.peakInflatingBytes}`);
    assert.equal(pool.stats.peakInflatingBytes, 2 * MB8);
    // A message larger than the bound still runs (alone).
    const tight = new InflatePool({ workers: 1, maxInflatingBytes: 1024 });
    const huge = await inflate(tight, compressedFrame(ZLIB, MB8, deflateSync(Buffer.alloc(MB8))));
    await tight.close();
    assert.ok(Buffer.isBuffer(huge));
  } finally {
    await pool.close();
  }
});

test('a cancelled message is never reported, waiting or in a worker; the pool goes on', async () => {
  const pool = new InflatePool({ workers: 1 });
  try {
    const never: InflateOwner = {
      onInflated() { assert.fail('a cancelled message was reported'); },
      onInflateFailed() { assert.fail('a cancelled message was reported'); },
    };
    const size = 32 * 1024 * 1024;
    const running = compressedFrame(ZLIB, size, deflateSync(Buffer.alloc(size)));
    const waiting = compressedFrame(ZLIB, size, deflateSync(Buffer.alloc(size)));
    pool.inflate(running, size, never);
    const other: InflateOwner = { onInflated: never.onInflated, onInflateFailed: never.onInflateFailed };
    pool.inflate(waiting, size, other);
    assert.equal(pool.queued, 1);
    pool.cancel(other); // waiting: dropped
    assert.equal(pool.queued, 0);
    pool.cancel(never); // in the worker: its result is dropped
    assert.equal(pool.stats.cancelled, 2);
    const msg = opMsg({ ping: 1, pad: 'p'.repeat(100_000), $db: 'admin' });
    assert.deepEqual(await inflate(pool, compressFrame(msg, ZLIB)), msg);
  } finally {
    await pool.close();
  }
});

test('a worker left holding a large message\'s memory is ended once idle, and a new one starts when needed', async () => {
  const pool = new InflatePool({ workers: 1 });
  try {
    const size = 40_000_000;
    const out = await inflate(pool, compressedFrame(ZSTD, size, zstdZeros(size, size)));
    assert.ok(Buffer.isBuffer(out) && out.length === HEADER_SIZE + size);
    assert.equal(pool.workers, 1);
    await until('the idle worker ended', () => pool.workers === 0, 5000);
    assert.equal(pool.stats.workersRecycled, 1);
    const small = opMsg({ ping: 1, pad: 'q'.repeat(100_000), $db: 'admin' });
    assert.deepEqual(await inflate(pool, compressFrame(small, ZSTD)), small);
    assert.equal(pool.stats.workersStarted, 2);
    // A worker that only ever inflated small messages is kept.
    await new Promise((r) => setTimeout(r, 1500));
    assert.equal(pool.workers, 1);
  } finally {
    await pool.close();
  }
});
