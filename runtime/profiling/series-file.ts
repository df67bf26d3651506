// The time-series files of the snapshot store: one JSON line (interval-stats.ts SeriesRecord) per
// snapshot interval, appended to `series-<YYYYMMDDHH>.jsonl` for the UTC hour the interval ended
// in. A line cut short by a crash is skipped on read; the next append starts on a new line.
import { readFile, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { SeriesRecord, SeriesStepRow } from './interval-stats.ts';
import type { Variant } from '../pipeline/index.ts';

export const SERIES_FILE_PATTERN = /^series-(\d{4})(\d\d)(\d\d)(\d\d)\.jsonl$/;
const HOUR_MS = 3_600_000;
/** Points one series query returns at most (the newest ones in its range): 24 h at 30 s is 2880. */
export const MAX_SERIES_POINTS = 5000;

export function seriesFileName(ms: number): string {
  const d = new Date(ms);
  const p = (n: number) => String(n).padStart(2, '0');
  return `series-${d.getUTCFullYear()}${p(d.getUTCMonth() + 1)}${p(d.getUTCDate())}${p(d.getUTCHours())}.jsonl`;
}

/** Start of the hour a series file covers (ms since the epoch), or null for other names. */
export function seriesFileHour(name: string): number | null {
  const m = SERIES_FILE_PATTERN.exec(name);
  return m === null ? null : Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3]), Number(m[4]));
}

/** The series files of `dir`, oldest first. */
export async function listSeriesFiles(dir: string): Promise<Array<{ name: string; hourMs: number }>> {
  let names: string[];
  try {
    names = await readdir(dir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw err;
  }
  const out: Array<{ name: string; hourMs: number }> = [];
  for (const name of names) {
    const hourMs = seriesFileHour(name);
    if (hourMs !== null) out.push({ name, hourMs });
  }
  return out.sort((a, b) => a.hourMs - b.hourMs);
}

export interface SeriesQuery {
  pipelineId: string;
  variant: Variant;
  /** `wasm:<name>`, or null for every step. */
  step: string | null;
  fromMs: number;
  toMs: number;
}

export interface SeriesStepPoint {
  name: string;
  phase: string;
  count: number;
  errors: number;
  avg_latency_us: number;
  p50_latency_us: number;
  p95_latency_us: number;
  p99_latency_us: number;
  max_latency_us: number;
}

export interface SeriesPoint {
  t: string;
  steps: SeriesStepPoint[];
  total: { count: number; avg_total_latency_us: number; avg_upstream_latency_us: number };
}

function stepPoint(r: SeriesStepRow): SeriesStepPoint {
  return {
    name: r[0], phase: r[1], count: r[2], errors: r[3], avg_latency_us: r[4],
    p50_latency_us: r[5], p95_latency_us: r[6], p99_latency_us: r[7], max_latency_us: r[8],
  };
}

/** A record as the point of one graph (a graph without requests in the interval: zeros). */
export function toPoint(rec: SeriesRecord, q: SeriesQuery): SeriesPoint {
  const g = rec.graphs.find((x) => x.pipeline_id === q.pipelineId && x.pipeline === q.variant);
  if (g === undefined) return { t: rec.t, steps: [], total: { count: 0, avg_total_latency_us: 0, avg_upstream_latency_us: 0 } };
  const rows = q.step === null ? g.steps : g.steps.filter((r) => r[0] === q.step);
  return {
    t: rec.t, steps: rows.map(stepPoint),
    total: { count: g.count, avg_total_latency_us: g.avg_total_latency_us, avg_upstream_latency_us: g.avg_upstream_latency_us },
  };
}

export function isRecord(x: unknown): x is SeriesRecord {
  const r = x as SeriesRecord;
  return typeof r === 'object' && r !== null && typeof r.t === 'string' && Array.isArray(r.graphs);
}

/**
 * The points of one graph with `fromMs <= t <= toMs`, oldest first; at most MAX_SERIES_POINTS,
 * the newest when there are more (`truncated`). Reads only the hour files that overlap the range,
 * newest first, and stops once it has enough. Lines that do not parse are skipped.
 */
export async function readSeries(dir: string, q: SeriesQuery): Promise<{ points: SeriesPoint[]; truncated: boolean; skipped: number }> {
  const files = (await listSeriesFiles(dir)).filter((f) => f.hourMs <= q.toMs && f.hourMs + HOUR_MS > q.fromMs);
  const chunks: SeriesPoint[][] = [];
  let total = 0;
  let skipped = 0;
  let i = files.length - 1;
  for (; i >= 0 && total < MAX_SERIES_POINTS; i--) {
    let text: string;
    try {
      text = await readFile(join(dir, files[i].name), 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') continue; // removed by retention meanwhile
      throw err;
    }
    const points: SeriesPoint[] = [];
    for (const line of text.split('\n')) {
      if (line === '') continue;
      let rec: unknown;
      try {
        rec = JSON.parse(line);
      } catch {
        skipped++;
        continue;
      }
      if (!isRecord(rec)) {
        skipped++;
        continue;
      }
      const t = Date.parse(rec.t);
      if (t >= q.fromMs && t <= q.toMs) points.push(toPoint(rec, q));
    }
    chunks.push(points);
    total += points.length;
  }
  const all = chunks.reverse().flat();
  // Older files left unread overlap the range too: there is more than what is returned.
  const truncated = all.length > MAX_SERIES_POINTS || i >= 0;
  return { points: truncated ? all.slice(all.length - MAX_SERIES_POINTS) : all, truncated, skipped };
}
