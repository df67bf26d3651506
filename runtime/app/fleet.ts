// The fleet around one proxy instance (docs/fleet.md): builds the store `fleet` names (the embedded
// SQLite one, or etcd), the member (registry, election, GET /api/v1/fleet), and — with etcd — the
// canary sync that makes the controller's records the fleet's; then gives the control plane what it
// needs (status, evidence, fleet-wide writes, the candidate check of every instance).
import { hostname } from 'node:os';
import { join, resolve } from 'node:path';
import { CanaryError, type CanaryController, type CanaryEventSink, type CanaryGraphs, type CanaryMetricsSource, type CanaryStore } from '../canary/index.ts';
import { canaryDurationMs, hostPort, type ProxyConfig } from '../config/index.ts';
import { readRegularFileSync } from '../fs/index.ts';
import type { Log } from '../log/index.ts';
import type { ControlPlaneFleet } from '../http/canary.ts';
import { VERSION } from '../version.ts';
import { EtcdFleetStore } from '../fleet/etcd.ts';
import { LocalFleetStore } from '../fleet/local.ts';
import { FleetMember } from '../fleet/member.ts';
import { FleetCanaries } from '../fleet/canary-sync.ts';
import type { FleetPipelines } from '../fleet/pipelines.ts';
import { FleetArtifacts, namedModules } from '../fleet/artifacts.ts';
import { FleetEvidence, encodeArm, httpEvidenceReader, type EvidencePayload } from '../fleet/evidence.ts';
import type { FleetStore, InstanceInfo } from '../fleet/store.ts';
import { readCustom } from '../fleet/custom-evidence.ts';
import { encodeShadow } from '../fleet/shadow-evidence.ts';

export interface FleetParts {
  store: FleetStore;
  /** With etcd: the controller's records, sink and hooks; null with the embedded store. */
  sync: FleetCanaries | null;
}

/** What `fleet` needs that its schema alone cannot say (named by key path). */
export function fleetConfigIssues(config: ProxyConfig): Array<{ path: string; message: string }> {
  const f = config.fleet;
  if (f.store !== 'etcd') return [];
  const out: Array<{ path: string; message: string }> = [];
  if (f.endpoints.length === 0) out.push({ path: 'fleet.endpoints', message: 'required with fleet.store: etcd (e.g. ["http://127.0.0.1:2379"])' });
  if (config.control_plane === undefined) out.push({ path: 'fleet.store', message: 'etcd needs a control_plane block (the fleet\'s canaries, ' +
    'registry and evidence go through it)' });
  // The TLS files are read when the store opens: one that cannot be read is named by its key here, before anything opens.
  for (const key of ['ca_file', 'cert_file', 'key_file'] as const) {
    const path = f.tls?.[key];
    if (path === undefined) continue;
    try {
      readRegularFileSync(path);
    } catch (err) {
      out.push({ path: `fleet.tls.${key}`, message: `cannot read ${path}: ${(err as Error).message}` });
    }
  }
  return out;
}

/** Opens the store (etcd: grants the lease; refuses to start when etcd cannot be reached). */
export async function openFleet(config: ProxyConfig, canaryStore: CanaryStore, o: { log: Log; sink: CanaryEventSink; instanceId: string;
  token: () => string | null; }): Promise<FleetParts> {
  const f = config.fleet;
  if (f.store === 'sqlite') return { store: new LocalFleetStore(canaryStore, o.instanceId), sync: null };
  const password = f.password_env !== undefined ? process.env[f.password_env] ?? '' : f.password ?? '';
  const store = new EtcdFleetStore({
    endpoints: f.endpoints, prefix: f.prefix, instanceId: o.instanceId, leaseTtlSeconds: f.lease_ttl_s, log: o.log,
    tls: f.tls === undefined ? null : { ca: f.tls.ca_file, cert: f.tls.cert_file ?? null, key: f.tls.key_file ?? null },
    auth: f.username === undefined ? null : { username: f.username, password },
  });
  try {
    await store.start();
  } catch (err) {
    await store.close().catch(() => {});
    throw new Error(`fleet.endpoints: etcd at ${f.endpoints.join(', ')} cannot be reached: ${(err as Error).message}`, { cause: err });
  }
  const evidence = new FleetEvidence({
    instances: () => store.instances(), read: httpEvidenceReader(o.token, f.evidence_timeout_ms), quorumPct: f.evidence_quorum_pct,
  });
  const artifacts = new FleetArtifacts({ store, cacheDir: join(resolve(config.canary.data_dir), 'artifacts'), sharedDir: f.artifact_dir ?? null,
    maxBytes: f.artifact_max_bytes, graceMs: canaryDurationMs(f.artifact_grace), pinned: () => canaryStore.promotions().map((p) => p.config),
    log: o.log });
  const sync = new FleetCanaries({
    store, evidence, artifacts, sink: o.sink, log: o.log, maxSamples: config.canary.max_samples,
    failSafeAfterMs: f.fail_safe_after === undefined ? 0 : canaryDurationMs(f.fail_safe_after),
  });
  return { store, sync };
}

