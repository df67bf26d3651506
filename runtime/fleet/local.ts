// The embedded fleet store (`fleet.store: sqlite`, the default): one instance, no other process.
// Its state lives in the canary database's `fleet_kv` table (the same SQLite file, WAL, synchronous
// writes), its revisions are one counter over that table, it always leads (there is nobody to
// elect), its watches are in-process and its registry holds only itself.
import type { CanaryStore } from '../canary/store.ts';
import type { CasOptions, CasResult, Entry, FleetStore, InstanceInfo, LeaderListener, WatchEvent } from './store.ts';

export class LocalFleetStore implements FleetStore {
  readonly kind = 'sqlite' as const;
  readonly instanceId: string;
  private readonly db: CanaryStore;
  private self: InstanceInfo | null = null;
  private readonly watchers = new Set<{ prefix: string; fn: (e: WatchEvent<unknown>) => void }>();
  /** pin(): key → until when (ms). */
  private readonly pins = new Map<string, number>();

  constructor(db: CanaryStore, instanceId: string) {
    this.db = db;
    this.instanceId = instanceId;
  }

  async start(): Promise<void> {}

  async get<T>(key: string): Promise<Entry<T> | null> {
    const row = this.db.kvGet(key);
    return row === null ? null : { key, value: JSON.parse(row.value) as T, revision: row.revision };
  }

  async list<T>(prefix: string): Promise<Array<Entry<T>>> {
    return this.db.kvList(prefix).map((r) => ({ key: r.key, value: JSON.parse(r.value) as T, revision: r.revision }));
  }

  async revisions(prefix: string): Promise<Array<{ key: string; revision: number }>> {
    const now = Date.now();
    const pinned = [...this.pins].filter(([k, until]) => k.startsWith(prefix) && until > now).map(([key]) => ({ key, revision: 0 }));
    return [...this.db.kvList(prefix).map((r) => ({ key: r.key, revision: r.revision })), ...pinned];
  }

  /** Pins live in this process only (they expire; nothing outlives the instance here). */
  async pin(key: string, ttlSeconds: number): Promise<void> {
    this.pins.set(key, Date.now() + ttlSeconds * 1000);
    for (const [k, until] of this.pins) if (until <= Date.now()) this.pins.delete(k);
  }

  async unpin(key: string): Promise<void> {
    this.pins.delete(key);
  }

  async cas<T>(key: string, value: T | null, expected: number, opts: CasOptions = {}): Promise<CasResult> {
    // One process, synchronous SQLite: nothing runs between these checks and the write.
    const guarded = opts.guard === undefined || (this.db.kvGet(opts.guard.key)?.revision ?? 0) === opts.guard.revision;
    const unchanged = opts.unchanged === undefined || this.db.kvList(opts.unchanged.prefix).every((r) => r.revision <= opts.unchanged!.revision);
    if (!guarded || !unchanged) return { ok: false, reason: 'conflict', revision: this.db.kvGet(key)?.revision ?? 0 };
    const also = (opts.also ?? []).map((a) => ({ key: a.key, value: JSON.stringify(a.value) }));
    const rev = this.db.kvCas(key, value === null ? null : JSON.stringify(value), expected, also);
    if (rev < 0 || (rev === 0 && expected !== 0)) return { ok: false, reason: 'conflict', revision: -rev };
    this.fire({ key, value, revision: rev });
    for (const a of opts.also ?? []) this.fire({ key: a.key, value: a.value, revision: rev });
    return { ok: true, revision: rev };
  }

  private fire(e: WatchEvent<unknown>): void {
    for (const w of this.watchers) if (e.key.startsWith(w.prefix)) w.fn(e);
  }

  async campaign(): Promise<void> {}
  async resign(): Promise<void> {}
  leader(): string {
    return this.instanceId;
  }

  isLeader(): boolean {
    return true;
  }

  onLeader(fn: LeaderListener): () => void {
    fn(this.instanceId, true);
    return () => {};
  }

  watch<T>(prefix: string, fn: (e: WatchEvent<T>) => void): () => void {
    const w = { prefix, fn: fn as (e: WatchEvent<unknown>) => void };
    this.watchers.add(w);
    return () => { this.watchers.delete(w); };
  }

  async register(info: InstanceInfo): Promise<void> {
    this.self = info;
  }

  async instances(): Promise<InstanceInfo[]> {
    return this.self === null ? [] : [this.self];
  }

  reachable(): boolean {
    return true;
  }

  async close(): Promise<void> {
    this.watchers.clear();
  }
}
