// Assembles a running proxy from a configuration: logger, development upstream (when no
// upstream.uri), upstream pool, client listener. Used by `proxy serve` and by tests.
import { ConfigError, parseConfig, pipelineEntries, canaryDurationMs, formatHostPort, hostPort, restartKeys, type ConfigFormat,
  type ProxyConfig } from '../config/index.ts';
import { Logger, LogRing } from '../log/index.ts';
import { DevDbServer } from '../devdb/index.ts';
import { Topology, UpstreamPool, parseUpstreamUri, resolveUpstreamUri, type SharedPins, type UpstreamAddress } from '../upstream/index.ts';
import { ProxyServer, type ClientAuthSettings } from '../server/index.ts';
import { listenerTlsOptions } from '../server/listener-tls.ts';
import { configuredAuthSecret } from '../server/client-auth.ts';
import { initCompression } from '../wire/index.ts';
import { PipelineManager, type Pipeline, type PipelineConfig } from '../pipeline/index.ts';
import { loadPipelines, pipelineConfigs, removedPipelines, routingOf } from './pipelines.ts';
import { fileURLToPath } from 'node:url';
import { resolve } from 'node:path';
import { HttpSurfaces, registerHttpMetrics } from './http-surfaces.ts';
import { registerProxyMetrics } from './proxy-metrics.ts';
import { Registry } from 'prom-client';
import type { WorkerChannel } from '../ipc/worker-channel.ts';
import { ClusterCanaryGraphs, type CanaryState } from '../ipc/canary-graphs.ts';
import { WorkerCanary } from '../ipc/canary-worker.ts';
import { WasmHost } from '../wasm/index.ts';
export { watchReload, type WatchReloadOptions } from './reload-watch.ts';
import { CanaryController, CanaryStore, LogEventSink, PipelineCanaryGraphs, Promotions, defaultsFromConfig, registerShadowMetrics, type BaselineChoice,
  type CanaryGraphs, type CanaryEventSink, type CanaryDefaults, type Clock } from '../canary/index.ts';
import { ProfilerCanaryMetrics } from './canary-metrics.ts';
import { Notifier, outboxPath, registerNotificationMetrics } from '../canary/notify/index.ts';
import { Profiler, SnapshotStore, durationToMs, mmapFitIssue, type MmapStorage, type ProfilingSettings } from '../profiling/index.ts';
import { Tracing, TracingRecorder, tracesUrl, type TracingSettings } from '../telemetry/index.ts';
import { stepClock } from '../step-clock.ts';
import type { MetricsSource, WorkersView } from '../http/surface.ts';
import { controlPlaneTokens } from './http-surfaces.ts';
import { controlPlaneFleet, fleetConfigIssues, instanceIdOf, instanceInfo, openFleet, type FleetParts } from './fleet.ts';
import { FleetMember } from '../fleet/member.ts';
import { FleetPipelines } from '../fleet/pipelines.ts';

/** Built-in plugins are compiled here by `npm run build` (scripts/build-plugins.mjs). */
export const BUILTIN_PLUGIN_DIR = fileURLToPath(new URL('../../build/plugins/', import.meta.url));

export interface RunningProxy {
  readonly config: ProxyConfig;
  /** The profiler when `profiling` is configured (enabled or not), else null. */
  readonly profiler: Profiler | null;
  /** Base URL of the profiling endpoint, or null when `profiling` is not configured. */
  readonly profilingUrl: string | null;
  /** The recent log lines (`proxy logs`, GET /api/v1/logs on the admin port); null when the logger keeps none. */
  readonly logRing: LogRing | null;
  /** Trace export when `telemetry.otlp_endpoint` is set, else null. */
  readonly tracing: Tracing | null;
  /** Snapshots (the time series; persisted too with `profiling.snapshot_dir`) when there is a `profiling` block, else null. */
  readonly snapshots: SnapshotStore | null;
  readonly server: ProxyServer;
  readonly pool: UpstreamPool;
  readonly devdb: DevDbServer | null;
  readonly host: string;
  readonly port: number;
  /** The connection string clients should use. */
  readonly uri: string;
  readonly pipelines: PipelineManager;
  /** The proxy's one metrics registry (the metric table's metrics and plugins' `proxy_plugin_*`): what every /metrics serves. */
  readonly metrics: Registry;
  /** Base URL of the admin HTTP API, or null when admin.listen is not set. */
  readonly adminUrl: string | null;
  /** The canary controller when `control_plane` is configured, else null. */
  readonly canary: CanaryController | null;
  /** In a worker with a control plane: its part of the primary's canaries, and the primary's change count it replayed. */
  readonly workerCanary: { handlers: WorkerCanary; changes: number | null } | null;
  /** Base URL of the canary control plane, or null when `control_plane` is not configured. */
  readonly controlPlaneUrl: string | null;
  /**
   * Applies a new configuration's pipeline and steps: compiled and configured off the hot path,
   * then swapped atomically; in-flight requests finish on the old graph. Throws (and keeps the old
   * graph) when the schema or a plugin refuses it. Keys that need a restart are reported, not applied.
   * `source` is what `next` came from, named in a refusal's message (such as "request body" for the
   * admin API's body); absent, the configuration file.
   */
  reload(next: ProxyConfig, source?: string | null): Promise<void>;
  /** Whether close() (SIGTERM, SIGINT) has begun: readiness (/readyz) reports not ready from then on. */
  readonly draining: boolean;
  close(): Promise<void>;
}

