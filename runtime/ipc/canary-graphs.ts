// One canary across the worker processes (`workers` > 1). The controller, its store and the
// notifications run in the primary; the graphs that serve requests live in the workers. This is the
// controller's CanaryGraphs there: every call is applied to the primary's own graphs (they give the
// versions, the baselines and the checks) and fanned out to every live worker over the IPC channel.
// A candidate is built on every worker before prepare() returns (one that cannot fails the create,
// and the others drop theirs); a split, a stage, a rollback, a completion or a restore is sent to
// every worker at once, and settled() (which the control plane awaits before it answers) resolves
// once all have applied it. A worker that fails to apply one is ended and replaced: a replacement
// asks for state() before it listens and serves the canaries as the primary holds them.
//
// The evaluator reads merged arms: refresh() pulls each worker's cumulative arm figures (requests,
// errors, an encoded HDR latency histogram) and adds them up. Each canary split carries an epoch,
// so figures of an earlier split never mix in; a worker that exits leaves its last figures in.
//
// A shadow canary runs on every worker (its settings go with the split, its shadow_pct with each
// stage change). The same pull brings each worker's shadow figures — sampled and divergent counts
// by kind, both graphs' step-time histograms on the sampled requests, the bytes its ring holds and
// the ring itself (at most max_diffs records) — and they are merged into one SummedShadow (canary/shadow-sum.ts) per
// pipeline: counts and histograms added up, the rings' records newest first, max_diffs of them.
// The controller reads it as it reads a ShadowCanary in one process (ShadowFigures).
import * as hdr from 'hdr-histogram-js';
import { SummedShadow, SummedTotals } from '../canary/shadow-sum.ts';
import { WorkerRequestError, type WorkerChannel } from './worker-channel.ts';
import { emptyHistogram, type GraphTotals } from '../canary/windows.ts';
import type { Aim, CanaryGraphs, PipelineCanaryGraphs, PreparedCandidate, RetainedBaseline } from '../canary/graphs.ts';
import type { CandidateConfig } from '../canary/spec.ts';
import type { DiffRecord, DivergenceKind, ShadowFigures, ShadowSettings } from '../canary/shadow.ts';
import type { Pipeline, PipelineConfig, Variant } from '../pipeline/index.ts';
import type { Log } from '../log/index.ts';

/** How long a worker has to build a candidate (compiling plugins). */
const BUILD_TIMEOUT_MS = 120_000;
/** How long a worker has to apply a change of split, or answer for its figures. */
const APPLY_TIMEOUT_MS = 10_000;

/** One arm's cumulative figures as a worker sends them. */
export interface ArmWire { requests: number; errors: number; latency: string }
/** A worker's shadow canary figures (cumulative), its ring's bytes and records. */
export interface ShadowWire {
  sampled: number;
  diverged: number;
  byKind: Record<DivergenceKind, number>;
  baseline: ArmWire;
  candidate: ArmWire;
  memoryBytes: number;
  reads: number;
  readsInFlight: number;
  diffs: DiffRecord[];
}
/** A worker's arms, by pipeline: the split's epoch, both arms, and the shadow canary's figures (null: none). */
export type ArmsWire = Record<string, { epoch: number; baseline: ArmWire; candidate: ArmWire; shadow: ShadowWire | null }>;

/** An active split as a replacement worker replays it (`shadow`: a shadow canary's settings, its pct the current stage's). */
export interface ReplayedCanary {
  pipelineId: string; config: PipelineConfig; version: string; trafficPct: number; aim: Aim | null; epoch: number; shadow: ShadowSettings | null;
}
/** What a worker starting asks for: each pipeline's baseline configuration, and the active splits. */
export interface CanaryState { baselines: PipelineConfig[]; canaries: ReplayedCanary[]; changes: number }

/** The workers this fans out to (runtime/cluster/machine.ts). */
export interface CanaryWorkers {
  readonly live: WorkerChannel[];
  /** A graph configuration of the primary's as every worker builds it: the proxy-wide rate limit as a worker's share (cluster/shares.ts). */
  share(config: PipelineConfig): PipelineConfig;
}

const NO_LATENCY = emptyHistogram();

/** A worker's arm as the controller reads one (its histogram decoded; none when it sent none). */
function armOf(a: ArmWire): GraphTotals {
  return { requests: a.requests, errors: a.errors, latencyUs: a.latency === '' ? NO_LATENCY : hdr.decodeFromCompressedBase64(a.latency, 32, false) };
}

/** A worker's shadow figures as the controller reads a ShadowCanary's. */
function shadowOf(w: ShadowWire): ShadowFigures {
  return {
    sampled: w.sampled, diverged: w.diverged, byKind: w.byKind, memoryBytes: w.memoryBytes, reads: w.reads, readsInFlight: w.readsInFlight,
    evidence: { baseline: armOf(w.baseline), candidate: armOf(w.candidate) }, diffs: () => w.diffs,
  };
}

