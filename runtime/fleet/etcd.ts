// The fleet store on etcd v3 (`fleet.store: etcd`), through the `etcd3` client's raw KV, lease,
// watch and transaction calls. The client's own Election is not used: its campaign keeps a leader
// believing it leads until its lease's loss is reported, which the client does only after an
// expired keep-alive answer or twice the TTL without one — too late for a paused process. Instead:
//
// - **Lease.** One per instance session (TTL `fleet.lease_ttl`), kept alive by the client. The
//   instance's registry entry and, while it leads, the leader key are attached to it, so both
//   vanish when the instance dies or stalls past the TTL.
// - **Election.** The leader key is created only if absent (`Create == 0`), with this instance's id
//   as value, under its lease; its create revision is the leadership's token. Everybody watches the
//   key and campaigns again when it is deleted.
// - **Fencing.** A fenced write is one transaction that compares the leader key's create revision
//   with the token this instance won, and the state key's mod revision with the one it read. A
//   former leader's write can therefore never land, whatever it believes.
// - **Local belief.** isLeader() also needs a keep-alive sent less than one TTL ago to have been
//   answered (monotonic clock), so a leader that stalled stops acting at once when it wakes up,
//   before any etcd answer tells it so.
import { readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { CompareResult, CompareTarget, Etcd3, type ComparatorBuilder, type IKeyValue, type IOptions, type Lease, type Namespace, type Watcher } from 'etcd3';
import type { Log } from '../log/index.ts';
import type { CasOptions, CasResult, Entry, FleetStore, InstanceInfo, LeaderListener, WatchEvent } from './store.ts';
import { fleetKeys } from './store.ts';

export interface EtcdStoreOptions {
  endpoints: string[];
  prefix: string;
  instanceId: string;
  leaseTtlSeconds: number;
  /** Each unary call's deadline. */
  callTimeoutMs?: number;
  tls?: { ca: string | null; cert: string | null; key: string | null } | null;
  auth?: { username: string; password: string } | null;
  log?: Pick<Log, 'info' | 'warn' | 'error'>;
}

const silent: Pick<Log, 'info' | 'warn' | 'error'> = { info() {}, warn() {}, error() {} };

export class EtcdFleetStore implements FleetStore {
  readonly kind = 'etcd' as const;
  readonly instanceId: string;
  private readonly client: Etcd3;
  private readonly ns: Namespace;
  private readonly prefix: string;
  private readonly ttl: number;
  private readonly log: Pick<Log, 'info' | 'warn' | 'error'>;
  private lease: Lease | null = null;
  private leaseId: string | null = null;
  /** When the keep-alive in flight was sent, and until when the lease surely lives (monotonic ms). */
  private keepaliveSentAt = 0;
  private leaseValidUntil = 0;
  private campaigning = false;
  /** The create revision of the leader key this instance wrote, while it believes it leads. */
  private token: string | null = null;
  private leaderId: string | null = null;
  private readonly leaderListeners = new Set<LeaderListener>();
  private leaderWatcher: Watcher | null = null;
  /** The store revision of the latest leader-key event or read this instance has applied (older watch events are replays). */
  private leaderSeenAt = 0;
  private readonly watchers = new Set<Watcher>();
  private registration: InstanceInfo | null = null;
  private closed = false;
  /** Reads the leader key every second: the watch alone may reconnect late after an outage. */
  private poll: NodeJS.Timeout | null = null;
  private readFailing = false;

  constructor(o: EtcdStoreOptions) {
    this.instanceId = o.instanceId;
    this.ttl = o.leaseTtlSeconds;
    this.log = o.log ?? silent;
    const timeout = o.callTimeoutMs ?? 2000;
    const opts: IOptions = {
      hosts: o.endpoints,
      dialTimeout: timeout,
      defaultCallOptions: (ctx) => (ctx.isStream ? {} : { deadline: Date.now() + timeout }),
    };
    if (o.tls != null && o.tls.ca !== null) {
      opts.credentials = { rootCertificate: readFileSync(o.tls.ca) };
      if (o.tls.cert !== null) opts.credentials.certChain = readFileSync(o.tls.cert);
      if (o.tls.key !== null) opts.credentials.privateKey = readFileSync(o.tls.key);
    }
    if (o.auth != null) opts.auth = { username: o.auth.username, password: o.auth.password };
    this.client = new Etcd3(opts);
    this.prefix = o.prefix.endsWith('/') ? o.prefix : `${o.prefix}/`;
    this.ns = this.client.namespace(this.prefix);
  }

  async start(): Promise<void> {
    await this.grantLease();
    const w = await this.ns.watch().key(fleetKeys.leader).create();
    // A watch that reconnects (after an etcd restart) may replay events older than what a read or a
    // won campaign has shown since: those are skipped, or a stale delete would unseat a leader.
    w.on('put', (kv) => {
      if (this.fresh(kv.mod_revision)) this.setLeader(kv.value.toString(), kv.create_revision);
    });
    w.on('delete', (kv) => {
      if (!this.fresh(kv.mod_revision)) return;
      this.setLeader(null, null);
      if (this.campaigning) void this.tryLead();
    });
    w.on('connected', () => { void this.refreshLeader(); });
    this.leaderWatcher = w;
    await this.refreshLeader();
    this.poll = setInterval(() => {
      if (this.lease !== null) void this.refreshLeader();
    }, 1000);
    this.poll.unref();
  }

  /** A new lease for this session; on its loss, the leadership goes and a new one is granted. */
  private async grantLease(): Promise<void> {
    const lease = this.ns.lease(this.ttl, { autoKeepAlive: true });
    lease.on('keepaliveFired', () => { this.keepaliveSentAt = performance.now(); });
    lease.on('keepaliveSucceeded', () => { this.leaseValidUntil = this.keepaliveSentAt + this.ttl * 1000; });
    lease.on('lost', (err) => {
      if (this.closed || this.lease !== lease) return;
      this.log.warn('fleet lease lost; registering again', { instance_id: this.instanceId, error: err.message });
      this.lease = null;
      this.leaseId = null;
      this.dropLeadership();
      void this.regrant();
    });
    const sent = performance.now();
    this.leaseId = await lease.grant();
    this.leaseValidUntil = sent + this.ttl * 1000;
    this.lease = lease;
  }

  private async regrant(): Promise<void> {
    let told = false;
    while (!this.closed && this.lease === null) {
      try {
        await this.grantLease();
        if (this.registration !== null) await this.register(this.registration);
        await this.refreshLeader();
        if (told) this.log.info('fleet store reachable again; registered with a new lease', { instance_id: this.instanceId });
        return;
      } catch (err) {
        if (!told) this.log.warn('fleet store unreachable; retrying every 500 ms', { error: (err as Error).message });
        told = true;
        await new Promise((r) => setTimeout(r, 500));
      }
    }
  }

  /** Whether a leader-key event at `revision` is newer than what this instance last saw of the key; if so it becomes that. */
  private fresh(revision: string | number): boolean {
    const r = Number(revision);
    if (r <= this.leaderSeenAt) return false;
    this.leaderSeenAt = r;
    return true;
  }

  /**
   * The leader key as a read (at store revision `at`) found it. A key that names this instance
   * under its current lease is this instance's leadership, whatever it believed (a replayed event
   * may have unseated it): the token is taken back.
   */
  private readLeader(kv: IKeyValue | undefined, at: string): void {
    this.leaderSeenAt = Math.max(this.leaderSeenAt, Number(at));
    if (kv !== undefined && kv.value.toString() === this.instanceId && this.leaseId !== null && kv.lease === this.leaseId &&
      this.token !== kv.create_revision && this.campaigning) {
      this.token = kv.create_revision;
      this.leaderId = this.instanceId;
      this.log.info('fleet leadership held under this lease; acting as leader again', { instance_id: this.instanceId, token: this.token });
      for (const fn of this.leaderListeners) fn(this.instanceId, true);
      return;
    }
    this.setLeader(kv === undefined ? null : kv.value.toString(), kv === undefined ? null : kv.create_revision);
  }

  private setLeader(id: string | null, createRevision: string | null): void {
    const before = this.leaderId;
    this.leaderId = id;
    if (id !== this.instanceId || createRevision !== this.token) {
      if (this.token !== null) this.token = null;
    }
    if (before !== id) for (const fn of this.leaderListeners) fn(id, this.isLeader());
  }

  private dropLeadership(): void {
    if (this.token === null) return;
    this.token = null;
    for (const fn of this.leaderListeners) fn(this.leaderId, false);
  }

  private async refreshLeader(): Promise<void> {
    try {
      const res = await this.ns.get(fleetKeys.leader).exec();
      this.readFailing = false;
      const kv = res.kvs[0];
      this.readLeader(kv, res.header.revision);
      if (kv === undefined && this.campaigning) await this.tryLead();
    } catch (err) {
      if (!this.readFailing) this.log.warn('fleet leader not readable', { error: (err as Error).message });
      this.readFailing = true;
    }
  }

  /** One attempt: create the leader key if absent, under this session's lease. */
  private async tryLead(): Promise<void> {
    if (!this.campaigning || this.leaseId === null) return;
    try {
      const res = await this.ns.if(fleetKeys.leader, 'Create', '==', 0)
        .then(this.ns.put(fleetKeys.leader).value(this.instanceId).lease(this.leaseId))
        .else(this.ns.get(fleetKeys.leader))
        .commit();
      if (res.succeeded) {
        this.leaderSeenAt = Math.max(this.leaderSeenAt, Number(res.header.revision));
        this.token = res.header.revision;
        this.leaderId = this.instanceId;
        this.log.info('fleet leadership won', { instance_id: this.instanceId, token: this.token });
        for (const fn of this.leaderListeners) fn(this.instanceId, true);
      } else {
        const kv = res.responses[0]?.response_range?.kvs[0];
        if (kv !== undefined) this.readLeader(kv, res.header.revision);
      }
    } catch (err) {
      this.log.warn('fleet campaign failed; retrying on the next change', { error: (err as Error).message });
    }
  }

  async campaign(): Promise<void> {
    this.campaigning = true;
    await this.tryLead();
  }

  async resign(): Promise<void> {
    this.campaigning = false;
    const token = this.token;
    this.dropLeadership();
    if (token === null) return;
    await this.ns.if(fleetKeys.leader, 'Create', '==', token).then(this.ns.delete().key(fleetKeys.leader)).commit();
  }

  leader(): string | null {
    return this.leaderId;
  }

  isLeader(): boolean {
    return this.token !== null && performance.now() < this.leaseValidUntil;
  }

  onLeader(fn: LeaderListener): () => void {
    this.leaderListeners.add(fn);
    fn(this.leaderId, this.isLeader());
    return () => { this.leaderListeners.delete(fn); };
  }

  async get<T>(key: string): Promise<Entry<T> | null> {
    const res = await this.ns.get(key).exec();
    const kv = res.kvs[0];
    return kv === undefined ? null : { key, value: JSON.parse(kv.value.toString()) as T, revision: Number(kv.mod_revision) };
  }

  async list<T>(prefix: string): Promise<Array<Entry<T>>> {
    const res = await this.ns.getAll().prefix(prefix).exec();
    return res.kvs.map((kv) => ({ key: kv.key.toString(), value: JSON.parse(kv.value.toString()) as T, revision: Number(kv.mod_revision) }));
  }

  async revisions(prefix: string): Promise<Array<{ key: string; revision: number }>> {
    // The client's KV service directly: its range builder has no keys-only call that keeps revisions.
    const [key, end] = this.range(prefix);
    const res = await this.client.kv.range({ key, range_end: end, keys_only: true });
    return res.kvs.map((kv) => ({ key: kv.key.toString().slice(this.prefix.length), revision: Number(kv.mod_revision) }));
  }

  async cas<T>(key: string, value: T | null, expected: number, opts: CasOptions = {}): Promise<CasResult> {
    const token = this.token;
    if (opts.fenced === true && token === null) return { ok: false, reason: 'fenced', revision: -1 };
    let txn = this.ns.if(key, 'Mod', '==', expected);
    if (opts.fenced === true) txn = txn.and(fleetKeys.leader, 'Create', '==', token!);
    if (opts.guard !== undefined) txn = txn.and(opts.guard.key, 'Mod', '==', opts.guard.revision);
    if (opts.unchanged !== undefined) this.compareRange(txn, opts.unchanged.prefix, opts.unchanged.revision);
    const ops = [value === null ? this.ns.delete().key(key) : this.ns.put(key).value(JSON.stringify(value))];
    for (const a of opts.also ?? []) ops.push(this.ns.put(a.key).value(JSON.stringify(a.value)));
    const res = await txn.then(...ops).else(this.ns.get(key), this.ns.get(fleetKeys.leader)).commit();
    if (res.succeeded) return { ok: true, revision: Number(res.header.revision) };
    const cur = res.responses[0]?.response_range?.kvs[0];
    const lead = res.responses[1]?.response_range?.kvs[0];
    const revision = cur === undefined ? 0 : Number(cur.mod_revision);
    if (opts.fenced === true && (lead === undefined || lead.create_revision !== token)) {
      this.log.warn('fleet write fenced off: this instance no longer leads', { instance_id: this.instanceId, key });
      if (this.token === token) this.dropLeadership();
      return { ok: false, reason: 'fenced', revision };
    }
    return { ok: false, reason: 'conflict', revision };
  }

  /**
   * Adds "every key under `prefix` has a mod revision <= `revision`" to a transaction: etcd's
   * Compare with a range_end (etcd >= 3.3), which the client's builder has no call for, so the
   * clause goes into its request as the builder's own and() would put it.
   */
  private compareRange(txn: ComparatorBuilder, prefix: string, revision: number): void {
    const [key, end] = this.range(prefix);
    const request = (txn as unknown as { request: { compare: Array<Promise<unknown>> } }).request;
    request.compare.push(Promise.resolve({ key, range_end: end, result: CompareResult.Less, target: CompareTarget.Mod, mod_revision: String(revision + 1) }));
  }

  /** The full keys bounding every key under `prefix` (in this fleet's namespace): [start, end). */
  private range(prefix: string): [Buffer, Buffer] {
    const key = Buffer.from(`${this.prefix}${prefix}`);
    const end = Buffer.from(key);
    end[end.length - 1] += 1;
    return [key, end];
  }

  watch<T>(prefix: string, fn: (e: WatchEvent<T>) => void): () => void {
    let w: Watcher | null = null;
    let cancelled = false;
    void this.ns.watch().prefix(prefix).create().then((watcher) => {
      if (cancelled) {
        void watcher.cancel();
        return;
      }
      w = watcher;
      this.watchers.add(watcher);
      watcher.on('put', (kv) => fn({ key: kv.key.toString(), value: JSON.parse(kv.value.toString()) as T, revision: Number(kv.mod_revision) }));
      watcher.on('delete', (kv) => fn({ key: kv.key.toString(), value: null, revision: Number(kv.mod_revision) }));
    }).catch((err) => this.log.warn('fleet watch failed', { prefix, error: (err as Error).message }));
    return () => {
      cancelled = true;
      if (w !== null) {
        this.watchers.delete(w);
        void w.cancel();
      }
    };
  }

  async pin(key: string, ttlSeconds: number): Promise<void> {
    const lease = this.ns.lease(ttlSeconds, { autoKeepAlive: false });
    try {
      await lease.put(key).value(this.instanceId).exec();
    } finally {
      lease.release(); // never kept alive: it expires by itself
    }
  }

  async unpin(key: string): Promise<void> {
    await this.ns.delete().key(key).exec();
  }

  async register(info: InstanceInfo): Promise<void> {
    this.registration = info;
    if (this.leaseId === null) return;
    await this.ns.put(fleetKeys.instance(this.instanceId)).value(JSON.stringify(info)).lease(this.leaseId).exec();
  }

  async instances(): Promise<InstanceInfo[]> {
    return (await this.list<InstanceInfo>(fleetKeys.instances)).map((e) => e.value);
  }

  reachable(): boolean {
    return this.lease !== null && performance.now() < this.leaseValidUntil;
  }

  async close(): Promise<void> {
    this.closed = true;
    this.campaigning = false;
    if (this.poll !== null) clearInterval(this.poll);
    for (const w of this.watchers) void w.cancel();
    this.watchers.clear();
    if (this.leaderWatcher !== null) await this.leaderWatcher.cancel().catch(() => {});
    const lease = this.lease;
    this.lease = null;
    this.token = null;
    if (lease !== null) await lease.revoke().catch(() => {});
    this.client.close();
  }
}
