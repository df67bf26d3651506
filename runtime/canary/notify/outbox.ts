// The notification outbox: one row per (event, channel), written synchronously when the event is
// emitted and marked when delivered or given up, in SQLite (better-sqlite3) so that a restart —
// kill -9 included — resumes exactly what was not delivered. The unique key (event id, channel
// key) makes a re-emitted event (a controller replaying a transition after a restart) a no-op:
// one message per transition per channel. The file is watched as canary.db is (sqlite-file.ts):
// deleted or replaced while the proxy runs, it is written anew from the open handle, so the
// pending messages are still delivered (and after a restart), and logged at `error` once.
import type Database from 'better-sqlite3';
import { WatchedSqlite, type SqliteFileSettings, type WatchOptions } from '../sqlite-file.ts';
import type { CanaryEvent, NotificationChannel } from '../events.ts';

export type OutboxState = 'pending' | 'delivered' | 'failed';

export interface OutboxRow {
  seq: number;
  event_id: string;
  channel_key: string;
  channel_type: NotificationChannel['type'];
  channel: NotificationChannel & { secret?: string };
  event: CanaryEvent;
  state: OutboxState;
  attempts: number;
  /** Epoch ms before which the next attempt is not made. */
  next_attempt_at: number;
  created_at: number;
  delivered_at: number | null;
  last_error: string | null;
}

interface RawRow {
  seq: number; event_id: string; channel_key: string; channel_type: string; channel: string; event: string;
  state: string; attempts: number; next_attempt_at: number; created_at: number; delivered_at: number | null; last_error: string | null;
}

const SCHEMA = `
CREATE TABLE IF NOT EXISTS outbox (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  event_id TEXT NOT NULL,
  channel_key TEXT NOT NULL,
  channel_type TEXT NOT NULL,
  channel TEXT NOT NULL,
  event TEXT NOT NULL,
  state TEXT NOT NULL DEFAULT 'pending',
  attempts INTEGER NOT NULL DEFAULT 0,
  next_attempt_at INTEGER NOT NULL,
  created_at INTEGER NOT NULL,
  delivered_at INTEGER,
  last_error TEXT,
  UNIQUE (event_id, channel_key)
);
CREATE INDEX IF NOT EXISTS outbox_pending ON outbox (state, channel_key, seq);
`;

function toRow(r: RawRow): OutboxRow {
  return {
    ...r,
    channel_type: r.channel_type as OutboxRow['channel_type'],
    channel: JSON.parse(r.channel) as OutboxRow['channel'],
    event: JSON.parse(r.event) as CanaryEvent,
    state: r.state as OutboxState,
  };
}

// WAL + NORMAL: a committed row survives a process crash (kill -9); only a power loss may lose the
// last transactions, which is the usual trade for an outbox written on every transition.
const OUTBOX_FILE: SqliteFileSettings = {
  what: 'the notification outbox', key: 'notifications.outbox_path, or canary.data_dir', place: 'notifications.outbox_path (default in ' +
    'canary.data_dir)', holds: 'the notifications not yet delivered (and the record of those that were)', lost: 'every undelivered notification',
  synchronous: 'NORMAL', schema: SCHEMA,
};

type Statements = ReturnType<typeof prepare>;

function prepare(db: Database.Database) {
  return {
    insert: db.prepare(`INSERT OR IGNORE INTO outbox (event_id, channel_key, channel_type, channel, event, next_attempt_at, created_at)
      VALUES (?, ?, ?, ?, ?, ?, ?)`),
    // Per channel, only its oldest pending message is eligible: a channel receives its messages in
    // order (a pager's resolve never overtakes its trigger), and a later one waits while an earlier
    // one is being retried.
    heads: db.prepare(`SELECT o.* FROM outbox o
      JOIN (SELECT channel_key, MIN(seq) AS seq FROM outbox WHERE state = 'pending' GROUP BY channel_key) h ON h.seq = o.seq
      ORDER BY o.next_attempt_at, o.seq`),
    delivered: db.prepare(`UPDATE outbox SET state = 'delivered', attempts = ?, delivered_at = ?, last_error = NULL WHERE seq = ?`),
    retry: db.prepare(`UPDATE outbox SET attempts = ?, next_attempt_at = ?, last_error = ? WHERE seq = ?`),
    failed: db.prepare(`UPDATE outbox SET state = 'failed', attempts = ?, last_error = ? WHERE seq = ?`),
    count: db.prepare(`SELECT state, COUNT(*) AS n FROM outbox GROUP BY state`),
    prune: db.prepare(`DELETE FROM outbox WHERE state != 'pending' AND created_at < ?`),
    all: db.prepare('SELECT * FROM outbox ORDER BY seq'),
  };
}

export class Outbox {
  private readonly file: WatchedSqlite;
  private stmts!: Statements;

  /** `path`: the SQLite file, or ":memory:" (not watched). `opts`: how the file is watched (its log, how often). */
  constructor(path: string, opts: WatchOptions = {}) {
    this.file = new WatchedSqlite(path, OUTBOX_FILE, (db) => { this.stmts = prepare(db); }, opts);
  }

  /** Records the message; false when this event was already recorded for this channel. */
  enqueue(event: CanaryEvent, channelKey: string, channel: OutboxRow['channel'], now: number): boolean {
    this.file.check();
    const r = this.stmts.insert.run(event.id, channelKey, channel.type, JSON.stringify(channel), JSON.stringify(event), now, now);
    return r.changes === 1;
  }

  /** The oldest pending message of each channel, soonest due first. */
  heads(): OutboxRow[] {
    return (this.stmts.heads.all() as RawRow[]).map(toRow);
  }

  markDelivered(seq: number, attempts: number, now: number): void {
    this.file.check();
    this.stmts.delivered.run(attempts, now, seq);
  }

  markRetry(seq: number, attempts: number, nextAt: number, error: string): void {
    this.file.check();
    this.stmts.retry.run(attempts, nextAt, error.slice(0, 500), seq);
  }

  markFailed(seq: number, attempts: number, error: string): void {
    this.file.check();
    this.stmts.failed.run(attempts, error.slice(0, 500), seq);
  }

  /** Deletes delivered and given-up rows created before `before` (epoch ms); pending rows stay. */
  prune(before: number): number {
    this.file.check();
    return this.stmts.prune.run(before).changes;
  }

  counts(): Record<OutboxState, number> {
    const out: Record<OutboxState, number> = { pending: 0, delivered: 0, failed: 0 };
    for (const r of this.stmts.count.all() as { state: OutboxState; n: number }[]) out[r.state] = r.n;
    return out;
  }

  /** Every row, oldest first (tests and diagnostics). */
  all(): OutboxRow[] {
    return (this.stmts.all.all() as RawRow[]).map(toRow);
  }

  /** Checks the file a last time (a graceful stop re-persists a deleted outbox), then closes it. */
  close(): void {
    this.file.close();
  }
}
