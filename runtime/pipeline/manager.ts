// Loads pipeline graphs and swaps them atomically. Compile + instantiate + configure happen in
// load(), off the hot path; only when every step is ready is the new Pipeline published. A
// request keeps the Pipeline object it started with, so in-flight requests finish on the old graph.
import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import {
  readPluginFile, compilePluginBytes, PluginSlot, WasmHost, defaultLogger, DEFAULT_FUEL, DEFAULT_KV_MAX_BYTES, type KvStore,
  PluginLoadError, Phase, type HostLog, type SubopSink,
  isComponentHeader, compileComponentBytes, ComponentSlot,
} from '../wasm/index.ts';
import { Pipeline } from './pipeline.ts';
import { StepRunner, defaultOnError } from './step-runner.ts';
import type { StepRecorder, StepTimer } from './recorder.ts';
import { GraphKey } from './graph-key.ts';
import type { Variant } from '../config/index.ts';
import { GraphSlot } from './graph-slot.ts';
import type { GraphSelector } from './selector.ts';
import type { ArmRecorder } from './arm-recorder.ts';
import type { GraphShadow } from './shadow.ts';
import { RejectionCounts } from './rejections.ts';

export type StepSettings = {
  module?: string;
  package?: string;
  config: Record<string, unknown>;
  on_error?: 'open' | 'closed';
  max_memory_pages: number;
  fuel?: number;
  /** Byte cap of the plugin's host-side key/value store (default 1 MiB). */
  kv_max_bytes?: number;
};

export interface PipelineConfig {
  pipeline: { id: string; request: string[]; response: string[] };
  steps: Record<string, StepSettings>;
}

export interface PipelineManagerOptions {
  recorder?: StepRecorder;
  logger?: HostLog;
  pluginDir?: string;
  /** The plugin host's state (metrics, kv stores, compile caches); a new one when not given. */
  host?: WasmHost;
}

export const DEFAULT_PIPELINE_ID = 'default';
export const DEFAULT_MAX_MEMORY_PAGES = 256; // 16 MiB

/** `cache` and `wasm:cache` both name the plugin `cache`. */
export function stepName(identifier: string): string {
  return identifier.startsWith('wasm:') ? identifier.slice(5) : identifier;
}

export class PipelineManager {
  private readonly recorder: StepRecorder | null;
  private readonly logger: HostLog;
  /** Where a step without a module or package loads `<name>.wasm` from (the built-in plugins). */
  readonly pluginDir: string;
  /** The plugin host state every graph of this manager draws from. */
  readonly host: WasmHost;
  private readonly slots = new Map<string, GraphSlot>();
  /** Last generation built per `pipelineId\0variant`. */
  private readonly generations = new Map<string, number>();
  /** Rejection counts per `pipelineId\0variant`: they outlive reloads, as Prometheus counters must. */
  private readonly rejections = new Map<string, RejectionCounts>();

  constructor(opts: PipelineManagerOptions = {}) {
    this.recorder = opts.recorder ?? null;
    this.logger = opts.logger ?? defaultLogger;
    this.pluginDir = resolve(opts.pluginDir ?? 'build/plugins');
    this.host = opts.host ?? new WasmHost();
  }

  /**
   * The graphs of pipeline `id` (created empty on first use, so a connection can hold its slot
   * before anything is loaded). Stable: later loads swap the slot's fields.
   */
  slot(id: string = DEFAULT_PIPELINE_ID): GraphSlot {
    let s = this.slots.get(id);
    if (s === undefined) {
      s = new GraphSlot(id, new Pipeline(new GraphKey(id, 'baseline', 0), [], [], new Map(), this.recorder, this.logger));
      this.slots.set(id, s);
    }
    return s;
  }

  /** The current baseline graph for `id` (an empty pipeline if none was loaded). */
  get(id: string = DEFAULT_PIPELINE_ID): Pipeline {
    return this.slot(id).baseline;
  }

  /** The candidate graph running beside the baseline of `id`, or null. */
  candidate(id: string = DEFAULT_PIPELINE_ID): Pipeline | null {
    return this.slot(id).candidate;
  }

  /** Rejection counts of every pipeline and variant so far (for /metrics). */
  rejectionCounts(): IterableIterator<[string, RejectionCounts]> {
    return this.rejections.entries();
  }

  /** Every graph loaded now (baselines and candidates). */
  *graphs(): IterableIterator<Pipeline> {
    for (const s of this.slots.values()) {
      yield s.baseline;
      if (s.candidate !== null) yield s.candidate;
    }
  }

  /**
   * Builds the graph and swaps it in as `variant` of its pipeline; on any error throws and the old
   * graph keeps running. A candidate needs a selector (setCandidate) before it serves requests.
   */
  async load(config: PipelineConfig, variant: Variant = 'baseline'): Promise<Pipeline> {
    const pipeline = await this.build(config, variant);
    const slot = this.slot(pipeline.id);
    if (variant === 'baseline') slot.setBaseline(pipeline);
    else slot.setCandidate(pipeline);
    this.dropUnusedState();
    this.logger.info('pipeline loaded', { pipeline: pipeline.id, graph: pipeline.key.toString(), request: config.pipeline.request,
      response: config.pipeline.response });
    return pipeline;
  }

