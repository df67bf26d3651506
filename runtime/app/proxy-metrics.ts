// The proxy's own metrics, declared in one place. Values are read from the server's counters and
// pools at scrape time (collect callbacks), so the request path only bumps plain integer fields.
import { Counter, Gauge, Registry } from 'prom-client';
import type { ProxyServer } from '../server/index.ts';
import type { UpstreamPool } from '../upstream/index.ts';

/** Label values of proxy_upstream_servers (any other type counts as `other`). */
const SERVER_TYPES = ['RSPrimary', 'RSSecondary', 'Mongos', 'Unknown', 'other'] as const;

/** Prometheus text of the proxy's metrics and the plugin host's (`host`: its WasmHost's registry;
 *  read at scrape time, so metrics plugins define after a reload appear too). */
export async function metricsText(own: Registry, host: Registry): Promise<string> {
  const [a, b] = await Promise.all([own.metrics(), host.metrics()]);
  return a.endsWith('\n') || a === '' ? a + b : `${a}\n${b}`;
}

/** The proxy's own metrics (the plugin host's live in its WasmHost's registry; see metricsText). */
export function proxyMetricsRegistry(server: ProxyServer): Registry {
  const registry = new Registry();
  const gauge = (name: string, help: string, read: () => number) =>
    new Gauge({ name, help, registers: [registry], collect() { this.set(read()); } });
  // Counters mirror plain integers the server bumps on the request path (no prom-client call
  // there); the value is copied in at scrape time.
  const total = (name: string, help: string, read: () => number) =>
    new Counter({ name, help, registers: [registry], collect() { this.reset(); this.inc(read()); } });

  total('proxy_client_connections_opened_total', 'Client connections accepted since start', () => server.stats.connectionsOpened);
  gauge('proxy_client_connections', 'Client connections open now', () => server.stats.connectionsActive);
  total('proxy_wire_requests_total', 'Wire-protocol requests received', () => server.stats.requests);
  total('proxy_error_replies_total', 'Requests answered with an error document by the proxy itself (documents written)', () => server.stats.errorReplies);
  total('proxy_errors_without_reply_total', 'Requests the proxy refused or failed without writing an error document: moreToCome requests (their client expects no reply) and requests whose connection had closed', () => server.stats.errorsWithoutReply);
  total('proxy_decode_errors_total', 'Malformed frames or messages received from clients', () => server.stats.decodeErrors);
  total('proxy_upstream_errors_total', 'Requests failed by a lost upstream connection', () => server.stats.upstreamErrors);
  total('proxy_pipeline_rejected_requests_total', 'Requests rejected by a pipeline step (all graphs)', () => server.stats.rejected);
  // Per graph, step and error code: rejected requests never reach the response phase, so the
  // logging and metrics steps cannot count them.
  new Counter({
    name: 'proxy_pipeline_rejections_total',
    help: 'Requests rejected by a pipeline step, by pipeline id, graph (baseline/candidate), step and error code',
    labelNames: ['pipeline_id', 'pipeline', 'step', 'code'] as const,
    registers: [registry],
    collect() {
      this.reset();
      for (const [key, counts] of server.pipelines.rejectionCounts()) {
        const sep = key.indexOf('\0');
        const labels = { pipeline_id: key.slice(0, sep), pipeline: key.slice(sep + 1) };
        for (const r of counts.all()) this.inc({ ...labels, step: r.step, code: r.code }, r.count);
      }
    },
  });
  total('proxy_client_backpressure_pauses_total', 'Times a client left more than clients.max_pending_reply_bytes unread and its reading was paused', () => server.stats.backpressurePauses);
  total('proxy_shutdown_refused_total', 'Requests answered with ShutdownInProgress during a drain', () => server.stats.shutdownRefused);
  total('proxy_upstream_unsent_retries_total', 'Requests re-sent on another upstream connection because theirs was dead before they were written', () => server.stats.retriedUnsent);
  total('proxy_client_tls_handshake_failures_total', 'Client TLS handshakes that failed, or presented a certificate that did not verify (tls.client_certificates)', () => server.stats.tlsHandshakeFailures);
  total('proxy_client_connections_refused_total', 'Client connections refused because clients.max_connections were open (answered with "connection limit reached")', () => server.stats.connectionsRefused);
  total('proxy_oversize_requests_total', 'Requests answered with an error because they exceeded maxMessageSizeBytes or maxBsonObjectSize', () => server.stats.oversizeRequests);
  total('proxy_lb_transactions_aborted_total', 'Transactions aborted upstream because their load-balanced client closed its connection with them open', () => server.stats.lbTransactionsAborted);
  total('proxy_upstream_state_change_errors_total', 'Upstream replies with a state-change error (not primary, shutting down) answered to the client as HostUnreachable, so its driver retries instead of marking the proxy Unknown', () => server.stats.stateChangeErrorsRewritten);
  total('proxy_lb_cursors_killed_total', 'Cursors killed upstream because their load-balanced client closed its connection with them open', () => server.stats.lbCursorsKilled);
  new Counter({
    name: 'proxy_client_auth_total',
    help: 'Client authentication attempts (config auth), by result: success (logged in) or failure (unknown user, wrong password, malformed, unsupported mechanism)',
    labelNames: ['result'] as const,
    registers: [registry],
    collect() {
      this.reset();
      this.inc({ result: 'success' }, server.stats.authSucceeded);
      this.inc({ result: 'failure' }, server.stats.authFailed);
    },
  });
  total('proxy_pipeline_local_replies_total', 'Requests answered by a pipeline step without the upstream', () => server.stats.localReplies);
  const pools = (f: (p: UpstreamPool) => number) => () => server.router.serverPools().reduce((n, p) => n + f(p), 0);
  gauge('proxy_upstream_pool_connections', 'Upstream connections of the main pool, or of every server\'s pool of a multi-host upstream (in use + idle)', pools((p) => p.size));
  gauge('proxy_upstream_pool_idle', 'Idle upstream connections of the main pool, or of every server\'s pool of a multi-host upstream', pools((p) => p.idleCount));
  total('proxy_upstream_pool_cleared_total', 'Times a server\'s pool was cleared because its monitor\'s check failed (connections in use interrupted, requests there answered with a retryable error)', pools((p) => p.stats.cleared));
  gauge('proxy_upstream_pinned_cursors', 'Cursors pinned to the upstream server (or routed upstream) that opened them', () => server.router.pinnedCursors);
  gauge('proxy_upstream_pinned_transactions', 'Transactions pinned to the upstream server (or routed upstream) that started them', () => server.router.pinnedTransactions);
  gauge('proxy_upstream_pool_waiting', 'Requests waiting for an upstream connection (main pool, or every server\'s pool of a multi-host upstream)', pools((p) => p.waitingCount));
  const topology = server.router.topology;
  if (topology !== null) {
    new Gauge({
      name: 'proxy_upstream_servers',
      help: 'Servers of a multi-host upstream by type as its monitors last saw them (RSPrimary, RSSecondary, Mongos, Unknown, other)',
      labelNames: ['type'] as const,
      registers: [registry],
      collect() {
        this.reset();
        for (const t of SERVER_TYPES) this.set({ type: t }, 0);
        for (const s of topology.allServers()) {
          if (!s.member) continue;
          const t = (SERVER_TYPES as readonly string[]).includes(s.type) ? s.type : 'other';
          this.inc({ type: t });
        }
      },
    });
  }
  const tracing = server.tracing;
  if (tracing !== null) {
    total('proxy_trace_requests_sampled_total', 'Requests traced (sampled at their start: telemetry.sample_rate, or the client traceparent\'s sampled flag)', () => tracing.sampled);
    total('proxy_trace_spans_exported_total', 'Spans the OTLP collector accepted', () => tracing.queue.exported);
    new Counter({
      name: 'proxy_trace_spans_dropped_total',
      help: 'Spans not delivered to the OTLP collector: reason queue_full (telemetry.max_queue_spans reached) or export_failed (collector down, refused or timed out)',
      labelNames: ['reason'] as const,
      registers: [registry],
      collect() {
        this.reset();
        this.inc({ reason: 'queue_full' }, tracing.queue.droppedQueueFull);
        this.inc({ reason: 'export_failed' }, tracing.queue.droppedExportFailed);
      },
    });
    gauge('proxy_trace_spans_queued', 'Spans waiting for export now', () => tracing.queue.queued);
    total('proxy_trace_invalid_traceparent_total', 'Client traceparent values ignored as invalid (wrong length, bad version, all-zero ids)', () => tracing.invalidTraceparents);
  }
  return registry;
}
