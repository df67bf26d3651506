// The profiling HTTP endpoint (fastify) on profiling.port — never the wire port (SPEC §4.1).
//   GET  /api/profile                 SPEC §2.1 snapshot of one graph: ?pipeline_id= (default: the
//                                     default pipeline; unknown: 404) &pipeline=baseline|candidate (default baseline)
//   POST /api/profile/reset           clears every statistic (all graphs)
//   GET  /api/profile/steps/:step     one step's detail: both phases, distribution, sub-operations
//   GET  /api/profile/histograms      encoded HDR histograms of every graph (for merging instances)
//   GET  /api/profile/flamegraph      see flamegraph route (?duration, min_width, title, format=folded)
//   GET  /api/profile/series          per-interval figures of one graph (in memory, or persisted with profiling.snapshot_dir)
//   GET  /api/profile/graphs          the configured pipelines, the graphs recorded so far and the default pipeline id
//   GET  /metrics                     Prometheus text: proxy, profiling and plugin metrics
//   GET  /dashboard/                  the dashboard page and its assets (dashboard.ts; / redirects there)
// With profiling.enabled false, every /api/profile path answers 404 (PROXY_ERR_PROFILING_DISABLED);
// /metrics still answers. Who may read it: the endpoint binds profiling.host (default 127.0.0.1);
// with profiling.token set every request needs `Authorization: Bearer <token>`.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import * as hdr from 'hdr-histogram-js';
import { foldFrames, foldedText, profilingMetricsText, type Profiler, type Distribution, type SnapshotStore } from '../profiling/index.ts';
import { parseHost, isVariant, type Variant } from '../config/index.ts';
import { sendError } from './reply.ts';
import { createApp, listenApp, type ConnectionCap } from './app.ts';
import type { Log } from '../log/index.ts';
import { Tokens } from './tokens.ts';
import { registerDashboard, isDashboardAsset } from './dashboard.ts';
import type { ProfilingSurface } from './surface.ts';
import { phaseName } from '../wasm/index.ts';

export interface ProfilingHttpOptions {
  host: string;
  port: number;
  /** `profiling.token` (null: no authentication), or a live holder open when it holds none. */
  token: string | null | Tokens;
  /** The snapshot store, which /api/profile/series reads; absent (tests building the app alone): that route answers 404. */
  snapshots?: SnapshotStore | null;
  /** Where an answer 500 (an error no route expected) is logged; absent: not logged. */
  log?: Pick<Log, 'error'>;
  /** The listener's connection cap (absent: none). */
  connectionCap?: ConnectionCap;
}

/** `2026-11-24T03:00:00Z` or milliseconds since the epoch → ms; NaN when neither. */
function timeMs(text: string): number {
  return /^\d+$/.test(text) ? Number(text) : Date.parse(text);
}

const send = sendError;

/** `60s`, `500ms`, `2m`, `1h` → milliseconds; NaN when malformed. */
export function parseDurationMs(text: string): number {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h)$/.exec(text.trim());
  if (m === null) return NaN;
  const n = Number(m[1]);
  return m[2] === 'ms' ? n : m[2] === 's' ? n * 1000 : m[2] === 'm' ? n * 60_000 : n * 3_600_000;
}

function distribution(s: Distribution) {
  return {
    invocations: s.count, errors: s.errors,
    avg_latency_us: s.avgUs(), p50_latency_us: s.percentileUs(50), p90_latency_us: s.percentileUs(90),
    p95_latency_us: s.percentileUs(95), p99_latency_us: s.percentileUs(99), p999_latency_us: s.percentileUs(99.9),
    max_latency_us: s.maxUs(),
    buckets: s.bounds.map((le, i) => ({ le_us: le, count: s.counts[i] })).concat([{ le_us: Infinity, count: s.counts[s.bounds.length] }])
      .map((b) => ({ le_us: b.le_us === Infinity ? '+Inf' : b.le_us, count: b.count })),
  };
}

