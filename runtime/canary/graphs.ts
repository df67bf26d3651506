// The canary's hold on the pipeline graphs: builds a candidate graph from the baseline's
// configuration and `candidate_config` (loaded and configured before anything is split), publishes
// it beside the baseline with SPEC §3's per-request split, changes the split, unloads it, and at
// completion makes it the baseline while keeping the old baseline for the grace period.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import {
  PercentSelector, stepName, DEFAULT_MAX_MEMORY_PAGES,
  type Pipeline, type PipelineConfig, type PipelineManager, type StepSettings, type Variant,
} from '../pipeline/index.ts';
import type { CandidateConfig } from './spec.ts';
import { unknownStep } from '../config/index.ts';
import { ClientMatch, type ClientMatchSpec } from '../pipeline/client-match.ts';
import { AimedSelector, saltOf, type Sticky } from './aimed-selector.ts';
import { CanaryEvidence } from './arm-evidence.ts';
import { allowedDirs, allowedModulePath, installedPackageVersion, splitPackage } from './plugin-paths.ts';
import type { GraphTotals } from './windows.ts';
import { ShadowCanary, ShadowStats, type ShadowFigures, type ShadowSettings } from './shadow.ts';

export interface PreparedCandidate {
  readonly pipelineId: string;
  readonly config: PipelineConfig;
  readonly graph: Pipeline;
  readonly version: string;
}

/** An aimed canary's choice of clients and stickiness (spec.match, spec.sticky), salted by its id. */
export interface Aim {
  match: ClientMatchSpec | null;
  sticky: Sticky | null;
  canaryId: string;
}

export interface RetainedBaseline {
  readonly config: PipelineConfig;
  readonly graph: Pipeline;
  readonly version: string;
}

/** What the controller needs of the graphs (PipelineCanaryGraphs below is the one implementation). */
export interface CanaryGraphs {
  hasPipeline(pipelineId: string): boolean;
  baselineVersion(pipelineId: string): string;
  /**
   * Builds (compiles, instantiates, configures) the candidate without publishing it; throws the
   * reason. A step's `plugin_id` path must be in the built-in plugin directory, a directory of a
   * configured step's module, or one of `pluginDirs` (plugin-paths.ts).
   */
  prepare(pipelineId: string, candidate: CandidateConfig, pluginDirs?: readonly string[]): Promise<PreparedCandidate>;
  /**
   * Publishes the candidate: from now on `trafficPct` % of requests go to it, and every request of
   * either graph is counted to its arm (totals). With `aim` (match or sticky), the aimed split.
   */
  activate(prepared: PreparedCandidate, trafficPct: number, aim?: Aim, shadow?: ShadowSettings | null): void;
  /** A shadow canary's comparison on pipeline `pipelineId` (shadow.ts); null: none runs there. */
  shadow(pipelineId: string): ShadowFigures | null;
  /** The share of the baseline's requests a shadow canary shadows (a stage change). */
  setShadowPct(pipelineId: string, pct: number): void;
  /** An arm's cumulative figures since activate(): every request it served; null without a split. */
  totals(pipelineId: string, variant: Variant): GraphTotals | null;
  setTraffic(pipelineId: string, trafficPct: number): void;
  /** 100 % to the baseline at once and the candidate unloaded; requests already on it finish there. */
  remove(pipelineId: string): void;
  /** Builds the candidate's configuration as a baseline graph, not yet published. */
  buildBaseline(prepared: PreparedCandidate): Promise<Pipeline>;
  /** Publishes `graph` (from buildBaseline) as the baseline, unloads the candidate; returns the old baseline. */
  swapBaseline(prepared: PreparedCandidate, graph: Pipeline): RetainedBaseline;
  /** Swaps `old` back in as the baseline. */
  restore(pipelineId: string, old: RetainedBaseline): void;
  /** Brings totals() up to date (with workers: pulls every worker's arms); before an evaluation. */
  refresh?(): Promise<void>;
  /** Resolves once every change made so far has reached every process serving the graphs (with workers). */
  settled?(): Promise<void>;
}

