// Per-request frames for the flame graph (and later traces): what each sampled request spent in
// each step and sub-operation, the upstream and the wait for a connection. A bounded ring: frame
// objects are created once per slot and overwritten in place, so recording one allocates nothing
// once the ring is full.
import type { CompletedRequest } from './profiler.ts';

export interface FrameSubop { name: string; ns: number }

export interface FrameStep {
  /** "wasm:<name>" */
  name: string;
  phase: 0 | 1;
  ns: number;
  subops: FrameSubop[];
  /** Entries of `subops` in use (the ring reuses the array and its objects). */
  subCount: number;
}

export interface RequestFrame {
  /** When the request ended, ms since the epoch. */
  at: number;
  pipelineId: string;
  variant: string;
  op: string;
  collection: string;
  totalNs: number;
  acquireNs: number;
  upstreamNs: number;
  ok: boolean;
  /** Step invocations in run order (request phase, then response phase). */
  steps: FrameStep[];
}

function emptyFrame(): RequestFrame {
  return { at: 0, pipelineId: '', variant: '', op: '', collection: '', totalNs: 0, acquireNs: 0, upstreamNs: 0, ok: true, steps: [] };
}

export class FrameRing {
  readonly capacity: number;
  private readonly slots: RequestFrame[] = [];
  private next = 0;
  private filled = 0;

  constructor(capacity: number) {
    this.capacity = Math.max(1, capacity);
  }

  get size(): number {
    return this.filled;
  }

  push(r: CompletedRequest): void {
    let f = this.slots[this.next];
    if (f === undefined) {
      f = emptyFrame();
      this.slots[this.next] = f;
    }
    this.next = (this.next + 1) % this.capacity;
    if (this.filled < this.capacity) this.filled++;
    f.at = Date.now();
    f.pipelineId = r.pipelineId;
    f.variant = r.variant;
    f.op = r.op;
    f.collection = r.collection;
    f.totalNs = r.totalNs;
    f.acquireNs = r.acquireNs;
    f.upstreamNs = r.upstreamNs;
    f.ok = r.ok;
    const t = r.timings;
    const steps = f.steps;
    steps.length = t.count;
    for (let i = 0; i < t.count; i++) {
      let s = steps[i];
      if (s === undefined) {
        s = { name: '', phase: 0, ns: 0, subops: [], subCount: 0 };
        steps[i] = s;
      }
      s.name = t.timers[i].step;
      s.phase = t.timers[i].phase;
      s.ns = t.ns[i];
      s.subCount = 0;
    }
    for (let j = 0; j < t.subCount; j++) {
      const s = steps[t.subOf[j]];
      if (s === undefined) continue;
      const k = s.subCount++;
      let o = s.subops[k];
      if (o === undefined) {
        o = { name: '', ns: 0 };
        s.subops[k] = o;
      }
      o.name = t.subNames[j];
      o.ns = t.subNs[j];
    }
  }

  /** Frames that ended at or after `fromMs` (optionally of one graph), oldest first. Copies. */
  since(fromMs: number, pipelineId: string | null, variant: string | null): RequestFrame[] {
    const out: RequestFrame[] = [];
    const n = this.filled;
    const start = n < this.capacity ? 0 : this.next;
    for (let k = 0; k < n; k++) {
      const f = this.slots[(start + k) % this.capacity];
      if (f.at < fromMs) continue;
      if (pipelineId !== null && f.pipelineId !== pipelineId) continue;
      if (variant !== null && f.variant !== variant) continue;
      out.push({ ...f, steps: f.steps.map((s) => ({ ...s, subops: s.subops.slice(0, s.subCount).map((o) => ({ ...o })) })) });
    }
    return out;
  }

  clear(): void {
    this.next = 0;
    this.filled = 0;
  }
}
