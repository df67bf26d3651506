// Plugin-defined `proxy_plugin_*` metrics. One registry of them per WasmHost (never a module-level
// singleton: two proxies in one process share nothing). Every series carries the graph it came
// from: `pipeline` (baseline or candidate) and `pipeline_id`, added by the host, so the canary can
// compare a plugin's metric between its baseline and its candidate.
import type { Registry, Counter } from 'prom-client';
import { MetricKind, PLUGIN_METRIC_NAME } from './abi.ts';

/** A plugin metric bound to one pipeline label: what proxy_increment/record_metric update. */
export interface BoundMetric { inc(delta: number): void; record(value: number): void }

const PLUGIN_BUCKETS = [1, 5, 10, 50, 100, 500, 1000, 5000, 10000, 50000, 100000];

/** One graph's values of a plugin metric: plain numbers, so an update from a plugin is an
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
  /** Keyed by `pipelineId\0variant`. */
  private readonly series = new Map<string, Series>();
  private readonly labelsOf = new Map<string, { pipeline_id: string; pipeline: string }>();

  constructor(name: string, kind: MetricKind) {
    this.name = name;
    this.kind = kind;
    this.help = `plugin metric ${name}`;
    this.type = kind === MetricKind.Counter ? 'counter' : kind === MetricKind.Gauge ? 'gauge' : 'histogram';
  }

  of(pipelineId: string, variant: string): Series {
    const key = `${pipelineId}\0${variant}`;
    let s = this.series.get(key);
    if (s === undefined) {
      s = new Series(this.kind === MetricKind.Histogram);
      this.series.set(key, s);
      this.labelsOf.set(key, { pipeline_id: pipelineId, pipeline: variant });
    }
    return s;
  }

  /** The current value (counter, gauge) or observation count (histogram) of one graph's series; 0 if none. */
  valueOf(pipelineId: string, variant: string): number {
    const s = this.series.get(`${pipelineId}\0${variant}`);
    if (s === undefined) return 0;
    return s.counts === null ? s.value : s.count;
  }

  get(): { name: string; help: string; type: PromType; aggregator: string; values: MetricValue[] } {
    const values: MetricValue[] = [];
    for (const [key, s] of this.series) {
      const g = this.labelsOf.get(key)!;
      if (s.counts === null) {
        values.push({ value: s.value, labels: { ...g } });
        continue;
      }
      let cumulative = 0;
      for (let i = 0; i < PLUGIN_BUCKETS.length; i++) {
        cumulative += s.counts[i];
        values.push({ value: cumulative, labels: { le: PLUGIN_BUCKETS[i], ...g }, metricName: `${this.name}_bucket` });
      }
      values.push({ value: s.count, labels: { le: '+Inf', ...g }, metricName: `${this.name}_bucket` });
      values.push({ value: s.sum, labels: { ...g }, metricName: `${this.name}_sum` });
      values.push({ value: s.count, labels: { ...g }, metricName: `${this.name}_count` });
    }
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values };
  }

  reset(): void {
    this.series.clear();
  }
}

/** The plugin metrics of one WasmHost, registered into its prom-client registry. */
export class PluginMetricRegistry {
  private readonly registry: Registry;
  private readonly families = new Map<string, PluginMetricFamily>();

  constructor(registry: Registry) {
    this.registry = registry;
  }

  /**
   * Define (or reuse: instances are rebuilt, pipelines reloaded) a plugin metric for one graph.
   * Returns null when the name is not `proxy_plugin_*` or the name exists with another kind.
   */
  define(kind: MetricKind, name: string, pipelineId: string, variant: string): BoundMetric | null {
    if (!PLUGIN_METRIC_NAME.test(name)) return null;
    if (kind !== MetricKind.Counter && kind !== MetricKind.Gauge && kind !== MetricKind.Histogram) return null;
    let family = this.families.get(name);
    if (family === undefined) {
      family = new PluginMetricFamily(name, kind);
      this.families.set(name, family);
      this.registry.registerMetric(family as unknown as Counter);
    }
    if (family.kind !== kind) return null;
    return bind(family.of(pipelineId, variant), kind);
  }

  /** A plugin metric's value for one graph (what the canary's custom rules compare); 0 when absent. */
  value(name: string, pipelineId: string, variant: string): number {
    return this.families.get(name)?.valueOf(pipelineId, variant) ?? 0;
  }

  names(): string[] {
    return [...this.families.keys()];
  }
}

function bind(s: Series, kind: MetricKind): BoundMetric {
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