/**
 * The primary's hold on its workers (runtime/cluster/machine.ts satisfies it): forks them in place
 * of listening, merges their statistics into the primary's profiler and metrics, applies a reload
 * on each, drains them.
 */
export interface MachineView {
  /** How many workers serve clients (a fleet member registers it). */
  readonly size: number;
  /** `generations`: the graph generation each pipeline of the primary serves now (a worker started later continues from it). */
  listen(workerConfig: ProxyConfig, profiler: Profiler | null, generations: () => Record<string, number>, authSecret: Buffer): Promise<{ host: string;
    port: number }>;
  refresh(): Promise<void>;
  readonly metrics: MetricsSource;
  /** The primary's own series, added to the workers' sum in `metrics` (the notifier's: the primary sends the notifications). */
  readonly own: Registry;
  /** Has every worker build `next`'s graphs without publishing them; throws (and has them drop what they built) when one cannot. */
  prepare(next: ProxyConfig, baselines?: PipelineConfig[]): Promise<void>;
  /** Has every worker publish what prepare() built; resolves once all serve it. */
  commit(): Promise<unknown>;
  /** Has every worker drop what prepare() built (the primary refused the reload after all). */
  abort(): Promise<void>;
  stop(drainMs: number): Promise<void>;
  workers(): Promise<WorkersView>;
  workerProfiler(index: number): Promise<Profiler | null>;
  /** The live workers (the canary fans out to them). */
  readonly live: WorkerChannel[];
  /** A worker starting asks `graphs` for the canaries before it listens. */
  attachCanary(graphs: ClusterCanaryGraphs): void;
  /** Every worker's metrics summed, as a registry (the canary's custom metrics). */
  registry(): Promise<Registry>;
  /** A graph configuration of this process's as a worker builds it (the proxy-wide rate limit as a worker's share). */
  share(config: PipelineConfig): PipelineConfig;
}

export interface StartOptions {
  log?: Logger;
  pluginDir?: string;
  /** The file the configuration came from (the admin reload re-reads it). */
  configFile?: string | null;
  /** Its format when its name does not say it (serve --config-format); absent: by the extension. */
  configFormat?: ConfigFormat;
  /** Where canary events go (the notification channels); default: logged. */
  canarySink?: CanaryEventSink;
  /** The canary controller's clock (tests). */
  canaryClock?: Clock;
  /**
   * Several workers (`workers` > 1, runtime/cluster/): this process's part. The primary opens the
   * HTTP endpoints, keeps snapshots and the merged profiler, and has `machine` fork the workers in
   * place of listening itself; a worker serves clients and opens nothing else. Absent: the whole
   * proxy in this process, whatever `workers` says.
   */
  cluster?: { role: 'primary'; machine: MachineView } | { role: 'worker'; index: number; pins?: SharedPins; generations?: Record<string, number>;
    /** The primary's secret of client authentication (decoy salts, cursor seals): every worker answers and seals alike. */
    authSecret?: Buffer;
    /** A reload's graphs are built: waits for the primary's word to publish them (throws: drop them). */
    reloadGate?: () => Promise<void>;
    /** During a reload: the baselines the primary chose (null: the file's). */
    reloadBaselines?: () => PipelineConfig[] | null;
    /** With a control plane: asks the primary for the canaries to serve (before listening). */
    canaryState?: () => Promise<CanaryState> };
}

export function splitListen(listen: string): { host: string; port: number } {
  return hostPort(listen);
}

