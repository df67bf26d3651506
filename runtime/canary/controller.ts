// The canary controller: SPEC §3's state machine for every canary of this proxy. It owns the
// records (persisted in the store before any answer), the graphs' split (through CanaryGraphs), the
// evaluation timer per canary, and emits exactly one CanaryEvent per transition to the sink.
//
// Transitions are compare-and-set on the record's `version`. Everything after the one await of a
// transition (building a graph) re-checks the version, so a concurrent promote and rollback end with
// exactly one winner; a rollback never waits and always wins a race it takes part in.
import type { Log } from '../log/index.ts';
import { randomBytes } from 'node:crypto';
import { canaryDurationMs } from '../config/index.ts';
import { longInterval, longTimeout } from './long-timers.ts';
import { divergedEventId, transitionEventId, warningEventId, type CanaryEvent, type CanaryEventSink, type CanaryEventType, type RuleReading,
  type SideMetrics, type TransitionEventType, fleetEventId } from './events.ts';
import { CanaryError } from './errors.ts';
import { evaluate, formatDuration, volumeConditions, type CustomValues, type Evaluation } from './evaluator.ts';
import type { Aim, CanaryGraphs, PreparedCandidate, RetainedBaseline } from './graphs.ts';
import { isShadowStage, parseStartRequest, stageShadowPct, type CanaryDefaults, type CanarySpec, type CandidateConfig } from './spec.ts';
import { ShadowTracker, ShadowWindow } from './shadow-windows.ts';
import type { ShadowFigures, ShadowSettings } from './shadow.ts';
import type { CanaryRecord, CanaryRecords, CanaryStatus, EvaluationView, HistoryEntry, PromotionRecord, Sample } from './store.ts';
import type { Promotions } from './promotions.ts';
import { httpGate, type GateCaller } from './gate.ts';
import { SideWindow, WindowTracker, emptyHistogram, type CanaryMetricsSource } from './windows.ts';
import { CustomMetricWindows } from './custom-metrics.ts';
import { diffsView, historyView, iso, listRow, reportView, statusView } from './views.ts';

export interface Clock { now(): number }
export const systemClock: Clock = { now: () => Date.now() };

/** Runs `fn` every `ms`; returns a cancel function. */
export type Scheduler = (ms: number, fn: () => void) => () => void;
export const intervalScheduler: Scheduler = longInterval;

const silentLog: Pick<Log, 'info' | 'warn' | 'error'> = { info() {}, warn() {}, error() {} };

/** What an evaluation asks of the fleet's evidence beyond the arms. */
export interface FleetWants {
  /** The plugin metrics the canary's custom_metrics rules name. */
  custom: readonly string[];
  /** A shadow canary: its ring's size (the merged diffs kept); null: not a shadow canary. */
  maxDiffs: number | null;
}

/** One evaluation window read from every instance of a fleet (runtime/fleet/evidence.ts). */
export interface FleetWindows {
  baseline: SideWindow;
  candidate: SideWindow;
  /** The custom metrics' values over the fleet's window (FleetWants.custom). */
  custom?: CustomValues;
  /** A shadow canary: the fleet's shadowed requests in the window, and its cumulative figures (diffs merged). */
  shadow?: { window: ShadowWindow; figures: ShadowFigures } | null;
  /** Which instances were read, which could not be; `quorum` false: too few answered to decide. */
  evidence: { instances_read: string[]; unreadable: Array<{ instance_id: string; error: string }>; quorum: boolean };
}

/**
 * How the controller takes part in a fleet (runtime/fleet/canary-sync.ts); absent: one instance.
 * Only the instance that evaluates schedules evaluations; each runs as one fleet transaction, on
 * windows merged from every instance.
 */
export interface FleetHooks {
  evaluates(): boolean;
  /** Runs one scheduled evaluation as a fleet transaction. */
  evaluation(id: string, run: () => Promise<unknown>): Promise<unknown>;
  windows(canaryId: string, pipelineId: string, want: FleetWants): Promise<FleetWindows>;
  /** A shadow canary's cumulative figures across the instances (read before a status or `…/diffs` is answered). */
  shadow(canaryId: string, pipelineId: string, maxDiffs: number): Promise<ShadowFigures | null>;
  /** The candidate as this instance loads it (content-addressed modules fetched and verified). */
  candidate(c: CandidateConfig): Promise<CandidateConfig>;
}

export interface ControllerOptions {
  store: CanaryRecords;
  graphs: CanaryGraphs;
  metrics: CanaryMetricsSource;
  sink: CanaryEventSink;
  defaults: () => CanaryDefaults;
  clock?: Clock;
  /** null: no automatic evaluation (tests call evaluate()). */
  scheduler?: Scheduler | null;
  warningShare?: number;
  gracePeriodMs?: number;
  log?: Pick<Log, 'info' | 'warn' | 'error'>;
  /** Where a completion makes its graph the pipeline's baseline durably; null: only in memory. */
  promotions?: Promotions | null;
  /** How a stage's pre-promotion gate is called (tests may replace it); default: an HTTP POST. */
  gate?: GateCaller;
  fleet?: FleetHooks | null;
}

/** A canary this process runs: its record and what lives only in memory. */
class LiveCanary {
  record: CanaryRecord;
  prepared: PreparedCandidate | null = null;
  readonly trackers = { baseline: new WindowTracker(), candidate: new WindowTracker() };
  readonly custom = new CustomMetricWindows();
  readonly stage = { baseline: new SideWindow(), candidate: new SideWindow() };
  lastEval: Evaluation | null = null;
  lastGate: { stage: number; ok: boolean; result: string; ms: number; at: number } | null = null;
  /** When the current evaluation window began. */
  windowStart = 0;
  cancel: (() => void) | null = null;
  /** A transition with an await (completion) is under way. */
  busy = false;
  evaluating = false;
  retained: RetainedBaseline | null = null;
  /** The promotion this canary's completion replaced (put back by restore-baseline). */
  replacedPromotion: PromotionRecord | null = null;
  /** Cancels the grace period's timer (the old baseline's release). */
  graceTimer: (() => void) | null = null;
  /** A shadow canary's comparison (kept after it ends: its counts stay readable). */
  shadow: ShadowFigures | null = null;
  readonly shadowTracker = new ShadowTracker();
  /** The shadowed requests of the current stage. */
  readonly shadowStage = new ShadowWindow();
  /** When the last canary.diverged was emitted (rate limit). */
  lastDivergedAt = -Infinity;
  /** In a fleet: the instances the current evaluation read (named in its decisions). */
  evidence: FleetWindows['evidence'] | null = null;
  /** In a fleet, on an instance that does not evaluate: the evaluator's last view (shown while it is of the current stage). */
  adopted: EvaluationView | null = null;
  constructor(record: CanaryRecord) {
    this.record = record;
  }
}

