// Every metric the proxy exposes on /metrics, declared once: name, type, help and label names.
// The server's counters (ServerStats, runtime/server/context.ts) are typed from the `stat` fields
// here; the proxy's one registry (its own metrics registered by app/proxy-metrics.ts, the plugin
// host's by wasm/wasm-host.ts, the notifier's by canary/notify/metrics.ts) and the profiler's
// hand-built exposition (profiling/prometheus.ts) take their names, help and labels from here, and
// test/metrics/table.test.ts checks a running proxy's /metrics and docs/http-api.md
// against it. Metrics plugins define (`proxy_plugin_*`, docs/plugins.md) are not in it: their
// names come from the plugins.
//
// The request path never calls prom-client: a counter is a plain number field bumped in place and
// copied into the registry at scrape time.

export type MetricType = 'counter' | 'gauge' | 'histogram' | 'summary';

/** Which component's numbers a metric reports (and which code registers it). */
export type MetricOwner = 'server' | 'upstream' | 'pipelines' | 'tracing' | 'plugin-host' | 'notifier' | 'canary' | 'http' | 'profiler' | 'machine';

export interface MetricSpec {
  readonly type: MetricType;
  readonly help: string;
  /** Label names in exposition order (a histogram's `le` and a summary's `quantile` not included). */
  readonly labels: readonly string[];
  readonly owner: MetricOwner;
  /** owner 'server', no labels: the ServerStats field holding the value. */
  readonly stat?: string;
  /** owner 'server', one label: the ServerStats field of each label value, in exposition order. */
  readonly statByLabel?: Readonly<Record<string, string>>;
}

const GRAPH = ['pipeline_id', 'pipeline'] as const;
const STEP = ['pipeline_id', 'pipeline', 'step', 'phase'] as const;

