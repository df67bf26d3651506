// One client connection: takes framed requests in arrival order, one at a time (drivers do not
// pipeline on a connection, and moreToCome writes must reach the upstream in order), answers the
// handshake, runs the request through the graph its slot picks, and forwards it upstream. Its
// parts, each with one job:
//   ReplyWriter    (reply-writer.ts)    encodes and writes replies; backpressure
//   legacy OP_QUERY (legacy-query.ts)   the handshake and legacy-command adapter
//   GraphSlot      (pipeline/)          baseline or candidate graph, per request
//   UpstreamRouter (upstream/router.ts) which pool: route step, cursor and transaction pins
//   UpstreamCall   (upstream/)          pool wait, send, reply, timeout, retry of an unsent request
// The connection is itself the frame sink and the owner the writer and the call report to, so a
// request allocates no closures.
import type { Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import { serialize, type Document } from 'bson';
import {
  CommandPeek, ReplyPeek, Framer, WireError, type FrameSink, type DocSequence, decompressFrame, parseOpMsg,
  validateDocument, validateDocuments, encodeOpMsg, retargetOpMsg, opcodeName, OP_MSG, OP_QUERY, OP_COMPRESSED,
  MSG_MORE_TO_COME, MSG_EXHAUST_ALLOWED, MSG_CHECKSUM_PRESENT, UNCOMPRESSIBLE_COMMANDS, HEADER_SIZE,
} from '../wire/index.ts';
import { UpstreamCall, newRequestId, type ConnectionSource, type UpstreamCallOwner, type UpstreamPool } from '../upstream/index.ts';
import { ErrorCodes, ProxyError, errorDocument } from '../errors/index.ts';
import { Exchange, RequestTimings, Verdict, type ConnectionInfo, type GraphSlot, type Pipeline } from '../pipeline/index.ts';
import type { Profiler, CompletedRequest } from '../profiling/index.ts';
import { removeElement, type TraceParent, type Tracing } from '../telemetry/index.ts';
import { HELLO_COMMANDS, emptyMetadata, helloReply, negotiateCompression, readClientMetadata, type ClientMetadata } from './handshake.ts';
import { ReplyKind, ReplyWriter, type ReplyWriterOwner } from './reply-writer.ts';
import { decodeCommand, legacyToMsgBody, readLegacyCommand } from './legacy-query.ts';
import { appendProfile, profileDocument } from './request-profile.ts';
import type { ServerContext } from './context.ts';
import { LoadBalancedState, endLoadBalancedUpstream } from './load-balanced.ts';
import { stateChangeReplacement } from './state-change.ts';
import { AUTH_COMMANDS, OPEN_COMMANDS, type ClientAuth } from './client-auth.ts';
import { ClientAuthSession, type LoginOwner } from './client-auth-session.ts';
import type { ScramCredential } from './client-auth-scram.ts';
/** While draining, how long a just-answered connection waits for a follow-up request before it ends. */
const QUIET_MS = 200;
/** A connection refused by clients.max_connections that sends nothing is closed after this long. */
const REFUSED_IDLE_MS = 5000;
/**
 * mongod refuses a document above maxBsonObjectSize, but a command may exceed it by this much
 * (BSONObjectMaxInternalSize: 16 MB + 16 KB) to carry its own fields around a maximal document.
 */
const COMMAND_OVERHEAD = 16 * 1024;
/** mongod's code for a document over the size limit. */
const BSON_OBJECT_TOO_LARGE = 10334;

export class ClientConnection implements FrameSink, UpstreamCallOwner, ReplyWriterOwner, ConnectionInfo, LoginOwner {
  readonly id: number;
  readonly socket: Socket;
  readonly clientAddress: string;
  /** Accepted past clients.max_connections: its first request is answered with an error, then it closes. */
  readonly refused: boolean;
  /** Client application name from the first hello (without its `?params`); ConnectionInfo for plugins. */
  appName = '';
  /** Identity: the user this connection logged in as (config `auth`), or one an auth step set; '' when anonymous. */
  user = '';
  /** Client authentication state, made at the first authentication command or hello field (auth on). */
  private login: ClientAuthSession | null = null;
  metadata: ClientMetadata = emptyMetadata();
  private helloSeen = false;
  /** Compressor ids and names this client negotiated. */
  private compressors: number[] = [];
  private negotiatedNames: ('snappy' | 'zlib' | 'zstd')[] = [];
  /** Set when the client's first hello said loadBalanced: true (see load-balanced.ts). */
  private lb: LoadBalancedState | null = null;
  /** The command document of the request in flight (load-balanced clients only). */
  private lbBody: Buffer | null = null;

  private readonly ctx: ServerContext;
  private readonly framer: Framer;
  private readonly writer: ReplyWriter;
  private readonly call: UpstreamCall;
  /** The graphs of this connection's pipeline (a stable slot; loads swap its contents). */
  private readonly graphs: GraphSlot;

  /** Requests read and not started, with when each was read (performance.now()). */
  private readonly queue: Buffer[] = [];
  private readonly queueReadAt: number[] = [];
  private readonly maxQueued: number;
  private paused = false;
  private busy = false;
  private closed = false;
  /** Whether the server has been told this connection is gone. */
  private released = false;
  /** The error for an unframeable stream, written once everything framed before it is answered. */
  private pendingFrameError: Buffer | null = null;
  /** Set by shutdown(): answer what was read, then close on a reply boundary. */
  private draining = false;
  private quietTimer: NodeJS.Timeout | null = null;
  /** When the last request was read: a draining connection quiet for QUIET_MS may close at once. */
  private lastReadAt = 0;

  // The request in flight.
  private readonly peek = new CommandPeek();
  /** Reads the upstream reply's `ok` (only while profiling). */
  private readonly replyPeek = new ReplyPeek();
  /** When it was read off the socket (performance.now()); elapsed_ns and the profiler count from here. */
  private readAt = 0;
  /** Its exchange when its graph has steps; null on the empty-pipeline path. */
  private exchange: Exchange | null = null;
  private pipeline: Pipeline | null = null;

  // Profiling of the request in flight (see runtime/profiling): the graph that served it (null:
  // not a pipeline request, e.g. a handshake), its timings, and whether its reply was ok.
  private readonly profiler: Profiler | null;
  private timings: RequestTimings | null = null;
  private completed: CompletedRequest | null = null;
  private profiledGraph: Pipeline | null = null;
  private replyOk = true;
  /** The client asked for per-request profiles (appName `?proxy_profile=true`). */
  private wantsProfile = false;
  /** Whether the request in flight is committed to the profiler (profiling was enabled at its start). */
  private profiling = false;

  // Tracing of the request in flight (see runtime/telemetry): whether it is sampled, the client's
  // trace context, when its phases started, the upstream that served it, and its error.
  private readonly tracing: Tracing | null;
  private traced = false;
  private traceParent: TraceParent | null = null;
  private requestPhaseAt = -1;
  private responsePhaseAt = -1;
  private upstreamPool: ConnectionSource | null = null;
  private errorCode = 0;
  private errorName = '';

  constructor(id: number, socket: Socket, ctx: ServerContext, refused = false) {
    this.id = id;
    this.refused = refused;
    this.socket = socket;
    this.ctx = ctx;
    this.clientAddress = `${socket.remoteAddress ?? ''}:${socket.remotePort ?? 0}`;
    this.framer = new Framer(this);
    this.writer = new ReplyWriter(socket, ctx.clientLimits.maxPendingReplyBytes, ctx.zlibLevel, ctx.stats, this);
    this.call = new UpstreamCall(this, ctx.stats, ctx.requestTimeoutMs);
    this.graphs = ctx.pipelines.slot(ctx.pipelineId);
    this.maxQueued = ctx.clientLimits.maxQueuedRequests;
    this.profiler = ctx.profiler;
    this.tracing = ctx.tracing;
    socket.setNoDelay(true);
    socket.on('data', (chunk: Buffer) => this.framer.push(chunk));
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

  // ---- intake -----------------------------------------------------------------------------

  onFrame(frame: Buffer): void {
    const now = performance.now();
    this.lastReadAt = now;
    this.queue.push(frame);
    this.queueReadAt.push(now);
    if (this.queue.length > this.maxQueued) this.updateReading();
    this.drain();
  }

  onFrameError(err: WireError, requestId: number, opCode: number): void {
    this.ctx.stats.decodeErrors++;
    this.logBadInput('closing client connection: unframeable input', err);
    // The stream cannot be resynchronised. Requests framed before the bad header are answered
    // first (a reply boundary), then the error, then the connection closes.
    if (this.closed) return;
    this.framer.fail();
    this.pendingFrameError = encodeOpMsg(newRequestId(), requestId, 0, errorDocument(ErrorCodes.ProtocolError,
      `${err.message} (opcode ${opCode}); the connection is closed because the stream cannot be resynchronised`));
    if (!this.busy && this.queue.length === 0) this.endWithFrameError();
  }

  private endWithFrameError(): void {
    const out = this.pendingFrameError!;
    this.pendingFrameError = null;
    this.closed = true;
    this.queue.length = 0;
    this.queueReadAt.length = 0;
    this.socket.end(out);
  }

  /** One log line per bad input at most LogThrottle allows, at warn, without a stack. */
  private logBadInput(msg: string, err: Error & { code?: string }): void {
    const suppressed = this.ctx.inputLogThrottle.take();
    if (suppressed < 0) return;
    const fields: Record<string, unknown> = { conn: this.id, client: this.clientAddress, error: err.message, code: err.code };
    if (suppressed > 0) fields.suppressed = suppressed;
    this.ctx.log.warn(msg, fields);
  }

  /** Starts queued requests while nothing is in flight and the client can take replies. */
  private drain(): void {
    while (!this.busy && !this.closed && !this.writer.blocked && this.queue.length > 0) {
      this.readAt = this.queueReadAt.shift()!;
      this.handle(this.queue.shift()!);
      // Answered without waiting (handshake, rejection, local reply, error): recorded now.
      if (!this.busy && this.profiledGraph !== null) this.commitProfile();
    }
    if (!this.busy && !this.closed && this.queue.length === 0) {
      if (this.pendingFrameError !== null) {
        this.endWithFrameError();
        return;
      }
      if (this.draining) {
        this.closeWhenQuiet();
        return;
      }
    }
    if (this.paused || this.writer.blocked) this.updateReading();
  }

  /**
   * Reading stops while the client's unread replies are over the bound or too many of its requests
   * are queued, and resumes when neither holds (the queue with hysteresis: below half the bound).
   */
  private updateReading(): void {
    if (this.closed) return;
    const stop = this.writer.blocked || this.queue.length > this.maxQueued;
    if (stop) {
      if (!this.paused) {
        this.paused = true;
        this.socket.pause();
      }
    } else if (this.paused && this.queue.length <= this.maxQueued >> 1) {
      this.paused = false;
      this.socket.resume();
    }
  }

  onWritable(): void {
    this.updateReading();
    this.drain();
  }

  // ---- one request ------------------------------------------------------------------------

  private handle(frame: Buffer): void {
    this.ctx.stats.requests++;
    let f = frame;
    let compressor = -1;
    let op = f.readInt32LE(12);
    const w = this.writer;
    // Until the message is parsed, trust its flags only to decide whether a reply is expected.
    w.target(ReplyKind.Msg, f.readInt32LE(4), -1,
      !(op === OP_MSG && f.length >= HEADER_SIZE + 4 && (f.readUInt32LE(HEADER_SIZE) & MSG_MORE_TO_COME) !== 0));
    try {
      if (op === OP_COMPRESSED) {
        const d = decompressFrame(f);
        f = d.frame;
        compressor = d.compressorId;
        op = f.readInt32LE(12);
        if (!this.compressors.includes(compressor)) {
          throw new WireError('PROXY_ERR_BAD_COMPRESSION', `compressor id ${compressor} was not negotiated on this connection`, true);
        }
      }
      if (this.refused) this.refuseOverLimit(f, op);
      else if (this.draining) this.refuseShuttingDown(f, op);
      else if (op === OP_MSG) this.handleMsg(f, compressor);
      else if (op === OP_QUERY) this.handleQuery(f);
      else {
        this.ctx.stats.decodeErrors++;
        this.replyError(new ProxyError(ErrorCodes.UnsupportedOpQueryCommand,
          `${opcodeName(op)} is not supported by this proxy; use OP_MSG (MongoDB 3.6+ drivers)`));
      }
    } catch (err) {
      if (err instanceof WireError) {
        this.ctx.stats.decodeErrors++;
        this.logBadInput('malformed request', err);
        this.replyError(new ProxyError(err.code === 'PROXY_ERR_BAD_BSON' ? ErrorCodes.InvalidBSON : ErrorCodes.ProtocolError, err.message));
      } else if (err instanceof ProxyError) {
        this.replyError(err);
      } else {
        // A defect of the proxy's, not bad input (that is a WireError): logged with its stack, but
        // through the same throttle, since a client may be able to trigger it at will.
        const suppressed = this.ctx.inputLogThrottle.take();
        if (suppressed >= 0) this.ctx.log.error('internal error handling a request', { conn: this.id, error: (err as Error).stack, suppressed });
        this.replyError(new ProxyError(ErrorCodes.InternalError, `proxy internal error: ${(err as Error).message}`));
      }
    }
  }

  private handleMsg(frame: Buffer, compressor: number): void {
    const msg = parseOpMsg(frame);
    const w = this.writer;
    w.expectReply = (msg.flags & MSG_MORE_TO_COME) === 0;
    this.checkSize(frame.length, msg.body.length);
    // Everything forwarded is checked whole first (mongod's wire object check): a request the
    // proxy cannot vouch for never reaches a shared upstream connection.
    validateDocument(msg.body, 0, msg.body.length);
    if (msg.sequences !== null) {
      for (let i = 0; i < msg.sequences.length; i++) {
        const payload = msg.sequences[i].payload;
        validateDocuments(payload, 0, payload.length);
      }
    }
    const op = this.peek.read(msg.body).op;
    w.compressor = compressor > 0 && !UNCOMPRESSIBLE_COMMANDS.has(op) ? compressor : -1;
    if (HELLO_COMMANDS.has(op)) {
      this.answerHello(op, decodeCommand(msg.body));
      return;
    }
    if (AUTH_COMMANDS.has(op)) {
      this.answerAuth(op, decodeCommand(msg.body), this.peek.db);
      return;
    }
    const auth = this.ctx.clientAuth;
    if (auth !== null && auth.required && !this.loggedIn && !OPEN_COMMANDS.has(op)) throw requiresAuthentication(op);
    this.dispatch(frame, msg.body, msg.sequences, msg.flags);
  }

  private handleQuery(frame: Buffer): void {
    this.writer.target(ReplyKind.LegacyQuery, this.writer.requestId, -1, true);
    const c = readLegacyCommand(frame);
    this.checkSize(frame.length, 0);
    if (HELLO_COMMANDS.has(c.op)) {
      this.answerHello(c.op, c.cmd);
      return;
    }
    if (AUTH_COMMANDS.has(c.op)) {
      this.answerAuth(c.op, c.cmd, c.db);
      return;
    }
    const auth = this.ctx.clientAuth;
    if (auth !== null && auth.required && !this.loggedIn && !OPEN_COMMANDS.has(c.op)) throw requiresAuthentication(c.op);
    const body = legacyToMsgBody(c);
    this.peek.read(body);
    this.dispatch(encodeOpMsg(0, 0, 0, body), body, null, 0);
  }

  private answerHello(op: string, request: Document): void {
    if (request.client !== undefined) {
      if (this.helloSeen && this.metadata.driver !== '') {
        throw new ProxyError(ErrorCodes.ClientMetadataCannotBeMutated, 'The client metadata document may only be sent in the first hello');
      }
      if (typeof request.client === 'object' && request.client !== null) {
        this.metadata = readClientMetadata(request.client as Document);
        this.appName = this.metadata.appName;
        this.wantsProfile = this.metadata.appParams.proxy_profile === 'true';
      }
    }
    if (!this.helloSeen) {
      this.helloSeen = true;
      if (request.loadBalanced === true) {
        this.lb = new LoadBalancedState();
        this.call.keepConnection = true;
      }
      const neg = negotiateCompression(request.compression, this.ctx.compression);
      this.compressors = neg.ids;
      this.negotiatedNames = neg.names;
    }
    this.writer.compressor = -1; // hello is never compressed
    const auth = this.ctx.clientAuth;
    const authFields = auth === null ? null : (this.login ??= new ClientAuthSession(this)).helloFields(request, auth);
    this.sendBody(helloReply(op, request, this.ctx.upstreamInfo(), this.id, this.negotiatedNames,
      this.lb !== null ? this.ctx.serviceId : null, authFields));
  }

  // ---- client authentication (config `auth`; client-auth*.ts) -----------------------------------

  private get loggedIn(): boolean {
    return this.login !== null && this.login.credential !== null;
  }

  /** saslStart, saslContinue, logout, authenticate, getnonce: answered here, never forwarded upstream. */
  private answerAuth(op: string, cmd: Document, db: string): void {
    const auth = this.ctx.clientAuth;
    if (auth === null) {
      throw new ProxyError(ErrorCodes.AuthenticationFailed,
        `client authentication is not enabled on this proxy (no \`auth\` in its configuration), so ${op} cannot succeed; connect without credentials (the proxy authenticates to the upstream with its own)`);
    }
    this.writer.compressor = -1; // authentication is never compressed
    const reply = (this.login ??= new ClientAuthSession(this)).command(op, cmd, db, auth);
    if (op === 'logout') this.user = '';
    this.sendBody(serialize(reply));
  }

  onLogin(c: ScramCredential): void {
    this.user = c.name;
    this.ctx.stats.authSucceeded++;
    this.ctx.log.debug('client logged in', { conn: this.id, client: this.clientAddress, user: c.name, db: c.db });
  }

  onLoginFailed(user: string, reason: string): void {
    this.ctx.stats.authFailed++;
    const suppressed = this.ctx.inputLogThrottle.take();
    if (suppressed < 0) return;
    const fields: Record<string, unknown> = { conn: this.id, client: this.clientAddress, user, reason };
    if (suppressed > 0) fields.suppressed = suppressed;
    this.ctx.log.warn('client authentication failed', fields);
  }

  /** Reload: drops this connection's login unless `next` still has its user with the same keys. True when dropped. */
  revalidateLogin(next: ClientAuth | null): boolean {
    const login = this.login;
    if (login === null || login.credential === null) return false;
    if (next !== null && next.stillValid(login.credential)) return false;
    login.credential = null;
    this.user = '';
    return true;
  }

  /**
   * Runs the request phase (when the graph has steps) and forwards, answers locally, or rejects.
   * The empty pipeline takes the direct path: no Exchange, no body access, no extra work.
   */
  private dispatch(frame: Buffer, body: Buffer, sequences: DocSequence[] | null, flags: number): void {
    const peek = this.peek;
    const tracing = this.tracing;
    let traced = false;
    if (tracing !== null) {
      this.traceParent = peek.traceparentAt >= 0 || peek.commentAt >= 0 ? tracing.parent(body, peek.traceparentAt, peek.commentAt, this.id) : null;
      traced = tracing.sample(this.traceParent);
    }
    if (peek.traceparentAt >= 0) {
      // The trace context wrapper is the proxy's: no step and no upstream sees it (a server
      // refuses unknown `$` fields). The rare path: a new body and frame, and the peek re-read.
      body = removeElement(body, peek.traceparentAt);
      peek.read(body);
      frame = encodeOpMsg(0, 0, flags & ~MSG_CHECKSUM_PRESENT, body, sequences);
    }
    if (this.lb !== null) this.lbBody = body;
    // Baseline, or — while a canary runs — the graph its selector picks for this request. The
    // response phase runs on the same graph (this.pipeline), whatever loads meanwhile.
    const pipeline = this.graphs.pick();
    const profiling = this.profiler !== null && this.profiler.enabled;
    this.profiling = profiling;
    this.traced = traced;
    if (profiling || traced) {
      this.profiledGraph = pipeline;
      this.replyOk = true;
      (this.timings ??= new RequestTimings()).reset();
      if (traced) {
        this.requestPhaseAt = -1;
        this.responsePhaseAt = -1;
        this.upstreamPool = null;
        this.errorCode = 0;
        this.errorName = '';
      }
    }
    if (pipeline.requestSteps.length === 0 && pipeline.responseSteps.length === 0) {
      this.exchange = null;
      this.pipeline = null;
      this.forward(frame, this.ctx.router.choose(peek, body, null));
      return;
    }
    const ex = new Exchange(this, pipeline.id, peek.op, peek.db, peek.collection, body, sequences, this.readAt);
    ex.requestId = this.writer.requestId;
    if (this.profiledGraph !== null) ex.timings = this.timings;
    this.exchange = ex;
    this.pipeline = pipeline;
    if (traced) this.requestPhaseAt = performance.now();
    pipeline.runRequest(ex);
    if (ex.verdict === Verdict.Reject) {
      this.replyRejected(ex);
      this.exchange = null;
      return;
    }
    if (ex.verdict === Verdict.LocalReply && ex.localReply !== null) {
      this.ctx.stats.localReplies++;
      this.answerFromPipeline(ex, ex.localReply);
      this.exchange = null;
      return;
    }
    let out = frame;
    if (ex.newRequest !== null) {
      // A replaced command carries its sequences folded in; keep only the transport flags.
      out = encodeOpMsg(0, 0, flags & (MSG_MORE_TO_COME | MSG_EXHAUST_ALLOWED), ex.newRequest);
    }
    this.forward(out, this.ctx.router.choose(peek, body, ex.route));
  }

  /** Runs the response phase over a local `reply` and writes what it leaves (or its rejection). */
  private answerFromPipeline(ex: Exchange, reply: Uint8Array): void {
    // The verdict stays LocalReply for a local answer: response steps see it (CallFlag.LocalReply),
    // e.g. logging marks cache hits.
    ex.replyBody = reply;
    if (this.traced) this.responsePhaseAt = performance.now();
    this.pipeline!.runResponse(ex);
    if ((ex.verdict as Verdict) === Verdict.Reject) {
      this.replyRejected(ex);
      return;
    }
    this.sendBody(ex.newReply ?? reply);
  }

  private replyRejected(ex: Exchange): void {
    this.replyOk = false;
    this.errorCode = ex.rejectCode;
    this.errorName = ex.rejectCodeName;
    this.ctx.stats.errorReplies++;
    this.ctx.stats.rejected++;
    this.sendBody(errorDocument(ex.rejectCode, ex.rejectMessage, [], ex.rejectCodeName || undefined));
  }

  /**
   * Request size limits as the handshake advertises them (taken from the upstream): a message over
   * maxMessageSizeBytes, or a command document over maxBsonObjectSize plus the command overhead
   * mongod allows, is answered with an error, never forwarded. The connection stays in sync (the
   * frame was read whole). Frames over 48,000,000 bytes never get here: the framer refuses their
   * header and the connection closes (onFrameError).
   */
  private checkSize(frameBytes: number, bodyBytes: number): void {
    const info = this.ctx.upstreamInfo();
    const maxMessage = info?.maxMessageSizeBytes ?? 48_000_000;
    const maxBson = info?.maxBsonObjectSize ?? 16_777_216;
    if (frameBytes > maxMessage) {
      this.ctx.stats.oversizeRequests++;
      throw new ProxyError(ErrorCodes.BadValue, `message of ${frameBytes} bytes is larger than maxMessageSizeBytes (${maxMessage})`);
    }
    if (bodyBytes > maxBson + COMMAND_OVERHEAD) {
      this.ctx.stats.oversizeRequests++;
      throw new ProxyError(BSON_OBJECT_TOO_LARGE,
        `command document of ${bodyBytes} bytes is larger than maxBsonObjectSize (${maxBson}) plus ${COMMAND_OVERHEAD} bytes of command overhead`);
    }
  }

  /**
   * The one request of a connection accepted past clients.max_connections (normally the driver's
   * handshake): answered with SocketException "connection limit reached", then the connection ends.
   */
  private refuseOverLimit(frame: Buffer, op: number): void {
    const w = this.writer;
    if (op === OP_QUERY) w.target(ReplyKind.LegacyQuery, w.requestId, -1, true);
    else if (op === OP_MSG) w.expectReply = frame.length < HEADER_SIZE + 4 || (frame.readUInt32LE(HEADER_SIZE) & MSG_MORE_TO_COME) === 0;
    this.replyError(new ProxyError(ErrorCodes.SocketException,
      `connection limit reached: the proxy serves at most ${this.ctx.clientLimits.maxConnections} client connections (clients.max_connections); retry later or on another proxy`));
    this.closeGracefully();
  }

  /** A request read while draining: ShutdownInProgress, as mongod answers during its own shutdown. */
  private refuseShuttingDown(frame: Buffer, op: number): void {
    this.ctx.stats.shutdownRefused++;
    const w = this.writer;
    if (op === OP_QUERY) w.target(ReplyKind.LegacyQuery, w.requestId, -1, true);
    else if (op === OP_MSG) w.expectReply = frame.length < HEADER_SIZE + 4 || (frame.readUInt32LE(HEADER_SIZE) & MSG_MORE_TO_COME) === 0;
    this.replyError(new ProxyError(ErrorCodes.ShutdownInProgress, 'the proxy is shutting down; retry on another proxy',
      ['RetryableWriteError']));
  }

  // ---- upstream ---------------------------------------------------------------------------

  private forward(frame: Buffer, pool: ConnectionSource): void {
    // exhaustAllowed is cleared: the upstream then answers each getMore once, and the client
    // (which only *allowed* exhaust) sends the next getMore itself.
    const out = retargetOpMsg(frame, newRequestId(), 0, MSG_EXHAUST_ALLOWED);
    this.busy = true;
    this.upstreamPool = pool;
    this.call.start(pool, out, this.writer.expectReply, this.peek.op, this.peek.hasTxnNumber);
  }

  onCallSent(): void {
    if (this.lb !== null && !this.lb.open) this.call.unpin();
    this.finish();
  }

  onCallError(err: ProxyError): void {
    if (this.lb !== null && !this.lb.open) this.call.unpin();
    this.replyError(err);
    this.finish();
  }

  onCallReply(frame: Buffer, pool: UpstreamPool): void {
    const lb = this.lb;
    if (lb !== null) {
      lb.afterReply(this.peek, this.lbBody!, frame.subarray(HEADER_SIZE + 5));
      if (!lb.open) this.call.unpin();
    }
    if (this.closed) {
      this.finish();
      return;
    }
    this.upstreamPool = pool;
    this.ctx.router.afterReply(frame, pool, this.peek);
    const replaced = stateChangeReplacement(frame, pool.describe());
    if (replaced !== null) {
      frame = replaced;
      this.ctx.stats.stateChangeErrorsRewritten++;
    }
    if (this.profiledGraph !== null) {
      const rp = this.replyPeek.read(frame.subarray(HEADER_SIZE + 5));
      this.replyOk = rp.ok;
      if (rp.failed) { this.errorCode = rp.errorCode; this.errorName = rp.errorName; }
    }
    const ex = this.exchange;
    if (ex !== null) {
      this.exchange = null;
      if (this.pipeline!.responseSteps.length > 0) {
        ex.replyBody = parseOpMsg(frame).body;
        if (this.traced) this.responsePhaseAt = performance.now();
        this.pipeline!.runResponse(ex);
        if ((ex.verdict as Verdict) === Verdict.Reject) {
          this.replyRejected(ex);
          this.finish();
          return;
        }
        if (ex.newReply !== null) {
          this.sendBody(ex.newReply);
          this.finish();
          return;
        }
        // No step changed the reply: forward the upstream's frame as the empty pipeline does
        // (header retargeted in place), not a re-encoded copy.
      }
    }
    if (this.wantsProfile && this.profiling && this.profiledGraph !== null) this.sendBody(parseOpMsg(frame).body);
    else this.writer.upstreamFrame(frame);
    this.finish();
  }

  private finish(): void {
    this.busy = false;
    this.exchange = null;
    if (this.profiledGraph !== null) this.commitProfile();
    if (!this.closed) this.drain();
    else this.endLoadBalanced();
  }

  /** Hands the request that just ended to the profiler (which applies its sampling filters) and to tracing. */
  private commitProfile(): void {
    const graph = this.profiledGraph!;
    this.profiledGraph = null;
    const call = this.call;
    if (this.traced) this.commitTrace(graph);
    if (!this.profiling) return;
    const upstream = call.repliedAt > 0 && call.startedAt >= this.readAt;
    // One record per connection, refilled per request (the profiler copies what it keeps).
    const r = (this.completed ??= {
      pipelineId: '', variant: '', op: '', collection: '', totalNs: 0, acquireNs: 0, upstreamNs: 0, ok: true, timings: this.timings!,
    });
    r.pipelineId = graph.id;
    r.variant = graph.key.variant;
    r.op = this.peek.op;
    r.collection = this.peek.collection;
    r.totalNs = (performance.now() - this.readAt) * 1e6;
    r.acquireNs = upstream ? (call.acquiredAt - call.startedAt) * 1e6 : 0;
    r.upstreamNs = upstream ? (call.repliedAt - call.writtenAt) * 1e6 : 0;
    r.ok = this.replyOk;
    r.timings = this.timings!;
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

  // ---- replies ----------------------------------------------------------------------------

  private sendBody(body: Uint8Array): void {
    if (this.closed) return;
    if (this.wantsProfile && this.profiling && this.profiledGraph !== null) body = this.withProfile(body);
    this.writer.body(body);
  }

  /** The reply with `proxy_profile` (SPEC §2.7) appended as a top-level field: this request's timings so far. */
  private withProfile(body: Uint8Array): Uint8Array {
    const call = this.call;
    const upstream = call.repliedAt > 0 && call.startedAt >= this.readAt;
    return appendProfile(body, profileDocument((performance.now() - this.readAt) * 1e6,
      upstream ? (call.repliedAt - call.startedAt) * 1e6 : 0, this.timings!));
  }

  /** Answers the request in flight with an error document. */
  private replyError(err: ProxyError): void {
    this.replyOk = false;
    this.errorCode = err.code;
    this.errorName = err.codeName ?? '';
    this.ctx.stats.errorReplies++;
    if (this.closed) return;
    this.writer.error(errorDocument(err.code, err.message, err.labels, err.codeName));
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
   */
  private closeWhenQuiet(): void {
    const wait = QUIET_MS - (performance.now() - this.lastReadAt);
    if (wait <= 0) {
      this.closeGracefully();
      return;
    }
    if (this.quietTimer === null) {
      this.quietTimer = setTimeout(() => {
        this.quietTimer = null;
        if (!this.busy && this.queue.length === 0) this.closeGracefully();
      }, wait);
    }
  }

  /**
   * The drain deadline passed. A request still in flight is answered with InterruptedAtShutdown
   * (its upstream connection, now in an unknown state, is dropped), then the connection ends.
   */
  forceClose(): void {
    if (this.closed) return;
    if (this.busy && this.call.active) {
      this.call.abandon();
      this.replyError(new ProxyError(ErrorCodes.InterruptedAtShutdown,
        `the proxy shut down before the upstream answered ${this.peek.op || 'the request'} (shutdown.drain_timeout_ms)`,
        this.peek.hasTxnNumber ? ['RetryableWriteError'] : []));
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
    this.framer.fail();
    this.queue.length = 0;
    this.queueReadAt.length = 0;
    this.socket.end();
  }

  /**
   * A load-balanced client's connection closed: its open transaction is aborted and its cursors
   * are killed upstream, on its pinned connection when it is still alive. A request in flight is
   * answered first (finish() calls this again once it has).
   */
  private endLoadBalanced(): void {
    const lb = this.lb;
    if (lb === null || this.call.active) return;
    this.lb = null;
    this.lbBody = null;
    const { cursors, transaction } = endLoadBalancedUpstream(lb, this.call.takePinned(), this.ctx.router, this.ctx.pool, this.ctx.log, this.clientAddress);
    if (transaction) this.ctx.stats.lbTransactionsAborted++;
    this.ctx.stats.lbCursorsKilled += cursors;
  }

  close(): void {
    this.closed = true;
    this.endLoadBalanced();
    this.call.close();
    this.framer.fail();
    this.queue.length = 0;
    this.queueReadAt.length = 0;
    if (!this.socket.destroyed) this.socket.destroy();
    if (!this.released) {
      // Reported once, whatever path closed us (socket close, error, or a framing error that
      // marked the connection closed while its last reply was still being written).
      this.released = true;
      this.ctx.onClientClosed(this);
    }
  }
}

/** As mongod answers an unauthenticated connection: code 13 Unauthorized. */
function requiresAuthentication(op: string): ProxyError {
  return new ProxyError(ErrorCodes.Unauthorized, `Command ${op} requires authentication`);
}
