// Fleet-wide evidence for a canary's evaluation. Every instance serves its arms' cumulative figures
// (requests, errors, and the latency HDR histogram in the V2 compressed encoding — lossless) at
// GET /api/v1/fleet/evidence/{pipeline} on its control plane; the evaluating instance reads every
// registered instance, turns each one's cumulative figures into a window with a tracker of its own
// (so an instance joining or leaving never makes a window negative) and adds the windows: counts
// are summed and histograms merged, never percentiles averaged. Instances that cannot be read are
// named; with fewer than the quorum answering the window decides nothing.
//
// The same payload carries, when asked, the readings of the plugin metrics a canary's
// custom_metrics rules name (custom-evidence.ts), and the pipeline's shadow canary figures
// (shadow-evidence.ts); both are merged here too, per instance run, before the rules read them.
import * as hdr from 'hdr-histogram-js';
import { SideWindow, WindowTracker, type GraphTotals } from '../canary/windows.ts';
import { ShadowTracker, ShadowWindow } from '../canary/shadow-windows.ts';
import type { FleetWants, FleetWindows } from '../canary/controller.ts';
import type { ShadowFigures } from '../canary/shadow.ts';
import type { InstanceInfo } from './store.ts';
import { CustomMerge, type CustomPair, type CustomPrevious } from './custom-evidence.ts';
import { decodeShadow, type EncodedShadow } from './shadow-evidence.ts';
import { SummedShadow } from '../canary/shadow-sum.ts';

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
  /** With `?custom=<names>`: each named plugin metric's cumulative reading per graph (custom-evidence.ts). */
  custom?: Record<string, CustomPair>;
  /** The pipeline's shadow canary figures (its latest, kept after it ends); null or absent: none. */
  shadow?: EncodedShadow | null;
}

export function encodeArm(t: GraphTotals | null): EncodedArm | null {
  if (t === null) return null;
  return { requests: t.requests, errors: t.errors, latency_us_hdr: hdr.encodeIntoCompressedBase64(t.latencyUs) };
}

export function decodeArm(a: EncodedArm | null): GraphTotals | null {
  if (a === null) return null;
  return { requests: a.requests, errors: a.errors, latencyUs: hdr.decodeFromCompressedBase64(a.latency_us_hdr, 32, false) };
}

/**
 * Reads one instance's evidence (the HTTP call, or a direct read for the instance itself);
 * `custom`: the plugin metrics wanted; `diffs`: at most this many of a shadow canary's newest diffs
 * (absent: its whole ring).
 */
export type EvidenceReader = (instance: InstanceInfo, pipelineId: string, custom?: readonly string[], diffs?: number) => Promise<EvidencePayload>;

/** The diffs an evaluation reads from each instance: what the status and canary.diverged show (a `…/diffs` read asks for max_diffs). */
export const EVALUATION_DIFFS = 5;

/** An HTTP reader: GET {control_url}/api/v1/fleet/evidence/{pipeline}[?custom=a,b][&diffs=n] with the fleet's bearer token. */
export function httpEvidenceReader(token: () => string | null, timeoutMs: number): EvidenceReader {
  return async (instance, pipelineId, custom = [], diffs) => {
    if (instance.control_url === null) throw new Error('no control-plane URL registered');
    const headers: Record<string, string> = {};
    const t = token();
    if (t !== null) headers.authorization = `Bearer ${t}`;
    const params = new URLSearchParams();
    if (custom.length > 0) params.set('custom', custom.join(','));
    if (diffs !== undefined) params.set('diffs', String(diffs));
    const q = params.size === 0 ? '' : `?${params.toString()}`;
    const res = await fetch(`${instance.control_url}/api/v1/fleet/evidence/${encodeURIComponent(pipelineId)}${q}`,
      { headers, signal: AbortSignal.timeout(timeoutMs) });
    if (!res.ok) throw new Error(`HTTP ${res.status}`);
    return await res.json() as EvidencePayload;
  };
}

/** What the evaluator keeps per instance run: its arms', custom metrics' and shadow canary's previous readings. */
interface RunTrackers {
  baseline: WindowTracker;
  candidate: WindowTracker;
  custom: CustomPrevious;
  shadow: ShadowTracker;
}

export class FleetEvidence {
  private readonly instances: () => Promise<InstanceInfo[]>;
  private readonly read: EvidenceReader;
  private readonly quorumPct: number;
  /** canary → instance run (id@started_at) → its trackers. */
  private readonly trackers = new Map<string, Map<string, RunTrackers>>();

  constructor(o: { instances: () => Promise<InstanceInfo[]>; read: EvidenceReader; quorumPct: number }) {
    this.instances = o.instances;
    this.read = o.read;
    this.quorumPct = o.quorumPct;
  }

