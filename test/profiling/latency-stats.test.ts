// LatencyStats: HDR percentiles with an exact max. HDR answers a percentile with its bucket's
// highest equivalent value, which at 3 significant digits can exceed the largest value recorded;
// a snapshot row must never show p99 above max.
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import { LatencyStats, initHistograms } from '../../runtime/profiling/latency-stats.ts';

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
