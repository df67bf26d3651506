// A multi-host upstream: a replica set (`replicaSet=` in the URI, or a seed that reports a set
// name) or a list of mongos routers. Server Discovery and Monitoring, simplified (what is left out
// is listed in docs/operations.md, "Replica sets and mongos lists"):
// https://github.com/mongodb/specifications/blob/master/source/server-discovery-and-monitoring/server-discovery-and-monitoring.md
//
// - A ServerMonitor per host says hello every upstream.heartbeat_ms (every MIN_HEARTBEAT_MS while
//   a replica set has no known primary), and at once after a network error or a "not primary" reply.
// - Members come from a member's `hosts`, `passives` and `arbiters`; the primary's list is
//   authoritative (members it does not list are dropped). Every member must report the set's name.
// - A primary whose (electionId, setVersion) is older than the newest seen is stale and ignored;
//   a newer primary demotes the old one to Unknown.
// - One UpstreamPool per server (pool_size each). Selection: replica set — the client's
//   `$readPreference` (read-preference.ts), primary when absent; mongos list — round robin over the
//   healthy routers within the latency window. When no server fits, the request waits (up to
//   upstream.server_selection_timeout_ms) for the next change of the topology, then fails with a
//   retryable error.
import type { Log } from '../log/index.ts';
import { performance } from 'node:perf_hooks';
import type { Document } from 'bson';
import { ErrorCodes, ProxyError } from '../errors/index.ts';
import type { CommandPeek } from '../wire/index.ts';
import { infoFromHello, type UpstreamInfo } from './connection.ts';
export { TopologyServer, type ServerType } from './topology-server.ts';
import { UpstreamPool, type ConnectionSource, type PoolHealthListener, type PoolOptions, type PoolWaiter } from './pool.ts';
import { PRIMARY, ReadPreferenceReader, ReplicaSetSelector, describeReadPreference, type ReadPreference } from './read-preference.ts';
import { MIN_HEARTBEAT_MS, ServerMonitor, type MonitorListener } from './server-monitor.ts';
import { TopologyServer, compareElection, memberList, serverType, splitAddress } from './topology-server.ts';
import type { UpstreamAddress } from './uri.ts';
import { StaticHostSource, hostKey } from './host-source.ts';

export type TopologyKind = 'Unknown' | 'ReplicaSet' | 'Sharded';

/** What /readyz reports for a multi-host upstream (`reason` '' when ready). */
export interface TopologyReadiness {
  ready: boolean;
  reason: 'no_primary' | 'no_router' | 'upstream_unreachable' | '';
  message: string;
}

export interface TopologyOptions {
  heartbeatMs: number;
  localThresholdMs: number;
  serverSelectionTimeoutMs: number;
}

/** Codes after which the server that sent them is re-checked at once (SDAM "state change" errors). */
const STATE_CHANGE_CODES: ReadonlySet<number> = new Set([10107, 13435, 11602, 13436, 189, 91, 11600]);

export function isStateChangeError(code: number): boolean {
  return STATE_CHANGE_CODES.has(code);
}

/** Pins a transaction to the server its first statement went to (the router). */
export interface TxnPinner {
  pinTxn(key: string, txnNumber: bigint, pool: UpstreamPool): void;
}

/** A request that waits for a server its read preference accepts (made only when none is there now). */
class PendingSelection implements ConnectionSource {
  readonly rp: ReadPreference;
  /** A transaction's first statement: its session key and txnNumber, pinned once a server is chosen. */
  readonly txnKey: string | null;
  readonly txnNumber: bigint;
  private readonly topology: Topology;
  constructor(topology: Topology, rp: ReadPreference, txnKey: string | null, txnNumber: bigint) {
    this.topology = topology;
    this.rp = rp;
    this.txnKey = txnKey;
    this.txnNumber = txnNumber;
  }
  acquire(waiter: PoolWaiter): void { this.topology.acquireFor(this, waiter); }
  describe(): string { return `(server selection: ${describeReadPreference(this.rp)})`; }
}

