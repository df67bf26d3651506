// What is recorded of a connection's request in flight, and its commit when the request ends
// (DESIGN.md §3 step 8): the graph that served it, its step timings, its outcome (ok, error code
// and name), when its phases started, the upstream that served it, the client's trace context;
// handed to the profiler (runtime/profiling) and to tracing (runtime/telemetry), and appended to
// the reply as `proxy_profile` for a client that asked (SPEC §2.7).
//
// One per connection, reset per request: a connection has one request in flight at a time, so the
// hot path allocates nothing here (the timings and the profiler's record are made once, at the
// connection's first recorded request, and refilled after).
import { performance } from 'node:perf_hooks';
import { ReplyPeek, HEADER_SIZE, type CommandPeek } from '../wire/index.ts';
import type { ConnectionSource, UpstreamCall } from '../upstream/index.ts';
import { RequestTimings, type ArmRecorder, type Pipeline } from '../pipeline/index.ts';
import type { Profiler, CompletedRequest } from '../profiling/index.ts';
import type { TraceParent, Tracing } from '../telemetry/index.ts';
import { appendProfile, profileDocument } from './request-profile.ts';

export class RequestRecord {
  /** When the request was read off the socket (performance.now()); elapsed_ns and the profiler count from here. */
  readAt = 0;
  /**
   * The graph that served the request while it is recorded (profiled or traced); null when it is
   * not, or is not a pipeline request (e.g. a handshake). commit() clears it.
   */
  graph: Pipeline | null = null;
  /** Its step timings (valid while `graph` is set). */
  timings: RequestTimings | null = null;
  /** The client asked for per-request profiles (appName `?proxy_profile=true`; set at hello). */
  wantsProfile = false;
  /** The upstream the request was sent to (set by the connection; tracing names it). */
  upstreamPool: ConnectionSource | null = null;

  private readonly connId: number;
  /** The request in flight's command peek and upstream call (the connection's). */
  private readonly peek: CommandPeek;
  private readonly call: UpstreamCall;
  private readonly profiler: Profiler | null;
  private readonly tracing: Tracing | null;
  /** Reads the upstream reply's `ok` and error (only while recording; not its cursor id). */
  private readonly replyPeek = new ReplyPeek(false);
  /** The profiler's record of this connection, refilled per request (the profiler copies what it keeps). */
  private completed: CompletedRequest | null = null;
  private replyOk = true;
  /**
   * While a canary splits the request's pipeline: its arm's evidence (the graph's), given the
   * request's latency and outcome at commit — every request, whatever profiling and tracing record.
   */
  private evidence: ArmRecorder | null = null;
  /** Whether the request is committed to the profiler (profiling was enabled at its start). */
  private profiling = false;
  /** Whether the profiler keeps the request's frame (Profiler.admitFrame), so its sub-operations are timed. */
  private framed = false;
  // Tracing: whether the request is sampled, the client's trace context, when its phases started,
  // and its error.
  private traced = false;
  private traceParent: TraceParent | null = null;
  private requestPhaseAt = -1;
  private responsePhaseAt = -1;
  private errorCode = 0;
  private errorName = '';

  constructor(connId: number, peek: CommandPeek, call: UpstreamCall, profiler: Profiler | null, tracing: Tracing | null) {
    this.connId = connId;
    this.peek = peek;
    this.call = call;
    this.profiler = profiler;
    this.tracing = tracing;
  }

  /**
   * Whether tracing samples the request whose command document is `body` (read before the proxy
   * strips `$traceparent`); keeps the client's trace context.
   */
  sampleTrace(body: Buffer): boolean {
    const tracing = this.tracing;
    if (tracing === null) return false;
    const peek = this.peek;
    this.traceParent = peek.traceparentAt >= 0 || peek.commentAt >= 0 ? tracing.parent(body, peek.traceparentAt, peek.commentAt, this.connId) : null;
    return tracing.sample(this.traceParent);
  }

  /** The request runs through `graph`: recorded from here when profiling is enabled or it is `traced`. */
  begin(graph: Pipeline, traced: boolean): void {
    const profiler = this.profiler;
    const profiling = profiler !== null && profiler.enabled;
    this.profiling = profiling;
    this.traced = traced;
    const evidence = graph.evidence;
    this.evidence = evidence;
    if (evidence !== null) this.replyOk = true;
    if (profiling || traced) {
      this.graph = graph;
      this.replyOk = true;
      const framed = profiling && profiler.admitFrame(this.readAt);
      this.framed = framed;
      const t = (this.timings ??= new RequestTimings());
      t.reset();
      t.subops = framed || traced;
      // Without sampling filters the step times go straight to the histograms; they are stored for
      // the request only if something reads them at its end.
      const direct = profiling && profiler.recordsDirect;
      t.direct = direct;
      t.keep = !direct || framed || traced || this.wantsProfile;
      if (traced) {
        this.requestPhaseAt = -1;
        this.responsePhaseAt = -1;
        this.upstreamPool = null;
        this.errorCode = 0;
        this.errorName = '';
      }
    }
  }

