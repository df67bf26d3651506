// A shadow canary's comparison (mode "shadow", docs/canary.md "Shadow canaries"): implements the
// request path's GraphShadow (runtime/pipeline/shadow.ts). For each sampled request it is handed
// what both graphs did and counts a divergence of one kind at most:
//   outcome — the graphs decided differently: one forwards and the other rejects or answers
//             locally, or they reject with different codes (in either phase);
//   request — both forward, but different commands (or to different upstreams, path `(route)`);
//   reply   — both forwarded the same command, and their answers to the client differ.
// Documents are compared with the BSON-aware diff (bson-diff.ts; byte equality first, ignored
// paths skipped). A divergent request's diff — operation, namespace, differing paths, values only
// with show_values — goes into a ring of at most `maxDiffs` entries; the bytes the ring holds are
// counted (ShadowStats.memoryBytes, a gauge). Each graph's step time and outcome on the sampled
// requests are this canary's shadow evidence (candidate_latency_p95_delta_ms, and in a shadow
// stage the built-in rules).
//
// Runs on the request path for sampled requests only: sample() is one draw; the rest runs after
// the baseline's bytes are on their way (runtime/server/shadow-steps.ts).
import { ElementCursor, firstKey, utf8 } from '../wire/index.ts';
import { ShadowNext, Verdict, type Exchange, type GraphShadow, type Pipeline, type ShadowRequest } from '../pipeline/index.ts';
import { diffBson, type DiffEntry, type DiffResult } from './bson-diff.ts';
import { ArmEvidence } from './arm-evidence.ts';
import type { GraphTotals } from './windows.ts';

export const DIVERGENCE_KINDS = ['outcome', 'request', 'reply'] as const;
export type DivergenceKind = typeof DIVERGENCE_KINDS[number];

/** Differences kept per diff (then `truncated`). */
export const MAX_DIFF_ENTRIES = 16;

/** This proxy's shadow figures across its canaries (the metrics; owned by the canary graphs). */
export class ShadowStats {
  /** proxy_canary_divergence_total{kind} */
  readonly divergences: Record<DivergenceKind, number> = { outcome: 0, request: 0, reply: 0 };
  /** proxy_canary_shadow_requests_total */
  sampled = 0;
  /** proxy_canary_shadow_memory_bytes: what the shadow canaries' diff rings hold (the latest canary of each pipeline keeps its ring after it ends). */
  memoryBytes = 0;
}

export interface ShadowSettings {
  /** Share of the baseline's requests shadowed, 0..100. */
  pct: number;
  /** Dotted paths the diff skips. */
  ignorePaths: readonly string[];
  /** Diffs show values (default: paths and types only). */
  showValues: boolean;
  /** Diffs kept (the ring's size). */
  maxDiffs: number;
  /** shadow_upstream_reads: a read whose commands differ is sent upstream for the candidate, at most maxReads at once. */
  upstreamReads: boolean;
  maxReads: number;
}

/** The reads a shadow canary may send upstream for its candidate (no cursor is left open: find gets singleBatch). */
export const SHADOW_READ_COMMANDS: ReadonlySet<string> = new Set(['find', 'count', 'distinct']);

/** One divergent request in the ring. */
export interface DiffRecord {
  at: number;
  kind: DivergenceKind;
  op: string;
  db: string;
  collection: string;
  /** What each graph did: `forward`, `local_reply`, `reject:<code>`. */
  baseline: string;
  candidate: string;
  paths: DiffEntry[];
  truncated: boolean;
  /**
   * A request divergence on a read with shadow_upstream_reads: what the candidate's own read
   * answered, against the client's answer (`pending` until it is back; `failed`: the call failed;
   * `rejected`: the candidate's response phase rejected it). Null: not fetched.
   */
  reply: { status: 'pending' | 'fetched' | 'failed' | 'rejected'; paths: DiffEntry[]; truncated: boolean } | null;
  /** Estimated bytes the record holds. */
  bytes: number;
  /** In a fleet: the instance that shadowed the request (set where the fleet's diffs are merged). */
  instance_id?: string;
}

const K_OK = utf8('ok');
const okCursor = new ElementCursor();

/** Whether a reply document says ok: 1 (a malformed one: not ok). */
function replyOk(doc: Uint8Array): boolean {
  try {
    const buf = doc instanceof Buffer ? doc : Buffer.from(doc.buffer, doc.byteOffset, doc.byteLength);
    const cur = okCursor.open(buf, 0);
    while (cur.next()) if (cur.nameIs(K_OK)) return cur.type === 0x01 ? buf.readDoubleLE(cur.valueStart) === 1 : cur.type === 0x10 ? cur.int32() === 1
      : cur.type === 0x12 ? cur.int64() === 1n : cur.type === 0x08 && buf[cur.valueStart] === 1;
  } catch {
    // malformed: not ok
  }
  return false;
}

function outcomeOf(ex: Exchange): string {
  if (ex.verdict === Verdict.Reject) return `reject:${ex.rejectCode}`;
  return ex.verdict === Verdict.LocalReply ? 'local_reply' : 'forward';
}

