// Profiling snapshots (docs/profiling.md, "Snapshots and persistence"): every snapshot_interval_s the store
// takes the figures of the interval just ended (interval-stats.ts) — one time-series point, what
// GET /api/profile/series and the dashboard's trend charts draw — and keeps them snapshot_retention.
//
// Without profiling.snapshot_dir the points are kept in memory (series-memory.ts, bounded) and
// statistics reset when the proxy restarts. With snapshot_dir the store also
//   (a) rewrites `state.json`, the profiler's cumulative statistics (profiler-state.ts), crash-safely:
//       written to `state.json.tmp`, fsynced, renamed over `state.json`, the directory fsynced — a
//       kill -9 or power loss leaves either the previous snapshot or the new one, never half of one;
//   (b) appends the point as one line to the hour's `series-<YYYYMMDDHH>.jsonl` (UTC), and deletes
//       series files whose whole hour is older than snapshot_retention.
// On start, `state.json` is merged into the fresh profiler; an unreadable one is logged, moved aside
// to `state.json.corrupt-<time>` (the last CORRUPT_KEPT are kept) and ignored — never fatal. One
// written by a newer proxy (a higher state version: a rollback after an upgrade) is not corrupt and
// is left untouched: the store logs an error and runs as without snapshot_dir, so the rolled-back
// proxy serves traffic and the newer file survives for the version that can read it. A reset of the profiler rewrites `state.json`
// at once (empty); series points are kept (they hold per-interval figures, which a reset does not
// make wrong). One proxy per directory.
import type { Log } from '../log/index.ts';
import { appendFile, mkdir, open, readFile, readdir, rename, rm, stat, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { IntervalTracker } from './interval-stats.ts';
import type { Profiler, RestoreSummary } from './profiler.ts';
import { STATE_VERSION, newerStateVersion } from './profiler-state.ts';
import { listSeriesFiles, readSeries, seriesFileName, toPoint, type SeriesPoint, type SeriesQuery } from './series-file.ts';
import { MemorySeries } from './series-memory.ts';

const HOUR_MS = 3_600_000;
export const STATE_FILE = 'state.json';
/** Unreadable state files moved aside that are kept (the newest); older ones are deleted. */
export const CORRUPT_KEPT = 3;
const CORRUPT_PREFIX = `${STATE_FILE}.corrupt`;

/** The interval still running, as a series point: `t` is now, `since` its start. */
export interface LivePoint extends SeriesPoint {
  partial: true;
  since: string;
}

export interface SnapshotStoreOptions {
  /** Where state.json and the series files go; null: the series is kept in memory, nothing is persisted. */
  dir: string | null;
  intervalMs: number;
  retentionMs: number;
  log: Pick<Log, 'info' | 'warn' | 'error'>;
  /** The clock (ms since the epoch); tests move it. */
  now?: () => number;
  /** Runs before each snapshot is taken (with workers: the profiler is brought up to date with theirs). */
  beforeSnapshot?: () => Promise<void>;
}

const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: HOUR_MS, d: 24 * HOUR_MS };

/** `500ms`, `30s`, `15m`, `24h`, `7d` → milliseconds; NaN when malformed. */
export function durationToMs(text: string): number {
  const m = /^(\d+)(ms|s|m|h|d)$/.exec(text.trim());
  return m === null ? NaN : Number(m[1]) * UNIT_MS[m[2]];
}

/** Whether a file exists and its last byte is not a newline (a line cut short by a crash). */
async function endsMidLine(path: string): Promise<boolean> {
  let fh;
  try {
    fh = await open(path, 'r');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw err;
  }
  try {
    const { size } = await fh.stat();
    if (size === 0) return false;
    const b = Buffer.alloc(1);
    await fh.read(b, 0, 1, size - 1);
    return b[0] !== 0x0a;
  } finally {
    await fh.close();
  }
}

export class SnapshotStore {
  /** snapshot_dir; null when not set, or once a newer proxy's state.json turned persistence off (load()). */
  private directory: string | null;
  readonly intervalMs: number;
  readonly retentionMs: number;
  private readonly profiler: Profiler;
  private readonly log: Pick<Log, 'info' | 'warn' | 'error'>;
  private readonly now: () => number;
  private readonly beforeSnapshot: (() => Promise<void>) | null;
  private readonly tracker: IntervalTracker;
  private readonly unsubscribe: () => void;
  private timer: NodeJS.Timeout | null = null;
  /** Writes run one after another: snapshots and the rewrite after a reset. */
  private queue: Promise<void> = Promise.resolve();
  private inFlight = 0;
  private failing = false;
  private closed = false;
  /** The series without a directory, else null. */
  private memory: MemorySeries | null;
  private cappedLogged = false;

