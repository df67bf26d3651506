// The profiler: the StepRecorder the pipeline times its steps into, and the owner of every
// distribution the profiling API, /metrics, the flame graph and the slow-step detector read.
//
// Per graph (pipeline id × variant): total, upstream (pool wait + round trip) and overhead (total − upstream) latency,
// requests by status. Per (graph, step, phase): latency, invocations, non-fatal errors, slow
// invocations, and the step's sub-operations. Statistics are kept per variant across reloads (a
// reload does not reset them; POST /api/profile/reset does). exportState()/importState() carry them
// across a restart (the snapshot store, snapshot-store.ts).
//
// A request's timings are gathered in its RequestTimings and committed here when it ends, so the
// sampling filters (operations, collections, minimum upstream latency) decide over the whole
// request; a request that does not match is not recorded at all.
import type { Log } from '../log/index.ts';
import { performance } from 'node:perf_hooks';
import { GraphKey, type RequestTimings, type StepRecorder, type StepTimer, type Variant } from '../pipeline/index.ts';
import { Phase, phaseName, type PhaseName } from '../wasm/index.ts';
import { LatencyStats, initHistograms, type Distribution } from './latency-stats.ts';
import { FrameRing, type RequestFrame } from './frames.ts';
import { HistogramFile, MappedLatencyStats } from './mmap-store.ts';
import { KIND_ACQUIRE, KIND_OVERHEAD, KIND_STEP, KIND_TOTAL, KIND_UPSTREAM } from './mmap-layout.ts';
import {
  EncodedCache, STATE_FORMAT, STATE_VERSION, decodeAll, encodeDist, mergeDist, parseState,
  type DistState, type ProfilerState,
} from './profiler-state.ts';

export interface ProfilingSettings {
  enabled: boolean;
  slowStepThresholdUs: number;
  alertOnSlowStep: boolean;
  perStepThresholds: Readonly<Record<string, number>>;
  histogramBuckets: readonly number[];
  filters: { operations: readonly string[] | null; collections: readonly string[] | null; minUpstreamLatencyUs: number };
  /** Per-request frames kept for the flame graph (a ring; the oldest is overwritten). */
  frameCapacity: number;
}

/** profiling.storage: "mmap" — where the histogram file goes. */
export interface MmapStorage {
  path: string;
  sizeMb: number;
  /** The proxy's pipeline.id, written in the file's header for readers. */
  defaultPipelineId: string;
}

/** Distinct sub-operation names kept per step; more are counted under "other". */
export const MAX_SUBOPS_PER_STEP = 32;
/** Slow-step log lines per step per second at most (the counter counts every one). */
export const SLOW_LINES_PER_SECOND = 1;
const SLOW_LOG_WINDOW_MS = 1000;
/** The line that reports how many slow-step lines a window held back (at its end, or at shutdown). */
export const SLOW_SUPPRESSED_MESSAGE = 'slow step lines suppressed';

/** What importState() merged. */
export interface RestoreSummary {
  graphs: number;
  steps: number;
  requests: number;
  /** When the state was written (ISO). */
  written: string;
}

export interface StepRow {
  name: string;
  phase: PhaseName;
  avg_latency_us: number;
  p50_latency_us: number;
  p95_latency_us: number;
  p99_latency_us: number;
  max_latency_us: number;
  invocations: number;
  errors: number;
}

export interface ProfileSnapshot {
  total_requests: number;
  avg_total_latency_us: number;
  avg_upstream_latency_us: number;
  avg_pipeline_overhead_us: number;
  steps: StepRow[];
}

/** What the connection knows when a request ends. */
export interface CompletedRequest {
  pipelineId: string;
  variant: Variant;
  op: string;
  collection: string;
  /** From reading the request off the socket to its reply being written, ns. */
  totalNs: number;
  /** Waiting for a pooled connection, ns (0 when the request did not go upstream). */
  acquireNs: number;
  /** Upstream round trip (write to reply), ns. The graph's upstream time is acquireNs + upstreamNs. */
  upstreamNs: number;
  /** The reply was ok (ok: 1). */
  ok: boolean;
  timings: RequestTimings;
  /**
   * Whether admitFrame() let the request's frame into the flame-graph ring when it started (its
   * sub-operations were timed then). Absent: decided at commit, as FrameRing.push does.
   */
  framed?: boolean;
}

