// A loaded pipeline graph. The run loops are chosen once at construction: untimed (no clock
// reads at all) when the recorder is off, timed when it is on (one step-clock read per step
// boundary: a float, where hrtime.bigint() allocated a BigInt per read and per difference), sampled
// when the recorder times only some requests (tracing without profiling), and a no-op for an empty
// phase.
import { stepNow, NS_PER_TICK } from '../step-clock.ts';
import { Verdict, type Exchange } from './exchange.ts';
import type { StepRecorder, StepTimer } from './recorder.ts';
import type { RequestTimings } from './request-timings.ts';
import type { ArmRecorder } from './arm-recorder.ts';
import { StepRunner, STOP, ERROR } from './step-runner.ts';
import type { GraphKey } from './graph-key.ts';
import { RejectionCounts } from './rejections.ts';
import { Phase, phaseBit, type HostLog } from '../wasm/index.ts';

type RunFn = (ex: Exchange) => void;

/** Called when a step rejects a request (the rare path: counting and a debug line). */
type OnReject = (step: StepRunner, ex: Exchange) => void;

export class Pipeline {
  readonly key: GraphKey;
  /** key.pipelineId */
  readonly id: string;
  /** Requests this pipeline's steps rejected, by step and code (shared by the generations of one variant). */
  readonly rejections: RejectionCounts;
  readonly requestSteps: readonly StepRunner[];
  readonly responseSteps: readonly StepRunner[];
  /** Every distinct step of the graph (a step listed in both phases appears once). */
  readonly steps: ReadonlyMap<string, StepRunner>;
  readonly runRequest: RunFn;
  readonly runResponse: RunFn;
  /** Whether this graph times its steps (the recorder was enabled when it was built). */
  readonly timed: boolean;
  /**
   * While a canary splits this graph's pipeline: the arm's evidence, given every request this graph
   * serves when it ends (set by the manager from its GraphSlot); null otherwise.
   */
  evidence: ArmRecorder | null = null;

  constructor(key: GraphKey, requestSteps: StepRunner[], responseSteps: StepRunner[], steps: Map<string, StepRunner>,
    recorder: StepRecorder | null, logger: HostLog | null = null, rejections = new RejectionCounts()) {
    this.key = key;
    this.rejections = rejections;
    const id = key.pipelineId;
    this.id = id;
    this.requestSteps = requestSteps;
    this.responseSteps = responseSteps;
    this.steps = steps;
    const onReject: OnReject = (step, ex) => {
      rejections.add(step.id, ex.rejectCode);
      logger?.debug('request rejected by a step', { graph: key.toString(), step: step.id, op: ex.op, code: ex.rejectCode, reason: ex.rejectMessage });
    };
    const timed = recorder !== null && recorder.enabled;
    this.timed = timed;
    this.runRequest = requestSteps.length === 0 ? setRequestPhase : stepLoop(requestSteps, Phase.Request, recorder, onReject);
    this.runResponse = responseSteps.length === 0 ? setResponsePhase : stepLoop(responseSteps, Phase.Response, recorder, onReject);
  }
}

function setRequestPhase(ex: Exchange): void { ex.phase = Phase.Request; }
function setResponsePhase(ex: Exchange): void { ex.phase = Phase.Response; }

/** The steps of a phase that act in it: a step that declared it does nothing there (PhaseMask) is
 *  skipped, so listing logging in both phases costs nothing in the request phase. */
function acting(steps: readonly StepRunner[], phase: Phase): StepRunner[] {
  const bit = phaseBit(phase);
  return steps.filter((s) => (s.slot.phases & bit) !== 0);
}

/** The loop for a phase's steps: untimed without an enabled recorder, sampled for one that times only some requests, else timed. */
function stepLoop(all: readonly StepRunner[], phase: Phase, recorder: StepRecorder | null, onReject: OnReject): RunFn {
  if (recorder === null || !recorder.enabled) return untimedLoop(all, phase, onReject);
  return recorder.timingsOnly === true ? sampledLoop(all, phase, recorder, onReject) : timedLoop(all, phase, recorder, onReject);
}

function untimedLoop(all: readonly StepRunner[], phase: Phase, onReject: OnReject): RunFn {
  const steps = acting(all, phase);
  const n = steps.length;
  return (ex) => {
    ex.phase = phase;
    for (let i = 0; i < n; i++) {
      if ((steps[i]!.run(ex, phase) & STOP) !== 0) {
        if (ex.verdict === Verdict.Reject) onReject(steps[i]!, ex);
        return;
      }
    }
  };
}

