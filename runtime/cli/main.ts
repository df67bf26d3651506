// The `proxy` command line (cac). Every command of SPEC.md §4.3 lands here as it is built.
import { readFileSync } from 'node:fs';
import cluster from 'node:cluster';
import { availableParallelism } from 'node:os';
import { cac } from 'cac';
import { CONFIG_FORMATS, ConfigError, loadConfig, parseConfig, parseHost, type ConfigFormat, type ProxyConfig } from '../config/index.ts';
import { startProxy, watchReload, type RunningProxy } from '../app/serve.ts';
import { DevDbServer, DevReplicaSet } from '../devdb/index.ts';
import { Logger, LogRing } from '../log/index.ts';
import { digitsOption, portOption, typedOption } from './argv.ts';
import { registerLogs } from './logs.ts';
import { registerBench } from './bench.ts';
import { registerCanary } from './canary.ts';
import { registerFleet } from './fleet.ts';
import { registerPlugin } from './plugin.ts';
import { registerProfile } from './profile.ts';
import { registerUser } from './user.ts';
import { VERSION } from '../version.ts';
import { Machine } from '../cluster/machine.ts';
import { runWorker } from '../cluster/worker.ts';
import { autoWorkers, shareProblem } from '../cluster/shares.ts';

const cli = cac('proxy');

cli.command('serve', 'Run the proxy (config from --config, else ./proxy.{json,yaml,yml,toml}, else defaults)')
  .option('--config <file>', 'configuration file (JSON, YAML or TOML)')
  .option('--config-format <format>', 'json | yaml | toml: how to read --config whatever its name (a pipe, --config <(…), has no extension)')
  .option('--listen <host:port>', 'address for client connections, in place of the configuration\'s listen (kept across reloads)')
  .option('--workers <n>', 'worker processes ("auto", the default: one per CPU; 1: the whole proxy in one process), in place of the configuration\'s workers')
  .action(async (opts: { config?: string; configFormat?: unknown; listen?: unknown; workers?: unknown }) => {
    // A worker forked by the primary (runtime/cluster/): it is handed its configuration.
    if (cluster.isWorker) return runWorker();
    // A SIGHUP before the reload handler is installed would end the process (the signal's default
    // action): it is held, and applied once the proxy is up. bin/proxy.mjs holds the ones that
    // come while the modules load.
    let hupWhileStarting = false;
    const holdHup = () => { hupWhileStarting = true; };
    process.on('SIGHUP', holdHup);
    if (takeStartupHup()) hupWhileStarting = true;
    let loaded;
    let workers: number;
    const format = configFormat(opts.configFormat, opts.config);
    try {
      loaded = await loadConfig({ file: opts.config, format });
      // Checked by the schema as the file's `listen` is; cac would turn a bare "27018" into a number.
      const listen = opts.listen === undefined ? undefined : typedOption('listen') ?? String(opts.listen);
      if (listen !== undefined) loaded = { ...loaded, config: { ...loaded.config, listen: parseConfig({ listen }, '--listen').listen } };
      if (opts.workers !== undefined) {
        // As typed: cac would have turned "1e0" into 1.
        const typed = typedOption('workers') ?? String(opts.workers);
        const w = /^\d+$/.test(typed) ? Number(typed) : typed;
        loaded = { ...loaded, config: { ...loaded.config, workers: parseConfig({ workers: w }, '--workers').workers } };
      }
      // "auto" (the default): one per CPU, as many as the configuration can be shared by.
      workers = loaded.config.workers === 'auto' ? autoWorkers(loaded.config, availableParallelism()) : loaded.config.workers;
      const problem = workers > 1 ? shareProblem(loaded.config, workers) : null;
      if (problem !== null) throw new ConfigError(loaded.source, [problem]);
    } catch (err) {
      if (err instanceof ConfigError) {
        process.stderr.write(`proxy: configuration refused\n${err.message}\n`);
        process.exit(2);
      }
      throw err;
    }
    const log = new Logger('proxy', loaded.config.log.level, loaded.config.log.format, undefined, new LogRing(loaded.config.log.ring_lines));
    if (loaded.source !== null) log.info('configuration loaded', { file: loaded.source });
    else log.info('no configuration file found: using defaults');
    let running;
    try {
      running = await startProxy(loaded.config, { log, configFile: loaded.source, configFormat: format,
        cluster: workers > 1 ? { role: 'primary', machine: new Machine({ workers, log: log.child('proxy::cluster'), configFile: loaded.source,
          ring: log.ring }) }
        : undefined });
      if (workers > 1) log.info('workers listening', { workers, scheduling: 'round-robin (node:cluster)' });
    } catch (err) {
      // A problem only starting can find (profiling.mmap_size_mb too small for the pipeline) is still the config's.
      if (err instanceof ConfigError) {
        process.stderr.write(`proxy: configuration refused\n${err.message}\n`);
        process.exit(2);
      }
      process.stderr.write(`proxy: could not start: ${(err as Error).message}\n`);
      process.exit(1);
    }
    if (loaded.source !== null) {
      // A reload from the file keeps --listen and --workers, so neither is reported as a changed restart-only key.
      const kept: Partial<Pick<ProxyConfig, 'listen' | 'workers'>> = {};
      if (opts.listen !== undefined) kept.listen = loaded.config.listen;
      if (opts.workers !== undefined) kept.workers = loaded.config.workers;
      const proxy = running;
      watchReload(Object.keys(kept).length === 0 ? proxy : {
        get config() { return proxy.config; },
        pipelines: proxy.pipelines,
        reload: (next) => proxy.reload({ ...next, ...kept }),
      }, loaded.source, log, { format });
    }
    process.off('SIGHUP', holdHup);
    if (hupWhileStarting && loaded.source !== null) process.emit('SIGHUP', 'SIGHUP');
    process.stdout.write(readyBanner(running));
    let stopping = false;
    const stop = (signal: string) => {
      if (stopping) return;
      stopping = true;
      log.info('shutting down', { signal });
      running.close().then(() => process.exit(0), () => process.exit(1));
    };
    process.on('SIGINT', () => stop('SIGINT'));
    process.on('SIGTERM', () => stop('SIGTERM'));
  });