export type Listener = (entry: HistoryEntry) => void;

const aimOf = (r: CanaryRecord): Aim => ({ match: r.spec.match ?? null, sticky: r.spec.sticky ?? null, canaryId: r.id });

/** What the request path needs of a shadow canary at its current stage; null: mode "split". */
function shadowSettings(spec: CanarySpec, stage: number): ShadowSettings | null {
  const sh = spec.shadow;
  if (sh == null) return null;
  return { pct: stageShadowPct(spec, spec.stages[stage - 1]), ignorePaths: sh.ignore_paths, showValues: sh.show_values, maxDiffs: sh.max_diffs,
    upstreamReads: sh.upstream_reads === true, maxReads: sh.upstream_reads_concurrency ?? 4 };
}

const ACTIVE: ReadonlySet<CanaryStatus> = new Set(['active', 'paused']);

/** The diffs an evaluation's view carries to the instances that do not evaluate (what a status shows). */
const EVALUATION_VIEW_DIFFS = 5;

/** What a canary's evaluation reads of the fleet's evidence besides the arms. */
export function fleetWants(spec: CanarySpec): FleetWants {
  return { custom: spec.rollback_rules.custom_metrics.map((m) => m.metric), maxDiffs: spec.shadow == null ? null : spec.shadow.max_diffs };
}

export class CanaryController {
  private readonly store: CanaryRecords;
  private readonly graphs: CanaryGraphs;
  private readonly metrics: CanaryMetricsSource;
  private readonly sink: CanaryEventSink;
  private readonly defaults: () => CanaryDefaults;
  private readonly clock: Clock;
  private readonly scheduler: Scheduler | null;
  private readonly warningShare: number;
  readonly gracePeriodMs: number;
  private readonly log: Pick<Log, 'info' | 'warn' | 'error'>;
  private readonly promotions: Promotions | null;
  private readonly gate: GateCaller;
  private readonly fleet: FleetHooks | null;
  private readonly canaries = new Map<string, LiveCanary>();
  /** Pipelines with a canary starting (its candidate is being built). */
  private readonly starting = new Set<string>();
  private readonly listeners = new Map<string, Set<Listener>>();

  constructor(o: ControllerOptions) {
    this.store = o.store;
    this.graphs = o.graphs;
    this.metrics = o.metrics;
    this.sink = o.sink;
    this.defaults = o.defaults;
    this.clock = o.clock ?? systemClock;
    this.scheduler = o.scheduler === undefined ? intervalScheduler : o.scheduler;
    this.warningShare = o.warningShare ?? 0.8;
    this.gracePeriodMs = o.gracePeriodMs ?? 15 * 60_000;
    this.log = o.log ?? silentLog;
    this.promotions = o.promotions ?? null;
    this.gate = o.gate ?? httpGate;
    this.fleet = o.fleet ?? null;
    for (const r of this.store.all()) this.canaries.set(r.id, new LiveCanary(r));
  }

  // ---- queries --------------------------------------------------------------------------------

  private live(id: string): LiveCanary {
    const c = this.canaries.get(id);
    if (c === undefined) throw new CanaryError('PROXY_ERR_CANARY_NOT_FOUND', `no canary "${id}"`);
    return c;
  }

  record(id: string): CanaryRecord {
    return this.live(id).record;
  }

  ids(): string[] {
    return [...this.canaries.keys()];
  }

  /** The latest canary of pipeline `pipelineId` here (running or not), if any: the one whose shadow figures the pipeline keeps. */
  latest(pipelineId: string): CanaryRecord | null {
    let out: CanaryRecord | null = null;
    for (const c of this.canaries.values()) if (c.record.pipeline_id === pipelineId && (out === null || c.record.created_at > out.created_at)) out = c.record;
    return out;
  }

  list(status: CanaryStatus | 'all' = 'all'): { canaries: object[]; total: number } {
    const rows = [...this.canaries.values()].map((c) => c.record)
      .filter((r) => status === 'all' || r.status === status)
      .sort((a, b) => b.created_at - a.created_at || a.id.localeCompare(b.id))
      .map(listRow);
    return { canaries: rows, total: rows.length };
  }

  /**
   * Before a status or diffs is read: with workers, their arms and shadow figures are pulled and
   * merged; in a fleet, a shadow canary's figures are read from every instance and merged
   * (`id`: the canary read; an unknown one is left to the read to refuse).
   */
  async refresh(id?: string): Promise<void> {
    await this.graphs.refresh?.();
    const c = id === undefined ? undefined : this.canaries.get(id);
    const sh = c?.record.spec.shadow;
    if (this.fleet === null || c === undefined || sh == null) return;
    try {
      // null: no instance holds its figures any more (a later canary on the pipeline): the last merge stays.
      c.shadow = await this.fleet.shadow(c.record.id, c.record.pipeline_id, sh.max_diffs) ?? c.shadow;
    } catch (err) {
      // The instances cannot be listed (the store is unreachable): the last merged figures stay.
      this.log.warn('fleet shadow figures could not be read', { canary_id: c.record.id, error: (err as Error).message });
    }
  }

  /** GET /api/v1/canary/{id}. */
  status(id: string): Record<string, unknown> {
    return statusView(this.live(id), this.clock.now());
  }

  history(id: string): Record<string, unknown> {
    return historyView(this.live(id).record, this.store.history(id));
  }

  report(id: string): Record<string, unknown> {
    return reportView(this.live(id), this.clock.now());
  }

  /** GET /api/v1/canary/{id}/diffs: a shadow canary's divergence counts and its ring of diffs. */
  diffs(id: string): Record<string, unknown> {
    const c = this.live(id);
    if (c.record.spec.shadow == null) throw new CanaryError('PROXY_ERR_CANARY_NOT_SHADOW', `canary ${id} is not a shadow canary (mode "split")`);
    return diffsView(c, this.clock.now());
  }

  async samples(id: string): Promise<{ check_interval: string; samples: Sample[] }> {
    const r = this.live(id).record;
    return { check_interval: r.spec.rollback_rules.check_interval, samples: await this.store.samples(id) };
  }

