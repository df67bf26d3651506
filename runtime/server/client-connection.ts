// One client connection: frames requests, answers the handshake, and forwards everything else
// through the pipeline to a pooled upstream connection. Requests on one connection are handled in
// arrival order, one at a time (drivers do not pipeline on a connection, and moreToCome writes
// must reach the upstream in order). The connection object is itself the frame sink, pool waiter
// and reply handler, so a request allocates no closures.
//
// Backpressure (undici's and Node streams' boolean kind): after each reply the connection looks at
// the bytes its socket still holds for the client. Past clients.max_pending_reply_bytes it stops
// reading the client and starts no further request until the socket drains, so a client that
// pipelines requests and never reads costs the proxy at most that bound plus one reply. Upstream
// connections need no separate pause: one carries one request of one client at a time, and no
// request is sent upstream for a client that cannot take its reply.
import type { Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import { deserialize, serialize, type Document } from 'bson';
import {
  CommandPeek, Framer, WireError, type FrameSink, decompressFrame, compressFrame, parseOpMsg, parseOpQuery,
  validateDocument, validateDocuments,
  encodeOpMsg, encodeOpReply, retargetOpMsg, opcodeName, OP_MSG, OP_QUERY, OP_COMPRESSED,
  MSG_MORE_TO_COME, MSG_EXHAUST_ALLOWED, UNCOMPRESSIBLE_COMMANDS, REPLY_QUERY_FAILURE, HEADER_SIZE,
} from '../wire/index.ts';
import { newRequestId, type PoolWaiter, type ReplyHandler, type UpstreamConnection } from '../upstream/index.ts';
import { ErrorCodes, ProxyError, errorDocument } from '../errors/index.ts';
import { Exchange, Verdict, type ConnectionInfo, type GraphSlot, type Pipeline } from '../pipeline/index.ts';
import type { UpstreamPool } from '../upstream/index.ts';
import type { DocSequence } from '../wire/index.ts';
import { HELLO_COMMANDS, emptyMetadata, helloReply, negotiateCompression, readClientMetadata, type ClientMetadata } from './handshake.ts';
import type { ServerContext } from './context.ts';

const AUTH_COMMANDS: ReadonlySet<string> = new Set(['saslStart', 'saslContinue', 'authenticate', 'getnonce', 'logout']);
/** How long an upstream connection stays with the client after its fire-and-forget write (see hold()). */
const HOLD_AFTER_FIRE_AND_FORGET_MS = 50;
/** While draining, how long a just-answered connection waits for a follow-up request before it ends. */
const QUIET_MS = 200;

const enum Kind { None = 0, Msg = 1, LegacyQuery = 2 }

export class ClientConnection implements FrameSink, PoolWaiter, ReplyHandler, ConnectionInfo {
  readonly id: number;
  readonly socket: Socket;
  readonly clientAddress: string;
  /** Client application name from the first hello (without its `?params`); ConnectionInfo for plugins. */
  appName = '';
  /** Identity established by an auth step ('' when anonymous). */
  user = '';
  private readonly ctx: ServerContext;
  private readonly framer: Framer;
  metadata: ClientMetadata = emptyMetadata();
  private helloSeen = false;
  /** Compressor ids this client negotiated. */
  private compressors: number[] = [];
  private readonly queue: Buffer[] = [];
  private busy = false;
  private closed = false;
  /** Whether the server has been told this connection is gone. */
  private released = false;
  /** Set by shutdown(): answer what was read, then close on a reply boundary. */
  private draining = false;
  /** While draining: this connection answered a request since shutdown() and waits QUIET_MS for a follow-up. */
  private quietTimer: NodeJS.Timeout | null = null;
  /** When the last request was read (monotonic ms): a connection quiet for QUIET_MS may close at once. */
  private lastReadAt = 0;
  private paused = false;
  /** The client has more unread reply bytes than clients.max_pending_reply_bytes: wait for 'drain'. */
  private writeBlocked = false;
  private readonly maxPending: number;
  private readonly maxQueued: number;

  // The request in flight (one at a time).
  private readonly peek = new CommandPeek();
  private kind: Kind = Kind.None;
  private requestId = 0;
  private replyCompressor = 0;
  /** The frame to send upstream, kept until the request completes so an unsent one can be retried. */
  private outgoing: Buffer | null = null;
  /** Whether the request in flight was already re-sent once on a fresh upstream connection. */
  private retried = false;
  private expectReply = true;
  /** The upstream connection serving the request in flight, for the request timeout. */
  private upstream: UpstreamConnection | null = null;
  private timer: NodeJS.Timeout | null = null;
  private timedOut = false;
  /** The pool serving the request in flight (the default one, or a route's). */
  private activePool: UpstreamPool;
  /** The exchange of the request in flight when its pipeline has steps; null on the empty-pipeline path. */
  private exchange: Exchange | null = null;
  private pipeline: Pipeline | null = null;
  /** The graphs of this connection's pipeline (a stable slot; loads swap its contents). */
  private readonly graphs: GraphSlot;

  constructor(id: number, socket: Socket, ctx: ServerContext) {
    this.id = id;
    this.socket = socket;
    this.ctx = ctx;
    this.clientAddress = `${socket.remoteAddress ?? ''}:${socket.remotePort ?? 0}`;
    this.framer = new Framer(this);
    this.activePool = ctx.pool;
    this.graphs = ctx.pipelines.slot(ctx.pipelineId);
    this.maxPending = ctx.clientLimits.maxPendingReplyBytes;
    this.maxQueued = ctx.clientLimits.maxQueuedRequests;
    socket.setNoDelay(true);
    socket.on('data', (chunk: Buffer) => this.framer.push(chunk));
    socket.on('drain', () => this.onSocketDrain());
    socket.on('error', () => this.close());
    socket.on('close', () => this.close());
  }

  // ---- framing ----------------------------------------------------------------------------

  onFrame(frame: Buffer): void {
    this.lastReadAt = performance.now();
    this.queue.push(frame);
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

  /** The error for an unframeable stream, written once everything framed before it is answered. */
  private pendingFrameError: Buffer | null = null;

  private endWithFrameError(): void {
    const out = this.pendingFrameError!;
    this.pendingFrameError = null;
    this.closed = true;
    this.queue.length = 0;
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

  private drain(): void {
    while (!this.busy && !this.closed && !this.writeBlocked && this.queue.length > 0) {
      const frame = this.queue.shift()!;
      this.handle(frame);
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
    if (this.paused) this.updateReading();
  }

  /**
   * Reading stops while the client's unread replies are over the bound or too many of its requests
   * are queued, and resumes when neither holds (the queue with hysteresis: below half the bound).
   */
  private updateReading(): void {
    if (this.closed) return;
    const stop = this.writeBlocked || this.queue.length > this.maxQueued;
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

  private onSocketDrain(): void {
    if (!this.writeBlocked) return;
    this.writeBlocked = false;
    this.updateReading();
    this.drain();
  }

  /** Every reply goes through here: written whole, then the backpressure check. */
  private write(out: Buffer): void {
    const socket = this.socket;
    socket.write(out);
    if (!this.writeBlocked && socket.writableLength > this.maxPending) {
      this.writeBlocked = true;
      this.ctx.stats.backpressurePauses++;
      this.updateReading();
    }
  }

  private handle(frame: Buffer): void {
    this.ctx.stats.requests++;
    let f = frame;
    let compressor = -1;
    let op = f.readInt32LE(12);
    this.requestId = f.readInt32LE(4);
    this.kind = Kind.Msg;
    this.replyCompressor = -1;
    // Until the message is parsed, trust its flags only to decide whether a reply is expected.
    this.expectReply = !(op === OP_MSG && f.length >= HEADER_SIZE + 4 && (f.readUInt32LE(HEADER_SIZE) & MSG_MORE_TO_COME) !== 0);
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
      if (this.draining) {
        this.refuseShuttingDown(f, op);
        return;
      }
      if (op === OP_MSG) this.handleMsg(f, compressor);
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

  /** A request read while draining: ShutdownInProgress, as mongod answers during its own shutdown. */
  private refuseShuttingDown(frame: Buffer, op: number): void {
    this.ctx.stats.shutdownRefused++;
    if (op === OP_QUERY) this.kind = Kind.LegacyQuery;
    else if (op === OP_MSG) this.expectReply = frame.length < HEADER_SIZE + 4 || (frame.readUInt32LE(HEADER_SIZE) & MSG_MORE_TO_COME) === 0;
    this.replyError(new ProxyError(ErrorCodes.ShutdownInProgress, 'the proxy is shutting down; retry on another proxy',
      ['RetryableWriteError']));
    this.kind = Kind.None;
  }

  // ---- OP_MSG -----------------------------------------------------------------------------

  private handleMsg(frame: Buffer, compressor: number): void {
    const msg = parseOpMsg(frame);
    this.expectReply = (msg.flags & MSG_MORE_TO_COME) === 0;
    // Everything forwarded is checked whole first (mongod's wire object check): a request the
    // proxy cannot vouch for never reaches a shared upstream connection.
    validateDocument(msg.body, 0, msg.body.length);
    if (msg.sequences !== null) {
      for (let i = 0; i < msg.sequences.length; i++) {
        const payload = msg.sequences[i].payload;
        validateDocuments(payload, 0, payload.length);
      }
    }
    const peek = this.peek.read(msg.body);
    const op = peek.op;
    this.expectReply = (msg.flags & MSG_MORE_TO_COME) === 0;
    this.replyCompressor = compressor > 0 && !UNCOMPRESSIBLE_COMMANDS.has(op) ? compressor : -1;
    if (HELLO_COMMANDS.has(op)) {
      this.answerHello(op, decodeCommand(msg.body));
      return;
    }
    if (AUTH_COMMANDS.has(op)) {
      throw new ProxyError(ErrorCodes.AuthenticationFailed,
        `the proxy does not pass client authentication through to the upstream (${op}); connect without credentials and use the auth step for client identity`);
    }
    this.dispatch(frame, msg.body, msg.sequences, msg.flags);
  }

  /**
   * Runs the request phase (when the pipeline has steps) and forwards, answers locally, or rejects.
   * The empty pipeline takes the direct path: no Exchange, no body access, no extra work.
   */
  private dispatch(frame: Buffer, body: Buffer, sequences: DocSequence[] | null, flags: number): void {
    // Baseline, or — while a canary runs — the graph its selector picks for this request. The
    // response phase runs on the same graph (this.pipeline), whatever loads meanwhile.
    const pipeline = this.graphs.pick();
    this.activePool = this.ctx.pool;
    if (pipeline.requestSteps.length === 0 && pipeline.responseSteps.length === 0) {
      this.exchange = null;
      this.pipeline = null;
      this.forward(frame);
      return;
    }
    const peek = this.peek;
    const ex = new Exchange(this, pipeline.id, peek.op, peek.db, peek.collection, body, sequences);
    ex.requestId = this.requestId;
    this.exchange = ex;
    this.pipeline = pipeline;
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
    if (ex.route !== null) this.activePool = this.ctx.poolFor(ex.route);
    else if (peek.cursorId !== 0n || peek.op === 'killCursors') this.activePool = this.ctx.pinnedPool(peek.cursorId) ?? this.ctx.pool;
    let out = frame;
    if (ex.newRequest !== null) {
      // A replaced command carries its sequences folded in; keep only the transport flags.
      out = encodeOpMsg(0, 0, flags & (MSG_MORE_TO_COME | MSG_EXHAUST_ALLOWED), ex.newRequest);
    }
    this.forward(out);
  }

  /** Runs the response phase over `reply` and writes what it leaves (or its rejection). */
  private answerFromPipeline(ex: Exchange, reply: Uint8Array): void {
    // The verdict stays LocalReply for a local answer: response steps see it (CallFlag.LocalReply),
    // e.g. logging marks cache hits.
    ex.replyBody = reply;
    this.pipeline!.runResponse(ex);
    if ((ex.verdict as Verdict) === Verdict.Reject) {
      this.replyRejected(ex);
      return;
    }
    this.sendReplyBody(ex.newReply ?? reply);
  }

  private replyRejected(ex: Exchange): void {
    this.ctx.stats.errorReplies++;
    this.ctx.stats.rejected++;
    if (this.closed || !this.expectReply) return;
    const doc = errorDocument(ex.rejectCode, ex.rejectMessage, [], ex.rejectCodeName || undefined);
    this.sendReplyBody(doc);
  }

  private answerHello(op: string, request: Document): void {
    if (request.client !== undefined) {
      if (this.helloSeen && this.metadata.driver !== '') {
        throw new ProxyError(ErrorCodes.ClientMetadataCannotBeMutated, 'The client metadata document may only be sent in the first hello');
      }
      if (typeof request.client === 'object' && request.client !== null) {
        this.metadata = readClientMetadata(request.client as Document);
        this.appName = this.metadata.appName;
      }
    }
    if (!this.helloSeen) {
      this.helloSeen = true;
      const neg = negotiateCompression(request.compression, this.ctx.compression);
      this.compressors = neg.ids;
      this.negotiatedNames = neg.names;
    }
    const body = helloReply(op, request, this.ctx.upstreamInfo(), this.id, this.negotiatedNames);
    this.replyCompressor = -1; // hello is never compressed
    this.sendReplyBody(body);
  }

  private negotiatedNames: ('snappy' | 'zlib' | 'zstd')[] = [];

  // ---- legacy OP_QUERY (handshake only) -----------------------------------------------------

  private handleQuery(frame: Buffer): void {
    const q = parseOpQuery(frame);
    this.kind = Kind.LegacyQuery;
    this.expectReply = true;
    this.replyCompressor = -1;
    if (!q.isCommand) {
      throw new ProxyError(ErrorCodes.UnsupportedOpQueryCommand,
        `legacy OP_QUERY find on ${q.fullCollectionName} is not supported; use OP_MSG (MongoDB 3.6+ drivers)`);
    }
    // Validated before the full decode: corrupt BSON is the client's InvalidBSON, not our internal error.
    let cmd = decodeCommand(q.query);
    if (cmd.$query !== undefined && typeof cmd.$query === 'object') cmd = cmd.$query as Document;
    const op = Object.keys(cmd)[0] ?? '';
    if (HELLO_COMMANDS.has(op)) {
      this.answerHello(op, cmd);
      return;
    }
    if (AUTH_COMMANDS.has(op)) {
      throw new ProxyError(ErrorCodes.AuthenticationFailed,
        `the proxy does not pass client authentication through to the upstream (${op})`);
    }
    // Any other legacy command is translated to OP_MSG for the upstream and back to OP_REPLY.
    cmd.$db = q.db;
    const body = Buffer.from(serialize(cmd));
    this.peek.read(body);
    this.dispatch(encodeOpMsg(0, 0, 0, body), body, null, 0);
  }

  // ---- forwarding -------------------------------------------------------------------------

  private forward(frame: Buffer): void {
    // exhaustAllowed is cleared: the upstream then answers each getMore once, and the client
    // (which only *allowed* exhaust) sends the next getMore itself.
    this.outgoing = retargetOpMsg(frame, newRequestId(), 0, MSG_EXHAUST_ALLOWED);
    this.retried = false;
    this.busy = true;
    const held = this.heldUpstream;
    if (held !== null) {
      // The connection of this client's last fire-and-forget write: its next request goes there.
      this.heldUpstream = null;
      if (this.heldPool === this.activePool) {
        this.onConnection(held);
        return;
      }
      this.heldPool!.release(held);
    }
    this.activePool.acquire(this);
  }

  /**
   * The upstream connection a fire-and-forget (moreToCome) request was just written to. The
   * upstream never answers such a request; if it cannot process it, it closes the connection —
   * and a request from another client, given that connection next, would fail for this client's
   * fault. So it stays with this client for its next request (a dead one is then replaced: the
   * request was not written) and returns to the pool only after HOLD_AFTER_FIRE_AND_FORGET_MS.
   */
  private heldUpstream: UpstreamConnection | null = null;
  private heldPool: UpstreamPool | null = null;
  private holdTimer: NodeJS.Timeout | null = null;

  private hold(conn: UpstreamConnection): void {
    this.heldUpstream = conn;
    this.heldPool = this.activePool;
    if (this.holdTimer === null) this.holdTimer = setTimeout(() => this.releaseHeld(), HOLD_AFTER_FIRE_AND_FORGET_MS);
    else this.holdTimer.refresh();
  }

  private releaseHeld(): void {
    this.holdTimer = null;
    const conn = this.heldUpstream;
    if (conn === null) return;
    this.heldUpstream = null;
    this.heldPool!.release(conn);
  }

  onConnection(conn: UpstreamConnection): void {
    const out = this.outgoing!;
    if (this.expectReply) {
      this.upstream = conn;
      const limit = this.ctx.requestTimeoutMs;
      if (limit > 0) this.timer = setTimeout(() => this.onRequestTimeout(), limit);
      conn.send(out, this, true);
      return;
    }
    conn.send(out, this, false);
    this.hold(conn);
    this.finish();
  }

  onPoolError(err: ProxyError): void {
    this.outgoing = null;
    this.replyError(err);
    this.finish();
  }

  /** upstream.request_timeout_ms elapsed: the connection's state is unknown, so it is dropped. */
  private onRequestTimeout(): void {
    this.timer = null;
    this.timedOut = true;
    this.upstream?.destroy();
  }

  onUpstreamReply(frame: Buffer, conn: UpstreamConnection): void {
    const pool = this.activePool;
    if (!conn.busy) pool.release(conn);
    this.clearRequestTimer();
    if (this.closed) {
      this.finish();
      return;
    }
    if (pool !== this.ctx.pool) this.ctx.pinCursor(frame, pool);
    const ex = this.exchange;
    if (ex !== null) {
      this.exchange = null;
      if (this.pipeline!.responseSteps.length > 0) {
        ex.replyBody = parseOpMsg(frame).body;
        this.pipeline!.runResponse(ex);
        if ((ex.verdict as Verdict) === Verdict.Reject || ex.newReply !== null) {
          if ((ex.verdict as Verdict) === Verdict.Reject) this.replyRejected(ex);
          else this.sendReplyBody(ex.newReply!);
          this.finish();
          return;
        }
        // No step changed the reply: forward the upstream's frame as the empty pipeline does
        // (header retargeted in place), not a re-encoded copy.
      }
    }
    if (this.kind === Kind.LegacyQuery) {
      const reply = parseOpMsg(frame);
      this.write(encodeOpReply(newRequestId(), this.requestId, 0, [reply.body]));
    } else {
      let out = retargetOpMsg(frame, newRequestId(), this.requestId, 0);
      if (this.replyCompressor > 0) out = compressFrame(out, this.replyCompressor, this.ctx.zlibLevel);
      this.write(out);
    }
    this.finish();
  }

  onUpstreamError(err: Error, _conn: UpstreamConnection, sent: boolean): void {
    if (!sent && !this.retried && !this.closed && this.outgoing !== null) {
      // The connection the pool gave us died before a byte of this request was written: the
      // request is as new, so it goes out once more on another connection instead of failing.
      this.retried = true;
      this.ctx.stats.retriedUnsent++;
      this.clearRequestTimer();
      this.activePool.acquire(this);
      return;
    }
    // Safe to retry when the request never left, or when it is a retryable write (txnNumber):
    // the server deduplicates those by (lsid, txnNumber).
    const retryable = !sent || this.peek.hasTxnNumber;
    const labels = retryable ? ['RetryableWriteError'] : [];
    this.ctx.stats.upstreamErrors++;
    if (this.timedOut) {
      this.replyError(new ProxyError(ErrorCodes.NetworkTimeout,
        `upstream did not answer ${this.peek.op || 'the request'} within upstream.request_timeout_ms (${this.ctx.requestTimeoutMs} ms)`, labels));
    } else {
      this.replyError(new ProxyError(ErrorCodes.HostUnreachable,
        `upstream connection lost during ${this.peek.op || 'request'}: ${err.message}`, labels, { cause: err }));
    }
    this.clearRequestTimer();
    this.finish();
  }

  private clearRequestTimer(): void {
    this.upstream = null;
    this.timedOut = false;
    if (this.timer !== null) {
      clearTimeout(this.timer);
      this.timer = null;
    }
  }

  private finish(): void {
    this.busy = false;
    this.exchange = null;
    this.outgoing = null;
    this.kind = Kind.None;
    if (!this.closed) this.drain();
  }

  /**
   * Graceful shutdown: the request in flight is answered with its reply; requests already read
   * behind it are answered with ShutdownInProgress (retryable), never dropped; then the connection
   * ends on that reply boundary. An idle connection ends at once.
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
    if (this.busy && this.outgoing !== null) {
      this.upstream?.destroy();
      this.replyError(new ProxyError(ErrorCodes.InterruptedAtShutdown,
        `the proxy shut down before the upstream answered ${this.peek.op || 'the request'} (shutdown.drain_timeout_ms)`,
        this.peek.hasTxnNumber ? ['RetryableWriteError'] : []));
    }
    this.closeGracefully();
    // A client that does not read would hold the socket open: it gets a moment, then is cut.
    setTimeout(() => this.close(), 1000).unref();
  }

  get idle(): boolean {
    return !this.busy;
  }

  private closeGracefully(): void {
    if (this.closed) return;
    this.closed = true;
    if (this.quietTimer !== null) {
      clearTimeout(this.quietTimer);
      this.quietTimer = null;
    }
    this.framer.fail();
    this.queue.length = 0;
    this.socket.end();
  }

  // ---- replies ----------------------------------------------------------------------------

  private sendReplyBody(body: Uint8Array): void {
    if (this.closed || !this.expectReply) return;
    if (this.kind === Kind.LegacyQuery) {
      this.write(encodeOpReply(newRequestId(), this.requestId, 0, [body]));
      return;
    }
    let out = encodeOpMsg(newRequestId(), this.requestId, 0, body);
    if (this.replyCompressor > 0) out = compressFrame(out, this.replyCompressor, this.ctx.zlibLevel);
    this.write(out);
  }

  /** Answers the current request with an error document (OP_REPLY with QueryFailure for legacy). */
  private replyError(err: ProxyError): void {
    this.ctx.stats.errorReplies++;
    const doc = errorDocument(err.code, err.message, err.labels, err.codeName);
    if (this.closed) return;
    if (this.kind === Kind.LegacyQuery) {
      this.write(encodeOpReply(newRequestId(), this.requestId, REPLY_QUERY_FAILURE, [doc]));
      return;
    }
    if (!this.expectReply) return;
    this.write(encodeOpMsg(newRequestId(), this.requestId, 0, doc));
  }

  close(): void {
    this.closed = true;
    if (this.holdTimer !== null) {
      clearTimeout(this.holdTimer);
      this.releaseHeld();
    }
    this.framer.fail();
    this.queue.length = 0;
    if (!this.socket.destroyed) this.socket.destroy();
    if (!this.released) {
      // Reported once, whatever path closed us (socket close, error, or a framing error that
      // marked the connection closed while its last reply was still being written).
      this.released = true;
      this.ctx.onClientClosed(this);
    }
  }
}

/** A command decoded whole (handshake and legacy paths only): undecodable bytes are the client's InvalidBSON. */
function decodeCommand(bytes: Buffer): Document {
  validateDocument(bytes, 0, bytes.length);
  try {
    return deserialize(bytes) as Document;
  } catch (err) {
    throw new WireError('PROXY_ERR_BAD_BSON', `command is not valid BSON: ${(err as Error).message}`, true);
  }
}
