// The primary of a proxy with several workers (`workers` > 1): forks the worker processes
// (node:cluster: the primary accepts client connections and hands them to the workers in turn),
// replaces one that dies, and makes one view of the machine out of theirs. The statistics are
// pulled from the workers when something reads them (a scrape, a profile, a snapshot) and every
// few seconds: their profilers' encoded HDR histograms are add()ed into the primary's profiler,
// their prom-client counters summed. A worker that exits leaves its last counts in a retired total,
// so the machine's counts never go back. The workers' log lines reach the primary's ring
// (ipc/log-forward.ts). Nothing here is on a request's path.
import cluster, { type Worker } from 'node:cluster';
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';
import { AggregatorRegistry, Counter, Gauge, Registry, type MetricObjectWithValues, type MetricValue } from 'prom-client';
import type { ProxyConfig } from '../config/index.ts';
import type { PipelineConfig } from '../pipeline/index.ts';
import type { Log, LogRing } from '../log/index.ts';
import { WorkerLogReceiver, type LogBatch } from '../ipc/log-forward.ts';
import { Profiler, type RequestFrame } from '../profiling/index.ts';
import type { MetricsSource, WorkerView, WorkersView } from '../http/surface.ts';
import { WorkerChannel } from '../ipc/worker-channel.ts';
import type { CanaryState, ClusterCanaryGraphs } from '../ipc/canary-graphs.ts';
import { PinTable } from './pins.ts';
import { pipelineShare, workerConfig } from './shares.ts';
import { promOptions } from '../metrics/index.ts';

/** What a worker answers to `stats`: its profiler's state and recent frames, and its registry's metrics. */
export interface WorkerStats {
  state: unknown;
  frames: RequestFrame[];
  metrics: Array<MetricObjectWithValues<MetricValue<string>>>;
}

/** What a worker answers to `reload`: the graph generation each pipeline serves now. */
export interface WorkerGeneration { worker: number; generations: Record<string, number> }

/** The environment variables a worker reads (runtime/cluster/worker.ts). */
export const WORKER_CONFIG_ENV = 'PROXY_WORKER_CONFIG';
export const WORKER_INDEX_ENV = 'PROXY_WORKER_INDEX';
export const WORKER_CONFIG_FILE_ENV = 'PROXY_WORKER_CONFIG_FILE';
export const WORKER_GENERATIONS_ENV = 'PROXY_WORKER_GENERATIONS';
/** The cursor seals' secret (hex), one per primary (auth.secret_file's, or random): a getMore sealed by one worker opens on any other. */
export const WORKER_AUTH_SECRET_ENV = 'PROXY_WORKER_AUTH_SECRET';

/** The `proxy` command a worker runs (its `serve` sees it is a cluster worker). */
const BIN = fileURLToPath(new URL('../../bin/proxy.mjs', import.meta.url));
/**
 * The young generation a worker's V8 keeps at least (MiB per semi-space). About 100 s after a busy
 * worker starts, V8's memory reducer runs a full collection and shrinks the young generation; a
 * proxy's per-request garbage all dies young, so V8 never grows it back, and from then on scavenges
 * run about eight times as often (each frees ~1.6 MB instead of ~13 MB): 0.7–0.9 µs more GC per
 * request at 5,000 requests per second (bench/RESULTS.md).
 * A floor of 16 MiB, the size a busy worker's young generation had before the shrink, keeps it as
 * it was. Not added when the proxy was started with a semi-space option of its own: workers
 * inherit the primary's node options.
 */
const WORKER_MIN_SEMI_SPACE_MB = 16;

/** The node options a worker runs with: the primary's, and the young generation's floor unless they set its size. */
export function workerExecArgv(own: readonly string[]): string[] {
  return own.some((a) => a.includes('semi-space-size')) ? [...own] : [...own, `--min-semi-space-size=${WORKER_MIN_SEMI_SPACE_MB}`];
}

