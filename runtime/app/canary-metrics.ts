// The canary's plugin-metrics source over the plugin host's registry (plugin metrics per graph, for
// custom_metrics rules). Requests, errors and latency are not read here: each arm counts every
// request it serves itself (runtime/canary/arm-evidence.ts), whatever the profiler samples.
import type { Registry } from 'prom-client';
import type { CanaryMetricsSource, CustomReading } from '../canary/index.ts';
import type { Variant } from '../pipeline/index.ts';

export class ProfilerCanaryMetrics implements CanaryMetricsSource {
  private readonly registry: Registry | (() => Promise<Registry>);

  /**
   * `_profiler` is not read (the canary's evidence no longer comes from it); kept for startProxy's
   * call. `registry`: this process's, or (with workers) a function giving every worker's summed.
   */
  constructor(_profiler: unknown, registry: Registry | (() => Promise<Registry>)) {
    this.registry = registry;
  }

  async custom(metric: string, pipelineId: string, variant: Variant): Promise<CustomReading | null> {
    const registry = typeof this.registry === 'function' ? await this.registry() : this.registry;
    const m = registry.getSingleMetric(metric);
    if (m === undefined) return null;
    const data = await m.get();
    const type = String(data.type);
    const kind = type === 'counter' ? 'counter' : type === 'gauge' ? 'gauge' : type === 'histogram' ? 'histogram' : null;
    if (kind === null) return null;
    const out: CustomReading = { kind, value: 0, sum: 0, count: 0 };
    let found = false;
    for (const v of data.values as Array<{ labels: Record<string, string | number>; value: number; metricName?: string }>) {
      if (v.labels.pipeline_id !== pipelineId || v.labels.pipeline !== variant) continue;
      found = true;
      if (kind !== 'histogram') out.value += v.value;
      else if (v.metricName === `${metric}_sum`) out.sum += v.value;
      else if (v.metricName === `${metric}_count`) out.count += v.value;
    }
    return found ? out : null;
  }
}
