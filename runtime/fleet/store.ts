// The fleet store's one interface: what a proxy instance needs from the place where a fleet keeps
// its shared truth — compare-and-set state with revisions, one elected leader (campaign / resign /
// observe) whose writes are fenced, watches, and a registry of instances held under a lease.
//
// Two implementations: `local.ts` (the embedded default: one instance, SQLite beside the canary
// records; it always leads) and `etcd.ts` (`fleet.store: etcd`: linearizable transactions, leases
// and watches of etcd v3). Callers never see which one they hold.

/** A stored value with its revision (etcd's mod revision; 0 means absent). */
export interface Entry<T> {
  key: string;
  value: T;
  revision: number;
}

/**
 * A compare-and-set's answer. `conflict`: the key was not at the expected revision (`revision` is
 * its current one). `fenced`: the write was fenced off because this instance does not hold the
 * leadership it wrote under (a paused or partitioned former leader).
 */
export type CasResult = { ok: true; revision: number } | { ok: false; reason: 'conflict' | 'fenced'; revision: number };

/** What an instance publishes about itself in the registry. */
export interface InstanceInfo {
  instance_id: string;
  /** The wire listener (host:port) clients connect to. */
  address: string;
  /** The control plane's base URL (admin/profiling HTTP), where the leader reads its evidence. */
  control_url: string | null;
  version: string;
  workers: number;
  /** The fleet pipeline-configuration generation this instance serves (0: its own file only). */
  graph_generation: number;
  started_at: string;
}

export interface WatchEvent<T> {
  key: string;
  /** null: the key was deleted (or its lease expired). */
  value: T | null;
  revision: number;
}

export interface CasOptions {
  fenced?: boolean;
  also?: Array<{ key: string; value: unknown }>;
  guard?: { key: string; revision: number };
  /** No key under `prefix` was written after `revision` (none is at a higher mod revision). */
  unchanged?: { prefix: string; revision: number };
}

export type LeaderListener = (leader: string | null, me: boolean) => void;

export interface FleetStore {
  readonly kind: 'sqlite' | 'etcd';
  readonly instanceId: string;
  /** Connects (etcd: grants the instance's lease). Rejects when the store cannot be reached. */
  start(): Promise<void>;
  get<T>(key: string): Promise<Entry<T> | null>;
  list<T>(prefix: string): Promise<Array<Entry<T>>>;
  /** The keys under `prefix` with their revisions, without their values. */
  revisions(prefix: string): Promise<Array<{ key: string; revision: number }>>;
  /**
   * Writes `value` (null deletes) if `key` is at `expected` (0: absent) and, with `fenced`, this
   * instance holds the leadership, and `guard.key` is at `guard.revision`, and nothing under
   * `unchanged.prefix` was written after `unchanged.revision`. Other keys may be
   * written in the same transaction (`also`, unconditionally).
   */
  cas<T>(key: string, value: T | null, expected: number, opts?: CasOptions): Promise<CasResult>;
  /** Joins the election; returns at once (listen with onLeader). */
  campaign(): Promise<void>;
  /** Leaves the election, giving the leadership up if held. */
  resign(): Promise<void>;
  /** The leading instance's id, as last observed (null: none, or not known). */
  leader(): string | null;
  /** Does this instance lead, with a lease that cannot have expired yet? */
  isLeader(): boolean;
  onLeader(fn: LeaderListener): () => void;
  /** Every change under `prefix`, in revision order. Returns a cancel function. */
  watch<T>(prefix: string, fn: (e: WatchEvent<T>) => void): () => void;
  /** Writes `key` (value: this instance's id) under a lease of its own: it vanishes after `ttlSeconds` unless unpinned sooner. */
  pin(key: string, ttlSeconds: number): Promise<void>;
  unpin(key: string): Promise<void>;
  /** Publishes (or updates) this instance's registry entry under its lease. */
  register(info: InstanceInfo): Promise<void>;
  instances(): Promise<InstanceInfo[]>;
  /** Can the store be reached now (etcd: a keep-alive answered within the lease TTL)? */
  reachable(): boolean;
  close(): Promise<void>;
}

/** Keys under the fleet's prefix (etcd) or in the local table. */
export const fleetKeys = {
  leader: 'leader',
  instance: (id: string) => `instances/${id}`,
  instances: 'instances/',
  canary: (id: string) => `canaries/${id}`,
  canaries: 'canaries/',
  history: (id: string, seq: number) => `history/${id}/${String(seq).padStart(10, '0')}`,
  artifact: (sha256: string) => `artifacts/${sha256}`,
  artifacts: 'artifacts/',
  pin: (sha256: string, instanceId: string, seq: number) => `pins/${sha256}/${instanceId}-${seq}`,
  pins: 'pins/',
} as const;