export async function startProxy(config: ProxyConfig, opts: StartOptions = {}): Promise<RunningProxy> {
  const machine = opts.cluster?.role === 'primary' ? opts.cluster.machine : null;
  const worker = opts.cluster?.role === 'worker';
  const log = opts.log ?? new Logger('proxy', config.log.level, config.log.format, undefined, new LogRing(config.log.ring_lines));
  const fleetIssues = fleetConfigIssues(config);
  if (fleetIssues.length > 0) throw new ConfigError(opts.configFile ?? null, fleetIssues);
  // The secret of client authentication's keys, once per process tree: auth.secret_file's (a file
  // that cannot be used stops startup here, before anything opens), else a random one; a worker's
  // is the primary's.
  const authSecret = opts.cluster?.role === 'worker' && opts.cluster.authSecret !== undefined ? opts.cluster.authSecret
    : configuredAuthSecret(config.auth, opts.configFile ?? null);
  await initCompression();
  // First, before anything opens: a mongodb+srv:// name that does not resolve stops startup.
  const upstreamLog = log.child('proxy::upstream');
  const configured: UpstreamAddress | null = config.upstream.uri === undefined ? null : await resolveUpstreamUri(config.upstream.uri, {
    dnsServers: config.upstream.dns_servers, rescanIntervalMs: config.upstream.srv_rescan_interval_ms, log: upstreamLog,
  });
  const pipelineLog = log.child('proxy::pipeline');
  // The canary decides on the profiler's per-graph figures: with a control plane and no `profiling`
  // block, a profiler with the default settings records them (no profiling endpoint is opened).
  const profilerConfig = config.profiling ?? (config.control_plane === undefined ? undefined
    : parseConfig({ profiling: { enabled: true, alert_on_slow_step: false } }, null).profiling);
  const profiler = profilerConfig === undefined ? null
    : await Profiler.create(profilingSettings(profilerConfig), log.child('proxy::profiling'), worker ? null : mmapStorage(config, opts.configFile ?? null));
  // Restored before the pipeline binds its steps, so rows keep the order they had.
  // Snapshots (the time series) whenever there is a profiling block: in memory, or also on disk
  // with snapshot_dir (then statistics survive a restart).
  const snapshots = profiler === null || config.profiling === undefined || worker ? null : new SnapshotStore(profiler, {
    dir: config.profiling.snapshot_dir === undefined ? null : resolve(config.profiling.snapshot_dir), intervalMs: config.profiling.snapshot_interval_s * 1000,
    retentionMs: durationToMs(config.profiling.snapshot_retention), log: log.child('proxy::profiling'),
    beforeSnapshot: machine === null ? undefined : () => machine.refresh(),
  });
  await snapshots?.load();
  const tracing = config.telemetry?.otlp_endpoint === undefined ? null : new Tracing(tracingSettings(config.telemetry), log.child('proxy::telemetry'));
  // With tracing, graphs are timed for sampled requests only (TracingRecorder), or for all while profiling is on.
  const recorder = tracing !== null ? new TracingRecorder(profiler) : profiler ?? undefined;
  // One registry for every metric of this proxy: the plugin host's (plugin metrics, step errors),
  // the notifier's and the proxy's own (registerProxyMetrics, once the server exists).
  const metrics = new Registry();
  const pipelines = new PipelineManager({
    host: new WasmHost(metrics), logger: pipelineLog, pluginDir: opts.pluginDir ?? BUILTIN_PLUGIN_DIR, recorder,
  });
  // A worker serves the generation the machine serves (at start, or in place of one that exited).
  if (opts.cluster?.role === 'worker' && opts.cluster.generations !== undefined) pipelines.continueGenerations(opts.cluster.generations);
  // A worker with a control plane asks the primary what it serves before building anything: each
  // pipeline's baseline (a promoted canary's graph in place of the file's steps, canary/promotions.ts)
  // and the active splits. The baselines are built as its first graphs, so each is numbered with the
  // generation the primary gave the graph it serves, and logged as what it is.
  let canaryState: CanaryState | null = null;
  const baselineOf = (c: PipelineConfig) => canaryState?.baselines.find((b) => b.pipeline.id === c.pipeline.id) ?? c;
  // Load the pipeline before opening any port: a refused plugin config stops startup.
  try {
    if (opts.cluster?.role === 'worker' && config.control_plane !== undefined && opts.cluster.canaryState !== undefined) {
      canaryState = await opts.cluster.canaryState();
    }
    for (const g of await loadPipelines(pipelines, config, baselineOf)) {
      pipelineLog.info('pipeline loaded', { pipeline: g.id, graph: g.key.toString(), request: g.requestSteps.map((s) => s.id),
        response: g.responseSteps.map((s) => s.id) });
    }
  } catch (err) {
    configured?.hosts.close();
    throw err;
  }
  let current = config;
  let canary: CanaryController | null = null;
  let canaryGraphs: PipelineCanaryGraphs | null = null;
  /** The controller's graphs: this process's, or with workers the cluster's (whose totals are every worker's, merged). */
  let controllerGraphs: CanaryGraphs | null = null;
  let canaryMetrics: ProfilerCanaryMetrics | null = null;
  let canaryStore: CanaryStore | null = null;
  let promotions: Promotions | null = null;
  let notifier: Notifier | null = null;
  let fleet: FleetParts | null = null;
  const fleetToken = () => controlPlaneTokens(current)[0] ?? null;
  // With workers, the canary's graphs are the workers': the primary's controller fans out to them
  // (ipc/canary-graphs.ts), each worker applies its word (ipc/canary-worker.ts).
  let workerCanary: WorkerCanary | null = null;
  if (config.control_plane !== undefined && opts.cluster?.role === 'worker') {
    canaryGraphs = new PipelineCanaryGraphs(pipelines, pipelineConfigs(config).map(baselineOf));
    workerCanary = new WorkerCanary(canaryGraphs, pipelines);
    // A shadow canary runs here: its metrics are this worker's, summed into the machine's /metrics.
    registerShadowMetrics(metrics, canaryGraphs.shadowStats);
  }
  if (config.control_plane !== undefined && profiler !== null && !worker) {
    const canaryLog = log.child('proxy::canary');
    if (opts.canarySink === undefined) {
      // The outbox is opened (and undelivered messages resumed) before the controller resumes.
      notifier = new Notifier({ settings: config.notifications, defaultOutboxPath: resolve(outboxPath(config)), log: log.child('proxy::canary::notify') });
      // Read at scrape time by every /metrics, like plugin metrics; with workers, the machine's
      // /metrics is their sum and the primary's own series, and the notifier runs here.
      registerNotificationMetrics(machine?.own ?? metrics, notifier);
    }
    canaryStore = new CanaryStore(resolve(config.canary.data_dir), config.canary.max_samples, { log: canaryLog });
    // A completed canary's graph stays its pipeline's baseline across restarts (canary/promotions.ts).
    promotions = new Promotions(canaryStore, canaryLog);
    const baselines = [];
    for (const c of pipelineConfigs(config)) baselines.push(await promotions.start(c, (x) => pipelines.load(x)));
    canaryGraphs = new PipelineCanaryGraphs(pipelines, baselines);
    registerShadowMetrics(metrics, canaryGraphs.shadowStats);
    const sink = opts.canarySink ?? notifier ?? new LogEventSink((m, f) => canaryLog.info(m, f));
    // fleet.store: etcd: the records, the events and the evaluation go through the fleet (docs/fleet.md).
    fleet = await openFleet(config, canaryStore, { log: log.child('proxy::fleet'), sink, instanceId: instanceIdOf(config), token: fleetToken });
    const graphs = machine === null ? canaryGraphs : new ClusterCanaryGraphs(canaryGraphs, machine, canaryLog);
    controllerGraphs = graphs;
    if (graphs instanceof ClusterCanaryGraphs) machine!.attachCanary(graphs);
    canaryMetrics = new ProfilerCanaryMetrics(profiler, machine === null ? metrics : () => machine.registry());
    canary = new CanaryController({
      store: fleet.sync ?? canaryStore, graphs, metrics: canaryMetrics,
      sink: fleet.sync?.sink ?? sink, defaults: () => fleetDefaults(defaultsFromConfig(current), fleet),
      clock: opts.canaryClock, warningShare: config.canary.warning_share, gracePeriodMs: canaryDurationMs(config.canary.baseline_grace_period),
      log: canaryLog, promotions, fleet: fleet.sync,
    });
    // Active canaries resume before clients connect: each candidate is rebuilt, then split again
    // (in a fleet: every canary of the store is loaded and split as the store says).
    if (fleet.sync !== null) await fleet.sync.attach(canary);
    else await canary.resume();
  }
  let devdb: DevDbServer | null = null;
  let upstreamUri = config.upstream.uri;
  if (upstreamUri === undefined) {
    devdb = new DevDbServer();
    const d = await devdb.listen(config.devdb.port);
    upstreamUri = d.uri;
    log.info('no upstream.uri configured: started the embedded development upstream (in-memory, not a database)', { upstream: d.uri });
  }
  const address = configured ?? parseUpstreamUri(upstreamUri);
  if (config.upstream.dns_servers !== undefined && config.upstream.uri?.startsWith('mongodb+srv://') !== true) {
    log.warn('upstream.dns_servers is used for mongodb+srv:// upstreams only; ignored', { dns_servers: config.upstream.dns_servers });
  }
  if (config.upstream.uri?.startsWith('mongodb+srv://') === true) {
    log.info('upstream hosts from DNS SRV records, re-resolved periodically', {
      uri: config.upstream.uri, hosts: address.hosts.current().map((h) => formatHostPort(h.host, h.port)),
      rescan_interval_ms: config.upstream.srv_rescan_interval_ms, tls: address.tls !== null,
    });
  }
  if (address.credentials !== null) {
    log.info('upstream connections authenticate', { user: address.credentials.username, mechanism: address.credentials.mechanism,
      authSource: address.credentials.source });
  }
  const poolOptions = {
    poolSize: config.upstream.pool_size,
    minIdle: config.upstream.min_idle,
    maxIdleTimeMs: config.upstream.max_idle_time_ms,
    connectTimeoutMs: config.upstream.connect_timeout_ms,
    waitQueueTimeoutMs: config.upstream.wait_queue_timeout_ms,
  };
  // Several hosts or replicaSet=: the proxy monitors the topology and selects a server per request
  // (a pool each); one host: that server's pool.
  let topology: Topology | null = null;
  let pool: UpstreamPool;
  if (address.hosts.current().length > 1 || address.replicaSet !== null) {
    topology = new Topology(address, poolOptions, {
      heartbeatMs: config.upstream.heartbeat_ms,
      localThresholdMs: config.upstream.local_threshold_ms,
      serverSelectionTimeoutMs: config.upstream.server_selection_timeout_ms,
    }, upstreamLog);
    await topology.start(config.upstream.connect_timeout_ms);
    pool = topology.seedPool;
  } else {
    pool = new UpstreamPool(address, poolOptions, upstreamLog);
    await pool.start();
  }
  const { host, port } = splitListen(config.listen);
  const listenerTls = config.tls === undefined ? null : listenerTlsOptions(config.tls, opts.configFile ?? null);
  const server = new ProxyServer({
    tls: listenerTls,
    host, port, pool, compression: config.compression, zlibLevel: config.zlib_level,
    requestTimeoutMs: config.upstream.request_timeout_ms, log: log.child('proxy::server'),
    pipelines, pipelineId: config.pipeline.id, routing: routingOf(pipelines, config), poolOptions,
    clientLimits: {
      maxPendingReplyBytes: config.clients.max_pending_reply_bytes, maxQueuedRequests: config.clients.max_queued_requests,
      maxQueuedRequestBytes: config.clients.max_queued_request_bytes,
      maxConnections: config.clients.max_connections,
    },
    profiler, tracing, topology, clientAuth: clientAuthSettings(config.auth),
    authSecret,
  });
  if (opts.cluster?.role === 'worker') server.router.sharedPins = opts.cluster.pins ?? null;
  registerProxyMetrics(metrics, server);
  if (config.auth !== undefined) log.info('clients authenticate', { mode: config.auth.mode, users: config.auth.users.length });
  // With workers, they listen (node:cluster shares the port); they reach the primary's devdb, if any.
  // A worker serves the canaries the primary holds from its first client on (a replacement too).
  let canaryChanges: number | null = null;
  if (workerCanary !== null && canaryState !== null) {
    await workerCanary.replay(canaryState.canaries);
    canaryChanges = canaryState.changes;
  }
  const bound = machine === null ? await server.listen()
    : await machine.listen({ ...config, upstream: { ...config.upstream, uri: upstreamUri } }, profiler, () => {
      const out: Record<string, number> = {};
      for (const id of server.routing.ids) out[id] = pipelines.get(id).key.generation;
      return out;
    }, authSecret);
  const uri = `mongodb://${formatHostPort(bound.host, bound.port)}/${listenerTls === null ? '' : '?tls=true'}`;
  log.info('proxy listening', { listen: formatHostPort(bound.host, bound.port), upstream: topology?.describe() ?? pool.describe(), connect: uri });
  let closing = false;
  // One reload at a time (SIGHUP, a file change and the admin API may ask together): each is
  // compared with, and applied over, the configuration the previous one left.
  let reloading: Promise<void> = Promise.resolve();
  /** With workers (`beforePublish`): runs once the new graphs are built, before any is published; a throw refuses the reload. */
  const applyReload = async (next: ProxyConfig, source: string | null, gate?: (baselines: PipelineConfig[]) => Promise<void>) => {
    // Restart-only keys are in effect as the proxy started: those that differ from that are named
    // (after a reload that changed one, a reload that puts it back no longer warns).
    const restartOnly = restartKeys(config, next);
    // Everything that can refuse the configuration runs before anything is applied.
    // auth.secret_file takes a restart, but a file that restart could not use (gone, too open, too
    // short) refuses the reload now rather than stopping the next start.
    if (!worker && next.auth?.secret_file !== undefined) configuredAuthSecret(next.auth, source);
    // Renewed certificates apply to new connections (open ones keep theirs).
    const nextTls = next.tls === undefined || !server.tls ? null : listenerTlsOptions(next.tls, source);
    if (profiler?.file != null) {
      const issue = mmapFitIssue(pipelineEntries(next), config.profiling!.mmap_size_mb);
      if (issue !== null) throw new ConfigError(source, [issue]);
    }
    // A listener whose address changes is bound now, next to the old one; one that cannot be bound
    // refuses the reload. The old ones close once the rest has applied.
    const moved = worker ? NO_MOVE : await surfaces.move(current, next, source);
    // Thresholds, filters and `enabled` apply now; graphs are rebuilt below, timed or untimed
    // accordingly. Adding or removing the block is a restart: the profiler keeps its settings.
    const before = profiler?.settings;
    if (profiler !== null && next.profiling !== undefined && current.profiling !== undefined) profiler.configure(profilingSettings(next.profiling));
    // pipeline.id needs a restart: the default pipeline keeps the id it started with.
    const applied: ProxyConfig = { ...next, pipeline: { ...next.pipeline, id: config.pipeline.id } };
    const removed = removedPipelines({ ...current, pipeline: { ...current.pipeline, id: config.pipeline.id } }, applied);
    let loaded: Pipeline[];
    const chosen: BaselineChoice[] = [];
    const fromPrimary = opts.cluster?.role === 'worker' ? opts.cluster.reloadBaselines?.() ?? null : null;
    try {
      // A pipeline the reload removes must have no canary under way (roll it back first).
      const busy = canary === null ? [] : (canary.list('all').canaries as Array<{ canary_id: string; pipeline_id: string; status: string }>)
        .filter((c) => removed.includes(c.pipeline_id) && (c.status === 'active' || c.status === 'paused'));
      if (busy.length > 0) {
        throw new ConfigError(source, busy.map((c) => ({ path: 'pipelines', message: `removes pipeline "${c.pipeline_id}", which ` +
          `canary ${c.canary_id} is ${c.status} on; roll the canary back (or let it finish) first` })));
      }
      // A promotion outranks the file's steps until the file changes them (settled below).
      const beforePublish = gate === undefined ? undefined : () => gate(chosen.map((x) => x.config));
      loaded = await loadPipelines(pipelines, applied, (c) => {
        if (fromPrimary !== null) return fromPrimary.find((b) => b.pipeline.id === c.pipeline.id) ?? c;
        if (promotions === null) return c;
        const choice = promotions.choose(c);
        chosen.push(choice);
        return choice.config;
      }, beforePublish);
    } catch (err) {
      if (profiler !== null && before !== undefined) profiler.configure(before);
      await moved.abort();
      throw err;
    }
    for (const c of chosen.length > 0 ? chosen.map((x) => x.config) : pipelineConfigs(applied)) {
      canaryGraphs?.setBaselineConfig(fromPrimary?.find((b) => b.pipeline.id === c.pipeline.id) ?? c);
    }
    for (const x of chosen) promotions!.settle(x, 'reload');
    // Connections settle their pipeline again at their next request; removed pipelines' graphs go
    // once no connection routes to them (requests under way finish on the graph they hold).
    server.setRouting(routingOf(pipelines, applied));
    for (const id of removed) {
      pipelines.remove(id);
      canaryGraphs?.removePipeline(id);
    }
    for (const g of loaded) pipelineLog.info('pipeline loaded', { pipeline: g.id, graph: g.key.toString(), request: g.requestSteps.map((s) => s.id),
      response: g.responseSteps.map((s) => s.id) });
    notifier?.configure(next.notifications);
    if (tracing !== null && next.telemetry !== undefined) tracing.setSampleRate(next.telemetry.sample_rate);
    if (nextTls !== null) server.setTls(nextTls);
    if (JSON.stringify(next.auth) !== JSON.stringify(current.auth)) server.setClientAuth(clientAuthSettings(next.auth));
    // Rotated tokens: refused or accepted from the next request on, on every HTTP surface.
    surfaces.setTokens(next);
    surfaces.setConnectionCaps(next);
    moved.commit();
    if (restartOnly.length > 0) log.warn('configuration reloaded; these keys take effect only after a restart',
      { keys: restartOnly, request: next.pipeline.request, response: next.pipeline.response });
    else log.info('configuration reloaded', { request: next.pipeline.request, response: next.pipeline.response });
    current = next;
  };
  // The HTTP listeners and their tokens; made once `running` exists (the apps are given it).
  let surfaces: HttpSurfaces;
  const running: RunningProxy = {
    get config() { return current; },
    get adminUrl() { return surfaces.admin?.url ?? null; },
    get profilingUrl() { return surfaces.profiling?.url ?? null; },
    get controlPlaneUrl() { return surfaces.controlPlane?.url ?? null; },
    canary,
    workerCanary: workerCanary === null ? null : { handlers: workerCanary, changes: canaryChanges },
    profiler, snapshots, tracing, logRing: log.ring,
    server, pool, devdb, host: bound.host, port: bound.port, uri, pipelines, metrics,
    reload(next: ProxyConfig, source?: string | null) {
      // With workers, two phases: the primary checks everything and builds its graphs; then every
      // worker builds its own (machine.prepare); only when all have, all publish (machine.commit),
      // and the reload is answered once every worker serves it. A refusal anywhere publishes none.
      // A worker's own reload waits at the same point for the primary's word (cluster.reloadGate).
      // The workers build the baselines the primary chose (a promoted canary's graph outranks the file's).
      const gate = machine !== null ? (baselines: PipelineConfig[]) => machine.prepare(next, baselines)
        : opts.cluster?.role === 'worker' ? opts.cluster.reloadGate : undefined;
      const from = source === undefined ? opts.configFile ?? null : source;
      const run = reloading.then(() => applyReload(next, from, gate)).then(async () => { await machine?.commit(); }, async (err: unknown) => {
        await machine?.abort();
        throw err;
      });
      reloading = run.catch(() => undefined);
      return run;
    },
    get draining() { return closing; },
    async close() {
      closing = true;
      // A reload under way finishes (or is refused) first, for at most the drain timeout: one
      // waiting on a worker that does not answer (stopped, hung) does not hold the shutdown for the
      // reload's own two minutes. The drain below then ends that worker, which refuses the reload.
      await settledWithin(reloading, current.shutdown.drain_timeout_ms);
      // The admin port closes after the drain: /readyz answers 503 (draining) meanwhile.
      if (surfaces.profiling !== null) await surfaces.profiling.app.close();
      if (surfaces.controlPlane !== null) await surfaces.controlPlane.app.close();
      fleet?.sync?.close();
      fleetPipelines?.close();
      if (canary !== null) await canary.close();
      // Leaving the fleet revokes the lease: the registry entry goes, and another instance leads at once.
      await member?.close();
      if (notifier !== null) await notifier.close(); // after the controller: its last events are in the outbox
      // With workers, they drain (each by the server's rules) and hand in their last statistics.
      if (machine !== null) await machine.stop(current.shutdown.drain_timeout_ms);
      await server.close(machine === null ? current.shutdown.drain_timeout_ms : 0);
      profiler?.flushSlowStepLog(); // after the drain: held-back slow-step lines are reported, not lost
      address.hosts.close();
      if (surfaces.admin !== null) await surfaces.admin.app.close();
      await surfaces.retired();
      if (snapshots !== null) await snapshots.close(); // after the drain: the last snapshot has every request
      profiler?.file?.release(); // the histogram file's lock: a proxy started next (in this process too) may take it
      if (tracing !== null) await tracing.close(); // after the drain: the last requests' spans are exported
      if (devdb !== null) await devdb.close();
      canaryStore?.close();
    },
  };
  let member: FleetMember | null = null;
  let fleetPipelines: FleetPipelines | null = null;
  surfaces = new HttpSurfaces(config, { running, profiler, snapshots, canary, configFile: opts.configFile ?? null, configFormat: opts.configFormat, log,
    fleet: () => (member === null ? null : controlPlaneFleet(member, fleet?.sync ?? null, canary!, controllerGraphs!, fleetToken,
      config.fleet.evidence_timeout_ms, fleetPipelines, canaryMetrics!)), machine });
  if (worker) return running; // the primary opens the HTTP endpoints
  registerHttpMetrics(machine?.own ?? metrics, surfaces);
  if (tracing !== null) {
    const t = tracing.settings;
    log.info('trace export on', { url: t.url, protocol: t.protocol, sample_rate: t.sampleRate, service_name: t.serviceName });
  }
  if (profiler !== null && config.profiling !== undefined) {
    const p = config.profiling;
    surfaces.profiling = await surfaces.openProfiling(p);
    log.info(p.enabled ? 'profiling endpoint listening' : 'profiling endpoint listening; profiling is disabled (profiling.enabled: false)',
      stepClock.reason === '' ? { url: surfaces.profiling.url, step_clock: stepClock.source }
      : { url: surfaces.profiling.url, step_clock: stepClock.source, step_clock_reason: stepClock.reason });
    if (stepClock.warning !== '') log.warn(stepClock.warning, { step_clock: stepClock.source });
    if (snapshots !== null) {
      snapshots.start();
      if (snapshots.dir !== null) log.info('profiling snapshots persisted',
        { dir: snapshots.dir, interval_s: p.snapshot_interval_s, retention: p.snapshot_retention });
      else log.info('profiling snapshots kept in memory (statistics reset on restart; set profiling.snapshot_dir to persist them)',
        { interval_s: p.snapshot_interval_s, retention: p.snapshot_retention });
    }
  }
  if (canary !== null && config.control_plane !== undefined) {
    const info = instanceInfo(config, fleet!.store.instanceId, formatHostPort(bound.host, bound.port), null, machine?.size ?? 1);
    member = new FleetMember(fleet!.store, info, log.child('proxy::fleet'));
    const sync = fleet!.sync;
    if (sync !== null) {
      member.setStateSource(() => sync.state());
      fleetPipelines = new FleetPipelines({ store: fleet!.store, member, running, log: log.child('proxy::fleet') });
    }
    surfaces.controlPlane = await surfaces.openControlPlane(config.control_plane);
    await member.update({ control_url: config.fleet.advertise_url ?? surfaces.controlPlane.url });
    await member.start();
    // The fleet's pipeline configuration, if one was published, replaces the file's pipelines here.
    await fleetPipelines?.start();
    log.info('canary control plane listening', { url: surfaces.controlPlane.url, store: canaryStore!.path, fleet_store: fleet!.store.kind,
      instance_id: fleet!.store.instanceId });
  }
  if (config.admin?.listen !== undefined && config.admin.token !== undefined) {
    surfaces.admin = await surfaces.openAdmin(config.admin.listen);
    log.info('admin API listening', { url: surfaces.admin.url });
  }
  return running;
}