/** `--config-format` checked (json, yaml or toml; only with --config): a bad one exits 2. */
function configFormat(option: unknown, file: string | undefined): ConfigFormat | undefined {
  if (option === undefined) return undefined;
  const text = typedOption('config-format') ?? String(option);
  const problem = !(CONFIG_FORMATS as readonly string[]).includes(text) ? `--config-format must be ${CONFIG_FORMATS.join(', ')}, got "${text}"`
    : file === undefined ? '--config-format goes with --config <file>' : null;
  if (problem === null) return text as ConfigFormat;
  process.stderr.write(`proxy serve: ${problem}\n`);
  process.exit(2);
}

/** Removes the SIGHUP holder bin/proxy.mjs installs for `serve`; true when a signal came while the modules loaded. */
function takeStartupHup(): boolean {
  const key = Symbol.for('pipeline-proxy.startup-hup');
  const holder = (globalThis as Record<symbol, { held: boolean; listener: () => void } | undefined>)[key];
  if (holder === undefined) return false;
  process.off('SIGHUP', holder.listener);
  delete (globalThis as Record<symbol, unknown>)[key];
  return holder.held;
}

/** What `serve` prints on stdout once every listener is open: how to connect, and each HTTP surface configured. */
function readyBanner(running: RunningProxy): string {
  const lines = [`Pipeline Proxy ${VERSION} is ready. Connect with:`, '', `  mongosh "${running.uri}"`, ''];
  const p = running.profilingUrl;
  if (p !== null) lines.push(`Dashboard: ${p}/dashboard/`, `Profiling: ${p}/api/profile   Metrics: ${p}/metrics`);
  if (running.adminUrl !== null) lines.push(`Admin API: ${running.adminUrl}   (/healthz, /readyz, /metrics, /api/v1/…; proxy logs --url ${running.adminUrl})`);
  if (running.controlPlaneUrl !== null) lines.push(`Control plane: ${running.controlPlaneUrl}   (proxy canary --url ${running.controlPlaneUrl})`);
  if (lines.length > 4) lines.push('');
  return `\n${lines.join('\n')}\n`;
}

