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
