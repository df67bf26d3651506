// The proxy's HTTP listeners (admin API, profiling endpoint, canary control plane) and the bearer
// tokens each accepts. The apps read their tokens from live holders on every request, so a reload
// that rotates a token refuses the old one from the next request on. A reload that moves a listener
// opens the new address before anything else changes and closes the old one only once the whole
// reload has succeeded: an address that cannot be bound refuses the reload, and the old listener,
// tokens and configuration stay.
import type { FastifyInstance } from 'fastify';
import { Counter, type Registry } from 'prom-client';
import { ConfigError, DEFAULT_HTTP_MAX_CONNECTIONS, type ConfigFormat, type ProxyConfig } from '../config/index.ts';
import type { Log } from '../log/index.ts';
import type { CanaryController } from '../canary/index.ts';
import type { Profiler, SnapshotStore } from '../profiling/index.ts';
import { ConnectionCap, Tokens, startAdmin, startControlPlane, startProfilingHttp } from '../http/index.ts';
import type { MetricsSource } from '../http/surface.ts';
import type { ControlPlaneFleet } from '../http/canary.ts';
import { adminSurface, profilingSurface, proxyMetrics } from './http-views.ts';
import { promOptions } from '../metrics/index.ts';
import type { MachineView, RunningProxy } from './serve.ts';

interface Http { app: FastifyInstance; url: string }

/** The HTTP listeners, as the label of proxy_http_connections_refused_total names them. */
export const HTTP_LISTENERS = ['admin', 'profiling', 'control_plane'] as const;
export type HttpListener = typeof HTTP_LISTENERS[number];

/** A listener's refusals are logged at most once per this many ms (a flood would write a line per connection). */
const REFUSED_LOG_INTERVAL_MS = 60_000;

export interface HttpSurfaceDeps {
  running: RunningProxy;
  profiler: Profiler | null;
  snapshots: SnapshotStore | null;
  canary: CanaryController | null;
  configFile: string | null;
  /** Its format when its name does not say it; absent: by the extension. */
  configFormat?: ConfigFormat;
  log: Log;
  /** With workers: the machine's merged metrics and the refresh of the primary's profiler from the workers'. */
  machine?: Pick<MachineView, 'metrics' | 'refresh' | 'workers' | 'workerProfiler' | 'size'> | null;
  /** The fleet's part of the control plane (runtime/app/fleet.ts), read when the control plane opens. */
  fleet?: () => ControlPlaneFleet | null;
}

/** The listeners a reload opened, switched to by commit() once the rest of the reload succeeded. */
export interface ListenerMove {
  commit(): void;
  /** Closes what the move opened (the reload was refused). */
  abort(): Promise<void>;
}

export function adminTokens(c: ProxyConfig): string[] {
  return c.admin?.token === undefined ? [] : [c.admin.token];
}

export function profilingTokens(c: ProxyConfig): string[] {
  return c.profiling?.token === undefined ? [] : [c.profiling.token];
}

/** `control_plane.tokens` and the value of the `control_plane.token_env` variable, read now. */
export function controlPlaneTokens(c: ProxyConfig): string[] {
  const cp = c.control_plane;
  if (cp === undefined) return [];
  const fromEnv = process.env[cp.token_env];
  return fromEnv === undefined || fromEnv === '' ? [...cp.tokens] : [...cp.tokens, fromEnv];
}

/** Each listener's `max_connections` (its default when the block is absent). */
function maxConnections(c: ProxyConfig): Record<HttpListener, number> {
  return {
    admin: c.admin?.max_connections ?? DEFAULT_HTTP_MAX_CONNECTIONS,
    profiling: c.profiling?.max_connections ?? DEFAULT_HTTP_MAX_CONNECTIONS,
    control_plane: c.control_plane?.max_connections ?? DEFAULT_HTTP_MAX_CONNECTIONS,
  };
}

