// Connection pool to one upstream address (MongoDB CMAP-shaped: a maximum size, a minimum of idle
// connections kept warm, idle expiry, a bounded number of connections being opened at once, and a
// FIFO wait queue with a timeout). Waiters are objects with two methods, not closures, so a
// request costs no allocation here when a connection is idle.
// The host comes from the address's HostSource, read when a connection is opened: the first
// reachable host of the current list. When the list changes (a mongodb+srv:// rescan), idle
// connections to hosts that left it are closed and busy ones are closed when released.
import type { Log } from '../log/index.ts';
import { performance } from 'node:perf_hooks';
import { ErrorCodes, ProxyError } from '../errors/index.ts';
import { UpstreamConnection, type UpstreamInfo } from './connection.ts';
import type { UpstreamAddress } from './uri.ts';
import { hostKey, type HostAddress } from './host-source.ts';

export interface PoolWaiter {
  onConnection(conn: UpstreamConnection): void;
  onPoolError(err: ProxyError): void;
}

/**
 * Where a request gets its connection: a pool, or (multi-host upstreams) a wait for a server that
 * can serve it (topology.ts). The connection handed over names its pool (`conn.pool`).
 */
export interface ConnectionSource {
  acquire(waiter: PoolWaiter): void;
  describe(): string;
}

/** Told when a pool's server looks unhealthy (a topology re-checks it at once). */
export interface PoolHealthListener {
  onPoolNetworkError(pool: UpstreamPool): void;
}

export interface PoolOptions {
  poolSize: number;
  minIdle: number;
  maxIdleTimeMs: number;
  connectTimeoutMs: number;
  waitQueueTimeoutMs: number;
}

const MAX_CONNECTING = 2;

interface Waiting { waiter: PoolWaiter; deadline: number }

export class UpstreamPool implements ConnectionSource {
  readonly address: UpstreamAddress;
  private readonly opts: PoolOptions;
  private readonly log: Pick<Log, 'info' | 'warn'>;
  /** Idle connections, most recently used last (LIFO keeps the warmest ones busy). */
  private readonly idle: UpstreamConnection[] = [];
  private readonly waiting: Waiting[] = [];
  private total = 0;
  private connecting = 0;
  private nextId = 1;
  private hostIndex = 0;
  /** Every open connection (idle or leased), to retire the ones whose host left the list. */
  private readonly live = new Set<UpstreamConnection>();
  private readonly unsubscribe: () => void;
  /** hostKey of the host new connections go to (to find it again in a changed list). */
  private lastHost: string;
  private sweeper: NodeJS.Timeout | null = null;
  private reaper: NodeJS.Timeout | null = null;
  private closed = false;
  private healthy = true;
  info: UpstreamInfo | null = null;
  /** When a connection to the upstream last completed its handshake (performance.now() ms; 0: never). */
  lastConnectedAt = 0;
  /** Why the last connection attempt failed ('' after a success). */
  lastError = '';
  private probing: Promise<boolean> | null = null;
  /** Set by a topology that owns this pool. */
  healthListener: PoolHealthListener | null = null;
  /** Counters for metrics and tests. */
  readonly stats = { opened: 0, failedConnects: 0, closed: 0, waitTimeouts: 0, cleared: 0 };
  /** Bumped by clear(): connections of an older generation are closed instead of pooled again. */
  private generation = 0;

  constructor(address: UpstreamAddress, opts: PoolOptions, log: Pick<Log, 'info' | 'warn'>) {
    this.address = address;
    this.opts = opts;
    this.log = log;
    const every = Math.max(250, Math.min(5000, Math.floor(opts.maxIdleTimeMs / 2) || 5000));
    this.reaper = setInterval(() => this.maintain(), every);
    this.reaper.unref();
    this.lastHost = this.describe();
    this.unsubscribe = address.hosts.onChange((hosts) => this.hostsChanged(hosts));
  }

  get size(): number { return this.total; }
  get idleCount(): number { return this.idle.length; }
  get waitingCount(): number { return this.waiting.length; }

  /** Opens the first connection to learn the upstream's limits and fills min_idle. Never throws. */
  async start(): Promise<boolean> {
    try {
      const conn = await this.open();
      this.release(conn);
      this.maintain();
      return true;
    } catch (err) {
      this.log.warn('upstream not reachable at startup; requests get a retryable error until it is', {
        upstream: this.describe(), error: (err as Error).message,
      });
      return false;
    }
  }

  describe(): string {
    return hostKey(this.host());
  }

