// The client-facing listener: accepts connections, owns the upstream pool, and drains gracefully.
import { createServer, type Server } from 'node:net';
import type { Logger } from '../log/index.ts';
import type { UpstreamInfo, UpstreamPool } from '../upstream/index.ts';
import type { CompressorName } from '../wire/index.ts';
import { ClientConnection } from './client-connection.ts';
import type { ServerContext, ServerStats } from './context.ts';

export interface ProxyServerOptions {
  host: string;
  port: number;
  pool: UpstreamPool;
  compression: readonly CompressorName[];
  zlibLevel: number;
  requestTimeoutMs?: number;
  log: Logger;
}

export class ProxyServer implements ServerContext {
  readonly log: Logger;
  readonly pool: UpstreamPool;
  readonly compression: readonly CompressorName[];
  readonly zlibLevel: number;
  readonly requestTimeoutMs: number;
  readonly stats: ServerStats = {
    connectionsOpened: 0, connectionsActive: 0, requests: 0, errorReplies: 0, decodeErrors: 0, upstreamErrors: 0,
  };
  private readonly server: Server;
  private readonly clients = new Set<ClientConnection>();
  private readonly host: string;
  private readonly port: number;
  private nextConnectionId = 1;

  constructor(opts: ProxyServerOptions) {
    this.log = opts.log;
    this.pool = opts.pool;
    this.compression = opts.compression;
    this.zlibLevel = opts.zlibLevel;
    this.requestTimeoutMs = opts.requestTimeoutMs ?? 0;
    this.host = opts.host;
    this.port = opts.port;
    this.server = createServer({ noDelay: true }, (socket) => {
      const conn = new ClientConnection(this.nextConnectionId++, socket, this);
      this.clients.add(conn);
      this.stats.connectionsOpened++;
      this.stats.connectionsActive++;
    });
  }

  upstreamInfo(): UpstreamInfo | null {
    return this.pool.info;
  }

  onClientClosed(conn: ClientConnection): void {
    if (this.clients.delete(conn)) this.stats.connectionsActive--;
  }

  listen(): Promise<{ host: string; port: number }> {
    return new Promise((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(this.port, this.host, () => {
        this.server.off('error', reject);
        const a = this.server.address();
        resolve(typeof a === 'object' && a !== null ? { host: this.host, port: a.port } : { host: this.host, port: this.port });
      });
    });
  }

  /** Stops accepting, closes client connections, then the pool. */
  async close(): Promise<void> {
    await new Promise<void>((resolve) => {
      this.server.close(() => resolve());
      for (const c of this.clients) c.close();
    });
    this.pool.close();
  }
}
