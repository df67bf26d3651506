// A shadow canary's evidence over a span of time (an evaluation window, or the whole stage): the
// shadowed requests, how many diverged and of which kind, and each graph's step time and outcome
// on them (SideWindows, so the latency and error rules read them as they read the arms'). The
// figures come from the ShadowCanary's cumulative counters; a window is the difference between
// two readings, as for the arms (windows.ts).
import { SideWindow, WindowTracker, round } from './windows.ts';
import { DIVERGENCE_KINDS, type DivergenceKind, type ShadowFigures } from './shadow.ts';

export class ShadowWindow {
  sampled = 0;
  diverged = 0;
  readonly byKind: Record<DivergenceKind, number> = { outcome: 0, request: 0, reply: 0 };
  readonly baseline: SideWindow;
  readonly candidate: SideWindow;

  constructor(baseline = new SideWindow(), candidate = new SideWindow()) {
    this.baseline = baseline;
    this.candidate = candidate;
  }

  /** Divergent share of the shadowed requests (0..1); NaN without any. */
  divergenceRate(): number {
    return this.sampled === 0 ? NaN : this.diverged / this.sampled;
  }

  add(w: ShadowWindow): void {
    this.sampled += w.sampled;
    this.diverged += w.diverged;
    for (const k of DIVERGENCE_KINDS) this.byKind[k] += w.byKind[k];
    this.baseline.add(w.baseline);
    this.candidate.add(w.candidate);
  }

  reset(): void {
    this.sampled = 0;
    this.diverged = 0;
    for (const k of DIVERGENCE_KINDS) this.byKind[k] = 0;
    this.baseline.reset();
    this.candidate.reset();
  }

  /** The figures shown in status and events. */
  view(): Record<string, unknown> {
    const rate = this.divergenceRate();
    const p95 = this.candidate.percentileMs(95) - this.baseline.percentileMs(95);
    return {
      sampled: this.sampled, diverged: this.diverged, divergence_rate: Number.isFinite(rate) ? round(rate, 6) : null, by_kind: { ...this.byKind },
      baseline_steps_p95_ms: finite(this.baseline.percentileMs(95)), candidate_steps_p95_ms: finite(this.candidate.percentileMs(95)),
      candidate_latency_p95_delta_ms: finite(p95),
    };
  }
}

function finite(x: number): number | null {
  return Number.isFinite(x) ? round(x) : null;
}

/** Turns a shadow canary's cumulative figures into successive windows. */
export class ShadowTracker {
  private readonly baseline = new WindowTracker();
  private readonly candidate = new WindowTracker();
  private sampled = 0;
  private diverged = 0;
  private readonly byKind: Record<DivergenceKind, number> = { outcome: 0, request: 0, reply: 0 };

  /** The figures since the last call (null: no shadow canary, an empty window). */
  take(sc: ShadowFigures | null): ShadowWindow {
    if (sc === null) return new ShadowWindow();
    const w = new ShadowWindow(this.baseline.take(sc.evidence.baseline), this.candidate.take(sc.evidence.candidate));
    // A new ShadowCanary (a resume, or a worker's restart) starts from zero: its counts are then the window.
    const reset = sc.sampled < this.sampled;
    w.sampled = reset ? sc.sampled : sc.sampled - this.sampled;
    w.diverged = reset ? sc.diverged : sc.diverged - this.diverged;
    for (const k of DIVERGENCE_KINDS) {
      w.byKind[k] = reset ? sc.byKind[k] : sc.byKind[k] - this.byKind[k];
      this.byKind[k] = sc.byKind[k];
    }
    this.sampled = sc.sampled;
    this.diverged = sc.diverged;
    return w;
  }

  prime(sc: ShadowFigures | null): void {
    this.take(sc);
  }
}