  /** Every instance's figures now, read in parallel; failures named. */
  private async readAll(pipelineId: string, custom: readonly string[] = [], diffs?: number): Promise<{ ok: Array<{ key: string; p: EvidencePayload }>;
    failed: Array<{ instance_id: string; error: string; }>; total: number; }> {
    const list = await this.instances();
    const results = await Promise.allSettled(list.map((i) => this.read(i, pipelineId, custom, diffs)));
    const ok: Array<{ key: string; p: EvidencePayload }> = [];
    const failed: Array<{ instance_id: string; error: string }> = [];
    results.forEach((r, i) => {
      // Trackers per instance *run*: a restarted instance (a new started_at) counts from zero again.
      if (r.status === 'fulfilled') ok.push({ key: `${list[i].instance_id}@${list[i].started_at}`, p: r.value });
      else failed.push({ instance_id: list[i].instance_id, error: (r.reason as Error).message });
    });
    return { ok, failed, total: list.length };
  }

  private trackersOf(canaryId: string, run: string): RunTrackers {
    let byRun = this.trackers.get(canaryId);
    if (byRun === undefined) this.trackers.set(canaryId, byRun = new Map());
    let t = byRun.get(run);
    if (t === undefined) byRun.set(run, t = { baseline: new WindowTracker(), candidate: new WindowTracker(), custom: new Map(), shadow: new ShadowTracker() });
    return t;
  }

  /** Starts every instance's next window now (a new evaluator: what came before was judged by its predecessor). */
  async prime(canaryId: string, pipelineId: string, want: FleetWants = { custom: [], maxDiffs: null }): Promise<void> {
    this.trackers.delete(canaryId);
    const { ok } = await this.readAll(pipelineId, want.custom, 0);
    const merge = new CustomMerge(want.custom);
    for (const { key, p } of ok) {
      const t = this.trackersOf(canaryId, key);
      t.baseline.prime(decodeArm(p.arms.baseline));
      t.candidate.prime(decodeArm(p.arms.candidate));
      merge.add(t.custom, p.custom, { baseline: 0, candidate: 0 });
      if (want.maxDiffs !== null) t.shadow.prime(decodeShadow(p.shadow, p.instance_id, canaryId));
    }
  }

  /**
   * A shadow canary's cumulative figures across the instances that answer now (a status or
   * `…/diffs` read); null when none holds figures of that canary.
   */
  async shadow(canaryId: string, pipelineId: string, maxDiffs: number): Promise<ShadowFigures | null> {
    const { ok } = await this.readAll(pipelineId, [], maxDiffs);
    const merged = new SummedShadow(maxDiffs);
    let any = false;
    for (const { p } of ok) {
      const sc = decodeShadow(p.shadow, p.instance_id, canaryId);
      if (sc !== null) merged.add(sc);
      any ||= sc !== null;
    }
    return any ? merged.seal() : null;
  }

  forget(canaryId: string): void {
    this.trackers.delete(canaryId);
  }

  /**
   * The fleet's window since the last call: each instance's own window, added up — arms, the
   * custom metrics `want.custom` names, and (with `want.maxDiffs`) the shadow canary's window and
   * cumulative figures.
   */
  async windows(canaryId: string, pipelineId: string, want: FleetWants = { custom: [], maxDiffs: null }): Promise<FleetWindows> {
    const { ok, failed, total } = await this.readAll(pipelineId, want.custom,
      want.maxDiffs === null ? 0 : Math.min(want.maxDiffs, EVALUATION_DIFFS));
    const baseline = new SideWindow();
    const candidate = new SideWindow();
    const custom = new CustomMerge(want.custom);
    const shadow = want.maxDiffs === null ? null : { window: new ShadowWindow(), figures: new SummedShadow(want.maxDiffs) };
    for (const { key, p } of ok) {
      const t = this.trackersOf(canaryId, key);
      const b = t.baseline.take(decodeArm(p.arms.baseline));
      const c = t.candidate.take(decodeArm(p.arms.candidate));
      baseline.add(b);
      candidate.add(c);
      custom.add(t.custom, p.custom, { baseline: b.requests, candidate: c.requests });
      if (shadow !== null) {
        const sc = decodeShadow(p.shadow, p.instance_id, canaryId);
        shadow.window.add(t.shadow.take(sc));
        if (sc !== null) shadow.figures.add(sc);
      }
    }
    const quorum = total > 0 && ok.length * 100 >= total * this.quorumPct;
    return { baseline, candidate, custom: custom.values(), shadow: shadow === null ? null : { window: shadow.window, figures: shadow.figures.seal() },
      evidence: { instances_read: ok.map((x) => x.p.instance_id).sort(), unreadable: failed, quorum } };
  }
}
