// The canary's durable state in SQLite (better-sqlite3; synchronous, so a transition is on disk
// before the API answers): each canary as one JSON record (spec, stage, stage entry time, the
// sustained timers' start times, the paused flag, outcome), its history, its evaluation samples and
// its report. WAL journal: a kill -9 loses nothing that was committed.
//
// The file is watched (sqlite-file.ts: its device and inode, before each write and every checkMs):
// canary.db deleted or replaced while the proxy runs (`rm -rf data/`, a restore over it) is written
// anew from the open handle and logged at `error` once.
import type Database from 'better-sqlite3';
import { join, resolve } from 'node:path';
import type { CanarySpec } from './spec.ts';
import type { RuleReading, SideMetrics } from './events.ts';
import type { PipelineConfig } from '../pipeline/index.ts';
import type { Evaluation } from './evaluator.ts';
import type { DiffRecord, DivergenceKind } from './shadow.ts';
import { WatchedSqlite, type SqliteFileSettings, type WatchOptions } from './sqlite-file.ts';

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

export { sqliteOpenError } from './sqlite-file.ts';

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

const CANARY_FILE: SqliteFileSettings = {
  what: 'the canary store', key: 'canary.data_dir', place: 'canary.data_dir', holds: 'the canaries, their history, samples and promotions',
  lost: 'every canary', synchronous: 'FULL', schema: CANARY_SCHEMA,
};

export type CanaryStoreOptions = WatchOptions;

export class CanaryStore implements CanaryRecords {
  readonly path: string;
  private readonly file: WatchedSqlite;
  private readonly maxSamples: number;
  private stmts!: Statements;

  constructor(dir: string, maxSamples = 10000, opts: CanaryStoreOptions = {}) {
    this.path = join(resolve(dir), 'canary.db');
    this.maxSamples = maxSamples;
    this.file = new WatchedSqlite(this.path, CANARY_FILE, (db) => { this.stmts = prepare(db); }, opts);
  }

  private get db(): Database.Database {
    return this.file.db;
  }

  /**
   * Whether canary.db is still the file the store has open; if not (deleted, or replaced by another
   * file), writes everything the open handle holds to a new canary.db and switches to it.
   */
  check(): void {
    this.file.check();
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
    this.file.close();
  }
}