function addArm(m: SummedTotals, a: ArmWire): void {
  const t = armOf(a);
  m.add(t.requests, t.errors, t.latencyUs);
}

export class ClusterCanaryGraphs implements CanaryGraphs {
  private readonly local: PipelineCanaryGraphs;
  private readonly workers: CanaryWorkers;
  private readonly log: Log;
  /** The active split of each pipeline (replayed to a replacement worker). */
  private readonly active = new Map<string, ReplayedCanary>();
  private epoch = 0;
  /** Changes sent so far: a worker that asked for state() before the last one missed it. */
  changes = 0;
  /** Changes sent and not yet applied by every worker. */
  private readonly inFlight = new Set<Promise<void>>();
  /** The last arms each live worker gave, and those of workers that exited (by pipeline and epoch). */
  private readonly lastArms = new Map<WorkerChannel, ArmsWire>();
  private retired: ArmsWire[] = [];
  private merged = new Map<string, { baseline: SummedTotals; candidate: SummedTotals }>();
  /** Each pipeline's latest shadow canary, merged (kept after it ends, as a single process keeps its ring). */
  private readonly shadows = new Map<string, { epoch: number; figures: SummedShadow }>();
  private pulling: Promise<void> | null = null;

  constructor(local: PipelineCanaryGraphs, workers: CanaryWorkers, log: Log) {
    this.local = local;
    this.workers = workers;
    this.log = log;
  }

  hasPipeline(pipelineId: string): boolean {
    return this.local.hasPipeline(pipelineId);
  }

  baselineVersion(pipelineId: string): string {
    return this.local.baselineVersion(pipelineId);
  }

  async prepare(pipelineId: string, candidate: CandidateConfig, pluginDirs: readonly string[] = []): Promise<PreparedCandidate> {
    await this.settled();
    // The primary checks the paths and builds it first: the version, and the reason when it cannot.
    const prepared = await this.local.prepare(pipelineId, candidate, pluginDirs);
    const live = this.workers.live;
    const settled = await Promise.allSettled(live.map((c) => c.request('canary-prepare',
      { pipelineId, config: this.share(prepared.config), version: prepared.version }, BUILD_TIMEOUT_MS)));
    const failed = settled.find((s) => s.status === 'rejected');
    if (failed !== undefined) {
      await Promise.allSettled(live.map((c) => c.request('canary-discard', { pipelineId }, APPLY_TIMEOUT_MS)));
      const e = (failed as PromiseRejectedResult).reason as Error;
      throw new Error(e instanceof WorkerRequestError ? `${e.message} (no worker serves it)` : e.message);
    }
    return prepared;
  }

  activate(prepared: PreparedCandidate, trafficPct: number, aim?: Aim, shadow: ShadowSettings | null = null): void {
    // The primary serves no client: its graphs split, the shadowing is the workers'.
    this.local.activate(prepared, trafficPct, aim);
    const epoch = ++this.epoch;
    const sh = shadow === null ? null : { ...shadow };
    const a: ReplayedCanary = { pipelineId: prepared.pipelineId, config: prepared.config, version: prepared.version, trafficPct, aim: aim ?? null, epoch,
      shadow: sh };
    this.active.set(prepared.pipelineId, a);
    this.merged.delete(prepared.pipelineId);
    if (sh !== null) this.shadows.set(prepared.pipelineId, { epoch, figures: new SummedShadow(sh.maxDiffs) });
    this.send('canary-activate', { pipelineId: a.pipelineId, trafficPct, aim: a.aim, epoch, shadow: sh });
  }

  shadow(pipelineId: string): ShadowFigures | null {
    return this.shadows.get(pipelineId)?.figures ?? null;
  }

  setShadowPct(pipelineId: string, pct: number): void {
    const a = this.active.get(pipelineId);
    if (a?.shadow == null) return;
    a.shadow.pct = pct;
    this.send('canary-shadow-pct', { pipelineId, pct });
  }

  totals(pipelineId: string, variant: Variant): GraphTotals | null {
    if (!this.active.has(pipelineId)) return null;
    return this.merged.get(pipelineId)?.[variant] ?? null;
  }

  setTraffic(pipelineId: string, trafficPct: number): void {
    this.local.setTraffic(pipelineId, trafficPct);
    const a = this.active.get(pipelineId);
    if (a === undefined) return;
    a.trafficPct = trafficPct;
    this.send('canary-traffic', { pipelineId, trafficPct });
  }

  remove(pipelineId: string): void {
    this.local.remove(pipelineId);
    this.active.delete(pipelineId);
    this.send('canary-remove', { pipelineId });
  }