export class StepStats implements StepTimer {
  readonly step: string;
  readonly phase: Phase;
  readonly graph: GraphStats;
  readonly latency: Distribution;
  slow = 0;
  thresholdNs: number;
  /** Index in its phase's list of the graph's pipeline (Profiler.order); unordered steps go last. */
  position = Number.MAX_SAFE_INTEGER;
  readonly subops = new Map<string, Distribution>();
  private readonly profiler: Profiler;
  /** Slow-step lines not written because of the rate limit (proxy_step_slow_log_suppressed_total). */
  suppressedTotal = 0;
  private logWindow = 0;
  private logged = 0;
  /** Lines suppressed in the current window, reported when it closes (reportSuppressed). */
  private suppressed = 0;
  private suppressedTimer: NodeJS.Timeout | null = null;

  constructor(profiler: Profiler, graph: GraphStats, step: string, phase: Phase) {
    this.profiler = profiler;
    this.graph = graph;
    this.step = step;
    this.phase = phase;
    this.latency = profiler.dist(KIND_STEP, graph.pipelineId, graph.variant, step, phase);
    this.thresholdNs = profiler.thresholdUs(step) * 1000;
  }

  record(durationNs: number, error: boolean): void {
    this.latency.record(durationNs, error);
    if (durationNs > this.thresholdNs) this.slowInvocation(durationNs);
  }

  subop(name: string, durationNs: number): void {
    let s = this.subops.get(name);
    if (s === undefined) {
      const key = this.subops.size < MAX_SUBOPS_PER_STEP ? name : 'other';
      s = this.subops.get(key);
      if (s === undefined) {
        s = new LatencyStats(this.profiler.settings.histogramBuckets);
        this.subops.set(key, s);
      }
    }
    s.record(durationNs, false);
  }

  /** A slow invocation of a request the sampling filters left out: counted and logged, not recorded. */
  checkSlow(durationNs: number): void {
    if (durationNs > this.thresholdNs) this.slowInvocation(durationNs);
  }

  private slowInvocation(ns: number): void {
    this.slow++;
    const p = this.profiler;
    if (!p.settings.alertOnSlowStep) return;
    const now = performance.now();
    if (now - this.logWindow >= SLOW_LOG_WINDOW_MS) {
      // A window that ended with suppressed lines is reported before the new window's first line
      // (its timer may not have fired yet).
      if (this.suppressed > 0) this.reportSuppressed();
      this.logWindow = now;
      this.logged = 0;
    }
    if (this.logged >= SLOW_LINES_PER_SECOND) {
      this.suppressed++;
      this.suppressedTotal++;
      if (this.suppressedTimer === null) {
        // Reports the count when the window closes, even if the step is never slow again; unref'd:
        // it does not keep a stopping process alive (Profiler.flushSlowStepLog() reports at shutdown).
        this.suppressedTimer = setTimeout(() => {
          this.suppressedTimer = null;
          this.reportSuppressed();
        }, Math.max(1, this.logWindow + SLOW_LOG_WINDOW_MS - now));
        this.suppressedTimer.unref();
      }
      return;
    }
    this.logged++;
    p.log.warn('slow step detected', {
      step: this.step, phase: phaseName(this.phase),
      latency_us: Math.round(ns / 1000), threshold_us: Math.round(this.thresholdNs / 1000),
    });
  }

  /** Logs the lines the rate limit held back in the current window, if any (SLOW_SUPPRESSED_MESSAGE). */
  reportSuppressed(): void {
    if (this.suppressedTimer !== null) {
      clearTimeout(this.suppressedTimer);
      this.suppressedTimer = null;
    }
    if (this.suppressed === 0) return;
    const n = this.suppressed;
    this.suppressed = 0;
    this.profiler.log.warn(SLOW_SUPPRESSED_MESSAGE, {
      step: this.step, phase: phaseName(this.phase), suppressed: n,
      threshold_us: Math.round(this.thresholdNs / 1000),
    });
  }

