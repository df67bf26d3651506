// Which upstream pool serves a request: the pool a `route` step chose, else the pool that owns the
// request's cursor or transaction, else the main pool — or, for a multi-host upstream, the server
// the topology selects (topology.ts). Cursors and transactions live on a server, not a connection:
// a cursor must be continued (getMore) and killed (killCursors) on the server that opened it, and
// every statement of a transaction — including commit and abort — must reach the server that
// started it. Both pins are kept in bounded maps (oldest dropped first, at most MAX_PINNED_*
// entries) with a TTL refreshed on use, and dropped when the cursor is exhausted or killed, the
// transaction committed or aborted. With one upstream server and no routed pool (the usual single
// host case) nothing is looked up.
//
// With several workers (runtime/cluster/) a driver may continue a cursor, or a transaction, on a
// pooled connection another worker holds: each pin is also published to the primary
// (`sharedPins`), and a getMore or transaction statement this worker has no pin for asks it there
// (the rare path; the request waits for the answer, never the common one) and pins the answer
// locally.
import type { Log } from '../log/index.ts';
import { performance } from 'node:perf_hooks';
import { BSON_ARRAY, BSON_DOCUMENT, BSON_INT64, ElementCursor, ReplyPeek, utf8, type CommandPeek } from '../wire/index.ts';
import { UpstreamPool, type ConnectionSource, type PoolOptions, type PoolWaiter } from './pool.ts';
import type { Topology, TxnPinner } from './topology.ts';
import type { UpstreamInfo } from './connection.ts';
import { parseUpstreamUri } from './uri.ts';
import { ErrorCodes, ProxyError } from '../errors/index.ts';

/**
 * Routed upstreams (distinct URIs steps chose) the proxy opens a pool for: at most this many. A
 * pool lives as long as the proxy, so a plugin building its route from request data would
 * otherwise open pools (and their connections, timers and metric series) without end.
 */
export const MAX_ROUTED_UPSTREAMS = 256;

/** Cursors pinned to routed pools: at most this many. */
export const MAX_PINNED_CURSORS = 100_000;
/** Transactions pinned to routed pools: at most this many. */
export const MAX_PINNED_TRANSACTIONS = 100_000;
/** A transaction pin outlives MongoDB's default transactionLifetimeLimitSeconds (60 s) twice over. */
export const TXN_PIN_TTL_MS = 120_000;
/** A cursor pin outlives mongod's default idle cursor timeout (cursorTimeoutMillis, 10 min); each getMore renews it. */
export const CURSOR_PIN_TTL_MS = 11 * 60_000;

const K_CURSORS = utf8('cursors');

interface TxnPin { pool: UpstreamPool; txnNumber: bigint; expiresAt: number }
interface CursorPin { pool: UpstreamPool; expiresAt: number }

/**
 * The machine-wide table of cursor and transaction pins (workers: the primary keeps it). A pin's
 * key: `c:<cursor id>` or `t:<txnNumber>:<lsid bytes>`; a server is named by serverKey(), the same
 * string in every worker.
 */
export interface SharedPins {
  publish(key: string, server: string): void;
  unpublish(key: string): void;
  /** The server another worker pinned `key` to, or null when no worker did. */
  lookup(key: string): Promise<string | null>;
}

const cursorKey = (id: bigint) => `c:${id}`;
const txnKey = (lsid: string, txnNumber: bigint) => `t:${txnNumber}:${lsid}`;

/** Waits for another worker's answer on where a cursor or transaction lives, then acquires there (or where the topology selects). */
class SharedPinLookup implements ConnectionSource {
  private readonly router: UpstreamRouter;
  private readonly key: string;
  private readonly adopt: (pool: UpstreamPool) => void;
  private readonly fallback: ConnectionSource;
  constructor(router: UpstreamRouter, key: string, adopt: (pool: UpstreamPool) => void, fallback: ConnectionSource) {
    this.router = router;
    this.key = key;
    this.adopt = adopt;
    this.fallback = fallback;
  }

  acquire(waiter: PoolWaiter): void {
    this.router.sharedPins!.lookup(this.key).then((server) => {
      const pool = server === null ? null : this.router.poolOfServer(server);
      if (pool === null) {
        this.fallback.acquire(waiter);
        return;
      }
      this.adopt(pool);
      pool.acquire(waiter);
    }, () => this.fallback.acquire(waiter));
  }

  describe(): string { return '(pinned by another worker)'; }
}

export class UpstreamRouter implements TxnPinner {
  readonly main: UpstreamPool;
  /** Set for a multi-host upstream (replica set, mongos list): it selects the server. */
  readonly topology: Topology | null;
  private readonly poolOptions: PoolOptions | undefined;
  private readonly log: Pick<Log, 'info' | 'warn'>;
  private readonly routed = new Map<string, UpstreamPool>();
  private readonly cursors = new Map<bigint, CursorPin>();
  private readonly txns = new Map<string, TxnPin>();
  private readonly replyPeek = new ReplyPeek();
  private readonly cur = new ElementCursor();
  private readonly inner = new ElementCursor();
  /** With several workers: the machine's cursor pins (runtime/cluster/); null in one process. */
  sharedPins: SharedPins | null = null;

