// The configuration's pipelines (`pipeline` and `pipelines`) made into graphs and a routing: at
// start, and on reload, where every graph is built before any is published (one refused plugin
// leaves all pipelines as they were) and the routing is replaced after, so a connection never routes
// to a pipeline whose graph is not there yet.
import { pipelineEntries, type PipelineEntry, type ProxyConfig } from '../config/index.ts';
import { PipelineRouting, type Pipeline, type PipelineConfig, type PipelineManager } from '../pipeline/index.ts';

/** Each pipeline's graph configuration (its steps and the shared `steps` settings), in matching order. */
export function pipelineConfigs(config: ProxyConfig): PipelineConfig[] {
  return pipelineEntries(config).map((e) => graphConfig(e, config));
}

function graphConfig(e: PipelineEntry, config: ProxyConfig): PipelineConfig {
  const steps = e.steps === undefined ? config.steps : { ...config.steps, ...(e.steps as ProxyConfig['steps']) };
  return { pipeline: { id: e.id, request: e.request, response: e.response }, steps };
}

/** The routing over the manager's slots for `config`'s pipelines (the default last). */
export function routingOf(manager: PipelineManager, config: ProxyConfig): PipelineRouting {
  return new PipelineRouting(pipelineEntries(config).map((e) => ({ id: e.id, match: e.match, slot: manager.slot(e.id) })));
}

/**
 * Builds the baseline graph of every pipeline of `config`, then publishes them all; throws (and
 * publishes nothing) when any is refused. Returns the graphs published.
 */
export async function loadPipelines(manager: PipelineManager, config: ProxyConfig,
  baselineOf: (file: PipelineConfig) => PipelineConfig = (c) => c, beforePublish?: () => Promise<void>): Promise<Pipeline[]> {
  const configs = pipelineConfigs(config);
  const built: Pipeline[] = [];
  try {
    // baselineOf: what runs instead of the file's steps (a completed canary's promotion, canary/promotions.ts).
    for (const c of configs) built.push(await manager.build(baselineOf(c), 'baseline'));
    // With workers, every process has built its graphs before any publishes (a throw here publishes none).
    if (beforePublish !== undefined) await beforePublish();
  } catch (err) {
    // Refused: the generation numbers taken go back, so every process (and a replacement worker) numbers the next reload alike.
    for (const g of built.reverse()) manager.discard(g);
    throw err;
  }
  for (const g of built) manager.setBaseline(g);
  return built;
}

/** Ids `before` has and `after` does not (pipelines a reload removes). */
export function removedPipelines(before: ProxyConfig, after: ProxyConfig): string[] {
  const kept = new Set(pipelineEntries(after).map((e) => e.id));
  return pipelineEntries(before).map((e) => e.id).filter((id) => !kept.has(id));
}