/** How long a worker has to answer a statistics request. */
const STATS_TIMEOUT_MS = 5000;
/** How long a worker has to apply a reload (compiling plugins). */
const RELOAD_TIMEOUT_MS = 120_000;
/** How long a worker has to start (compile its plugins, connect its pools). */
const START_TIMEOUT_MS = 120_000;
/** Statistics are pulled this often even when nothing reads them: a killed worker loses at most this much. */
export const PULL_INTERVAL_MS = 5000;
/** A replaced worker is forked again after this long the first time; each quick failure after that doubles it. */
export const RESTART_DELAY_MS = 500;
/** The longest wait before a worker is forked again. */
export const RESTART_DELAY_MAX_MS = 30_000;
/** A worker that served this long ends a crash loop: the next replacement waits RESTART_DELAY_MS again. */
export const RESTART_STABLE_MS = 60_000;

/**
 * How long to wait before forking worker slot again, after `streak` quick failures in a row (a
 * worker that exited within RESTART_STABLE_MS of being ready, or one that could not start): 0.5 s,
 * 1 s, 2 s, … up to 30 s. A worker that crashes at every start does not spin the machine.
 */
export function restartDelayMs(streak: number): number {
  return Math.min(RESTART_DELAY_MAX_MS, RESTART_DELAY_MS * 2 ** Math.min(streak, 16));
}

export interface MachineOptions {
  workers: number;
  log: Log;
  configFile: string | null;
  /** The primary's recent-lines ring (`proxy logs`): the workers' lines are put in it too; null: none kept. */
  ring?: LogRing | null;
}

export class Machine {
  readonly size: number;
  /** The primary's secret of client authentication (auth.secret_file's, or random) every worker (a replaced one too) gets: hex, for the environment. */
  private authSecret = '';
  private readonly log: Log;
  private readonly configFile: string | null;
  private readonly channels: Array<WorkerChannel | null>;
  /** The last statistics each live worker gave (moved to the retired total when it exits). */
  private readonly last = new Map<WorkerChannel, WorkerStats>();
  private retiredStates: unknown[] = [];
  private retiredCounters: Array<Array<MetricObjectWithValues<MetricValue<string>>>> = [];
  private profiler: Profiler | null = null;
  /** The configuration workers start with (a replaced one too): the latest applied. */
  private workerConfig: ProxyConfig | null = null;
  /** Reloads committed so far: a worker forked before the last one started with what it replaced. */
  private configVersion = 0;
  /** Workers that became ready with a configuration or canary state older than the machine's: ended and started again, not counted as replaced. */
  private readonly outdated = new WeakSet<WorkerChannel>();
  private generations: () => Record<string, number> = () => ({});
  private pulling: Promise<void> | null = null;
  /** The reload between prepare() and commit() or abort(). */
  private pending: { id: number; live: WorkerChannel[]; answers: Array<Promise<WorkerGeneration>>; config: ProxyConfig } | null = null;
  private reloadId = 0;
  private resetting: Promise<void> = Promise.resolve();
  private timer: NodeJS.Timeout | null = null;
  private stopping = false;
  /** Every worker's cursor and transaction pins (a getMore or a transaction's next statement may land on another worker). */
  readonly pins = new PinTable();
  /** Workers replaced since start (crashed or killed). */
  replaced = 0;
  /** Of those, workers the heartbeat ended: they had not answered a ping within worker_heartbeat.timeout_ms. */
  unresponsive = 0;
  /** Replacement workers that failed to start (each is tried again after restartDelayMs). */
  startFailures = 0;
  /** The primary's own series (the workers' restarts, the notifier's), read at scrape time and added to the workers' sum in /metrics. */
  readonly own = new Registry();
  /** Per worker slot: quick failures in a row (restartDelayMs), and when its current worker became ready (performance.now()). */
  private readonly streaks: number[];
  private readonly readyAt: number[];
  /** Per live worker: when it last answered a ping (or became ready), and whether a ping is out. */
  private readonly heard = new Map<WorkerChannel, { at: number; asking: boolean }>();
  /** Workers the heartbeat ended (their exit is logged as such). */
  private readonly silenced = new WeakSet<WorkerChannel>();
  private heartbeat: NodeJS.Timeout | null = null;
  private lastBeat = 0;
  /** The canary's graphs across the workers, when there is a control plane: a worker starting replays them. */
  private canary: ClusterCanaryGraphs | null = null;
  /** The workers' log lines into the primary's ring (null: no ring). */
  private readonly logs: WorkerLogReceiver | null;