/** In exposition order within each registry. */
export const METRICS = {
  proxy_client_connections_opened_total: { type: 'counter', owner: 'server', labels: [], stat: 'connectionsOpened', help: 'Client connections ' +
    'accepted since start' },
  proxy_client_connections: { type: 'gauge', owner: 'server', labels: [], stat: 'connectionsActive', help: 'Client connections open now' },
  proxy_wire_requests_total: { type: 'counter', owner: 'server', labels: [], stat: 'requests', help: 'Wire-protocol requests received' },
  proxy_error_replies_total: { type: 'counter', owner: 'server', labels: [], stat: 'errorReplies', help: 'Requests answered with an error document ' +
    'by the proxy itself (documents written)' },
  proxy_errors_without_reply_total: { type: 'counter', owner: 'server', labels: [], stat: 'errorsWithoutReply', help: 'Requests the proxy refused ' +
    'or failed without writing an error document: moreToCome requests (their client expects no reply) and requests whose connection had closed' },
  proxy_decode_errors_total: { type: 'counter', owner: 'server', labels: [], stat: 'decodeErrors', help: 'Malformed frames or messages received from clients' },
  proxy_upstream_errors_total: { type: 'counter', owner: 'server', labels: [], stat: 'upstreamErrors', help: 'Requests failed by a lost upstream connection' },
  proxy_pipeline_rejected_requests_total: { type: 'counter', owner: 'server', labels: [], stat: 'rejected', help: 'Requests rejected by a pipeline ' +
    'step (all graphs)' },
  // Rejected requests never reach the response phase, so the logging and metrics steps cannot count them.
  proxy_pipeline_rejections_total: { type: 'counter', owner: 'pipelines', labels: ['pipeline_id', 'pipeline', 'step', 'code'], help: 'Requests ' +
    'rejected by a pipeline step, by pipeline id, graph (baseline/candidate), step and error code' },
  proxy_client_backpressure_pauses_total: { type: 'counter', owner: 'server', labels: [], stat: 'backpressurePauses', help: 'Times a client left ' +
    'more than clients.max_pending_reply_bytes unread and its reading was paused' },
  proxy_shutdown_refused_total: { type: 'counter', owner: 'server', labels: [], stat: 'shutdownRefused', help: 'Requests answered with ' +
    'ShutdownInProgress during a drain' },
  proxy_upstream_unsent_retries_total: { type: 'counter', owner: 'server', labels: [], stat: 'retriedUnsent', help: 'Requests re-sent on another ' +
    'upstream connection because theirs was dead before they were written' },
  proxy_client_tls_handshake_failures_total: { type: 'counter', owner: 'server', labels: [], stat: 'tlsHandshakeFailures', help: 'Client TLS ' +
    'handshakes that failed, or presented a certificate that did not verify (tls.client_certificates)' },
  proxy_client_connections_refused_total: { type: 'counter', owner: 'server', labels: [], stat: 'connectionsRefused', help: 'Client connections ' +
    'refused because clients.max_connections were open (answered with "connection limit reached")' },
  proxy_oversize_requests_total: { type: 'counter', owner: 'server', labels: [], stat: 'oversizeRequests', help: 'Requests answered with an error ' +
    'because they exceeded maxMessageSizeBytes or maxBsonObjectSize' },
  proxy_lb_transactions_aborted_total: { type: 'counter', owner: 'server', labels: [], stat: 'lbTransactionsAborted', help: 'Transactions aborted ' +
    'upstream because their load-balanced client closed its connection with them open' },
  proxy_upstream_state_change_errors_total: { type: 'counter', owner: 'server', labels: [], stat: 'stateChangeErrorsRewritten', help: 'Upstream ' +
    'replies with a state-change error (not primary, shutting down) answered to the client as HostUnreachable, so its driver retries instead of ' +
    'marking the proxy Unknown' },
  proxy_lb_cursors_killed_total: { type: 'counter', owner: 'server', labels: [], stat: 'lbCursorsKilled', help: 'Cursors killed upstream because ' +
    'their load-balanced client closed its connection with them open' },
  proxy_client_auth_total: { type: 'counter', owner: 'server', labels: ['result'], statByLabel: { success: 'authSucceeded', failure: 'authFailed' },
    help: 'Client authentication attempts (config auth), by result: success (logged in) or failure (unknown user, wrong password, malformed, ' +
    'unsupported mechanism)' },
  proxy_pipeline_local_replies_total: { type: 'counter', owner: 'server', labels: [], stat: 'localReplies', help: 'Requests answered by a pipeline ' +
    'step without the upstream' },
  proxy_upstream_pool_connections: { type: 'gauge', owner: 'upstream', labels: [], help: 'Upstream connections of the main pool, or of every ' +
    'server\'s pool of a multi-host upstream (in use + idle)' },
  proxy_upstream_pool_idle: { type: 'gauge', owner: 'upstream', labels: [], help: 'Idle upstream connections of the main pool, or of every ' +
    'server\'s pool of a multi-host upstream' },
  proxy_upstream_pool_cleared_total: { type: 'counter', owner: 'upstream', labels: [], help: 'Times a server\'s pool was cleared because its ' +
    'monitor\'s check failed (connections in use interrupted, requests there answered with a retryable error)' },
  proxy_upstream_pinned_cursors: { type: 'gauge', owner: 'upstream', labels: [], help: 'Cursors pinned to the upstream server (or routed upstream) ' +
    'that opened them' },
  proxy_upstream_pinned_transactions: { type: 'gauge', owner: 'upstream', labels: [], help: 'Transactions pinned to the upstream server (or routed ' +
    'upstream) that started them' },
  proxy_upstream_pool_waiting: { type: 'gauge', owner: 'upstream', labels: [], help: 'Requests waiting for an upstream connection (main pool, or ' +
    'every server\'s pool of a multi-host upstream)' },
  // Only with a multi-host upstream (replica set or mongos list).
  proxy_upstream_servers: { type: 'gauge', owner: 'upstream', labels: ['type'], help: 'Servers of a multi-host upstream by type as its monitors ' +
    'last saw them (RSPrimary, RSSecondary, Mongos, Unknown, other)' },
  // Only with telemetry.otlp_endpoint.
  proxy_trace_requests_sampled_total: { type: 'counter', owner: 'tracing', labels: [], help: 'Requests traced (sampled at their start: ' +
    'telemetry.sample_rate, or the client traceparent\'s sampled flag)' },
  proxy_trace_spans_exported_total: { type: 'counter', owner: 'tracing', labels: [], help: 'Spans the OTLP collector accepted' },
  proxy_trace_spans_dropped_total: { type: 'counter', owner: 'tracing', labels: ['reason'], help: 'Spans not delivered to the OTLP collector: ' +
    'reason queue_full (telemetry.max_queue_spans reached) or export_failed (collector down, refused or timed out)' },
  proxy_trace_spans_queued: { type: 'gauge', owner: 'tracing', labels: [], help: 'Spans waiting for export now' },
  proxy_trace_invalid_traceparent_total: { type: 'counter', owner: 'tracing', labels: [], help: 'Client traceparent values ignored as invalid ' +
    '(wrong length, bad version, all-zero ids)' },
  // The plugin host's (runtime/wasm/wasm-host.ts, plugin-metrics.ts).
  proxy_plugin_label_overflow_total: { type: 'counter', owner: 'plugin-host', labels: ['metric', 'pipeline_id', 'pipeline'], help: 'Plugin metric ' +
    'observations past the label-set cap (1000 per metric per graph), counted into the label set "other"' },
  proxy_step_errors_total: { type: 'counter', owner: 'plugin-host', labels: STEP, help: 'Non-fatal errors inside a pipeline step (traps, fuel ' +
    'exhausted, disabled after a crash loop)' },
  proxy_step_instance_rebuilds_total: { type: 'counter', owner: 'plugin-host', labels: ['pipeline_id', 'pipeline', 'step'], help: 'Plugin ' +
    'instances rebuilt after a trap' },
  // Only with a control plane (runtime/canary/notify/metrics.ts).
  proxy_notifications_delivered_total: { type: 'counter', owner: 'notifier', labels: ['channel'], help: 'Notification messages delivered (2xx, or ' +
    'accepted by the SMTP server), by channel type' },
  proxy_notifications_failed_total: { type: 'counter', owner: 'notifier', labels: ['channel'], help: 'Notification messages given up (refused by ' +
    'the receiver, or max_attempts reached), by channel type' },
  proxy_notifications_retries_total: { type: 'counter', owner: 'notifier', labels: ['channel'], help: 'Failed notification attempts that were ' +
    'scheduled again, by channel type' },
  proxy_notifications_refused_total: { type: 'counter', owner: 'notifier', labels: ['channel'], help: 'Messages not queued because their channel ' +
    'was invalid (e.g. a webhook without a secret), by channel type' },
  proxy_notifications_pending: { type: 'gauge', owner: 'notifier', labels: [], help: 'Notification messages in the outbox not yet delivered or given up' },
  // Only with a control plane (runtime/canary/shadow-metrics.ts).
  proxy_canary_divergence_total: { type: 'counter', owner: 'canary', labels: ['kind'], help: 'Shadowed requests on which a shadow canary\'s ' +
    'candidate diverged from the baseline, by kind (outcome: a different decision; request: a different command; reply: a different answer)' },
  proxy_canary_shadow_requests_total: { type: 'counter', owner: 'canary', labels: [], help: 'Requests on which a shadow canary ran its candidate ' +
    'beside the baseline' },
  proxy_canary_shadow_memory_bytes: { type: 'gauge', owner: 'canary', labels: [], help: 'Bytes held by shadow canaries\' rings of diffs ' +
    '(bounded by canary.shadow.max_diffs per pipeline)' },
  // The HTTP listeners (runtime/app/http-surfaces.ts), in the process that opens them (the primary with workers).
  proxy_http_connections_refused_total: { type: 'counter', owner: 'http', labels: ['listener'], help: 'Connections to an HTTP listener closed as ' +
    'they were accepted because it served its max_connections already, by listener: admin, profiling, control_plane' },
  // With several workers, the machine's /metrics only: the primary's own (runtime/cluster/machine.ts).
  proxy_worker_restarts_total: { type: 'counter', owner: 'machine', labels: ['reason'], help: 'Workers replaced since the proxy started, by reason: ' +
    'exited (crashed or killed) or unresponsive (ended by the heartbeat)' },
  proxy_worker_start_failures_total: { type: 'counter', owner: 'machine', labels: [], help: 'Replacement workers that failed to start (each is ' +
    'tried again after a growing delay)' },
  proxy_workers: { type: 'gauge', owner: 'machine', labels: [], help: 'Workers ready and serving now' },
  // The profiling endpoint's /metrics only (runtime/profiling/prometheus.ts).
  proxy_step_latency_us: { type: 'histogram', owner: 'profiler', labels: STEP, help: 'Latency of one pipeline step invocation, microseconds' },
  proxy_step_slow_total: { type: 'counter', owner: 'profiler', labels: STEP, help: 'Step invocations slower than their threshold ' +
    '(profiling.slow_step_threshold_us or per_step_thresholds)' },
  proxy_step_slow_log_suppressed_total: { type: 'counter', owner: 'profiler', labels: STEP, help: 'Slow-step log lines not written because of the ' +
    'per-step rate limit (each is still counted in proxy_step_slow_total)' },
  proxy_requests_total: { type: 'counter', owner: 'profiler', labels: ['pipeline_id', 'pipeline', 'status'], help: 'Requests that ran through a ' +
    'pipeline graph, by graph and status' },
  proxy_request_duration_seconds: { type: 'summary', owner: 'profiler', labels: GRAPH, help: 'End-to-end request latency through the proxy, seconds' },
} as const satisfies Record<string, MetricSpec>;

