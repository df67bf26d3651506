// The graphs of one pipeline id: the baseline, and while a canary runs, a candidate beside it with
// the selector that splits requests between them. The slot object is stable for the life of the
// manager; loads swap its fields, so a connection resolves its slot once and pays one field read
// (plus the selector while a canary runs) per request.
import type { Pipeline } from './pipeline.ts';
import type { GraphSelector } from './selector.ts';

export class GraphSlot {
  readonly pipelineId: string;
  baseline: Pipeline;
  candidate: Pipeline | null = null;
  selector: GraphSelector | null = null;

  constructor(pipelineId: string, baseline: Pipeline) {
    this.pipelineId = pipelineId;
    this.baseline = baseline;
  }

  /** The graph that serves the next request. */
  pick(): Pipeline {
    const c = this.candidate;
    const sel = this.selector;
    return c === null || sel === null ? this.baseline : sel.select(this.baseline, c);
  }
}
