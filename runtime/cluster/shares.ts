// What a limit configured for the whole proxy becomes in each of its workers. Connections and
// requests never wait on the primary, so a limit is split into fixed shares that add up to it:
// `clients.max_connections` (worker i admits its share; the shares sum to the limit exactly), and
// the built-in rate_limit step's `max_rps` and `burst` (each worker's bucket refills at its share).
// The cost, stated in docs/operations.md ("Workers"): a worker whose share is used up refuses even
// while another has room — with round-robin accept and pooled drivers the load is even, and the
// machine never admits more than the limit. `workers: "auto"` runs no more workers than the limit
// can be shared by (autoWorkers).
import type { ProxyConfig } from '../config/index.ts';
import type { PipelineConfig } from '../pipeline/index.ts';

/** Worker `index`'s share of `total` over `workers`: the shares differ by at most 1 and sum to `total`. */
export function share(total: number, workers: number, index: number): number {
  return Math.floor(total / workers) + (index < total % workers ? 1 : 0);
}

/** The configuration worker `index` of `workers` runs: the proxy-wide limits replaced by its share. */
export function workerConfig(config: ProxyConfig, workers: number, index: number): ProxyConfig {
  const max = config.clients.max_connections;
  const clients = max === 0 ? config.clients : { ...config.clients, max_connections: share(max, workers, index) };
  // A pipeline's own `steps.rate_limit` replaces the top-level one for that pipeline: it is shared the same way.
  const pipelines = config.pipelines?.map((p) => (p.steps === undefined ? p : { ...p, steps: rateLimitShare(p.steps, workers) }));
  return { ...config, clients, steps: rateLimitShare(config.steps, workers), ...(pipelines === undefined ? {} : { pipelines }) };
}

/**
 * A graph configuration the primary hands its workers (a reload's baselines, a canary's candidate, a
 * promoted or restored baseline: built from the whole proxy's settings) with the built-in rate_limit
 * step's limit replaced by one worker's share, as workerConfig() does for the file's pipelines.
 */
export function pipelineShare(config: PipelineConfig, workers: number): PipelineConfig {
  const steps = rateLimitShare(config.steps, workers);
  return steps === config.steps ? config : { ...config, steps };
}

/** `steps` with the built-in rate_limit step's `max_rps` and `burst` divided by `workers` (the same object when there is nothing to divide). */
function rateLimitShare<S extends Record<string, StepLike>>(steps: S, workers: number): S {
  const rl = steps.rate_limit;
  const rlConfig = rl?.config as Record<string, unknown> | undefined;
  // The built-in step (no module or package of its own) with a limit to split.
  if (workers <= 1 || rl === undefined || rl.module !== undefined || rl.package !== undefined || typeof rlConfig?.max_rps !== 'number') return steps;
  const rps = rlConfig.max_rps;
  const burst = typeof rlConfig.burst === 'number' ? rlConfig.burst : Math.max(rps, 1);
  return { ...steps, rate_limit: { ...rl, config: { ...rlConfig, max_rps: rps / workers, burst: Math.max(1, burst / workers) } } };
}

interface StepLike { config?: unknown; module?: unknown; package?: unknown }

/** Why `config` cannot run on `workers` workers (a limit too small to share), or null. */
export function shareProblem(config: ProxyConfig, workers: number): { path: string; message: string } | null {
  const max = config.clients.max_connections;
  if (max > 0 && max < workers) {
    return { path: 'clients.max_connections', message: `${max} cannot be shared by ${workers} workers (each admits its share; at least 1 each)` };
  }
  return null;
}

/**
 * How many workers `workers: "auto"` runs: one per CPU (`cpus`), but no more than
 * `clients.max_connections` admits (each worker needs a share of at least 1), so a configuration
 * that runs in one process also starts with the default. A number given explicitly is not adjusted:
 * shareProblem() refuses one the limit cannot be shared by.
 */
export function autoWorkers(config: ProxyConfig, cpus: number): number {
  const max = config.clients.max_connections;
  return Math.max(1, max > 0 ? Math.min(cpus, max) : cpus);
}
