// A shadow canary's figures in a fleet. Every instance shadows its own share of the requests it
// serves (the spec's shadow_pct, and each stage's, reach every instance with the record) and serves
// its comparison's cumulative figures in its evidence: sampled and divergent requests by kind, both
// graphs' step-time HDR histograms on the sampled requests (V2 compressed encoding, lossless), the
// bytes its ring of diffs holds, and the ring itself (at most max_diffs records).
//
// Two merges read them. The evaluator adds each instance's *window* (a ShadowTracker per instance
// run, evidence.ts) before the shadow rules; any instance answering a status or `…/diffs` adds the
// instances' *cumulative* figures into one SummedShadow (canary/shadow-sum.ts): counts and histograms summed, the rings'
// records newest first, max_diffs of them — the same merge the primary makes of its workers'.
import * as hdr from 'hdr-histogram-js';
import type { GraphTotals } from '../canary/windows.ts';
import type { DiffRecord, DivergenceKind, ShadowFigures } from '../canary/shadow.ts';

/** One graph's figures on the sampled requests, on the wire. */
export interface EncodedTotals {
  requests: number;
  errors: number;
  /** Step time (µs), HDR V2 compressed, base64. */
  latency_us_hdr: string;
}

/** One instance's shadow canary figures (cumulative since it started there). */
export interface EncodedShadow {
  /** The shadow canary running there (an instance that has not applied a new one yet still serves its predecessor's figures). */
  canary_id: string;
  sampled: number;
  diverged: number;
  by_kind: Record<DivergenceKind, number>;
  baseline: EncodedTotals;
  candidate: EncodedTotals;
  memory_bytes: number;
  reads: number;
  reads_in_flight: number;
  /** The ring's records, newest first. */
  diffs: DiffRecord[];
}

function encodeTotals(t: GraphTotals): EncodedTotals {
  return { requests: t.requests, errors: t.errors, latency_us_hdr: hdr.encodeIntoCompressedBase64(t.latencyUs) };
}

function decodeTotals(e: EncodedTotals): GraphTotals {
  return { requests: e.requests, errors: e.errors, latencyUs: hdr.decodeFromCompressedBase64(e.latency_us_hdr, 32, false) };
}

/** `maxDiffs`: the newest diffs carried (absent: the whole ring). */
export function encodeShadow(canaryId: string, sc: ShadowFigures | null, maxDiffs = Infinity): EncodedShadow | null {
  if (sc === null) return null;
  const diffs = sc.diffs();
  if (diffs.length > maxDiffs) diffs.length = maxDiffs;
  return {
    canary_id: canaryId,
    sampled: sc.sampled, diverged: sc.diverged, by_kind: { ...sc.byKind }, baseline: encodeTotals(sc.evidence.baseline),
    candidate: encodeTotals(sc.evidence.candidate), memory_bytes: sc.memoryBytes, reads: sc.reads, reads_in_flight: sc.readsInFlight,
    diffs,
  };
}

/** One instance's figures of canary `canaryId` as the controller reads a ShadowCanary's (its diffs name the instance); null: none there. */
export function decodeShadow(e: EncodedShadow | null | undefined, instanceId: string, canaryId: string): ShadowFigures | null {
  if (e == null || e.canary_id !== canaryId) return null;
  const diffs = e.diffs.map((d) => ({ ...d, instance_id: instanceId }));
  return {
    sampled: e.sampled, diverged: e.diverged, byKind: e.by_kind, memoryBytes: e.memory_bytes, reads: e.reads, readsInFlight: e.reads_in_flight,
    evidence: { baseline: decodeTotals(e.baseline), candidate: decodeTotals(e.candidate) },
    diffs: () => diffs,
  };
}
