// A worker's part of the one canary (runtime/ipc/canary-graphs.ts is the primary's): applies
// what the primary's controller decided to this worker's graphs, with the same PipelineCanaryGraphs
// a single process uses — builds the candidate the primary checked, splits, changes the split,
// removes it, swaps the baseline at completion and back at a restore — and hands its arms' figures
// to the primary, which merges them; a shadow canary runs here too (its settings come with the
// split), and its figures and ring go with the arms. A worker starting builds the baselines the primary
// serves (promoted ones included) as its first graphs (app/serve.ts); before it listens, replay() applies
// the primary's active splits: a replacement worker serves as the others do.
import type { PipelineCanaryGraphs, PreparedCandidate, RetainedBaseline } from '../canary/graphs.ts';
import * as hdr from 'hdr-histogram-js';
import type { Pipeline, PipelineConfig, PipelineManager } from '../pipeline/index.ts';
import type { Aim } from '../canary/graphs.ts';
import type { ArmWire, ArmsWire, CanaryState, ShadowWire } from './canary-graphs.ts';
import type { GraphTotals } from '../canary/windows.ts';
import type { ShadowSettings } from '../canary/shadow.ts';

interface Body { pipelineId: string }

function wire(t: GraphTotals | null): ArmWire {
  if (t === null) return { requests: 0, errors: 0, latency: '' };
  return { requests: t.requests, errors: t.errors, latency: hdr.encodeIntoCompressedBase64(t.latencyUs) };
}

/** A shadow canary's figures as the primary merges them (its ring: at most max_diffs records). */
export interface ShadowView { shadow_pct: number; sampled: number; diverged: number }

type Activate = Body & { trafficPct: number; aim: Aim | null; epoch: number; shadow: ShadowSettings | null };

export class WorkerCanary {
  private readonly graphs: PipelineCanaryGraphs;
  private readonly manager: PipelineManager;
  /** Built, not yet split (canary-prepare), or split (kept for the completion). */
  private readonly prepared = new Map<string, PreparedCandidate>();
  /** A completion's baseline graph, built and not yet published. */
  private readonly built = new Map<string, Pipeline>();
  /** The baseline a completion replaced (a restore swaps it back). */
  private readonly retained = new Map<string, RetainedBaseline>();
  private readonly epochs = new Map<string, number>();
  private readonly traffic = new Map<string, number>();

  constructor(graphs: PipelineCanaryGraphs, manager: PipelineManager) {
    this.graphs = graphs;
    this.manager = manager;
  }

  /** The requests the primary sends (serveRequests handlers). */
  handlers(): Record<string, (body: unknown) => Promise<unknown> | unknown> {
    return {
      'canary-prepare': (b) => this.prepare(b as Body & { config: PipelineConfig; version: string }),
      'canary-discard': (b) => { this.prepared.delete((b as Body).pipelineId); },
      'canary-activate': (b) => this.activate(b as Activate),
      'canary-shadow-pct': (b) => {
        const t = b as Body & { pct: number };
        this.graphs.setShadowPct(t.pipelineId, t.pct);
      },
      'canary-traffic': (b) => {
        const t = b as Body & { trafficPct: number };
        this.graphs.setTraffic(t.pipelineId, t.trafficPct);
        this.traffic.set(t.pipelineId, t.trafficPct);
      },
      'canary-remove': (b) => this.remove((b as Body).pipelineId),
      'canary-build-baseline': (b) => this.buildBaseline((b as Body).pipelineId),
      'canary-drop-baseline': (b) => { this.built.delete((b as Body).pipelineId); },
      'canary-swap': (b) => this.swap((b as Body).pipelineId),
      'canary-restore': (b) => this.restore(b as Body & { config: PipelineConfig }),
      'canary-arms': () => this.arms(),
    };
  }

  /** Before listening: the primary's active splits (its baselines are this worker's already: it started with them). */
  async replay(canaries: CanaryState['canaries']): Promise<void> {
    for (const c of canaries) {
      await this.prepare({ pipelineId: c.pipelineId, config: c.config, version: c.version });
      this.activate({ pipelineId: c.pipelineId, trafficPct: c.trafficPct, aim: c.aim, epoch: c.epoch, shadow: c.shadow });
    }
  }

