// A shadow canary's hold on the request path (the canary implements it, runtime/canary/shadow.ts;
// the connection runs it, runtime/server/shadow-steps.ts). While a shadow canary runs, its
// pipeline's GraphSlot carries a GraphShadow: for a sampled share of the requests the baseline
// serves, the candidate graph runs beside it on its own Exchange over the same request, and what
// each graph would do is handed here to be compared. Only the baseline's result reaches the
// upstream and the client. With no shadow canary the slot's field is null: the request path reads
// that field (and, when the reply arrives, one of the connection's own) and does nothing else.
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
  /** What the canary recorded of this request's divergence (handed back with fetched()); null: none. */
  divergence: object | null = null;
  /** The candidate's command may be fetched (the client's answer is written and is `baselineReply`). */
  canFetch = false;

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
    this.divergence = null;
    this.canFetch = false;
  }
}

/** What follows the candidate's request phase (GraphShadow.requestDone). */
export const enum ShadowNext {
  /** Nothing: the comparison is over (the candidate's figures are recorded by ended()). */
  Done = 0,
  /** The candidate's response phase, over the same reply as the baseline's (or its own local answer). */
  Respond = 1,
  /**
   * The commands differ and the candidate's is a read the canary may send upstream itself
   * (`shadow_upstream_reads`): fetch it, run the candidate's response phase over its reply, and
   * hand the answer to fetched() — off the client's request, bounded by the canary's concurrency.
   */
  Fetch = 2,
}

export interface GraphShadow {
  /** The candidate graph run beside the baseline. */
  readonly candidate: Pipeline;
  /** Whether the request about to run is shadowed (a draw against shadow_pct); must be cheap and never throw. */
  sample(): boolean;
  /**
   * Both request phases ran (`s.baselineReply` is set when the baseline answered without the
   * upstream). Counts the request and any divergence of the outcomes or commands. Returns what
   * follows: Respond when both graphs forward the same command (the candidate's response phase
   * then runs over the baseline's reply: no second upstream call) or both answer locally; Fetch
   * only for a read whose commands differ, with upstream reads on and a slot free; else Done.
   */
  requestDone(s: ShadowRequest): ShadowNext;
  /** Both response phases ran (requestDone returned true): compares the replies. */
  responseDone(s: ShadowRequest): void;
  /** The request ended without a response phase for the candidate: its figures are recorded as they are. */
  ended(s: ShadowRequest): void;
  /**
   * A Fetch ended: `candidateReply` is what the candidate would answer after its response phase
   * over the upstream's reply to its own command (null: the call failed), `baselineReply` what the
   * client got; `divergence` is the request's (ShadowRequest.divergence). Frees the fetch's slot.
   */
  fetched(divergence: object, baselineReply: Uint8Array, candidateReply: Uint8Array | null, candidateRejected: boolean): void;
}
