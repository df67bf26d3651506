// The evidence of one canary arm (baseline or candidate): every request the arm's graph served,
// counted by the connection when the request ends (ArmRecorder, runtime/pipeline). The canary
// decides on these figures, not on the profiler's: profiling.filters (operations, collections,
// minimum upstream latency) choose what the profiler shows, and profiling may be off altogether,
// but a candidate failing requests the profiler leaves out must still be rolled back.
//
// On the request path: two counter increments and one record into a JS-mode HDR histogram (plain
// arithmetic on a typed array, no WebAssembly call, no allocation). The controller reads the
// cumulative figures each check_interval and subtracts the previous reading (WindowTracker).
import type { ArmRecorder, Variant } from '../pipeline/index.ts';
import { HIGHEST_TRACKABLE_US, emptyHistogram, type GraphTotals } from './windows.ts';

export class ArmEvidence implements ArmRecorder, GraphTotals {
  requests = 0;
  errors = 0;
  readonly latencyUs = emptyHistogram();

  record(totalMs: number, ok: boolean): void {
    this.requests++;
    if (!ok) this.errors++;
    // A request longer than the histogram's range (60 s) counts as 60 s.
    const us = Math.round(totalMs * 1000);
    this.latencyUs.recordValue(us > HIGHEST_TRACKABLE_US ? HIGHEST_TRACKABLE_US : us < 0 ? 0 : us);
  }
}

/** Both arms of one canary's split. */
export class CanaryEvidence {
  readonly baseline = new ArmEvidence();
  readonly candidate = new ArmEvidence();

  arm(variant: Variant): ArmEvidence {
    return variant === 'baseline' ? this.baseline : this.candidate;
  }
}
