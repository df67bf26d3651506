// Commands the proxy sends upstream on its own after a client has gone (abortTransaction,
// killCursors for a load-balanced client that closed with them open): one after another on one
// connection — the client's pinned one when it is still alive, else one from the pool — which then
// returns to the pool. Nobody waits for the outcome; a failure is logged. The rare path: one object
// per closing client with something open.
import type { Log } from '../log/index.ts';
import { ErrorCodes, ProxyError } from '../errors/index.ts';
import type { PoolWaiter, UpstreamPool } from './pool.ts';
import type { ReplyHandler, UpstreamConnection } from './connection.ts';

export class UpstreamCleanup implements PoolWaiter, ReplyHandler {
  private readonly pool: UpstreamPool;
  private readonly frames: Buffer[];
  private readonly log: Pick<Log, 'info' | 'warn'>;
  private readonly what: string;
  private next = 0;

  constructor(pool: UpstreamPool, frames: Buffer[], log: Pick<Log, 'info' | 'warn'>, what: string) {
    this.pool = pool;
    this.frames = frames;
    this.log = log;
    this.what = what;
  }

  /** Sends on `conn` when given (a connection of `pool` nobody else uses), else on one from the pool. */
  start(conn: UpstreamConnection | null): void {
    if (this.frames.length === 0) {
      if (conn !== null) this.pool.release(conn);
      return;
    }
    if (conn !== null && conn.alive && !conn.busy) this.onConnection(conn);
    else this.pool.acquire(this);
  }

  onConnection(conn: UpstreamConnection): void {
    if (this.next >= this.frames.length) {
      this.pool.release(conn);
      return;
    }
    conn.send(this.frames[this.next++], this, true);
  }

  onPoolError(err: ProxyError): void {
    this.failed(err);
  }

  onUpstreamReply(_frame: Buffer, conn: UpstreamConnection): void {
    if (!conn.busy) this.onConnection(conn);
  }

  onUpstreamError(err: Error): void {
    this.failed(new ProxyError(ErrorCodes.HostUnreachable, err.message, [], { cause: err }));
  }

  private failed(err: Error): void {
    this.log.warn('could not end what a closed client left open upstream; the upstream times it out', {
      upstream: this.pool.describe(), what: this.what, error: err.message,
    });
  }
}
