// One latency distribution: an HDR histogram (hdr-histogram-js, WebAssembly mode; microseconds,
// 1 µs .. 60 s at 3 significant digits) for percentiles that can be merged across instances, plus
// exact count, sum and max, error count, and fixed Prometheus buckets (profiling.histogram_buckets)
// so /metrics is built from plain numbers at scrape time. record() allocates nothing.
//
// Values under PENDING_US µs (nearly every step, sub-operation and request) are first counted in a
// plain array, one count per whole µs, and handed over in bulk when the distribution is read (its
// `count`, `counts` or `hdr`): to the HDR histogram, one recordValueWithCount per distinct value (a
// call into hdr-histogram-js's WebAssembly costs ~18 ns, and a request records about twenty
// values), and to the count and the Prometheus buckets, so a record does not search the buckets.
// Below 2,048 µs HDR (3 significant digits) keeps every integer µs in a bucket of its own, so what
// it holds after the hand-over is exactly what one recordValue per value would have left; the
// buckets are exact too (record() notes the values just above a bound that round down onto it).
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

/** Values (µs) below this are counted in LatencyStats.pending until the distribution is read. */
const PENDING_US = 1024;

/**
 * What folding a pending count into the Prometheus buckets needs of one `histogram_buckets` list
 * (bounds are whole µs ≥ 1): each whole µs value's bucket, and which values are bounds. A value
 * recorded as v = round(us) lies in v's bucket, unless v is a bound and us > v (then it is in the
 * next one): that is the only case record() counts apart (`over`).
 */
interface BucketTable { readonly bucketOf: Uint16Array; readonly edge: Uint8Array }
const bucketTables = new WeakMap<readonly number[], BucketTable>();

function bucketTable(bounds: readonly number[]): BucketTable {
  let t = bucketTables.get(bounds);
  if (t === undefined) {
    const bucketOf = new Uint16Array(PENDING_US);
    const edge = new Uint8Array(PENDING_US);
    for (let v = 0; v < PENDING_US; v++) bucketOf[v] = bucketIndex(bounds, v);
    for (const b of bounds) if (b < PENDING_US && Number.isInteger(b)) edge[b] = 1;
    t = { bucketOf, edge };
    bucketTables.set(bounds, t);
  }
  return t;
}

/** The index in `counts` of a value of `us` µs: the first bound it does not pass, else +Inf. */
function bucketIndex(bounds: readonly number[], us: number): number {
  let i = 0;
  while (i < bounds.length && us > bounds[i]) i++;
  return i;
}

export class LatencyStats implements Distribution {
  private readonly h: hdr.Histogram;
  /** Counts of values 0 .. PENDING_US-1 µs not yet in `h`, `folded` and `buckets`. */
  private readonly pending = new Float64Array(PENDING_US);
  /** Of pending[v] for a v that is a bucket bound, the values above v (in the next bucket). */
  private readonly over = new Float64Array(PENDING_US);
  /** The values with a non-zero pending count, in the order they first appeared. */
  private readonly touched = new Uint16Array(PENDING_US);
  private touchedCount = 0;
  private readonly table: BucketTable;
  /** The count of the values folded (or recorded at once: PENDING_US µs and above). */
  private folded = 0;
  private readonly buckets: Float64Array;
  errors = 0;
  sumNs = 0;
  maxNs = 0;
  /** Upper bounds in µs (ascending); counts has one more slot for +Inf. Non-cumulative. */
  readonly bounds: readonly number[];

  constructor(bounds: readonly number[]) {
    this.h = newHdr();
    this.bounds = bounds;
    this.buckets = new Float64Array(bounds.length + 1);
    this.table = bucketTable(bounds);
  }

  /**
   * Timings come from clock differences (fractional ns); the sum keeps whole ns so that sums read
   * at two moments subtract exactly whatever order they were added in. A value under PENDING_US µs
   * costs its sum, max and one pending count here; its count, HDR value and Prometheus bucket are
   * derived from the pending counts when the distribution is read.
   */
  record(ns: number, error: boolean): void {
    ns = Math.round(ns);
    if (error) this.errors++;
    this.sumNs += ns;
    if (ns > this.maxNs) this.maxNs = ns;
    const us = ns / 1000;
    const v = Math.round(us);
    if (v < PENDING_US) {
      if (this.pending[v]++ === 0) this.touched[this.touchedCount++] = v;
      if (this.table.edge[v] !== 0 && us > v) this.over[v]++;
    } else {
      this.folded++;
      this.h.recordValue(v < HIGHEST_TRACKABLE_US ? v : HIGHEST_TRACKABLE_US);
      this.buckets[bucketIndex(this.bounds, us)]++;
    }
  }

  /** Hands the pending counts over to the count, the HDR histogram and the buckets. */
  private fold(): void {
    const n = this.touchedCount;
    if (n === 0) return;
    const { h, pending, over, touched, buckets } = this;
    const bucketOf = this.table.bucketOf;
    let folded = 0;
    for (let k = 0; k < n; k++) {
      const v = touched[k]!;
      const c = pending[v]!;
      h.recordValueWithCount(v, c);
      const o = over[v]!;
      const i = bucketOf[v]!;
      buckets[i] += c - o;
      if (o !== 0) {
        buckets[i + 1] += o;
        over[v] = 0;
      }
      folded += c;
      pending[v] = 0;
    }
    this.folded += folded;
    this.touchedCount = 0;
  }

  /** Values recorded (restores add to it). */
  get count(): number {
    this.fold();
    return this.folded;
  }

  set count(n: number) {
    this.fold();
    this.folded = n;
  }

  /** The Prometheus bucket counts (bounds' order, then +Inf; not cumulative). */
  get counts(): Float64Array {
    this.fold();
    return this.buckets;
  }

  /** The HDR histogram of every value recorded so far. */
  get hdr(): hdr.Histogram {
    this.fold();
    return this.h;
  }

  /** Integer microseconds, as SPEC §2.1 reports them. */
  avgUs(): number {
    const n = this.count;
    return n === 0 ? 0 : Math.round(this.sumNs / n / 1000);
  }
  /** HDR reports a bucket's highest equivalent value, which can pass the exact maximum: capped at it. */
  percentileUs(p: number): number { return this.count === 0 ? 0 : Math.min(Math.round(this.hdr.getValueAtPercentile(p)), this.maxUs()); }
  maxUs(): number { return Math.round(this.maxNs / 1000); }

  reset(): void {
    this.h.reset();
    for (let k = 0; k < this.touchedCount; k++) {
      const v = this.touched[k]!;
      this.pending[v] = 0;
      this.over[v] = 0;
    }
    this.touchedCount = 0;
    this.folded = 0;
    this.errors = 0;
    this.sumNs = 0;
    this.maxNs = 0;
    this.buckets.fill(0);
  }

  destroy(): void {
    this.h.destroy();
  }
}
