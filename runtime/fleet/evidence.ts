// Fleet-wide evidence for a canary's evaluation. Every instance serves its arms' cumulative figures
// (requests, errors, and the latency HDR histogram in the V2 compressed encoding — lossless) at
// GET /api/v1/fleet/evidence/{pipeline} on its control plane; the evaluating instance reads every
// registered instance, turns each one's cumulative figures into a window with a tracker of its own
// (so an instance joining or leaving never makes a window negative) and adds the windows: counts
// are summed and histograms merged, never percentiles averaged. Instances that cannot be read are
// named; with fewer than the quorum answering the window decides nothing.
import * as hdr from 'hdr-histogram-js';
import type { Variant } from '../pipeline/index.ts';
import { SideWindow, WindowTracker, type GraphTotals } from '../canary/windows.ts';
import type { FleetWindows } from '../canary/controller.ts';
import type { InstanceInfo } from './store.ts';

/** One arm's cumulative figures on the wire. */
export interface EncodedArm {
  requests: number;
  errors: number;
  /** The latency histogram (µs), hdr-histogram's V2 compressed encoding, base64. */
  latency_us_hdr: string;
}

export interface EvidencePayload {
  instance_id: string;
  pipeline_id: string;
  at: string;
  arms: { baseline: EncodedArm | null; candidate: EncodedArm | null };
}

export function encodeArm(t: GraphTotals | null): EncodedArm | null {
  if (t === null) return null;
  return { requests: t.requests, errors: t.errors, latency_us_hdr: hdr.encodeIntoCompressedBase64(t.latencyUs) };
}

export function decodeArm(a: EncodedArm | null): GraphTotals | null {
  if (a === null) return null;
  return { requests: a.requests, errors: a.errors, latencyUs: hdr.decodeFromCompressedBase64(a.latency_us_hdr, 32, false) };
}

/** Reads one instance's evidence (the HTTP call, or a direct read for the instance itself). */
export type EvidenceReader = (instance: InstanceInfo, pipelineId: string) => Promise<EvidencePayload>;

/** An HTTP reader: GET {control_url}/api/v1/fleet/evidence/{pipeline} with the fleet's bearer token. */
export function httpEvidenceReader(token: () => string | null, timeoutMs: number): EvidenceReader {
  return async (instance, pipelineId) => {
    if (instance.control_url === null) throw new Error('no control-plane URL registered');
    const headers: Record<string, string> = {};
    const t = token();
    if (t !== null) headers.authorization = `Bearer ${t}`;
    const res = await fetch(`${instance.control_url}/api/v1/fleet/evidence/${encodeURIComponent(pipelineId)}`,
      { headers, signal: AbortSignal.timeout(timeoutMs) });
    if (!res.ok) throw new Error(`HTTP ${res.status}`);
    return await res.json() as EvidencePayload;
  };
}

export class FleetEvidence {
  private readonly instances: () => Promise<InstanceInfo[]>;
  private readonly read: EvidenceReader;
  private readonly quorumPct: number;
  /** canary → instance run (id@started_at) → the trackers of its two arms. */
  private readonly trackers = new Map<string, Map<string, Record<Variant, WindowTracker>>>();

  constructor(o: { instances: () => Promise<InstanceInfo[]>; read: EvidenceReader; quorumPct: number }) {
    this.instances = o.instances;
    this.read = o.read;
    this.quorumPct = o.quorumPct;
  }

  /** Every instance's figures now, read in parallel; failures named. */
  private async readAll(pipelineId: string): Promise<{ ok: Array<{ key: string; p: EvidencePayload }>; failed: Array<{ instance_id: string;
    error: string; }>; total: number; }> {
    const list = await this.instances();
    const results = await Promise.allSettled(list.map((i) => this.read(i, pipelineId)));
    const ok: Array<{ key: string; p: EvidencePayload }> = [];
    const failed: Array<{ instance_id: string; error: string }> = [];
    results.forEach((r, i) => {
      // Trackers per instance *run*: a restarted instance (a new started_at) counts from zero again.
      if (r.status === 'fulfilled') ok.push({ key: `${list[i].instance_id}@${list[i].started_at}`, p: r.value });
      else failed.push({ instance_id: list[i].instance_id, error: (r.reason as Error).message });
    });
    return { ok, failed, total: list.length };
  }

  private trackersOf(canaryId: string, run: string): Record<Variant, WindowTracker> {
    let byRun = this.trackers.get(canaryId);
    if (byRun === undefined) this.trackers.set(canaryId, byRun = new Map());
    let t = byRun.get(run);
    if (t === undefined) byRun.set(run, t = { baseline: new WindowTracker(), candidate: new WindowTracker() });
    return t;
  }

  /** Starts every instance's next window now (a new evaluator: what came before was judged by its predecessor). */
  async prime(canaryId: string, pipelineId: string): Promise<void> {
    this.trackers.delete(canaryId);
    const { ok } = await this.readAll(pipelineId);
    for (const { key, p } of ok) {
      const t = this.trackersOf(canaryId, key);
      t.baseline.prime(decodeArm(p.arms.baseline));
      t.candidate.prime(decodeArm(p.arms.candidate));
    }
  }

  forget(canaryId: string): void {
    this.trackers.delete(canaryId);
  }

  /** The fleet's window since the last call: each instance's own window, added up. */
  async windows(canaryId: string, pipelineId: string): Promise<FleetWindows> {
    const { ok, failed, total } = await this.readAll(pipelineId);
    const baseline = new SideWindow();
    const candidate = new SideWindow();
    for (const { key, p } of ok) {
      const t = this.trackersOf(canaryId, key);
      baseline.add(t.baseline.take(decodeArm(p.arms.baseline)));
      candidate.add(t.candidate.take(decodeArm(p.arms.candidate)));
    }
    const quorum = total > 0 && ok.length * 100 >= total * this.quorumPct;
    return { baseline, candidate, evidence: { instances_read: ok.map((x) => x.p.instance_id).sort(), unreadable: failed, quorum } };
  }
}