  /**
   * Runs `candidate` beside the baseline of its pipeline, `selector` deciding per request; null
   * removes the candidate (requests already running on it finish there: they hold the graph).
   */
  setCandidate(id: string, candidate: Pipeline | null, selector: GraphSelector | null = null): void {
    const slot = this.slot(id);
    if (candidate !== null && candidate.key.variant !== 'candidate') throw new Error(`graph ${candidate.key} is not a candidate`);
    slot.selector = candidate === null ? null : selector;
    slot.setCandidate(candidate);
    this.dropUnusedState();
  }

  /** Publishes an already built baseline graph (a canary's completion, or putting an old baseline back). */
  setBaseline(pipeline: Pipeline): void {
    if (pipeline.key.variant !== 'baseline') throw new Error(`graph ${pipeline.key} is not a baseline`);
    this.slot(pipeline.id).setBaseline(pipeline);
    this.dropUnusedState();
  }

  /**
   * Forgets pipeline `id` (a reload removed it): its graphs leave the manager; requests under way
   * finish on the graph they hold. Its rejection counters stay (Prometheus counters must not go back).
   */
  remove(id: string): void {
    this.slots.delete(id);
    this.dropUnusedState();
  }

  /** Ids of the pipelines with a slot. */
  ids(): string[] {
    return [...this.slots.keys()];
  }

  /**
   * While a canary splits pipeline `id`: each arm's recorder, given every request of the graph
   * serving that arm (now and after later loads); null, null when the canary ends.
   */
  setEvidence(id: string, baseline: ArmRecorder | null, candidate: ArmRecorder | null): void {
    this.slot(id).setEvidence(baseline, candidate);
  }

  /** Runs `shadow`'s candidate beside pipeline `id`'s baseline on a sample of its requests; null stops it. */
  setShadow(id: string, shadow: GraphShadow | null): void {
    this.slot(id).shadow = shadow;
  }

  /** Host state no published graph uses any more (a reloaded step's old kv store) is let go. */
  private dropUnusedState(): void {
    const inUse = new Set<KvStore>();
    for (const g of this.graphs()) for (const r of g.steps.values()) inUse.add(r.slot.kv);
    this.host.kv.retain(inUse);
  }

  /**
   * The next baseline graph of each pipeline id in `current` gets that generation (a worker started
   * in place of one that exited serves the generation the others serve, runtime/cluster/).
   */
  continueGenerations(current: Readonly<Record<string, number>>): void {
    for (const [id, g] of Object.entries(current)) this.generations.set(`${id}\0baseline`, g - 1);
  }

  /**
   * A graph built but never to be published (its reload was refused): its generation number goes
   * back, so the next graph built for its id gets it. Without this, a refused reload would leave
   * each worker of a proxy counting differently from the others and from a replacement worker.
   * Discard in the reverse order of building.
   */
  discard(pipeline: Pipeline): void {
    this.unnumber(`${pipeline.key.pipelineId}\0${pipeline.key.variant}`, pipeline.key.generation);
  }

  private unnumber(genKey: string, generation: number): void {
    if (this.generations.get(genKey) === generation) this.generations.set(genKey, generation - 1);
  }

  /** Builds a graph without publishing it (the canary controller runs two graphs per id). */
  async build(config: PipelineConfig, variant: Variant = 'baseline'): Promise<Pipeline> {
    const id = config.pipeline.id || DEFAULT_PIPELINE_ID;
    const genKey = `${id}\0${variant}`;
    const generation = (this.generations.get(genKey) ?? 0) + 1;
    this.generations.set(genKey, generation);
    const key = new GraphKey(id, variant, generation);
    let rejections = this.rejections.get(genKey);
    if (rejections === undefined) {
      rejections = new RejectionCounts();
      this.rejections.set(genKey, rejections);
    }
    const names = new Set<string>();
    for (const s of config.pipeline.request) names.add(stepName(s));
    for (const s of config.pipeline.response) names.add(stepName(s));
    const runners = new Map<string, StepRunner>();
    try {
      await Promise.all([...names].map(async (name) => {
        runners.set(name, await this.buildStep(key, name, settingsFor(config.steps, name)));
      }));
    } catch (err) {
      this.unnumber(genKey, generation);
      const running = this.slots.get(id)?.[variant === 'baseline' ? 'baseline' : 'candidate'];
      // An operator's configuration refused (the caller answers it: a reload refusal, a 422, exit 2), not a fault of the proxy: warn.
      this.logger.warn(running != null && running.key.generation > 0 ? 'pipeline refused; the previous graph keeps running' : 'pipeline refused',
        { pipeline: id, graph: key.toString(), err: err instanceof Error ? err.message : String(err) });
      throw err;
    }
    const pick = (list: string[]): StepRunner[] => list.map((s) => runners.get(stepName(s))!);
    if (this.recorder !== null && this.recorder.enabled) {
      const ids = (list: string[]) => list.map((s) => `wasm:${stepName(s)}`);
      this.recorder.order?.(key, ids(config.pipeline.request), ids(config.pipeline.response));
    }
    return new Pipeline(key, pick(config.pipeline.request), pick(config.pipeline.response), runners, this.recorder, this.logger, rejections);
  }

