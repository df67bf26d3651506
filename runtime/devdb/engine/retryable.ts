// Retryable writes (MongoDB "Retryable Writes" spec, as far as one in-memory node needs it).
//
// A driver that retries a write resends the same command with the same logical session id
// (`lsid.id`) and the same `txnNumber`. mongod recognises the pair and answers with the first
// attempt's result instead of applying the write a second time. devdb does the same, per logical
// session, for insert / update / delete / findAndModify sent with `lsid` and `txnNumber` and
// WITHOUT `autocommit: false` (that marks a multi-statement transaction, which devdb does not
// implement: such commands run as before).
//
//   same txnNumber as the session's last one  → the stored reply, nothing applied again
//   lower txnNumber                            → error 225 TransactionTooOld
//   higher txnNumber                           → runs normally and replaces the record
//
// Simplifications against mongod: the record is per command, not per statement (mongod keeps one
// entry per stmtId and re-runs only the statements that had not succeeded); a retry is not
// checked for being the same command as the first attempt; replies carry no `retriedStmtIds`.
// A command that failed as a whole (`ok: 0`) records its txnNumber but no reply, so its retry
// runs again, as in mongod where a failed command leaves no executed statement behind.
//
// Bounds (no timers, so nothing keeps the event loop alive): at most `maxSessions` sessions are
// remembered — one record each: the last txnNumber and its reply — and when a new session would
// exceed that, the least recently used one is forgotten (default 10000). A session unused for
// `idleTimeoutMs` (default 30 minutes, the `logicalSessionTimeoutMinutes` devdb announces) is
// forgotten too, swept lazily on access; so are the sessions named by endSessions/killSessions.
// A forgotten session's retry runs the write again — the same risk as a real server whose
// session expired.
import { Binary, Long, type Document } from 'bson';

export interface RetryableWriteOptions {
  maxSessions: number;
  idleTimeoutMs: number;
  now: () => number;
}

interface SessionRecord {
  txnNumber: bigint;
  /** The reply to `txnNumber`, or null when that command failed as a whole. */
  reply: Document | null;
  lastUsed: number;
}

/** Commands that are retryable writes when they carry lsid + txnNumber (mongod's names and aliases). */
export const RETRYABLE_WRITE_COMMANDS: ReadonlySet<string> = new Set(['insert', 'update', 'delete', 'findAndModify', 'findandmodify']);

/** The session key: lsid.id's bytes as hex, or null when `lsid` has no binary `id`. */
export function sessionKey(lsid: unknown): string | null {
  if (lsid === null || typeof lsid !== 'object') return null;
  const id = (lsid as Document).id;
  if (id instanceof Binary) return Buffer.from(id.buffer.subarray(0, id.position)).toString('hex');
  return null;
}

/** txnNumber as a bigint (BSON long arrives as Long, or as a number once promoted), or null. */
export function txnNumberOf(v: unknown): bigint | null {
  if (typeof v === 'bigint') return v;
  if (typeof v === 'number') return Number.isSafeInteger(v) ? BigInt(v) : null;
  if (Long.isLong(v)) return (v as Long).toBigInt();
  return null;
}

export type RetryDecision =
  | { kind: 'run'; key: string; txnNumber: bigint }
  | { kind: 'replay'; reply: Document }
  | { kind: 'tooOld'; txnNumber: bigint; last: bigint };

export class RetryableWrites {
  /** Insertion order is recency order: a used session is moved to the end. */
  private readonly sessions = new Map<string, SessionRecord>();

  constructor(private readonly opts: RetryableWriteOptions) {}

  get size(): number {
    this.sweep();
    return this.sessions.size;
  }

  reset(): void {
    this.sessions.clear();
  }

  private sweep(): void {
    const cutoff = this.opts.now() - this.opts.idleTimeoutMs;
    for (const [key, r] of this.sessions) {
      if (r.lastUsed >= cutoff) break; // recency order: everything after is newer
      this.sessions.delete(key);
    }
  }

  /** Decides what a write with this session key and txnNumber does. */
  check(key: string, txnNumber: bigint): RetryDecision {
    this.sweep();
    const r = this.sessions.get(key);
    if (r !== undefined) {
      r.lastUsed = this.opts.now();
      this.sessions.delete(key);
      this.sessions.set(key, r);
      if (txnNumber < r.txnNumber) return { kind: 'tooOld', txnNumber, last: r.txnNumber };
      if (txnNumber === r.txnNumber && r.reply !== null) return { kind: 'replay', reply: { ...r.reply } };
    }
    return { kind: 'run', key, txnNumber };
  }

  /** Records the reply of a write that `check` said to run. */
  record(key: string, txnNumber: bigint, reply: Document): void {
    const r = this.sessions.get(key);
    // Another write on the session may have moved it past txnNumber meanwhile (cannot happen
    // while the engine is synchronous, but a record must never go backwards).
    if (r !== undefined && r.txnNumber > txnNumber) return;
    this.sessions.delete(key);
    this.sessions.set(key, { txnNumber, reply: reply.ok === 1 ? { ...reply } : null, lastUsed: this.opts.now() });
    while (this.sessions.size > this.opts.maxSessions) {
      const oldest = this.sessions.keys().next().value as string;
      this.sessions.delete(oldest);
    }
  }

  /** Forgets sessions (endSessions / killSessions): each entry is an lsid document. */
  forget(lsids: unknown): void {
    if (!Array.isArray(lsids)) return;
    for (const l of lsids) {
      const key = sessionKey(l);
      if (key !== null) this.sessions.delete(key);
    }
  }
}
