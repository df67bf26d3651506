// Multi-document transactions: what a session's commands with `autocommit: false` do.
//
// Atomic, not isolated. Every write of a transaction is applied at once, as any other write, and
// recorded in the transaction's undo log (store.ts journals inserts, replacements, removals and
// the collections it creates). commitTransaction drops the log; abortTransaction — or a new
// transaction on the session, endSessions/killSessions, or 60 s without a command — applies it in
// reverse, so the data is as it was before the transaction (a document another session has
// written since is left as that session wrote it). Reads are not isolated: inside a transaction
// they see every session's writes, and other sessions see the transaction's writes before it
// commits. DDL that cannot be undone (drop, dropDatabase, renameCollection, dropIndexes, collMod)
// is refused inside a transaction, as mongod refuses it.
//
// The session's state follows mongod's: a statement needs the transaction its txnNumber started
// (startTransaction: true) and that is still open, else NoSuchTransaction (251, labelled
// TransientTransactionError so that drivers retry the whole transaction); a lower txnNumber than
// the session's is TransactionTooOld (225); commitTransaction after a commit answers ok again
// (drivers retry it), after an abort NoSuchTransaction; abortTransaction of a committed
// transaction is TransactionCommitted (256).
//
// Bounds, without timers (nothing keeps the event loop alive): at most `maxSessions` records,
// the least recently used forgotten first (its open transaction aborted), and a record idle for
// `idleTimeoutMs` is swept — its open transaction aborted — on the engine's next command.
import type { Document } from 'bson';
import type { Ctx, Handler } from './context.ts';
import { CommandError, ErrorCodes } from './errors.ts';
import { sessionKey, txnNumberOf } from './retryable.ts';
import type { Store, UndoEntry } from './store.ts';

export interface TransactionOptions {
  maxSessions: number;
  idleTimeoutMs: number;
  now: () => number;
}

interface TxnRecord {
  txnNumber: bigint;
  state: 'open' | 'committed' | 'aborted';
  /** The undo log while open; emptied when the transaction ends. */
  undo: UndoEntry[];
  lastUsed: number;
}

/** Commands mongod refuses inside a transaction, whose effect an abort could not undo here. */
const NOT_IN_TRANSACTION: ReadonlySet<string> = new Set(['drop', 'dropDatabase', 'renameCollection', 'dropIndexes', 'deleteIndexes', 'collMod']);

const transient = { errorLabels: ['TransientTransactionError'] };

export class Transactions {
  /** Insertion order is recency order: a used session moves to the end. */
  private readonly sessions = new Map<string, TxnRecord>();

  constructor(private readonly store: Store, private readonly opts: TransactionOptions) {}

  get size(): number {
    return this.sessions.size;
  }

  /** Open transactions (tests). */
  get open(): number {
    let n = 0;
    for (const r of this.sessions.values()) if (r.state === 'open') n++;
    return n;
  }

  reset(): void {
    this.sessions.clear();
  }

  /** Aborts and forgets the records idle for longer than idleTimeoutMs. */
  sweep(): void {
    const cutoff = this.opts.now() - this.opts.idleTimeoutMs;
    for (const [key, r] of this.sessions) {
      if (r.lastUsed >= cutoff) break; // recency order: everything after is newer
      this.end(r, 'aborted');
      this.sessions.delete(key);
    }
  }

