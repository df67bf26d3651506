// Metrics of the wasm host: plugin-defined `proxy_plugin_*` metrics and the host's own step
// error/rebuild counters, in one prom-client Registry the metrics layer merges into /metrics.
import { Registry, Counter, Gauge, Histogram } from 'prom-client';
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

type AnyMetric = Counter<'pipeline'> | Gauge<'pipeline'> | Histogram<'pipeline'>;
const defined = new Map<string, { kind: MetricKind; metric: AnyMetric }>();

const PLUGIN_BUCKETS = [1, 5, 10, 50, 100, 500, 1000, 5000, 10000, 50000, 100000];

/** Define (or reuse: instances are rebuilt, pipelines reloaded) a plugin metric. Returns null when
 *  the name is not `proxy_plugin_*` or the name exists with another kind. */
export function definePluginMetric(kind: MetricKind, name: string, pipelineId: string): BoundMetric | null {
  if (!PLUGIN_METRIC_NAME.test(name)) return null;
  let d = defined.get(name);
  if (d === undefined) {
    const help = `plugin metric ${name}`;
    const common = { name, help, labelNames: ['pipeline'] as const, registers: [wasmRegistry] };
    let metric: AnyMetric;
    if (kind === MetricKind.Counter) metric = new Counter(common);
    else if (kind === MetricKind.Gauge) metric = new Gauge(common);
    else if (kind === MetricKind.Histogram) metric = new Histogram({ ...common, buckets: PLUGIN_BUCKETS });
    else return null;
    d = { kind, metric };
    defined.set(name, d);
  }
  if (d.kind !== kind) return null;
  if (kind === MetricKind.Counter) {
    const c = (d.metric as Counter<'pipeline'>).labels(pipelineId);
    // A negative counter increment would throw in prom-client; ignore it instead of trapping.
    const inc = (v: number): void => { if (v > 0) c.inc(v); };
    return { inc, record: inc };
  }
  if (kind === MetricKind.Gauge) {
    const g = (d.metric as Gauge<'pipeline'>).labels(pipelineId);
    return { inc: (v) => g.inc(v), record: (v) => g.set(v) };
  }
  const h = (d.metric as Histogram<'pipeline'>).labels(pipelineId);
  return { inc: (v) => h.observe(v), record: (v) => h.observe(v) };
}
