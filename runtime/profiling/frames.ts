// Per-request frames for the flame graph: what each sampled request spent in each step and
// sub-operation, the upstream and the wait for a connection. A bounded ring kept as columns —
// typed arrays for the numbers, plain arrays for the (shared, never copied) strings and step
// timers — so recording a request writes a few contiguous slots and allocates nothing. (One object
// per frame and per step, overwritten in place, cost 2.9 µs per request at 20,000 frames: every
// push touched a dozen cold objects spread over the heap.)
//
// The string and timer columns grow as the ring first fills (always at their end, so they stay
// packed arrays); the typed arrays are allocated whole but their pages are only touched as used.
//
// Steps and sub-operations go to rings of their own, sized for STEPS_PER_FRAME and
// SUBOPS_PER_FRAME on average; a frame records where its entries start in absolute counts, and a
// frame whose entries were overwritten by later ones (a run of requests with unusually many steps)
// is reported without them rather than with another request's.
//
// Frames are sampled: at most `capacity` per FRAME_WINDOW_MS on average (a token bucket, bursts of
// capacity / 10), so that the ring of a busy proxy spans the flame graph's default window (60 s)
// instead of its last second or two, and recording costs a busy proxy a few nanoseconds per request
// instead of a frame each. Below that rate every request is kept. A kept frame carries its weight —
// how many requests it stands for (itself and the ones skipped since the previous kept frame) — and
// the flame graph scales its times by it, so totals stay estimates of all requests. Which requests
// are kept depends only on when they end, not on what they cost: the sample is unbiased.
import { performance } from 'node:perf_hooks';
import type { CompletedRequest } from './profiler.ts';
import type { StepTimer } from '../pipeline/recorder.ts';
import type { Variant } from '../pipeline/index.ts';
import type { Phase } from '../wasm/index.ts';

export interface FrameSubop { name: string; ns: number }

export interface FrameStep {
  /** "wasm:<name>" */
  name: string;
  phase: Phase;
  ns: number;
  subops: FrameSubop[];
  /** Entries of `subops` in use. */
  subCount: number;
}

export interface RequestFrame {
  /** When the request ended, ms since the epoch. */
  at: number;
  pipelineId: string;
  variant: Variant;
  op: string;
  collection: string;
  totalNs: number;
  acquireNs: number;
  upstreamNs: number;
  ok: boolean;
  /** Step invocations in run order (request phase, then response phase). */
  steps: FrameStep[];
  /** Requests this frame stands for: 1, or more when frames were being sampled (see FrameRing). */
  weight: number;
}

/** The span of time the ring is sized to cover at its sustained sampling rate (the flame graph's default window). */
export const FRAME_WINDOW_MS = 60_000;

/** Average step invocations per frame the step ring is sized for. */
const STEPS_PER_FRAME = 16;
/** Average sub-operations per frame the sub-operation ring is sized for. */
const SUBOPS_PER_FRAME = 8;

export class FrameRing {
  readonly capacity: number;
  private next = 0;
  private filled = 0;
  // Frame columns.
  private readonly at: Float64Array;
  private readonly totalNs: Float64Array;
  private readonly acquireNs: Float64Array;
  private readonly upstreamNs: Float64Array;
  private readonly ok: Uint8Array;
  private readonly weight: Float64Array;
  private readonly pipelineId: string[];
  private readonly variant: Variant[];
  private readonly op: string[];
  private readonly collection: string[];
  /** Absolute index of the frame's first step / sub-operation, and how many. */
  private readonly stepStart: Float64Array;
  private readonly stepCount: Uint16Array;
  private readonly subStart: Float64Array;
  private readonly subCount: Uint16Array;
  // Step ring.
  private readonly stepCap: number;
  private stepsWritten = 0;
  private readonly stepTimer: (StepTimer | null)[];
  private readonly stepNs: Float64Array;
  // Sub-operation ring: the step (index within its frame) each belongs to.
  private readonly subCap: number;
  private subsWritten = 0;
  private readonly subStep: Uint16Array;
  private readonly subName: string[];
  private readonly subNs: Float64Array;

  constructor(capacity: number) {
    const n = Math.max(1, capacity);
    this.capacity = n;
    this.ratePerMs = n / FRAME_WINDOW_MS;
    this.burst = Math.max(1, n / 10);
    this.tokens = this.burst;
    this.at = new Float64Array(n);
    this.totalNs = new Float64Array(n);
    this.acquireNs = new Float64Array(n);
    this.upstreamNs = new Float64Array(n);
    this.ok = new Uint8Array(n);
    this.weight = new Float64Array(n);
    this.pipelineId = [];
    this.variant = [];
    this.op = [];
    this.collection = [];
    this.stepStart = new Float64Array(n);
    this.stepCount = new Uint16Array(n);
    this.subStart = new Float64Array(n);
    this.subCount = new Uint16Array(n);
    this.stepCap = n * STEPS_PER_FRAME;
    this.stepTimer = [];
    this.stepNs = new Float64Array(this.stepCap);
    this.subCap = n * SUBOPS_PER_FRAME;
    this.subStep = new Uint16Array(this.subCap);
    this.subName = [];
    this.subNs = new Float64Array(this.subCap);
  }

  get size(): number {
    return this.filled;
  }