/** A reload in a worker moves no listener: the primary owns them. */
const NO_MOVE = { commit() {}, async abort() {} };
/** In a fleet, this instance's verified copies of content-addressed modules may load as well. */
function fleetDefaults(d: CanaryDefaults, fleet: FleetParts | null): CanaryDefaults {
  return fleet?.sync == null ? d : { ...d, plugin_dirs: [...d.plugin_dirs, fleet.sync.artifacts.cacheDir] };
}

/** Where the histogram file goes with `profiling.storage: "mmap"` (null otherwise); a ConfigError when the pipeline does not fit. */
function mmapStorage(config: ProxyConfig, source: string | null): MmapStorage | null {
  const p = config.profiling;
  if (p === undefined || p.storage !== 'mmap' || p.mmap_path === undefined) return null;
  const issue = mmapFitIssue(pipelineEntries(config), p.mmap_size_mb);
  if (issue !== null) throw new ConfigError(source, [issue]);
  return { path: resolve(p.mmap_path), sizeMb: p.mmap_size_mb, defaultPipelineId: config.pipeline.id };
}

/** The profiler's settings from the `profiling` configuration block. */
export function profilingSettings(p: NonNullable<ProxyConfig['profiling']>): ProfilingSettings {
  return {
    enabled: p.enabled,
    slowStepThresholdUs: p.slow_step_threshold_us,
    alertOnSlowStep: p.alert_on_slow_step,
    perStepThresholds: p.per_step_thresholds,
    histogramBuckets: p.histogram_buckets,
    filters: {
      operations: p.filters.operations ?? null,
      collections: p.filters.collections ?? null,
      minUpstreamLatencyUs: p.filters.min_upstream_latency_us,
    },
    frameCapacity: p.flamegraph_frames,
  };
}

