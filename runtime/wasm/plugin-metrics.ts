// Metrics of the wasm host: plugin-defined `proxy_plugin_*` metrics and the host's own step
// error/rebuild counters, in one prom-client Registry the metrics layer merges into /metrics.
import { Registry, Counter } from 'prom-client';
import { MetricKind, PLUGIN_METRIC_NAME } from './abi.ts';

export const wasmRegistry = new Registry();

/** Non-fatal step errors (traps, fuel exhaustion, disabled step) by step and phase. */
export const stepErrorsTotal = new Counter({
  name: 'proxy_step_errors_total',
  help: 'Non-fatal errors inside a pipeline step (traps, fuel exhausted, disabled after a crash loop)',
  labelNames: ['pipeline', 'step', 'phase'] as const,
  registers: [wasmRegistry],
});

/** Plugin instances rebuilt from their compiled module after a trap. */
export const instanceRebuildsTotal = new Counter({
  name: 'proxy_step_instance_rebuilds_total',
  help: 'Plugin instances rebuilt after a trap',
  labelNames: ['pipeline', 'step'] as const,
  registers: [wasmRegistry],
});

/** A plugin metric bound to one pipeline label: what proxy_increment/record_metric update. */
export interface BoundMetric { inc(delta: number): void; record(value: number): void }

const PLUGIN_BUCKETS = [1, 5, 10, 50, 100, 500, 1000, 5000, 10000, 50000, 100000];

/** One pipeline's values of a plugin metric: plain numbers, so an update from a plugin is an
 *  addition (prom-client's labelled children hash their labels on every call, ~0.5 µs). */
class Series {
  value = 0;
  sum = 0;
  count = 0;
  /** Histogram bucket counts (non-cumulative; the last slot is +Inf). */
  readonly counts: Float64Array | null;
  constructor(histogram: boolean) {
    this.counts = histogram ? new Float64Array(PLUGIN_BUCKETS.length + 1) : null;
  }
}

type PromType = 'counter' | 'gauge' | 'histogram';
interface MetricValue { value: number; labels: Record<string, string | number>; metricName?: string }

/**
 * A `proxy_plugin_*` metric family, registered into `wasmRegistry` as a custom prom-client metric:
 * values are kept in Series and turned into exposition lines only at scrape time (get()).
 */
class PluginMetricFamily {
  readonly name: string;
  readonly help: string;
  readonly type: PromType;
  readonly kind: MetricKind;
  readonly aggregator = 'sum';
  private readonly series = new Map<string, Series>();

  constructor(name: string, kind: MetricKind) {
    this.name = name;
    this.kind = kind;
    this.help = `plugin metric ${name}`;
    this.type = kind === MetricKind.Counter ? 'counter' : kind === MetricKind.Gauge ? 'gauge' : 'histogram';
  }

  of(pipelineId: string): Series {
    let s = this.series.get(pipelineId);
    if (s === undefined) {
      s = new Series(this.kind === MetricKind.Histogram);
      this.series.set(pipelineId, s);
    }
    return s;
  }

  get(): { name: string; help: string; type: PromType; aggregator: string; values: MetricValue[] } {
    const values: MetricValue[] = [];
    for (const [pipeline, s] of this.series) {
      if (s.counts === null) {
        values.push({ value: s.value, labels: { pipeline } });
        continue;
      }
      let cumulative = 0;
      for (let i = 0; i < PLUGIN_BUCKETS.length; i++) {
        cumulative += s.counts[i];
        values.push({ value: cumulative, labels: { le: PLUGIN_BUCKETS[i], pipeline }, metricName: `${this.name}_bucket` });
      }
      values.push({ value: s.count, labels: { le: '+Inf', pipeline }, metricName: `${this.name}_bucket` });
      values.push({ value: s.sum, labels: { pipeline }, metricName: `${this.name}_sum` });
      values.push({ value: s.count, labels: { pipeline }, metricName: `${this.name}_count` });
    }
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values };
  }

  reset(): void {
    this.series.clear();
  }
}

const defined = new Map<string, PluginMetricFamily>();

/** Define (or reuse: instances are rebuilt, pipelines reloaded) a plugin metric. Returns null when
 *  the name is not `proxy_plugin_*` or the name exists with another kind. */
export function definePluginMetric(kind: MetricKind, name: string, pipelineId: string): BoundMetric | null {
  if (!PLUGIN_METRIC_NAME.test(name)) return null;
  if (kind !== MetricKind.Counter && kind !== MetricKind.Gauge && kind !== MetricKind.Histogram) return null;
  let family = defined.get(name);
  if (family === undefined) {
    family = new PluginMetricFamily(name, kind);
    defined.set(name, family);
    wasmRegistry.registerMetric(family as unknown as Counter);
  }
  if (family.kind !== kind) return null;
  const s = family.of(pipelineId);
  if (kind === MetricKind.Counter) {
    // A counter never goes down: negative or NaN increments are ignored rather than trapping.
    const inc = (v: number): void => { if (v > 0) s.value += v; };
    return { inc, record: inc };
  }
  if (kind === MetricKind.Gauge) return { inc: (v) => { s.value += v; }, record: (v) => { s.value = v; } };
  const counts = s.counts!;
  const observe = (v: number): void => {
    if (!(v >= 0) && !(v < 0)) return; // NaN
    let i = 0;
    while (i < PLUGIN_BUCKETS.length && v > PLUGIN_BUCKETS[i]) i++;
    counts[i]++;
    s.sum += v;
    s.count++;
  };
  return { inc: observe, record: observe };
}