  /**
   * GET /api/v1/canary/pipelines/{id}/baseline: what a pipeline's baseline runs and where it comes
   * from — the configuration file, or the promotion of a completed canary (with the file's steps
   * beside it, for `proxy canary adopt`).
   */
  baseline(pipelineId: string): Record<string, unknown> {
    if (!this.graphs.hasPipeline(pipelineId)) throw new CanaryError('PROXY_ERR_CANARY_UNKNOWN_PIPELINE', `no pipeline "${pipelineId}" on this proxy`);
    const p = this.promotions?.current(pipelineId) ?? null;
    const file = this.promotions?.fileConfig(pipelineId) ?? null;
    const shape = (c: { pipeline: { request: string[]; response: string[] }; steps: Record<string, unknown> }) => ({
      pipeline: { request: c.pipeline.request, response: c.pipeline.response }, steps: c.steps,
    });
    return {
      pipeline_id: pipelineId, source: p === null ? 'file' : 'promotion', version: this.graphs.baselineVersion(pipelineId),
      canary_id: p?.canary_id ?? null, promoted_at: p === null ? null : iso(p.promoted_at),
      config: p === null ? (file === null ? null : shape(file)) : shape(p.config),
      file: file === null ? null : shape(file),
    };
  }

  subscribe(id: string, fn: Listener): () => void {
    this.live(id);
    let set = this.listeners.get(id);
    if (set === undefined) this.listeners.set(id, set = new Set());
    set.add(fn);
    return () => { set!.delete(fn); };
  }

  // ---- transitions ----------------------------------------------------------------------------

  /** POST /api/v1/canary: validated, the candidate loaded and split, persisted, `canary.started`. */
  async start(body: unknown): Promise<Record<string, unknown>> {
    const spec = parseStartRequest(body, this.defaults());
    const pid = spec.pipeline_id;
    if (!this.graphs.hasPipeline(pid)) throw new CanaryError('PROXY_ERR_CANARY_UNKNOWN_PIPELINE', `no pipeline "${pid}" on this proxy`);
    this.checkFree(pid);
    this.starting.add(pid);
    let prepared: PreparedCandidate;
    try {
      try {
        prepared = await this.graphs.prepare(pid, await this.local(spec.candidate_config), this.defaults().plugin_dirs);
      } catch (err) {
        throw new CanaryError('PROXY_ERR_CANARY_CANDIDATE_REFUSED', `candidate refused: ${(err as Error).message}`, undefined, err);
      }
    } finally {
      this.starting.delete(pid);
    }
    this.checkFree(pid);
    const now = this.clock.now();
    const first = spec.stages[0];
    const record: CanaryRecord = {
      id: `c-${randomBytes(6).toString('hex')}`, pipeline_id: pid, status: 'active', version: 1, spec,
      current_stage: 1, traffic_pct: first.traffic_pct, created_at: now, stage_entered_at: now, stage_candidate_requests: 0,
      timers: {}, warned: [], baseline_version: this.graphs.baselineVersion(pid), candidate_version: prepared.version,
      stages_visited: [{ stage: 1, traffic_pct: first.traffic_pct, entered_at: now, left_at: null, candidate_requests: 0 }], outcome: null,
    };
    const c = new LiveCanary(record);
    c.prepared = prepared;
    this.graphs.activate(prepared, record.traffic_pct, aimOf(record), shadowSettings(spec, 1));
    c.shadow = this.graphs.shadow(pid);
    this.primeWindows(c);
    this.canaries.set(record.id, c);
    this.commit(c, 'started', `canary started at stage 1 of ${spec.stages.length} (${record.traffic_pct}%)`, 'canary.started');
    this.schedule(c);
    this.log.info('canary started', { canary_id: record.id, pipeline_id: pid, traffic_pct: record.traffic_pct, candidate_version: record.candidate_version });
    if (this.completesOnEntry(c)) await this.complete(c, 'automatic');
    return {
      canary_id: record.id, pipeline_id: pid, status: c.record.status, current_stage: record.current_stage, traffic_pct: record.traffic_pct,
      created_at: iso(now), baseline_version: record.baseline_version, candidate_version: record.candidate_version,
      metrics_url: `/api/v1/canary/${record.id}/metrics`,
    };
  }

  private checkFree(pid: string): void {
    for (const c of this.canaries.values()) {
      if (c.record.pipeline_id === pid && ACTIVE.has(c.record.status)) {
        throw new CanaryError('PROXY_ERR_CANARY_EXISTS', `canary ${c.record.id} is already ${c.record.status} on pipeline "${pid}"`,
          { canary_id: c.record.id });
      }
    }
    if (this.starting.has(pid)) throw new CanaryError('PROXY_ERR_CANARY_EXISTS', `a canary is starting on pipeline "${pid}"`);
  }

  private checkVersion(c: LiveCanary, expected: number | undefined): void {
    if (expected !== undefined && expected !== c.record.version) {
      throw new CanaryError('PROXY_ERR_CANARY_CONFLICT', `canary ${c.record.id} is at version ${c.record.version}, not ${expected}`);
    }
  }

  private checkActive(c: LiveCanary, what: string): void {
    if (!ACTIVE.has(c.record.status)) throw new CanaryError('PROXY_ERR_CANARY_INVALID_STATE', `cannot ${what} canary ${c.record.id}: it is ${c.record.status}`);
  }

  /** POST …/promote. */
  async promote(id: string, opts: { force?: boolean; expectedVersion?: number } = {}): Promise<Record<string, unknown>> {
    const c = this.live(id);
    this.checkVersion(c, opts.expectedVersion);
    this.checkActive(c, 'promote');
    if (c.busy) throw new CanaryError('PROXY_ERR_CANARY_CONFLICT', `canary ${id} is completing`);
    const r = c.record;
    if (r.status === 'active' && r.spec.auto_promote) {
      throw new CanaryError('PROXY_ERR_CANARY_INVALID_STATE', `canary ${id} promotes automatically; promote is valid only while it is paused at a manual gate`);
    }
    if (r.status === 'active' && opts.force !== true) {
      const stage = r.spec.stages[r.current_stage - 1];
      const conds = volumeConditions({ spec: r.spec, stage, now: this.clock.now(), stageEnteredAt: r.stage_entered_at,
        stageCandidateRequests: r.stage_candidate_requests });
      const unmet = conds.filter((x) => !x.met);
      if (unmet.length > 0) {
        throw new CanaryError('PROXY_ERR_CANARY_INVALID_STATE', `stage ${r.current_stage} conditions ` +
          `unmet: ${unmet.map((x) => `${x.condition} ${x.value} < ${x.threshold}`).join(', ')} (force skips them)`, { conditions: conds });
      }
    }
    const previous = r.current_stage;
    if (opts.force !== true) {
      const version = r.version;
      const gate = await this.passGate(c, 'manual');
      if (gate !== null && !gate.ok) {
        throw new CanaryError('PROXY_ERR_CANARY_INVALID_STATE', `stage ${previous}'s gate did not confirm the promotion: ${gate.detail} (force ` +
          `skips it)`, { gate });
      }
      if (r.version !== version || !ACTIVE.has(r.status)) throw new CanaryError('PROXY_ERR_CANARY_CONFLICT', `canary ${id} changed while its gate ` +
        `was asked (now ${r.status})`);
    }
    await this.advance(c, 'manual');
    const now = this.clock.now();
    return {
      canary_id: id, previous_stage: previous, current_stage: c.record.current_stage, traffic_pct: c.record.traffic_pct,
      promoted_at: iso(now), status: c.record.status,
      message: c.record.status === 'completed' ? `canary completed: the candidate is the baseline of "${r.pipeline_id}"`
      : `promoted to stage ${c.record.current_stage} of ${r.spec.stages.length} (${c.record.traffic_pct}%)`,
    };
  }