/** Client authentication from the `auth` block (base64 decoded); null when it is absent. */
export function clientAuthSettings(a: ProxyConfig['auth']): ClientAuthSettings | null {
  if (a === undefined) return null;
  return {
    required: a.mode === 'required',
    users: a.users.map((u) => ({
      name: u.name, db: u.db, iterations: u.iterations,
      salt: Buffer.from(u.salt, 'base64'), storedKey: Buffer.from(u.stored_key, 'base64'), serverKey: Buffer.from(u.server_key, 'base64'),
    })),
  };
}

/** Tracing settings from the `telemetry` block (otlp_endpoint set). */
export function tracingSettings(t: NonNullable<ProxyConfig['telemetry']>): TracingSettings {
  return {
    url: tracesUrl(t.otlp_endpoint!),
    protocol: t.protocol,
    serviceName: t.service_name,
    sampleRate: t.sample_rate,
    resourceAttributes: t.resource_attributes,
    maxQueueSpans: t.max_queue_spans,
    maxBatchSpans: t.max_batch_spans,
    exportIntervalMs: t.export_interval_ms,
    exportTimeoutMs: t.export_timeout_ms,
  };
}

/** Waits for `p` to settle, or `ms` at most (whichever comes first); never rejects. */
async function settledWithin(p: Promise<unknown>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([p.then(() => undefined, () => undefined), new Promise<void>((r) => { timer = setTimeout(r, ms); })]);
  clearTimeout(timer);
}
