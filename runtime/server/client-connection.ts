// One client connection: takes framed requests in arrival order, one at a time (drivers do not
// pipeline on a connection, and moreToCome writes must reach the upstream in order), dispatches
// each — handshake, or through the graph its slot picks and upstream — and owns the connection's
// lifecycle (close, drain, graceful close). Its parts, each with one job:
//   RequestQueue    (request-queue.ts)     requests read and not started; pauses reading
//   ReplyWriter     (reply-writer.ts)      encodes and writes replies; backpressure
//   legacy OP_QUERY (legacy-query.ts)      the handshake and legacy-command adapter
//   ClientHandshake (client-handshake.ts)  hello, compression, SCRAM login; the client's identity
//   RequestSteps    (request-steps.ts)     the request and response phases; verdicts into answers
//   RequestRecord   (request-record.ts)    profiling, tracing and proxy_profile of the request in flight
//   CursorSeal      (cursor-seal.ts)       auth on: the cursor ids the client sees are sealed with its user's key
//   LoadBalancedState (load-balanced.ts)   a load-balanced client's open cursors and transaction
//   request errors  (request-errors.ts)    size limits, refusals, bad input and defects as error documents
//   InflatePool     (wire/inflate-pool.ts) decompresses large compressed requests off the event loop
//   GraphSlot       (pipeline/)            baseline or candidate graph, per request
//   UpstreamRouter  (upstream/router.ts)   which pool: route step, cursor and transaction pins
//   UpstreamCall    (upstream/)            pool wait, send, reply, timeout, retry of an unsent request
// The connection is itself the frame sink and the owner the writer and the call report to, and
// its parts are made once per connection, so a request allocates no closures.
import type { Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import type { Document } from 'bson';
import {
  CommandPeek, Framer, WireError, type FrameSink, type DocSequence, type InflateOwner, type ReplyPeek, compressedSize, compressorOf,
  inflateFrame, inflatesInline, compressedMoreToCome, compressedMsgHead,
  parseOpMsg, validateDocument, validateDocuments, checkUniqueFields, encodeOpMsg, retargetOpMsg, opcodeName, OP_MSG, OP_QUERY, OP_COMPRESSED,
  MSG_MORE_TO_COME, MSG_EXHAUST_ALLOWED, MSG_CHECKSUM_PRESENT, UNCOMPRESSIBLE_COMMANDS, HEADER_SIZE,
} from '../wire/index.ts';
import { UpstreamCall, newRequestId, type ConnectionSource, type UpstreamCallOwner, type UpstreamPool } from '../upstream/index.ts';
import { ErrorCodes, ProxyError, errorDocument } from '../errors/index.ts';
import type { ConnectionRoute, GraphShadow, GraphSlot, Pipeline } from '../pipeline/index.ts';
import { removeElement } from '../telemetry/index.ts';
import { HELLO_COMMANDS, type ClientMetadata } from './handshake.ts';
import { ReplyKind, ReplyWriter, type ReplyWriterOwner } from './reply-writer.ts';
import { decodeCommand, legacyToMsgBody, readLegacyCommand } from './legacy-query.ts';
import type { ServerContext } from './context.ts';
import { LoadBalancedState, endLoadBalanced } from './load-balanced.ts';
import { stateChangeReplacement } from './state-change.ts';
import { AUTH_COMMANDS, type ClientAuth } from './client-auth.ts';
import { renameNotFoundCursor, sealReply, unsealRequest, type CursorSeal } from './cursor-seal.ts';
import { ClientHandshake, type IdentityOwner } from './client-handshake.ts';
import { RequestRecord } from './request-record.ts';
import { RequestSteps } from './request-steps.ts';
import { ShadowSteps } from './shadow-steps.ts';
import { RequestQueue } from './request-queue.ts';
import {
  checkRequestSize, checkSequenceSizes, connectionLimitReached, errorForThrown, interruptedAtShutdown, logBadInput, missingDatabase, shuttingDown,
  unsupportedOpcode,
} from './request-errors.ts';

/** While draining, how long a just-answered connection waits for a follow-up request before it ends. */
const QUIET_MS = 200;
/** A connection refused by clients.max_connections that sends nothing is closed after this long. */
const REFUSED_IDLE_MS = 5000;

/** Whether an OP_MSG frame says no reply is expected (flag bit 1; OP_MSG spec). */
function moreToCome(f: Buffer): boolean {
  return f.length >= HEADER_SIZE + 4 && (f.readUInt32LE(HEADER_SIZE) & MSG_MORE_TO_COME) !== 0;
}

export class ClientConnection implements FrameSink, UpstreamCallOwner, ReplyWriterOwner, InflateOwner, IdentityOwner {
  readonly id: number;
  readonly socket: Socket;
  readonly clientAddress: string;
  /** Accepted past clients.max_connections: its first request is answered with an error, then it closes. */
  readonly refused: boolean;
  /** Hello, compression, login; the client's identity (the ConnectionInfo plugins see). */
  private readonly handshake: ClientHandshake;
  /** Set when the client's first hello said loadBalanced: true (see load-balanced.ts). */
  private lb: LoadBalancedState | null = null;

  private readonly ctx: ServerContext;
  private readonly framer: Framer;
  private readonly writer: ReplyWriter;
  private readonly call: UpstreamCall;
  /**
   * The graphs of this connection's pipeline (a stable slot; loads swap its contents) when its
   * pipeline is settled for every request: always with one pipeline. Null when the next request
   * must route (config `pipelines`): see routeRequest().
   */
  private graphs: GraphSlot | null;
  /** The pipelines this connection can reach, settled at its first routed request; null: not yet, or changed. */
  private route: ConnectionRoute | null = null;
  /** The socket's remote address, for `match.client`. */
  private readonly remoteIp: string;

  /** Requests read and not started; pauses reading (request-queue.ts). */
  private readonly queue: RequestQueue;
  private busy = false;
  /** The request in flight is being decompressed off the event loop (busy is set too). */
  private inflating = false;
  private inflatingCompressor = -1;
  /** The start of the OP_COMPRESSED frame being decompressed, for its flags should decompression fail. */
  private inflatingHead: Buffer | null = null;
  /** It started during a drain: once decompressed, it is answered with ShutdownInProgress. */
  private inflatingWhileDraining = false;
  private closed = false;
  /** Whether the server has been told this connection is gone. */
  private released = false;
  /** The error for an unframeable stream, written once everything framed before it is answered. */
  private pendingFrameError: Buffer | null = null;
  /** Set by shutdown(): answer what was read, then close on a reply boundary. */
  private draining = false;
  /**
   * The client half-closed its side (sent FIN): nothing more will be read, but every request it
   * sent before is answered, as mongod does (it reads and answers one message at a time until the
   * end of the stream); the connection ends once they are. The plain-TCP listener keeps half-open
   * sockets (allowHalfOpen) for this. The TLS listener does not (a socket ended before its handshake
   * would stay open for ever): over TLS Node ends the writable side at the FIN, as it always did.
   */
  private readEnded = false;
  private quietTimer: NodeJS.Timeout | null = null;

  // The request in flight.
  private readonly peek = new CommandPeek();
  /** What is recorded of it (profiling, tracing, proxy_profile), reset per request. */
  private readonly record: RequestRecord;
  /** Its request and response phases, when its graph has steps. */
  private readonly steps: RequestSteps;
  /**
   * Client authentication on: the seal of the cursor ids of the request in flight (its user's;
   * cursor-seal.ts). Its ids were unsealed when it was read; its reply's are sealed as it is
   * written. Null: authentication off, ids pass unchanged and replies are not scanned.
   */
  private seal: CursorSeal | null = null;
  /** A shadow canary's candidate beside the baseline (made at the first shadowed request). */
  private shadowSteps: ShadowSteps | null = null;
  /** Set while the request in flight is shadowed and its candidate waits for the upstream's reply. */
  private shadowing: ShadowSteps | null = null;

  constructor(id: number, socket: Socket, ctx: ServerContext, refused = false) {
    this.id = id;
    this.refused = refused;
    this.socket = socket;
    this.ctx = ctx;
    this.clientAddress = `${socket.remoteAddress ?? ''}:${socket.remotePort ?? 0}`;
    this.remoteIp = socket.remoteAddress ?? '';
    this.handshake = new ClientHandshake(id, this.clientAddress, ctx, this);
    this.framer = new Framer(this);
    this.writer = new ReplyWriter(socket, ctx.clientLimits.maxPendingReplyBytes, ctx.zlibLevel, ctx.stats, this);
    this.call = new UpstreamCall(this, ctx.stats, ctx.requestTimeoutMs);
    this.record = new RequestRecord(id, this.peek, this.call, ctx.profiler, ctx.tracing);
    this.steps = new RequestSteps(this.handshake, this.peek, this.record, ctx.stats);
    this.graphs = ctx.routing.single;
    this.queue = new RequestQueue(socket, ctx.clientLimits.maxQueuedRequests, ctx.clientLimits.maxQueuedRequestBytes);
    socket.setNoDelay(true);
    socket.on('data', (chunk: Buffer) => this.framer.push(chunk));
    socket.on('end', () => this.onReadEnd());
    socket.on('error', () => this.close());
    socket.on('close', () => this.close());
    if (refused) {
      socket.setTimeout(REFUSED_IDLE_MS);
      socket.on('timeout', () => this.close());
    }
  }

  get idle(): boolean {
    return !this.busy;
  }

  /** What the client's first hello said about it (driver, appName and its parameters). */
  get metadata(): ClientMetadata {
    return this.handshake.metadata;
  }

  /** The appName or the user changed: with several pipelines, the next request settles the route again. */
  identityChanged(): void {
    if (this.ctx.routing.single === null) {
      this.graphs = null;
      this.route = null;
    }
  }

  /** Reload replaced the routing: the next request settles the route under it. */
  reroute(): void {
    this.graphs = this.ctx.routing.single;
    this.route = null;
  }

  /**
   * The slot of this request (several pipelines): the connection's route is settled once per
   * identity, and then either fixes the slot for every later request or picks it by the request's
   * command, db and collection (one memo lookup).
   */
  private routeRequest(): GraphSlot {
    let r = this.route;
    if (r === null) {
      const hs = this.handshake;
      r = this.route = this.ctx.routing.forConnection(hs.appName, hs.user, this.remoteIp);
      if (r.fixed !== null) return this.graphs = r.fixed;
    }
    const peek = this.peek;
    return r.pick(peek.op, peek.db, peek.collection);
  }

  /** Reload: drops this connection's login unless `next` still has its user with the same keys. True when dropped. */
  revalidateLogin(next: ClientAuth | null): boolean {
    return this.handshake.revalidateLogin(next);
  }

  // ---- intake -----------------------------------------------------------------------------

  onFrame(frame: Buffer): void {
    if (this.queue.push(frame, performance.now())) this.updateReading();
    this.drain();
  }

  onFrameError(err: WireError, requestId: number, opCode: number): void {
    this.ctx.stats.decodeErrors++;
    logBadInput(this.ctx, this, 'closing client connection: unframeable input', err);
    // The stream cannot be resynchronised. Requests framed before the bad header are answered
    // first (a reply boundary), then the error, then the connection closes.
    if (this.closed) return;
    this.framer.fail();
    this.pendingFrameError = encodeOpMsg(newRequestId(), requestId, 0, errorDocument(ErrorCodes.ProtocolError,
      `${err.message} (opcode ${opCode}); the connection is closed because the stream cannot be resynchronised`));
    if (!this.busy && this.queue.length === 0) this.endWithFrameError();
  }

  /** The client sent FIN: a frame half read is dropped (its rest never comes); the rest is answered, then the connection ends. */
  private onReadEnd(): void {
    this.readEnded = true;
    this.framer.fail();
    if (!this.busy) this.drain();
  }

  private endWithFrameError(): void {
    const out = this.pendingFrameError!;
    this.pendingFrameError = null;
    this.closed = true;
    this.queue.clear();
    this.socket.end(out);
  }

  /** Starts queued requests while nothing is in flight and the client can take replies. */
  private drain(): void {
    const queue = this.queue;
    while (!this.busy && !this.closed && !this.writer.blocked && queue.length > 0) {
      const frame = queue.shift();
      this.record.readAt = queue.readAt;
      this.handle(frame);
      // Answered without waiting (handshake, rejection, local reply, error): recorded now.
      if (!this.busy) this.record.commit();
    }
    if (!this.busy && !this.closed && queue.length === 0) {
      if (this.pendingFrameError !== null) {
        this.endWithFrameError();
        return;
      }
      if (this.draining) {
        this.closeWhenQuiet();
        return;
      }
      if (this.readEnded) {
        this.closeGracefully();
        return;
      }
    }
    if (queue.paused || this.writer.blocked) this.updateReading();
  }

  /** Reading stops while the client's unread replies are over their bound or too many requests are queued. */
  private updateReading(): void {
    if (!this.closed) this.queue.updateReading(this.writer.blocked);
  }

  onWritable(): void {
    this.updateReading();
    this.drain();
  }

  // ---- one request ------------------------------------------------------------------------

  private handle(frame: Buffer): void {
    this.ctx.stats.requests++;
    const op = frame.readInt32LE(12);
    // Until the message is parsed, trust its flags only to decide whether a reply is expected.
    this.writer.target(ReplyKind.Msg, frame.readInt32LE(4), -1, !(op === OP_MSG && moreToCome(frame)));
    if (op !== OP_COMPRESSED) {
      this.handleFrame(frame, op, -1, true);
      return;
    }
    // OP_COMPRESSED: the declared size is checked (and the size the snappy or zstd stream states)
    // before anything is decompressed, and decompression stops at it (compression.ts).
    const compressor = compressorOf(frame);
    let size: number;
    try {
      size = compressedSize(frame);
      if (!this.handshake.compressors.includes(compressor)) {
        throw new WireError('PROXY_ERR_BAD_COMPRESSION', `compressor id ${compressor} was not negotiated on this connection`, true);
      }
      checkRequestSize(HEADER_SIZE + size, 0, this.ctx);
    } catch (err) {
      this.refuseCompressed(frame, err);
      return;
    }
    if (!inflatesInline(frame, size)) {
      // Off the event loop (inflate-pool.ts): the connection stays busy, so its next requests
      // wait (and its reading pauses) until this one is answered; onInflated continues.
      this.busy = true;
      this.inflating = true;
      this.inflatingCompressor = compressor;
      this.inflatingHead = compressedMsgHead(frame);
      this.inflatingWhileDraining = this.draining;
      this.ctx.inflater.inflate(frame, size, this);
      return;
    }
    let plain: Buffer;
    try {
      plain = inflateFrame(frame, size);
    } catch (err) {
      this.refuseCompressed(frame, err);
      return;
    }
    this.handleFrame(plain, plain.readInt32LE(12), compressor, true);
  }

  /**
   * An OP_COMPRESSED request refused before it was decompressed: its own OP_MSG flags, read
   * without decompressing where possible (compressedMoreToCome), decide whether a reply is expected.
   * A moreToCome request gets none: the client reads no reply for it, so an error document would
   * be taken as the answer to its next request, and every answer after it would be one behind.
   */
  private refuseCompressed(frame: Buffer, err: unknown, moreToCome: boolean | null = compressedMoreToCome(frame)): void {
    if (moreToCome === true) this.writer.expectReply = false;
    this.replyError(errorForThrown(err, this.ctx, this));
  }

  onInflated(frame: Buffer): void {
    this.inflating = false;
    this.inflatingHead = null;
    this.busy = false;
    if (this.closed) return;
    // A drain that began meanwhile does not refuse it: it was the request in flight by then.
    this.handleFrame(frame, frame.readInt32LE(12), this.inflatingCompressor, this.inflatingWhileDraining);
    this.afterInflate();
  }

  onInflateFailed(err: Error, moreToCome?: boolean | null): void {
    const frame = this.inflatingHead!;
    this.inflating = false;
    this.inflatingHead = null;
    this.busy = false;
    if (this.closed) return;
    // The worker read the flag from the whole message; the kept head serves when it could not say.
    this.refuseCompressed(frame, err, moreToCome === undefined ? compressedMoreToCome(frame) : moreToCome);
    this.afterInflate();
  }

  /** The request that was being inflated is answered (or on its way upstream): as in finish(). */
  private afterInflate(): void {
    if (this.busy) return;
    this.record.commit();
    this.drain();
  }

  /**
   * A request in its original opcode (`compressor` ≥ 0: it came compressed). `refuseIfDraining`:
   * started during a drain, so answered with ShutdownInProgress rather than served.
   */
  private handleFrame(f: Buffer, op: number, compressor: number, refuseIfDraining: boolean): void {
    const w = this.writer;
    // A compressed message's own flags decide whether a reply is expected: a moreToCome request
    // that fails below gets none, or the client's stream would be out of step.
    if (compressor >= 0 && op === OP_MSG) w.expectReply = !moreToCome(f);
    try {
      if (this.refused) {
        // Past clients.max_connections: its one request is refused, then the connection ends.
        w.targetUnparsed(f, op);
        this.replyError(connectionLimitReached(this.ctx.clientLimits.maxConnections));
        this.closeGracefully();
      } else if (this.draining && refuseIfDraining) {
        this.ctx.stats.shutdownRefused++;
        w.targetUnparsed(f, op);
        this.replyError(shuttingDown());
      } else if (op === OP_MSG) this.handleMsg(f, compressor);
      else if (op === OP_QUERY) this.handleQuery(f);
      else {
        this.ctx.stats.decodeErrors++;
        this.replyError(unsupportedOpcode(opcodeName(op)));
      }
    } catch (err) {
      this.replyError(errorForThrown(err, this.ctx, this));
    }
  }

  private handleMsg(frame: Buffer, compressor: number): void {
    const msg = parseOpMsg(frame);
    const w = this.writer;
    w.expectReply = (msg.flags & MSG_MORE_TO_COME) === 0;
    checkRequestSize(frame.length, msg.body.length, this.ctx);
    // Everything forwarded is checked whole first (mongod's wire object check): a request the
    // proxy cannot vouch for never reaches a shared upstream connection.
    validateDocument(msg.body, 0, msg.body.length);
    if (msg.sequences !== null) {
      for (let i = 0; i < msg.sequences.length; i++) {
        const payload = msg.sequences[i].payload;
        validateDocuments(payload, 0, payload.length);
      }
      checkSequenceSizes(msg.sequences, this.ctx);
    }
    // One value per name: steps and the upstream must not read different copies of a field.
    checkUniqueFields(msg.body, msg.sequences);
    const op = this.peek.read(msg.body).op;
    w.compressor = compressor > 0 && !UNCOMPRESSIBLE_COMMANDS.has(op) ? compressor : -1;
    if (HELLO_COMMANDS.has(op) || AUTH_COMMANDS.has(op)) {
      this.answerHandshake(op, decodeCommand(msg.body), this.peek.db);
      return;
    }
    if (this.peek.db === '') throw missingDatabase(msg.body);
    this.handshake.authorize(op);
    const seal = this.seal = this.handshake.cursorSeal;
    if (seal !== null) unsealRequest(msg.body, this.peek, seal);
    this.dispatch(frame, msg.body, msg.sequences, msg.flags);
  }

  private handleQuery(frame: Buffer): void {
    this.writer.target(ReplyKind.LegacyQuery, this.writer.requestId, -1, true);
    const c = readLegacyCommand(frame);
    checkRequestSize(frame.length, 0, this.ctx);
    if (HELLO_COMMANDS.has(c.op) || AUTH_COMMANDS.has(c.op)) {
      this.answerHandshake(c.op, c.cmd, c.db);
      return;
    }
    this.handshake.authorize(c.op);
    const body = legacyToMsgBody(c);
    this.peek.read(body);
    const seal = this.seal = this.handshake.cursorSeal;
    if (seal !== null) unsealRequest(body, this.peek, seal);
    this.dispatch(encodeOpMsg(0, 0, 0, body), body, null, 0);
  }

  /**
   * hello and the authentication commands, answered by the proxy itself (client-handshake.ts) and
   * never compressed. The first hello may put the connection in load-balanced mode.
   */
  private answerHandshake(op: string, cmd: Document, db: string): void {
    const hs = this.handshake;
    if (!HELLO_COMMANDS.has(op)) {
      this.writer.compressor = -1;
      this.sendBody(hs.authReply(op, cmd, db));
      return;
    }
    hs.readHello(cmd);
    this.record.wantsProfile = hs.wantsProfile;
    if (hs.loadBalanced && this.lb === null) {
      this.lb = new LoadBalancedState();
      this.call.keepConnection = true;
    }
    this.writer.compressor = -1;
    this.sendBody(hs.helloReply(op, cmd));
  }

  /**
   * Runs the request phase (when the graph has steps) and forwards, answers locally, or rejects.
   * The empty pipeline takes the direct path: no Exchange, no body access, no extra work.
   */
  private dispatch(frame: Buffer, body: Buffer, sequences: DocSequence[] | null, flags: number): void {
    const peek = this.peek;
    const rec = this.record;
    const traced = rec.sampleTrace(body);
    if (peek.traceparentAt >= 0) {
      // The trace context wrapper is the proxy's: no step and no upstream sees it (a server
      // refuses unknown `$` fields). The rare path: a new body and frame, and the peek re-read.
      body = removeElement(body, peek.traceparentAt);
      peek.read(body);
      frame = encodeOpMsg(0, 0, flags & ~MSG_CHECKSUM_PRESENT, body, sequences);
    }
    if (this.lb !== null) this.lb.requestBody = body;
    // Baseline, or — while a canary runs — the graph its selector picks for this request. The
    // response phase runs on the same graph, whatever loads meanwhile.
    const slot = this.graphs ?? this.routeRequest();
    const pipeline = slot.pick(this.handshake, body, peek.lsidAt);
    rec.begin(pipeline, traced);
    this.shadowing = null;
    // A shadow canary: the one field read when there is none (pipeline/shadow.ts).
    const shadow = slot.shadow;
    if (shadow !== null && pipeline === slot.baseline && shadow.sample()) {
      this.dispatchShadowed(shadow, pipeline, frame, body, sequences, flags);
      return;
    }
    const steps = this.steps;
    if (pipeline.requestSteps.length === 0 && pipeline.responseSteps.length === 0) {
      steps.clear();
      this.forward(frame, this.ctx.router.choose(peek, body, null));
      return;
    }
    const answer = steps.request(pipeline, body, sequences, this.writer.requestId, this.writer.expectReply);
    if (answer !== null) {
      this.sendBody(this.sealed(answer));
      return;
    }
    const ex = steps.exchange!;
    let out = frame;
    if (ex.newRequest !== null) {
      // A replaced command carries its sequences folded in; keep only the transport flags.
      out = encodeOpMsg(0, 0, flags & (MSG_MORE_TO_COME | MSG_EXHAUST_ALLOWED), ex.newRequest);
    }
    this.forward(out, this.ctx.router.choose(peek, body, ex.route));
  }

  /**
   * dispatch() for a request a shadow canary sampled: the baseline runs as for any request, its
   * steps timed; the candidate runs once the baseline's answer is written (shadow-steps.ts), so the
   * client waits for nothing of the candidate's.
   */
  private dispatchShadowed(shadow: GraphShadow, pipeline: Pipeline, frame: Buffer, body: Buffer, sequences: DocSequence[] | null, flags: number): void {
    const sh = (this.shadowSteps ??= new ShadowSteps(this.handshake, this.ctx.profiler, this.peek, this.ctx));
    const steps = this.steps;
    const t0 = performance.now();
    const answer = steps.request(pipeline, body, sequences, this.writer.requestId, this.writer.expectReply);
    const baselineMs = performance.now() - t0;
    const ex = steps.current!;
    steps.detach();
    if (answer !== null) {
      this.sendBody(this.sealed(answer));
      sh.begin(shadow, ex, answer, baselineMs, body, sequences, this.record.readAt);
      return;
    }
    let out = frame;
    if (ex.newRequest !== null) out = encodeOpMsg(0, 0, flags & (MSG_MORE_TO_COME | MSG_EXHAUST_ALLOWED), ex.newRequest);
    sh.begin(shadow, ex, null, baselineMs, body, sequences, this.record.readAt);
    const expectReply = this.writer.expectReply;
    if (expectReply) this.shadowing = sh;
    this.forward(out, this.ctx.router.choose(this.peek, body, ex.route));
    if (!expectReply) sh.noReply();
  }

  // ---- upstream ---------------------------------------------------------------------------

  private forward(frame: Buffer, pool: ConnectionSource): void {
    // exhaustAllowed is cleared: the upstream then answers each getMore once, and the client
    // (which only *allowed* exhaust) sends the next getMore itself.
    const out = retargetOpMsg(frame, newRequestId(), 0, MSG_EXHAUST_ALLOWED);
    this.busy = true;
    this.record.upstreamPool = pool;
    this.call.start(pool, out, this.writer.expectReply, this.peek.op, this.peek.hasTxnNumber);
  }

  onCallSent(): void {
    if (this.lb !== null && !this.lb.open) this.call.unpin();
    this.finish();
  }

  onCallError(err: ProxyError): void {
    if (this.lb !== null && !this.lb.open) this.call.unpin();
    this.replyError(err);
    const sh = this.shadowing;
    if (sh !== null) {
      this.shadowing = null;
      sh.noReply();
    }
    this.finish();
  }

  onCallReply(frame: Buffer, pool: UpstreamPool): void {
    const lb = this.lb;
    if (lb !== null) {
      lb.afterReply(this.peek, lb.requestBody!, frame.subarray(HEADER_SIZE + 5));
      if (!lb.open) this.call.unpin();
    }
    if (this.closed) {
      // Nobody to answer, but the request is still recorded: with the reply it got.
      this.record.readReply(frame);
      this.finish();
      return;
    }
    const rec = this.record;
    rec.upstreamPool = pool;
    this.ctx.router.afterReply(frame, pool, this.peek);
    const replaced = stateChangeReplacement(frame, pool.describe());
    if (replaced !== null) {
      frame = replaced;
      this.ctx.stats.stateChangeErrorsRewritten++;
    }
    const status = rec.readReply(frame);
    if (this.shadowing !== null) {
      this.shadowedReply(this.shadowing, frame, status);
      return;
    }
    const answer = this.steps.response(frame, status);
    if (answer !== null) {
      this.sendBody(this.sealed(answer));
      this.finish();
      return;
    }
    // Nothing reads the upstream's reply after this: its cursor ids are sealed in place (a
    // CursorNotFound names the id the client sent: a new document).
    if (this.seal !== null) {
      const renamed = renameNotFoundCursor(frame, HEADER_SIZE + 5, this.peek, this.seal);
      if (renamed !== null) {
        this.sendBody(renamed);
        this.finish();
        return;
      }
      sealReply(frame, HEADER_SIZE + 5, this.peek.op, this.seal, false);
    }
    if (rec.attachesProfile) this.sendBody(parseOpMsg(frame).body);
    else this.writer.upstreamFrame(frame);
    this.finish();
  }

  /** onCallReply() of a shadowed request: the baseline's answer is written, then the candidate runs (on the same reply when it sends the same command). */
  private shadowedReply(sh: ShadowSteps, frame: Buffer, status: ReplyPeek | null): void {
    this.shadowing = null;
    const body = parseOpMsg(frame).body;
    const t0 = performance.now();
    const answer = this.steps.response(frame, status);
    const baselineMs = performance.now() - t0;
    // The candidate compares the upstream's reply: what the client gets is sealed in a copy.
    const seal = this.seal;
    if (answer !== null) this.sendBody(this.sealed(answer));
    else if (seal === null) {
      if (this.record.attachesProfile) this.sendBody(body);
      else this.writer.upstreamFrame(frame);
    } else {
      const renamed = renameNotFoundCursor(frame, HEADER_SIZE + 5, this.peek, seal);
      if (renamed !== null) this.sendBody(renamed);
      else {
        const out = sealReply(frame, HEADER_SIZE + 5, this.peek.op, seal, true);
        if (this.record.attachesProfile) this.sendBody(parseOpMsg(out).body);
        else this.writer.upstreamFrame(out);
      }
    }
    const call = this.call;
    sh.reply(answer ?? body, baselineMs, body, call.repliedAt > call.writtenAt ? (call.repliedAt - call.writtenAt) * 1e6 : 0);
    this.finish();
  }

  private finish(): void {
    this.busy = false;
    this.steps.clear();
    this.record.commit();
    if (!this.closed) this.drain();
    else this.endLoadBalanced();
  }

  // ---- replies ----------------------------------------------------------------------------

  /** A reply document of a step's (local answer or replaced reply) with its cursor ids sealed: a copy when any is. */
  private sealed(body: Uint8Array): Uint8Array {
    const seal = this.seal;
    if (seal === null) return body;
    const b = Buffer.from(body.buffer, body.byteOffset, body.byteLength);
    return renameNotFoundCursor(b, 0, this.peek, seal) ?? sealReply(b, 0, this.peek.op, seal, true);
  }

  private sendBody(body: Uint8Array): void {
    if (this.closed) return;
    const rec = this.record;
    if (rec.attachesProfile) body = rec.withProfile(body);
    this.writer.body(body);
  }

  /**
   * Answers the request in flight with an error document — unless it is a moreToCome request (no
   * reply is expected) or the connection has closed: counted apart then, as an error without a reply.
   */
  private replyError(err: ProxyError): void {
    this.record.failed(err.code, err.codeName ?? '');
    if (!this.closed && this.writer.error(errorDocument(err.code, err.message, err.labels, err.codeName))) this.ctx.stats.errorReplies++;
    else this.ctx.stats.errorsWithoutReply++;
  }

  // ---- shutdown and close -----------------------------------------------------------------

  /**
   * Graceful shutdown: the request in flight is answered with its reply; requests already read
   * behind it, and any read while draining, are answered with ShutdownInProgress (retryable),
   * never dropped; the connection ends on a reply boundary.
   */
  shutdown(): void {
    this.draining = true;
    if (!this.busy) this.drain();
  }

  /**
   * Draining and idle. A client that was just answered is likely writing its next request right
   * now; closing at once would leave that request, already on the wire, unanswered. So a
   * connection that read a request within the last QUIET_MS stays open until it has been quiet
   * that long, answering with ShutdownInProgress — after which a driver marks the server unknown
   * and stops using the connection — and then ends. A connection quiet for longer ends at once.
   *
   * What the client wrote and the proxy did not read yet is read and answered too: a connection
   * whose reading was paused (a client pipelining past clients.max_queued_requests) reading again,
   * and the quiet time counts from then; a frame half read is waited for; a client whose unread
   * replies keep its reading paused is waited for. shutdown.drain_timeout_ms bounds all of it
   * (forceClose).
   */
  private closeWhenQuiet(): void {
    const queue = this.queue;
    if (this.writer.blocked) return; // onWritable resumes reading and drains again
    const now = performance.now();
    queue.resumeToDrain(now);
    let wait = QUIET_MS - (now - queue.lastReadAt);
    if (wait <= 0 && this.framer.buffered > 0) wait = QUIET_MS;
    if (wait <= 0) {
      this.closeGracefully();
      return;
    }
    if (this.quietTimer === null) {
      this.quietTimer = setTimeout(() => {
        this.quietTimer = null;
        if (!this.busy && !this.closed && this.queue.length === 0) this.closeWhenQuiet();
      }, wait);
    }
  }

  /**
   * The drain deadline passed. A request still in flight is answered with InterruptedAtShutdown
   * (its upstream connection, now in an unknown state, is dropped; a message still being
   * decompressed is dropped), then the connection ends.
   */
  forceClose(): void {
    if (this.closed) return;
    if (this.busy && this.call.active) {
      this.call.abandon();
      this.replyError(interruptedAtShutdown(this.peek.op, this.peek.hasTxnNumber));
    } else if (this.inflating) {
      this.ctx.inflater.cancel(this);
      this.inflating = false;
      this.inflatingHead = null;
      this.replyError(interruptedAtShutdown('', false));
    }
    this.closeGracefully();
    // A client that does not read would hold the socket open: it gets a moment, then is cut.
    setTimeout(() => this.close(), 1000).unref();
  }

  private closeGracefully(): void {
    if (this.closed) return;
    this.closed = true;
    if (this.quietTimer !== null) {
      clearTimeout(this.quietTimer);
      this.quietTimer = null;
    }
    this.endLoadBalanced();
    this.call.close();
    this.cancelInflate();
    this.framer.fail();
    this.queue.clear();
    this.socket.end();
  }

  /** The connection closed while its request was being decompressed: the message is dropped, never answered. */
  private cancelInflate(): void {
    if (!this.inflating) return;
    this.inflating = false;
    this.inflatingHead = null;
    this.ctx.inflater.cancel(this);
  }

  /**
   * A load-balanced client's connection closed: what it has open upstream is ended
   * (load-balanced.ts). A request in flight is answered first (finish() calls this again once it has).
   */
  private endLoadBalanced(): void {
    const lb = this.lb;
    if (lb === null || this.call.active) return;
    this.lb = null;
    endLoadBalanced(lb, this.call, this.ctx, this.clientAddress);
  }

  close(): void {
    this.closed = true;
    this.endLoadBalanced();
    this.call.close();
    this.cancelInflate();
    this.framer.fail();
    this.queue.clear();
    if (!this.socket.destroyed) this.socket.destroy();
    if (!this.released) {
      // Reported once, whatever path closed us (socket close, error, or a framing error that
      // marked the connection closed while its last reply was still being written).
      this.released = true;
      this.ctx.onClientClosed(this);
    }
  }
}
