// One latency distribution: an HDR histogram (hdr-histogram-js, WebAssembly mode; microseconds,
// 1 µs .. 60 s at 3 significant digits) for percentiles that can be merged across instances, plus
// exact count, sum and max, error count, and fixed Prometheus buckets (profiling.histogram_buckets)
// so /metrics is built from plain numbers at scrape time. record() allocates nothing.
//
// Values under PENDING_US µs (nearly every step, sub-operation and request) are first counted in a
// plain array and handed to the HDR histogram in bulk — one recordValueWithCount per distinct value
// — when it is read (the `hdr` getter): a call into hdr-histogram-js's WebAssembly costs ~18 ns,
// which was most of record()'s cost, and a request records about twenty values. Below 2,048 µs
// HDR (3 significant digits) keeps every integer µs in a bucket of its own, so what it holds after
// the hand-over is exactly what one recordValue per value would have left.
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

/** What the profiler, the endpoints and the snapshot store read and write of a distribution: a
 *  LatencyStats in process memory, or a MappedLatencyStats in the histogram file (storage: mmap). */
export interface Distribution {
  readonly hdr: hdr.Histogram;
  count: number;
  errors: number;
  sumNs: number;
  maxNs: number;
  readonly bounds: readonly number[];
  readonly counts: Float64Array;
  record(ns: number, error: boolean): void;
  avgUs(): number;
  percentileUs(p: number): number;
  maxUs(): number;
  reset(): void;
  destroy(): void;
}

/** Values (µs) below this are counted in LatencyStats.pending until the HDR histogram is read. */
const PENDING_US = 1024;

export class LatencyStats implements Distribution {
  private readonly h: hdr.Histogram;
  /** Counts of values 0 .. PENDING_US-1 µs not yet in `h`. */
  private readonly pending = new Float64Array(PENDING_US);
  /** The values with a non-zero pending count, in the order they first appeared. */
  private readonly touched = new Uint16Array(PENDING_US);
  private touchedCount = 0;
  count = 0;
  errors = 0;
  sumNs = 0;
  maxNs = 0;
  /** Upper bounds in µs (ascending); counts has one more slot for +Inf. Non-cumulative. */
  readonly bounds: readonly number[];
  readonly counts: Float64Array;

  constructor(bounds: readonly number[]) {
    this.h = newHdr();
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
    const v = Math.round(us);
    if (v < PENDING_US) {
      if (this.pending[v]++ === 0) this.touched[this.touchedCount++] = v;
    } else {
      this.h.recordValue(v < HIGHEST_TRACKABLE_US ? v : HIGHEST_TRACKABLE_US);
    }
    const b = this.bounds;
    let i = 0;
    while (i < b.length && us > b[i]) i++;
    this.counts[i]++;
  }

  /** The HDR histogram of every value recorded so far (the pending counts handed over first). */
  get hdr(): hdr.Histogram {
    const n = this.touchedCount;
    if (n > 0) {
      const h = this.h;
      const pending = this.pending;
      const touched = this.touched;
      for (let k = 0; k < n; k++) {
        const v = touched[k]!;
        h.recordValueWithCount(v, pending[v]!);
        pending[v] = 0;
      }
      this.touchedCount = 0;
    }
    return this.h;
  }

  /** Integer microseconds, as SPEC §2.1 reports them. */
  avgUs(): number { return this.count === 0 ? 0 : Math.round(this.sumNs / this.count / 1000); }
  /** HDR reports a bucket's highest equivalent value, which can pass the exact maximum: capped at it. */
  percentileUs(p: number): number { return this.count === 0 ? 0 : Math.min(Math.round(this.hdr.getValueAtPercentile(p)), this.maxUs()); }
  maxUs(): number { return Math.round(this.maxNs / 1000); }

  reset(): void {
    this.h.reset();
    for (let k = 0; k < this.touchedCount; k++) this.pending[this.touched[k]!] = 0;
    this.touchedCount = 0;
    this.count = 0;
    this.errors = 0;
    this.sumNs = 0;
    this.maxNs = 0;
    this.counts.fill(0);
  }

  destroy(): void {
    this.h.destroy();
  }
}
