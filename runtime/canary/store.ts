// The canary's durable state in SQLite (better-sqlite3; synchronous, so a transition is on disk
// before the API answers): each canary as one JSON record (spec, stage, stage entry time, the
// sustained timers' start times, the paused flag, outcome), its history, its evaluation samples and
// its report. WAL journal: a kill -9 loses nothing that was committed.
//
// The file is watched (its device and inode, before each write and every checkMs): canary.db
// deleted or replaced while the proxy runs (`rm -rf data/`, a restore over it) would otherwise go
// on being written through the open handle, into a file nobody can open again, and every canary
// would be gone at the next restart with nothing said. The open handle still holds everything, so
// the store writes it to a new canary.db (a replacing file is moved aside first, not overwritten)
// and logs it at `error` once.
import Database from 'better-sqlite3';
import { existsSync, mkdirSync, renameSync, rmSync, statSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import type { Log } from '../log/index.ts';
import type { CanarySpec } from './spec.ts';
import type { RuleReading, SideMetrics } from './events.ts';
import type { PipelineConfig } from '../pipeline/index.ts';
import type { Evaluation } from './evaluator.ts';
import type { DiffRecord, DivergenceKind } from './shadow.ts';

export type CanaryStatus = 'active' | 'paused' | 'completed' | 'rolled_back';

export interface StageVisit {
  stage: number;
  traffic_pct: number;
  entered_at: number;
  left_at: number | null;
  candidate_requests: number;
}

export interface CanaryOutcome {
  at: number;
  reason: string;
  triggered_by: 'manual' | 'automatic' | null;
  rules: RuleReading[];
  final: { baseline: SideMetrics; candidate: SideMetrics };
}

/** Everything persisted about one canary; times are ms since the epoch (wall clock). */
export interface CanaryRecord {
  id: string;
  pipeline_id: string;
  status: CanaryStatus;
  version: number;
  spec: CanarySpec;
  current_stage: number;
  traffic_pct: number;
  created_at: number;
  stage_entered_at: number;
  /** Candidate requests counted by evaluations since the stage was entered. */
  stage_candidate_requests: number;
  /** Sustained timers: rule → when its breach was first seen (absent: no breach running). */
  timers: Record<string, number>;
  /** Rules whose threshold warning was emitted in the current episode. */
  warned: string[];
  baseline_version: string;
  candidate_version: string;
  stages_visited: StageVisit[];
  outcome: CanaryOutcome | null;
}

export interface HistoryEntry {
  at: number;
  event: string;
  stage: number;
  traffic_pct: number;
  message: string;
  details?: Record<string, unknown>;
}

export interface Sample {
  at: number;
  stage: number;
  traffic_pct: number;
  baseline: SideMetrics & { errors: number };
  candidate: SideMetrics & { errors: number };
  /** In a fleet: the instance that made the evaluation (the leader then). */
  evaluated_by?: string;
}

/**
 * A completed canary's graph as the pipeline's baseline (promotions.ts): kept until the file
 * changes that pipeline's steps, then the file wins.
 */
export interface PromotionRecord {
  pipeline_id: string;
  canary_id: string;
  /** When the canary completed (ms since the epoch). */
  promoted_at: number;
  /** The graph that runs: the baseline's configuration with the candidate laid over it. */
  config: PipelineConfig;
  version: string;
  /** The file's configuration of the pipeline when it was promoted (fingerprint and the steps themselves, for the warning). */
  file_fingerprint: string;
}

/**
 * An evaluation as the instances of a fleet that do not evaluate show it in the status: its result
 * and rules, and the current stage's figures then (the evaluating instance publishes it).
 */
export interface EvaluationView {
  stage: number;
  evaluation: Evaluation;
  metrics: { baseline: SideMetrics; candidate: SideMetrics };
  /** A shadow canary's stage figures (ShadowWindow.view()); null: not a shadow canary. */
  shadow_stage: Record<string, unknown> | null;
  /** A shadow canary's figures when evaluated (the fleet's counts and newest diffs); null: not a shadow canary. */
  shadow_figures?: {
    sampled: number; diverged: number; by_kind: Record<DivergenceKind, number>; memory_bytes: number; reads: number; reads_in_flight: number;
    diffs: DiffRecord[];
  } | null;
}

/**
 * What the controller needs of its records' storage: this SQLite store, or the fleet's mirror of
 * the shared store (runtime/fleet/canary-sync.ts).
 */
export interface CanaryRecords {
  save(r: CanaryRecord, entries?: HistoryEntry[]): void;
  all(): CanaryRecord[];
  history(id: string): HistoryEntry[];
  addSample(id: string, s: Sample): void;
  /** Oldest first (a fleet reads them from its store). */
  samples(id: string): Sample[] | Promise<Sample[]>;
  /** After each evaluation (a fleet publishes it to the instances that do not evaluate); absent: not kept. */
  evaluated?(id: string, view: EvaluationView): void;
}

/**
 * An error opening one of the canary's SQLite files, naming the file and what to do
 * (better-sqlite3 says "file is not a database" or "database is locked" without the file).
 */
export function sqliteOpenError(what: string, path: string, err: unknown, key: string): Error {
  const e = err as NodeJS.ErrnoException;
  const todo = e.code === 'SQLITE_NOTADB' || e.code === 'SQLITE_CORRUPT'
    ? 'it is not a readable SQLite database: move it aside (it is then created empty) or restore it from a backup'
    : e.code === 'SQLITE_BUSY' ? `another process holds it (one proxy per ${key})`
    : e.code === 'EEXIST' || e.code === 'ENOTDIR' ? `its directory (from ${key}) is a file, not a directory` : `check ${key}`;
  return new Error(`cannot open ${what} ${path}: ${e.message}; ${todo}`, { cause: err });
}

const CANARY_SCHEMA = `
  CREATE TABLE IF NOT EXISTS canaries (id TEXT PRIMARY KEY, pipeline_id TEXT NOT NULL, status TEXT NOT NULL, created_at INTEGER NOT NULL,
    record TEXT NOT NULL);
  CREATE TABLE IF NOT EXISTS history (seq INTEGER PRIMARY KEY AUTOINCREMENT, canary_id TEXT NOT NULL, at INTEGER NOT NULL, entry TEXT NOT NULL);
  CREATE INDEX IF NOT EXISTS history_canary ON history (canary_id, seq);
  CREATE TABLE IF NOT EXISTS samples (seq INTEGER PRIMARY KEY AUTOINCREMENT, canary_id TEXT NOT NULL, at INTEGER NOT NULL, sample TEXT NOT NULL);
  CREATE INDEX IF NOT EXISTS samples_canary ON samples (canary_id, seq);
  CREATE TABLE IF NOT EXISTS promotions (pipeline_id TEXT PRIMARY KEY, record TEXT NOT NULL);
  CREATE TABLE IF NOT EXISTS fleet_kv (key TEXT PRIMARY KEY, value TEXT NOT NULL, revision INTEGER NOT NULL);
`;

type Statements = ReturnType<typeof prepare>;

function prepare(db: Database.Database) {
  return {
    upsert: db.prepare('INSERT INTO canaries (id, pipeline_id, status, created_at, record) VALUES (@id, @pipeline_id, @status, @created_at, ' +
      '@record) ON CONFLICT(id) DO UPDATE SET status = excluded.status, record = excluded.record'),
    all: db.prepare('SELECT record FROM canaries ORDER BY created_at DESC, id'),
    addHistory: db.prepare('INSERT INTO history (canary_id, at, entry) VALUES (?, ?, ?)'),
    history: db.prepare('SELECT entry FROM history WHERE canary_id = ? ORDER BY seq'),
    addSample: db.prepare('INSERT INTO samples (canary_id, at, sample) VALUES (?, ?, ?)'),
    samples: db.prepare('SELECT sample FROM samples WHERE canary_id = ? ORDER BY seq'),
    trimSamples: db.prepare('DELETE FROM samples WHERE canary_id = ? AND seq <= (SELECT seq FROM samples WHERE canary_id = ? ORDER BY seq ' +
      'DESC LIMIT 1 OFFSET ?)'),
    putPromotion: db.prepare('INSERT INTO promotions (pipeline_id, record) VALUES (?, ?) ON CONFLICT(pipeline_id) DO UPDATE SET record = ' +
      'excluded.record'),
    promotion: db.prepare('SELECT record FROM promotions WHERE pipeline_id = ?'),
    promotions: db.prepare('SELECT record FROM promotions'),
    dropPromotion: db.prepare('DELETE FROM promotions WHERE pipeline_id = ?'),
    kvGet: db.prepare('SELECT key, value, revision FROM fleet_kv WHERE key = ?'),
    kvList: db.prepare('SELECT key, value, revision FROM fleet_kv WHERE substr(key, 1, length(@p)) = @p ORDER BY key'),
    kvPut: db.prepare('INSERT INTO fleet_kv (key, value, revision) VALUES (?, ?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value, ' +
      'revision = excluded.revision'),
    kvDrop: db.prepare('DELETE FROM fleet_kv WHERE key = ?'),
    kvTop: db.prepare('SELECT coalesce(max(revision), 0) AS top FROM fleet_kv'),
  };
}

/** Opens (creating if missing) a canary database at `path` with the store's settings and tables. */
function openDatabase(path: string): Database.Database {
  let db: Database.Database | null = null;
  try {
    mkdirSync(dirname(path), { recursive: true });
    db = new Database(path);
    db.pragma('journal_mode = WAL');
    db.pragma('synchronous = FULL');
    db.exec(CANARY_SCHEMA);
    return db;
  } catch (err) {
    db?.close();
    throw sqliteOpenError('the canary store', path, err, 'canary.data_dir');
  }
}

/**
 * A file's identity: device and inode (bigint: inode numbers past 2^53 exist); null: no file there;
 * undefined: cannot tell (stat failed otherwise, e.g. EACCES) — nothing is done about that.
 */
function identityOf(path: string): string | null | undefined {
  try {
    const st = statSync(path, { bigint: true });
    return `${st.dev}:${st.ino}`;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    return code === 'ENOENT' || code === 'ENOTDIR' ? null : undefined;
  }
}

export interface CanaryStoreOptions {
  /** Where a canary.db deleted or replaced under the proxy is reported (absent: not reported, still re-persisted). */
  log?: Pick<Log, 'info' | 'error'>;
  /** How often the file is checked besides before each write (ms); 0: only before writes. */
  checkMs?: number;
  /** The clock (ms since the epoch) naming a replaced file moved aside; tests move it. */
  now?: () => number;
}

export class CanaryStore implements CanaryRecords {
  readonly path: string;
  private db: Database.Database;
  private readonly maxSamples: number;
  private stmts: Statements;
  /** The device and inode of the file `db` has open. */
  private identity: string | null | undefined;
  private readonly log: Pick<Log, 'info' | 'error'> | null;
  private readonly now: () => number;
  private readonly timer: NodeJS.Timeout | null;
  /** A re-persist failed and was reported; retried at each check, reported again only once it works. */
  private failing = false;
  private closed = false;

  constructor(dir: string, maxSamples = 10000, opts: CanaryStoreOptions = {}) {
    this.path = join(resolve(dir), 'canary.db');
    this.maxSamples = maxSamples;
    this.log = opts.log ?? null;
    this.now = opts.now ?? Date.now;
    this.db = openDatabase(this.path);
    this.stmts = prepare(this.db);
    this.identity = identityOf(this.path);
    const every = opts.checkMs ?? 10_000;
    this.timer = every > 0 ? setInterval(() => this.check(), every) : null;
    this.timer?.unref();
  }

  /**
   * Whether canary.db is still the file the store has open; if not (deleted, or replaced by another
   * file), writes everything the open handle holds to a new canary.db and switches to it.
   */
  check(): void {
    const now = identityOf(this.path);
    if (this.closed || now === undefined || this.identity === undefined || now === this.identity) return;
    const how = now === null ? 'deleted' : 'replaced';
    try {
      const movedAside = this.repersist(now !== null);
      this.log?.error(`the canary store ${this.path} was ${how} while the proxy runs: the canaries, their history, samples and promotions ` +
        `the proxy holds were written to a new ${this.path}, so nothing is lost` + (movedAside === null ? '' : ` (the file found there is ` +
        `kept as ${movedAside})`) + '. Stop the proxy before deleting, moving or restoring canary.data_dir', {
        file: this.path, how, moved_aside: movedAside,
      });
      this.failing = false;
    } catch (err) {
      if (!this.failing) {
        this.log?.error(`the canary store ${this.path} was ${how} while the proxy runs, and writing its state to a new file failed ` +
          `(retried every check): every canary is lost at the next restart unless this is fixed while the proxy runs — make ` +
          `canary.data_dir writable again`, { file: this.path, how, error: (err as Error).message });
      }
      this.failing = true;
    }
  }

  /**
   * Writes the open database to `<path>.recovering` (VACUUM INTO: a consistent copy), moves a file
   * now at `path` aside if `replaced`, closes the old handle and opens the copy as `path`. The WAL
   * is checkpointed and truncated first: the old handle's canary.db-wal keeps its name, and a new
   * database must not find frames of the old one in it. Returns where a replacing file went.
   */
  private repersist(replaced: boolean): string | null {
    const tmp = `${this.path}.recovering`;
    rmSync(tmp, { force: true });
    mkdirSync(dirname(this.path), { recursive: true });
    this.db.pragma('wal_checkpoint(TRUNCATE)');
    this.db.prepare('VACUUM INTO ?').run(tmp);
    let aside: string | null = null;
    if (replaced) {
      aside = `${this.path}.replaced-${new Date(this.now()).toISOString().replace(/:/g, '')}`;
      renameSync(this.path, aside);
    }
    this.db.close();
    try {
      renameSync(tmp, this.path);
      this.db = openDatabase(this.path);
    } catch (err) {
      // The copy holds everything: run on it (the next check, finding no canary.db of ours, tries again).
      this.db = openDatabase(existsSync(this.path) && !existsSync(tmp) ? this.path : tmp);
      this.stmts = prepare(this.db);
      this.identity = `the copy at ${tmp}`;
      throw err;
    }
    this.stmts = prepare(this.db);
    this.identity = identityOf(this.path);
    return aside;
  }

  /** Writes the record and, in the same transaction, its new history entries. */
  save(r: CanaryRecord, entries: HistoryEntry[] = []): void {
    this.check();
    this.db.transaction(() => {
      this.stmts.upsert.run({ id: r.id, pipeline_id: r.pipeline_id, status: r.status, created_at: r.created_at, record: JSON.stringify(r) });
      for (const e of entries) this.stmts.addHistory.run(r.id, e.at, JSON.stringify(e));
    })();
  }

  all(): CanaryRecord[] {
    return (this.stmts.all.all() as Array<{ record: string }>).map((x) => JSON.parse(x.record) as CanaryRecord);
  }

  history(id: string): HistoryEntry[] {
    return (this.stmts.history.all(id) as Array<{ entry: string }>).map((x) => JSON.parse(x.entry) as HistoryEntry);
  }

  addSample(id: string, s: Sample): void {
    this.check();
    this.stmts.addSample.run(id, s.at, JSON.stringify(s));
    this.stmts.trimSamples.run(id, id, this.maxSamples);
  }

  samples(id: string): Sample[] {
    return (this.stmts.samples.all(id) as Array<{ sample: string }>).map((x) => JSON.parse(x.sample) as Sample);
  }

  /** The promoted baseline of a pipeline, or null. */
  promotion(pipelineId: string): PromotionRecord | null {
    const row = this.stmts.promotion.get(pipelineId) as { record: string } | undefined;
    return row === undefined ? null : JSON.parse(row.record) as PromotionRecord;
  }

  /** Every pipeline's promoted baseline. */
  promotions(): PromotionRecord[] {
    return (this.stmts.promotions.all() as Array<{ record: string }>).map((r) => JSON.parse(r.record) as PromotionRecord);
  }

  /** Writes (replaces) a pipeline's promotion; null removes it. */
  setPromotion(pipelineId: string, p: PromotionRecord | null): void {
    this.check();
    if (p === null) this.stmts.dropPromotion.run(pipelineId);
    else this.stmts.putPromotion.run(pipelineId, JSON.stringify(p));
  }

  // ---- the embedded fleet store's key-value table (runtime/fleet/local.ts) -------------------

  kvGet(key: string): { key: string; value: string; revision: number } | null {
    return (this.stmts.kvGet.get(key) as { key: string; value: string; revision: number } | undefined) ?? null;
  }

  kvList(prefix: string): Array<{ key: string; value: string; revision: number }> {
    return this.stmts.kvList.all({ p: prefix }) as Array<{ key: string; value: string; revision: number }>;
  }

  /**
   * Writes `value` (null deletes) if `key` is at revision `expected` (0: absent), with `also` written
   * in the same transaction; returns the new revision, or the current one negated on a conflict.
   */
  kvCas(key: string, value: string | null, expected: number, also: Array<{ key: string; value: string }> = []): number {
    this.check();
    return this.db.transaction(() => {
      const cur = this.kvGet(key)?.revision ?? 0;
      if (cur !== expected) return -cur;
      const rev = (this.stmts.kvTop.get() as { top: number }).top + 1;
      if (value === null) this.stmts.kvDrop.run(key);
      else this.stmts.kvPut.run(key, value, rev);
      for (const a of also) this.stmts.kvPut.run(a.key, a.value, rev);
      return rev;
    })();
  }

  /** Checks the file a last time (a graceful stop re-persists a deleted store), then closes it. */
  close(): void {
    if (this.closed) return;
    if (this.timer !== null) clearInterval(this.timer);
    this.check();
    this.closed = true;
    this.db.close();
  }
}