  /** The request phase starts now. */
  requestPhase(): void {
    if (this.traced) this.requestPhaseAt = performance.now();
  }

  /** The response phase starts now. */
  responsePhase(): void {
    if (this.traced) this.responsePhaseAt = performance.now();
  }

  /**
   * The upstream's reply `frame` (an OP_MSG): its `ok` and error code, while recording or counting
   * for a canary. Returns what was read (the response steps' reply_ok and reply_code take it from
   * there), or null when nothing was.
   */
  readReply(frame: Buffer): ReplyPeek | null {
    if (this.graph === null && this.evidence === null) return null;
    const rp = this.replyPeek.read(frame, HEADER_SIZE + 5);
    this.replyOk = rp.ok;
    if (rp.failed) { this.errorCode = rp.errorCode; this.errorName = rp.errorName; }
    return rp;
  }

  /** The request is answered with an error (the proxy's or a step's rejection). */
  failed(code: number, codeName: string): void {
    this.replyOk = false;
    this.errorCode = code;
    this.errorName = codeName;
  }

  /** Whether replies to the request in flight carry `proxy_profile` (a recorded pipeline request of a client that asked). */
  get attachesProfile(): boolean {
    return this.wantsProfile && this.profiling && this.graph !== null;
  }

  /** The reply with `proxy_profile` (SPEC §2.7) appended as a top-level field: this request's timings so far. */
  withProfile(body: Uint8Array): Uint8Array {
    const call = this.call;
    const upstream = call.repliedAt > 0 && call.startedAt >= this.readAt;
    return appendProfile(body, profileDocument((performance.now() - this.readAt) * 1e6,
      upstream ? (call.repliedAt - call.startedAt) * 1e6 : 0, this.timings!));
  }

  /**
   * The request ended: counts it to its canary arm, if any, and hands it to the profiler (which
   * applies its sampling filters) and to tracing, if it was recorded.
   */
  commit(): void {
    const evidence = this.evidence;
    const graph = this.graph;
    if (graph === null && evidence === null) return;
    const totalMs = performance.now() - this.readAt;
    if (evidence !== null) {
      this.evidence = null;
      evidence.record(totalMs, this.replyOk);
    }
    if (graph === null) return;
    this.graph = null;
    const call = this.call;
    if (this.traced) this.commitTrace(graph);
    if (!this.profiling) return;
    const upstream = call.repliedAt > 0 && call.startedAt >= this.readAt;
    const r = (this.completed ??= {
      pipelineId: '', variant: 'baseline', op: '', collection: '', totalNs: 0, acquireNs: 0, upstreamNs: 0, ok: true, timings: this.timings!, framed: false,
    });
    r.pipelineId = graph.id;
    r.variant = graph.key.variant;
    r.op = this.peek.op;
    r.collection = this.peek.collection;
    r.totalNs = totalMs * 1e6;
    r.acquireNs = upstream ? (call.acquiredAt - call.startedAt) * 1e6 : 0;
    r.upstreamNs = upstream ? (call.repliedAt - call.writtenAt) * 1e6 : 0;
    r.ok = this.replyOk;
    r.timings = this.timings!;
    r.framed = this.framed;
    this.profiler!.commit(r);
  }

  /** A sampled request ended: its spans are built from what was recorded (runtime/telemetry). */
  private commitTrace(graph: Pipeline): void {
    this.traced = false;
    const call = this.call;
    const upstream = this.upstreamPool !== null && call.startedAt >= this.readAt;
    this.tracing!.record({
      parent: this.traceParent, pipelineId: graph.id, variant: graph.key.variant,
      op: this.peek.op, db: this.peek.db, collection: this.peek.collection,
      readAt: this.readAt, endAt: performance.now(),
      requestPhaseAt: this.requestPhaseAt, responsePhaseAt: this.responsePhaseAt,
      upstreamStartedAt: upstream ? call.startedAt : 0,
      upstreamAcquiredAt: upstream && call.acquiredAt >= call.startedAt ? call.acquiredAt : 0,
      upstreamWrittenAt: upstream && call.writtenAt >= call.startedAt ? call.writtenAt : 0,
      upstreamRepliedAt: upstream && call.repliedAt >= call.startedAt ? call.repliedAt : 0,
      upstream: upstream ? this.upstreamPool!.describe() : '',
      ok: this.replyOk, errorCode: this.errorCode, errorName: this.errorName, reply: this.replyPeek,
      timings: this.timings!,
    });
  }
}
