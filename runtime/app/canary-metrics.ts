// The canary's metrics source over the profiler (per-graph requests, errors and HDR latency
// histograms) and the plugin host's registry (plugin metrics per graph, for custom_metrics rules).
import type { Registry } from 'prom-client';
import type { CanaryMetricsSource, CustomReading, GraphTotals } from '../canary/index.ts';
import type { Variant } from '../pipeline/index.ts';
import type { Profiler } from '../profiling/index.ts';

export class ProfilerCanaryMetrics implements CanaryMetricsSource {
  private readonly profiler: Profiler;
  private readonly registry: Registry;

  constructor(profiler: Profiler, registry: Registry) {
    this.profiler = profiler;
    this.registry = registry;
  }

  get recording(): boolean {
    return this.profiler.enabled;
  }

  totals(pipelineId: string, variant: Variant): GraphTotals | null {
    const g = this.profiler.graph(pipelineId, variant);
    return { requests: g.ok + g.errors, errors: g.errors, latencyUs: g.total.hdr };
  }

  async custom(metric: string, pipelineId: string, variant: Variant): Promise<CustomReading | null> {
    const m = this.registry.getSingleMetric(metric);
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