  private async buildStep(key: GraphKey, name: string, settings: StepSettings | undefined): Promise<StepRunner> {
    const pipelineId = key.pipelineId;
    const variant = key.variant;
    const host = this.host;
    const step = `wasm:${name}`;
    const fuel = settings?.fuel ?? DEFAULT_FUEL;
    const maxMemoryPages = settings?.max_memory_pages ?? DEFAULT_MAX_MEMORY_PAGES;
    const path = this.modulePath(step, name, settings);
    const recorder = this.recorder;
    let timers: [StepTimer, StepTimer] | null = null;
    let subop: SubopSink | null = null;
    let subopDirect = true;
    if (recorder !== null && recorder.enabled) {
      const t: [StepTimer, StepTimer] = [recorder.bind(key, step, Phase.Request), recorder.bind(key, step, Phase.Response)];
      timers = t;
      // A sub-operation belongs to the request running now (the timed loop sets it), else straight to the timer.
      subop = (sub, phase, ns) => {
        const cur = recorder.current;
        if (cur !== null) cur.subop(sub, ns);
        else t[phase].subop(sub, ns);
      };
      // Sub-operations are timed for a request whose RequestTimings ask for them (its frame is
      // kept, or it is traced). With no RequestTimings (the SDK harness, benches) they are timed
      // straight into the timer, unless the recorder times only the requests given RequestTimings
      // (tracing's sampled ones).
      subopDirect = recorder.timingsOnly !== true;
    }
    const config = settings?.config ?? {};
    // Everything the step owns in this graph, bound now: the hot path looks nothing up by string.
    const services = {
      step, pipelineId, variant, logger: this.logger, subop, subopGate: subop === null ? null : recorder, subopDirect, fuel,
      kv: host.kv.for(pipelineId, variant, name, config, settings?.kv_max_bytes ?? DEFAULT_KV_MAX_BYTES),
      metrics: host.pluginMetrics,
      rebuilds: host.instanceRebuilds.labels(pipelineId, variant, step),
    };
    const errors: [{ inc(): void }, { inc(): void }] = [
      host.stepErrors.labels(pipelineId, variant, step, 'request'), host.stepErrors.labels(pipelineId, variant, step, 'response'),
    ];
    const onError = settings?.on_error ?? defaultOnError(name);
    // Read once, then compiled as what its header says: no second open that could find another file.
    const bytes = await readPluginFile(path, step);
    if (isComponentHeader(bytes)) {
      // A WebAssembly component (sdk/wit/step.wit): same StepRunner, ComponentSlot has PluginSlot's contract.
      const component = await compileComponentBytes(bytes, { name: step, fuel, maxMemoryPages, config, cache: host.components });
      const runner = new StepRunner(name, new ComponentSlot(component, services), onError, errors);
      runner.timers = timers;
      return runner;
    }
    const compiled = await compilePluginBytes(bytes, { name: step, fuel, maxMemoryPages, config, cache: host.modules });
    const runner = new StepRunner(name, new PluginSlot(compiled, services), onError, errors);
    runner.timers = timers;
    return runner;
  }

  /** The module file a step loads from (for content hashes of graphs). */
  modulePath(step: string, name: string, settings: StepSettings | undefined): string {
    if (settings?.module !== undefined) return resolve(settings.module);
    if (settings?.package !== undefined) return resolvePackageModule(step, settings.package);
    return join(this.pluginDir, `${name}.wasm`);
  }
}

function settingsFor(steps: Record<string, StepSettings> | undefined, name: string): StepSettings | undefined {
  if (steps === undefined) return undefined;
  return steps[name] ?? steps[`wasm:${name}`];
}

/** An npm package's plugin: its package.json `"wasm"` field (path to the .wasm), else `main`. */
function resolvePackageModule(step: string, pkg: string): string {
  const require = createRequire(join(process.cwd(), 'package.json'));
  let manifest: string;
  try {
    manifest = require.resolve(`${pkg}/package.json`);
  } catch (err) {
    throw new PluginLoadError(step, `package ${pkg} not found`, err);
  }
  const json = JSON.parse(readFileSync(manifest, 'utf8')) as { wasm?: string; main?: string };
  const rel = json.wasm ?? json.main;
  if (rel === undefined || !rel.endsWith('.wasm')) throw new PluginLoadError(step, `package ${pkg} names no .wasm ("wasm" or "main" field)`);
  return join(dirname(manifest), rel);
}
