// The shadow canaries' metrics (declared in the metric table, runtime/metrics/table.ts), read from
// the proxy's ShadowStats at scrape time: the request path only bumps plain numbers.
import { Counter, Gauge, type Registry } from 'prom-client';
import { promOptions, type MetricName } from '../metrics/index.ts';
import { DIVERGENCE_KINDS, type ShadowStats } from './shadow.ts';

export const SHADOW_METRICS = {
  divergences: 'proxy_canary_divergence_total',
  sampled: 'proxy_canary_shadow_requests_total',
  memory: 'proxy_canary_shadow_memory_bytes',
} as const satisfies Record<string, MetricName>;

/** Registers the shadow metrics in `registry` (every `kind` present from the start, at 0). */
export function registerShadowMetrics(registry: Registry, stats: ShadowStats): void {
  new Counter({
    ...promOptions(SHADOW_METRICS.divergences), registers: [registry],
    collect() {
      this.reset();
      for (const k of DIVERGENCE_KINDS) this.inc({ kind: k }, stats.divergences[k]);
    },
  });
  new Counter({
    ...promOptions(SHADOW_METRICS.sampled), registers: [registry],
    collect() {
      this.reset();
      this.inc(stats.sampled);
    },
  });
  new Gauge({
    ...promOptions(SHADOW_METRICS.memory), registers: [registry],
    collect() { this.set(stats.memoryBytes); },
  });
}
