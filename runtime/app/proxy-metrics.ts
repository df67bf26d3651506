// The proxy's own metrics, as the metric table (runtime/metrics/table.ts) declares them. Values are
// read from the server's counters and pools at scrape time (collect callbacks), so the request path
// only bumps plain integer fields.
import { Counter, Gauge, type Registry } from 'prom-client';
import { METRICS, type MetricName, type MetricSpec, type ServerStatField } from '../metrics/index.ts';
import type { ProxyServer } from '../server/index.ts';
import type { UpstreamPool } from '../upstream/index.ts';

/** Label values of proxy_upstream_servers (any other type counts as `other`). */
const SERVER_TYPES = ['RSPrimary', 'RSSecondary', 'Mongos', 'Unknown', 'other'] as const;

/** Registers the proxy's own metrics in `registry` (the proxy's one registry, which the plugin
 *  host's and the notifier's metrics share): every entry of the metric table owned by the server,
 *  the upstream, the pipelines or tracing, in the table's order; tracing's and the multi-host
 *  upstream's only when the proxy has them. */
export function registerProxyMetrics(registry: Registry, server: ProxyServer): void {
  const stats = server.stats;
  const pools = (f: (p: UpstreamPool) => number) => () => server.router.serverPools().reduce((n, p) => n + f(p), 0);
  const topology = server.router.topology;
  const tracing = server.tracing;
  // Values the server does not keep in `stats`, read at scrape time; null: not exposed by this proxy.
  const readers: Partial<Record<MetricName, (() => number) | null>> = {
    proxy_upstream_pool_connections: pools((p) => p.size),
    proxy_upstream_pool_idle: pools((p) => p.idleCount),
    proxy_upstream_pool_cleared_total: pools((p) => p.stats.cleared),
    proxy_upstream_pinned_cursors: () => server.router.pinnedCursors,
    proxy_upstream_pinned_transactions: () => server.router.pinnedTransactions,
    proxy_upstream_pool_waiting: pools((p) => p.waitingCount),
    proxy_trace_requests_sampled_total: tracing === null ? null : () => tracing.sampled,
    proxy_trace_spans_exported_total: tracing === null ? null : () => tracing.queue.exported,
    proxy_trace_spans_queued: tracing === null ? null : () => tracing.queue.queued,
    proxy_trace_invalid_traceparent_total: tracing === null ? null : () => tracing.invalidTraceparents,
  };
  // Labelled values (label values → number), likewise; null: not exposed by this proxy.
  const labelled: Partial<Record<MetricName, ((set: (labels: Record<string, string>, value: number) => void) => void) | null>> = {
    proxy_pipeline_rejections_total: (set) => {
      for (const [key, counts] of server.pipelines.rejectionCounts()) {
        const sep = key.indexOf('\0');
        const pipelineId = key.slice(0, sep);
        const variant = key.slice(sep + 1);
        for (const r of counts.all()) set({ pipeline_id: pipelineId, pipeline: variant, step: r.step, code: r.code }, r.count);
      }
    },
    proxy_upstream_servers: topology === null ? null : (set) => {
      const byType = new Map<string, number>(SERVER_TYPES.map((t) => [t, 0]));
      for (const s of topology.allServers()) {
        if (!s.member) continue;
        const t = (SERVER_TYPES as readonly string[]).includes(s.type) ? s.type : 'other';
        byType.set(t, byType.get(t)! + 1);
      }
      for (const [t, n] of byType) set({ type: t }, n);
    },
    proxy_trace_spans_dropped_total: tracing === null ? null : (set) => {
      set({ reason: 'queue_full' }, tracing.queue.droppedQueueFull);
      set({ reason: 'export_failed' }, tracing.queue.droppedExportFailed);
    },
  };
  for (const name of Object.keys(METRICS) as MetricName[]) {
    const m: MetricSpec = METRICS[name];
    if (m.owner !== 'server' && m.owner !== 'upstream' && m.owner !== 'pipelines' && m.owner !== 'tracing') continue;
    let collect: (metric: Counter | Gauge) => void;
    if (m.stat !== undefined) {
      const field = m.stat as ServerStatField;
      collect = (metric) => { metric.reset(); metric.inc(stats[field]); };
    } else if (m.statByLabel !== undefined) {
      const label = m.labels[0]!;
      const fields = Object.entries(m.statByLabel) as Array<[string, ServerStatField]>;
      collect = (metric) => {
        metric.reset();
        for (const [value, field] of fields) metric.inc({ [label]: value }, stats[field]);
      };
    } else if (readers[name] !== undefined) {
      const read = readers[name];
      if (read === null) continue;
      collect = (metric) => { metric.reset(); metric.inc(read()); };
    } else if (labelled[name] !== undefined) {
      const each = labelled[name];
      if (each === null) continue;
      collect = (metric) => { metric.reset(); each((labels, value) => metric.inc(labels, value)); };
    } else {
      throw new Error(`metric ${name} (owner ${m.owner}) has no reader in proxyMetricsRegistry`);
    }
    const options = { name, help: m.help, labelNames: m.labels, registers: [registry], collect(this: Counter | Gauge) { collect(this); } };
    if (m.type === 'counter') new Counter(options);
    else new Gauge(options);
  }
}
