// One latency distribution: an HDR histogram (hdr-histogram-js, WebAssembly mode; microseconds,
// 1 µs .. 60 s at 3 significant digits) for percentiles that can be merged across instances, plus
// exact count, sum and max, error count, and fixed Prometheus buckets (profiling.histogram_buckets)
// so /metrics is built from plain numbers at scrape time. record() allocates nothing.
import * as hdr from 'hdr-histogram-js';

export const HIGHEST_TRACKABLE_US = 60_000_000;

let wasmReady: Promise<void> | null = null;
/** hdr-histogram-js's WebAssembly mode must be initialised once per process before build(). */
export function initHistograms(): Promise<void> {
  wasmReady ??= hdr.initWebAssembly();
  return wasmReady;
}

export function newHdr(): hdr.Histogram {
  return hdr.build({
    lowestDiscernibleValue: 1, highestTrackableValue: HIGHEST_TRACKABLE_US, numberOfSignificantValueDigits: 3,
    bitBucketSize: 32, autoResize: false, useWebAssembly: true,
  });
}

export class LatencyStats {
  readonly hdr: hdr.Histogram;
  count = 0;
  errors = 0;
  sumNs = 0;
  maxNs = 0;
  /** Upper bounds in µs (ascending); counts has one more slot for +Inf. Non-cumulative. */
  readonly bounds: readonly number[];
  readonly counts: Float64Array;

  constructor(bounds: readonly number[]) {
    this.hdr = newHdr();
    this.bounds = bounds;
    this.counts = new Float64Array(bounds.length + 1);
  }

  /** Timings come from performance.now() differences (fractional ns); the sum keeps whole ns so that
   *  sums read at two moments subtract exactly whatever order they were added in. */
  record(ns: number, error: boolean): void {
    ns = Math.round(ns);
    this.count++;
    if (error) this.errors++;
    this.sumNs += ns;
    if (ns > this.maxNs) this.maxNs = ns;
    const us = ns / 1000;
    this.hdr.recordValue(us < HIGHEST_TRACKABLE_US ? Math.round(us) : HIGHEST_TRACKABLE_US);
    const b = this.bounds;
    let i = 0;
    while (i < b.length && us > b[i]) i++;
    this.counts[i]++;
  }

  /** Integer microseconds, as SPEC §2.1 reports them. */
  avgUs(): number { return this.count === 0 ? 0 : Math.round(this.sumNs / this.count / 1000); }
  /** HDR reports a bucket's highest equivalent value, which can pass the exact maximum: capped at it. */
  percentileUs(p: number): number { return this.count === 0 ? 0 : Math.min(Math.round(this.hdr.getValueAtPercentile(p)), this.maxUs()); }
  maxUs(): number { return Math.round(this.maxNs / 1000); }

  reset(): void {
    this.hdr.reset();
    this.count = 0;
    this.errors = 0;
    this.sumNs = 0;
    this.maxNs = 0;
    this.counts.fill(0);
  }

  destroy(): void {
    this.hdr.destroy();
  }
}
