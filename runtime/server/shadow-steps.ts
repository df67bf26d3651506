// A connection's shadowed request (a shadow canary, runtime/pipeline/shadow.ts): the candidate
// graph run beside the baseline on its own Exchange over the same request bytes, once the
// baseline's answer to the client is written (or, for a request without a reply, once its command
// is handed to the upstream) — so a request's reply never waits for its own shadow: the candidate
// delays only what the event loop runs after it. The candidate never reaches the upstream: its
// response steps run on the same reply bytes the baseline got (read-only to every step: a step's
// change is a new buffer), and only when both graphs send the same command.
//
// Its cost is profiled as its own graph (variant `candidate`): the candidate's step timings are
// committed to the profiler as a request of that graph, its upstream time the baseline's.
//
// One per connection, made at its first shadowed request; requests that are not shadowed never
// touch it.
import { performance } from 'node:perf_hooks';
import { errorDocument } from '../errors/index.ts';
import { Exchange, RequestTimings, ShadowNext, ShadowRequest, Verdict, type ConnectionInfo, type DocSequence, type GraphShadow } from '../pipeline/index.ts';
import type { CompletedRequest, Profiler } from '../profiling/index.ts';
import type { CommandPeek } from '../wire/index.ts';
import type { UpstreamRouter } from '../upstream/index.ts';
import { ShadowRead, shadowReadCommand } from './shadow-read.ts';

/** What a shadow canary's own reads need of the server (shadow_upstream_reads). */
export interface ShadowReadContext {
  readonly router: UpstreamRouter;
  readonly requestTimeoutMs: number;
}

export class ShadowSteps {
  /** The request in flight, as the canary is given it. */
  readonly req = new ShadowRequest();
  private readonly conn: ConnectionInfo;
  private readonly profiler: Profiler | null;
  private shadow: GraphShadow | null = null;
  private timings: RequestTimings | null = null;
  private completed: CompletedRequest | null = null;
  /** The candidate's timings are committed to the profiler for this request. */
  private profiled = false;
  /** The shadowed request until the candidate's request phase runs. */
  private body: Uint8Array | null = null;
  private sequences: DocSequence[] | null = null;
  private readAt = 0;

  private readonly peek: CommandPeek;
  private readonly reads: ShadowReadContext;

  /** `peek`: the connection's peek of the request in flight (the router reads it for a shadow read). */
  constructor(conn: ConnectionInfo, profiler: Profiler | null, peek: CommandPeek, reads: ShadowReadContext) {
    this.conn = conn;
    this.profiler = profiler;
    this.peek = peek;
    this.reads = reads;
  }

  /**
   * The baseline's request phase ran over `ex` (`baselineMs` its steps' time), on the request
   * `body` and `sequences` read at `readAt`. `answer`: what the client was answered without the
   * upstream — already written: the candidate runs now, both phases. Null: the baseline's command
   * was handed to the upstream, and the candidate waits for the end of the request (reply() once
   * the baseline's reply is written, or noReply()), so the client waits for none of its work.
   */
  begin(shadow: GraphShadow, ex: Exchange, answer: Uint8Array | null, baselineMs: number, body: Uint8Array, sequences: DocSequence[] | null,
    readAt: number): void {
    this.shadow = shadow;
    const s = this.req;
    s.reset(ex.op, ex.db, ex.collection);
    s.baseline = ex;
    s.baselineMs = baselineMs;
    this.body = body;
    this.sequences = sequences;
    this.readAt = readAt;
    if (answer === null) return;
    s.baselineReply = answer;
    s.baselineRejected = ex.verdict === Verdict.Reject;
    if (!this.runRequest()) return;
    // Both answered locally: the candidate's response phase runs over its own local answer.
    this.respond(s.candidate!.localReply ?? answer);
    shadow.responseDone(s);
    this.commit(0);
  }

