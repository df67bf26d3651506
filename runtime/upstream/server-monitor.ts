// One upstream server's monitor (Server Discovery and Monitoring, simplified): its own connection,
// not a pooled one, that sends `hello` every heartbeat and hands each reply — or the failure — to
// the topology. A check can be asked for at once (after a network error or a "not primary" reply),
// but never more often than every MIN_HEARTBEAT_MS. Polling only: no streaming (awaitable) hello.
// https://github.com/mongodb/specifications/blob/master/source/server-discovery-and-monitoring/server-monitoring.md
import { performance } from 'node:perf_hooks';
import type { Document } from 'bson';
import type { LookupFunction } from 'node:net';
import { UpstreamConnection } from './connection.ts';
import type { UpstreamTls } from './uri.ts';
import { formatHostPort } from '../config/index.ts';

/** The spec's minHeartbeatFrequencyMS: the least time between two checks of one server. */
export const MIN_HEARTBEAT_MS = 500;

export interface MonitorListener {
  /** A hello reply (ok: 1) and its round-trip time. */
  onHello(monitor: ServerMonitor, reply: Document, rttMs: number): void;
  onCheckFailed(monitor: ServerMonitor, err: Error): void;
  /** Milliseconds until the next regular check. */
  heartbeatMs(): number;
}

let nextMonitorConnectionId = 1;

export class ServerMonitor {
  readonly host: string;
  readonly port: number;
  readonly address: string;
  private readonly tls: UpstreamTls | null;
  private readonly timeoutMs: number;
  private readonly listener: MonitorListener;
  private conn: UpstreamConnection | null = null;
  private timer: NodeJS.Timeout | null = null;
  private checking = false;
  private again = false;
  private lastCheckAt = -Infinity;
  private stopped = true;
  /** Completed checks, successful or not (tests and logs). */
  checks = 0;

  /** Resolves the host name (upstream.dns_servers with mongodb+srv://); null: the system's. */
  private readonly lookup: LookupFunction | null;

  constructor(host: string, port: number, tls: UpstreamTls | null, timeoutMs: number, listener: MonitorListener,
    lookup: LookupFunction | null = null) {
    this.lookup = lookup;
    this.host = host;
    this.port = port;
    this.address = formatHostPort(host, port);
    this.tls = tls;
    this.timeoutMs = timeoutMs;
    this.listener = listener;
  }

  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    this.lastCheckAt = -Infinity;
    this.requestCheck();
  }

  /** Check now (or as soon as MIN_HEARTBEAT_MS since the last check has passed). */
  requestCheck(): void {
    if (this.stopped) return;
    if (this.checking) {
      this.again = true;
      return;
    }
    const wait = this.lastCheckAt + MIN_HEARTBEAT_MS - performance.now();
    this.schedule(Math.max(0, wait));
  }

  stop(): void {
    this.stopped = true;
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    const c = this.conn;
    this.conn = null;
    c?.destroy();
  }

  private schedule(ms: number): void {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = null;
      void this.check();
    }, ms);
    this.timer.unref();
  }

  private async check(): Promise<void> {
    if (this.stopped || this.checking) return;
    this.checking = true;
    this.again = false;
    const started = performance.now();
    this.lastCheckAt = started;
    try {
      let reply: Document;
      if (this.conn === null || !this.conn.alive) {
        // Monitors do not authenticate (the spec's monitoring connections only say hello).
        // The close callback takes the connection as its argument: it can run before `open`
        // resolves (the upstream drops the socket mid-handshake), while `conn` is not yet bound.
        const conn = await UpstreamConnection.open(nextMonitorConnectionId++, this.host, this.port, this.timeoutMs,
          (closed) => { if (this.conn === closed) this.conn = null; }, null, this.tls, this.lookup);
        if (this.stopped) {
          conn.destroy();
          return;
        }
        this.conn = conn;
        reply = conn.hello!;
      } else {
        reply = await this.hello(this.conn);
      }
      this.checks++;
      if (reply.ok !== 1) throw new Error(`hello failed: ${String(reply.errmsg)}`);
      if (!this.stopped) this.listener.onHello(this, reply, performance.now() - started);
    } catch (err) {
      this.checks++;
      const c = this.conn;
      this.conn = null;
      c?.destroy();
      if (!this.stopped) this.listener.onCheckFailed(this, err as Error);
    } finally {
      this.checking = false;
      if (!this.stopped) this.schedule(this.again ? MIN_HEARTBEAT_MS : this.listener.heartbeatMs());
    }
  }

  /** hello on the open connection, bounded by the connect timeout (the connection is dropped on expiry). */
  private hello(conn: UpstreamConnection): Promise<Document> {
    const timer = setTimeout(() => conn.destroy(`no hello reply within ${this.timeoutMs} ms`), this.timeoutMs);
    return conn.command({ hello: 1, $db: 'admin' }).finally(() => clearTimeout(timer));
  }
}
