// Where a traced request's step and sub-operation spans sit in time, for both ways spans are built
// (span-writer.ts, and tracing.ts's span records): steps run back to back within a phase (the timed
// loop), so each starts where the one before it ended — the first at its phase's start — and lasts
// its measured duration; a step's sub-operations are laid out in order from the step's start, each
// its measured duration, cut at the step's end. One cursor per Tracing, reused request after request.
import type { RequestTimings } from '../pipeline/index.ts';
import { Phase } from '../wasm/index.ts';
import type { TracedRequest } from './tracing.ts';

export class StepLayout {
  /** The step (index into the timings), its span's name and times, and its order within its phase (from 1). */
  step = -1;
  name = '';
  at = 0;
  end = 0;
  order = 0;
  /** A failed step: a trap, fuel, disabled, or the rejection that stopped the request. */
  error = false;
  rejected = false;
  /** The sub-operation (index into the timings) and its times. */
  sub = -1;
  subAt = 0;
  subEnd = 0;
  private r: TracedRequest | null = null;
  private t: RequestTimings | null = null;
  private phase = -1;
  private nextSub = 0;

  start(r: TracedRequest): void {
    this.r = r;
    this.t = r.timings;
    this.step = -1;
    this.phase = -1;
    this.end = 0;
    this.nextSub = 0;
  }

  /** Moves to the next step; false after the last. */
  nextStep(): boolean {
    const t = this.t!;
    const i = ++this.step;
    if (i >= t.count) return false;
    const timer = t.timers[i];
    let at = this.end;
    if (timer.phase !== this.phase) {
      this.phase = timer.phase;
      at = timer.phase === Phase.Request ? this.r!.requestPhaseAt : this.r!.responsePhaseAt;
      this.order = 0;
    }
    this.order++;
    this.at = at;
    this.end = at + t.ns[i] / 1e6;
    this.name = timer.step.startsWith('wasm:') ? timer.step.slice(5) : timer.step;
    this.rejected = i === t.rejectedAt;
    this.error = t.errors[i] || this.rejected;
    this.subEnd = at;
    return true;
  }

  /** Moves to the step's next sub-operation; false when it has no more. */
  nextSubop(): boolean {
    const t = this.t!;
    while (this.nextSub < t.subCount && t.subOf[this.nextSub] <= this.step) {
      const s = this.nextSub++;
      if (t.subOf[s] === this.step) {
        this.sub = s;
        this.subAt = this.subEnd;
        this.subEnd = Math.min(this.end, this.subAt + t.subNs[s] / 1e6);
        return true;
      }
    }
    return false;
  }
}