  /** POST …/rollback (and the rollback engine). Never awaits: it always wins a race. */
  rollback(id: string, opts: { reason?: string; expectedVersion?: number; triggeredBy?: 'manual' | 'automatic';
    rules?: RuleReading[] } = {}): Record<string, unknown> {
    const c = this.live(id);
    this.checkVersion(c, opts.expectedVersion);
    this.checkActive(c, 'roll back');
    const r = c.record;
    // 1. Traffic to the baseline at once; requests already on the candidate hold their graph and finish.
    this.graphs.remove(r.pipeline_id);
    c.prepared = null; // 2. the candidate is no longer referenced here
    this.unschedule(c);
    const now = this.clock.now();
    const triggeredBy = opts.triggeredBy ?? 'manual';
    const reason = opts.reason ?? (triggeredBy === 'manual' ? 'manual rollback' : 'rollback rule breached');
    r.outcome = { at: now, reason, triggered_by: triggeredBy, rules: opts.rules ?? [],
      final: { baseline: c.stage.baseline.metrics(), candidate: c.stage.candidate.metrics() } };
    r.status = 'rolled_back';
    this.leaveStage(c, now);
    this.commit(c, 'rolled_back', `rolled back (${triggeredBy}): ${reason}`, 'canary.rolled_back',
      { triggered_by: triggeredBy, reason, rules: r.outcome.rules });
    this.log.warn('canary rolled back', { canary_id: id, pipeline_id: r.pipeline_id, triggered_by: triggeredBy, reason });
    const pick = (m: SideMetrics) => ({ requests: m.requests, error_rate_pct: m.error_rate_pct, latency_p95_ms: m.latency_p95_ms });
    return {
      canary_id: id, status: r.status, rolled_back_at: iso(now), reason, triggered_by: triggeredBy,
      final_metrics: { baseline: pick(r.outcome.final.baseline), candidate: pick(r.outcome.final.candidate) },
    };
  }

  /** PATCH …: only the traffic changes. */
  patch(id: string, trafficPct: unknown, expectedVersion?: number): Record<string, unknown> {
    const c = this.live(id);
    if (typeof trafficPct !== 'number' || !Number.isInteger(trafficPct) || trafficPct < 0 || trafficPct > 100) {
      throw new CanaryError('PROXY_ERR_CANARY_INVALID_TRAFFIC', `traffic_pct: expected an integer 0..100, received ${JSON.stringify(trafficPct)}`);
    }
    this.checkVersion(c, expectedVersion);
    this.checkActive(c, 'change the traffic of');
    if (c.busy) throw new CanaryError('PROXY_ERR_CANARY_CONFLICT', `canary ${id} is completing`);
    const from = c.record.traffic_pct;
    c.record.traffic_pct = trafficPct;
    this.graphs.setTraffic(c.record.pipeline_id, trafficPct);
    this.commit(c, 'traffic_changed', `traffic ${from}% → ${trafficPct}% (stage ${c.record.current_stage} unchanged)`, null, { previous_traffic_pct: from });
    return { canary_id: id, traffic_pct: trafficPct, updated_at: iso(this.clock.now()), message: `traffic set to ${trafficPct}% at ` +
      `stage ${c.record.current_stage}` };
  }

  /** POST …/restore-baseline: the old baseline back, within the grace period. */
  restoreBaseline(id: string): Record<string, unknown> {
    const c = this.live(id);
    if (c.record.status !== 'completed' || c.retained === null) {
      throw new CanaryError('PROXY_ERR_CANARY_INVALID_STATE', `canary ${id} retains no old baseline (${c.record.status !== 'completed' ? `it ` +
        `is ${c.record.status}` : 'grace period over or restarted since'})`);
    }
    const old = c.retained;
    this.graphs.restore(c.record.pipeline_id, old);
    this.promotions?.restore(c.record.pipeline_id, c.replacedPromotion);
    this.release(c);
    this.commit(c, 'baseline_restored', `old baseline ${old.version} restored`, null);
    return { canary_id: id, restored_at: iso(this.clock.now()), baseline_version: old.version, message: `baseline ${old.version} of ` +
      `"${c.record.pipeline_id}" restored` };
  }

  /** One evaluation now (the timer calls this every check_interval). */
  async evaluate(id: string): Promise<Evaluation | null> {
    const c = this.live(id);
    if (!ACTIVE.has(c.record.status) || c.evaluating || c.busy) return null;
    c.evaluating = true;
    try {
      const pid = c.record.pipeline_id;
      // With workers, their arms are pulled and merged first.
      await this.graphs.refresh?.();
      const rules = c.record.spec.rollback_rules.custom_metrics;
      // In a fleet the custom metrics are every instance's, merged with the arms (runtime/fleet/custom-evidence.ts).
      const fleet = this.fleet === null ? null : await this.fleet.windows(id, pid, fleetWants(c.record.spec));
      const requests = { baseline: this.graphs.totals(pid, 'baseline')?.requests ?? 0, candidate: this.graphs.totals(pid, 'candidate')?.requests ?? 0 };
      const custom = fleet?.custom ?? await c.custom.read(this.metrics, pid, rules, requests);
      if (!ACTIVE.has(c.record.status) || c.busy) return null;
      if (fleet !== null && !fleet.evidence.quorum) {
        // Too few instances answered: no window, no decision; the timers neither start nor reset.
        const e = this.entry(c, 'evidence_incomplete', `evaluation inconclusive: read ${fleet.evidence.instances_read.length} instance(s); not ` +
          `read: ${fleet.evidence.unreadable.map((u) => `${u.instance_id} (${u.error})`).join(', ')}`, { evidence: fleet.evidence });
        this.store.save(c.record, [e]);
        this.notify(id, e);
        return null;
      }
      c.evidence = fleet?.evidence ?? null;
      try {
        return await this.evaluateNow(c, custom, fleet);
      } finally {
        c.evidence = null;
      }
    } finally {
      c.evaluating = false;
    }
  }