  constructor(opts: MachineOptions) {
    this.size = opts.workers;
    this.log = opts.log;
    this.logs = opts.ring == null || opts.ring.capacity === 0 ? null : new WorkerLogReceiver(opts.ring, opts.log);
    this.configFile = opts.configFile;
    this.channels = Array.from({ length: opts.workers }, () => null);
    this.streaks = Array.from({ length: opts.workers }, () => 0);
    this.readyAt = Array.from({ length: opts.workers }, () => 0);
    this.registerOwnMetrics();
  }

  /** The primary's series: how the workers themselves fare (a worker's registry cannot count its own end). */
  private registerOwnMetrics(): void {
    const machine = this;
    new Counter({
      ...promOptions('proxy_worker_restarts_total'), registers: [this.own],
      collect() {
        this.reset();
        this.inc({ reason: 'exited' }, machine.replaced - machine.unresponsive);
        this.inc({ reason: 'unresponsive' }, machine.unresponsive);
      },
    });
    new Counter({
      ...promOptions('proxy_worker_start_failures_total'), registers: [this.own],
      collect() {
        this.reset();
        this.inc(machine.startFailures);
      },
    });
    new Gauge({
      ...promOptions('proxy_workers'), registers: [this.own],
      collect() { this.set(machine.live.length); },
    });
  }

  /** The /metrics of the machine: every worker's registry summed (counters of exited workers kept). */
  readonly metrics: MetricsSource = {
    contentType: 'text/plain; version=0.0.4; charset=utf-8',
    text: async (worker?: number) => {
      await this.refresh();
      if (worker !== undefined) {
        const one = [...this.last].filter(([c]) => c.index === worker).map(([, s]) => s.metrics);
        return one.length === 0 ? '' : AggregatorRegistry.aggregate(one).metrics();
      }
      const all = [...this.retiredCounters, ...[...this.last.values()].map((s) => s.metrics)];
      const own = await this.own.metrics();
      return all.length === 0 ? own : `${await AggregatorRegistry.aggregate(all).metrics()}\n${own}`;
    },
  };

  /** A graph configuration of this process's as a worker builds it: the built-in rate_limit's limit as a worker's share. */
  share(config: PipelineConfig): PipelineConfig {
    return pipelineShare(config, this.size);
  }

  /** The canary's graphs (runtime/ipc/canary-graphs.ts): every worker started from now on asks for their state before it listens. */
  attachCanary(graphs: ClusterCanaryGraphs): void {
    this.canary = graphs;
  }

  /** Every worker's registry summed (counters of exited workers kept), as a registry: the canary's custom metrics read it. */
  async registry(): Promise<Registry> {
    await this.refresh();
    return AggregatorRegistry.aggregate([...this.retiredCounters, ...[...this.last.values()].map((s) => s.metrics)]);
  }

  /** The live workers' channels, by index. */
  get live(): WorkerChannel[] {
    return this.channels.filter((c): c is WorkerChannel => c !== null && c.worker.isConnected());
  }