/**
 * What a timed loop keeps: the steps that act in the phase, their timers, and the clock readings
 * and results of the run in progress. The loop stores those and nothing else, so it stays small
 * enough for V8 to inline the step call into it as it does in the untimed loop; the timings are
 * handed on after the last step (settle). A graph's loop never runs inside one of its own steps (a
 * step calls only host functions), so one pair of arrays per loop is enough.
 */
function timedParts(all: readonly StepRunner[], phase: Phase) {
  const steps = acting(all, phase);
  return {
    steps, n: steps.length, timers: steps.map((s) => s.timers![phase]),
    stamps: new Float64Array(steps.length + 1), results: new Int32Array(steps.length),
  };
}

function timedLoop(all: readonly StepRunner[], phase: Phase, recorder: StepRecorder, onReject: OnReject): RunFn {
  const { steps, n, timers, stamps, results } = timedParts(all, phase);
  return (ex) => {
    const t = ex.timings;
    ex.phase = phase;
    recorder.current = t;
    // One clock read per step boundary: a step's end is the next one's start, so what the loop
    // itself does between two steps counts in the next step's time. While a step runs, t.count is
    // its invocation's index (its sub-operations are recorded against it).
    const base = t === null ? 0 : t.count;
    let i = 0;
    stamps[0] = stepNow();
    while (i < n) {
      if (t !== null) t.count = base + i;
      const rc = steps[i]!.run(ex, phase);
      results[i++] = rc;
      stamps[i] = stepNow();
      if ((rc & STOP) !== 0) break;
    }
    recorder.current = null;
    if (t !== null) t.count = base;
    settle(t, timers, stamps, results, i);
    const last = results[i - 1]!;
    if ((last & STOP) !== 0 && ex.verdict === Verdict.Reject) {
      // Tracing marks the rejecting step's span (a rejection is not a step error: the profiler's
      // error counts stay traps and failures).
      if (t !== null) t.rejectedAt = t.count - 1;
      onReject(steps[i - 1]!, ex);
    }
  };
}

/**
 * The loop of a recorder that times only the requests given RequestTimings (tracing without
 * profiling: one request in a hundred at sample_rate 0.01). Both kinds run the same loop and the
 * same inlined step calls; a sampled request adds only the clock reads and stores behind `t !==
 * null`. (Two loops, one timed and one not, left a sampled request to run a whole second copy of
 * the step calls' machine code that the other 99 requests had long evicted from the CPU's caches.)
 */
function sampledLoop(all: readonly StepRunner[], phase: Phase, recorder: StepRecorder, onReject: OnReject): RunFn {
  const { steps, n, timers, stamps, results } = timedParts(all, phase);
  return (ex) => {
    const t = ex.timings;
    ex.phase = phase;
    let base = 0;
    if (t !== null) {
      recorder.current = t;
      base = t.count;
      stamps[0] = stepNow();
    }
    let i = 0;
    let rc = 0;
    while (i < n) {
      if (t !== null) t.count = base + i;
      rc = steps[i]!.run(ex, phase);
      i++;
      if (t !== null) {
        results[i - 1] = rc;
        stamps[i] = stepNow();
      }
      if ((rc & STOP) !== 0) break;
    }
    if (t !== null) {
      recorder.current = null;
      t.count = base;
      settle(t, timers, stamps, results, i);
    }
    if ((rc & STOP) !== 0 && ex.verdict === Verdict.Reject) {
      if (t !== null) t.rejectedAt = base + i - 1;
      onReject(steps[i - 1]!, ex);
    }
  };
}

/** Hands the times of the `ran` steps of a timed run to the request's timings (or straight to the
 *  timers when the request has none: the SDK harness, benches). */
function settle(t: RequestTimings | null, timers: readonly StepTimer[], stamps: Float64Array, results: Int32Array, ran: number): void {
  for (let k = 0; k < ran; k++) {
    const ns = Math.round((stamps[k + 1]! - stamps[k]!) * NS_PER_TICK);
    const error = (results[k]! & ERROR) !== 0;
    if (t !== null) t.step(timers[k]!, ns, error);
    else timers[k]!.record(ns, error);
  }
}
