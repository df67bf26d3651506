// The upstream half of one client request: wait for a pooled connection, write the request, wait
// for its reply, with the request timeout, the one retry of a request that was never written, and
// the hold of a connection after a fire-and-forget write. One UpstreamCall per client connection,
// reused for each of its requests (a connection has one request in flight at a time), so a request
// allocates nothing here; it is itself the pool waiter and the reply handler.
//
// It records when each stage happened (performance.now(), ms), for the profiler's upstream time:
// acquiredAt − startedAt is the wait for a connection (`connection.acquire`), repliedAt − writtenAt
// the upstream round trip.
import { performance } from 'node:perf_hooks';
import { ErrorCodes, ProxyError } from '../errors/index.ts';
import type { ConnectionSource, PoolWaiter, UpstreamPool } from './pool.ts';
import type { ReplyHandler, UpstreamConnection } from './connection.ts';

/** How long an upstream connection stays with its client after a fire-and-forget write (see hold()). */
export const HOLD_AFTER_FIRE_AND_FORGET_MS = 50;

export interface UpstreamCallOwner {
  /** The reply (an OP_MSG frame, decompressed) from `pool`; the connection is already released. */
  onCallReply(frame: Buffer, pool: UpstreamPool): void;
  /** A fire-and-forget request was written (nothing will come back). */
  onCallSent(): void;
  /** The call failed; the client gets `err`. */
  onCallError(err: ProxyError): void;
}

/** Counters an UpstreamCall bumps (the server's stats object). */
export interface UpstreamCallStats {
  upstreamErrors: number;
  retriedUnsent: number;
}

export class UpstreamCall implements PoolWaiter, ReplyHandler {
  private readonly owner: UpstreamCallOwner;
  private readonly stats: UpstreamCallStats;
  private readonly requestTimeoutMs: number;

  /** When the call started (the wait for a connection began), performance.now() ms. */
  startedAt = 0;
  /** When a pooled connection was handed over. */
  acquiredAt = 0;
  /** When the request was written to it. */
  writtenAt = 0;
  /** When its reply was read (0 for fire-and-forget or a failure). */
  repliedAt = 0;

  /** Where the connection comes from (a pool, or a topology's wait for a suitable server). */
  private source: ConnectionSource | null = null;
  /** The pool of the connection serving the call (set when one is handed over). */
  private pool: UpstreamPool | null = null;
  /** The frame to send, kept until the call ends so an unsent one can be retried. */
  private frame: Buffer | null = null;
  private expectReply = true;
  /** For messages: the command name and whether it is a retryable write (txnNumber). */
  private op = '';
  private retryableWrite = false;
  private retried = false;
  /** The connection serving the call, for the request timeout and forced shutdown. */
  private conn: UpstreamConnection | null = null;
  private timer: NodeJS.Timeout | null = null;
  private timedOut = false;
  private closed = false;

  /**
   * The connection a fire-and-forget request was just written to. The upstream never answers such
   * a request; if it cannot process it, it closes the connection — and a request from another
   * client, given that connection next, would fail for this client's fault. So it stays with this
   * client for its next request (a dead one is then replaced: that request was not written yet)
   * and returns to the pool only after HOLD_AFTER_FIRE_AND_FORGET_MS.
   */
  private held: UpstreamConnection | null = null;
  private heldPool: UpstreamPool | null = null;
  private holdTimer: NodeJS.Timeout | null = null;

  /**
   * Load-balanced clients (runtime/server/load-balanced.ts): after each call the connection stays
   * pinned to this client instead of returning to the pool, until the owner calls unpin() (nothing
   * open any more) or takePinned() (the client closed).
   */
  keepConnection = false;
  private pinned: UpstreamConnection | null = null;
  private pinnedPool: UpstreamPool | null = null;
  /** What the pinned connection was acquired through (a pool, or a topology that chose pinnedPool). */
  private pinnedSource: ConnectionSource | null = null;

  constructor(owner: UpstreamCallOwner, stats: UpstreamCallStats, requestTimeoutMs: number) {
    this.owner = owner;
    this.stats = stats;
    this.requestTimeoutMs = requestTimeoutMs;
  }

  /** Whether a call is in progress. */
  get active(): boolean {
    return this.frame !== null;
  }

  /** Sends `frame` (request id already set) through `source`; the owner hears back exactly once. */
  start(source: ConnectionSource, frame: Buffer, expectReply: boolean, op: string, retryableWrite: boolean): void {
    this.source = source;
    this.pool = null;
    this.frame = frame;
    this.expectReply = expectReply;
    this.op = op;
    this.retryableWrite = retryableWrite;
    this.retried = false;
    this.startedAt = performance.now();
    this.acquiredAt = 0;
    this.writtenAt = 0;
    this.repliedAt = 0;
    const pinned = this.pinned;
    if (pinned !== null) {
      if (pinned.alive && this.pinnedSource === source) {
        this.onConnection(pinned);
        return;
      }
      // Lost (the upstream closed it), or a route step chose another upstream: what was open on
      // it is the upstream's to answer for (CursorNotFound, NoSuchTransaction).
      this.pinned = null;
      this.pinnedPool!.release(pinned);
    }
    const held = this.held;
    if (held !== null) {
      this.held = null;
      if (this.heldPool === source) {
        this.onConnection(held);
        return;
      }
      this.heldPool!.release(held);
    }
    source.acquire(this);
  }