  constructor(main: UpstreamPool, poolOptions: PoolOptions | undefined, log: Pick<Log, 'info' | 'warn'>, topology: Topology | null = null) {
    this.main = main;
    this.poolOptions = poolOptions;
    this.log = log;
    this.topology = topology;
    if (topology !== null) topology.pinner = this;
  }

  /** The limits the proxy advertises in its hello. */
  upstreamInfo(): UpstreamInfo | null {
    return this.topology?.info ?? this.main.info;
  }

  /** The pools of every upstream server (one for a single host; one per server of a topology). */
  serverPools(): UpstreamPool[] {
    if (this.topology === null) return [this.main];
    const out: UpstreamPool[] = [];
    for (const s of this.topology.allServers()) if (s.hasPool) out.push(s.pool);
    return out;
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
      if (this.routed.size >= MAX_ROUTED_UPSTREAMS) {
        throw new ProxyError(ErrorCodes.BadValue, `a step routed the request to a ${MAX_ROUTED_UPSTREAMS + 1}th upstream URI; the proxy opens pools ` +
          `for at most ${MAX_ROUTED_UPSTREAMS} routed upstreams (a route must come from a bounded set of upstreams, not from request data)`);
      }
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
  choose(peek: CommandPeek, body: Buffer, route: string | null): ConnectionSource {
    let killedOn: UpstreamPool | undefined;
    // The cursors' pins end here, whichever way the command is routed.
    if (peek.op === 'killCursors' && this.cursors.size > 0) killedOn = this.unpinKilled(body);
    const topology = this.topology;
    // A route naming upstream.uri itself means the default: with a topology, its server selection.
    if (route !== null && topology !== null && route === this.main.address.uri) route = null;
    if (route !== null) {
      const pool = this.poolFor(route);
      if ((pool !== this.main || topology !== null) && peek.startTransaction && peek.lsidAt >= 0) this.pinTxn(lsidKey(body, peek.lsidAt), peek.txnNumber, pool);
      return pool;
    }
    if (this.routed.size === 0 && topology === null) return this.main;
    if (peek.cursorId !== 0n) {
      const pin = this.cursors.get(peek.cursorId);
      if (pin !== undefined) {
        const now = performance.now();
        if (pin.expiresAt > now) {
          // Renewed and moved to the back: the map stays ordered by last use, oldest first.
          pin.expiresAt = now + CURSOR_PIN_TTL_MS;
          this.cursors.delete(peek.cursorId);
          this.cursors.set(peek.cursorId, pin);
          return pin.pool;
        }
        this.cursors.delete(peek.cursorId);
      }
      const selected = topology === null ? this.main : topology.select(peek, body, null);
      if (this.sharedPins === null) return selected;
      const id = peek.cursorId;
      return new SharedPinLookup(this, cursorKey(id), (pool) => this.pinCursor(id, pool), selected);
    }
    if (peek.op === 'killCursors' && killedOn !== undefined) return killedOn;
    if (peek.inTransaction && peek.lsidAt >= 0 && (this.txns.size > 0 || this.sharedPins !== null)) {
      const key = lsidKey(body, peek.lsidAt);
      const pin = this.txns.get(key);
      // In a replica set a transaction lives on the primary: once its server is no longer the
      // primary the pin is dropped, and the statement goes to the new primary (mongod answers
      // NoSuchTransaction, labelled TransientTransactionError: the driver runs the transaction again).
      if (pin !== undefined && topology !== null && !topology.mayKeepTxn(pin.pool)) {
        this.txns.delete(key);
      } else if (pin !== undefined) {
        if (pin.txnNumber === peek.txnNumber && pin.expiresAt > performance.now()) {
          if (peek.op === 'commitTransaction' || peek.op === 'abortTransaction') this.txns.delete(key);
          return pin.pool;
        }
        this.txns.delete(key);
      }
      // A statement of a transaction another worker started (a later statement, or its commit).
      if (this.sharedPins !== null && !peek.startTransaction && topology !== null) {
        const txnNumber = peek.txnNumber;
        const ends = peek.op === 'commitTransaction' || peek.op === 'abortTransaction';
        return new SharedPinLookup(this, txnKey(key, txnNumber), (pool) => { if (!ends) this.pinTxn(key, txnNumber, pool, false); },
          topology.select(peek, body, null));
      }
    }
    if (topology === null) return this.main;
    // A transaction's first statement: pinned to whichever server the topology picks for it.
    return topology.select(peek, body, peek.startTransaction && peek.lsidAt >= 0 ? lsidKey(body, peek.lsidAt) : null);
  }

  /**
   * After a reply from `pool`: a cursor opened on a routed pool or a topology's server is pinned
   * there; an exhausted one is unpinned. A topology hears of "not primary" and shutdown errors.
   */
  afterReply(frame: Buffer, pool: UpstreamPool, peek: CommandPeek): void {
    if (pool === this.main && this.topology === null) return;
    let id: bigint;
    try {
      // An OP_MSG frame: header (16) + flags (4) + kind byte (1) + body.
      const r = this.replyPeek.read(frame.subarray(21));
      id = r.cursorId;
      if (!r.ok && this.topology !== null) this.topology.onReplyError(pool, r.code);
    } catch {
      return;
    }
    if (id === 0n) {
      if (peek.cursorId !== 0n) {
        this.cursors.delete(peek.cursorId);
        this.sharedPins?.unpublish(cursorKey(peek.cursorId));
      }
      return;
    }
    if (peek.cursorId === id) return; // a getMore's reply: already pinned (and renewed)
    this.pinCursor(id, pool);
    if (this.sharedPins !== null) {
      const server = this.serverKey(pool);
      if (server !== null) this.sharedPins.publish(cursorKey(id), server);
    }
  }

  private pinCursor(id: bigint, pool: UpstreamPool): void {
    this.dropExpired(this.cursors);
    if (this.cursors.size >= MAX_PINNED_CURSORS) this.cursors.delete(this.cursors.keys().next().value!);
    this.cursors.set(id, { pool, expiresAt: performance.now() + CURSOR_PIN_TTL_MS });
  }

  /** A pool's name that every worker gives the same server: `server:host:port` (a topology's), `uri:…` (a routed upstream's). */
  serverKey(pool: UpstreamPool): string | null {
    if (this.topology !== null) {
      for (const s of this.topology.allServers()) if (s.hasPool && s.pool === pool) return `server:${s.address}`;
    }
    if (pool === this.main) return `uri:${this.main.address.uri}`;
    for (const [uri, p] of this.routed) if (p === pool) return `uri:${uri}`;
    return null;
  }

  /** This worker's pool of `server` (a serverKey() another worker published); null when it has none. */
  poolOfServer(server: string): UpstreamPool | null {
    if (server.startsWith('server:') && this.topology !== null) {
      const address = server.slice('server:'.length);
      for (const s of this.topology.allServers()) if (s.address === address) return s.pool;
      return null;
    }
    return server.startsWith('uri:') ? this.poolFor(server.slice('uri:'.length)) : null;
  }

  close(): void {
    for (const p of this.routed.values()) p.close();
    this.topology?.close();
  }

  /** Pins the transaction of session `key` (lsid bytes) with `txnNumber` to `pool` (and, with workers, tells the others). */
  pinTxn(key: string, txnNumber: bigint, pool: UpstreamPool, publish = true): void {
    this.txns.delete(key);
    this.dropExpired(this.txns);
    if (this.txns.size >= MAX_PINNED_TRANSACTIONS) this.txns.delete(this.txns.keys().next().value!);
    this.txns.set(key, { pool, txnNumber, expiresAt: performance.now() + TXN_PIN_TTL_MS });
    if (publish && this.sharedPins !== null) {
      const server = this.serverKey(pool);
      if (server !== null) this.sharedPins.publish(txnKey(key, txnNumber), server);
    }
  }

  /** Drops expired pins from the front of `map` (ordered oldest first), a few per call. */
  private dropExpired<K>(map: Map<K, { expiresAt: number }>): void {
    const now = performance.now();
    let n = 0;
    for (const [k, v] of map) {
      if (v.expiresAt > now || n++ >= 8) break;
      map.delete(k);
    }
  }

  /**
   * killCursors: drops the pin of every id in its `cursors` array and returns the pool of the
   * first pinned one, where the whole command goes. Drivers kill one cursor per command; a command
   * naming cursors of different servers is not split (those on other servers are answered as
   * `cursorsNotFound` and time out there) — see docs/operations.md, "Cursors and transactions".
   */
  private unpinKilled(body: Buffer): UpstreamPool | undefined {
    let pool: UpstreamPool | undefined;
    const cur = this.cur.open(body, 0);
    while (cur.next()) {
      if (cur.type !== BSON_ARRAY || !cur.nameIs(K_CURSORS)) continue;
      const inner = this.inner.open(body, cur.valueStart, cur.valueEnd);
      while (inner.next()) {
        if (inner.type !== BSON_INT64) continue;
        const id = inner.int64();
        this.sharedPins?.unpublish(cursorKey(id));
        const pin = this.cursors.get(id);
        if (pin === undefined) continue;
        this.cursors.delete(id);
        pool ??= pin.pool;
      }
      break;
    }
    return pool;
  }

  /**
   * Cleanup after a closed client (load-balanced mode): the pool cursor `id` is pinned to, its pin
   * dropped; null when it is not pinned (one upstream server, or the pin expired).
   */
  takeCursorPin(id: bigint): UpstreamPool | null {
    const pin = this.cursors.get(id);
    if (pin === undefined) return null;
    this.cursors.delete(id);
    return pin.pool;
  }

  /** Likewise for the transaction `txnNumber` of the session whose lsid document is `lsid` (its bytes). */
  takeTxnPin(lsid: Buffer, txnNumber: bigint): UpstreamPool | null {
    const key = lsid.toString('latin1');
    const pin = this.txns.get(key);
    if (pin === undefined || pin.txnNumber !== txnNumber) return null;
    this.txns.delete(key);
    return pin.pool;
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