interface Waiter { pending: PendingSelection; waiter: PoolWaiter; deadline: number }

/** A request refused before it reaches a server (an invalid `$readPreference`). */
class RefusedSelection implements ConnectionSource {
  private readonly err: ProxyError;
  constructor(err: ProxyError) { this.err = err; }
  acquire(waiter: PoolWaiter): void { waiter.onPoolError(this.err); }
  describe(): string { return '(refused)'; }
}

export class Topology implements MonitorListener, PoolHealthListener {
  readonly address: UpstreamAddress;
  kind: TopologyKind;
  setName: string | null;
  private readonly opts: TopologyOptions;
  private readonly poolOptions: PoolOptions;
  private readonly log: Pick<Log, 'info' | 'warn'>;
  private readonly servers = new Map<string, TopologyServer>();
  private readonly byMonitor = new Map<ServerMonitor, TopologyServer>();
  /** Each server's last hello reply (its member lists). */
  private readonly lastHello = new Map<TopologyServer, Document>();
  /** Members that can serve requests (data-bearing, in the topology), rebuilt on each change. */
  private usable: TopologyServer[] = [];
  private primaryServer: TopologyServer | null = null;
  private maxElectionId: string | null = null;
  private maxSetVersion: number | null = null;
  private readonly reader: ReadPreferenceReader;
  private readonly selector: ReplicaSetSelector<TopologyServer>;
  private readonly waiting: Waiter[] = [];
  private sweeper: NodeJS.Timeout | null = null;
  private readonly seedPoolServer: TopologyServer;
  private closed = false;
  /** Primary changes seen (tests, logs). */
  primaryChanges = 0;
  pinner: TxnPinner | null = null;

  constructor(address: UpstreamAddress, poolOptions: PoolOptions, opts: TopologyOptions, log: Pick<Log, 'info' | 'warn'>) {
    this.address = address;
    this.opts = opts;
    this.poolOptions = poolOptions;
    this.log = log;
    this.setName = address.replicaSet;
    this.kind = address.replicaSet !== null ? 'ReplicaSet' : 'Unknown';
    this.reader = new ReadPreferenceReader(opts.heartbeatMs);
    this.selector = new ReplicaSetSelector(opts.heartbeatMs, opts.localThresholdMs);
    for (const h of address.hosts.current()) this.addServer(h.host, h.port);
    this.seedPoolServer = this.servers.values().next().value!;
    // mongodb+srv://: a rescan's new list (the SRV polling rule) adds and removes routers of a
    // mongos list, or seeds of a topology not yet known; a replica set finds its members by hello.
    this.unsubscribe = address.hosts.onChange((hosts) => this.onSeedsChanged(hosts));
  }

  private readonly unsubscribe: () => void;

  private onSeedsChanged(hosts: readonly { host: string; port: number }[]): void {
    if (this.closed || this.kind === 'ReplicaSet') return;
    const listed = new Set<string>();
    for (const h of hosts) {
      const s = this.addOrRejoin(h.host, h.port);
      listed.add(s.address);
    }
    for (const s of this.servers.values()) {
      if (s.member && !listed.has(s.address)) this.drop(s, 'it is no longer in the SRV records');
    }
    this.changed();
  }

  /** The server at host:port, monitored again if it had been left out, or added and monitored. */
  private addOrRejoin(host: string, port: number): TopologyServer {
    const s = this.servers.get(hostKey({ host, port }));
    if (s !== undefined) {
      if (!s.member) {
        s.member = true;
        s.monitor.start();
      }
      return s;
    }
    const n = this.addServer(host, port);
    this.log.info('upstream server added from the SRV records', { server: n.address });
    n.monitor.start();
    return n;
  }

  /** The first seed's pool (the proxy's "main" pool for what needs one, e.g. its lifetime). */
  get seedPool(): UpstreamPool { return this.seedPoolServer.pool; }

  get primary(): TopologyServer | null { return this.primaryServer; }

  /** Every server known (members and ones dropped from the set). */
  allServers(): IterableIterator<TopologyServer> { return this.servers.values(); }

