// The timings of one request, gathered while it runs and handed to the profiler when it ends (the
// sampling filters — operation, collection, minimum upstream latency — can only be decided then).
// One per client connection, reset per request: the arrays grow to the longest pipeline once and
// are reused, so timing a request allocates nothing.
import type { StepTimer } from './recorder.ts';

export class RequestTimings {
  /** Step invocations, in run order. */
  count = 0;
  readonly timers: StepTimer[] = [];
  readonly ns: number[] = [];
  readonly errors: boolean[] = [];
  /** Sub-operations, each with the step invocation it ran in (an index into the arrays above). */
  subCount = 0;
  readonly subOf: number[] = [];
  readonly subNames: string[] = [];
  readonly subNs: number[] = [];
  /** The invocation whose step rejected the request (an index into the arrays above), -1: none. */
  rejectedAt = -1;
  /**
   * Whether the plugins' sub-operations are timed for this request (set by its connection when it
   * starts: the profiler keeps its frame, or tracing samples it). Steps are timed either way.
   */
  subops = true;
  /**
   * Whether each step's time goes straight to its timer as its phase ends (set by the connection
   * when the profiler has no sampling filter to apply at the end and keeps its histograms in process
   * memory); the profiler's commit then records the request's totals only.
   */
  direct = false;
  /**
   * Whether the step invocations are also kept in the arrays above (for whatever reads them when
   * the request ends: the profiler's commit when not `direct`, its frame, its trace spans, its
   * `proxy_profile`). With `direct` and nothing to read them, they are not stored at all.
   */
  keep = true;

  reset(): void {
    this.count = 0;
    this.subCount = 0;
    this.rejectedAt = -1;
  }

  step(timer: StepTimer, durationNs: number, error: boolean): void {
    if (this.direct) timer.record(durationNs, error);
    if (!this.keep) return;
    const i = this.count++;
    this.timers[i] = timer;
    this.ns[i] = durationNs;
    this.errors[i] = error;
  }

  /** A sub-operation of the step invocation now running (the next one step() will record). */
  subop(name: string, durationNs: number): void {
    const j = this.subCount++;
    this.subOf[j] = this.count;
    this.subNames[j] = name;
    this.subNs[j] = durationNs;
  }
}