  private async prepare(b: Body & { config: PipelineConfig; version: string }): Promise<null> {
    const graph = await this.manager.build(b.config, 'candidate');
    this.prepared.set(b.pipelineId, { pipelineId: b.pipelineId, config: b.config, graph, version: b.version });
    return null;
  }

  private activate(b: Activate): void {
    const p = this.prepared.get(b.pipelineId);
    if (p === undefined) throw new Error(`no candidate built for pipeline "${b.pipelineId}"`);
    this.graphs.activate(p, b.trafficPct, b.aim ?? undefined, b.shadow ?? null);
    this.epochs.set(b.pipelineId, b.epoch);
    this.traffic.set(b.pipelineId, b.trafficPct);
  }

  private remove(pipelineId: string): void {
    this.graphs.remove(pipelineId);
    this.prepared.delete(pipelineId);
    this.epochs.delete(pipelineId);
    this.traffic.delete(pipelineId);
  }

  private async buildBaseline(pipelineId: string): Promise<null> {
    const p = this.prepared.get(pipelineId);
    if (p === undefined) throw new Error(`no candidate built for pipeline "${pipelineId}"`);
    this.built.set(pipelineId, await this.graphs.buildBaseline(p));
    return null;
  }

  private swap(pipelineId: string): void {
    const p = this.prepared.get(pipelineId);
    const graph = this.built.get(pipelineId);
    if (p === undefined || graph === undefined) throw new Error(`no completion built for pipeline "${pipelineId}"`);
    this.retained.set(pipelineId, this.graphs.swapBaseline(p, graph));
    this.built.delete(pipelineId);
    this.prepared.delete(pipelineId);
    this.epochs.delete(pipelineId);
    this.traffic.delete(pipelineId);
  }

  /** Swaps the retained baseline back (a worker started after the completion builds it from `config`). */
  private async restore(b: Body & { config: PipelineConfig }): Promise<null> {
    const old = this.retained.get(b.pipelineId);
    this.retained.delete(b.pipelineId);
    if (old !== undefined) {
      this.graphs.restore(b.pipelineId, old);
      return null;
    }
    this.manager.setBaseline(await this.manager.build(b.config, 'baseline'));
    this.graphs.setBaselineConfig(b.config);
    return null;
  }

  /** GET /api/v1/workers: the splits this worker serves, each arm's requests here, and a shadow canary's counts here. */
  view(): Record<string, { traffic_pct: number; baseline: number; candidate: number; shadow?: ShadowView }> {
    const out: Record<string, { traffic_pct: number; baseline: number; candidate: number; shadow?: ShadowView }> = {};
    for (const pid of this.epochs.keys()) {
      out[pid] = { traffic_pct: this.traffic.get(pid) ?? 0, baseline: this.graphs.totals(pid, 'baseline')?.requests ?? 0,
        candidate: this.graphs.totals(pid, 'candidate')?.requests ?? 0 };
      const sc = this.graphs.shadow(pid);
      if (sc !== null) out[pid].shadow = { shadow_pct: sc.pct, sampled: sc.sampled, diverged: sc.diverged };
    }
    return out;
  }

  private arms(): ArmsWire {
    const out: ArmsWire = {};
    for (const [pid, epoch] of this.epochs) {
      const sc = this.graphs.shadow(pid);
      const shadow: ShadowWire | null = sc === null ? null : {
        sampled: sc.sampled, diverged: sc.diverged, byKind: { ...sc.byKind }, baseline: wire(sc.evidence.baseline), candidate: wire(sc.evidence.candidate),
        memoryBytes: sc.memoryBytes, reads: sc.reads, readsInFlight: sc.readsInFlight, diffs: sc.diffs(),
      };
      out[pid] = { epoch, baseline: wire(this.graphs.totals(pid, 'baseline')), candidate: wire(this.graphs.totals(pid, 'candidate')), shadow };
    }
    return out;
  }
}