export type MetricName = keyof typeof METRICS;
type Entry = (typeof METRICS)[MetricName];

/** The ServerStats field names the table names (`stat`, and the fields of `statByLabel`). */
export type ServerStatField =
  | (Entry extends infer E ? E extends { stat: infer S extends string } ? S : never : never)
  | (Entry extends infer E ? E extends { statByLabel: infer M } ? M[keyof M] & string : never : never);

/** The server's counters: one plain number per field, bumped in place on the request path. */
export type ServerStats = { [K in ServerStatField]: number };

/** The ServerStats fields, in the table's order. */
export const SERVER_STAT_FIELDS: readonly ServerStatField[] = Object.values(METRICS as Record<string, MetricSpec>).flatMap((m) => [
  ...(m.stat === undefined ? [] : [m.stat]), ...(m.statByLabel === undefined ? [] : Object.values(m.statByLabel)),
]) as ServerStatField[];

/**
 * Every ServerStats field at 0, always in the table's order (one object shape for the JIT). Built
 * by Object.fromEntries: adding the twenty fields one keyed store at a time in a loop left V8 with
 * a dictionary-mode object (slower `stats.requests++` on the request path);
 * test/metrics/table.test.ts checks the object has fast properties.
 */
export function newServerStats(): ServerStats {
  return Object.fromEntries(SERVER_STAT_FIELDS.map((f) => [f, 0])) as ServerStats;
}

/** The options prom-client takes for a metric of the table: its name, help and label names. */
export function promOptions<N extends MetricName>(name: N): { name: N; help: string; labelNames: (typeof METRICS)[N]['labels'] } {
  const m = METRICS[name];
  return { name, help: m.help, labelNames: m.labels };
}

/** `# HELP` and `# TYPE` lines of a metric of the table, for exposition text built by hand. */
export function expositionHeader(name: MetricName): string[] {
  const m = METRICS[name];
  return [`# HELP ${name} ${m.help.replace(/\\/g, '\\\\').replace(/\n/g, '\\n')}`, `# TYPE ${name} ${m.type}`];
}