  /**
   * Forks every worker with `config` (its upstream already resolved: the primary's devdb, if any)
   * and waits until each listens. Rejects with the first worker's error (and stops the others).
   */
  async listen(config: ProxyConfig, profiler: Profiler | null, generations: () => Record<string, number>, authSecret: Buffer): Promise<{ host: string;
    port: number }> {
    this.workerConfig = config;
    this.authSecret = authSecret.toString('hex');
    this.generations = generations;
    this.profiler = profiler;
    // What the primary's profiler holds already (restored from profiling.snapshot_dir) stays in the
    // machine's counts, as a worker that exited would.
    if (profiler !== null && [...profiler.allGraphs()].length > 0) this.retiredStates.push(profiler.exportState());
    profiler?.onReset(() => { this.resetting = this.resetWorkers(); });
    // Round-robin (the primary accepts, workers take turns); set before the first setupPrimary().
    cluster.schedulingPolicy = cluster.SCHED_RR;
    cluster.setupPrimary({ exec: BIN, args: ['serve'], execArgv: workerExecArgv(process.execArgv), serialization: 'advanced', silent: false });
    let bound: { host: string; port: number };
    try {
      const ports = await Promise.all(this.channels.map((_, i) => this.fork(i)));
      bound = ports[0];
    } catch (err) {
      await this.stop(0);
      throw err;
    }
    this.timer = setInterval(() => { this.refresh().catch(() => {}); }, PULL_INTERVAL_MS);
    this.timer.unref();
    const { interval_ms: intervalMs, timeout_ms: timeoutMs } = config.worker_heartbeat;
    if (timeoutMs > 0) {
      // Silence counts from the first ping: a worker ready long before the last one was is not judged on that wait.
      this.lastBeat = performance.now();
      for (const h of this.heard.values()) h.at = this.lastBeat;
      this.heartbeat = setInterval(() => this.beat(intervalMs, timeoutMs), intervalMs);
      this.heartbeat.unref();
    }
    return bound;
  }

  /**
   * Starts worker `index`; resolves with the address it listens on once it is ready. A worker that
   * becomes ready after a reload or a canary change it did not see (its start takes seconds: it
   * compiles its plugins, and only ready workers take part in either) is not put to serving: it is
   * drained and started again with what the machine serves now (`startAgain`).
   */
  private fork(index: number): Promise<{ host: string; port: number }> {
    const version = this.configVersion;
    const worker: Worker = cluster.fork({
      [WORKER_CONFIG_ENV]: JSON.stringify(workerConfig(this.workerConfig!, this.size, index)), [WORKER_INDEX_ENV]: String(index),
      [WORKER_CONFIG_FILE_ENV]: this.configFile ?? '', [WORKER_GENERATIONS_ENV]: JSON.stringify(this.generations()),
      [WORKER_AUTH_SECRET_ENV]: this.authSecret,
    });
    const channel = new WorkerChannel(index, worker);
    channel.on('pin', (b) => { const p = b as { key: string; server: string }; this.pins.publish(p.key, p.server); });
    channel.on('unpin', (b) => this.pins.unpublish((b as { key: string }).key));
    const logs = this.logs;
    if (logs !== null) channel.on('logs', (b) => logs.accept(index, b as LogBatch));
    channel.handle('pin', (key) => this.pins.lookup(key as string));
    channel.handle('canary-state', async () => this.canary?.state() ?? ({ baselines: [], canaries: [], changes: 0 } satisfies CanaryState));
    return new Promise((resolve, reject) => {
      let ready = false;
      const timer = setTimeout(() => {
        reject(new Error(`worker ${index} did not start within ${START_TIMEOUT_MS} ms`));
        worker.kill('SIGKILL');
      }, START_TIMEOUT_MS);
      channel.on('failed', (body) => {
        clearTimeout(timer);
        reject(new Error((body as { message: string }).message));
      });
      channel.on('ready', (body) => {
        clearTimeout(timer);
        ready = true;
        // A reload committed since it was forked, or a canary change sent between the state it
        // replayed and now, did not reach it: it would serve other graphs than the rest.
        const changes = (body as { canaryChanges?: number }).canaryChanges;
        const missed = version !== this.configVersion ? 'a reload' : this.canary !== null && changes !== undefined && changes !== this.canary.changes
          ? 'a canary change' : null;
        if (missed !== null && !this.stopping) this.startAgain(channel, missed);
        else {
          this.channels[index] = channel;
          this.readyAt[index] = performance.now();
          this.heard.set(channel, { at: performance.now(), asking: false });
        }
        resolve(body as { host: string; port: number });
      });
      worker.once('exit', (code, signal) => {
        clearTimeout(timer);
        if (!ready) {
          reject(new Error(`worker ${index} exited while starting (${signal ?? `code ${code}`})`));
          return;
        }
        this.exited(channel, code, signal);
      });
    });
  }

