// The evidence of one canary arm (baseline or candidate): every request the arm's graph served,
// counted by the connection when the request ends (ArmRecorder, runtime/pipeline). The canary
// decides on these figures, not on the profiler's: profiling.filters (operations, collections,
// minimum upstream latency) choose what the profiler shows, and profiling may be off altogether,
// but a candidate failing requests the profiler leaves out must still be rolled back.
//
// On the request path: two counter increments and one histogram record, no allocation. A latency
// under PENDING_US µs (nearly every request) is counted in a plain array and handed to the HDR
// histogram in bulk when the controller reads it (once per check_interval): hdr-histogram-js's
// recordValue costs ~70 ns (a log2 and a pow per value), the array increment a few. Below 2,048 µs
// HDR at 3 significant digits keeps every integer µs in a bucket of its own, so the hand-over leaves
// exactly what one recordValue per request would have.
import type * as hdr from 'hdr-histogram-js';
import type { ArmRecorder, Variant } from '../pipeline/index.ts';
import { HIGHEST_TRACKABLE_US, emptyHistogram, type GraphTotals } from './windows.ts';

/** Latencies (µs) below this are counted in `pending` until the histogram is read. */
const PENDING_US = 2048;

export class ArmEvidence implements ArmRecorder, GraphTotals {
  requests = 0;
  errors = 0;
  private readonly h = emptyHistogram();
  /** Counts of latencies 0 .. PENDING_US-1 µs not yet in `h`. */
  private readonly pending = new Float64Array(PENDING_US);
  /** The latencies with a non-zero pending count, in the order they first appeared. */
  private readonly touched = new Uint16Array(PENDING_US);
  private touchedCount = 0;

  record(totalMs: number, ok: boolean): void {
    this.requests++;
    if (!ok) this.errors++;
    const us = Math.round(totalMs * 1000);
    if (us < PENDING_US) {
      const i = us > 0 ? us : 0;
      if (this.pending[i]++ === 0) this.touched[this.touchedCount++] = i;
    } else {
      // A request longer than the histogram's range (60 s) counts as 60 s.
      this.h.recordValue(us > HIGHEST_TRACKABLE_US ? HIGHEST_TRACKABLE_US : us);
    }
  }

  /** The cumulative end-to-end latency distribution, µs (what is pending handed over first). */
  get latencyUs(): hdr.Histogram {
    const n = this.touchedCount;
    if (n > 0) {
      const h = this.h;
      const pending = this.pending;
      const touched = this.touched;
      for (let k = 0; k < n; k++) {
        const us = touched[k];
        h.recordValueWithCount(us, pending[us]);
        pending[us] = 0;
      }
      this.touchedCount = 0;
    }
    return this.h;
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