  reset(): void {
    this.latency.reset();
    this.slow = 0;
    this.suppressedTotal = 0;
    for (const s of this.subops.values()) s.reset();
  }
}

export class GraphStats {
  readonly pipelineId: string;
  readonly variant: Variant;
  readonly total: Distribution;
  readonly upstream: Distribution;
  readonly overhead: Distribution;
  readonly acquire: Distribution;
  ok = 0;
  errors = 0;
  /** Its steps in bind order (the order their plugins finished compiling). */
  readonly steps: StepStats[] = [];
  /** The same steps as rows: request phase first, each phase in pipeline order (then bind order). */
  rows: StepStats[] = [];

  constructor(profiler: Profiler, pipelineId: string, variant: Variant) {
    this.pipelineId = pipelineId;
    this.variant = variant;
    this.total = profiler.dist(KIND_TOTAL, pipelineId, variant, '', 0);
    this.upstream = profiler.dist(KIND_UPSTREAM, pipelineId, variant, '', 0);
    this.overhead = profiler.dist(KIND_OVERHEAD, pipelineId, variant, '', 0);
    this.acquire = profiler.dist(KIND_ACQUIRE, pipelineId, variant, '', 0);
  }

  /** Re-sorts `rows` after a bind or a new pipeline order. */
  sortRows(): void {
    this.rows = this.steps.map((s, i) => ({ s, i }))
      .sort((a, b) => a.s.phase - b.s.phase || a.s.position - b.s.position || a.i - b.i)
      .map((x) => x.s);
  }

  reset(): void {
    this.total.reset();
    this.upstream.reset();
    this.overhead.reset();
    this.acquire.reset();
    this.ok = 0;
    this.errors = 0;
    for (const s of this.steps) s.reset();
  }
}

export class Profiler implements StepRecorder {
  settings: ProfilingSettings;
  readonly log: Pick<Log, 'warn'>;
  current: RequestTimings | null = null;
  readonly frames: FrameRing;
  private readonly graphs = new Map<string, GraphStats>();
  /** The graph commit() recorded last. */
  private lastGraph: GraphStats | null = null;
  private readonly stepStats = new Map<string, StepStats>();
  private operations: ReadonlySet<string> | null;
  private collections: ReadonlySet<string> | null;
  /**
   * Whether a request's step times may go to the step histograms as each phase ends
   * (RequestTimings.direct) rather than at commit: no sampling filter is configured (every request
   * is recorded, so nothing need wait for its end) and the histograms are in process memory (the
   * histogram file's writes are bracketed by commit's begin/end).
   */
  recordsDirect = false;

  /** When the statistics were last reset (ms since the epoch). */
  since = Date.now();
  private readonly resetListeners: Array<() => void> = [];
  private readonly encoded = new EncodedCache();
  /** The histogram file (storage: "mmap"), or null: distributions in process memory. */
  readonly file: HistogramFile | null;
  private fileFullLogged = false;
  /**
   * With workers (runtime/cluster/): the frames of every worker, set by replaceWith(); the flame
   * graph reads these in place of this process's ring (a primary records no requests itself).
   */
  private merged: RequestFrame[] | null = null;

  private constructor(settings: ProfilingSettings, log: Pick<Log, 'warn'>, file: HistogramFile | null) {
    this.settings = settings;
    this.log = log;
    this.file = file;
    this.frames = new FrameRing(settings.frameCapacity);
    this.operations = settings.filters.operations === null ? null : new Set(settings.filters.operations);
    this.collections = settings.filters.collections === null ? null : new Set(settings.filters.collections);
    this.recordsDirect = this.canRecordDirect();
  }

  private canRecordDirect(): boolean {
    return this.file === null && this.operations === null && this.collections === null
      && this.settings.filters.minUpstreamLatencyUs === 0;
  }