  constructor(profiler: Profiler, opts: SnapshotStoreOptions) {
    this.profiler = profiler;
    this.directory = opts.dir;
    this.intervalMs = opts.intervalMs;
    this.retentionMs = opts.retentionMs;
    this.log = opts.log;
    this.now = opts.now ?? Date.now;
    this.beforeSnapshot = opts.beforeSnapshot ?? null;
    this.tracker = new IntervalTracker(profiler, this.now());
    this.memory = opts.dir === null ? new MemorySeries(opts.retentionMs) : null;
    this.unsubscribe = profiler.onReset(() => {
      this.tracker.clear();
      if (this.dir === null) return;
      this.enqueue(() => this.writeState(JSON.stringify(this.profiler.exportState()))).catch((err) => this.failed('rewriting the profiling ' +
        'snapshot after a reset failed', err));
    });
  }

  get dir(): string | null {
    return this.directory;
  }

  /** Whether snapshots go to disk (snapshot_dir) and statistics survive a restart. */
  get persistent(): boolean {
    return this.dir !== null;
  }

  get statePath(): string | null {
    return this.dir === null ? null : join(this.dir, STATE_FILE);
  }

  /** The directory, for the methods that only run with one. */
  private get disk(): string {
    if (this.dir === null) throw new Error('the profiling snapshot store has no directory');
    return this.dir;
  }

  /** Bytes of the in-memory series (0 with a directory). */
  get memoryBytes(): number {
    return this.memory?.bytes ?? 0;
  }

  /**
   * Merges `state.json` into the profiler, if there is one. Returns what was restored, or null: no
   * file; an unreadable one (logged as a warning, moved aside, ignored); one written by a newer
   * proxy (logged as an error, left untouched, and nothing is persisted from then on).
   */
  async load(): Promise<RestoreSummary | null> {
    const file = this.statePath;
    if (file === null) return null;
    await rm(`${file}.tmp`, { force: true }).catch(() => {});
    let text: string;
    try {
      text = await readFile(file, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') {
        this.log.warn('cannot read the profiling snapshot; statistics start empty', { file, error: (err as Error).message });
      }
      return null;
    }
    let summary: RestoreSummary;
    try {
      const json: unknown = JSON.parse(text);
      const newer = newerStateVersion(json);
      if (newer !== null) {
        this.stopPersisting(file, newer);
        return null;
      }
      summary = this.profiler.importState(json);
    } catch (err) {
      const moved = await this.moveAside(file).catch(() => null);
      this.log.warn('ignoring an unreadable profiling snapshot; statistics start empty', { file, error: (err as Error).message, moved_to: moved });
      return null;
    }
    this.tracker.rebase();
    this.log.info('restored profiling statistics from the last snapshot', {
      file, written: summary.written, graphs: summary.graphs, steps: summary.steps, requests: summary.requests,
    });
    return summary;
  }

  /**
   * A state.json of a newer version: most likely a rollback after an upgrade. Refusing to start would
   * turn the rollback into an outage for the sake of diagnostic figures; moving or overwriting the
   * file would lose the newer version's statistics. So it is left as it is and this proxy keeps its
   * snapshots in memory, as without snapshot_dir, saying so at `error` with what to do.
   */
  private stopPersisting(file: string, version: number): void {
    this.log.error(`the profiling snapshot was written by a newer version of the proxy (state version ${version}; this one reads ` +
      `version ${STATE_VERSION}): it is left untouched and profiling statistics are NOT persisted by this proxy (they start empty and ` +
      'are kept in memory). Run the newer version again, or set profiling.snapshot_dir to another directory (or move the file away) ' +
      'and restart', { file, version, supported_version: STATE_VERSION });
    this.directory = null;
    this.memory = new MemorySeries(this.retentionMs);
  }

  /**
   * Renames an unreadable state.json to `state.json.corrupt-<UTC time>` (never over an earlier one)
   * and deletes all but the newest CORRUPT_KEPT of them: a file that keeps coming back corrupt
   * fills no disk. Returns the new name.
   */
  private async moveAside(file: string): Promise<string> {
    const stamp = new Date(this.now()).toISOString().replace(/:/g, '');
    let aside = `${file}.corrupt-${stamp}`;
    for (let n = 2; await stat(aside).then(() => true, () => false); n++) aside = `${file}.corrupt-${stamp}-${n}`;
    await rename(file, aside);
    // Names sort by time; a `state.json.corrupt` of older versions sorts first, as the oldest.
    const kept = (await readdir(this.disk)).filter((n) => n === CORRUPT_PREFIX || n.startsWith(`${CORRUPT_PREFIX}-`)).sort();
    for (const name of kept.slice(0, -CORRUPT_KEPT)) await rm(join(this.disk, name), { force: true });
    return aside;
  }

  /** Snapshots every interval from now on (the timer does not keep the process alive). */
  start(): void {
    if (this.timer !== null || this.closed) return;
    this.timer = setInterval(() => this.tick(), this.intervalMs);
    this.timer.unref();
  }