  /** Servers that can be selected now. */
  get usableServers(): readonly TopologyServer[] { return this.usable; }

  /** The limits to advertise: the primary's, else any data-bearing server's. */
  get info(): UpstreamInfo | null {
    if (this.primaryServer?.info != null) return this.primaryServer.info;
    for (const s of this.usable) if (s.info !== null) return s.info;
    return null;
  }

  /** Starts monitoring; resolves once every seed was checked once (or after `waitMs`). */
  async start(waitMs: number): Promise<void> {
    for (const s of this.servers.values()) s.monitor.start();
    const deadline = performance.now() + waitMs;
    const seeds = [...this.servers.values()];
    while (performance.now() < deadline && seeds.some((s) => s.monitor.checks === 0)) {
      await new Promise((r) => setTimeout(r, 20));
    }
    if (this.usable.length === 0) {
      this.log.warn('no usable upstream server yet; requests wait for one (upstream.server_selection_timeout_ms)', { upstream: this.describe() });
    }
  }

  /**
   * Whether the topology can serve (readiness, /readyz), from what the monitors last saw: a replica
   * set needs a known primary (with secondaries only, writes and primary reads — most traffic —
   * would wait and fail); a mongos list needs one router that answered its last check.
   */
  readiness(): TopologyReadiness {
    if (this.kind === 'ReplicaSet') {
      if (this.primaryServer !== null) return { ready: true, reason: '', message: '' };
      const secondaries = this.usable.length;
      return {
        ready: false, reason: 'no_primary',
        message: `replica set ${this.setName ?? ''} has no known primary (${secondaries} secondar${secondaries === 1 ? 'y' : 'ies'} ` +
          `reachable): ${this.describe()}`,
      };
    }
    if (this.kind === 'Sharded') {
      if (this.usable.length > 0) return { ready: true, reason: '', message: '' };
      return { ready: false, reason: 'no_router', message: `no mongos router answered its last check: ${this.describe()}` };
    }
    return { ready: false, reason: 'upstream_unreachable', message: `no upstream server has answered yet: ${this.describe()}` };
  }

  heartbeatMs(): number {
    return this.kind === 'ReplicaSet' && this.primaryServer === null ? MIN_HEARTBEAT_MS : this.opts.heartbeatMs;
  }

  /**
   * Where the command described by `peek` (bytes `body`) goes: a server's pool, or a wait for one.
   * `txnKey` (a transaction's first statement): the transaction is pinned to the server chosen.
   */
  select(peek: CommandPeek, body: Buffer, txnKey: string | null): ConnectionSource {
    let rp = PRIMARY;
    if (peek.readPreferenceAt >= 0 && this.kind !== 'Sharded') {
      const r = this.reader.read(body, peek.readPreferenceAt);
      if (r instanceof ProxyError) return new RefusedSelection(r);
      // A transaction reads from the primary whatever the statement says (drivers refuse others).
      rp = peek.inTransaction ? PRIMARY : r;
    }
    const s = this.trySelect(rp);
    if (s === null) return new PendingSelection(this, rp, txnKey, peek.txnNumber);
    if (txnKey !== null) this.pinner?.pinTxn(txnKey, peek.txnNumber, s.pool);
    return s.pool;
  }

  /**
   * Whether a transaction pinned to `pool` may stay there: in a replica set, only while it is the
   * primary's (a route step's pool is not the topology's and always may).
   */
  mayKeepTxn(pool: UpstreamPool): boolean {
    if (this.kind !== 'ReplicaSet' || pool.healthListener !== this) return true;
    const p = this.primaryServer;
    return p !== null && p.hasPool && p.pool === pool;
  }

  /** A server for `rp` now, or null. */
  trySelect(rp: ReadPreference): TopologyServer | null {
    if (this.kind === 'ReplicaSet') return this.selector.select(rp, this.usable, this.primaryServer);
    return this.selector.nearest(this.usable);
  }