/** The candidate graph's configuration: the baseline's, with `candidate.steps` laid over it. */
export function candidatePipelineConfig(base: PipelineConfig, candidate: CandidateConfig): PipelineConfig {
  const steps: Record<string, StepSettings> = {};
  for (const [k, s] of Object.entries(base.steps ?? {})) steps[stepName(k)] = { ...s };
  let request = [...base.pipeline.request];
  let response = [...base.pipeline.response];
  const listed = (name: string) => request.some((s) => stepName(s) === name) || response.some((s) => stepName(s) === name);
  for (const c of candidate.steps) {
    const name = stepName(c.type);
    const prev = steps[name];
    const next: StepSettings = { ...(prev ?? { config: {}, max_memory_pages: DEFAULT_MAX_MEMORY_PAGES }), config: c.config ?? prev?.config ?? {} };
    if (c.on_error !== undefined) next.on_error = c.on_error;
    if (c.plugin_id !== undefined) {
      delete next.module;
      delete next.package;
      if (c.plugin_id.endsWith('.wasm')) next.module = c.plugin_id;
      else next.package = splitPackage(c.plugin_id)[0];
    }
    steps[name] = next;
    if (!listed(name)) (c.phase === 'response' ? response : request).push(name);
  }
  if (candidate.pipeline?.request !== undefined) request = [...candidate.pipeline.request];
  if (candidate.pipeline?.response !== undefined) response = [...candidate.pipeline.response];
  return { pipeline: { id: base.pipeline.id, request, response }, steps };
}

export class PipelineCanaryGraphs implements CanaryGraphs {
  private readonly manager: PipelineManager;
  /** The configuration of each pipeline's current baseline (a completion replaces it). */
  private readonly baselines = new Map<string, PipelineConfig>();
  private readonly selectors = new Map<string, PercentSelector | AimedSelector>();
  /** Each split pipeline's arms, counted by the connections (see arm-evidence.ts). */
  private readonly evidence = new Map<string, CanaryEvidence>();
  /** Each shadow canary's comparison, by pipeline. */
  private readonly shadows = new Map<string, ShadowCanary>();
  /** This proxy's shadow figures across its canaries (the metrics). */
  readonly shadowStats = new ShadowStats();
  private readonly random: () => number;

  constructor(manager: PipelineManager, baselines: PipelineConfig[], random: () => number = Math.random) {
    this.manager = manager;
    for (const b of baselines) this.baselines.set(b.pipeline.id, b);
    this.random = random;
  }

  /** A reload replaced the baseline of a pipeline. */
  setBaselineConfig(config: PipelineConfig): void {
    this.baselines.set(config.pipeline.id, config);
  }

  /** A reload removed a pipeline (config `pipelines`): no canary can start on it any more. */
  removePipeline(pipelineId: string): void {
    this.baselines.delete(pipelineId);
  }

  hasPipeline(pipelineId: string): boolean {
    return this.baselines.has(pipelineId);
  }

  /** The configuration of pipeline `pipelineId`'s current baseline (a completed canary's, after one). */
  baselineConfig(pipelineId: string): PipelineConfig | undefined {
    return this.baselines.get(pipelineId);
  }

  /** The pipelines this holds a baseline of. */
  pipelineIds(): string[] {
    return [...this.baselines.keys()];
  }

  baselineVersion(pipelineId: string): string {
    return this.version(this.baselines.get(pipelineId)!);
  }

  /** `sha256:` + 12 hex digits over step order, step settings and module bytes. */
  version(config: PipelineConfig): string {
    const h = createHash('sha256');
    h.update(JSON.stringify([config.pipeline.request.map(stepName), config.pipeline.response.map(stepName)]));
    const names = [...new Set([...config.pipeline.request, ...config.pipeline.response].map(stepName))].sort();
    for (const name of names) {
      const s = config.steps?.[name];
      h.update(`\0${name}\0${JSON.stringify(s === undefined ? null : { ...s, module: undefined, package: undefined })}\0`);
      try {
        h.update(readFileSync(this.manager.modulePath(`wasm:${name}`, name, s)));
      } catch {
        h.update('missing');
      }
    }
    return `sha256:${h.digest('hex').slice(0, 12)}`;
  }

  /**
   * The directories a candidate's plugin_id path may be in: the built-in plugin directory, each
   * directory holding a module a configured step loads, and `extra` (canary.plugin_dirs).
   */
  private pluginDirs(extra: readonly string[]): string[] {
    const dirs = [this.manager.pluginDir];
    for (const b of this.baselines.values()) {
      for (const s of Object.values(b.steps ?? {})) if (s.module !== undefined) dirs.push(dirname(resolve(s.module)));
    }
    return allowedDirs([...dirs, ...extra]);
  }