  async buildBaseline(prepared: PreparedCandidate): Promise<Pipeline> {
    const graph = await this.local.buildBaseline(prepared);
    const live = this.workers.live;
    const settled = await Promise.allSettled(live.map((c) => c.request('canary-build-baseline', { pipelineId: prepared.pipelineId }, BUILD_TIMEOUT_MS)));
    const failed = settled.find((s) => s.status === 'rejected');
    if (failed !== undefined) {
      await Promise.allSettled(live.map((c) => c.request('canary-drop-baseline', { pipelineId: prepared.pipelineId }, APPLY_TIMEOUT_MS)));
      throw (failed as PromiseRejectedResult).reason as Error;
    }
    return graph;
  }

  swapBaseline(prepared: PreparedCandidate, graph: Pipeline): RetainedBaseline {
    const old = this.local.swapBaseline(prepared, graph);
    this.active.delete(prepared.pipelineId);
    this.send('canary-swap', { pipelineId: prepared.pipelineId });
    return old;
  }

  restore(pipelineId: string, old: RetainedBaseline): void {
    this.local.restore(pipelineId, old);
    this.send('canary-restore', { pipelineId, config: this.share(old.config) });
  }

  /** What a worker starting asks for before it builds its graphs (its baselines are these) and listens. */
  state(): CanaryState {
    const baselines: PipelineConfig[] = [];
    for (const id of this.local.pipelineIds()) baselines.push(this.share(this.local.baselineConfig(id)!));
    const canaries = [...this.active.values()].map((c) => ({ ...c, config: this.share(c.config) }));
    return { baselines, canaries, changes: this.changes };
  }

  private share(config: PipelineConfig): PipelineConfig {
    return this.workers.share(config);
  }

  async settled(): Promise<void> {
    while (this.inFlight.size > 0) await Promise.all([...this.inFlight]);
  }

  /** Sends a change to every live worker; one that cannot apply it is ended (its replacement replays the state). */
  private send(op: string, body: unknown): void {
    this.changes++;
    const live = this.workers.live;
    const p = Promise.allSettled(live.map((c) => c.request(op, body, APPLY_TIMEOUT_MS))).then((settled) => {
      settled.forEach((s, i) => {
        if (s.status === 'fulfilled') return;
        this.log.error('a worker did not apply a canary change; replacing it', { worker: live[i].index, op, error: (s.reason as Error).message });
        live[i].worker.kill('SIGKILL');
      });
    });
    this.inFlight.add(p);
    void p.finally(() => this.inFlight.delete(p));
  }

  refresh(): Promise<void> {
    this.pulling ??= this.pull().finally(() => { this.pulling = null; });
    return this.pulling;
  }

  private async pull(): Promise<void> {
    await this.settled();
    const live = this.workers.live;
    const answers = await Promise.allSettled(live.map((c) => c.request<ArmsWire>('canary-arms', null, APPLY_TIMEOUT_MS)));
    answers.forEach((a, i) => {
      if (a.status === 'fulfilled') this.lastArms.set(live[i], a.value);
    });
    // A worker gone keeps its last figures in (the machine's counts never go back).
    for (const [c, arms] of this.lastArms) {
      if (live.includes(c)) continue;
      this.lastArms.delete(c);
      this.retired.push(arms);
    }
    const merged = new Map<string, { baseline: SummedTotals; candidate: SummedTotals }>();
    // A shadow canary still running is refilled from every worker's figures (one that ended keeps its last).
    const refilled = new Set<string>();
    for (const [pid, sh] of this.shadows) {
      if (this.active.get(pid)?.epoch !== sh.epoch) continue;
      sh.figures.clear();
      refilled.add(pid);
    }
    for (const arms of [...this.retired, ...this.lastArms.values()]) {
      for (const [pid, a] of Object.entries(arms)) {
        if (this.active.get(pid)?.epoch !== a.epoch) continue;
        let m = merged.get(pid);
        if (m === undefined) merged.set(pid, m = { baseline: new SummedTotals(), candidate: new SummedTotals() });
        addArm(m.baseline, a.baseline);
        addArm(m.candidate, a.candidate);
        if (a.shadow !== null && refilled.has(pid)) this.shadows.get(pid)!.figures.add(shadowOf(a.shadow));
      }
    }
    for (const pid of refilled) this.shadows.get(pid)!.figures.seal();
    // Figures of splits that ended are of no use any more.
    this.retired = this.retired.map((arms) => Object.fromEntries(Object.entries(arms).filter(([pid, a]) => this.active.get(pid)?.epoch === a.epoch)))
      .filter((arms) => Object.keys(arms).length > 0);
    this.merged = merged;
  }
}