  onConnection(conn: UpstreamConnection): void {
    const frame = this.frame;
    this.pool = conn.pool;
    if (frame === null) {
      this.pool!.release(conn); // abandoned while waiting
      return;
    }
    this.acquiredAt = performance.now();
    if (this.expectReply) {
      this.conn = conn;
      if (this.requestTimeoutMs > 0) this.timer = setTimeout(() => this.onRequestTimeout(), this.requestTimeoutMs);
      this.writtenAt = this.acquiredAt;
      conn.send(frame, this, true);
      return;
    }
    conn.send(frame, this, false);
    this.writtenAt = this.acquiredAt;
    if (this.keepConnection && !this.closed) {
      this.pinned = conn;
      this.pinnedPool = this.pool;
      this.pinnedSource = this.source;
    } else this.hold(conn);
    this.end();
    this.owner.onCallSent();
  }

  onPoolError(err: ProxyError): void {
    if (this.frame === null) return; // abandoned
    this.end();
    this.owner.onCallError(err);
  }

  onUpstreamReply(frame: Buffer, conn: UpstreamConnection): void {
    if (this.frame === null) return; // abandoned (its connection is being destroyed)
    this.repliedAt = performance.now();
    const pool = this.pool!;
    if (!conn.busy) {
      if (this.keepConnection && !this.closed) {
        this.pinned = conn;
        this.pinnedPool = pool;
        this.pinnedSource = this.source;
      } else pool.release(conn);
    }
    this.end();
    this.owner.onCallReply(frame, pool);
  }

  onUpstreamError(err: Error, conn: UpstreamConnection, sent: boolean): void {
    if (conn === this.pinned) this.pinned = null;
    if (this.frame === null) return; // abandoned
    if (!sent && !this.retried && !this.closed && this.frame !== null) {
      // The connection died before a byte of this request was written: the request is as new,
      // so it goes out once more on another connection instead of failing.
      this.retried = true;
      this.stats.retriedUnsent++;
      this.clearTimer();
      this.source!.acquire(this);
      return;
    }
    // A topology re-checks the server at once (its primary may be gone).
    this.pool!.noteNetworkError();
    // Safe for the client to retry when the request never left, or when it is a retryable write
    // (txnNumber): the server deduplicates those by (lsid, txnNumber).
    const labels = !sent || this.retryableWrite ? ['RetryableWriteError'] : [];
    this.stats.upstreamErrors++;
    const timedOut = this.timedOut;
    this.end();
    this.owner.onCallError(timedOut
      ? new ProxyError(ErrorCodes.NetworkTimeout,
        `upstream did not answer ${this.op || 'the request'} within upstream.request_timeout_ms (${this.requestTimeoutMs} ms)`, labels)
      : new ProxyError(ErrorCodes.HostUnreachable, `upstream connection lost during ${this.op || 'request'}: ${err.message}`, labels, { cause: err }));
  }

  /** upstream.request_timeout_ms elapsed: the connection's state is unknown, so it is dropped. */
  private onRequestTimeout(): void {
    this.timer = null;
    this.timedOut = true;
    this.conn?.destroy();
  }

  /**
   * Gives up on the call in flight (shutdown deadline): its connection, now in an unknown state,
   * is dropped. The owner is not called back. A call still waiting for a connection leaves the
   * wait queue when its turn comes (onConnection then finds no frame and returns the connection).
   */
  abandon(): void {
    const conn = this.conn;
    this.closed = true;
    this.end();
    conn?.destroy();
  }

  /** Returns a pinned connection to its pool (the client has nothing open on it any more). */
  unpin(): void {
    const conn = this.pinned;
    if (conn === null) return;
    this.pinned = null;
    this.pinnedPool!.release(conn);
  }

  /** Hands over the pinned connection, if any and alive, with its pool (the owner ends what is open on it). */
  takePinned(): { conn: UpstreamConnection; pool: UpstreamPool } | null {
    const conn = this.pinned;
    this.pinned = null;
    return conn !== null && conn.alive ? { conn, pool: this.pinnedPool! } : null;
  }

  /** The client is gone: a held or pinned connection goes back to its pool; a call in flight still completes (and its connection is released). */
  close(): void {
    this.closed = true;
    this.unpin();
    if (this.holdTimer !== null) {
      clearTimeout(this.holdTimer);
      this.releaseHeld();
    }
  }

  private end(): void {
    this.frame = null;
    this.clearTimer();
  }

  private clearTimer(): void {
    this.conn = null;
    this.timedOut = false;
    if (this.timer !== null) {
      clearTimeout(this.timer);
      this.timer = null;
    }
  }

  private hold(conn: UpstreamConnection): void {
    this.held = conn;
    this.heldPool = this.pool;
    if (this.holdTimer === null) this.holdTimer = setTimeout(() => this.releaseHeld(), HOLD_AFTER_FIRE_AND_FORGET_MS);
    else this.holdTimer.refresh();
  }

  private releaseHeld(): void {
    this.holdTimer = null;
    const conn = this.held;
    if (conn === null) return;
    this.held = null;
    this.heldPool!.release(conn);
  }
}