  /**
   * Builds a profiler (initialises hdr-histogram-js's WebAssembly once per process). With `mmap`,
   * graph and step distributions live in that file (created or cleared here; a ConfigError when it
   * cannot be mapped); sub-operations stay in process memory.
   */
  static async create(settings: ProfilingSettings, log: Pick<Log, 'warn'>, mmap: MmapStorage | null = null): Promise<Profiler> {
    await initHistograms();
    let profiler: Profiler | null = null;
    const file = mmap === null ? null : HistogramFile.create(mmap.path, mmap.sizeMb, mmap.defaultPipelineId, (cut) => {
      profiler?.afterFileCut();
      log.warn('profiling histogram file was truncated while the proxy ran: set back to its size, its header written again; the counts ' +
        'in it start again from zero, and so do the /metrics buckets and request counters of the graphs in it (do not truncate, replace ' +
        'or delete profiling.mmap_path while the proxy runs)', cut);
    });
    profiler = new Profiler(settings, log, file);
    return profiler;
  }

  /**
   * The histogram file was cut and its rows restarted from zero: what this process keeps beside
   * the rows restarts with them — the /metrics bucket counts of every distribution in the file
   * (rebuilt from its row), and the request counters of each graph whose total is in it (from the
   * total's row: count and errors) — so /metrics, /api/profile and `proxy profile --mmap` agree
   * again. Sub-operations and slow-step counters are not in the file and are kept.
   */
  private afterFileCut(): void {
    for (const g of this.graphs.values()) {
      if (g.total instanceof MappedLatencyStats) {
        g.errors = g.total.errors;
        g.ok = g.total.count - g.total.errors;
      }
      for (const d of [g.total, g.upstream, g.overhead, g.acquire, ...g.steps.map((s) => s.latency)]) {
        if (d instanceof MappedLatencyStats) d.rebuildMemory();
      }
    }
    this.encoded.clear();
  }

  /**
   * A new distribution: a row of the histogram file when there is one, else (or when the file is
   * full, which is logged once with what to change) in process memory.
   */
  dist(kind: number, pipelineId: string, variant: Variant, step: string, phase: number): Distribution {
    const buckets = this.settings.histogramBuckets;
    if (this.file === null) return new LatencyStats(buckets);
    const row = this.file.allocate(kind, pipelineId, variant, step, phase);
    if (row >= 0) return new MappedLatencyStats(this.file, row, buckets);
    if (!this.fileFullLogged) {
      this.fileFullLogged = true;
      this.log.warn('profiling histogram file is full: further graphs and steps are kept in process memory only, not in the file (raise ' +
        'profiling.mmap_size_mb)', {
        file: this.file.path, rows: this.file.capacity, pipeline_id: pipelineId, pipeline: variant, step,
      });
    }
    return new LatencyStats(buckets);
  }

  get enabled(): boolean {
    return this.settings.enabled;
  }

  /**
   * New settings (a reload). Thresholds, filters and alerting apply at once. The bucket bounds and
   * the frame ring's size stay as they were (they need a restart): every distribution counts
   * against the same bounds, so /metrics never mixes two bucket layouts.
   */
  configure(settings: ProfilingSettings): void {
    this.settings = { ...settings, histogramBuckets: this.settings.histogramBuckets, frameCapacity: this.settings.frameCapacity };
    this.operations = settings.filters.operations === null ? null : new Set(settings.filters.operations);
    this.collections = settings.filters.collections === null ? null : new Set(settings.filters.collections);
    this.recordsDirect = this.canRecordDirect();
    for (const s of this.stepStats.values()) s.thresholdNs = this.thresholdUs(s.step) * 1000;
  }

  thresholdUs(step: string): number {
    const t = this.settings.perStepThresholds;
    return t[step] ?? t[step.startsWith('wasm:') ? step.slice(5) : `wasm:${step}`] ?? this.settings.slowStepThresholdUs;
  }

  graph(pipelineId: string, variant: Variant): GraphStats {
    const key = `${pipelineId}\0${variant}`;
    let g = this.graphs.get(key);
    if (g === undefined) {
      g = new GraphStats(this, pipelineId, variant);
      this.graphs.set(key, g);
    }
    return g;
  }

