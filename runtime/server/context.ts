// What a client connection needs from the server that owns it.
import type { ObjectId } from 'bson';
import type { Logger } from '../log/index.ts';
import type { UpstreamInfo, UpstreamPool, UpstreamRouter } from '../upstream/index.ts';
import type { CompressorName, InflatePool } from '../wire/index.ts';
import type { ClientConnection } from './client-connection.ts';
import type { PipelineManager, PipelineRouting } from '../pipeline/index.ts';
import type { LogThrottle } from './log-throttle.ts';
import type { Profiler } from '../profiling/index.ts';
import type { Tracing } from '../telemetry/index.ts';
import type { ClientAuth } from './client-auth.ts';

export interface ServerStats {
  connectionsOpened: number;
  connectionsActive: number;
  requests: number;
  /** Error documents written to clients by the proxy itself. */
  errorReplies: number;
  /**
   * Requests the proxy refused or failed without an error document being written: moreToCome
   * requests (their client expects no reply) and requests whose connection had closed.
   */
  errorsWithoutReply: number;
  decodeErrors: number;
  upstreamErrors: number;
  /** Requests a pipeline step rejected. */
  rejected: number;
  /** Requests a pipeline step answered without the upstream. */
  localReplies: number;
  /** Times a client's unread replies exceeded clients.max_pending_reply_bytes and its reading stopped. */
  backpressurePauses: number;
  /** Requests answered with ShutdownInProgress because they were read during a drain. */
  shutdownRefused: number;
  /** Requests re-sent on a fresh upstream connection because the one they got was dead before they were written. */
  retriedUnsent: number;
  /** Client TLS handshakes that failed (or presented a certificate that did not verify). */
  tlsHandshakeFailures: number;
  /** Connections refused because clients.max_connections were open. */
  connectionsRefused: number;
  /** Requests answered with BSONObjectTooLarge or a message-size error. */
  oversizeRequests: number;
  /** Load-balanced clients that closed with a transaction open: abortTransaction sent upstream. */
  lbTransactionsAborted: number;
  /** Load-balanced clients that closed with cursors open: cursors killed upstream. */
  lbCursorsKilled: number;
  /** Upstream state-change errors (not primary, shutting down) answered as HostUnreachable (state-change.ts). */
  stateChangeErrorsRewritten: number;
  /** Client SCRAM conversations that ended logged in (config `auth`). */
  authSucceeded: number;
  /** Client authentication attempts refused (unknown user, wrong password, malformed, wrong mechanism). */
  authFailed: number;
}

/** Per-client bounds (config `clients`). */
export interface ClientLimits {
  maxPendingReplyBytes: number;
  maxQueuedRequests: number;
  /** Client connections served at once (0: no limit). */
  maxConnections: number;
}

export const DEFAULT_CLIENT_LIMITS: ClientLimits = { maxPendingReplyBytes: 16 * 1024 * 1024, maxQueuedRequests: 64, maxConnections: 0 };

export interface ServerContext {
  readonly log: Logger;
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
