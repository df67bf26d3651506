// The client-facing listener: accepts connections, owns the upstream pool, and drains gracefully.
import { createServer, type Server, type Socket } from 'node:net';
import { createServer as createTlsServer, type Server as TlsServer, type TlsOptions, type TLSSocket } from 'node:tls';
import { ObjectId } from 'bson';
import { refusesPeer } from './listener-tls.ts';
import type { Log } from '../log/index.ts';
import { UpstreamPool, UpstreamRouter, type PoolOptions, type Topology, type UpstreamInfo } from '../upstream/index.ts';
import { PipelineManager, PipelineRouting } from '../pipeline/index.ts';
import { InflatePool, type CompressorName, type InflatePoolOptions } from '../wire/index.ts';
import { ClientConnection } from './client-connection.ts';
import { DEFAULT_CLIENT_LIMITS, type ClientLimits, type ServerContext, type ServerStats } from './context.ts';
import { LogThrottle } from './log-throttle.ts';
import { newServerStats } from '../metrics/index.ts';
import { ClientAuth, newAuthSecret, type ClientAuthSettings } from './client-auth.ts';
import type { Profiler } from '../profiling/index.ts';
import type { Tracing } from '../telemetry/index.ts';
import { listenFailure } from '../config/index.ts';

export interface ProxyServerOptions {
  host: string;
  port: number;
  pool: UpstreamPool;
  compression: readonly CompressorName[];
  zlibLevel: number;
  requestTimeoutMs?: number;
  log: Log;
  /** Pipeline graphs (an empty manager when not given: every request takes the direct path). */
  pipelines?: PipelineManager;
  pipelineId?: string;
  /** Which pipeline a request goes through (config `pipelines`); absent: every request through `pipelineId`. */
  routing?: PipelineRouting;
  /** Options for pools of routed upstreams (route step); defaults to the main pool's. */
  poolOptions?: PoolOptions;
  /** Per-client bounds (backpressure, connection limit); defaults as the config's `clients` block. */
  clientLimits?: Partial<ClientLimits>;
  /** The profiler (when profiling is configured). */
  profiler?: Profiler | null;
  /** Trace export (when telemetry.otlp_endpoint is set). */
  tracing?: Tracing | null;
  /** TLS on the listener (listenerTlsOptions); absent: plain TCP. */
  tls?: TlsOptions | null;
  /** Client authentication (config `auth`); absent: clients connect without credentials. */
  clientAuth?: ClientAuthSettings | null;
  /** The secret client authentication derives its keys from (auth.secret_file's or random; workers: the primary's); absent: a new one for this server. */
  authSecret?: Buffer;
  /** A multi-host upstream (replica set, mongos list): selects the server; `pool` is its first seed's. */
  topology?: Topology | null;
  /** Off-loop decompression of large compressed requests (workers, bytes in flight); defaults in inflate-pool.ts. */
  inflate?: InflatePoolOptions;
}

