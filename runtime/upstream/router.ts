// Which upstream pool serves a request: the pool a `route` step chose, else the pool that owns the
// request's cursor or transaction, else the main pool. Cursors and transactions live on a server,
// not a connection: a cursor opened through a routed upstream must be continued (getMore) and
// killed (killCursors) there, and every statement of a transaction — including commit and abort —
// must reach the server that started it. Both pins are kept in bounded maps (oldest dropped first)
// and dropped when the cursor is exhausted or killed, the transaction committed or aborted, or, for
// transactions, after TXN_PIN_TTL_MS. With no routed pool (the usual case) nothing is looked up.
import { performance } from 'node:perf_hooks';
import { BSON_ARRAY, BSON_DOCUMENT, BSON_INT64, ElementCursor, ReplyPeek, utf8, type CommandPeek } from '../wire/index.ts';
import { UpstreamPool, type PoolLogger, type PoolOptions } from './pool.ts';
import { parseUpstreamUri } from './uri.ts';

/** Cursors pinned to routed pools: at most this many. */
export const MAX_PINNED_CURSORS = 100_000;
/** Transactions pinned to routed pools: at most this many. */
export const MAX_PINNED_TRANSACTIONS = 100_000;
/** A transaction pin outlives MongoDB's default transactionLifetimeLimitSeconds (60 s) twice over. */
export const TXN_PIN_TTL_MS = 120_000;

const K_CURSORS = utf8('cursors');

interface TxnPin { pool: UpstreamPool; txnNumber: bigint; expiresAt: number }

export class UpstreamRouter {
  readonly main: UpstreamPool;
  private readonly poolOptions: PoolOptions | undefined;
  private readonly log: PoolLogger;
  private readonly routed = new Map<string, UpstreamPool>();
  private readonly cursors = new Map<bigint, UpstreamPool>();
  private readonly txns = new Map<string, TxnPin>();
  private readonly replyPeek = new ReplyPeek();
  private readonly cur = new ElementCursor();
  private readonly inner = new ElementCursor();

  constructor(main: UpstreamPool, poolOptions: PoolOptions | undefined, log: PoolLogger) {
    this.main = main;
    this.poolOptions = poolOptions;
    this.log = log;
  }

  get pinnedCursors(): number { return this.cursors.size; }
  get pinnedTransactions(): number { return this.txns.size; }
  get routedPools(): IterableIterator<UpstreamPool> { return this.routed.values(); }

  /** The pool of a routed upstream URI (created on first use). */
  poolFor(uri: string): UpstreamPool {
    if (uri === this.main.address.uri) return this.main;
    let pool = this.routed.get(uri);
    if (pool === undefined) {
      if (this.poolOptions === undefined) throw new Error('routing needs poolOptions');
      pool = new UpstreamPool(parseUpstreamUri(uri), this.poolOptions, this.log);
      this.routed.set(uri, pool);
      this.log.info('opened a pool for a routed upstream', { upstream: pool.describe() });
    }
    return pool;
  }

  /**
   * The pool for the command `peek` describes (`body` is its bytes): `route` when a step chose
   * one, else its cursor's or transaction's pool, else the main pool. Pins a transaction that
   * starts on a routed pool.
   */
  choose(peek: CommandPeek, body: Buffer, route: string | null): UpstreamPool {
    let killedOn: UpstreamPool | undefined;
    if (peek.op === 'killCursors' && this.cursors.size > 0) {
      // The cursor's pin ends here, whichever way the command is routed.
      const id = this.firstKilledCursor(body);
      killedOn = this.cursors.get(id);
      if (killedOn !== undefined) this.cursors.delete(id);
    }
    if (route !== null) {
      const pool = this.poolFor(route);
      if (pool !== this.main && peek.startTransaction && peek.lsidAt >= 0) this.pinTxn(body, peek, pool);
      return pool;
    }
    if (this.routed.size === 0) return this.main;
    if (peek.cursorId !== 0n) return this.cursors.get(peek.cursorId) ?? this.main;
    if (peek.op === 'killCursors') return killedOn ?? this.main;
    if (peek.inTransaction && peek.lsidAt >= 0 && this.txns.size > 0) {
      const key = lsidKey(body, peek.lsidAt);
      const pin = this.txns.get(key);
      if (pin !== undefined) {
        if (pin.txnNumber === peek.txnNumber && pin.expiresAt > performance.now()) {
          if (peek.op === 'commitTransaction' || peek.op === 'abortTransaction') this.txns.delete(key);
          return pin.pool;
        }
        this.txns.delete(key);
      }
    }
    return this.main;
  }

  /** After a reply from `pool`: a cursor opened on a routed pool is pinned there; an exhausted one is unpinned. */
  afterReply(frame: Buffer, pool: UpstreamPool, peek: CommandPeek): void {
    if (pool === this.main) return;
    let id: bigint;
    try {
      // An OP_MSG frame: header (16) + flags (4) + kind byte (1) + body.
      id = this.replyPeek.read(frame.subarray(21)).cursorId;
    } catch {
      return;
    }
    if (id === 0n) {
      if (peek.cursorId !== 0n) this.cursors.delete(peek.cursorId);
      return;
    }
    if (this.cursors.size >= MAX_PINNED_CURSORS) this.cursors.delete(this.cursors.keys().next().value!);
    this.cursors.set(id, pool);
  }

  close(): void {
    for (const p of this.routed.values()) p.close();
  }

  private pinTxn(body: Buffer, peek: CommandPeek, pool: UpstreamPool): void {
    const key = lsidKey(body, peek.lsidAt);
    this.txns.delete(key);
    if (this.txns.size >= MAX_PINNED_TRANSACTIONS) this.txns.delete(this.txns.keys().next().value!);
    this.txns.set(key, { pool, txnNumber: peek.txnNumber, expiresAt: performance.now() + TXN_PIN_TTL_MS });
  }

  /** killCursors: the first id of its `cursors` array (drivers kill one cursor per command). */
  private firstKilledCursor(body: Buffer): bigint {
    const cur = this.cur.open(body, 0);
    while (cur.next()) {
      if (cur.type !== BSON_ARRAY || !cur.nameIs(K_CURSORS)) continue;
      const inner = this.inner.open(body, cur.valueStart, cur.valueEnd);
      return inner.next() && inner.type === BSON_INT64 ? inner.int64() : 0n;
    }
    return 0n;
  }
}

/** The lsid document's bytes as a map key (the rare path: only statements of a transaction). */
function lsidKey(body: Buffer, lsidAt: number): string {
  // type byte, "lsid\0", then the embedded document.
  const start = lsidAt + 6;
  if (body[lsidAt] !== BSON_DOCUMENT) return '';
  const len = body.readInt32LE(start);
  return body.toString('latin1', start, start + len);
}
