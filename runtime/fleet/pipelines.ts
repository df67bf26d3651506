// The pipeline configuration of a fleet, through the store: a published generation (`pipelines/
// config`: `pipeline`, `pipelines` and `steps`, validated as a configuration, with a generation
// number one above the last) is applied by every instance as a reload of those keys over its own
// configuration, and each instance reports in the registry the generation it serves — so a canary
// compares the same baseline on every instance. An instance whose own file is reloaded afterwards
// serves its file's pipelines again and reports generation 0 until the next publication.
import type { Log } from '../log/index.ts';
import { ConfigError, parseConfig, type ProxyConfig } from '../config/index.ts';
import { CanaryError } from '../canary/errors.ts';
import type { FleetStore } from './store.ts';
import type { FleetMember } from './member.ts';

export const PIPELINES_KEY = 'pipelines/config';
const KEYS = ['pipeline', 'pipelines', 'steps'] as const;

export interface PipelinesGeneration {
  generation: number;
  pipeline: ProxyConfig['pipeline'];
  pipelines?: ProxyConfig['pipelines'];
  steps: ProxyConfig['steps'];
  published_by: string;
  published_at: string;
}

/** What the fleet's pipelines need of the running proxy. */
export interface Reloadable {
  readonly config: ProxyConfig;
  reload(next: ProxyConfig): Promise<void>;
}

/** A store call that failed: the store cannot be reached (503), not a fault of the proxy. */
const unreachable = (err: unknown) => new CanaryError('PROXY_ERR_CANARY_STORE_UNREACHABLE', `the fleet store cannot be reached: ${(err as Error).message}`);

const same = (a: unknown, b: unknown) => JSON.stringify(a ?? null) === JSON.stringify(b ?? null);

export class FleetPipelines {
  private readonly store: FleetStore;
  private readonly member: FleetMember;
  private readonly running: Reloadable;
  private readonly log: Pick<Log, 'info' | 'warn' | 'error'>;
  /** The generation served, and what it applied (to notice a reload from the file). */
  private served: PipelinesGeneration | null = null;
  private chain: Promise<unknown> = Promise.resolve();
  private stop: (() => void) | null = null;
  private timer: NodeJS.Timeout | null = null;

  constructor(o: { store: FleetStore; member: FleetMember; running: Reloadable; log: Pick<Log, 'info' | 'warn' | 'error'> }) {
    this.store = o.store;
    this.member = o.member;
    this.running = o.running;
    this.log = o.log;
  }

  /** Applies the store's generation, if any, then follows new ones. */
  async start(): Promise<void> {
    this.stop = this.store.watch<PipelinesGeneration>(PIPELINES_KEY, (e) => {
      if (e.value !== null) void this.serial(() => this.apply(e.value!));
    });
    const cur = await this.store.get<PipelinesGeneration>(PIPELINES_KEY);
    if (cur !== null) await this.serial(() => this.apply(cur.value));
    this.timer = setInterval(() => this.checkLocal(), 1000);
    this.timer.unref();
  }

  generation(): number {
    return this.served?.generation ?? 0;
  }

  /** The generation in the store (GET /api/v1/fleet/pipelines). */
  async current(): Promise<{ generation: number; served_here: number; config: PipelinesGeneration | null }> {
    let cur;
    try {
      cur = await this.store.get<PipelinesGeneration>(PIPELINES_KEY);
    } catch (err) {
      throw unreachable(err);
    }
    return { generation: cur?.value.generation ?? 0, served_here: this.generation(), config: cur?.value ?? null };
  }

  /**
   * Publishes `body` ({ pipeline, pipelines, steps }, as in a configuration file) as the next
   * generation: validated first; 409 when another publication won the race.
   */
  async publish(body: unknown): Promise<{ generation: number }> {
    if (body === null || typeof body !== 'object' || Array.isArray(body)) throw new CanaryError('PROXY_ERR_BAD_BODY', 'expected a JSON object');
    const raw = body as Record<string, unknown>;
    for (const k of Object.keys(raw)) {
      if (!(KEYS as readonly string[]).includes(k)) throw new CanaryError('PROXY_ERR_BAD_BODY', `unknown field "${k}" (only ${KEYS.join(', ')})`);
    }
    let parsed: ProxyConfig;
    try {
      parsed = parseConfig(raw, null);
    } catch (err) {
      if (err instanceof ConfigError) throw new CanaryError('PROXY_ERR_BAD_BODY', err.message);
      throw err;
    }
    let cur;
    try {
      cur = await this.store.get<PipelinesGeneration>(PIPELINES_KEY);
    } catch (err) {
      throw unreachable(err);
    }
    const next: PipelinesGeneration = {
      generation: (cur?.value.generation ?? 0) + 1, pipeline: parsed.pipeline, steps: parsed.steps, published_by: this.store.instanceId,
      published_at: new Date().toISOString(),
    };
    if (parsed.pipelines !== undefined) next.pipelines = parsed.pipelines;
    let res;
    try {
      res = await this.store.cas(PIPELINES_KEY, next, cur?.revision ?? 0);
    } catch (err) {
      throw unreachable(err);
    }
    if (!res.ok) throw new CanaryError('PROXY_ERR_CANARY_CONFLICT', `another publication won (generation ${(cur?.value.generation ?? 0) + 1} exists)`);
    this.log.info('fleet pipeline configuration published', { generation: next.generation });
    return { generation: next.generation };
  }

  private serial<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.chain.then(fn, fn);
    this.chain = run.catch(() => undefined);
    return run;
  }

  /** This instance's configuration with the generation's pipeline keys (the default pipeline keeps its id). */
  private laid(g: PipelinesGeneration): ProxyConfig {
    const c = this.running.config;
    return { ...c, pipeline: { ...g.pipeline, id: c.pipeline.id }, pipelines: g.pipelines, steps: g.steps };
  }

  private async apply(g: PipelinesGeneration): Promise<void> {
    if (g.generation <= this.generation()) return;
    try {
      await this.running.reload(this.laid(g));
    } catch (err) {
      this.log.error('fleet pipeline configuration refused here; this instance keeps serving its previous generation',
        { generation: g.generation, served: this.generation(), error: (err as Error).message });
      return;
    }
    this.served = g;
    this.log.info('fleet pipeline configuration applied', { generation: g.generation });
    await this.member.update({ graph_generation: g.generation });
  }

  /** A reload of this instance's own file replaced the fleet's pipelines: it serves generation 0 again. */
  private checkLocal(): void {
    const g = this.served;
    if (g === null) return;
    const c = this.running.config;
    if (same(c.pipeline.request, g.pipeline.request) && same(c.pipeline.response, g.pipeline.response) && same(c.pipelines, g.pipelines) &&
      same(c.steps, g.steps)) return;
    this.served = null;
    this.log.warn('this instance\'s own configuration was reloaded over the fleet\'s pipelines: it reports generation 0', { was: g.generation });
    void this.member.update({ graph_generation: 0 });
  }

  close(): void {
    this.stop?.();
    if (this.timer !== null) clearInterval(this.timer);
  }
}