  /** PendingSelection.acquire: a server now, or wait for a change of the topology. */
  acquireFor(pending: PendingSelection, waiter: PoolWaiter): void {
    if (this.closed) {
      waiter.onPoolError(new ProxyError(ErrorCodes.HostUnreachable, 'proxy is shutting down', ['RetryableWriteError']));
      return;
    }
    const s = this.trySelect(pending.rp);
    if (s !== null) {
      this.hand(pending, s, waiter);
      return;
    }
    this.waiting.push({ pending, waiter, deadline: performance.now() + this.opts.serverSelectionTimeoutMs });
    if (this.sweeper === null) {
      this.sweeper = setInterval(() => this.sweep(), 50);
      this.sweeper.unref();
    }
    // Nothing fits: look again at once rather than at the next heartbeat.
    for (const srv of this.servers.values()) if (srv.member) srv.monitor.requestCheck();
  }

  // ---- monitoring ---------------------------------------------------------------------------

  onHello(monitor: ServerMonitor, reply: Document, rttMs: number): void {
    const s = this.byMonitor.get(monitor);
    if (s === undefined || this.closed) return;
    this.lastHello.set(s, reply);
    const before = s.type;
    s.rttMs = s.type === 'Unknown' || s.rttMs === 0 ? rttMs : 0.2 * rttMs + 0.8 * s.rttMs;
    s.error = null;
    s.lastUpdateTime = Date.now();
    s.type = serverType(reply);
    s.setName = typeof reply.setName === 'string' ? reply.setName : null;
    s.setVersion = reply.setVersion == null ? null : Number(reply.setVersion);
    s.electionId = reply.electionId == null ? null : String(reply.electionId);
    s.primary = typeof reply.primary === 'string' ? reply.primary : null;
    s.tags = reply.tags !== null && typeof reply.tags === 'object' ? (reply.tags as Record<string, string>) : {};
    const lw = (reply.lastWrite as Document | undefined)?.lastWriteDate;
    s.lastWriteDate = lw instanceof Date ? lw.getTime() : 0;
    s.info = infoFromHello(reply);
    this.apply(s);
    if (before !== s.type) {
      this.log.info('upstream server changed', { server: s.address, from: before, to: s.type, topology: this.kind });
    }
    this.changed();
  }

  onCheckFailed(monitor: ServerMonitor, err: Error): void {
    const s = this.byMonitor.get(monitor);
    if (s === undefined || this.closed) return;
    const was = s.type;
    s.markUnknown(err.message);
    if (was !== 'Unknown') {
      this.log.warn('upstream server unreachable', { server: s.address, was, error: err.message });
      // A primary gone: every member is asked at once who is primary now.
      if (was === 'RSPrimary') for (const o of this.servers.values()) if (o.member && o !== s) o.monitor.requestCheck();
    }
    this.changed();
    // After changed(): the server is out of the usable list, so the requests answered here with a
    // retryable error (and the driver's retries) select another server. A server that does not
    // answer its monitor does not answer requests either: without this, a request written to a
    // server that went silent (a partition, its TCP left open) would wait for ever.
    if (s.hasPool) s.pool.clear(`the server monitor found ${s.address} unreachable (${err.message})`);
  }

  /**
   * A pooled connection failed (a request's network error, or a failed connect): as SDAM says, the
   * server is Unknown until its monitor hears from it again, so no more requests are sent its way.
   */
  onPoolNetworkError(pool: UpstreamPool): void {
    for (const s of this.servers.values()) {
      if (!s.hasPool || s.pool !== pool) continue;
      if (s.type !== 'Unknown') {
        const was = s.type;
        s.markUnknown('network error on a pooled connection');
        this.log.warn('upstream server unreachable from the pool; checking it again', { server: s.address, was });
        if (was === 'RSPrimary') for (const o of this.servers.values()) if (o.member && o !== s) o.monitor.requestCheck();
        this.changed();
      }
      s.monitor.requestCheck();
    }
  }

