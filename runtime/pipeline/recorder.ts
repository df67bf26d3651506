// Where step timings go. The profiling layer implements StepRecorder; the pipeline only calls it.
// Timers are bound when a graph is built — one per (graph, step, phase) — so the timed loop does
// no lookup, no string hashing and no prom-client call per step: it hands the measured time to the
// request's RequestTimings (committed, or dropped by the sampling filters, when the request ends),
// or straight to the timer when there is no request context (the SDK harness, benches).
import type { Phase } from '../wasm/index.ts';
import type { GraphKey } from './graph-key.ts';
import type { RequestTimings } from './request-timings.ts';

export interface StepTimer {
  /** "wasm:<name>" */
  readonly step: string;
  readonly phase: Phase;
  record(durationNs: number, error: boolean): void;
  subop(name: string, durationNs: number): void;
}

export interface StepRecorder {
  /** Read when a graph is built: a graph built while it is false runs the untimed loop (no clock reads). */
  readonly enabled: boolean;
  /**
   * Read when a graph is built. True: only a request given RequestTimings (ex.timings) is timed;
   * the others run untimed, with no clock read (tracing's recorder, where most requests are not
   * sampled). Absent or false: every request is timed.
   */
  readonly timingsOnly?: boolean;
  /** The request whose steps are running now (set by the timed loop, read by sub-operation sinks). */
  current: RequestTimings | null;
  bind(key: GraphKey, step: string, phase: Phase): StepTimer;
  /**
   * Called when a graph has been built, with its steps (`wasm:<name>`) of each phase in pipeline
   * order (steps are bound in whatever order they finish compiling): the profiler reports rows in
   * this order.
   */
  order?(key: GraphKey, request: readonly string[], response: readonly string[]): void;
}

/** A recorder made of two callbacks (tests, benches and the SDK harness). */
export function callbackRecorder(
  enabled: boolean,
  record: (pipelineId: string, step: string, phase: Phase, durationNs: number, error: boolean) => void,
  subop: (pipelineId: string, step: string, phase: Phase, name: string, durationNs: number) => void = () => {},
): StepRecorder {
  return {
    enabled,
    current: null,
    bind(key, step, phase) {
      const id = key.pipelineId;
      return {
        step, phase,
        record: (ns, error) => record(id, step, phase, ns, error),
        subop: (name, ns) => subop(id, step, phase, name, ns),
      };
    },
  };
}