  // Sampling: a token bucket refilled at capacity per FRAME_WINDOW_MS, holding at most `burst`.
  private readonly ratePerMs: number;
  private readonly burst: number;
  private tokens: number;
  /** When the bucket was last refilled (performance.now(), ms). */
  private refilledAt = 0;
  /** Requests offered and not kept since the last kept frame. */
  private skipped = 0;
  /** Requests offered and not kept, in all. */
  skippedTotal = 0;

  /**
   * Whether a request starting at `nowMs` (a monotonic ms clock; only differences are used) will
   * have its frame kept, decided when it starts so that what only a kept frame shows (its
   * sub-operations) is timed for it alone. True takes a sampling token: the request's end then
   * calls record() if it is recorded, or refund() if the profiling filters leave it out; false:
   * skip() if it is recorded.
   */
  admit(nowMs: number): boolean {
    // Requests read earlier but started later (queued behind another) bring an earlier time: no refill then.
    if (nowMs > this.refilledAt) {
      this.tokens = Math.min(this.burst, this.tokens + (nowMs - this.refilledAt) * this.ratePerMs);
      this.refilledAt = nowMs;
    }
    if (this.tokens < 1) return false;
    this.tokens--;
    return true;
  }

  /** An admitted request the filters left out: its token goes back. */
  refund(): void {
    this.tokens = Math.min(this.burst, this.tokens + 1);
  }

  /** A recorded request that was not admitted: the next kept frame counts for it. */
  skip(): void {
    this.skipped++;
    this.skippedTotal++;
  }

  /** Admits and records `r` in one go, when the sampling budget allows; true when kept. */
  push(r: CompletedRequest): boolean {
    if (!this.admit(performance.now())) {
      this.skip();
      return false;
    }
    this.record(r);
    return true;
  }

  /** Records the frame of `r`, a request admit() let in. */
  record(r: CompletedRequest): void {
    const now = Date.now();
    const k = this.next;
    this.next = k + 1 === this.capacity ? 0 : k + 1;
    if (this.filled < this.capacity) this.filled++;
    this.at[k] = now;
    this.weight[k] = 1 + this.skipped;
    this.skipped = 0;
    this.pipelineId[k] = r.pipelineId;
    this.variant[k] = r.variant;
    this.op[k] = r.op;
    this.collection[k] = r.collection;
    this.totalNs[k] = r.totalNs;
    this.acquireNs[k] = r.acquireNs;
    this.upstreamNs[k] = r.upstreamNs;
    this.ok[k] = r.ok ? 1 : 0;
    const t = r.timings;
    const steps = Math.min(t.count, 0xffff, this.stepCap);
    let w = this.stepsWritten;
    this.stepStart[k] = w;
    this.stepCount[k] = steps;
    for (let i = 0; i < steps; i++, w++) {
      const s = w % this.stepCap;
      this.stepTimer[s] = t.timers[i];
      this.stepNs[s] = t.ns[i];
    }
    this.stepsWritten = w;
    const subs = Math.min(t.subCount, 0xffff, this.subCap);
    let v = this.subsWritten;
    this.subStart[k] = v;
    this.subCount[k] = subs;
    for (let j = 0; j < subs; j++, v++) {
      const s = v % this.subCap;
      this.subStep[s] = t.subOf[j];
      this.subName[s] = t.subNames[j];
      this.subNs[s] = t.subNs[j];
    }
    this.subsWritten = v;
  }

  /** Frames that ended at or after `fromMs` (optionally of one graph), oldest first, as objects. */
  since(fromMs: number, pipelineId: string | null, variant: Variant | null): RequestFrame[] {
    const out: RequestFrame[] = [];
    const n = this.filled;
    const first = n < this.capacity ? 0 : this.next;
    for (let i = 0; i < n; i++) {
      const k = (first + i) % this.capacity;
      if (this.at[k] < fromMs) continue;
      if (pipelineId !== null && this.pipelineId[k] !== pipelineId) continue;
      if (variant !== null && this.variant[k] !== variant) continue;
      out.push(this.frame(k));
    }
    return out;
  }

  clear(): void {
    this.next = 0;
    this.filled = 0;
    this.skipped = 0;
  }

  private frame(k: number): RequestFrame {
    const steps: FrameStep[] = [];
    const start = this.stepStart[k];
    // Entries overwritten since (the step ring holds the last stepCap of them): left out.
    if (start >= this.stepsWritten - this.stepCap) {
      for (let i = 0; i < this.stepCount[k]; i++) {
        const s = (start + i) % this.stepCap;
        const timer = this.stepTimer[s]!;
        steps.push({ name: timer.step, phase: timer.phase, ns: this.stepNs[s], subops: [], subCount: 0 });
      }
      const subStart = this.subStart[k];
      if (subStart >= this.subsWritten - this.subCap) {
        for (let j = 0; j < this.subCount[k]; j++) {
          const s = (subStart + j) % this.subCap;
          const step = steps[this.subStep[s]];
          if (step === undefined) continue;
          step.subops.push({ name: this.subName[s], ns: this.subNs[s] });
          step.subCount++;
        }
      }
    }
    return {
      at: this.at[k], pipelineId: this.pipelineId[k], variant: this.variant[k], op: this.op[k],
      collection: this.collection[k], totalNs: this.totalNs[k], acquireNs: this.acquireNs[k],
      upstreamNs: this.upstreamNs[k], ok: this.ok[k] === 1, steps, weight: this.weight[k],
    };
  }
}