  /** A command with `autocommit: false`: a statement of a transaction, or its commit or abort. */
  run(name: string, cmd: Document, ctx: Ctx, handler: Handler): Document {
    const key = sessionKey(cmd.lsid);
    const txnNumber = txnNumberOf(cmd.txnNumber);
    // Without a usable lsid.id (a UUID) or txnNumber there is no transaction to belong to: the
    // command runs as any other, as a retryable write without them does.
    if (key === null || txnNumber === null) return handler(cmd, ctx);
    let r = this.touch(key);
    if (r !== undefined && txnNumber < r.txnNumber) {
      return new CommandError(ErrorCodes.TransactionTooOld, `txnNumber ${txnNumber} is less than last txnNumber ${r.txnNumber} seen in ` +
        `session ${key}`).toReply();
    }
    if (name === 'commitTransaction' || name === 'abortTransaction') {
      if (r === undefined || r.txnNumber !== txnNumber) return noSuchTransaction(txnNumber, key, 'was not started');
      if (name === 'commitTransaction') {
        if (r.state === 'aborted') return noSuchTransaction(txnNumber, key, 'has been aborted');
        this.end(r, 'committed');
        return { ok: 1 };
      }
      if (r.state === 'committed') return new CommandError(ErrorCodes.TransactionCommitted, `Transaction with txnNumber ${txnNumber} has been ` +
        `committed.`).toReply();
      if (r.state === 'aborted') return noSuchTransaction(txnNumber, key, 'has been aborted');
      this.end(r, 'aborted');
      return { ok: 1 };
    }
    if (cmd.startTransaction === true && (r === undefined || r.txnNumber < txnNumber)) {
      // A new transaction on the session ends one still open there (mongod aborts it).
      if (r !== undefined) this.end(r, 'aborted');
      r = { txnNumber, state: 'open', undo: [], lastUsed: this.opts.now() };
      this.sessions.set(key, r);
      this.bound();
    }
    if (r === undefined || r.txnNumber !== txnNumber || r.state !== 'open') {
      return noSuchTransaction(txnNumber, key, r?.state === 'committed' ? 'has been committed' : r?.state === 'aborted' ? 'has been ' +
        'aborted' : 'was not started');
    }
    if (NOT_IN_TRANSACTION.has(name)) {
      return new CommandError(ErrorCodes.OperationNotSupportedInTransaction, `Cannot run '${name}' in a multi-document transaction.`).toReply();
    }
    this.store.undo = r.undo;
    try {
      return handler(cmd, ctx);
    } finally {
      this.store.undo = null;
    }
  }

  /** endSessions / killSessions: each entry is an lsid document; an open transaction is aborted. */
  forget(lsids: unknown): void {
    if (!Array.isArray(lsids)) return;
    for (const l of lsids) {
      const key = sessionKey(l);
      const r = key === null ? undefined : this.sessions.get(key);
      if (r === undefined) continue;
      this.end(r, 'aborted');
      this.sessions.delete(key!);
    }
  }

  /** killAllSessions: every open transaction is aborted. */
  abortAll(): void {
    for (const r of this.sessions.values()) this.end(r, 'aborted');
    this.sessions.clear();
  }

  private touch(key: string): TxnRecord | undefined {
    const r = this.sessions.get(key);
    if (r === undefined) return undefined;
    r.lastUsed = this.opts.now();
    this.sessions.delete(key);
    this.sessions.set(key, r);
    return r;
  }

  private bound(): void {
    while (this.sessions.size > this.opts.maxSessions) {
      const [oldest, r] = this.sessions.entries().next().value as [string, TxnRecord];
      this.end(r, 'aborted');
      this.sessions.delete(oldest);
    }
  }

  /** Commits (drops the undo log) or aborts (applies it, newest first) an open transaction. */
  private end(r: TxnRecord, state: 'committed' | 'aborted'): void {
    if (r.state !== 'open') return;
    r.state = state;
    const undo = r.undo;
    r.undo = [];
    if (state === 'committed') return;
    for (let i = undo.length - 1; i >= 0; i--) {
      const e = undo[i]!;
      if (e.op === 'create') this.store.undoCreate(e.coll);
      else e.coll.undo(e);
    }
  }
}

function noSuchTransaction(txnNumber: bigint, key: string, why: string): Document {
  return new CommandError(ErrorCodes.NoSuchTransaction, `Transaction with txnNumber ${txnNumber} on session ${key} ${why}.`, transient).toReply();
}