  /**
   * A worker that started while `missed` was applied to the others: it never joins the live workers
   * (no reload, canary change or statistics request reaches it). The connections node:cluster
   * handed it since it listened are drained as at a shutdown; it exits, and `exited` forks it again.
   */
  private startAgain(channel: WorkerChannel, missed: string): void {
    this.outdated.add(channel);
    this.log.info(`a worker started while ${missed} was applied; draining it and starting it again`, { worker: channel.index });
    const drainMs = this.workerConfig!.shutdown.drain_timeout_ms;
    channel.request<WorkerStats>('drain', null, drainMs + 10_000).then((s) => { this.last.set(channel, s); }, () => {
      channel.worker.kill('SIGKILL');
    }).finally(() => {
      if (channel.worker.isConnected()) channel.worker.disconnect();
    });
  }

  /**
   * The heartbeat (every worker_heartbeat.interval_ms): pings each ready worker that has no ping
   * out, and ends one that has answered none for `timeoutMs`. A hung worker (stopped, or stuck in
   * a loop) never leaves by itself and would keep its clients and its turn at new connections;
   * ended, it is replaced like any worker that exits.
   */
  private beat(intervalMs: number, timeoutMs: number): void {
    if (this.stopping) return;
    const now = performance.now();
    // This process itself was held up (a long synchronous task, the machine suspended): answers that
    // came meanwhile wait unread behind this timer, so no worker is judged on that time.
    const late = now - this.lastBeat > 2 * intervalMs;
    this.lastBeat = now;
    for (const c of this.live) {
      const h = this.heard.get(c);
      if (h === undefined || this.silenced.has(c)) continue;
      if (late) h.at = Math.max(h.at, now - intervalMs);
      if (now - h.at >= timeoutMs) {
        this.silenced.add(c);
        this.unresponsive++;
        this.log.warn('worker unresponsive; ending it (SIGKILL) and starting a replacement', {
          worker: c.index, pid: c.worker.process.pid, silent_ms: Math.round(now - h.at), timeout_ms: timeoutMs,
        });
        c.worker.process.kill('SIGKILL');
        continue;
      }
      if (h.asking) continue;
      h.asking = true;
      c.request('ping', null, timeoutMs).then(() => { h.at = performance.now(); }, () => {}).finally(() => { h.asking = false; });
    }
  }

  /** A worker ended: its last counts join the retired total; unless the proxy is stopping, it is replaced (after restartDelayMs). */
  private exited(channel: WorkerChannel, code: number | null, signal: string | null): void {
    this.retire(channel);
    this.heard.delete(channel);
    const index = channel.index;
    if (this.channels[index] === channel) this.channels[index] = null;
    if (this.stopping) return;
    const restart = (after: number) => setTimeout(() => {
      if (this.stopping) return;
      this.fork(index).then(
        () => this.log.info('worker replaced', { worker: index }),
        (err: Error) => {
          this.startFailures++;
          const delay = restartDelayMs(++this.streaks[index]);
          this.log.error('a replacement worker failed to start; trying again', { worker: index, error: err.message, restart_in_ms: delay });
          restart(delay);
        },
      );
    }, after).unref();
    // Ended on purpose, having started: forked again at once, with what the machine serves now.
    if (this.outdated.has(channel)) {
      restart(0);
      return;
    }
    this.replaced++;
    // A worker that served a while ends a crash loop; one that exited soon after it was ready continues it.
    if (performance.now() - this.readyAt[index] >= RESTART_STABLE_MS) this.streaks[index] = 0;
    const fields = { worker: index, pid: channel.worker.process.pid, code, signal, restart_in_ms: restartDelayMs(this.streaks[index]) };
    if (this.silenced.has(channel)) this.log.warn('unresponsive worker ended; starting a replacement', fields);
    else this.log.warn('worker exited; starting a replacement (its clients reconnect to the others or to it)', fields);
    restart(restartDelayMs(this.streaks[index]++));
  }