export class HttpSurfaces {
  admin: Http | null = null;
  profiling: Http | null = null;
  controlPlane: Http | null = null;
  readonly adminTokens: Tokens;
  /** Open while it holds none: the profiling endpoint without `profiling.token`. */
  readonly profilingTokens: Tokens;
  readonly controlPlaneTokens: Tokens;
  private readonly deps: HttpSurfaceDeps;
  /** Closes of replaced listeners, not awaited by the reload (the reload request may be on one). */
  private readonly retiring = new Set<Promise<void>>();
  /** One registry of the proxy's metrics for every /metrics, built when the first app opens. */
  private metrics: MetricsSource | null = null;
  /** Where the three apps log an answer 500. */
  private readonly httpLog: Log;
  /** Each listener's connection cap, kept across listener moves. */
  readonly connectionCaps: Readonly<Record<HttpListener, ConnectionCap>>;

  constructor(config: ProxyConfig, deps: HttpSurfaceDeps) {
    this.deps = deps;
    this.httpLog = deps.log.child('proxy::http');
    const caps = maxConnections(config);
    const cap = (listener: HttpListener) => {
      // The first refusal is logged at once; then one line a minute at most, with the count held back.
      let loggedAt = -Infinity;
      let held = 0;
      return new ConnectionCap(caps[listener], (c) => {
        const now = performance.now();
        if (now - loggedAt < REFUSED_LOG_INTERVAL_MS) {
          held++;
          return;
        }
        this.httpLog.warn('HTTP connection refused: the listener serves no more connections at once', {
          listener, max_connections: c.limit, refused_total: c.refused, refused_since_last_line: held + 1,
        });
        loggedAt = now;
        held = 0;
      });
    };
    this.connectionCaps = { admin: cap('admin'), profiling: cap('profiling'), control_plane: cap('control_plane') };
    this.adminTokens = new Tokens(adminTokens(config));
    this.profilingTokens = new Tokens(profilingTokens(config), true);
    this.controlPlaneTokens = new Tokens(controlPlaneTokens(config));
  }

  openAdmin(listen: string): Promise<Http> {
    this.metrics ??= this.deps.machine?.metrics ?? proxyMetrics(this.deps.running);
    const machine = this.deps.machine ?? null;
    const workers = machine === null ? undefined : () => machine.workers();
    return startAdmin(adminSurface(this.deps.running, this.metrics, workers, machine?.size), listen,
      { token: this.adminTokens, configFile: this.deps.configFile, configFormat: this.deps.configFormat, log: this.httpLog,
        connectionCap: this.connectionCaps.admin });
  }

  openProfiling(p: NonNullable<ProxyConfig['profiling']>): Promise<Http> {
    this.metrics ??= this.deps.machine?.metrics ?? proxyMetrics(this.deps.running);
    const machine = this.deps.machine ?? null;
    const views = machine === null ? undefined : { refresh: () => machine.refresh(), workerProfiler: (i: number) => machine.workerProfiler(i) };
    return startProfilingHttp(profilingSurface(this.deps.running, this.metrics, views), this.deps.profiler!, { host: p.host, port: p.port,
      token: this.profilingTokens, snapshots: this.deps.snapshots, log: this.httpLog, connectionCap: this.connectionCaps.profiling });
  }

  openControlPlane(cp: NonNullable<ProxyConfig['control_plane']>): Promise<Http> {
    return startControlPlane(this.deps.canary!, cp.host, cp.port, { tokens: this.controlPlaneTokens, fleet: this.deps.fleet?.() ?? null,
      log: this.httpLog, connectionCap: this.connectionCaps.control_plane });
  }

  /**
   * Every surface accepts the tokens of `config` from the next request on. A `profiling` or
   * `control_plane` block removed by a reload is a restart: its listener runs on until then, with
   * the tokens it had (never open because its block went away).
   */
  setTokens(config: ProxyConfig): void {
    this.adminTokens.replace(adminTokens(config));
    if (config.profiling !== undefined) this.profilingTokens.replace(profilingTokens(config));
    if (config.control_plane !== undefined) this.controlPlaneTokens.replace(controlPlaneTokens(config));
  }

  /** Every listener serves at most `config`'s max_connections at once from now on (a block removed keeps its cap until the restart). */
  setConnectionCaps(config: ProxyConfig): void {
    const caps = maxConnections(config);
    if (config.admin !== undefined) this.connectionCaps.admin.set(caps.admin);
    if (config.profiling !== undefined) this.connectionCaps.profiling.set(caps.profiling);
    if (config.control_plane !== undefined) this.connectionCaps.control_plane.set(caps.control_plane);
  }

