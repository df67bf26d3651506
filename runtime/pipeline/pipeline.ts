// A loaded pipeline graph. The run loops are chosen once at construction: untimed (no clock
// reads at all) when the recorder is off, timed (one hrtime pair per step) when it is on, and a
// no-op for an empty phase.
import type { Exchange } from './exchange.ts';
import type { StepRecorder } from './recorder.ts';
import { StepRunner, STOP, ERROR } from './step-runner.ts';

type RunFn = (ex: Exchange) => void;

export class Pipeline {
  readonly id: string;
  readonly requestSteps: readonly StepRunner[];
  readonly responseSteps: readonly StepRunner[];
  /** Every distinct step of the graph (a step listed in both phases appears once). */
  readonly steps: ReadonlyMap<string, StepRunner>;
  readonly runRequest: RunFn;
  readonly runResponse: RunFn;

  constructor(id: string, requestSteps: StepRunner[], responseSteps: StepRunner[], steps: Map<string, StepRunner>, recorder: StepRecorder | null) {
    this.id = id;
    this.requestSteps = requestSteps;
    this.responseSteps = responseSteps;
    this.steps = steps;
    const timed = recorder !== null && recorder.enabled;
    this.runRequest = requestSteps.length === 0 ? setPhase0
      : timed ? timedLoop(id, requestSteps, 0, recorder) : untimedLoop(requestSteps, 0);
    this.runResponse = responseSteps.length === 0 ? setPhase1
      : timed ? timedLoop(id, responseSteps, 1, recorder) : untimedLoop(responseSteps, 1);
  }
}

function setPhase0(ex: Exchange): void { ex.phase = 0; }
function setPhase1(ex: Exchange): void { ex.phase = 1; }

/** The steps of a phase that act in it: a step that declared it does nothing there (PhaseBit) is
 *  skipped, so listing logging in both phases costs nothing in the request phase. */
function acting(steps: readonly StepRunner[], phase: 0 | 1): StepRunner[] {
  const bit = phase === 0 ? 1 : 2;
  return steps.filter((s) => (s.slot.phases & bit) !== 0);
}

function untimedLoop(all: readonly StepRunner[], phase: 0 | 1): RunFn {
  const steps = acting(all, phase);
  const n = steps.length;
  return (ex) => {
    ex.phase = phase;
    for (let i = 0; i < n; i++) {
      if ((steps[i]!.run(ex, phase) & STOP) !== 0) return;
    }
  };
}

function timedLoop(pipelineId: string, all: readonly StepRunner[], phase: 0 | 1, recorder: StepRecorder): RunFn {
  const steps = acting(all, phase);
  const n = steps.length;
  const ids = steps.map((s) => s.id);
  const clock = process.hrtime.bigint;
  return (ex) => {
    ex.phase = phase;
    for (let i = 0; i < n; i++) {
      const t0 = clock();
      const rc = steps[i]!.run(ex, phase);
      const t1 = clock();
      recorder.record(pipelineId, ids[i]!, phase, Number(t1 - t0), (rc & ERROR) !== 0);
      if ((rc & STOP) !== 0) return;
    }
  };
}