  private retire(channel: WorkerChannel): void {
    const s = this.last.get(channel);
    if (s === undefined) return;
    this.last.delete(channel);
    if (s.state !== null) this.retiredStates.push(s.state);
    // Counters keep counting after the worker is gone; its gauges (open connections, pools) do not.
    this.retiredCounters.push(s.metrics.filter((m) => String(m.type) === 'counter'));
  }

  /**
   * Brings the machine's view up to date: asks every live worker for its statistics (concurrent
   * callers share one round) and rebuilds the primary's profiler from them and the retired total.
   * A worker that does not answer in time keeps the statistics it gave last.
   */
  refresh(): Promise<void> {
    this.pulling ??= this.pull().finally(() => { this.pulling = null; });
    return this.pulling;
  }

  private async pull(): Promise<void> {
    await this.resetting;
    const live = this.live;
    const answers = await Promise.allSettled(live.map((c) => c.request<WorkerStats>('stats', null, STATS_TIMEOUT_MS)));
    answers.forEach((a, i) => {
      if (a.status === 'fulfilled' && live[i].worker.isConnected()) this.last.set(live[i], a.value);
    });
    if (this.profiler === null) return;
    const stats = [...this.last.values()];
    const frames = stats.flatMap((s) => s.frames).sort((a, b) => a.at - b.at);
    this.profiler.replaceWith([...this.retiredStates, ...stats.map((s) => s.state).filter((s) => s !== null)], frames);
  }

  /** Worker `index`'s statistics alone, as of the last refresh (?worker=<i>); null when no such worker runs or there is no profiler. */
  async workerProfiler(index: number): Promise<Profiler | null> {
    if (this.profiler === null) return null;
    const s = [...this.last].find(([c]) => c.index === index && c.worker.isConnected())?.[1];
    if (s === undefined) return null;
    const one = await Profiler.create(this.profiler.settings, this.profiler.log);
    one.replaceWith(s.state === null ? [] : [s.state], s.frames);
    return one;
  }

  /** POST /api/profile/reset on the primary: every worker resets, and the retired total is dropped. */
  private async resetWorkers(): Promise<void> {
    this.retiredStates = [];
    this.retiredCounters = [];
    this.last.clear();
    await Promise.allSettled(this.live.map((c) => c.request('reset', null, STATS_TIMEOUT_MS)));
  }

  /**
   * Phase one of a reload (the primary has checked `next` and built its own graphs): every worker
   * builds its graphs and reports it has, without publishing them. When one cannot, every worker
   * drops what it built and this throws that worker's reason: no process publishes anything.
   */
  async prepare(next: ProxyConfig, baselines: PipelineConfig[] = []): Promise<void> {
    const config = { ...next, upstream: { ...next.upstream, uri: this.workerConfig!.upstream.uri } };
    const id = ++this.reloadId;
    const live = this.live;
    const ready = live.map((c) => new Promise<void>((resolve) => c.on('reload-prepared', (b) => { if ((b as { id: number }).id === id) resolve(); })));
    // The baselines the primary chose were built from the whole proxy's settings: each worker gets its share of them too.
    const shared = baselines.map((b) => this.share(b));
    const answers = live.map((c) => c.request<WorkerGeneration>('reload', { id, config: workerConfig(config, this.size, c.index), baselines: shared },
      RELOAD_TIMEOUT_MS));
    // Each worker: built (null), or failed (its error) — a request that settles first failed or was cut.
    const outcomes = await Promise.all(live.map((_, i) => Promise.race([ready[i].then(() => null),
      answers[i].then(() => new Error('answered before the decision'), (e: Error) => e)])));
    this.pending = { id, live, answers, config };
    const failed = outcomes.find((e) => e !== null);
    if (failed !== undefined) {
      await this.abort();
      throw failed;
    }
  }