  private async evaluateNow(c: LiveCanary, custom: CustomValues, fleet: FleetWindows | null = null): Promise<Evaluation> {
    const r = c.record;
    const now = this.clock.now();
    const window = fleet ?? {
      baseline: c.trackers.baseline.take(this.graphs.totals(r.pipeline_id, 'baseline')),
      candidate: c.trackers.candidate.take(this.graphs.totals(r.pipeline_id, 'candidate')),
    };
    c.stage.baseline.add(window.baseline);
    c.stage.candidate.add(window.candidate);
    const stage = r.spec.stages[r.current_stage - 1];
    if (fleet?.shadow != null) c.shadow = fleet.shadow.figures;
    const shadow = r.spec.shadow == null ? null
      : { window: fleet?.shadow?.window ?? c.shadowTracker.take(this.graphs.shadow(r.pipeline_id)), stage: c.shadowStage };
    if (shadow !== null) c.shadowStage.add(shadow.window);
    // A shadow stage's candidate requests are the shadowed ones (no client is served by it).
    r.stage_candidate_requests += shadow !== null && isShadowStage(r.spec, stage) ? shadow.window.sampled : window.candidate.requests;
    const visit = r.stages_visited[r.stages_visited.length - 1];
    if (visit !== undefined) visit.candidate_requests = r.stage_candidate_requests;
    const ev = evaluate({
      spec: r.spec, stage, now, windowStart: c.windowStart, stageEnteredAt: r.stage_entered_at, stageCandidateRequests: r.stage_candidate_requests,
      timers: r.timers, warned: r.warned, window, stageWindow: c.stage, custom, warningShare: this.warningShare, shadow,
    });
    c.lastEval = ev;
    c.windowStart = now;
    const entries: HistoryEntry[] = [];
    for (const rule of Object.keys(ev.timers)) {
      if (r.timers[rule] === undefined) entries.push(this.entry(c, 'breach_started', `${rule} beyond its threshold`,
        { rule, reading: ev.rules.find((x) => x.rule === rule) }, ev.timers[rule]));
    }
    for (const rule of Object.keys(r.timers)) {
      if (ev.timers[rule] === undefined && ev.result !== 'inconclusive') entries.push(this.entry(c, 'breach_cleared', `${rule} back within its ` +
        `threshold`, { rule }, now));
    }
    r.timers = ev.timers;
    r.warned = ev.warned;
    const sample: Sample = {
      at: now, stage: r.current_stage, traffic_pct: r.traffic_pct,
      baseline: { ...window.baseline.metrics(), errors: window.baseline.errors },
      candidate: { ...window.candidate.metrics(), errors: window.candidate.errors },
    };
    this.store.addSample(r.id, sample);
    const sc = shadow === null ? null : c.shadow;
    this.store.evaluated?.(r.id, { stage: r.current_stage, evaluation: ev, metrics: { baseline: c.stage.baseline.metrics(),
      candidate: c.stage.candidate.metrics() }, shadow_stage: shadow === null ? null : c.shadowStage.view(),
    shadow_figures: sc === null ? null : { sampled: sc.sampled, diverged: sc.diverged, by_kind: { ...sc.byKind }, memory_bytes: sc.memoryBytes,
      reads: sc.reads, reads_in_flight: sc.readsInFlight, diffs: sc.diffs().slice(0, EVALUATION_VIEW_DIFFS) } });
    if (ev.warnings.length > 0) {
      entries.push(this.entry(c, 'threshold_warning', ev.warnings.map((w) => `${w.rule} ${w.value} (threshold ${w.threshold})`).join('; '),
        { rules: ev.warnings }, now));
    }
    this.store.save(r, entries);
    for (const e of entries) this.notify(r.id, e);
    if (ev.warnings.length > 0) this.emit(c, 'canary.threshold_warning', { rules: ev.warnings,
      metrics: { baseline: window.baseline.metrics(), candidate: window.candidate.metrics() } }, warningEventId(r.id, now));
    if (shadow !== null && shadow.window.diverged > 0) this.reportDivergence(c, shadow.window, now);
    if (ev.rollback.length > 0) {
      const reason = ev.rollback.map((x) => `${x.rule} ${x.value} > ${x.threshold} for ${x.sustained_for}`).join('; ');
      this.rollback(r.id, { reason, triggeredBy: 'automatic', rules: ev.rollback });
      return ev;
    }
    if (r.status === 'active' && r.spec.auto_promote && ev.promotable) {
      if (stage.manual_gate === true) {
        r.status = 'paused';
        this.commit(c, 'paused', `stage ${r.current_stage} conditions met; waiting at the manual gate`, null);
      } else {
        const version = r.version;
        const gate = await this.passGate(c, 'automatic');
        // A failed gate holds the stage (asked again at the next evaluation); a rollback or another
        // transition while it was asked wins.
        if ((gate !== null && !gate.ok) || r.version !== version || r.status !== 'active') return ev;
        try {
          await this.advance(c, 'automatic');
        } catch (err) {
          this.log.error('canary promotion failed', { canary_id: r.id, error: (err as Error).message });
        }
      }
    }
    return ev;
  }

