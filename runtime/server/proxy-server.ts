// The client-facing listener: accepts connections, owns the upstream pool, and drains gracefully.
import { createServer, type Server, type Socket } from 'node:net';
import { createServer as createTlsServer, type Server as TlsServer, type TlsOptions, type TLSSocket } from 'node:tls';
import { refusesPeer } from './listener-tls.ts';
import type { Logger } from '../log/index.ts';
import { UpstreamPool, UpstreamRouter, type PoolOptions, type Topology, type UpstreamInfo } from '../upstream/index.ts';
import { PipelineManager } from '../pipeline/index.ts';
import type { CompressorName } from '../wire/index.ts';
import { ClientConnection } from './client-connection.ts';
import { DEFAULT_CLIENT_LIMITS, type ClientLimits, type ServerContext, type ServerStats } from './context.ts';
import { LogThrottle } from './log-throttle.ts';
import type { Profiler } from '../profiling/index.ts';
import type { Tracing } from '../telemetry/index.ts';

export interface ProxyServerOptions {
  host: string;
  port: number;
  pool: UpstreamPool;
  compression: readonly CompressorName[];
  zlibLevel: number;
  requestTimeoutMs?: number;
  log: Logger;
  /** Pipeline graphs (an empty manager when not given: every request takes the direct path). */
  pipelines?: PipelineManager;
  pipelineId?: string;
  /** Options for pools of routed upstreams (route step); defaults to the main pool's. */
  poolOptions?: PoolOptions;
  /** Per-client bounds (backpressure); defaults as the config's `clients` block. */
  clientLimits?: ClientLimits;
  /** The profiler (when profiling is configured). */
  profiler?: Profiler | null;
  /** Trace export (when telemetry.otlp_endpoint is set). */
  tracing?: Tracing | null;
  /** TLS on the listener (listenerTlsOptions); absent: plain TCP. */
  tls?: TlsOptions | null;
  /** A multi-host upstream (replica set, mongos list): selects the server; `pool` is its first seed's. */
  topology?: Topology | null;
}

export class ProxyServer implements ServerContext {
  readonly log: Logger;
  readonly pool: UpstreamPool;
  readonly compression: readonly CompressorName[];
  readonly zlibLevel: number;
  readonly requestTimeoutMs: number;
  readonly stats: ServerStats = {
    connectionsOpened: 0, connectionsActive: 0, requests: 0, errorReplies: 0, decodeErrors: 0, upstreamErrors: 0,
    rejected: 0, localReplies: 0, backpressurePauses: 0, shutdownRefused: 0, retriedUnsent: 0, tlsHandshakeFailures: 0,
  };
  readonly clientLimits: ClientLimits;
  readonly inputLogThrottle = new LogThrottle(5);
  readonly pipelines: PipelineManager;
  readonly pipelineId: string;
  readonly router: UpstreamRouter;
  readonly profiler: Profiler | null;
  readonly tracing: Tracing | null;
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
    this.pipelines = opts.pipelines ?? new PipelineManager();
    this.pipelineId = opts.pipelineId ?? 'default';
    this.router = new UpstreamRouter(opts.pool, opts.poolOptions, this.log.child('proxy::upstream'), opts.topology ?? null);
    this.clientLimits = opts.clientLimits ?? DEFAULT_CLIENT_LIMITS;
    this.profiler = opts.profiler ?? null;
    this.tracing = opts.tracing ?? null;
    const accept = (socket: Socket) => {
      const conn = new ClientConnection(this.nextConnectionId++, socket, this);
      this.clients.add(conn);
      this.stats.connectionsOpened++;
      this.stats.connectionsActive++;
    };
    const tls = opts.tls ?? null;
    if (tls === null) {
      this.server = createServer({ noDelay: true }, accept);
    } else {
      const optional = tls.requestCert === true && tls.rejectUnauthorized === false;
      const server = createTlsServer({ ...tls, noDelay: true }, (socket: TLSSocket) => {
        if (optional && refusesPeer(socket)) {
          this.stats.tlsHandshakeFailures++;
          socket.destroy();
          return;
        }
        accept(socket);
      });
      // Failed handshakes are counted and logged without a stack, at most a few per second.
      server.on('tlsClientError', (err: Error, socket: TLSSocket) => {
        this.stats.tlsHandshakeFailures++;
        const suppressed = this.inputLogThrottle.take();
        if (suppressed >= 0) this.log.warn('TLS handshake with a client failed', { client: socket.remoteAddress ?? '', error: err.message, suppressed });
      });
      this.server = server;
    }
  }

  /** Reload: new connections use these certificates; open ones keep theirs. */
  setTls(tls: TlsOptions): void {
    (this.server as TlsServer).setSecureContext(tls);
  }

  /** Whether the listener speaks TLS. */
  get tls(): boolean {
    return 'setSecureContext' in this.server;
  }

  upstreamInfo(): UpstreamInfo | null {
    return this.router.upstreamInfo();
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

  /**
   * Stops accepting, lets requests in flight finish (up to `drainMs`), closes client connections,
   * then the pools. Idle connections close at once.
   */
  async close(drainMs = 10_000): Promise<void> {
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    for (const c of this.clients) c.shutdown();
    const deadline = Date.now() + drainMs;
    while (this.clients.size > 0 && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 20));
    }
    if (this.clients.size > 0) {
      this.log.warn('drain timeout: closing connections with requests still in flight', { connections: this.clients.size });
      for (const c of this.clients) c.forceClose();
      const cut = Date.now() + 1500;
      while (this.clients.size > 0 && Date.now() < cut) await new Promise((r) => setTimeout(r, 20));
      for (const c of this.clients) c.close();
    }
    this.log.info('drained', { answeredWithShutdownInProgress: this.stats.shutdownRefused });
    await closed;
    this.pool.close();
    this.router.close();
  }

  get clientCount(): number {
    return this.clients.size;
  }

  /** Live client connections (for admin views and tests). */
  connections(): IterableIterator<ClientConnection> {
    return this.clients.values();
  }
}
