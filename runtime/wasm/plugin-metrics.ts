// Plugin-defined `proxy_plugin_*` metrics. One registry of them per WasmHost (never a module-level
// singleton: two proxies in one process share nothing). One Prometheus family per metric name; its
// series carry the labels the plugin declared at definition (at most MAX_METRIC_LABELS, values given
// per observation) and the graph they came from: `pipeline` (baseline or candidate) and
// `pipeline_id`, added by the host, so the canary can compare a plugin's metric between its
// baseline and its candidate. The declared label names are part of a series' identity: a reload
// whose plugin declares other names (the metrics step's `labels`) starts new series beside the old
// ones, which keep their last values.
//
// Cardinality is bounded: a metric holds at most MAX_LABEL_SETS label sets per graph; past that,
// observations go to the set whose every label is `other`, and
// proxy_plugin_label_overflow_total{metric, pipeline_id, pipeline} counts them. Label values are
// cut to MAX_LABEL_VALUE_CHARS characters.
import type { Registry, Counter as PromCounter } from 'prom-client';
import { Counter } from 'prom-client';
import { promOptions, type MetricName } from '../metrics/index.ts';
import type { Variant } from '../config/index.ts';
import { MetricKind, PLUGIN_METRIC_NAME, MAX_METRIC_LABELS, MAX_LABEL_SETS, MAX_LABEL_VALUE_CHARS } from './abi.ts';

/** A plugin metric's series bound to one graph and one label set: what increment/record update. */
export interface BoundMetric { inc(delta: number): void; record(value: number): void }

/** One metric as one graph's step defined it: its series by label values. */
export interface MetricBinding {
  readonly labelCount: number;
  /**
   * The series of a label set. `key` encodes the values as the ABI does (each value preceded by
   * one UTF-16 unit holding its length); null when it does not hold exactly labelCount values.
   * Past MAX_LABEL_SETS, the overflow series (labels `other`, counted in the overflow counter).
   */
  series(key: string): BoundMetric | null;
  /** Whether the last series(key) may be remembered by its key: false for the overflow series and
   *  for keys that name a set only after cutting long values (a caller keeping every such key
   *  would grow without bound). */
  readonly cacheable: boolean;
}

export const OVERFLOW_METRIC = 'proxy_plugin_label_overflow_total' satisfies MetricName;
const LABEL_NAME = /^[a-z_][a-z0-9_]*$/;
/**
 * Plugin metric names a proxy holds (families of its registry, never removed) and the longest
 * name: a plugin defining metrics whose names it builds per request would otherwise grow the
 * registry, and every /metrics scrape, without end.
 */
export const MAX_PLUGIN_METRICS = 1000;
export const MAX_PLUGIN_METRIC_NAME_CHARS = 200;
/**
 * Lists of label names a metric may be defined with per graph. Each list is its own set of series
 * (a reload declaring other labels starts new ones beside the old), so a plugin building label
 * names from request data would otherwise add a list, its series and its id on every request.
 */
export const MAX_LABEL_NAME_LISTS = 8;
const RESERVED_LABELS = new Set(['pipeline', 'pipeline_id', 'le', 'quantile']);
const PLUGIN_BUCKETS = [1, 5, 10, 50, 100, 500, 1000, 5000, 10000, 50000, 100000];

/** One label set's values of one graph: plain numbers, so an update from a plugin is an addition
 *  (prom-client's labelled children hash their labels on every call, ~0.5 µs). */
class Series {
  value = 0;
  sum = 0;
  count = 0;
  /** Histogram bucket counts (non-cumulative; the last slot is +Inf). */
  readonly counts: Float64Array | null;
  /** Exposition labels: the plugin's, then pipeline_id and pipeline. */
  readonly labels: Record<string, string>;
  constructor(histogram: boolean, labels: Record<string, string>) {
    this.counts = histogram ? new Float64Array(PLUGIN_BUCKETS.length + 1) : null;
    this.labels = labels;
  }
}

/** `key` (the ABI's encoding) as values; null when it is malformed or holds another count. */
export function decodeLabelKey(key: string, count: number): string[] | null {
  const out: string[] = [];
  let i = 0;
  while (i < key.length) {
    const n = key.charCodeAt(i);
    if (i + 1 + n > key.length) return null;
    out.push(key.slice(i + 1, i + 1 + n));
    i += 1 + n;
  }
  return out.length === count ? out : null;
}

/** The ABI's encoding of label values (what a plugin sends to proxy_metric_series), with each
 *  value cut to MAX_LABEL_VALUE_CHARS: the canonical key of a label set. */
export function encodeLabelKey(values: readonly string[]): string {
  let k = '';
  for (let v of values) {
    if (v.length > MAX_LABEL_VALUE_CHARS) v = v.slice(0, MAX_LABEL_VALUE_CHARS);
    k += String.fromCharCode(v.length) + v;
  }
  return k;
}

