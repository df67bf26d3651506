// The steps of a connection's request in flight (DESIGN.md §3 steps 4 and 6): its request phase,
// its response phase over the upstream's or a local reply, both on the graph picked for it
// whatever loads meanwhile, and each verdict turned into what the client is answered. The
// connection writes those answers and forwards the rest. One per connection (one request is in
// flight at a time), and so is its Exchange: reset per request, so running a request's steps
// allocates no exchange. A shadowed request's exchange is handed to the shadow canary, which may
// still read it after the next request starts (detach()): the next request gets a new one.
import { opMsgBody, type CommandPeek, type DocSequence, type ReplyPeek } from '../wire/index.ts';
import { errorDocument } from '../errors/index.ts';
import { Exchange, Verdict, type ConnectionInfo, type Pipeline } from '../pipeline/index.ts';
import type { RequestRecord } from './request-record.ts';
import type { ServerStats } from './context.ts';

export class RequestSteps {
  /**
   * The request's exchange while its steps may still run: set by request() when its graph has
   * steps, cleared once it is answered. Between, the connection reads `newRequest` and `route`.
   */
  exchange: Exchange | null = null;
  /** The exchange of the latest request that ran a request phase, kept after it is answered (a shadow canary compares it). */
  current: Exchange | null = null;
  /** The exchange the next request reuses (null: a shadow canary kept the last one, make another). */
  private spare: Exchange | null = null;
  /** The graph the request runs on: its response phase runs there too. */
  private pipeline: Pipeline | null = null;
  private readonly conn: ConnectionInfo;
  private readonly peek: CommandPeek;
  private readonly record: RequestRecord;
  private readonly stats: ServerStats;
  /** The request in flight expects a reply (not moreToCome): a rejection is then written, else only counted. */
  private expectsReply = true;

  constructor(conn: ConnectionInfo, peek: CommandPeek, record: RequestRecord, stats: ServerStats) {
    this.conn = conn;
    this.peek = peek;
    this.record = record;
    this.stats = stats;
  }

  /** Nothing left to run for the request in flight (an empty graph, or it was answered). */
  clear(): void {
    this.exchange = null;
    this.current = null;
    this.pipeline = null;
  }

  /** The latest request's exchange stays its own (a shadow canary keeps it): the next request gets a new one. */
  detach(): void {
    this.spare = null;
  }

  /**
   * Runs the request phase of `pipeline` (which has steps) over the request the peek describes
   * (`body`, `sequences`; `requestId`: the client's; `expectsReply`: not moreToCome). Returns what the client is answered — a
   * rejection, or a local reply through the response phase — or null: forward it (`exchange`
   * says whether a step replaced the command or chose the upstream).
   */
  request(pipeline: Pipeline, body: Buffer, sequences: DocSequence[] | null, requestId: number, expectsReply: boolean): Uint8Array | null {
    this.expectsReply = expectsReply;
    const peek = this.peek;
    const rec = this.record;
    let ex = this.spare;
    if (ex === null) {
      ex = new Exchange(this.conn, pipeline.id, peek.op, peek.db, peek.collection, body, sequences, rec.readAt);
      this.spare = ex;
    } else ex.reset(pipeline.id, peek.op, peek.db, peek.collection, body, sequences, rec.readAt);
    ex.requestId = requestId;
    if (rec.graph !== null) ex.timings = rec.timings;
    this.exchange = ex;
    this.current = ex;
    this.pipeline = pipeline;
    rec.requestPhase();
    pipeline.runRequest(ex);
    if (ex.verdict === Verdict.Reject) {
      this.exchange = null;
      return this.rejection(ex);
    }
    if (ex.verdict === Verdict.LocalReply && ex.localReply !== null) {
      this.stats.localReplies++;
      this.exchange = null;
      return this.answerLocally(ex, ex.localReply);
    }
    return null;
  }

  /**
   * Runs the response phase over the upstream's reply `frame` (an OP_MSG). Returns what the client
   * is answered instead of it — a rejection or a reply a step rewrote — or null: no step ran or
   * none changed it, and the upstream's frame is forwarded as the empty pipeline does (header
   * retargeted in place), not a re-encoded copy. `status`: the reply's `ok` and `code` if the
   * connection has read them already (RequestRecord.readReply), so steps asking do not read them again.
   */
  response(frame: Buffer, status: ReplyPeek | null): Uint8Array | null {
    const ex = this.exchange;
    if (ex === null) return null;
    this.exchange = null;
    const pipeline = this.pipeline!;
    if (pipeline.responseSteps.length === 0) return null;
    const body = opMsgBody(frame);
    ex.replyBody = body;
    if (status !== null) ex.knownStatus(body, status.ok, status.code);
    this.record.responsePhase();
    pipeline.runResponse(ex);
    if ((ex.verdict as Verdict) === Verdict.Reject) return this.rejection(ex);
    return ex.newReply;
  }

  /** Runs the response phase over a local `reply`: what it leaves, or its rejection. */
  private answerLocally(ex: Exchange, reply: Uint8Array): Uint8Array {
    // The verdict stays LocalReply for a local answer: response steps see it (CallFlag.LocalReply),
    // e.g. logging marks cache hits.
    ex.replyBody = reply;
    this.record.responsePhase();
    this.pipeline!.runResponse(ex);
    if ((ex.verdict as Verdict) === Verdict.Reject) return this.rejection(ex);
    return ex.newReply ?? reply;
  }

  /**
   * A step rejected the request: the error document it is answered with (counted and recorded;
   * a moreToCome request is not answered, so its rejection counts as an error without a reply).
   */
  private rejection(ex: Exchange): Uint8Array {
    this.record.failed(ex.rejectCode, ex.rejectCodeName);
    if (this.expectsReply) this.stats.errorReplies++;
    else this.stats.errorsWithoutReply++;
    this.stats.rejected++;
    return errorDocument(ex.rejectCode, ex.rejectMessage, [], ex.rejectCodeName || undefined);
  }
}