  /**
   * The current stage's pre-promotion gate, if it has one: POSTed the canary's state; its answer is
   * recorded in the history (`gate_passed` or `gate_failed`). null: the stage has no gate.
   */
  private async passGate(c: LiveCanary, by: 'manual' | 'automatic'): Promise<{ ok: boolean; detail: string; ms: number; url: string } | null> {
    const r = c.record;
    const stage = r.spec.stages[r.current_stage - 1];
    const gate = stage.gate;
    if (gate === undefined) return null;
    const next = r.spec.stages[r.current_stage];
    const res = await this.gate(gate, {
      type: 'confirm-promotion', canary_id: r.id, pipeline_id: r.pipeline_id, stage: r.current_stage, traffic_pct: r.traffic_pct,
      next_stage: next === undefined ? null : r.current_stage + 1, next_traffic_pct: next?.traffic_pct ?? null, completes: next === undefined,
      triggered_by: by, baseline_version: r.baseline_version, candidate_version: r.candidate_version,
      metrics: { window: 'stage', baseline: c.stage.baseline.metrics(), candidate: c.stage.candidate.metrics() },
      description: r.spec.description,
    });
    const result = { ...res, url: gate.url };
    c.lastGate = { stage: r.current_stage, ok: res.ok, result: res.detail, ms: res.ms, at: this.clock.now() };
    const e = this.entry(c, res.ok ? 'gate_passed' : 'gate_failed',
      res.ok ? `gate ${gate.url} confirmed the promotion (${res.detail}, ${res.ms} ms)` : `gate ${gate.url} did not confirm the ` +
        `promotion: ${res.detail} (${res.ms} ms); the stage holds`,
      { url: gate.url, ok: res.ok, result: res.detail, ms: res.ms, triggered_by: by });
    this.store.save(r, [e]);
    this.notify(r.id, e);
    if (!res.ok) this.log.warn('canary gate did not confirm the promotion; the stage holds',
      { canary_id: r.id, stage: r.current_stage, url: gate.url, result: res.detail });
    return result;
  }

  /** Stage n → n+1, or completion past (or on reaching) the last stage. */
  private async advance(c: LiveCanary, by: 'manual' | 'automatic'): Promise<void> {
    const r = c.record;
    if (r.current_stage >= r.spec.stages.length) {
      await this.complete(c, by);
      return;
    }
    const now = this.clock.now();
    const previous = r.current_stage;
    this.leaveStage(c, now);
    r.current_stage = previous + 1;
    const st = r.spec.stages[r.current_stage - 1];
    r.traffic_pct = st.traffic_pct;
    r.status = 'active';
    r.stage_entered_at = now;
    r.stage_candidate_requests = 0;
    r.stages_visited.push({ stage: r.current_stage, traffic_pct: st.traffic_pct, entered_at: now, left_at: null, candidate_requests: 0 });
    c.stage.baseline.reset();
    c.stage.candidate.reset();
    c.shadowStage.reset();
    this.graphs.setTraffic(r.pipeline_id, st.traffic_pct);
    // Into an exposed stage: the shadowing ends, unless the stage keeps a shadow_pct of its own.
    if (r.spec.shadow != null) this.graphs.setShadowPct(r.pipeline_id, stageShadowPct(r.spec, st));
    this.commit(c, 'promoted', `promoted (${by}) to stage ${r.current_stage} of ${r.spec.stages.length} (${st.traffic_pct}%)`, 'canary.promoted',
      { previous_stage: previous, triggered_by: by });
    if (this.completesOnEntry(c)) await this.complete(c, by);
  }

  private completesOnEntry(c: LiveCanary): boolean {
    const r = c.record;
    const st = r.spec.stages[r.current_stage - 1];
    return r.current_stage === r.spec.stages.length && canaryDurationMs(st.min_duration) === 0 && st.min_requests === 0;
  }

  /** The candidate becomes the baseline; the old one is kept for the grace period. */
  private async complete(c: LiveCanary, by: 'manual' | 'automatic'): Promise<void> {
    const r = c.record;
    const version = r.version;
    const prepared = c.prepared;
    if (prepared === null) throw new CanaryError('PROXY_ERR_CANARY_INVALID_STATE', `canary ${r.id} has no candidate loaded`);
    c.busy = true;
    let graph;
    try {
      graph = await this.graphs.buildBaseline(prepared);
    } finally {
      c.busy = false;
    }
    if (r.version !== version || !ACTIVE.has(r.status)) {
      // A rollback (or another transition) won while the graph was built: it stays unpublished.
      throw new CanaryError('PROXY_ERR_CANARY_CONFLICT', `canary ${r.id} changed while completing (now ${r.status}); the completion was abandoned`);
    }
    c.retained = this.graphs.swapBaseline(prepared, graph);
    c.prepared = null;
    this.unschedule(c);
    const now = this.clock.now();
    // Durable before the completion is told: a restart or reload from here on keeps this graph.
    if (this.promotions !== null) c.replacedPromotion = this.promotions.promote(r.pipeline_id, r.id, prepared.config, r.candidate_version, now);
    r.status = 'completed';
    r.outcome = { at: now, reason: 'completed', triggered_by: by, rules: [],
      final: { baseline: c.stage.baseline.metrics(), candidate: c.stage.candidate.metrics() } };
    this.leaveStage(c, now);
    this.commit(c, 'completed', `completed: candidate ${r.candidate_version} is the baseline; old baseline ${r.baseline_version} kept ` +
      `for ${formatDuration(this.gracePeriodMs)}`, 'canary.completed', { triggered_by: by });
    c.graceTimer = longTimeout(this.gracePeriodMs, () => {
      if (c.retained === null) return;
      this.release(c);
      this.commit(c, 'baseline_released', 'grace period over: the old baseline was released', null);
    });
  }

  private release(c: LiveCanary): void {
    c.retained = null;
    c.graceTimer?.();
    c.graceTimer = null;
  }

  private leaveStage(c: LiveCanary, now: number): void {
    const v = c.record.stages_visited[c.record.stages_visited.length - 1];
    if (v !== undefined && v.left_at === null) {
      v.left_at = now;
      v.candidate_requests = c.record.stage_candidate_requests;
    }
  }

  /** Resumes every active or paused canary of the store: candidate rebuilt before traffic is split. */
  async resume(): Promise<void> {
    for (const c of this.canaries.values()) {
      const r = c.record;
      if (!ACTIVE.has(r.status) || c.prepared !== null) continue;
      try {
        c.prepared = await this.graphs.prepare(r.pipeline_id, r.spec.candidate_config, this.defaults().plugin_dirs);
      } catch (err) {
        this.log.error('canary candidate failed to load on resume; rolling back', { canary_id: r.id, error: (err as Error).message });
        this.rollback(r.id, { reason: `candidate failed to load on resume: ${(err as Error).message}`, triggeredBy: 'automatic' });
        continue;
      }
      this.graphs.activate(c.prepared, r.traffic_pct, aimOf(r), shadowSettings(r.spec, r.current_stage));
      c.shadow = this.graphs.shadow(r.pipeline_id);
      this.primeWindows(c);
      const entry = this.entry(c, 'resumed', `resumed after a restart at stage ${r.current_stage} (${r.traffic_pct}%), timers from persisted times`,
        { timers: r.timers });
      this.store.save(r, [entry]);
      this.notify(r.id, entry);
      this.schedule(c);
      this.log.info('canary resumed', { canary_id: r.id, pipeline_id: r.pipeline_id, stage: r.current_stage, traffic_pct: r.traffic_pct });
    }
  }

