// Where a request's outcome goes when its graph is one arm of a canary (the baseline or the
// candidate beside it). The canary implements ArmRecorder; the pipeline manager attaches one to each
// graph of a pipeline while a canary splits it (GraphSlot), and the connection calls it once per
// request of that graph when the request ends — every request, whatever the profiler samples or
// filters and whether profiling is on at all, so a candidate cannot fail where the canary does not
// look. With no canary the graph's recorder is null and the connection skips it.

export interface ArmRecorder {
  /**
   * One request of the arm ended: `totalMs`, from reading it off the socket to its reply being
   * written (performance.now() difference), and whether it was answered ok. Called on the request
   * path: a couple of counter increments and a histogram record, no allocation, never throws.
   */
  record(totalMs: number, ok: boolean): void;
}