  async prepare(pipelineId: string, candidate: CandidateConfig, pluginDirs: readonly string[] = []): Promise<PreparedCandidate> {
    const base = this.baselines.get(pipelineId);
    if (base === undefined) throw new Error(`no pipeline "${pipelineId}"`);
    const dirs = this.pluginDirs(pluginDirs);
    // Each path, as the real path that was checked: what loads is what was allowed.
    const modules = new Map<string, string>();
    for (const s of candidate.steps) {
      if (s.plugin_id === undefined) continue;
      if (s.plugin_id.endsWith('.wasm')) {
        modules.set(stepName(s.type), allowedModulePath(s.type, s.plugin_id, dirs));
        continue;
      }
      const have = installedPackageVersion(s.type, s.plugin_id);
      const [pkg, want] = splitPackage(s.plugin_id);
      if (want !== null && have !== want) throw new Error(`step ${s.type}: package ${pkg} is version ${have}, not ${want}`);
    }
    const config = candidatePipelineConfig(base, candidate);
    // A step that is neither a built-in nor given a module: said as the configuration says it, not
    // as the plugin file the loader would fail to read (whose path is the install's).
    for (const id of [...config.pipeline.request, ...config.pipeline.response]) {
      const problem = unknownStep(id, config.steps[stepName(id)], 'no plugin_id gives its module (a .wasm path or an npm package)');
      if (problem !== null) throw new Error(problem);
    }
    for (const [name, path] of modules) config.steps[name].module = path;
    const graph = await this.manager.build(config, 'candidate');
    return { pipelineId, config, graph, version: this.version(config) };
  }

  activate(prepared: PreparedCandidate, trafficPct: number, aim?: Aim, shadow: ShadowSettings | null = null): void {
    const id = prepared.pipelineId;
    if (shadow !== null) {
      // The candidate runs beside the baseline on the sampled requests, from before any is split to it.
      const sc = new ShadowCanary(prepared.graph, shadow, this.shadowStats, this.random);
      this.shadows.get(id)?.close();
      this.shadows.set(id, sc);
      this.manager.setShadow(id, sc);
    }
    // The plain split unless the canary is aimed or sticky: then the request path pays only for
    // the PercentSelector's draw, as before.
    const sel = aim === undefined || (aim.match == null && aim.sticky == null) ? new PercentSelector(trafficPct, this.random)
      : new AimedSelector(trafficPct, aim.match == null ? null : new ClientMatch(aim.match), aim.sticky ?? null, saltOf(aim.canaryId), this.random);
    this.selectors.set(id, sel);
    // The arms are counted before the candidate takes its first request.
    const ev = new CanaryEvidence();
    this.evidence.set(id, ev);
    this.manager.setEvidence(id, ev.baseline, ev.candidate);
    this.manager.setCandidate(id, prepared.graph, sel);
  }

  totals(pipelineId: string, variant: Variant): GraphTotals | null {
    return this.evidence.get(pipelineId)?.arm(variant) ?? null;
  }

  shadow(pipelineId: string): ShadowCanary | null {
    return this.shadows.get(pipelineId) ?? null;
  }

  setShadowPct(pipelineId: string, pct: number): void {
    const sc = this.shadows.get(pipelineId);
    if (sc !== undefined) sc.pct = pct;
  }

  setTraffic(pipelineId: string, trafficPct: number): void {
    const sel = this.selectors.get(pipelineId);
    if (sel !== undefined) sel.trafficPct = trafficPct;
  }

  remove(pipelineId: string): void {
    // Off the request path at once; its ring stays readable (GET …/diffs of the ended canary) until
    // the pipeline's next shadow canary starts, so one ring per pipeline at most is held.
    this.manager.setShadow(pipelineId, null);
    this.shadows.get(pipelineId)?.stop();
    this.selectors.delete(pipelineId);
    this.manager.setCandidate(pipelineId, null);
    this.manager.setEvidence(pipelineId, null, null);
    this.evidence.delete(pipelineId);
  }

  buildBaseline(prepared: PreparedCandidate): Promise<Pipeline> {
    return this.manager.build(prepared.config, 'baseline');
  }

  swapBaseline(prepared: PreparedCandidate, graph: Pipeline): RetainedBaseline {
    const id = prepared.pipelineId;
    const oldConfig = this.baselines.get(id)!;
    const old: RetainedBaseline = { config: oldConfig, graph: this.manager.get(id), version: this.version(oldConfig) };
    this.manager.setBaseline(graph);
    this.baselines.set(id, prepared.config);
    this.remove(id);
    return old;
  }

  restore(pipelineId: string, old: RetainedBaseline): void {
    this.manager.setBaseline(old.graph);
    this.baselines.set(pipelineId, old.config);
  }
}
