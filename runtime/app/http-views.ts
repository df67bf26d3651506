// The running proxy as the HTTP apps see it: objects satisfying the interfaces http/ declares
// (runtime/http/surface.ts), so http/ never reaches into the server, its router or its pools.
import type { AdminSurface, MetricsSource, PipelineView, ProfilingSurface, Readiness, WorkerView, WorkersView } from '../http/surface.ts';
import type { RunningProxy } from './serve.ts';
import { pipelineEntries } from '../config/index.ts';

/** The proxy's one registry, for every /metrics of the proxy. */
export function proxyMetrics(running: RunningProxy): MetricsSource {
  const registry = running.metrics;
  return {
    contentType: registry.contentType,
    // Read at each scrape: a reload may have given plugins new metrics.
    text: () => registry.metrics(),
  };
}

/**
 * Readiness: not draining, and the upstream able to serve — one host: reachable (an open pooled
 * connection, or a new one opened now within upstream.connect_timeout_ms); a replica set: a
 * primary known; a mongos list: a router that answered its last check (the monitors' view, not
 * the first seed's pool).
 */
export async function readiness(running: RunningProxy): Promise<Readiness> {
  const server = running.server;
  if (running.draining || server.draining) {
    return { ready: false, reason: 'draining', message: 'the proxy is shutting down (SIGTERM): new clients should go elsewhere' };
  }
  const topology = server.router.topology;
  if (topology !== null) {
    const r = topology.readiness();
    if (!r.ready) return { ready: false, reason: r.reason, upstream: topology.describe(), message: r.message };
    return { ready: true, upstream: topology.describe() };
  }
  const pool = server.pool;
  if (!(await pool.probe())) {
    return { ready: false, reason: 'upstream_unreachable', upstream: pool.describe(), message: `no connection to the ` +
      `upstream: ${pool.lastError || 'connect failed'}` };
  }
  return { ready: true, upstream: pool.describe() };
}

export function defaultPipeline(running: RunningProxy): PipelineView {
  const p = running.pipelines.get(running.server.pipelineId);
  const matches = new Map(pipelineEntries(running.config).map((e) => [e.id, e.match]));
  const pipelines = running.server.routing.ids.map((id) => {
    const g = running.pipelines.get(id);
    return { id, match: (matches.get(id) ?? {}) as Record<string, unknown>, request: g.requestSteps.map((s) => s.id),
      response: g.responseSteps.map((s) => s.id), generation: g.key.generation };
  });
  return { id: p.id, request: p.requestSteps.map((s) => s.id), response: p.responseSteps.map((s) => s.id), pipelines };
}

/** This process as one of the processes serving clients: worker `index` (0 without workers). */
export function workerView(running: RunningProxy, index: number): WorkerView {
  const generations: Record<string, number> = {};
  for (const id of running.server.routing.ids) generations[id] = running.pipelines.get(id).key.generation;
  const s = running.server.stats;
  const canary = running.workerCanary?.handlers.view();
  return { worker: index, pid: process.pid, connections_active: s.connectionsActive, connections_opened: s.connectionsOpened, requests: s.requests,
    generations, ...(canary === undefined ? {} : { canary }) };
}

export function adminSurface(running: RunningProxy, metrics: MetricsSource, workers?: () => Promise<WorkersView>, workerCount?: number): AdminSurface {
  return {
    workers: workers ?? (async () => ({
      workers: [workerView(running, 0)], replaced: 0, unresponsive: 0, start_failures: 0, pin_lookups: { found: 0, missed: 0 },
    })),
    workerCount,
    readiness: () => readiness(running),
    metrics,
    get logRing() { return running.logRing; },
    pipeline: () => defaultPipeline(running),
    adminListen: () => running.config.admin?.listen ?? null,
    reload: (next, source) => running.reload(next, source),
  };
}

export function profilingSurface(running: RunningProxy, metrics: MetricsSource,
  machine?: Pick<ProfilingSurface, 'refresh' | 'workerProfiler'>): ProfilingSurface {
  return {
    refresh: machine?.refresh,
    workerProfiler: machine?.workerProfiler,
    defaultPipelineId: () => running.server.pipelineId,
    pipelineIds: () => running.server.routing.ids,
    metrics,
    controlPlaneUrl: () => running.controlPlaneUrl,
  };
}