cli.command('devdb', 'Run the embedded development upstream alone (in-memory; not a database)')
  .option('--port <port>', 'port to listen on', { default: 27017 })
  .option('--host <host>', 'address to bind', { default: '127.0.0.1' })
  .option('--user <name:password>', 'require SCRAM-SHA-256 authentication with this user (repeatable)')
  .option('--tls-cert <file>', 'listen with TLS: PEM certificate (with --tls-key)')
  .option('--tls-key <file>', 'PEM private key of --tls-cert')
  .option('--replica-set <members>', 'run as a replica set "rs0" of this many members on 127.0.0.1, ports --port, --port + 1, … (one shared ' +
    'in-memory store; not replication)')
  .action(async (opts: { port: number; host: string; user?: string | string[]; tlsCert?: string; tlsKey?: string; replicaSet?: number }) => {
    const log = new Logger('proxy::devdb', 'info', 'pretty');
    // Digits only (cac would have taken "1e3" as 1000); a port 0..65535, 0 picking a free one.
    const option = (r: { value: number | undefined } | { problem: string }): number | undefined => {
      if (!('problem' in r)) return r.value;
      process.stderr.write(`proxy devdb: ${r.problem}\n`);
      process.exit(2);
    };
    const port = option(portOption('port', opts.port, true))!;
    const members = option(digitsOption('replica-set', opts.replicaSet));
    if (members !== undefined) {
      if (opts.user !== undefined || opts.tlsCert !== undefined) {
        process.stderr.write('proxy devdb: --replica-set runs without --user and --tls-cert\n');
        process.exit(2);
      }
      let rs: DevReplicaSet;
      try {
        rs = await DevReplicaSet.start(members, 'rs0', undefined, port);
      } catch (err) {
        process.stderr.write(`proxy devdb: ${(err as Error).message}\n`);
        process.exit(2);
      }
      log.info('development replica set listening (in-memory, one shared store, not replication)', { uri: rs.uri(), primary: rs.primary!.address });
      process.stdout.write(`${rs.uri()}\n`);
      const stopRs = () => { rs.close().then(() => process.exit(0)); };
      process.on('SIGINT', stopRs);
      process.on('SIGTERM', stopRs);
      return;
    }
    const users: Record<string, string> = {};
    for (const u of opts.user === undefined ? [] : Array.isArray(opts.user) ? opts.user : [opts.user]) {
      const i = String(u).indexOf(':');
      if (i <= 0) {
        process.stderr.write(`proxy devdb: --user expects name:password, got "${u}"\n`);
        process.exit(2);
      }
      users[String(u).slice(0, i)] = String(u).slice(i + 1);
    }
    if ((opts.tlsCert === undefined) !== (opts.tlsKey === undefined)) {
      process.stderr.write('proxy devdb: --tls-cert and --tls-key go together\n');
      process.exit(2);
    }
    let tls: { cert: Buffer; key: Buffer } | undefined;
    try {
      tls = opts.tlsCert === undefined ? undefined : { cert: readFileSync(opts.tlsCert), key: readFileSync(opts.tlsKey!) };
    } catch (err) {
      process.stderr.write(`proxy devdb: ${(err as Error).message}\n`);
      process.exit(2);
    }
    const host = parseHost(String(opts.host));
    if (typeof host !== 'string') {
      process.stderr.write(`proxy devdb: --host ${host.problem}\n`);
      process.exit(2);
    }
    const server = new DevDbServer(undefined, { users, tls });
    const a = await server.listen(port, host);
    log.info('development upstream listening (in-memory, no durability, not a database)', { uri: a.uri });
    process.stdout.write(`${a.uri}\n`);
    const stop = () => { server.close().then(() => process.exit(0)); };
    process.on('SIGINT', stop);
    process.on('SIGTERM', stop);
  });

registerBench(cli);
registerPlugin(cli);
registerProfile(cli);
registerCanary(cli);
registerFleet(cli);
registerLogs(cli);
registerUser(cli);

cli.help();
cli.version(VERSION);

try {
  cli.parse(process.argv, { run: false });
  if (!cli.matchedCommand && cli.args.length === 0 && !cli.options.help && !cli.options.version) {
    cli.outputHelp();
  } else if (!cli.matchedCommand && cli.args.length > 0) {
    process.stderr.write(`proxy: unknown command "${cli.args[0]}" (see proxy --help)\n`);
    process.exit(2);
  } else {
    await cli.runMatchedCommand();
  }
} catch (err) {
  // cac's own errors are bad usage (an unknown option, a missing argument): exit 2. Anything else
  // that reaches here failed at run time (an answer of an unexpected shape, say): exit 1.
  process.stderr.write(`proxy: ${(err as Error).message}\n`);
  process.exit((err as Error).name === 'CACError' ? 2 : 1);
}