export class ProxyServer implements ServerContext {
  readonly log: Log;
  readonly pool: UpstreamPool;
  readonly compression: readonly CompressorName[];
  readonly zlibLevel: number;
  readonly requestTimeoutMs: number;
  readonly stats: ServerStats = newServerStats();
  /** Answered as `serviceId` to load-balanced clients (hello with loadBalanced: true): stable for this process. */
  readonly serviceId = new ObjectId();
  readonly clientLimits: ClientLimits;
  readonly inputLogThrottle = new LogThrottle(5);
  readonly pipelines: PipelineManager;
  readonly pipelineId: string;
  /** Which pipeline a request goes through; a reload that changes the pipelines replaces it (setRouting). */
  routing: PipelineRouting;
  readonly router: UpstreamRouter;
  readonly profiler: Profiler | null;
  readonly tracing: Tracing | null;
  readonly inflater: InflatePool;
  clientAuth: ClientAuth | null = null;
  /**
   * The secret of client authentication's keys — the decoy salts of unknown users and the cursor
   * seals (cursor-seal.ts) — kept across reloads; the primary's with workers, so that every worker
   * answers an unknown user with the same salt and seals cursors alike.
   */
  private readonly authSecret: Buffer;
  private readonly server: Server;
  private readonly clients = new Set<ClientConnection>();
  private readonly host: string;
  private readonly port: number;
  private nextConnectionId = 1;
  /** Connections served (not refused) now: what clients.max_connections bounds. */
  private admitted = 0;
  private drainingSince = 0;

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
    this.routing = opts.routing ?? PipelineRouting.single(this.pipelines.slot(this.pipelineId));
    this.router = new UpstreamRouter(opts.pool, opts.poolOptions, this.log.child('proxy::upstream'), opts.topology ?? null);
    this.clientLimits = { ...DEFAULT_CLIENT_LIMITS, ...opts.clientLimits };
    this.profiler = opts.profiler ?? null;
    this.tracing = opts.tracing ?? null;
    this.inflater = new InflatePool(opts.inflate);
    const maxConnections = this.clientLimits.maxConnections;
    this.authSecret = opts.authSecret ?? newAuthSecret();
    if (opts.clientAuth != null) this.clientAuth = new ClientAuth(opts.clientAuth, this.authSecret);
    const accept = (socket: Socket) => {
      // Past clients.max_connections the connection is still accepted, so that the client reads
      // why (its first request is answered with an error document) instead of a bare reset.
      const refused = maxConnections > 0 && this.admitted >= maxConnections;
      const conn = new ClientConnection(this.nextConnectionId++, socket, this, refused);
      this.clients.add(conn);
      if (refused) {
        this.stats.connectionsRefused++;
        return;
      }
      this.admitted++;
      this.stats.connectionsOpened++;
      this.stats.connectionsActive++;
    };
    const tls = opts.tls ?? null;
    if (tls === null) {
      // allowHalfOpen: a client that half-closes still gets the replies to what it sent (client-connection.ts); TLS below does not.
      this.server = createServer({ noDelay: true, allowHalfOpen: true }, accept);
    } else {
      const optional = tls.requestCert === true && tls.rejectUnauthorized === false;
      // Not half-open: a TLS socket whose client ended before (or without) the handshake, plain TCP
      // among them, would then stay open for ever and hold the server's close.
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

  /**
   * Reload: requests read from now on are routed by `routing`; every open connection settles its
   * route again at its next request (requests under way finish on the graph they started with).
   */
  setRouting(routing: PipelineRouting): void {
    this.routing = routing;
    for (const c of this.clients) c.reroute();
  }

  /** Reload: new connections use these certificates; open ones keep theirs. */
  setTls(tls: TlsOptions): void {
    (this.server as TlsServer).setSecureContext(tls);
  }

  /** Whether the listener speaks TLS. */
  get tls(): boolean {
    return 'setSecureContext' in this.server;
  }

  /**
   * Reload: new users and mode apply to the next request. A connection logged in as a user that
   * was removed, or whose credential changed, loses its login (its next command needs a new one).
   */
  setClientAuth(settings: ClientAuthSettings | null): void {
    const next = settings === null ? null : new ClientAuth(settings, this.authSecret);
    this.clientAuth = next;
    let revoked = 0;
    for (const c of this.clients) if (c.revalidateLogin(next)) revoked++;
    if (revoked > 0) this.log.info('client logins revoked by the new auth.users', { connections: revoked });
  }

  upstreamInfo(): UpstreamInfo | null {
    return this.router.upstreamInfo();
  }

  onClientClosed(conn: ClientConnection): void {
    if (this.clients.delete(conn) && !conn.refused) {
      this.admitted--;
      this.stats.connectionsActive--;
    }
  }

  /** Whether close() has begun (readiness reports not ready from then on). */
  get draining(): boolean {
    return this.drainingSince > 0;
  }

  listen(): Promise<{ host: string; port: number }> {
    return new Promise((resolve, reject) => {
      const failed = (err: Error) => reject(new Error(listenFailure(this.host, this.port, err), { cause: err }));
      this.server.once('error', failed);
      this.server.listen(this.port, this.host, () => {
        this.server.off('error', failed);
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
    this.drainingSince = Date.now();
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    for (const c of this.clients) c.shutdown();
    const deadline = Date.now() + drainMs;
    while (this.clients.size > 0 && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 20));
    }
    if (this.clients.size > 0) {
      let inFlight = 0;
      for (const c of this.clients) if (!c.idle) inFlight++;
      // Connections left: some with a request in flight, the others still reading what their
      // client wrote (or waiting for it to read its replies).
      this.log.warn('drain timeout: closing the connections left', { connections: this.clients.size, withRequestInFlight: inFlight });
      for (const c of this.clients) c.forceClose();
      const cut = Date.now() + 1500;
      while (this.clients.size > 0 && Date.now() < cut) await new Promise((r) => setTimeout(r, 20));
      for (const c of this.clients) c.close();
    }
    this.log.info('drained', { answeredWithShutdownInProgress: this.stats.shutdownRefused });
    await closed;
    await this.inflater.close();
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
