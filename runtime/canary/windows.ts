// The evidence a canary decides on: per graph (baseline, candidate), the requests, errors and latency
// distribution of one evaluation window, and of the whole current stage. The source keeps cumulative
// figures (each arm's ArmEvidence, arm-evidence.ts); a window is the difference between two readings:
// counts subtract, and so do histograms (hdr's subtract), so percentiles come from the window's own
// merged distribution — never from averaged percentiles.
import * as hdr from 'hdr-histogram-js';
import type { Variant } from '../pipeline/index.ts';
import type { SideMetrics } from './events.ts';

/** One graph's cumulative figures (every request of the arm), as read now. */
export interface GraphTotals {
  requests: number;
  errors: number;
  /** End-to-end latency in microseconds, cumulative (the source may keep recording into it). */
  latencyUs: hdr.Histogram;
}

/** A plugin metric of one graph, cumulative: counters and gauges give `value`, histograms `sum`/`count`. */
export interface CustomReading {
  kind: 'counter' | 'gauge' | 'histogram';
  value: number;
  sum: number;
  count: number;
}

/**
 * Where the controller reads plugin metrics per graph, for custom_metrics rules (implemented over
 * the plugin host's registry). Requests, errors and latency come from the arms' own evidence
 * (CanaryGraphs.totals), not from here.
 */
export interface CanaryMetricsSource {
  /** Summed over the plugin's own labels; null when the metric has no series for that graph. */
  custom(metric: string, pipelineId: string, variant: Variant): Promise<CustomReading | null>;
}

/** A JS-mode copy (iterable bucket by bucket, for the judge) of any histogram. */
export function jsCopy(h: hdr.Histogram): hdr.Histogram {
  return hdr.decodeFromCompressedBase64(hdr.encodeIntoCompressedBase64(h), 32, false);
}

/** Latency histograms cover 1 µs .. 60 s (3 significant digits). */
export const HIGHEST_TRACKABLE_US = 60_000_000;

export function emptyHistogram(): hdr.Histogram {
  return hdr.build({ lowestDiscernibleValue: 1, highestTrackableValue: HIGHEST_TRACKABLE_US, numberOfSignificantValueDigits: 3, bitBucketSize: 32,
    useWebAssembly: false });
}

/** Requests, errors and latency of one side over a span of time. */
export class SideWindow {
  requests = 0;
  errors = 0;
  readonly latencyUs: hdr.Histogram;

  constructor(latencyUs: hdr.Histogram = emptyHistogram()) {
    this.latencyUs = latencyUs;
  }

  /** Error rate in percent; NaN without requests (callers check `requests` first). */
  errorRatePct(): number {
    return this.requests === 0 ? NaN : (this.errors / this.requests) * 100;
  }

  percentileMs(p: number): number {
    return this.latencyUs.totalCount === 0 ? NaN : this.latencyUs.getValueAtPercentile(p) / 1000;
  }

  add(w: SideWindow): void {
    this.requests += w.requests;
    this.errors += w.errors;
    if (w.latencyUs.totalCount > 0) this.latencyUs.add(w.latencyUs);
  }

  reset(): void {
    this.requests = 0;
    this.errors = 0;
    this.latencyUs.reset();
  }

  /** SPEC §2.8's figures; 0 where there is no data (the evaluation never reads these for decisions). */
  metrics(): SideMetrics {
    const z = (x: number) => (Number.isFinite(x) ? round(x) : 0);
    return {
      requests: this.requests, error_rate_pct: z(this.errorRatePct()),
      latency_p50_ms: z(this.percentileMs(50)), latency_p95_ms: z(this.percentileMs(95)), latency_p99_ms: z(this.percentileMs(99)),
    };
  }
}

export function round(x: number, digits = 4): number {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}

/** Turns a graph's cumulative readings into successive windows. */
export class WindowTracker {
  private requests = 0;
  private errors = 0;
  private prev: hdr.Histogram | null = null;

  /** The figures since the last call (the first call: since the tracker was primed or created). */
  take(t: GraphTotals | null): SideWindow {
    if (t === null) return new SideWindow();
    const cur = jsCopy(t.latencyUs);
    const w = new SideWindow(jsCopy(cur));
    // Totals that went down are a new source (another arm's evidence): the window is then
    // everything it recorded.
    const reset = this.prev !== null && (t.requests < this.requests || cur.totalCount < this.prev.totalCount);
    if (this.prev !== null && !reset) {
      w.requests = t.requests - this.requests;
      w.errors = t.errors - this.errors;
      if (this.prev.totalCount > 0) w.latencyUs.subtract(this.prev);
    } else {
      w.requests = t.requests;
      w.errors = t.errors;
    }
    this.requests = t.requests;
    this.errors = t.errors;
    this.prev = cur;
    return w;
  }

  /** Starts the next window now, discarding what came before (a canary's first evaluation). */
  prime(t: GraphTotals | null): void {
    this.take(t);
  }
}

/** Bucket counts of a JS-mode histogram, ascending by value: the judge's input. */
export function buckets(h: hdr.Histogram): Array<[number, number]> {
  const out: Array<[number, number]> = [];
  if (h.totalCount === 0) return out;
  const js = h as unknown as { recordedValuesIterator?: { reset(): void; hasNext(): boolean;
    next(): { valueIteratedTo: number; countAtValueIteratedTo: number } } };
  const it = js.recordedValuesIterator ?? (jsCopy(h) as unknown as typeof js).recordedValuesIterator!;
  it.reset();
  while (it.hasNext()) {
    const v = it.next();
    if (v.countAtValueIteratedTo > 0) out.push([v.valueIteratedTo, v.countAtValueIteratedTo]);
  }
  return out;
}
