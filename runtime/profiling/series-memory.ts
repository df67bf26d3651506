// The time series kept in memory, for a proxy without profiling.snapshot_dir (docs/profiling.md,
// "Snapshots and persistence"): the same one-line records the series files hold (interval-stats.ts SeriesRecord),
// kept as their JSON text, oldest first, for snapshot_retention.
//
// Bounded twice: by time (records older than now − retention are dropped at each append) and by
// size (MEMORY_SERIES_MAX_BYTES of JSON text; past it the oldest go first, and that is logged once).
// A record is about 100 bytes plus about 65 per (step, phase) row of each graph with requests in
// its interval: 8 steps × 2 phases and one graph is about 1.1 KB, so the default 24 h at 30 s
// (2880 records) is about 3.2 MB, 6.4 MB while a canary runs a second graph. Text rather than
// parsed objects: the bytes are known exactly (the string lengths), and a V8 one-byte string costs
// its length, where the same record as objects and arrays costs several times that.
import type { SeriesRecord } from './interval-stats.ts';
import { MAX_SERIES_POINTS, isRecord, toPoint, type SeriesPoint, type SeriesQuery } from './series-file.ts';

/** Text the in-memory series holds at most (the oldest records go first past it). */
export const MEMORY_SERIES_MAX_BYTES = 16 * 1024 * 1024;

export class MemorySeries {
  readonly retentionMs: number;
  readonly maxBytes: number;
  private times: number[] = [];
  private lines: string[] = [];
  /** Index of the oldest live record (the arrays are compacted when half of them is dead). */
  private head = 0;
  private bytesHeld = 0;
  /** Set when the byte bound (not the retention) dropped a record; the caller logs it once. */
  cappedAt: number | null = null;

  constructor(retentionMs: number, maxBytes = MEMORY_SERIES_MAX_BYTES) {
    this.retentionMs = retentionMs;
    this.maxBytes = maxBytes;
  }

  get bytes(): number {
    return this.bytesHeld;
  }

  get length(): number {
    return this.lines.length - this.head;
  }

  append(record: SeriesRecord, nowMs: number): void {
    const line = JSON.stringify(record);
    this.times.push(Date.parse(record.t));
    this.lines.push(line);
    this.bytesHeld += line.length;
    const cutoff = nowMs - this.retentionMs;
    while (this.head < this.lines.length && this.times[this.head] < cutoff) this.drop();
    while (this.bytesHeld > this.maxBytes && this.length > 1) {
      this.cappedAt ??= nowMs;
      this.drop();
    }
    if (this.head > 1024 && this.head * 2 > this.lines.length) {
      this.times = this.times.slice(this.head);
      this.lines = this.lines.slice(this.head);
      this.head = 0;
    }
  }

  /** The points of one graph with `fromMs <= t <= toMs`, oldest first; at most MAX_SERIES_POINTS, the newest. */
  read(q: SeriesQuery): { points: SeriesPoint[]; truncated: boolean; skipped: number } {
    const points: SeriesPoint[] = [];
    let i = this.lines.length - 1;
    for (; i >= this.head && points.length < MAX_SERIES_POINTS; i--) {
      const t = this.times[i];
      if (t > q.toMs) continue;
      if (t < q.fromMs) break;
      const rec: unknown = JSON.parse(this.lines[i]);
      if (isRecord(rec)) points.push(toPoint(rec, q));
    }
    const truncated = i >= this.head && this.times[i] >= q.fromMs;
    return { points: points.reverse(), truncated, skipped: 0 };
  }

  clear(): void {
    this.times = [];
    this.lines = [];
    this.head = 0;
    this.bytesHeld = 0;
  }

  private drop(): void {
    this.bytesHeld -= this.lines[this.head].length;
    this.lines[this.head] = '';
    this.head++;
  }
}