  /** The graphs recorded so far. */
  allGraphs(): IterableIterator<GraphStats> {
    return this.graphs.values();
  }

  bind(key: GraphKey, step: string, phase: Phase): StepTimer {
    const id = `${key.pipelineId}\0${key.variant}\0${step}\0${phase}`;
    let s = this.stepStats.get(id);
    if (s === undefined) {
      const g = this.graph(key.pipelineId, key.variant);
      s = new StepStats(this, g, step, phase);
      this.stepStats.set(id, s);
      g.steps.push(s);
      g.sortRows();
    }
    return s;
  }

  /** A graph's steps of each phase in pipeline order (called when it is built): rows follow it. */
  order(key: GraphKey, request: readonly string[], response: readonly string[]): void {
    const g = this.graph(key.pipelineId, key.variant);
    for (const s of g.steps) s.position = Number.MAX_SAFE_INTEGER;
    const place = (list: readonly string[], phase: Phase) => {
      list.forEach((step, i) => {
        const s = this.stepStats.get(`${key.pipelineId}\0${key.variant}\0${step}\0${phase}`);
        if (s !== undefined && s.position === Number.MAX_SAFE_INTEGER) s.position = i;
      });
    };
    place(request, Phase.Request);
    place(response, Phase.Response);
    g.sortRows();
  }

  /**
   * Whether the request starting now (`nowMs`: performance.now()) keeps its frame for the flame
   * graph, should it be sampled: at most flamegraph_frames per minute (FrameRing). The connection
   * asks when a request starts, times its plugins' sub-operations only if so (they are shown by
   * the frames and the per-step sub-operation statistics, which are therefore a sample of the
   * same requests), and passes the answer to commit() as `framed`.
   */
  admitFrame(nowMs: number): boolean {
    return this.frames.admit(nowMs);
  }

  /** Records a finished request if it matches the sampling filters. Returns whether it was sampled. */
  commit(r: CompletedRequest): boolean {
    if ((this.operations !== null && !this.operations.has(r.op))
      || (this.collections !== null && !this.collections.has(r.collection))
      || r.acquireNs + r.upstreamNs < this.settings.filters.minUpstreamLatencyUs * 1000) {
      if (r.framed === true) this.frames.refund();
      this.checkSlow(r.timings);
      return false;
    }
    const file = this.file;
    if (file !== null) file.begin();
    // The graph of the previous request, when it is the same one (compared by string identity: a
    // pipeline's id and variant are the same string objects for every request of a graph), else a
    // map lookup.
    let g = this.lastGraph;
    if (g === null || g.pipelineId !== r.pipelineId || g.variant !== r.variant) {
      g = this.graph(r.pipelineId, r.variant);
      this.lastGraph = g;
    }
    if (r.ok) g.ok++;
    else g.errors++;
    // Upstream time is waiting for the upstream: for a pooled connection, then for the reply — what
    // the per-request proxy_profile.upstream_us and the flame graph's `upstream` frame measure too.
    // So the overhead (total − upstream) is the proxy's own cost, without a full pool's wait.
    const upstreamNs = r.acquireNs + r.upstreamNs;
    g.total.record(r.totalNs, !r.ok);
    g.upstream.record(upstreamNs, false);
    g.overhead.record(Math.max(0, r.totalNs - upstreamNs), false);
    if (r.acquireNs > 0) g.acquire.record(r.acquireNs, false);
    const t = r.timings;
    if (!t.direct) for (let i = 0; i < t.count; i++) t.timers[i].record(t.ns[i], t.errors[i]);
    const framed = r.framed;
    // Sub-operation statistics are of the framed requests (a traced request outside them has its
    // sub-operations timed for its spans: they are left out here, so the sample stays the frames').
    if (framed !== false) {
      for (let j = 0; j < t.subCount; j++) {
        const owner = t.timers[t.subOf[j]];
        if (owner !== undefined) owner.subop(t.subNames[j], t.subNs[j]);
      }
    }
    if (file !== null) file.end();
    if (framed === undefined) this.frames.push(r);
    else if (framed) this.frames.record(r);
    else this.frames.skip();
    return true;
  }

