// Shadow canary figures added up from several sources: the primary's merge of its workers'
// (ipc/canary-graphs.ts) and a fleet's merge of its instances' (fleet/shadow-evidence.ts). Counts
// and step-time histograms are summed (never percentiles averaged), and the diffs rings are pooled
// and cut to the newest max_diffs once every source is in (seal()).
import type { Histogram } from 'hdr-histogram-js';
import { emptyHistogram, type GraphTotals } from './windows.ts';
import { DIVERGENCE_KINDS, type DiffRecord, type DivergenceKind, type ShadowFigures } from './shadow.ts';

/** One graph's figures summed: requests, errors, and the histograms added. */
export class SummedTotals implements GraphTotals {
  requests = 0;
  errors = 0;
  readonly latencyUs = emptyHistogram();

  /** Adds a source's figures (`latencyUs` null or empty: no histogram to add). */
  add(requests: number, errors: number, latencyUs: Histogram | null): void {
    this.requests += requests;
    this.errors += errors;
    if (latencyUs !== null && latencyUs.totalCount > 0) this.latencyUs.add(latencyUs);
  }
}

export class SummedShadow implements ShadowFigures {
  sampled = 0;
  diverged = 0;
  readonly byKind: Record<DivergenceKind, number> = { outcome: 0, request: 0, reply: 0 };
  evidence = { baseline: new SummedTotals(), candidate: new SummedTotals() };
  memoryBytes = 0;
  reads = 0;
  readsInFlight = 0;
  private records: DiffRecord[] = [];
  private readonly maxDiffs: number;

  constructor(maxDiffs: number) {
    this.maxDiffs = maxDiffs;
  }

  /** Back to nothing, to be filled again (the controller keeps holding this object). */
  clear(): void {
    this.sampled = 0;
    this.diverged = 0;
    for (const k of DIVERGENCE_KINDS) this.byKind[k] = 0;
    this.evidence = { baseline: new SummedTotals(), candidate: new SummedTotals() };
    this.memoryBytes = 0;
    this.reads = 0;
    this.readsInFlight = 0;
    this.records = [];
  }

  add(sc: ShadowFigures): void {
    this.sampled += sc.sampled;
    this.diverged += sc.diverged;
    for (const k of DIVERGENCE_KINDS) this.byKind[k] += sc.byKind[k];
    const { baseline, candidate } = sc.evidence;
    this.evidence.baseline.add(baseline.requests, baseline.errors, baseline.latencyUs);
    this.evidence.candidate.add(candidate.requests, candidate.errors, candidate.latencyUs);
    this.memoryBytes += sc.memoryBytes;
    this.reads += sc.reads;
    this.readsInFlight += sc.readsInFlight;
    for (const d of sc.diffs()) this.records.push(d);
  }

  /** After every source's figures are in: the newest max_diffs records. */
  seal(): this {
    this.records.sort((a, b) => b.at - a.at);
    if (this.records.length > this.maxDiffs) this.records.length = this.maxDiffs;
    return this;
  }

  diffs(): DiffRecord[] {
    return [...this.records];
  }
}
