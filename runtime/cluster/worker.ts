// A worker process of a proxy with several workers (runtime/cluster/machine.ts forks it): runs the
// client-facing part of the proxy — listener (shared through node:cluster), pipelines, upstream
// pools — with the configuration the primary hands it, and answers the primary's requests
// (statistics, reload, reset, drain, and the canary's changes: ipc/canary-worker.ts), and sends a
// copy of its log lines to the primary's ring (ipc/log-forward.ts). It owns no
// HTTP endpoint, snapshot or canary controller: the primary does. When the primary goes away (its
// IPC channel closes, even on kill -9), the worker exits.
import { startProxy, type RunningProxy } from '../app/serve.ts';
import { workerView } from '../app/http-views.ts';
import { ConfigError, type ProxyConfig } from '../config/index.ts';
import type { PipelineConfig } from '../pipeline/index.ts';
import { Logger } from '../log/index.ts';
import { FRAME_WINDOW_MS } from '../profiling/frames.ts';
import { askPrimary, sendEvent, serveRequests } from '../ipc/worker-channel.ts';
import { WorkerLogForwarder } from '../ipc/log-forward.ts';
import type { CanaryState } from '../ipc/canary-graphs.ts';
import { workerPins } from './pins.ts';
import {
  WORKER_CONFIG_ENV, WORKER_CONFIG_FILE_ENV, WORKER_AUTH_SECRET_ENV, WORKER_GENERATIONS_ENV, WORKER_INDEX_ENV, type WorkerGeneration, type WorkerStats,
} from './machine.ts';

async function stats(running: RunningProxy): Promise<WorkerStats> {
  const p = running.profiler;
  const metrics = await running.metrics.getMetricsAsJSON();
  return { state: p?.exportState() ?? null, frames: p?.recentFrames(FRAME_WINDOW_MS) ?? [], metrics };
}

export async function runWorker(): Promise<void> {
  const index = Number(process.env[WORKER_INDEX_ENV]);
  const config = JSON.parse(process.env[WORKER_CONFIG_ENV]!) as ProxyConfig;
  const configFile = process.env[WORKER_CONFIG_FILE_ENV] || null;
  const generations = JSON.parse(process.env[WORKER_GENERATIONS_ENV] ?? '{}') as Record<string, number>;
  // The primary's secret; not left in the environment that plugins and child processes see.
  const secretHex = process.env[WORKER_AUTH_SECRET_ENV] ?? '';
  delete process.env[WORKER_AUTH_SECRET_ENV];
  const authSecret = secretHex.length === 64 ? Buffer.from(secretHex, 'hex') : undefined;
  // Every line says which worker wrote it. No ring: a copy of each line goes to the primary's, which `proxy logs` reads.
  const forwarder = config.log.ring_lines > 0 ? new WorkerLogForwarder() : null;
  const log = new Logger('proxy', config.log.level, config.log.format, undefined, forwarder, undefined, { worker: index });
  let draining = false;
  // The primary's end closed: it exited or was killed. No orphan keeps the port's clients.
  process.on('disconnect', () => process.exit(draining ? 0 : 1));
  // A terminal's Ctrl-C reaches every process of the group: the primary drains the workers.
  process.on('SIGINT', () => {});
  process.on('SIGTERM', () => {});
  process.on('SIGHUP', () => {});
  // A reload's graphs are built: the primary is told, and its word (every process built them, or
  // one could not) publishes them or drops them.
  const decisions = new Map<number, (go: boolean) => void>();
  let gate: (() => Promise<void>) | null = null;
  /** The baselines the primary chose for the reload under way (a promoted canary's). */
  let baselines: PipelineConfig[] | null = null;
  const reloadGate = () => (gate === null ? Promise.resolve() : gate());
  let running: RunningProxy;
  try {
    running = await startProxy(config, { log, configFile, cluster: { role: 'worker', index, pins: workerPins, generations, authSecret, reloadGate,
      reloadBaselines: () => baselines, canaryState: () => askPrimary<CanaryState>('canary-state', null, 10_000) } });
  } catch (err) {
    const e = err as Error;
    sendEvent('failed', { message: err instanceof ConfigError ? `configuration refused\n${e.message}` : e.message });
    process.exit(1);
  }
  serveRequests({
    ...running.workerCanary?.handlers.handlers(),
    // The primary's heartbeat: answered from this process's event loop, so a hung worker does not answer.
    ping: () => null,
    stats: () => stats(running),
    reset: () => { running.profiler?.reset(); },
    info: () => workerView(running, index),
    reload: async (body) => {
      const { id, config: next, baselines: chosen } = body as { id: number; config: ProxyConfig; baselines?: PipelineConfig[] };
      baselines = chosen !== undefined && chosen.length > 0 ? chosen : null;
      gate = () => new Promise<void>((resolve, reject) => {
        decisions.set(id, (go) => (go ? resolve() : reject(new Error('another process could not apply this reload; no process applied it'))));
        sendEvent('reload-prepared', { id });
      });
      try {
        await running.reload(next);
      } finally {
        gate = null;
        baselines = null;
        decisions.delete(id);
      }
      return { worker: index, generations: workerView(running, index).generations } satisfies WorkerGeneration;
    },
    'reload-decide': (body) => {
      const { id, go } = body as { id: number; go: boolean };
      decisions.get(id)?.(go);
      return null;
    },
    drain: async () => {
      draining = true;
      await running.close();
      forwarder?.flush(); // the drain's last lines reach the primary's ring before its answer
      return stats(running);
    },
  });
  sendEvent('ready', { host: running.host, port: running.port, pid: process.pid, canaryChanges: running.workerCanary?.changes ?? undefined });
}
