// This instance as a member of its fleet: opens the fleet store, publishes its registry entry
// (id, addresses, version, workers, the pipeline-configuration generation it serves) under its
// lease, joins the election, and answers GET /api/v1/fleet (`proxy fleet status`). With the
// embedded store the fleet is this one instance, which leads.
import type { Log } from '../log/index.ts';
import type { FleetStore, InstanceInfo } from './store.ts';

export interface FleetStatus {
  store: 'sqlite' | 'etcd';
  instance_id: string;
  leader: string | null;
  /** Can this instance reach the store now? */
  reachable: boolean;
  /** Does this instance evaluate the canaries (the leader, with a live lease)? */
  evaluating: boolean;
  /** All traffic sent to the baseline because the store was unreachable too long. */
  fail_safe: boolean;
  store_unreachable_since: string | null;
  /** Every registered instance, by instance_id, with what it serves. */
  instances: Array<InstanceInfo & { leader: boolean }>;
}

export class FleetMember {
  readonly store: FleetStore;
  private info: InstanceInfo;
  private readonly log: Pick<Log, 'info' | 'warn' | 'error'>;
  private lastInstances: InstanceInfo[] = [];
  /** Extra state (the canary sync's), merged into status(). */
  private extra: () => { evaluating: boolean; fail_safe: boolean; store_unreachable_since: string | null } = () => ({
    evaluating: this.store.isLeader(), fail_safe: false, store_unreachable_since: null,
  });

  constructor(store: FleetStore, info: InstanceInfo, log: Pick<Log, 'info' | 'warn' | 'error'>) {
    this.store = store;
    this.info = info;
    this.log = log;
  }

  get instanceId(): string {
    return this.store.instanceId;
  }

  async start(): Promise<void> {
    await this.store.start();
    await this.store.register(this.info);
    await this.store.campaign();
    this.log.info('fleet joined', { store: this.store.kind, instance_id: this.store.instanceId, leader: this.store.leader() });
  }

  /** Changes what this instance publishes (e.g. the generation it serves). */
  async update(patch: Partial<InstanceInfo>): Promise<void> {
    this.info = { ...this.info, ...patch };
    try {
      await this.store.register(this.info);
    } catch (err) {
      this.log.warn('fleet registry entry not updated (the store is unreachable); it is published again with the lease', { error: (err as Error).message });
    }
  }

  get self(): InstanceInfo {
    return this.info;
  }

  setStateSource(fn: () => { evaluating: boolean; fail_safe: boolean; store_unreachable_since: string | null }): void {
    this.extra = fn;
  }

  async instances(): Promise<InstanceInfo[]> {
    this.lastInstances = await this.store.instances();
    return this.lastInstances;
  }

  async status(): Promise<FleetStatus> {
    let list = this.lastInstances;
    const reachable = this.store.reachable();
    if (reachable) {
      try {
        list = await this.instances();
      } catch {
        // the last list read stands
      }
    }
    const leader = this.store.leader();
    const instances = [...list].sort((a, b) => a.instance_id.localeCompare(b.instance_id)).map((i) => ({ ...i, leader: i.instance_id === leader }));
    return { store: this.store.kind, instance_id: this.store.instanceId, leader, reachable: this.store.reachable(), ...this.extra(), instances };
  }

  async close(): Promise<void> {
    await this.store.close();
  }
}