  /**
   * SPEC §3: every invocation is compared with its threshold, sampled or not. A request the filters
   * leave out was timed all the same (they decide at its end, over the whole request), so its steps
   * are checked here — one comparison each — and only its histograms are skipped.
   */
  private checkSlow(t: RequestTimings): void {
    for (let i = 0; i < t.count; i++) {
      const s = t.timers[i];
      if (s instanceof StepStats) s.checkSlow(t.ns[i]);
    }
  }

  /** Reports every step's held-back slow-step lines now (at shutdown: the count is not lost). */
  flushSlowStepLog(): void {
    for (const s of this.stepStats.values()) s.reportSuppressed();
  }

  /** SPEC §2.1 for one graph. */
  snapshot(pipelineId: string, variant: Variant): ProfileSnapshot {
    const g = this.graphs.get(`${pipelineId}\0${variant}`);
    if (g === undefined) {
      return { total_requests: 0, avg_total_latency_us: 0, avg_upstream_latency_us: 0, avg_pipeline_overhead_us: 0, steps: [] };
    }
    const rows = g.rows.filter((s) => s.latency.count > 0).map((s): StepRow => ({
      name: s.step,
      phase: phaseName(s.phase),
      avg_latency_us: s.latency.avgUs(),
      p50_latency_us: s.latency.percentileUs(50),
      p95_latency_us: s.latency.percentileUs(95),
      p99_latency_us: s.latency.percentileUs(99),
      max_latency_us: s.latency.maxUs(),
      invocations: s.latency.count,
      errors: s.latency.errors,
    }));
    return {
      total_requests: g.total.count,
      avg_total_latency_us: g.total.avgUs(),
      avg_upstream_latency_us: g.upstream.avgUs(),
      avg_pipeline_overhead_us: g.overhead.avgUs(),
      steps: rows,
    };
  }

  /** Step detail (sub-operations included) for `proxy profile --step`. */
  stepDetail(pipelineId: string, variant: Variant, step: string): Array<{ phase: string; stats: Distribution; subops: Map<string, Distribution>;
    slow: number }> {
    const g = this.graphs.get(`${pipelineId}\0${variant}`);
    if (g === undefined) return [];
    const want = step.startsWith('wasm:') ? step : `wasm:${step}`;
    return g.rows.filter((s) => s.step === want).map((s) => ({ phase: phaseName(s.phase), stats: s.latency, subops: s.subops, slow: s.slow }));
  }

  /** Frames of requests that ended in the last `windowMs`, oldest first. */
  recentFrames(windowMs: number, pipelineId: string | null = null, variant: Variant | null = null): RequestFrame[] {
    const from = Date.now() - windowMs;
    if (this.merged === null) return this.frames.since(from, pipelineId, variant);
    return this.merged.filter((f) => f.at >= from && (pipelineId === null || f.pipelineId === pipelineId) && (variant === null || f.variant === variant));
  }

  /**
   * The machine's view (workers, runtime/cluster/): the statistics become the sum of `states`
   * (exportState() of each worker, and of the workers that exited), histograms merged with add(),
   * and the flame graph reads `frames` (every worker's, oldest first). No reset listener runs: to
   * the snapshots this is the same cumulative statistics moving on, not a reset.
   */
  replaceWith(states: readonly unknown[], frames: RequestFrame[]): void {
    // One write to readers of the histogram file: they never see the rows cleared and not yet refilled.
    this.file?.begin();
    try {
      for (const g of this.graphs.values()) g.reset();
      this.encoded.clear();
      for (const s of states) this.importState(s);
    } finally {
      this.file?.end();
    }
    this.merged = frames;
  }

  reset(): void {
    this.file?.begin();
    for (const g of this.graphs.values()) g.reset();
    this.file?.end();
    this.frames.clear();
    if (this.merged !== null) this.merged = [];
    this.since = Date.now();
    this.file?.markReset(this.since);
    this.encoded.clear();
    for (const fn of this.resetListeners) fn();
  }

