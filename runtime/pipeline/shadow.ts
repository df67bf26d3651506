// A shadow canary's hold on the request path (the canary implements it, runtime/canary/shadow.ts;
// the connection runs it, runtime/server/shadow-steps.ts). While a shadow canary runs, its
// pipeline's GraphSlot carries a GraphShadow: for a sampled share of the requests the baseline
// serves, the candidate graph runs beside it on its own Exchange over the same request, and what
// each graph would do is handed here to be compared. Only the baseline's result reaches the
// upstream and the client. With no shadow canary the slot's field is null: the request path reads
// that one field and does nothing else.
import type { Exchange } from './exchange.ts';
import type { Pipeline } from './pipeline.ts';

/**
 * One shadowed request: both graphs' exchanges and final replies, and each graph's own step time.
 * One per connection, refilled per sampled request (every field set in the constructor).
 */
export class ShadowRequest {
  op = '';
  db = '';
  collection = '';
  /** The baseline's exchange (its verdict, the command it forwards, its route). */
  baseline: Exchange | null = null;
  /** The candidate's exchange, over the same request. */
  candidate: Exchange | null = null;
  /**
   * What each graph answers the client after its response phase (or its rejection or local answer,
   * as an error or reply document); null until its response phase ran.
   */
  baselineReply: Uint8Array | null = null;
  candidateReply: Uint8Array | null = null;
  /** Whether each graph's answer is an error it made itself (a step's rejection). */
  baselineRejected = false;
  candidateRejected = false;
  /** Each graph's steps' time for the request so far, ms (both phases). */
  baselineMs = 0;
  candidateMs = 0;

  reset(op: string, db: string, collection: string): void {
    this.op = op;
    this.db = db;
    this.collection = collection;
    this.baseline = null;
    this.candidate = null;
    this.baselineReply = null;
    this.candidateReply = null;
    this.baselineRejected = false;
    this.candidateRejected = false;
    this.baselineMs = 0;
    this.candidateMs = 0;
  }
}

export interface GraphShadow {
  /** The candidate graph run beside the baseline. */
  readonly candidate: Pipeline;
  /** Whether the request about to run is shadowed (a draw against shadow_pct); must be cheap and never throw. */
  sample(): boolean;
  /**
   * Both request phases ran (`s.baselineReply` is set when the baseline answered without the
   * upstream). Counts the request and any divergence of the outcomes or commands. Returns whether
   * the candidate's response phase runs on a copy of the baseline's reply: both graphs forward the
   * same command (then no second upstream call is ever made), or both answer locally.
   */
  requestDone(s: ShadowRequest): boolean;
  /** Both response phases ran (requestDone returned true): compares the replies. */
  responseDone(s: ShadowRequest): void;
  /** The request ended without a response phase for the candidate: its figures are recorded as they are. */
  ended(s: ShadowRequest): void;
}