  /** A reply from `pool` carried `code`: "not primary" and shutdown codes make its server re-checked now. */
  onReplyError(pool: UpstreamPool, code: number): void {
    if (!isStateChangeError(code)) return;
    for (const s of this.servers.values()) {
      if (!s.hasPool || s.pool !== pool) continue;
      if (s.type !== 'Unknown') {
        this.log.info('upstream server answered a state-change error; checking it again', { server: s.address, code });
        s.markUnknown(`state change error ${code}`);
        this.changed();
      }
      s.monitor.requestCheck();
    }
  }

  private apply(s: TopologyServer): void {
    if (this.kind === 'Unknown') {
      if (s.type === 'Mongos') this.kind = 'Sharded';
      else if (s.setName !== null && s.type !== 'RSGhost') {
        this.kind = 'ReplicaSet';
        this.setName = s.setName;
      }
      if (this.kind !== 'Unknown') this.log.info('upstream topology discovered', { kind: this.kind, setName: this.setName ?? undefined });
    }
    if (s.type === 'Standalone' && this.servers.size > 1) {
      this.drop(s, 'it is a standalone server in a multi-host upstream (use one host for a standalone)');
      return;
    }
    if (this.kind === 'Sharded') {
      if (s.type !== 'Mongos' && s.type !== 'Unknown') this.drop(s, `it is ${s.type}, not a mongos, in a list of mongos routers`);
      return;
    }
    if (this.kind !== 'ReplicaSet' || s.type === 'Unknown' || s.type === 'RSGhost') return;
    if (s.type === 'Mongos') {
      this.drop(s, 'it is a mongos in a replica set');
      return;
    }
    if (s.setName !== this.setName) {
      this.drop(s, `it reports replica set "${s.setName}", not "${this.setName}"`);
      return;
    }
    if (s.type === 'RSPrimary') this.updatePrimary(s);
    else {
      this.addMembers(s);
      // It names a primary we do not know as one: ask that server now.
      if (s.primary !== null) {
        const p = this.servers.get(s.primary);
        if (p !== undefined && p.type !== 'RSPrimary') p.monitor.requestCheck();
      }
      if (this.primaryServer === s) this.primaryServer = null;
    }
  }

  private updatePrimary(s: TopologyServer): void {
    // Stale primary (MongoDB 6.0+ order: electionId first, then setVersion).
    if (s.electionId !== null && s.setVersion !== null && this.maxElectionId !== null) {
      const c = compareElection(s.electionId, s.setVersion, this.maxElectionId, this.maxSetVersion ?? 0);
      if (c < 0) {
        this.log.warn('ignoring a stale primary (older electionId/setVersion than the newest seen)',
          { server: s.address, electionId: s.electionId, setVersion: s.setVersion });
        s.markUnknown('stale primary');
        return;
      }
    }
    if (s.electionId !== null) this.maxElectionId = s.electionId;
    if (s.setVersion !== null) this.maxSetVersion = s.setVersion;
    for (const o of this.servers.values()) {
      if (o !== s && o.type === 'RSPrimary') {
        o.markUnknown(`${s.address} is the new primary`);
        o.monitor.requestCheck();
      }
    }
    if (this.primaryServer !== s) {
      this.primaryChanges++;
      this.log.info('upstream primary', { server: s.address, setName: this.setName ?? undefined, electionId: s.electionId ?? undefined });
    }
    this.primaryServer = s;
    // The primary's member list is authoritative.
    const listed = this.addMembers(s);
    for (const o of this.servers.values()) {
      if (o.member && !listed.has(o.address)) this.drop(o, `the primary ${s.address} does not list it`);
    }
  }

  private addMembers(s: TopologyServer): Set<string> {
    const listed = new Set<string>();
    for (const a of memberList(this.lastHello.get(s) ?? null)) {
      listed.add(a);
      const existing = this.servers.get(a);
      if (existing === undefined) {
        const hp = splitAddress(a);
        if (hp === null) continue;
        const n = this.addServer(hp.host, hp.port);
        this.log.info('upstream member discovered', { server: a, from: s.address });
        n.monitor.start();
      } else if (!existing.member) {
        existing.member = true;
        existing.monitor.start();
      }
    }
    return listed;
  }