/** One graph's series of a family, bounded by MAX_LABEL_SETS. */
class GraphSeries implements MetricBinding {
  readonly labelCount: number;
  cacheable = false;
  readonly labelNames: readonly string[];
  private readonly family: PluginMetricFamily;
  private readonly graph: { pipeline_id: string; pipeline: Variant };
  readonly byKey = new Map<string, Series>();
  private readonly bound = new Map<Series, BoundMetric>();
  private overflow: BoundMetric | null = null;

  constructor(family: PluginMetricFamily, labelNames: readonly string[], pipelineId: string, variant: Variant) {
    this.family = family;
    this.labelNames = labelNames;
    this.labelCount = labelNames.length;
    // The public label `pipeline` is the graph's variant (config/variant.ts says why the names differ).
    this.graph = { pipeline_id: pipelineId, pipeline: variant };
  }

  series(key: string): BoundMetric | null {
    let s = this.byKey.get(key);
    if (s !== undefined) {
      this.cacheable = true;
      return this.bound.get(s)!;
    }
    const decoded = decodeLabelKey(key, this.labelCount);
    if (decoded === null) return null;
    const canon = encodeLabelKey(decoded);
    const values = canon === key ? decoded : decodeLabelKey(canon, this.labelCount)!;
    this.cacheable = canon === key;
    s = this.byKey.get(canon);
    if (s !== undefined) return this.bound.get(s)!;
    if (this.byKey.size >= MAX_LABEL_SETS) {
      this.cacheable = false;
      return this.overflowSeries();
    }
    return this.add(canon, values);
  }

  private add(canon: string, values: readonly string[]): BoundMetric {
    const labels: Record<string, string> = {};
    const names = this.labelNames;
    for (let i = 0; i < names.length; i++) labels[names[i]!] = values[i]!;
    labels.pipeline_id = this.graph.pipeline_id;
    labels.pipeline = this.graph.pipeline;
    const s = new Series(this.family.kind === MetricKind.Histogram, labels);
    this.byKey.set(canon, s);
    const b = bind(s, this.family.kind);
    this.bound.set(s, b);
    return b;
  }

  /** The `other` label set (outside the cap), whose observations are also counted as overflow. */
  private overflowSeries(): BoundMetric {
    if (this.overflow !== null) return this.overflow;
    const values = this.labelNames.map(() => 'other');
    const canon = encodeLabelKey(values);
    const s = this.byKey.get(canon);
    // The `other` set may be one set past the cap: it is the last one.
    const inner = s !== undefined ? this.bound.get(s)! : this.add(canon, values);
    const counter = this.family.overflow.labels(this.family.name, this.graph.pipeline_id, this.graph.pipeline);
    this.overflow = {
      inc: (v) => { counter.inc(); inner.inc(v); },
      record: (v) => { counter.inc(); inner.record(v); },
    };
    return this.overflow;
  }

  total(): number {
    let t = 0;
    for (const s of this.byKey.values()) t += s.counts === null ? s.value : s.count;
    return t;
  }
}

type PromType = 'counter' | 'gauge' | 'histogram';
interface MetricValue { value: number; labels: Record<string, string | number>; metricName?: string }

/**
 * A `proxy_plugin_*` metric family, registered into the host's registry as a custom prom-client
 * metric: values are kept in Series and turned into exposition lines only at scrape time (get()).
 */
class PluginMetricFamily {
  readonly name: string;
  readonly help: string;
  readonly type: PromType;
  readonly kind: MetricKind;
  readonly aggregator = 'sum';
  readonly overflow: PromCounter<'metric' | 'pipeline_id' | 'pipeline'>;
  /** Keyed by `pipelineId\0variant\0labelNames`. */
  private readonly graphs = new Map<string, GraphSeries>();

  constructor(name: string, kind: MetricKind, overflow: PromCounter<'metric' | 'pipeline_id' | 'pipeline'>) {
    this.name = name;
    this.kind = kind;
    this.overflow = overflow;
    this.help = `plugin metric ${name}`;
    this.type = kind === MetricKind.Counter ? 'counter' : kind === MetricKind.Gauge ? 'gauge' : 'histogram';
  }

  /** One graph's series for these label names; a string (why) past MAX_LABEL_NAME_LISTS lists of the graph. */
  of(labelNames: readonly string[], pipelineId: string, variant: Variant): GraphSeries | string {
    const graph = `${pipelineId}\0${variant}\0`;
    const key = graph + labelNames.join(',');
    let g = this.graphs.get(key);
    if (g === undefined) {
      let lists = 0;
      for (const k of this.graphs.keys()) if (k.startsWith(graph)) lists++;
      if (lists >= MAX_LABEL_NAME_LISTS) {
        return `${this.name} is defined with ${MAX_LABEL_NAME_LISTS} lists of label names already in this pipeline (the most it keeps; ` +
          'a restart drops lists no longer declared)';
      }
      g = new GraphSeries(this, [...labelNames], pipelineId, variant);
      this.graphs.set(key, g);
    }
    return g;
  }

