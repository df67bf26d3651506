// The StepRecorder the pipeline times steps into while tracing is on. Tracing needs step timings
// for its sampled requests even when profiling is off (or not configured), so graphs are built
// timed; `timingsOnly` then makes the timed loop run a request untimed — no clock read — unless the
// connection gave it RequestTimings (it is sampled, or profiled). While profiling is on, this is
// the profiler: same timers, same per-request path, every request timed as before.
import type { GraphKey, RequestTimings, StepRecorder, StepTimer } from '../pipeline/index.ts';
import type { Phase } from '../wasm/index.ts';

/** A timer that only names its step: tracing reads the request's RequestTimings, not the timer. */
class NamedTimer implements StepTimer {
  readonly step: string;
  readonly phase: Phase;
  constructor(step: string, phase: Phase) {
    this.step = step;
    this.phase = phase;
  }
  record(): void {}
  subop(): void {}
}

export class TracingRecorder implements StepRecorder {
  current: RequestTimings | null = null;
  private readonly profiler: StepRecorder | null;

  constructor(profiler: StepRecorder | null) {
    this.profiler = profiler;
  }

  get enabled(): boolean {
    return true;
  }

  /** Read when a graph is built (graphs are rebuilt when profiling.enabled changes on reload). */
  get timingsOnly(): boolean {
    return this.profiler === null || !this.profiler.enabled;
  }

  bind(key: GraphKey, step: string, phase: Phase): StepTimer {
    return this.profiler !== null && this.profiler.enabled ? this.profiler.bind(key, step, phase) : new NamedTimer(step, phase);
  }

  order(key: GraphKey, request: readonly string[], response: readonly string[]): void {
    if (this.profiler !== null && this.profiler.enabled) this.profiler.order?.(key, request, response);
  }
}