  /** The candidate's request phase over the same request, compared. True: its response phase follows. */
  private runRequest(): boolean {
    const shadow = this.shadow!;
    const s = this.req;
    const ex = s.baseline!;
    const graph = shadow.candidate;
    const cex = new Exchange(this.conn, graph.id, ex.op, ex.db, ex.collection, this.body!, this.sequences, this.readAt);
    this.body = null;
    this.sequences = null;
    cex.requestId = ex.requestId;
    const profiler = this.profiler;
    this.profiled = profiler !== null && profiler.enabled && graph.timed;
    if (this.profiled) {
      const t = (this.timings ??= new RequestTimings());
      t.reset();
      cex.timings = t;
    }
    s.candidate = cex;
    const t0 = performance.now();
    graph.runRequest(cex);
    s.candidateMs = performance.now() - t0;
    if (cex.verdict === Verdict.Reject) {
      s.candidateReply = errorDocument(cex.rejectCode, cex.rejectMessage, [], cex.rejectCodeName || undefined);
      s.candidateRejected = true;
    }
    const next = shadow.requestDone(s);
    if (next === ShadowNext.Respond) return true;
    shadow.ended(s);
    this.commit(0);
    if (next === ShadowNext.Fetch) this.fetch();
    return false;
  }

  /** ShadowNext.Fetch: the candidate's own read goes upstream (shadow-read.ts); the connection moves on. */
  private fetch(): void {
    const s = this.req;
    const shadow = this.shadow!;
    const cex = s.candidate!;
    // Its timings were this connection's, which the next request reuses: the read's response phase
    // records straight into the candidate's step statistics instead (untimed under tracing's recorder).
    cex.timings = null;
    const reply = s.baselineReply!;
    const read = new ShadowRead(shadow, cex, s.divergence!, Buffer.from(reply), this.reads.requestTimeoutMs);
    try {
      const cmd = shadowReadCommand(Buffer.from(cex.requestDocument()));
      read.start(this.reads.router.choose(this.peek, cmd, cex.route), cmd);
    } catch {
      read.fail();
    }
  }

  /**
   * The upstream's reply reached the baseline and its answer was written: `baselineReply` is what
   * the client got, `baselineMs` the baseline's response steps' time, `reply` the upstream's body
   * (the same bytes the baseline's response phase read), `upstreamNs` the upstream's time. Runs
   * the candidate's request phase, and its response phase over `reply` when it sends the same command.
   */
  reply(baselineReply: Uint8Array, baselineMs: number, reply: Uint8Array, upstreamNs: number): void {
    const s = this.req;
    s.baselineReply = baselineReply;
    s.baselineMs += baselineMs;
    s.baselineRejected = s.baseline!.verdict === Verdict.Reject;
    s.canFetch = true;
    if (!this.runRequest()) return;
    this.respond(reply);
    this.shadow!.responseDone(s);
    this.commit(upstreamNs);
  }

  /** The baseline's request gets no reply (moreToCome, or the upstream call failed): the candidate's request phase alone. */
  noReply(): void {
    if (this.runRequest()) {
      this.shadow!.ended(this.req);
      this.commit(0);
    }
  }

  /** The candidate's response phase over `reply`: its answer, or its rejection. */
  private respond(reply: Uint8Array): void {
    const s = this.req;
    const cex = s.candidate!;
    cex.replyBody = reply;
    const t0 = performance.now();
    this.shadow!.candidate.runResponse(cex);
    s.candidateMs += performance.now() - t0;
    if ((cex.verdict as Verdict) === Verdict.Reject) {
      s.candidateReply = errorDocument(cex.rejectCode, cex.rejectMessage, [], cex.rejectCodeName || undefined);
      s.candidateRejected = true;
    } else {
      s.candidateReply = cex.newReply ?? reply;
    }
  }

  /** The candidate's timings to the profiler, as a request of its own graph. */
  private commit(upstreamNs: number): void {
    if (!this.profiled) return;
    this.profiled = false;
    const s = this.req;
    const cex = s.candidate!;
    const graph = this.shadow!.candidate;
    const r = (this.completed ??= {
      pipelineId: '', variant: 'candidate', op: '', collection: '', totalNs: 0, acquireNs: 0, upstreamNs: 0, ok: true, timings: this.timings!,
    });
    r.pipelineId = graph.id;
    r.variant = graph.key.variant;
    r.op = s.op;
    r.collection = s.collection;
    r.totalNs = s.candidateMs * 1e6 + upstreamNs;
    r.upstreamNs = upstreamNs;
    r.ok = !s.candidateRejected && (s.candidateReply === null || cex.replyOk() !== 0);
    r.timings = this.timings!;
    this.profiler!.commit(r);
  }
}
