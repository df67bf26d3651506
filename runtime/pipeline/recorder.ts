/** Where step timings go (the profiling layer implements it). */
export interface StepRecorder {
  readonly enabled: boolean;
  record(pipelineId: string, step: string, phase: 0 | 1, durationNs: number, error: boolean): void;
  subop(pipelineId: string, step: string, phase: 0 | 1, name: string, durationNs: number): void;
}