  /** The host new connections go to. */
  private host(): HostAddress {
    const hosts = this.address.hosts.current();
    return hosts[this.hostIndex % hosts.length];
  }

  acquire(waiter: PoolWaiter): void {
    if (this.closed) {
      waiter.onPoolError(new ProxyError(ErrorCodes.HostUnreachable, 'proxy is shutting down', ['RetryableWriteError']));
      return;
    }
    while (this.idle.length > 0) {
      const conn = this.idle.pop()!;
      if (conn.alive) {
        waiter.onConnection(conn);
        return;
      }
    }
    this.waiting.push({ waiter, deadline: performance.now() + this.opts.waitQueueTimeoutMs });
    if (this.sweeper === null) {
      this.sweeper = setInterval(() => this.sweep(), 25);
      this.sweeper.unref();
    }
    this.grow();
  }

  /** Returns a healthy, idle connection to the pool (or hands it to the next waiter). */
  release(conn: UpstreamConnection): void {
    if (!conn.alive) return;
    if (this.closed || conn.retired || conn.generation !== this.generation) {
      conn.destroy();
      return;
    }
    const next = this.waiting.shift();
    if (next !== undefined) {
      next.waiter.onConnection(conn);
      return;
    }
    conn.idleSince = performance.now();
    this.idle.push(conn);
  }

  /** Drops a connection that is in an unknown state (e.g. a request on it was abandoned). */
  discard(conn: UpstreamConnection): void {
    conn.destroy();
  }

  private grow(): void {
    while (this.waiting.length > this.connecting && this.total < this.opts.poolSize && this.connecting < MAX_CONNECTING) {
      this.open().then((conn) => this.release(conn), (err: Error) => this.connectFailed(err));
    }
  }

  private open(): Promise<UpstreamConnection> {
    this.total++;
    this.connecting++;
    const h = this.host();
    const generation = this.generation;
    return UpstreamConnection.open(this.nextId++, h.host, h.port, this.opts.connectTimeoutMs, (c) => this.onConnectionClosed(c),
      this.address.credentials, this.address.tls, this.address.lookup)
      .then((conn) => {
        conn.pool = this;
        conn.generation = generation;
        this.connecting--;
        this.stats.opened++;
        this.live.add(conn);
        // The list changed while this connection was being opened.
        if (!this.address.hosts.current().some((x) => hostKey(x) === hostKey(h))) conn.retired = true;
        this.lastConnectedAt = performance.now();
        this.lastError = '';
        if (this.info === null || conn.info !== null) this.info = conn.info;
        if (!this.healthy) {
          this.healthy = true;
          this.log.info('upstream reachable again', { upstream: this.describe() });
        }
        return conn;
      }, (err: Error) => {
        this.connecting--;
        this.total--;
        this.stats.failedConnects++;
        throw err;
      });
  }

  /**
   * The server was found unreachable (its monitor's check failed): every connection is closed —
   * idle ones, and in-use ones too, so a request waiting on a server that stopped answering is
   * answered now with a retryable error instead of waiting for ever (CMAP's clear with
   * interruptInUseConnections). Waiters for a connection fail with a retryable error (their request
   * was never sent); connections being opened are closed when they arrive. New requests go to
   * another server, since the topology marked this one Unknown before clearing.
   * https://github.com/mongodb/specifications/blob/master/source/connection-monitoring-and-pooling/connection-monitoring-and-pooling.md#clear
   */
  clear(reason: string): void {
    if (this.closed) return;
    this.generation++;
    this.stats.cleared++;
    const inUse = this.live.size - this.idle.length;
    for (const c of this.idle.splice(0)) c.destroy(reason);
    for (const c of [...this.live]) c.destroy(reason);
    const err = new ProxyError(ErrorCodes.HostUnreachable, `upstream ${this.describe()}: ${reason}`, ['RetryableWriteError']);
    const waiting = this.waiting.splice(0);
    for (const w of waiting) w.waiter.onPoolError(err);
    if (inUse > 0 || waiting.length > 0) {
      this.log.warn('upstream pool cleared: requests in flight there are answered with a retryable error', {
        upstream: this.describe(), interrupted: inUse, waiting: waiting.length, reason,
      });
    }
  }

  /** A request on one of this pool's connections failed with a network error. */
  noteNetworkError(): void {
    this.healthListener?.onPoolNetworkError(this);
  }

