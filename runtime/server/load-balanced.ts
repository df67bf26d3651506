// What a load-balanced client (hello with `loadBalanced: true`) has open upstream: its cursors and
// its transaction. Drivers in load-balanced mode tie both to the connection they started on
// (github.com/mongodb/specifications source/load-balancers/load-balancers.md, "Connection
// pinning"): they never continue them on another connection, and when that connection closes they
// consider them gone. So while either is open, the client's upstream connection stays with it
// (UpstreamCall.keepConnection), and when the client connection closes the proxy ends them upstream
// (abortTransaction, killCursors) instead of leaving them to time out there (endLoadBalanced).
//
// Per reply this reads the cursor id with a ReplyPeek (no decode); the rarer events — a new cursor
// (its namespace), a transaction start (its lsid), killCursors — decode only what they need.
import type { Log } from '../log/index.ts';
import { deserialize, serialize, Long, type Document } from 'bson';
import {
  BSON_DOCUMENT, BSON_STRING, ElementCursor, ReplyPeek, encodeOpMsg, utf8, type CommandPeek,
} from '../wire/index.ts';
import {
  UpstreamCleanup, newRequestId, type UpstreamCall, type UpstreamConnection, type UpstreamPool, type UpstreamRouter,
} from '../upstream/index.ts';
import type { ServerContext } from './context.ts';

const K_CURSOR = utf8('cursor');
const K_NS = utf8('ns');

interface OpenCursor { db: string; collection: string }

export class LoadBalancedState {
  /** Open cursors: id → the namespace killCursors needs. */
  readonly cursors = new Map<bigint, OpenCursor>();
  /** The open transaction's lsid document (a copy), or null. */
  txnLsid: Buffer | null = null;
  txnNumber = 0n;
  /** The command document of the client's request in flight (the connection sets it for afterReply). */
  requestBody: Buffer | null = null;
  private readonly replyPeek = new ReplyPeek();
  private readonly cur = new ElementCursor();
  private readonly inner = new ElementCursor();

  /** Whether anything is open that keeps the upstream connection pinned. */
  get open(): boolean {
    return this.txnLsid !== null || this.cursors.size > 0;
  }

  /**
   * After the upstream answered the request `peek` describes (`body`: its command document,
   * `reply`: the reply's body document): cursors opened, exhausted or killed, the transaction
   * started or ended.
   */
  afterReply(peek: CommandPeek, body: Buffer, reply: Buffer): void {
    const rp = this.replyPeek.read(reply);
    const op = peek.op;
    if (peek.startTransaction && peek.lsidAt >= 0 && body[peek.lsidAt] === BSON_DOCUMENT) {
      // type byte, "lsid\0", then the document. Kept even when the first statement failed: the
      // transaction may exist upstream, and an abort of one that does not is harmless.
      const start = peek.lsidAt + 6;
      this.txnLsid = Buffer.from(body.subarray(start, start + body.readInt32LE(start)));
      this.txnNumber = peek.txnNumber;
    } else if (this.txnLsid !== null && (op === 'abortTransaction' || (op === 'commitTransaction' && rp.ok))) {
      // A failed commit may be retried (its outcome is unknown), so the transaction stays open
      // until a commit succeeds or the client aborts.
      this.txnLsid = null;
    }
    if (op === 'getMore') {
      if (rp.cursorId === 0n) this.cursors.delete(peek.cursorId);
    } else if (op === 'killCursors') {
      for (const id of killedCursorIds(body)) this.cursors.delete(id);
    } else if (rp.cursorId !== 0n) {
      const ns = this.cursorNamespace(reply);
      const dot = ns.indexOf('.');
      this.cursors.set(rp.cursorId, dot > 0
        ? { db: ns.slice(0, dot), collection: ns.slice(dot + 1) }
        : { db: peek.db, collection: peek.collection });
    }
  }

