// What the HTTP apps need of the running proxy, declared here so that http/ depends on nothing
// above it: app/ builds objects that satisfy these (runtime/app/http-views.ts) and hands them in.
import type { ProxyConfig } from '../config/index.ts';
import type { LogRing } from '../log/ring.ts';
import type { Profiler } from '../profiling/index.ts';

/** The Prometheus exposition of every metric the proxy has, read at scrape time. */
export interface MetricsSource {
  readonly contentType: string;
  /** With workers, `worker` (an index) gives that worker's alone. */
  text(worker?: number): Promise<string>;
}

/** GET /readyz: ready, or 503 with a reason (`draining`, `upstream_unreachable`, a topology's). */
export type Readiness =
  | { ready: true; upstream: unknown }
  | { ready: false; reason: string; upstream?: unknown; message: string };

/** The step ids of a pipeline, as the admin API shows them. */
export interface PipelineView {
  id: string;
  request: string[];
  response: string[];
  /** Every pipeline in matching order, the default last (config `pipelines`), with its match and graph generation. */
  pipelines?: Array<{ id: string; match: Record<string, unknown>; request: string[]; response: string[]; generation: number }>;
}

export interface AdminSurface {
  readiness(): Promise<Readiness>;
  readonly metrics: MetricsSource;
  /** The recent log lines; null when the logger keeps none. */
  readonly logRing: LogRing | null;
  /** The default pipeline's steps. */
  pipeline(): PipelineView;
  /** The running configuration's `admin.listen`: the address this API was opened on. */
  adminListen(): string | null;
  /**
   * Applies `next`, or throws (a ConfigError, a plugin's error) and keeps the running configuration.
   * `source` is what `next` came from (the file, or "request body"), named in a refusal's message.
   */
  reload(next: ProxyConfig, source: string | null): Promise<void>;
  /** The processes serving clients (GET /api/v1/workers). */
  workers(): Promise<WorkersView>;
  /** With workers, how many (GET /api/v1/logs?worker=<i> takes 0 … n-1); absent: one process, no worker to choose. */
  readonly workerCount?: number;
}

/** One process serving clients: the proxy itself (workers: 1) or one worker. */
export interface WorkerView {
  worker: number;
  pid: number;
  connections_active: number;
  connections_opened: number;
  requests: number;
  /** The graph generation each pipeline serves. */
  generations: Record<string, number>;
  /** With a control plane: each pipeline with a canary split on this worker, and the requests each arm served here. */
  canary?: Record<string, { traffic_pct: number; baseline: number; candidate: number; shadow?: { shadow_pct: number; sampled: number; diverged: number } }>;
}

export interface WorkersView {
  workers: WorkerView[];
  /** Workers that exited and were started again. */
  replaced: number;
  /** Of those, workers the heartbeat ended for not answering within worker_heartbeat.timeout_ms. */
  unresponsive: number;
  /** Replacement workers that failed to start (each tried again after a growing delay). */
  start_failures: number;
  /**
   * getMores and transaction statements for a cursor or transaction another worker opened
   * (multi-host upstreams): asked of the primary and found, or not found (then sent where the
   * topology selects).
   */
  pin_lookups: { found: number; missed: number };
}

export interface ProfilingSurface {
  /** The default pipeline's id: the one requests no `pipelines` entry matches go through. */
  defaultPipelineId(): string;
  /** The configured pipelines in matching order (the default last); a reload may change them. */
  pipelineIds(): readonly string[];
  /** The proxy's and the plugins' metrics; the endpoint adds the profiler's. */
  readonly metrics: MetricsSource;
  /** Base URL of the canary control plane (the dashboard's canary widget calls it), or null. */
  controlPlaneUrl(): string | null;
  /** With workers: brings the profiler up to date with theirs before a request reads it; absent: it is this process's own. */
  refresh?(): Promise<void>;
  /** With workers: worker `index`'s statistics alone (?worker=<i>), null when no such worker runs. */
  workerProfiler?(index: number): Promise<Profiler | null>;
}