export function buildProfilingApp(proxy: ProfilingSurface, profiler: Profiler, opts: ProfilingHttpOptions): FastifyInstance {
  const app = createApp({
    tokens: profilingTokens(opts.token),
    isPublic: (req) => (req.method === 'GET' || req.method === 'HEAD') && isDashboardAsset(req.url),
    // No route takes a body (POST /api/profile/reset has none).
    bodyLimit: 64 * 1024,
    log: opts.log,
    connectionCap: opts.connectionCap,
  });
  app.addHook('onRequest', async (req, reply) => {
    if (req.url.startsWith('/api/profile') && !profiler.enabled) {
      return send(reply, 'PROXY_ERR_PROFILING_DISABLED');
    }
    // With workers, every read (profile, flame graph, series, /metrics) sees the whole machine;
    // ?worker=<i> one worker (the profile's routes and /metrics).
    if (proxy.refresh !== undefined && !isDashboardAsset(req.url)) await proxy.refresh();
    const w = (req.query as Record<string, string | undefined>).worker;
    if (w !== undefined && req.method === 'GET') {
      const index = /^\d+$/.test(w) ? Number(w) : -1;
      const one = index < 0 || proxy.workerProfiler === undefined ? null : await proxy.workerProfiler(index);
      if (one === null) return send(reply, 'PROXY_ERR_BAD_QUERY', `worker must be the index of a running worker, got "${w}"`);
      views.set(req, one);
    }
  });
  /** One worker's profiler for ?worker=<i> (built for the request, freed after it), else the proxy's. */
  const views = new WeakMap<FastifyRequest, Profiler>();
  app.addHook('onResponse', async (req) => {
    views.get(req)?.destroy();
    views.delete(req);
  });
  const viewOf = (req: FastifyRequest): Profiler => views.get(req) ?? profiler;

  /** The graph a request names: ?pipeline_id= and ?pipeline= (baseline | candidate). */
  const graphOf = (q: Record<string, string | undefined>, reply: FastifyReply): { id: string; variant: Variant } | null => {
    // The query's `pipeline` is the graph's Variant: a public name kept from before pipeline_id (config/variant.ts).
    const variant = q.pipeline ?? 'baseline';
    if (!isVariant(variant)) {
      send(reply, 'PROXY_ERR_BAD_QUERY', `pipeline must be "baseline" or "candidate", got "${variant}"`);
      return null;
    }
    const id = q.pipeline_id ?? proxy.defaultPipelineId();
    const configured = proxy.pipelineIds();
    // A configured pipeline, or one that has recorded requests (a reload may have removed it since).
    if (!configured.includes(id) && ![...profiler.allGraphs()].some((x) => x.pipelineId === id)) {
      send(reply, 'PROXY_ERR_NOT_FOUND', `no pipeline "${id}" (configured: ${configured.join(', ')})`);
      return null;
    }
    return { id, variant };
  };

  app.get('/api/profile', async (req, reply) => {
    const g = graphOf(req.query as Record<string, string | undefined>, reply);
    if (g === null) return reply;
    return viewOf(req).snapshot(g.id, g.variant);
  });

  app.get('/api/profile/graphs', async (req) => {
    const profiler = viewOf(req);
    const graphs = [];
    for (const g of profiler.allGraphs()) graphs.push({ pipeline_id: g.pipelineId, pipeline: g.variant, requests: g.ok + g.errors });
    // `pipelines`: the configured pipelines in matching order (the default last), recorded or not.
    return { default_pipeline_id: proxy.defaultPipelineId(), pipelines: proxy.pipelineIds(), graphs };
  });

  app.post('/api/profile/reset', async () => {
    profiler.reset();
    return { reset: true, since: new Date(profiler.since).toISOString() };
  });

  app.get('/api/profile/steps/:step', async (req, reply) => {
    const g = graphOf(req.query as Record<string, string | undefined>, reply);
    if (g === null) return reply;
    const step = (req.params as { step: string }).step;
    const rows = viewOf(req).stepDetail(g.id, g.variant, step);
    if (rows.length === 0) return send(reply, 'PROXY_ERR_NOT_FOUND', `no statistics for step ${step} in ${g.id}/${g.variant}`);
    return {
      name: step.startsWith('wasm:') ? step : `wasm:${step}`, pipeline_id: g.id, pipeline: g.variant,
      phases: rows.map((r) => ({
        phase: r.phase, slow: r.slow, ...distribution(r.stats),
        subops: [...r.subops].map(([name, s]) => ({ name, ...distribution(s) })),
      })),
    };
  });

  app.get('/api/profile/histograms', async (req) => {
    const profiler = viewOf(req);
    const graphs = [];
    for (const g of profiler.allGraphs()) {
      graphs.push({
        pipeline_id: g.pipelineId, pipeline: g.variant, ok: g.ok, errors: g.errors,
        total: hdr.encodeIntoCompressedBase64(g.total.hdr), total_sum_ns: g.total.sumNs,
        upstream: hdr.encodeIntoCompressedBase64(g.upstream.hdr), upstream_sum_ns: g.upstream.sumNs,
        steps: g.rows.filter((s) => s.latency.count > 0).map((s) => ({
          name: s.step, phase: phaseName(s.phase), invocations: s.latency.count, errors: s.latency.errors,
          sum_ns: s.latency.sumNs, max_ns: s.latency.maxNs, slow: s.slow, hdr: hdr.encodeIntoCompressedBase64(s.latency.hdr),
        })),
      });
    }
    return { since: new Date(profiler.since).toISOString(), default_pipeline_id: proxy.defaultPipelineId(), graphs };
  });

  app.get('/api/profile/flamegraph', async (req, reply) => {
    const q = req.query as Record<string, string | undefined>;
    const g = graphOf(q, reply);
    if (g === null) return reply;
    const windowMs = parseDurationMs(q.duration ?? '60s');
    if (!(windowMs > 0)) return send(reply, 'PROXY_ERR_BAD_QUERY', `duration must look like 60s, 500ms, 5m or 1h; got "${q.duration}"`);
    const folded = foldFrames(viewOf(req).recentFrames(windowMs, g.id, g.variant));
    if (q.format === 'folded') {
      reply.header('content-type', 'text/plain; charset=utf-8');
      return foldedText(folded);
    }
    if (q.format !== undefined && q.format !== 'svg') return send(reply, 'PROXY_ERR_BAD_QUERY', `format must be "svg" or "folded"; got "${q.format}"`);
    const minWidth = q.min_width === undefined ? 0.1 : Number(q.min_width);
    if (!(minWidth >= 0 && minWidth <= 100)) return send(reply, 'PROXY_ERR_BAD_QUERY', `min_width must be a percentage 0..100; got "${q.min_width}"`);
    const { renderFlameGraph, defaultScriptHashSource } = await import('../profiling/flamegraph-svg.ts');
    reply.header('content-type', 'image/svg+xml');
    // Opened directly, the document runs in this origin (the dashboard's): its own script alone may run.
    reply.header('content-security-policy', `default-src 'none'; script-src ${defaultScriptHashSource()}; style-src 'unsafe-inline'`);
    return renderFlameGraph(folded, { title: q.title ?? `Pipeline Proxy — ${g.id}/${g.variant}, last ${q.duration ?? '60s'}`, minWidthPct: minWidth });
  });

  // Trend charts: one point per snapshot interval in [from, to] (default: the retention up to now),
  // and `live`, the interval still running.
  app.get('/api/profile/series', async (req, reply) => {
    const q = req.query as Record<string, string | undefined>;
    const g = graphOf(q, reply);
    if (g === null) return reply;
    const store = opts.snapshots ?? null;
    if (store === null) return send(reply, 'PROXY_ERR_NOT_FOUND', 'no time series: this endpoint has no snapshot store');
    const now = Date.now();
    const toMs = q.to === undefined ? now : timeMs(q.to);
    const fromMs = q.from === undefined ? toMs - store.retentionMs : timeMs(q.from);
    if (Number.isNaN(fromMs) || Number.isNaN(toMs)) return send(reply, 'PROXY_ERR_BAD_QUERY', 'from and to must be ISO 8601 times or milliseconds ' +
      'since the epoch');
    const step = q.step === undefined || q.step === '' ? null : q.step.startsWith('wasm:') ? q.step : `wasm:${q.step}`;
    const query = { pipelineId: g.id, variant: g.variant, step, fromMs, toMs };
    const r = await store.series(query);
    // The interval still running, so a chart has a point before the first snapshot (null when it
    // lies outside [from, to] or profiling is disabled).
    return { interval_s: store.intervalMs / 1000, truncated: r.truncated, points: r.points, live: store.live(query) };
  });

  registerDashboard(app, { controlPlaneUrl: () => proxy.controlPlaneUrl() });

  app.get('/metrics', async (req, reply) => {
    reply.header('content-type', proxy.metrics.contentType);
    const one = views.get(req);
    const base = await proxy.metrics.text(one === undefined ? undefined : Number((req.query as { worker: string }).worker));
    return (base.endsWith('\n') ? base : `${base}\n`) + profilingMetricsText(viewOf(req));
  });

  return app;
}

/** A token, none (open), or a live holder → the holder the app checks (open while it holds none). */
function profilingTokens(token: string | null | Tokens): Tokens {
  return token instanceof Tokens ? token : new Tokens(token === null ? [] : [token], true);
}

/** Listens on `profiling.host` (a host name, IPv4 or IPv6 address, bracketed or not) and port. */
export async function startProfilingHttp(proxy: ProfilingSurface, profiler: Profiler, opts: ProfilingHttpOptions): Promise<{ app: FastifyInstance;
  url: string; tokens: Tokens }> {
  const tokens = profilingTokens(opts.token);
  const app = buildProfilingApp(proxy, profiler, { ...opts, token: tokens });
  const host = parseHost(opts.host);
  if (typeof host !== 'string') throw new TypeError(`profiling.host: ${host.problem}`);
  return { app, url: await listenApp(app, host, opts.port), tokens };
}