  /** Counter / gauge: the sum of one graph's series; histogram: their observation count; 0 if none. */
  valueOf(pipelineId: string, variant: Variant): number {
    const prefix = `${pipelineId}\0${variant}\0`;
    let t = 0;
    for (const [key, g] of this.graphs) if (key.startsWith(prefix)) t += g.total();
    return t;
  }

  get(): { name: string; help: string; type: PromType; aggregator: string; values: MetricValue[] } {
    const values: MetricValue[] = [];
    for (const g of this.graphs.values()) {
      for (const s of g.byKey.values()) {
        const l = s.labels;
        if (s.counts === null) {
          values.push({ value: s.value, labels: l });
          continue;
        }
        let cumulative = 0;
        for (let i = 0; i < PLUGIN_BUCKETS.length; i++) {
          cumulative += s.counts[i]!;
          values.push({ value: cumulative, labels: { le: PLUGIN_BUCKETS[i]!, ...l }, metricName: `${this.name}_bucket` });
        }
        values.push({ value: s.count, labels: { le: '+Inf', ...l }, metricName: `${this.name}_bucket` });
        values.push({ value: s.sum, labels: l, metricName: `${this.name}_sum` });
        values.push({ value: s.count, labels: l, metricName: `${this.name}_count` });
      }
    }
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values };
  }

  reset(): void {
    this.graphs.clear();
  }
}

/** The plugin metrics of one WasmHost, registered into its prom-client registry. */
export class PluginMetricRegistry {
  private readonly registry: Registry;
  private readonly families = new Map<string, PluginMetricFamily>();
  /** proxy_plugin_label_overflow_total{metric, pipeline_id, pipeline}. */
  readonly overflow: PromCounter<'metric' | 'pipeline_id' | 'pipeline'>;

  constructor(registry: Registry) {
    this.registry = registry;
    this.overflow = new Counter({ ...promOptions(OVERFLOW_METRIC), registers: [registry] });
  }

  /**
   * Define (or reuse: instances are rebuilt, pipelines reloaded) a plugin metric for one graph.
   * Returns why it is refused as a string: a name that is not `proxy_plugin_*` or is the host's,
   * bad or too many label names, or a name that exists with another kind.
   */
  define(kind: MetricKind, name: string, labelNames: readonly string[], pipelineId: string, variant: Variant): MetricBinding | string {
    if (name.length > MAX_PLUGIN_METRIC_NAME_CHARS) return `the name is longer than ${MAX_PLUGIN_METRIC_NAME_CHARS} characters`;
    if (!PLUGIN_METRIC_NAME.test(name)) return 'the name must match proxy_plugin_[a-z0-9_]+';
    if (name === OVERFLOW_METRIC) return `${OVERFLOW_METRIC} is the host's`;
    if (kind !== MetricKind.Counter && kind !== MetricKind.Gauge && kind !== MetricKind.Histogram) return `unknown kind ${kind}`;
    if (labelNames.length > MAX_METRIC_LABELS) return `at most ${MAX_METRIC_LABELS} labels`;
    for (let i = 0; i < labelNames.length; i++) {
      const l = labelNames[i]!;
      if (l.length > MAX_PLUGIN_METRIC_NAME_CHARS) return `a label name is longer than ${MAX_PLUGIN_METRIC_NAME_CHARS} characters`;
      if (!LABEL_NAME.test(l) || l.startsWith('__')) return `label name "${l}" must match [a-z_][a-z0-9_]*`;
      if (RESERVED_LABELS.has(l)) return `label name "${l}" is reserved (the host adds pipeline and pipeline_id)`;
      if (labelNames.indexOf(l) !== i) return `label "${l}" is declared twice`;
    }
    let family = this.families.get(name);
    if (family === undefined) {
      if (this.families.size >= MAX_PLUGIN_METRICS) return `the proxy holds ${MAX_PLUGIN_METRICS} plugin metrics already (the most it defines)`;
      family = new PluginMetricFamily(name, kind, this.overflow);
      this.families.set(name, family);
      this.registry.registerMetric(family as unknown as PromCounter);
    }
    if (family.kind !== kind) return `already defined as a ${family.type}`;
    return family.of(labelNames, pipelineId, variant);
  }

  /** A plugin metric's value for one graph, summed over its label sets (what the canary's custom
   *  rules compare); 0 when absent. */
  value(name: string, pipelineId: string, variant: Variant): number {
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
    while (i < PLUGIN_BUCKETS.length && v > PLUGIN_BUCKETS[i]!) i++;
    counts[i]!++;
    s.sum += v;
    s.count++;
  };
  return { inc: observe, record: observe };
}