  // ---- a fleet (runtime/fleet/canary-sync.ts) -------------------------------------------------

  /**
   * Makes this instance serve what the fleet store says of a canary (written by another instance,
   * or put back after a lost race): a new active canary's candidate is loaded and split, a weight
   * or stage change applied, a rollback sends everything to the baseline, a completion swaps the
   * graphs. No event is emitted: the instance that wrote the transition did.
   */
  async adopt(next: CanaryRecord, live = true): Promise<void> {
    let c = this.canaries.get(next.id);
    if (c === undefined) {
      c = new LiveCanary(next);
      this.canaries.set(next.id, c);
      // A canary completed as it started (a one-stage schedule) is applied too, but only as it
      // happens: one completed before this instance started is history.
      const completing = live && next.status === 'completed';
      if (!ACTIVE.has(next.status) && !completing) return;
      c.record = { ...next, status: 'rolled_back' }; // not split until its candidate is loaded
      c.prepared = await this.graphs.prepare(next.pipeline_id, await this.local(next.spec.candidate_config), this.defaults().plugin_dirs);
      c.record = next;
      if (completing) {
        await this.completeAdopted(c, next);
        return;
      }
      this.graphs.activate(c.prepared, next.traffic_pct, aimOf(next), shadowSettings(next.spec, next.current_stage));
      c.shadow = this.graphs.shadow(next.pipeline_id);
      this.primeWindows(c);
      this.schedule(c);
      return;
    }
    const before = c.record;
    c.record = next;
    if (ACTIVE.has(next.status)) {
      if (c.prepared === null) {
        c.prepared = await this.graphs.prepare(next.pipeline_id, await this.local(next.spec.candidate_config), this.defaults().plugin_dirs);
        this.graphs.activate(c.prepared, next.traffic_pct, aimOf(next), shadowSettings(next.spec, next.current_stage));
        c.shadow = this.graphs.shadow(next.pipeline_id);
        this.primeWindows(c);
      } else {
        this.graphs.setTraffic(next.pipeline_id, next.traffic_pct);
      }
      if (before.current_stage !== next.current_stage) {
        c.stage.baseline.reset();
        c.stage.candidate.reset();
        c.shadowStage.reset();
        // A shadow canary's next stage shadows its own share here too (0: the shadowing ends).
        if (next.spec.shadow != null) this.graphs.setShadowPct(next.pipeline_id, stageShadowPct(next.spec, next.spec.stages[next.current_stage - 1]));
      }
      this.schedule(c);
      return;
    }
    this.unschedule(c);
    if (c.prepared === null) return;
    if (next.status === 'completed') await this.completeAdopted(c, next);
    else this.graphs.remove(next.pipeline_id);
    c.prepared = null;
  }

  /** Another instance completed the canary: its candidate becomes the baseline here too (the old one retained). */
  private async completeAdopted(c: LiveCanary, next: CanaryRecord): Promise<void> {
    const prepared = c.prepared!;
    c.busy = true;
    try {
      const graph = await this.graphs.buildBaseline(prepared);
      c.retained = this.graphs.swapBaseline(prepared, graph);
      if (this.promotions !== null) c.replacedPromotion = this.promotions.promote(next.pipeline_id, next.id, prepared.config, next.candidate_version,
        next.outcome?.at ?? this.clock.now());
    } finally {
      c.busy = false;
    }
    c.prepared = null;
    // The old baseline is kept here for the grace period, as on the instance that completed it.
    c.graceTimer = longTimeout(this.gracePeriodMs, () => this.release(c));
  }

  /**
   * In a fleet whose store has been unreachable past fleet.fail_safe_after: all of the canary's
   * traffic to the baseline on this instance only (the record is not changed; adopt() restores the
   * store's weights once it is back).
   */
  toBaseline(id: string): void {
    const c = this.canaries.get(id);
    if (c !== undefined && ACTIVE.has(c.record.status) && c.prepared !== null) this.graphs.setTraffic(c.record.pipeline_id, 0);
  }

  /**
   * In a fleet: tells this canary's channels that this instance cannot reach the store
   * (canary.store_unreachable) or has sent its traffic to the baseline for that (canary.fail_safe).
   * Sent by the instance itself, to the local sink: the store cannot carry it. Only for a canary
   * that is running here.
   */
  announceFleet(id: string, type: 'canary.store_unreachable' | 'canary.fail_safe', fleet: NonNullable<CanaryEvent['fleet']>, sink: CanaryEventSink): void {
    const c = this.canaries.get(id);
    if (c === undefined || !ACTIVE.has(c.record.status)) return;
    const now = this.clock.now();
    this.emit(c, type, { fleet }, fleetEventId(c.record.id, fleet.instance_id, now, type), sink);
  }

  private local(c: CandidateConfig): Promise<CandidateConfig> {
    return this.fleet === null ? Promise.resolve(c) : this.fleet.candidate(c);
  }

  /** In a fleet: another instance restored the old baseline of this completed canary; so does this one, if it still retains it. */
  restoreRetained(id: string): void {
    const c = this.canaries.get(id);
    if (c === undefined || c.record.status !== 'completed' || c.retained === null) return;
    this.graphs.restore(c.record.pipeline_id, c.retained);
    this.promotions?.restore(c.record.pipeline_id, c.replacedPromotion);
    this.release(c);
  }

  /** In a fleet: a canary started here whose record the store refused: its split is undone, as if never started. */
  discard(id: string): void {
    const c = this.canaries.get(id);
    if (c === undefined) return;
    this.unschedule(c);
    if (c.prepared !== null && ACTIVE.has(c.record.status)) this.graphs.remove(c.record.pipeline_id);
    c.prepared = null;
    this.canaries.delete(id);
  }

  /**
   * In a fleet, on an instance that does not evaluate: the evaluator's last evaluation of canary
   * `id` — its result, rules and the stage's figures — is what this instance's status shows.
   */
  adoptEvaluation(id: string, view: EvaluationView): void {
    const c = this.canaries.get(id);
    if (c === undefined) return;
    c.adopted = view;
    c.lastEval = view.evaluation;
    // The fleet's shadow figures as evaluated (a status or `…/diffs` read merges them afresh): what the feed shows here.
    const f = view.shadow_figures;
    if (f != null) {
      const empty = { requests: 0, errors: 0, latencyUs: emptyHistogram() };
      c.shadow = { sampled: f.sampled, diverged: f.diverged, byKind: f.by_kind, memoryBytes: f.memory_bytes, reads: f.reads,
        readsInFlight: f.reads_in_flight, evidence: { baseline: empty, candidate: empty }, diffs: () => f.diffs };
    }
  }

