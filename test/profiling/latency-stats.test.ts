// LatencyStats: HDR percentiles with an exact max. HDR answers a percentile with its bucket's
// highest equivalent value, which at 3 significant digits can exceed the largest value recorded;
// a snapshot row must never show p99 above max.
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import { LatencyStats, initHistograms, newHdr } from '../../runtime/profiling/latency-stats.ts';

before(() => initHistograms());

test('percentiles never exceed the exact maximum (HDR bucket values are capped)', () => {
  const s = new LatencyStats([100, 1000]);
  // 12,345 µs lies in an HDR bucket 8 µs wide (12,344..12,351 at 3 significant digits)
  for (let i = 0; i < 100; i++) s.record(12_345_000, false);
  assert.equal(s.maxUs(), 12_345);
  assert.ok(Math.round(s.hdr.getValueAtPercentile(99)) > 12_345, 'the raw HDR value is past the max (else this test shows nothing)');
  assert.equal(s.percentileUs(99), 12_345);
  assert.equal(s.percentileUs(50), 12_345);
  assert.equal(s.avgUs(), 12_345);
});

test('values counted before the HDR histogram is read end up in it exactly as one recordValue each would leave them', () => {
  const s = new LatencyStats([100, 1000]);
  const direct = newHdr();
  try {
    // Small values (held in the pending counts), large ones (recorded at once), 0 µs, a read in
    // the middle (hands over what is pending), and values recorded again after it.
    const values = [0, 1, 1, 7, 1023, 1024, 1500, 2047, 5000, 123_456, 7, 7, 999];
    values.forEach((us, i) => {
      s.record(us * 1000, false);
      direct.recordValue(us);
      if (i === 5) assert.equal(s.hdr.totalCount, 6);
    });
    assert.equal(s.hdr.totalCount, values.length);
    for (const p of [1, 10, 25, 50, 75, 90, 99, 100]) {
      assert.equal(s.hdr.getValueAtPercentile(p), direct.getValueAtPercentile(p), `p${p}`);
    }
    assert.equal(s.hdr.mean, direct.mean);
    // reset drops the pending counts too: nothing recorded before it reaches the histogram after.
    s.record(3000, false);
    s.reset();
    s.record(5000, false);
    assert.equal(s.hdr.totalCount, 1);
    assert.equal(s.percentileUs(50), 5);
  } finally {
    s.destroy();
    direct.destroy();
  }
});

test('count and Prometheus buckets derived from the pending counts equal one search per value, at bounds too', () => {
  const bounds = [1, 5, 10, 100, 250, 1000, 5000];
  const s = new LatencyStats(bounds);
  try {
    const want = new Float64Array(bounds.length + 1);
    let n = 0;
    let errors = 0;
    const put = (ns: number, error: boolean) => {
      s.record(ns, error);
      // Prometheus `le`: a value lies in the first bucket whose bound it does not pass; record()
      // keeps whole ns, so the reference does too.
      const us = Math.round(ns) / 1000;
      let i = 0;
      while (i < bounds.length && us > bounds[i]!) i++;
      want[i]++;
      n++;
      if (error) errors++;
    };
    // Just below, on and just above every bound (values that round onto a bound from either side),
    // 0, values past PENDING_US, and a spread of ordinary ones; a read in the middle.
    for (const b of bounds) for (const d of [-600, -500, -499, -1, 0, 0.4, 1, 300, 499, 500, 501]) put(b * 1000 + d, d === 1);
    put(0, false);
    assert.equal(s.count, n);
    assert.deepEqual(Array.from(s.counts), Array.from(want));
    let x = 7;
    for (let k = 0; k < 5000; k++) {
      x = (x * 1103515245 + 12345) % 2147483648;
      put((x % 2_000_000) + (x % 7) / 10, false);
    }
    assert.equal(s.count, n);
    assert.equal(s.errors, errors);
    assert.deepEqual(Array.from(s.counts), Array.from(want));
    assert.equal(s.hdr.totalCount, n);
    // A restore adds to the count; reset clears what is pending as well.
    s.count += 10;
    assert.equal(s.count, n + 10);
    s.record(3000, false);
    s.reset();
    assert.equal(s.count, 0);
    assert.deepEqual(Array.from(s.counts), new Array(bounds.length + 1).fill(0));
  } finally {
    s.destroy();
  }
});
