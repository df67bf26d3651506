// devdb command engine.
//
// THIS IS A DEVELOPMENT UPSTREAM, NOT A DATABASE. It exists so the proxy can be
// demoed, tested and benchmarked on machines where no MongoDB server can be
// installed. It keeps everything in memory (no durability: data vanishes with
// the process), applies every write immediately (no isolation: a transaction's
// writes are seen by everyone at once; abortTransaction undoes them, see
// transactions.ts), and answers as a single standalone node (no replication,
// no sharding, no auth).
//
// The engine is pure and socket-free: the wire-protocol server decodes a
// command, calls `DevEngine.run`, and encodes the reply. Query, projection,
// update and aggregation semantics come from `mingo`; the engine adds storage,
// unique indexes, cursors and mongod-shaped replies/errors.
import type { Document } from 'bson';
import { commands } from './commands/index.ts';
import type { Ctx, EngineState, Handler } from './context.ts';
import { CursorManager } from './cursors.ts';
import { CommandError, codeName, ErrorCodes } from './errors.ts';
import { RETRYABLE_WRITE_COMMANDS, RetryableWrites, sessionKey, txnNumberOf } from './retryable.ts';
import { Store } from './store.ts';
import { Transactions } from './transactions.ts';
import { isPlainObject } from './values.ts';

export interface DevEngineOptions {
  /** Byte budget of one cursor batch array (default 16 MiB, as mongod; the reply's envelope comes on top). */
  maxBatchBytes?: number;
  /** Idle cursors are discarded after this many ms (default 10 minutes). */
  cursorTimeoutMs?: number;
  /** Maximum number of open cursors; the least recently used is evicted (default 10000). */
  maxCursors?: number;
  /** Logical sessions whose last retryable write is remembered; the least recently used is forgotten (default 10000). */
  maxRetryableSessions?: number;
  /** A session's retryable-write record is forgotten after this many idle ms (default 30 minutes). */
  sessionTimeoutMs?: number;
  /** An open transaction with no command for this many ms is aborted (default 60 s, mongod's transactionLifetimeLimitSeconds). */
  transactionIdleTimeoutMs?: number;
  /** Clock, for tests (default Date.now). */
  now?: () => number;
}

// mongod's limit (BSONObjMaxUserSize): a batch stops before the document that would take it past
// 16 MiB. js-bson serializes into a 17 MiB buffer, which leaves the envelope (cursor id, namespace,
// ok, $clusterTime) room enough; counting only the documents, without their array element headers
// (up to 8 bytes each), let a batch of ~600,000 small documents reach 17.8 MB and fail to serialize.
const DEFAULT_MAX_BATCH_BYTES = 16 * 1024 * 1024;

export class DevEngine {
  private readonly state: EngineState;

  constructor(opts: DevEngineOptions = {}) {
    const now = opts.now ?? Date.now;
    const store = new Store();
    this.state = {
      store,
      cursors: new CursorManager({
        maxBatchBytes: opts.maxBatchBytes ?? DEFAULT_MAX_BATCH_BYTES,
        idleTimeoutMs: opts.cursorTimeoutMs ?? 10 * 60 * 1000,
        maxCursors: opts.maxCursors ?? 10000,
        now,
      }),
      retryableWrites: new RetryableWrites({
        maxSessions: opts.maxRetryableSessions ?? 10000,
        idleTimeoutMs: opts.sessionTimeoutMs ?? 30 * 60 * 1000,
        now,
      }),
      transactions: new Transactions(store, {
        maxSessions: opts.maxRetryableSessions ?? 10000,
        idleTimeoutMs: opts.transactionIdleTimeoutMs ?? 60 * 1000,
        now,
      }),
      startedAt: now(),
      now,
    };
  }

  /**
   * Runs one command. `sequences` are OP_MSG kind-1 document sequences, treated
   * exactly like the same-named array field. `connectionId` is echoed by hello.
   * Never throws.
   */
  run(cmd: Document, sequences?: Record<string, Document[]>, connectionId = 0): Document {
    try {
      if (!isPlainObject(cmd) || Object.keys(cmd).length === 0) {
        return new CommandError(ErrorCodes.FailedToParse, 'empty command document').toReply();
      }
      let full = cmd;
      if (sequences && Object.keys(sequences).length) {
        full = { ...cmd };
        for (const [id, docs] of Object.entries(sequences)) {
          if (id in cmd) {
            return new CommandError(ErrorCodes.FailedToParse, `Duplicate field '${id}': given both as a document sequence and in the command body`).toReply();
          }
          full[id] = docs;
        }
      }
      const name = Object.keys(full)[0];
      const handler = commands[name];
      if (!handler) {
        return new CommandError(ErrorCodes.CommandNotFound, `no such command: '${name}'`).toReply();
      }
      const db = full.$db === undefined ? 'admin' : full.$db;
      if (typeof db !== 'string' || db.length === 0) {
        return new CommandError(ErrorCodes.InvalidNamespace, `Invalid database name: '${String(db)}'`).toReply();
      }
      const ctx: Ctx = { ...this.state, db, connectionId };
      const transactions = this.state.transactions;
      if (transactions.size > 0) transactions.sweep();
      if (full.autocommit === false) return transactions.run(name, full, ctx, handler);
      if (RETRYABLE_WRITE_COMMANDS.has(name) && full.txnNumber !== undefined && full.autocommit !== false) {
        return this.retryableWrite(full, ctx, handler);
      }
      return handler(full, ctx);
    } catch (e) {
      if (e instanceof CommandError) return e.toReply();
      const msg = e instanceof Error ? e.message : String(e);
      return { ok: 0, errmsg: `devdb internal error: ${msg}`, code: ErrorCodes.InternalError, codeName: codeName(ErrorCodes.InternalError) };
    }
  }

  /**
   * A write with lsid + txnNumber outside a transaction: a retry (same txnNumber as the session's
   * last) gets the first reply back without the write running again; an older txnNumber is refused.
   * Without a usable lsid.id or txnNumber the write runs as any other.
   */
  private retryableWrite(cmd: Document, ctx: Ctx, handler: Handler): Document {
    const key = sessionKey(cmd.lsid);
    const txnNumber = txnNumberOf(cmd.txnNumber);
    if (key === null || txnNumber === null) return handler(cmd, ctx);
    const retries = this.state.retryableWrites;
    const d = retries.check(key, txnNumber);
    if (d.kind === 'replay') return d.reply;
    if (d.kind === 'tooOld') {
      return new CommandError(
        ErrorCodes.TransactionTooOld,
        `Retryable write with txnNumber ${d.txnNumber} is prohibited on session ${key} because a newer retryable write with txnNumber ${d.last} ` +
          `has already started on this session.`,
      ).toReply();
    }
    let reply: Document = { ok: 0 }; // a throwing handler records the txnNumber, no reply
    try {
      reply = handler(cmd, ctx);
      return reply;
    } finally {
      retries.record(key, txnNumber, reply);
    }
  }

  /** Drops all databases, cursors, retryable-write records and transactions. */
  reset(): void {
    this.state.store.reset();
    this.state.cursors.reset();
    this.state.retryableWrites.reset();
    this.state.transactions.reset();
  }

  /** Open transactions (tests). */
  get openTransactions(): number {
    return this.state.transactions.open;
  }
}

export { ErrorCodes, codeName } from './errors.ts';