  /**
   * Frees the histograms (WebAssembly memory) of a profiler built for one use (one worker's view,
   * runtime/cluster/); the profiler is not used afterwards. In-memory distributions only.
   */
  destroy(): void {
    for (const g of this.graphs.values()) {
      for (const d of [g.total, g.upstream, g.overhead, g.acquire]) d.destroy();
      for (const s of g.steps) {
        s.latency.destroy();
        for (const d of s.subops.values()) d.destroy();
      }
    }
    this.graphs.clear();
  }

  /** Calls `fn` after every reset() (the snapshot store rewrites its state then). Returns an unsubscribe. */
  onReset(fn: () => void): () => void {
    this.resetListeners.push(fn);
    return () => {
      const i = this.resetListeners.indexOf(fn);
      if (i >= 0) this.resetListeners.splice(i, 1);
    };
  }

  /**
   * The cumulative statistics of every graph as plain JSON (profiler-state.ts), histograms encoded.
   * Steps and sub-operations that never ran are left out. Per-request frames are not included.
   */
  exportState(): ProfilerState {
    const enc = (s: Distribution) => encodeDist(s, this.encoded);
    const graphs: ProfilerState['graphs'] = [];
    for (const g of this.graphs.values()) {
      graphs.push({
        pipeline_id: g.pipelineId, pipeline: g.variant, ok: g.ok, errors: g.errors,
        total: enc(g.total), upstream: enc(g.upstream), overhead: enc(g.overhead), acquire: enc(g.acquire),
        steps: g.rows.filter((s) => s.latency.count > 0 || s.subops.size > 0 || s.slow > 0).map((s) => ({
          name: s.step, phase: phaseName(s.phase), slow: s.slow, slow_log_suppressed: s.suppressedTotal,
          latency: enc(s.latency),
          subops: [...s.subops].filter(([, d]) => d.count > 0).map(([name, d]) => ({ name, dist: enc(d) })),
        })),
      });
    }
    return { format: STATE_FORMAT, version: STATE_VERSION, written: new Date().toISOString(), since: new Date(this.since).toISOString(), graphs };
  }

  /**
   * Adds a state written by exportState() (parsed JSON, validated here) into this profiler: counters
   * add, histograms merge, so importing into a fresh profiler reproduces the statistics exactly.
   * Throws StateFormatError — having changed nothing — when the state is malformed.
   */
  importState(json: unknown): RestoreSummary {
    const state = parseState(json);
    const dists: DistState[] = [];
    for (const g of state.graphs) {
      dists.push(g.total, g.upstream, g.overhead, g.acquire);
      for (const s of g.steps) {
        dists.push(s.latency);
        for (const o of s.subops) dists.push(o.dist);
      }
    }
    const decoded = decodeAll(dists);
    let i = 0;
    let steps = 0;
    let requests = 0;
    this.file?.begin();
    try {
      for (const gs of state.graphs) {
        const g = this.graph(gs.pipeline_id, gs.pipeline);
        g.ok += gs.ok;
        g.errors += gs.errors;
        requests += gs.total.count;
        for (const d of [g.total, g.upstream, g.overhead, g.acquire]) mergeDist(d, dists[i], decoded[i++]);
        const key = new GraphKey(gs.pipeline_id, gs.pipeline, 0);
        for (const ss of gs.steps) {
          const s = this.bind(key, ss.name, ss.phase === 'request' ? Phase.Request : Phase.Response) as StepStats;
          steps++;
          s.slow += ss.slow;
          s.suppressedTotal += ss.slow_log_suppressed;
          mergeDist(s.latency, dists[i], decoded[i++]);
          for (const o of ss.subops) {
            let d = s.subops.get(o.name);
            if (d === undefined) {
              d = new LatencyStats(this.settings.histogramBuckets);
              s.subops.set(o.name, d);
            }
            mergeDist(d, dists[i], decoded[i++]);
          }
        }
      }
    } finally {
      this.file?.end();
      for (const h of decoded) h.destroy();
    }
    const since = Date.parse(state.since);
    if (Number.isFinite(since) && since < this.since) this.since = since;
    return { graphs: state.graphs.length, steps, requests, written: state.written };
  }
}
