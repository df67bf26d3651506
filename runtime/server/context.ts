// What a client connection needs from the server that owns it.
import type { ObjectId } from 'bson';
import type { Log } from '../log/index.ts';
import type { UpstreamInfo, UpstreamPool, UpstreamRouter } from '../upstream/index.ts';
import type { CompressorName, InflatePool } from '../wire/index.ts';
import type { ClientConnection } from './client-connection.ts';
import type { PipelineManager, PipelineRouting } from '../pipeline/index.ts';
import type { LogThrottle } from './log-throttle.ts';
import type { Profiler } from '../profiling/index.ts';
import type { Tracing } from '../telemetry/index.ts';
import type { ClientAuth } from './client-auth.ts';
import type { ServerStats } from '../metrics/index.ts';

/** The server's counters, typed from the metric table (runtime/metrics/table.ts): each is a plain
 *  number bumped in place on the request path and read by the registry at scrape time. */
export type { ServerStats } from '../metrics/index.ts';

/** Per-client bounds (config `clients`). */
export interface ClientLimits {
  maxPendingReplyBytes: number;
  maxQueuedRequests: number;
  /** Bytes of requests read from one client and not started yet (clients.max_queued_request_bytes). */
  maxQueuedRequestBytes: number;
  /** Client connections served at once (0: no limit). */
  maxConnections: number;
}

export const DEFAULT_CLIENT_LIMITS: ClientLimits = {
  maxPendingReplyBytes: 16 * 1024 * 1024, maxQueuedRequests: 64, maxQueuedRequestBytes: 16 * 1024 * 1024, maxConnections: 0,
};

export interface ServerContext {
  readonly log: Log;
  readonly pool: UpstreamPool;
  readonly compression: readonly CompressorName[];
  readonly zlibLevel: number;
  /** 0 = no limit. */
  readonly requestTimeoutMs: number;
  readonly stats: ServerStats;
  readonly clientLimits: ClientLimits;
  /** Shared by all connections: bounds the log lines clients can trigger with bad input. */
  readonly inputLogThrottle: LogThrottle;
  readonly pipelines: PipelineManager;
  /** The default pipeline's id. */
  readonly pipelineId: string;
  /** Which pipeline a request goes through (read when a connection settles its route; a reload replaces it). */
  readonly routing: PipelineRouting;
  /** The profiler when profiling is configured (it may be disabled: check `enabled` per request). */
  readonly profiler: Profiler | null;
  /** Trace export when telemetry is configured (a sampling decision per request), else null. */
  readonly tracing: Tracing | null;
  /** Which pool serves a request (route step, cursor and transaction pins). */
  readonly router: UpstreamRouter;
  /** The ObjectId answered as `serviceId` to load-balanced clients: one per proxy process. */
  readonly serviceId: ObjectId;
  /** Client authentication (config `auth`), read per request (a reload replaces it); null: off. */
  readonly clientAuth: ClientAuth | null;
  /** Decompresses large OP_COMPRESSED requests off the event loop, bounded in bytes across the proxy. */
  readonly inflater: InflatePool;
  upstreamInfo(): UpstreamInfo | null;
  onClientClosed(conn: ClientConnection): void;
}