  /** Phase two: every worker publishes what prepare() built; resolves with the generation each serves. */
  async commit(): Promise<WorkerGeneration[]> {
    const p = this.pending;
    if (p === null) return [];
    this.pending = null;
    this.workerConfig = p.config;
    this.configVersion++;
    await Promise.allSettled(p.live.map((c) => c.request('reload-decide', { id: p.id, go: true }, STATS_TIMEOUT_MS)));
    const settled = await Promise.allSettled(p.answers);
    const out: WorkerGeneration[] = [];
    settled.forEach((s, i) => {
      if (s.status === 'fulfilled') {
        out.push(s.value);
        return;
      }
      // Publishing cannot refuse; a worker that did not (it died, it timed out) is replaced, and its
      // replacement starts with the new configuration.
      this.log.error('a worker did not publish the reload; replacing it', { worker: p.live[i].index, error: (s.reason as Error).message });
      p.live[i].worker.kill('SIGKILL');
    });
    return out;
  }

  /** The reload prepare() began is refused (by a worker, or by the primary afterwards): every worker drops what it built. */
  async abort(): Promise<void> {
    const p = this.pending;
    if (p === null) return;
    this.pending = null;
    await Promise.allSettled(p.live.map((c) => c.request('reload-decide', { id: p.id, go: false }, STATS_TIMEOUT_MS)));
    await Promise.allSettled(p.answers);
  }

  /** GET /api/v1/workers: each live worker's view (one that does not answer in time is left out). */
  async workers(): Promise<WorkersView> {
    const live = this.live;
    const answers = await Promise.allSettled(live.map((c) => c.request<WorkerView>('info', null, STATS_TIMEOUT_MS)));
    const workers = answers.filter((a) => a.status === 'fulfilled').map((a) => (a as PromiseFulfilledResult<WorkerView>).value);
    return { workers: workers.sort((a, b) => a.worker - b.worker), replaced: this.replaced, unresponsive: this.unresponsive,
      start_failures: this.startFailures, pin_lookups: { found: this.pins.found, missed: this.pins.missed } };
  }

  /** SIGTERM: every worker drains (the server's drain rules) and hands in its last statistics; then they exit. */
  async stop(drainMs: number): Promise<void> {
    this.stopping = true;
    if (this.timer !== null) clearInterval(this.timer);
    if (this.heartbeat !== null) clearInterval(this.heartbeat);
    const live = this.live;
    const exits = live.map((c) => new Promise<void>((r) => {
      if (c.worker.isDead()) r();
      else c.worker.once('exit', () => r());
    }));
    const settled = await Promise.allSettled(live.map((c) => c.request<WorkerStats>('drain', null, drainMs + 10_000)));
    settled.forEach((s, i) => {
      if (s.status === 'fulfilled') this.last.set(live[i], s.value);
      else this.log.warn('a worker did not drain in time; ending it', { worker: live[i].index, error: (s.reason as Error).message });
      if (live[i].worker.isConnected()) live[i].worker.disconnect();
      if (s.status === 'rejected') live[i].worker.kill('SIGKILL');
    });
    await Promise.all(exits);
    for (const c of live) this.retire(c);
    if (this.profiler !== null) {
      this.profiler.replaceWith(this.retiredStates, []);
    }
  }
}