  private drop(s: TopologyServer, why: string): void {
    if (!s.member) return;
    this.log.warn('upstream server left out of the topology', { server: s.address, reason: why });
    s.member = false;
    s.markUnknown(why);
    s.monitor.stop();
    if (this.primaryServer === s) this.primaryServer = null;
  }

  private addServer(host: string, port: number): TopologyServer {
    const s = new TopologyServer(host, port,
      (srv) => new ServerMonitor(host, port, this.address.tls, this.poolOptions.connectTimeoutMs, {
        onHello: (m, reply, rtt) => this.onHello(m, reply, rtt),
        onCheckFailed: (m, err) => this.onCheckFailed(m, err),
        heartbeatMs: () => this.heartbeatMs(),
      }, this.address.lookup),
      (srv) => {
        const pool = new UpstreamPool({ ...this.address, hosts: new StaticHostSource([{ host: srv.host, port: srv.port }]) }, this.poolOptions, this.log);
        pool.healthListener = this;
        return pool;
      });
    this.servers.set(s.address, s);
    this.byMonitor.set(s.monitor, s);
    return s;
  }

  /** Rebuilds the usable list and serves waiting requests that now have a server. */
  private changed(): void {
    if (this.primaryServer !== null && this.primaryServer.type !== 'RSPrimary') this.primaryServer = null;
    const usable: TopologyServer[] = [];
    for (const s of this.servers.values()) {
      if (!s.member) continue;
      if (this.kind === 'ReplicaSet' ? (s.type === 'RSPrimary' || s.type === 'RSSecondary') : s.type === 'Mongos') usable.push(s);
    }
    this.usable = usable;
    if (this.waiting.length === 0) return;
    const still: Waiter[] = [];
    for (const w of this.waiting.splice(0)) {
      const s = this.trySelect(w.pending.rp);
      if (s !== null) this.hand(w.pending, s, w.waiter);
      else still.push(w);
    }
    this.waiting.push(...still);
  }

  private hand(pending: PendingSelection, s: TopologyServer, waiter: PoolWaiter): void {
    if (pending.txnKey !== null) this.pinner?.pinTxn(pending.txnKey, pending.txnNumber, s.pool);
    s.pool.acquire(waiter);
  }

  private sweep(): void {
    const now = performance.now();
    for (let i = 0; i < this.waiting.length;) {
      const w = this.waiting[i];
      if (w.deadline > now) {
        i++;
        continue;
      }
      this.waiting.splice(i, 1);
      w.waiter.onPoolError(new ProxyError(ErrorCodes.FailedToSatisfyReadPreference,
        `no upstream server for read preference ${describeReadPreference(w.pending.rp)} within upstream.server_selection_timeout_ms ` +
          `(${this.opts.serverSelectionTimeoutMs} ms): ${this.describe()}`,
        ['RetryableWriteError']));
    }
    if (this.waiting.length === 0 && this.sweeper !== null) {
      clearInterval(this.sweeper);
      this.sweeper = null;
    }
  }

  /** "ReplicaSet rs0: a:1 RSPrimary, b:2 Unknown (error)". */
  describe(): string {
    const parts: string[] = [];
    for (const s of this.servers.values()) {
      if (!s.member) continue;
      parts.push(`${s.address} ${s.type}${s.error !== null && s.type === 'Unknown' ? ` (${s.error})` : ''}`);
    }
    return `${this.kind}${this.setName !== null ? ` ${this.setName}` : ''}: ${parts.join(', ')}`;
  }

  close(): void {
    this.closed = true;
    this.unsubscribe();
    if (this.sweeper !== null) clearInterval(this.sweeper);
    this.sweeper = null;
    for (const w of this.waiting.splice(0)) {
      w.waiter.onPoolError(new ProxyError(ErrorCodes.HostUnreachable, 'proxy is shutting down', ['RetryableWriteError']));
    }
    for (const s of this.servers.values()) {
      s.monitor.stop();
      s.closePool();
    }
  }
}
