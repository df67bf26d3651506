// Loads pipeline graphs and swaps them atomically. Compile + instantiate + configure happen in
// load(), off the hot path; only when every step is ready is the new Pipeline published. A
// request keeps the Pipeline object it started with, so in-flight requests finish on the old graph.
import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import {
  compilePluginFile, PluginSlot, kvStoreFor, defaultLogger, DEFAULT_FUEL, DEFAULT_KV_MAX_BYTES,
  PluginLoadError, type Logger, type SubopSink,
  isComponentFile, compileComponentFile, ComponentSlot,
} from '../wasm/index.ts';
import { Pipeline } from './pipeline.ts';
import { StepRunner, defaultOnError } from './step-runner.ts';
import type { StepRecorder } from './recorder.ts';

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

export interface PipelineManagerOptions { recorder?: StepRecorder; logger?: Logger; pluginDir?: string }

export const DEFAULT_PIPELINE_ID = 'default';
export const DEFAULT_MAX_MEMORY_PAGES = 256; // 16 MiB

/** `cache` and `wasm:cache` both name the plugin `cache`. */
export function stepName(identifier: string): string {
  return identifier.startsWith('wasm:') ? identifier.slice(5) : identifier;
}

export class PipelineManager {
  private readonly recorder: StepRecorder | null;
  private readonly logger: Logger;
  private readonly pluginDir: string;
  private readonly current: Map<string, Pipeline>;
  private readonly empty: Map<string, Pipeline>;

  constructor(opts: PipelineManagerOptions = {}) {
    this.recorder = opts.recorder ?? null;
    this.logger = opts.logger ?? defaultLogger;
    this.pluginDir = resolve(opts.pluginDir ?? 'build/plugins');
    this.current = new Map();
    this.empty = new Map();
  }

  /** The current graph for `id` (an empty pipeline if none was loaded). */
  get(id: string = DEFAULT_PIPELINE_ID): Pipeline {
    const p = this.current.get(id);
    if (p !== undefined) return p;
    let e = this.empty.get(id);
    if (e === undefined) {
      e = new Pipeline(id, [], [], new Map(), this.recorder);
      this.empty.set(id, e);
    }
    return e;
  }

  /** Builds the graph and swaps it in; on any error throws and the old graph keeps running. */
  async load(config: PipelineConfig): Promise<Pipeline> {
    const pipeline = await this.build(config);
    this.current.set(pipeline.id, pipeline);
    this.logger.info({ pipeline: pipeline.id, request: config.pipeline.request, response: config.pipeline.response }, 'pipeline loaded');
    return pipeline;
  }

  /** Builds a graph without publishing it (the canary controller runs two graphs per id). */
  async build(config: PipelineConfig): Promise<Pipeline> {
    const id = config.pipeline.id || DEFAULT_PIPELINE_ID;
    const names = new Set<string>();
    for (const s of config.pipeline.request) names.add(stepName(s));
    for (const s of config.pipeline.response) names.add(stepName(s));
    const runners = new Map<string, StepRunner>();
    try {
      await Promise.all([...names].map(async (name) => {
        runners.set(name, await this.buildStep(id, name, settingsFor(config.steps, name)));
      }));
    } catch (err) {
      this.logger.error({ pipeline: id, err: err instanceof Error ? err.message : String(err) },
        'pipeline refused; the previous graph keeps running');
      throw err;
    }
    const pick = (list: string[]): StepRunner[] => list.map((s) => runners.get(stepName(s))!);
    return new Pipeline(id, pick(config.pipeline.request), pick(config.pipeline.response), runners, this.recorder);
  }

  private async buildStep(pipelineId: string, name: string, settings: StepSettings | undefined): Promise<StepRunner> {
    const step = `wasm:${name}`;
    const fuel = settings?.fuel ?? DEFAULT_FUEL;
    const maxMemoryPages = settings?.max_memory_pages ?? DEFAULT_MAX_MEMORY_PAGES;
    const path = this.modulePath(step, name, settings);
    const recorder = this.recorder;
    const subop: SubopSink | null = recorder !== null && recorder.enabled
      ? (sub, phase, ns) => recorder.subop(pipelineId, step, phase, sub, ns)
      : null;
    const services = {
      step, pipelineId, logger: this.logger, subop, fuel,
      kv: kvStoreFor(name, settings?.kv_max_bytes ?? DEFAULT_KV_MAX_BYTES),
    };
    const onError = settings?.on_error ?? defaultOnError(name);
    if (await isComponentFile(path)) {
      // A WebAssembly component (sdk/wit/step.wit): same StepRunner, ComponentSlot has PluginSlot's contract.
      const component = await compileComponentFile(path, { name: step, fuel, maxMemoryPages, config: settings?.config ?? {} });
      return new StepRunner(name, new ComponentSlot(component, services), onError, pipelineId);
    }
    const compiled = await compilePluginFile(path, { name: step, fuel, maxMemoryPages, config: settings?.config ?? {} });
    const slot = new PluginSlot(compiled, services);
    return new StepRunner(name, slot, onError, pipelineId);
  }

  private modulePath(step: string, name: string, settings: StepSettings | undefined): string {
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