function pathBytes(paths: DiffEntry[]): number {
  let n = 0;
  for (const p of paths) n += 48 + 2 * (p.path.length + (p.baseline?.length ?? 0) + (p.candidate?.length ?? 0));
  return n;
}

const K_TXN = [utf8('txnNumber'), utf8('autocommit'), utf8('startTransaction')];
const txnCursor = new ElementCursor();

/** Whether the candidate may send `cmd` upstream itself: a find, count or distinct outside a transaction. */
function fetchable(cmd: Uint8Array): boolean {
  try {
    const buf = cmd instanceof Buffer ? cmd : Buffer.from(cmd.buffer, cmd.byteOffset, cmd.byteLength);
    if (!SHADOW_READ_COMMANDS.has(firstKey(buf))) return false;
    const cur = txnCursor.open(buf, 0);
    while (cur.next()) for (const k of K_TXN) if (cur.nameIs(k)) return false;
    return true;
  } catch {
    return false;
  }
}

/**
 * What the controller reads of a shadow canary: its cumulative counts, each graph's evidence on
 * the sampled requests, and its ring. A ShadowCanary in one process; with workers, the primary's
 * merge of every worker's (runtime/ipc/canary-graphs.ts).
 */
export interface ShadowFigures {
  readonly sampled: number;
  readonly diverged: number;
  readonly byKind: Readonly<Record<DivergenceKind, number>>;
  readonly evidence: { readonly baseline: GraphTotals; readonly candidate: GraphTotals };
  /** Bytes the ring(s) hold now. */
  readonly memoryBytes: number;
  /** Reads sent upstream for the candidate since the start, and those under way. */
  readonly reads: number;
  readonly readsInFlight: number;
  /** The ring's records, newest first. */
  diffs(): DiffRecord[];
}

export class ShadowCanary implements GraphShadow, ShadowFigures {
  readonly candidate: Pipeline;
  /** Share of requests shadowed now (a stage change sets it). */
  pct: number;
  readonly showValues: boolean;
  readonly ignorePaths: readonly string[];
  readonly maxDiffs: number;
  readonly upstreamReads: boolean;
  readonly maxReads: number;
  /** The candidate's reads under way (shadow_upstream_reads). */
  readsInFlight = 0;
  /** Reads sent upstream for the candidate since the start. */
  reads = 0;
  /** Each graph's step time (ms) and outcome on the sampled requests. */
  readonly evidence = { baseline: new ArmEvidence(), candidate: new ArmEvidence() };
  /** Cumulative since the canary started. */
  sampled = 0;
  diverged = 0;
  readonly byKind: Record<DivergenceKind, number> = { outcome: 0, request: 0, reply: 0 };
  private readonly stats: ShadowStats;
  private readonly random: () => number;
  private readonly ignore: ReadonlySet<string>;
  private readonly ring: DiffRecord[] = [];
  /** Where the next record goes once the ring is full. */
  private next = 0;
  private ringBytes = 0;
  private readonly clock: () => number;

  constructor(candidate: Pipeline, settings: ShadowSettings, stats: ShadowStats, random: () => number = Math.random, clock: () => number = Date.now) {
    this.candidate = candidate;
    this.pct = settings.pct;
    this.showValues = settings.showValues;
    this.ignorePaths = settings.ignorePaths;
    this.ignore = new Set(settings.ignorePaths);
    this.maxDiffs = settings.maxDiffs;
    this.upstreamReads = settings.upstreamReads;
    this.maxReads = settings.maxReads;
    this.stats = stats;
    this.random = random;
    this.clock = clock;
  }

  sample(): boolean {
    const p = this.pct;
    return p >= 100 || (p > 0 && this.random() * 100 < p);
  }

  requestDone(s: ShadowRequest): ShadowNext {
    this.sampled++;
    this.stats.sampled++;
    const b = s.baseline!;
    const c = s.candidate!;
    const bo = outcomeOf(b);
    const co = outcomeOf(c);
    if (bo !== co) {
      this.diverge(s, 'outcome', bo, co, { entries: [], truncated: false });
      return ShadowNext.Done;
    }
    if (b.verdict === Verdict.Reject) return ShadowNext.Done;
    if (b.verdict === Verdict.LocalReply) return ShadowNext.Respond;
    // Both forward: the same command to the same upstream, or a `request` divergence.
    let d: DiffResult = { entries: [], truncated: false };
    if (b.newRequest !== null || c.newRequest !== null) d = this.diff(b.requestDocument(), c.requestDocument());
    if (b.route !== c.route) {
      const e: DiffEntry = { path: '(route)', change: 'changed' };
      if (this.showValues) {
        e.baseline = b.route ?? '(default)';
        e.candidate = c.route ?? '(default)';
      }
      d.entries.unshift(e);
    }
    if (d.entries.length > 0) {
      const r = this.diverge(s, 'request', bo, co, d);
      if (r === null || !s.canFetch || !this.upstreamReads || this.readsInFlight >= this.maxReads || this.pct === 0 || !fetchable(c.requestDocument())) {
        return ShadowNext.Done;
      }
      this.readsInFlight++;
      this.reads++;
      r.reply = { status: 'pending', paths: [], truncated: false };
      s.divergence = r;
      // The copy of the client's answer the read keeps until it is back.
      this.stats.memoryBytes += s.baselineReply!.length;
      return ShadowNext.Fetch;
    }
    return ShadowNext.Respond;
  }

