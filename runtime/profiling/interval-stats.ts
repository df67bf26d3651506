// Figures over one snapshot interval, for the time series (docs/profiling.md, "Snapshots and persistence").
//
// The profiler keeps only cumulative distributions. Rather than record every invocation a second
// time into an interval histogram that is reset each snapshot (one more WebAssembly call per step
// per request, on the hot path), the tracker keeps a copy of each step's cumulative HDR histogram
// as of the last snapshot and subtracts it at the next: a copy, a subtract and three percentile
// scans per step per interval, off the request path (about 0.5 ms per step that ran; steps that
// did not run in the interval cost nothing). Counts, errors and averages come from the exact
// counters; the interval's max is exact when the interval set a new cumulative max, else the HDR
// histogram's (within 0.1%).
import type * as hdr from 'hdr-histogram-js';
import { newHdr } from './latency-stats.ts';
import type { GraphStats, Profiler, StepStats } from './profiler.ts';
import { phaseName } from '../wasm/index.ts';

export const SERIES_VERSION = 1;

/** One step row of a series record: name, phase, count, errors, avg, p50, p95, p99, max (µs). */
export type SeriesStepRow = [string, 'request' | 'response', number, number, number, number, number, number, number];

export interface SeriesGraph {
  pipeline_id: string;
  pipeline: string;
  count: number;
  errors: number;
  avg_total_latency_us: number;
  avg_upstream_latency_us: number;
  steps: SeriesStepRow[];
}

/** One line of a `series-<YYYYMMDDHH>.jsonl` file. */
export interface SeriesRecord {
  v: number;
  /** End of the interval (ISO). */
  t: string;
  /** Its length in seconds (the first one after a start runs from the start). */
  interval_s: number;
  /** Graphs with requests in the interval. */
  graphs: SeriesGraph[];
}

interface StepBaseline {
  hdr: hdr.Histogram;
  count: number;
  errors: number;
  sumNs: number;
  maxNs: number;
}

interface GraphBaseline {
  count: number;
  errors: number;
  totalSumNs: number;
  upstreamSumNs: number;
}

function clearGraph(b: GraphBaseline): void {
  b.count = 0;
  b.errors = 0;
  b.totalSumNs = 0;
  b.upstreamSumNs = 0;
}

function clearStep(b: StepBaseline): void {
  b.hdr.reset();
  b.count = 0;
  b.errors = 0;
  b.sumNs = 0;
  b.maxNs = 0;
}

export class IntervalTracker {
  private readonly profiler: Profiler;
  private readonly steps = new Map<StepStats, StepBaseline>();
  private readonly graphs = new Map<GraphStats, GraphBaseline>();
  private readonly scratch: hdr.Histogram = newHdr();
  private lastMs: number;

  constructor(profiler: Profiler, nowMs: number) {
    this.profiler = profiler;
    this.lastMs = nowMs;
  }

  /** The current cumulative figures become the start of the next interval (after a restore). */
  rebase(): void {
    for (const g of this.profiler.allGraphs()) {
      this.moveGraph(g);
      for (const s of g.steps) this.moveStep(s, this.stepBaseline(s));
    }
  }

  /** After a reset: the next interval counts from zero. */
  clear(): void {
    for (const b of this.graphs.values()) clearGraph(b);
    for (const b of this.steps.values()) clearStep(b);
  }

  /** The figures since the last call (or construction), and the baselines move to now. */
  take(nowMs: number): SeriesRecord {
    const record = this.collect(nowMs, true);
    this.lastMs = nowMs;
    return record;
  }

  /**
   * The figures of the interval still running (since the last take), leaving the baselines where
   * they are: the live point of GET /api/profile/series. Costs what a take costs (a histogram copy
   * and subtract per step that ran), paid per request to that endpoint, not on the request path.
   */
  peek(nowMs: number): SeriesRecord {
    return this.collect(nowMs, false);
  }

  /** Start of the interval still running (ms since the epoch). */
  get since(): number {
    return this.lastMs;
  }

  private collect(nowMs: number, move: boolean): SeriesRecord {
    const graphs: SeriesGraph[] = [];
    for (const g of this.profiler.allGraphs()) {
      const b = this.graphBaseline(g);
      if (g.total.count < b.count) clearGraph(b); // reset without our listener seeing it
      const count = g.total.count - b.count;
      if (count === 0) continue;
      const rows: SeriesStepRow[] = [];
      for (const s of g.rows) {
        const row = this.stepRow(s, move);
        if (row !== null) rows.push(row);
      }
      graphs.push({
        pipeline_id: g.pipelineId, pipeline: g.variant, count, errors: g.errors - b.errors,
        avg_total_latency_us: Math.round((g.total.sumNs - b.totalSumNs) / count / 1000),
        avg_upstream_latency_us: Math.round((g.upstream.sumNs - b.upstreamSumNs) / count / 1000),
        steps: rows,
      });
      if (move) this.moveGraph(g);
    }
    return { v: SERIES_VERSION, t: new Date(nowMs).toISOString(), interval_s: Math.max(0, nowMs - this.lastMs) / 1000, graphs };
  }

  destroy(): void {
    this.scratch.destroy();
    for (const b of this.steps.values()) b.hdr.destroy();
    this.steps.clear();
    this.graphs.clear();
  }

  private stepRow(s: StepStats, move: boolean): SeriesStepRow | null {
    const cur = s.latency;
    const b = this.stepBaseline(s);
    if (cur.count < b.count) clearStep(b);
    const count = cur.count - b.count;
    if (count === 0) return null;
    const h = this.scratch;
    h.reset();
    h.add(cur.hdr);
    h.subtract(b.hdr);
    const max = cur.maxNs > b.maxNs ? cur.maxUs() : Math.min(h.maxValue, cur.maxUs());
    const row: SeriesStepRow = [
      s.step, phaseName(s.phase), count, cur.errors - b.errors,
      Math.round((cur.sumNs - b.sumNs) / count / 1000),
      // HDR's bucket values can pass the exact max: percentiles are capped at it.
      Math.min(Math.round(h.getValueAtPercentile(50)), max), Math.min(Math.round(h.getValueAtPercentile(95)), max),
      Math.min(Math.round(h.getValueAtPercentile(99)), max), max,
    ];
    if (move) this.moveStep(s, b);
    return row;
  }

  private stepBaseline(s: StepStats): StepBaseline {
    let b = this.steps.get(s);
    if (b === undefined) {
      b = { hdr: newHdr(), count: 0, errors: 0, sumNs: 0, maxNs: 0 };
      this.steps.set(s, b);
    }
    return b;
  }

  private moveStep(s: StepStats, b: StepBaseline): void {
    const cur = s.latency;
    if (b.count === cur.count && b.sumNs === cur.sumNs) return;
    b.hdr.reset();
    b.hdr.add(cur.hdr);
    b.count = cur.count; b.errors = cur.errors; b.sumNs = cur.sumNs; b.maxNs = cur.maxNs;
  }

  private graphBaseline(g: GraphStats): GraphBaseline {
    let b = this.graphs.get(g);
    if (b === undefined) {
      b = { count: 0, errors: 0, totalSumNs: 0, upstreamSumNs: 0 };
      this.graphs.set(g, b);
    }
    return b;
  }

  private moveGraph(g: GraphStats): void {
    const b = this.graphBaseline(g);
    b.count = g.total.count; b.errors = g.errors; b.totalSumNs = g.total.sumNs; b.upstreamSumNs = g.upstream.sumNs;
  }
}