  /** Writes a snapshot now: `state.json` and one series record covering the time since the last one. */
  snapshot(): Promise<void> {
    return this.enqueue(() => this.write());
  }

  /** The stored points of one graph (series-file.ts). */
  async series(q: SeriesQuery): ReturnType<typeof readSeries> {
    return this.memory !== null ? this.memory.read(q) : readSeries(this.disk, q);
  }

  /**
   * The point of the interval still running (from the last snapshot, or the start, to now), or null
   * while profiling is disabled (nothing is recorded then). Not stored: the next snapshot takes the
   * same figures over the whole interval.
   */
  live(q: SeriesQuery): LivePoint | null {
    if (!this.profiler.enabled || this.closed) return null;
    const nowMs = this.now();
    if (nowMs < q.fromMs || this.tracker.since > q.toMs) return null;
    const since = new Date(this.tracker.since).toISOString();
    return { ...toPoint(this.tracker.peek(nowMs), q), partial: true, since };
  }

  /** Stops the timer, writes a last snapshot (a graceful stop loses nothing) and frees the baselines. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.stopTimer();
    this.unsubscribe();
    if (this.dir !== null) await this.snapshot().catch((err) => this.failed('writing the last profiling snapshot failed', err));
    this.tracker.destroy();
  }

  /** Stops the timer without writing anything (what a crash does; tests use it). */
  stopTimer(): void {
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
  }

  private tick(): void {
    // Nothing is recorded while profiling is disabled; a write still running (a slow disk) is not queued behind.
    if (!this.profiler.enabled || this.inFlight > 0) return;
    this.snapshot().then(() => {
      if (this.failing) this.log.info('profiling snapshots are written again', { dir: this.dir });
      this.failing = false;
    }, (err) => this.failed('writing the profiling snapshot failed', err));
  }

  private failed(msg: string, err: unknown): void {
    // One line per run of failures, not one per interval.
    if (!this.failing) this.log.error(msg, { dir: this.dir ?? '(memory)', error: (err as Error).message });
    this.failing = true;
  }

  private enqueue(op: () => Promise<void>): Promise<void> {
    this.inFlight++;
    const run = this.queue.then(op).finally(() => { this.inFlight--; });
    this.queue = run.catch(() => {});
    return run;
  }

  private async write(): Promise<void> {
    if (this.beforeSnapshot !== null) await this.beforeSnapshot();
    // Two synchronous pieces of a few milliseconds each (subtracting histograms, encoding them),
    // with requests served in between rather than one longer stall.
    const nowMs = this.now();
    const record = this.tracker.take(nowMs);
    if (this.memory !== null) {
      this.memory.append(record, nowMs);
      if (this.memory.cappedAt !== null && !this.cappedLogged) {
        this.cappedLogged = true;
        this.log.warn('the in-memory profiling time series reached its size bound: the oldest points are dropped before snapshot_retention (set ' +
          'profiling.snapshot_dir to keep them on disk)', {
          bytes: this.memory.maxBytes, points: this.memory.length,
        });
      }
      return;
    }
    await new Promise((r) => setImmediate(r));
    const state = JSON.stringify(this.profiler.exportState());
    await this.writeState(state);
    await this.appendSeries(`${JSON.stringify(record)}\n`, nowMs);
    await this.sweep(nowMs);
  }

  private async writeState(body: string): Promise<void> {
    await mkdir(this.disk, { recursive: true });
    const file = join(this.disk, STATE_FILE);
    const tmp = `${file}.tmp`;
    const fh = await open(tmp, 'w');
    try {
      await fh.writeFile(body);
      await fh.sync();
    } finally {
      await fh.close();
    }
    await rename(tmp, file);
    const d = await open(this.disk, 'r');
    try {
      await d.sync(); // the rename itself survives a power loss
    } catch {
      // some filesystems refuse fsync on a directory; the rename is still atomic
    } finally {
      await d.close();
    }
  }

  private async appendSeries(line: string, nowMs: number): Promise<void> {
    const path = join(this.disk, seriesFileName(nowMs));
    // One byte read per interval: cheaper than knowing who else may have left half a line there.
    if (await endsMidLine(path)) line = `\n${line}`;
    await appendFile(path, line);
  }

  /** Deletes series files whose whole hour ended before now − retention. */
  private async sweep(nowMs: number): Promise<void> {
    const cutoff = nowMs - this.retentionMs;
    for (const f of await listSeriesFiles(this.disk)) {
      if (f.hourMs + HOUR_MS > cutoff) break;
      await unlink(join(this.disk, f.name)).catch((err: NodeJS.ErrnoException) => {
        if (err.code !== 'ENOENT') throw err;
      });
    }
  }
}