  /**
   * The commands that end what is open, as OP_MSG frames grouped by the pool they go to:
   * abortTransaction first, to the server the transaction is pinned to, then one killCursors per
   * server and namespace, to the server each cursor is pinned to. The pins are the router's (and
   * dropped here): with a replica set or mongos list, a cursor or transaction lives on one server,
   * which may not be the pinned connection's when that one was lost and replaced. What no pin names
   * (one upstream server: nothing is pinned) goes to `fallback`, the pinned connection's pool when
   * there is one.
   */
  cleanupPlan(router: UpstreamRouter, fallback: UpstreamPool): { byPool: Map<UpstreamPool, Buffer[]>; cursors: number; transaction: boolean } {
    const byPool = new Map<UpstreamPool, Buffer[]>();
    const add = (pool: UpstreamPool, frame: Buffer) => {
      const list = byPool.get(pool);
      if (list === undefined) byPool.set(pool, [frame]);
      else list.push(frame);
    };
    const transaction = this.txnLsid !== null;
    if (transaction) {
      add(router.takeTxnPin(this.txnLsid!, this.txnNumber) ?? fallback, encodeOpMsg(newRequestId(), 0, 0, serialize({
        abortTransaction: 1, lsid: deserialize(this.txnLsid!), txnNumber: Long.fromBigInt(this.txnNumber), autocommit: false, $db: 'admin',
      })));
    }
    const groups = new Map<UpstreamPool, Map<string, { db: string; collection: string; ids: Long[] }>>();
    for (const [id, c] of this.cursors) {
      const pool = router.takeCursorPin(id) ?? fallback;
      let byNs = groups.get(pool);
      if (byNs === undefined) groups.set(pool, byNs = new Map());
      const key = `${c.db}\0${c.collection}`;
      let e = byNs.get(key);
      if (e === undefined) byNs.set(key, e = { db: c.db, collection: c.collection, ids: [] });
      e.ids.push(Long.fromBigInt(id));
    }
    for (const [pool, byNs] of groups) {
      for (const e of byNs.values()) add(pool, encodeOpMsg(newRequestId(), 0, 0, serialize({ killCursors: e.collection, cursors: e.ids, $db: e.db })));
    }
    const cursors = this.cursors.size;
    this.cursors.clear();
    this.txnLsid = null;
    return { byPool, cursors, transaction };
  }

  /** `cursor.ns` of a reply ('' when absent). */
  private cursorNamespace(reply: Buffer): string {
    const cur = this.cur.open(reply, 0);
    while (cur.next()) {
      if (cur.type !== BSON_DOCUMENT || !cur.nameIs(K_CURSOR)) continue;
      const inner = this.inner.open(reply, cur.valueStart, cur.valueEnd);
      while (inner.next()) if (inner.type === BSON_STRING && inner.nameIs(K_NS)) return inner.string();
    }
    return '';
  }
}

/**
 * A load-balanced client's connection closed: its open transaction is aborted and its cursors are
 * killed upstream, each on the server that owns it (see cleanupPlan), on the client's pinned
 * connection (`pinned`, when still alive) for its server's commands, else on a connection from that
 * server's pool. Nobody waits for the outcome (UpstreamCleanup logs a failure). `fallback`: the
 * pool for what no pin names when there is no pinned connection.
 */
export function endLoadBalancedUpstream(lb: LoadBalancedState, pinned: { conn: UpstreamConnection; pool: UpstreamPool } | null,
  router: UpstreamRouter, fallback: UpstreamPool, log: Pick<Log, 'info' | 'warn'>, client: string): { cursors: number; transaction: boolean } {
  if (!lb.open) {
    if (pinned !== null) pinned.pool.release(pinned.conn);
    return { cursors: 0, transaction: false };
  }
  const { byPool, cursors, transaction } = lb.cleanupPlan(router, pinned?.pool ?? fallback);
  const what = `${transaction ? 'abortTransaction, ' : ''}${cursors} cursor(s) of client ${client}`;
  let conn = pinned?.conn ?? null;
  for (const [pool, frames] of byPool) {
    const own = pinned !== null && pool === pinned.pool ? conn : null;
    if (own !== null) conn = null;
    new UpstreamCleanup(pool, frames, log, what).start(own);
  }
  // Nothing left for the pinned connection's server: it goes back to its pool.
  if (conn !== null) pinned!.pool.release(conn);
  return { cursors, transaction };
}

/** The ids a killCursors command names (a small command: decoded). */
function killedCursorIds(body: Buffer): bigint[] {
  const cmd = deserialize(body, { useBigInt64: true }) as Document;
  return Array.isArray(cmd.cursors) ? cmd.cursors.filter((c): c is bigint => typeof c === 'bigint') : [];
}

/**
 * A load-balanced client's connection closed with nothing in flight upstream (`call` not active):
 * its open transaction and cursors are ended upstream (endLoadBalancedUpstream), and counted.
 */
export function endLoadBalanced(lb: LoadBalancedState, call: UpstreamCall, ctx: ServerContext, clientAddress: string): void {
  lb.requestBody = null;
  const { cursors, transaction } = endLoadBalancedUpstream(lb, call.takePinned(), ctx.router, ctx.pool, ctx.log, clientAddress);
  if (transaction) ctx.stats.lbTransactionsAborted++;
  ctx.stats.lbCursorsKilled += cursors;
}