/** This instance's id: fleet.instance_id, else the host name and the configured client port. */
export function instanceIdOf(config: ProxyConfig): string {
  return config.fleet.instance_id ?? `${hostname()}-${hostPort(config.listen).port}`;
}

/** The registry entry, once the listeners are bound (`workers`: the processes serving clients, 1 without workers). */
export function instanceInfo(config: ProxyConfig, id: string, address: string, controlUrl: string | null, workers: number): InstanceInfo {
  return {
    instance_id: id, address, control_url: config.fleet.advertise_url ?? controlUrl, version: VERSION, workers, graph_generation: 0,
    started_at: new Date().toISOString(),
  };
}

/**
 * The control plane's view of the fleet. `graphs` are the controller's: with workers, the cluster's
 * (ipc/canary-graphs.ts), whose refresh() pulls every worker's arms, so the evidence is the machine's.
 */
export function controlPlaneFleet(member: FleetMember, sync: FleetCanaries | null, controller: CanaryController, graphs: CanaryGraphs,
  token: () => string | null, timeoutMs: number, pipelines: FleetPipelines | null, metrics: CanaryMetricsSource): ControlPlaneFleet {
  return {
    pipelines,
    status: () => member.status(),
    evidence: async (pipelineId: string, custom: readonly string[], diffs: number | undefined): Promise<EvidencePayload> => {
      if (!graphs.hasPipeline(pipelineId)) throw new CanaryError('PROXY_ERR_CANARY_UNKNOWN_PIPELINE', `no pipeline "${pipelineId}" on this proxy`);
      await graphs.refresh?.();
      const payload: EvidencePayload = { instance_id: member.instanceId, pipeline_id: pipelineId, at: new Date().toISOString(),
        arms: { baseline: encodeArm(graphs.totals(pipelineId, 'baseline')), candidate: encodeArm(graphs.totals(pipelineId, 'candidate')) } };
      // Additive parts: the plugin metrics a custom_metrics rule names, and the shadow canary's figures.
      if (custom.length > 0) payload.custom = await readCustom(metrics, pipelineId, custom);
      const latest = controller.latest(pipelineId);
      if (latest?.spec.shadow != null) payload.shadow = encodeShadow(latest.id, graphs.shadow(pipelineId), diffs);
      return payload;
    },
    transact: (id, fn) => (sync === null ? Promise.resolve().then(fn) : sync.transact(id, 'manual', fn)),
    precheck: async (body) => {
      if (sync === null) return body;
      // A create is a write: while the store cannot be reached it is refused as the others are (503), before anything is published.
      const unreachable = (err?: unknown) => new CanaryError('PROXY_ERR_CANARY_STORE_UNREACHABLE', 'the fleet store cannot be reached; no canary ' +
        `was started${err === undefined ? '' : `: ${(err as Error).message}`}`);
      if (!member.store.reachable()) throw unreachable();
      // Here first (the body's own errors, a module this instance does not allow), then by hash.
      await controller.check(body);
      try {
        body = await sync.artifacts.publish(body);
      } catch (err) {
        if (!member.store.reachable()) throw unreachable(err);
        throw new CanaryError('PROXY_ERR_CANARY_CANDIDATE_REFUSED', `candidate refused: ${(err as Error).message}`);
      }
      let registered;
      try {
        registered = await member.instances();
      } catch (err) {
        await sync.artifacts.release(namedModules(body)).catch(() => {});
        throw unreachable(err);
      }
      const others = registered.filter((i) => i.instance_id !== member.instanceId);
      const t = token();
      const results = await Promise.allSettled(others.map(async (i) => {
        if (i.control_url === null) throw new Error('no control-plane URL registered');
        const res = await fetch(`${i.control_url}/api/v1/fleet/check`, {
          method: 'POST', body: JSON.stringify(body), signal: AbortSignal.timeout(Math.max(timeoutMs, 30_000)),
          headers: { 'content-type': 'application/json', ...(t === null ? {} : { authorization: `Bearer ${t}` }) },
        });
        if (!res.ok) {
          const e = await res.json().catch(() => null) as { error?: { code?: string; message?: string } } | null;
          throw new Error(e?.error?.message ?? `HTTP ${res.status}`);
        }
      }));
      const failed = results.map((r, i) => ({ r, i: others[i] })).filter((x) => x.r.status === 'rejected');
      if (failed.length > 0) {
        await sync.artifacts.release(namedModules(body));
        throw new CanaryError('PROXY_ERR_CANARY_CANDIDATE_REFUSED', `candidate refused by ${failed.map((x) => `instance ${x.i.instance_id}: ` +
          `${((x.r as PromiseRejectedResult).reason as Error).message}`).join('; ')}; nothing was started`,
        { instances: failed.map((x) => ({ instance_id: x.i.instance_id, error: ((x.r as PromiseRejectedResult).reason as Error).message })) });
      }
      return body;
    },
  };
}