  /**
   * Opens the listeners whose address `next` changes (and the admin API when `next` turns it on).
   * Throws a ConfigError naming the key when an address cannot be bound, after closing whatever
   * it opened: the running listeners are untouched until commit(). `source` is what `next` came
   * from (the configuration file, or the admin API's request body), named in the error.
   */
  async move(current: ProxyConfig, next: ProxyConfig, source: string | null): Promise<ListenerMove> {
    const opened: { admin?: Http | null; profiling?: Http; controlPlane?: Http } = {};
    const abort = async () => {
      await Promise.all([opened.admin, opened.profiling, opened.controlPlane].map((h) => h?.app.close()));
    };
    // The open's error says `cannot listen on <host:port>: <reason>` (runtime/http/app.ts).
    const bind = async <T>(key: string, open: () => Promise<T>): Promise<T> => {
      try {
        return await open();
      } catch (err) {
        await abort();
        throw new ConfigError(source, [{ path: key, message: (err as Error).message }], { cause: err });
      }
    };
    const adminNext = next.admin?.listen;
    if (adminNext !== current.admin?.listen) {
      opened.admin = adminNext === undefined ? null : await bind('admin.listen', () => this.openAdmin(adminNext));
    }
    const p = next.profiling;
    // Without a running endpoint (no `profiling` block at start) adding one is a restart.
    if (this.profiling !== null && p !== undefined && current.profiling !== undefined
      && (p.host !== current.profiling.host || p.port !== current.profiling.port)) {
      opened.profiling = await bind(p.host !== current.profiling.host ? 'profiling.host' : 'profiling.port', () => this.openProfiling(p));
    }
    const cp = next.control_plane;
    if (this.controlPlane !== null && cp !== undefined && current.control_plane !== undefined
      && (cp.host !== current.control_plane.host || cp.port !== current.control_plane.port)) {
      opened.controlPlane = await bind(cp.host !== current.control_plane.host ? 'control_plane.host' : 'control_plane.port',
        () => this.openControlPlane(cp));
    }
    return {
      abort,
      commit: () => {
        const log = this.deps.log;
        if (opened.admin !== undefined) {
          log.info(opened.admin === null ? 'admin API closed (admin.listen removed)' : 'admin API listening', { url: opened.admin?.url, was: this.admin?.url });
          this.retire(this.admin);
          this.admin = opened.admin;
        }
        if (opened.profiling !== undefined) {
          log.info('profiling endpoint listening', { url: opened.profiling.url, was: this.profiling?.url });
          this.retire(this.profiling);
          this.profiling = opened.profiling;
        }
        if (opened.controlPlane !== undefined) {
          log.info('canary control plane listening', { url: opened.controlPlane.url, was: this.controlPlane?.url });
          this.retire(this.controlPlane);
          this.controlPlane = opened.controlPlane;
        }
      },
    };
  }

  /** Closes a replaced listener without waiting: it stops accepting now, its open requests finish. */
  private retire(h: Http | null): void {
    if (h === null) return;
    const closing = h.app.close().then(() => undefined, (err: Error) => {
      this.deps.log.warn('closing a replaced HTTP listener failed', { url: h.url, error: err.message });
    });
    this.retiring.add(closing);
    void closing.finally(() => this.retiring.delete(closing));
  }

  /** Waits for replaced listeners to finish closing (the proxy is shutting down). */
  async retired(): Promise<void> {
    await Promise.all([...this.retiring]);
  }
}

/** Registers proxy_http_connections_refused_total (one series per listener) in `registry`, read from the caps at scrape time. */
export function registerHttpMetrics(registry: Registry, surfaces: HttpSurfaces): void {
  new Counter({
    ...promOptions('proxy_http_connections_refused_total'), registers: [registry],
    collect() {
      this.reset();
      for (const l of HTTP_LISTENERS) this.inc({ listener: l }, surfaces.connectionCaps[l].refused);
    },
  });
}