  fetched(divergence: object, baselineReply: Uint8Array, candidateReply: Uint8Array | null, candidateRejected: boolean): void {
    this.readsInFlight--;
    this.stats.memoryBytes -= baselineReply.length;
    const r = divergence as DiffRecord;
    const before = pathBytes(r.reply?.paths ?? []);
    if (candidateReply === null) r.reply = { status: 'failed', paths: [], truncated: false };
    else if (candidateRejected) r.reply = { status: 'rejected', paths: [], truncated: false };
    else {
      const d = this.diff(baselineReply, candidateReply);
      r.reply = { status: 'fetched', paths: d.entries, truncated: d.truncated };
    }
    const grew = pathBytes(r.reply.paths) - before;
    r.bytes += grew;
    // Still in the ring (not overwritten meanwhile): its growth is counted.
    if (this.ring.includes(r)) {
      this.ringBytes += grew;
      this.stats.memoryBytes += grew;
    }
  }

  responseDone(s: ShadowRequest): void {
    const bRej = s.baselineRejected;
    const cRej = s.candidateRejected;
    const bReply = s.baselineReply!;
    const cReply = s.candidateReply!;
    if (bRej !== cRej || (bRej && outcomeOf(s.baseline!) !== outcomeOf(s.candidate!))) {
      this.diverge(s, 'outcome', bRej ? outcomeOf(s.baseline!) : 'reply', cRej ? outcomeOf(s.candidate!) : 'reply', { entries: [], truncated: false });
    } else if (!bRej) {
      const d = this.diff(bReply, cReply);
      if (d.entries.length > 0) this.diverge(s, 'reply', 'reply', 'reply', d);
    }
    this.evidence.baseline.record(s.baselineMs, !bRej && replyOk(bReply));
    this.evidence.candidate.record(s.candidateMs, !cRej && replyOk(cReply));
  }

  ended(s: ShadowRequest): void {
    const b = s.baseline!;
    const c = s.candidate!;
    this.evidence.baseline.record(s.baselineMs, b.verdict !== Verdict.Reject && (s.baselineReply === null || replyOk(s.baselineReply)));
    this.evidence.candidate.record(s.candidateMs, c.verdict !== Verdict.Reject && (s.candidateReply === null || replyOk(s.candidateReply)));
  }

  private diff(a: Uint8Array, b: Uint8Array): DiffResult {
    try {
      return diffBson(a, b, { ignore: this.ignore, showValues: this.showValues, maxEntries: MAX_DIFF_ENTRIES });
    } catch {
      return { entries: [{ path: '(document)', change: 'changed' }], truncated: false };
    }
  }

  /** Counts a divergence and keeps its diff in the ring (returned; null when no ring is kept). */
  private diverge(s: ShadowRequest, kind: DivergenceKind, baseline: string, candidate: string, d: DiffResult): DiffRecord | null {
    this.diverged++;
    this.byKind[kind]++;
    this.stats.divergences[kind]++;
    if (this.maxDiffs === 0) return null;
    const r: DiffRecord = { at: this.clock(), kind, op: s.op, db: s.db, collection: s.collection, baseline, candidate, paths: d.entries,
      truncated: d.truncated, reply: null, bytes: 160 + pathBytes(d.entries) };
    const ring = this.ring;
    if (ring.length < this.maxDiffs) {
      ring.push(r);
    } else {
      this.ringBytes -= ring[this.next].bytes;
      this.stats.memoryBytes -= ring[this.next].bytes;
      ring[this.next] = r;
      this.next = (this.next + 1) % this.maxDiffs;
    }
    this.ringBytes += r.bytes;
    this.stats.memoryBytes += r.bytes;
    return r;
  }

  /** The ring's records, newest first. */
  diffs(): DiffRecord[] {
    const ring = this.ring;
    const out = ring.length < this.maxDiffs ? [...ring] : [...ring.slice(this.next), ...ring.slice(0, this.next)];
    return out.reverse();
  }

  /** Bytes the ring holds now. */
  get memoryBytes(): number {
    return this.ringBytes;
  }

  /** The canary ended: nothing more is shadowed (the ring stays until close()). */
  stop(): void {
    this.pct = 0;
  }

  /** The pipeline's next shadow canary started: this one's ring is let go (and uncounted). */
  close(): void {
    this.stats.memoryBytes -= this.ringBytes;
    this.ringBytes = 0;
    this.ring.length = 0;
    this.next = 0;
  }
}
