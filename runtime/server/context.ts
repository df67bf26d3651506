// What a client connection needs from the server that owns it.
import type { Logger } from '../log/index.ts';
import type { UpstreamInfo, UpstreamPool } from '../upstream/index.ts';
import type { CompressorName } from '../wire/index.ts';
import type { ClientConnection } from './client-connection.ts';

export interface ServerStats {
  connectionsOpened: number;
  connectionsActive: number;
  requests: number;
  errorReplies: number;
  decodeErrors: number;
  upstreamErrors: number;
}

export interface ServerContext {
  readonly log: Logger;
  readonly pool: UpstreamPool;
  readonly compression: readonly CompressorName[];
  readonly zlibLevel: number;
  /** 0 = no limit. */
  readonly requestTimeoutMs: number;
  readonly stats: ServerStats;
  upstreamInfo(): UpstreamInfo | null;
  onClientClosed(conn: ClientConnection): void;
}
