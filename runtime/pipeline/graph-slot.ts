// The graphs of one pipeline id: the baseline, and while a canary runs, a candidate beside it with
// the selector that splits requests between them. The slot object is stable for the life of the
// manager; loads swap its fields, so a connection resolves its slot once and pays one field read
// (plus the selector while a canary runs) per request.
import type { Pipeline } from './pipeline.ts';
import type { GraphSelector } from './selector.ts';
import type { ArmRecorder } from './arm-recorder.ts';
import type { ConnectionInfo } from './exchange.ts';
import type { GraphShadow } from './shadow.ts';

export class GraphSlot {
  readonly pipelineId: string;
  baseline: Pipeline;
  candidate: Pipeline | null = null;
  selector: GraphSelector | null = null;
  /**
   * While a canary runs: where each arm's requests are counted. Kept here, not only on the graphs,
   * so a graph published later into the slot (a reload of the baseline mid-canary) gets its arm's
   * recorder too (PipelineManager assigns it whenever it publishes a graph).
   */
  baselineEvidence: ArmRecorder | null = null;
  candidateEvidence: ArmRecorder | null = null;
  /**
   * While a shadow canary runs: the candidate run beside the baseline on a sample of the baseline's
   * requests (shadow.ts); null otherwise — the one field the request path reads for it.
   */
  shadow: GraphShadow | null = null;

  constructor(pipelineId: string, baseline: Pipeline) {
    this.pipelineId = pipelineId;
    this.baseline = baseline;
  }

  /** Publishes `pipeline` as the baseline, with the baseline arm's recorder. */
  setBaseline(pipeline: Pipeline): void {
    pipeline.evidence = this.baselineEvidence;
    this.baseline = pipeline;
  }

  /** Publishes `pipeline` (or none) as the candidate, with the candidate arm's recorder. */
  setCandidate(pipeline: Pipeline | null): void {
    if (pipeline !== null) pipeline.evidence = this.candidateEvidence;
    this.candidate = pipeline;
  }

  /**
   * The arms' recorders (null, null: no canary). Applied to the graphs published now; a graph
   * taken off the slot keeps what it had, so its requests still in flight count to their arm.
   */
  setEvidence(baseline: ArmRecorder | null, candidate: ArmRecorder | null): void {
    this.baselineEvidence = baseline;
    this.candidateEvidence = candidate;
    this.baseline.evidence = baseline;
    if (this.candidate !== null) this.candidate.evidence = candidate;
  }

  /** The graph that serves the next request: the command `body` from `conn`, its `lsid` at `lsidAt` (-1: none). */
  pick(conn: ConnectionInfo, body: Uint8Array, lsidAt: number): Pipeline {
    const c = this.candidate;
    const sel = this.selector;
    return c === null || sel === null ? this.baseline : sel.select(this.baseline, c, conn, body, lsidAt);
  }
}