  /** In a fleet: this instance became (true) or stopped being (false) the one that evaluates. */
  setEvaluating(on: boolean): void {
    for (const c of this.canaries.values()) {
      // Evaluating from here: its own windows (from the takeover) are shown.
      if (on) c.adopted = null;
      if (!on) this.unschedule(c);
      else if (ACTIVE.has(c.record.status) && c.prepared !== null) {
        this.primeWindows(c);
        this.schedule(c);
      }
    }
  }

  /** The candidate of a start request loads here (a fleet asks every instance before a create); its version. */
  async check(body: unknown): Promise<string> {
    const spec = parseStartRequest(body, this.defaults());
    const pid = spec.pipeline_id;
    if (!this.graphs.hasPipeline(pid)) throw new CanaryError('PROXY_ERR_CANARY_UNKNOWN_PIPELINE', `no pipeline "${pid}" on this proxy`);
    try {
      return (await this.graphs.prepare(pid, await this.local(spec.candidate_config), this.defaults().plugin_dirs)).version;
    } catch (err) {
      throw new CanaryError('PROXY_ERR_CANARY_CANDIDATE_REFUSED', `candidate refused: ${(err as Error).message}`, undefined, err);
    }
  }

  /** Resolves once every graph change made so far has reached every worker (at once without workers). */
  async settled(): Promise<void> {
    await this.graphs.settled?.();
  }

  async close(): Promise<void> {
    for (const c of this.canaries.values()) {
      this.unschedule(c);
      c.graceTimer?.();
    }
    this.listeners.clear();
  }

  // ---- helpers --------------------------------------------------------------------------------

  private primeWindows(c: LiveCanary): void {
    const pid = c.record.pipeline_id;
    c.trackers.baseline.prime(this.graphs.totals(pid, 'baseline'));
    c.trackers.candidate.prime(this.graphs.totals(pid, 'candidate'));
    c.shadowTracker.prime(this.graphs.shadow(pid));
    c.custom.clear();
    c.windowStart = this.clock.now();
  }

  private schedule(c: LiveCanary): void {
    if (this.scheduler === null || c.cancel !== null) return;
    if (this.fleet !== null && !this.fleet.evaluates()) return;
    const ms = canaryDurationMs(c.record.spec.rollback_rules.check_interval);
    const id = c.record.id;
    const fleet = this.fleet;
    c.cancel = this.scheduler(ms, () => {
      (fleet === null ? this.evaluate(id) : fleet.evaluation(id, () => this.evaluate(id)))
        .catch((err) => this.log.error('canary evaluation failed', { canary_id: id, error: (err as Error).message }));
    });
  }

  private unschedule(c: LiveCanary): void {
    if (c.cancel !== null) c.cancel();
    c.cancel = null;
  }

  private entry(c: LiveCanary, event: string, message: string, details?: Record<string, unknown>, at = this.clock.now()): HistoryEntry {
    const e: HistoryEntry = { at, event, stage: c.record.current_stage, traffic_pct: c.record.traffic_pct, message };
    if (details !== undefined) e.details = details;
    return e;
  }

  /** A transition: version bumped, record and history entry written together, then the event. */
  private commit(c: LiveCanary, event: string, message: string, type: CanaryEventType | null, details?: Record<string, unknown>): void {
    const r = c.record;
    r.version++;
    if (c.evidence !== null && details?.triggered_by === 'automatic') details = { ...details, evidence: c.evidence };
    const e = this.entry(c, event, message, details);
    this.store.save(r, [e]);
    this.notify(r.id, e);
    if (type !== null) {
      const extra: Partial<CanaryEvent> = {};
      if (type === 'canary.promoted') extra.previous_stage = details?.previous_stage as number;
      if (type === 'canary.rolled_back' || type === 'canary.completed') {
        extra.triggered_by = r.outcome?.triggered_by ?? undefined;
        extra.metrics = r.outcome?.final;
      }
      if (type === 'canary.rolled_back') {
        extra.reason = r.outcome?.reason;
        extra.rules = r.outcome?.rules;
      }
      this.emit(c, type, extra, transitionEventId(r.id, r.version, type as TransitionEventType));
    }
  }

  /**
   * A window of a shadow canary had divergent requests: canary.diverged, at most once per
   * shadow.diverged_event_interval (the window's figures, and the latest diffs' paths, never values).
   */
  private reportDivergence(c: LiveCanary, w: ShadowWindow, now: number): void {
    const r = c.record;
    const every = canaryDurationMs(r.spec.shadow!.diverged_event_interval);
    if (now - c.lastDivergedAt < every) return;
    c.lastDivergedAt = now;
    const latest = (c.shadow?.diffs() ?? []).slice(0, 5).map((d) => ({ kind: d.kind, op: d.op, ns: d.collection === '' ? d.db : `${d.db}.${d.collection}`,
      paths: d.paths.map((p) => p.path) }));
    this.emit(c, 'canary.diverged', { divergence: { sampled: w.sampled, diverged: w.diverged, divergence_rate: Math.round((w.diverged / w.sampled) * 1e6) / 1e6,
      by_kind: { ...w.byKind }, latest } }, divergedEventId(r.id, now));
  }

  private emit(c: LiveCanary, type: CanaryEventType, extra: Partial<CanaryEvent>, id: string, sink = this.sink): void {
    const r = c.record;
    const ev: CanaryEvent = {
      id, type, at: iso(this.clock.now()), canary_id: r.id, pipeline_id: r.pipeline_id,
      stage: r.current_stage, traffic_pct: r.traffic_pct, baseline_version: r.baseline_version, candidate_version: r.candidate_version,
      ...extra,
    };
    if (r.spec.description !== null) ev.description = r.spec.description;
    try {
      sink.emit(ev, r.spec.channels);
    } catch (err) {
      this.log.error('canary event sink failed', { canary_id: r.id, type, error: (err as Error).message });
    }
  }

  private notify(id: string, e: HistoryEntry): void {
    const set = this.listeners.get(id);
    if (set === undefined) return;
    for (const fn of set) {
      try {
        fn(e);
      } catch { /* a listener's failure is its own */ }
    }
  }
}