  private connectFailed(err: Error): void {
    this.lastError = err.message;
    this.healthListener?.onPoolNetworkError(this);
    if (this.healthy) {
      this.healthy = false;
      this.log.warn('upstream connection failed', { upstream: this.describe(), error: err.message });
    }
    const n = this.address.hosts.current().length;
    if (n > 1) this.hostIndex = (this.hostIndex + 1) % n;
    this.lastHost = this.describe();
    // Nobody can be served soon: fail the waiters now (a retryable error within connect_timeout_ms)
    // rather than letting them sit until the wait-queue timeout.
    if (this.total === 0 || this.total === this.connecting) {
      const err2 = new ProxyError(ErrorCodes.HostUnreachable,
        `upstream ${this.describe()} is unavailable: ${err.message}`, ['RetryableWriteError'], { cause: err });
      const waiting = this.waiting.splice(0, this.waiting.length);
      for (const w of waiting) w.waiter.onPoolError(err2);
    } else {
      this.grow();
    }
  }

  private onConnectionClosed(conn: UpstreamConnection): void {
    this.total--;
    this.stats.closed++;
    this.live.delete(conn);
    const i = this.idle.indexOf(conn);
    if (i >= 0) this.idle.splice(i, 1);
    if (!this.closed && this.waiting.length > 0) this.grow();
  }

  /** Expires waiters past their deadline. */
  private sweep(): void {
    const now = performance.now();
    while (this.waiting.length > 0 && this.waiting[0].deadline <= now) {
      const w = this.waiting.shift()!;
      this.stats.waitTimeouts++;
      w.waiter.onPoolError(new ProxyError(ErrorCodes.NetworkTimeout,
        `timed out after ${this.opts.waitQueueTimeoutMs} ms waiting for an upstream connection (pool_size ${this.opts.poolSize} in use)`,
        ['RetryableWriteError']));
    }
    if (this.waiting.length === 0 && this.sweeper !== null) {
      clearInterval(this.sweeper);
      this.sweeper = null;
    }
  }

  /**
   * Whether the upstream is reachable now (readiness): yes while the pool holds an open connection
   * and its last connection attempt did not fail; otherwise a new connection is opened (TCP, TLS,
   * hello, authentication — within connect_timeout_ms) and kept in the pool. Concurrent callers share
   * one attempt. Never throws.
   */
  probe(): Promise<boolean> {
    if (this.closed) return Promise.resolve(false);
    if (this.healthy && this.total - this.connecting > 0) return Promise.resolve(true);
    if (this.probing === null) {
      this.probing = this.open().then((conn) => {
        this.release(conn);
        return true;
      }, (err: Error) => {
        this.connectFailed(err);
        return false;
      }).finally(() => { this.probing = null; });
    }
    return this.probing;
  }

  /** Closes connections idle past max_idle_time_ms and keeps min_idle warm. */
  private maintain(): void {
    if (this.closed) return;
    const now = performance.now();
    const max = this.opts.maxIdleTimeMs;
    if (max > 0) {
      for (let i = 0; i < this.idle.length && this.idle.length > this.opts.minIdle;) {
        if (now - this.idle[i].idleSince > max) this.idle.splice(i, 1)[0].destroy();
        else i++;
      }
    }
    let want = this.opts.minIdle - this.idle.length - this.connecting;
    while (want-- > 0 && this.total < this.opts.poolSize && this.healthy) {
      this.open().then((conn) => this.release(conn), (err: Error) => this.connectFailed(err));
    }
  }

  /** A new host list: keep the current host when it stayed, else start over at the first; retire connections to hosts that left. */
  private hostsChanged(hosts: readonly HostAddress[]): void {
    const keys = new Set(hosts.map(hostKey));
    const was = this.lastHost;
    const at = hosts.findIndex((h) => hostKey(h) === was);
    this.hostIndex = at < 0 ? 0 : at;
    for (const c of this.live) {
      if (keys.has(hostKey(c))) continue;
      c.retired = true;
      if (this.idle.includes(c)) c.destroy();
    }
    this.lastHost = this.describe();
    if (this.lastHost !== was) this.log.info('new upstream connections go to another host (the host list changed)', { from: was, to: this.lastHost });
    if (!this.closed && this.waiting.length > 0) this.grow();
  }

  close(): void {
    this.closed = true;
    this.unsubscribe();
    if (this.reaper !== null) clearInterval(this.reaper);
    if (this.sweeper !== null) clearInterval(this.sweeper);
    for (const c of this.idle.splice(0)) c.destroy();
    for (const w of this.waiting.splice(0)) {
      w.waiter.onPoolError(new ProxyError(ErrorCodes.HostUnreachable, 'proxy is shutting down', ['RetryableWriteError']));
    }
  }
}
