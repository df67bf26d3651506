// Reads a shared-memory histogram file (mmap-layout.ts) while its proxy writes it: maps it
// read-only (native/shm) and copies the published rows under the file's seqlock — the copy is
// kept when the sequence number was even and unchanged across it, else taken again. fileSnapshot()
// turns the rows of one graph into the SPEC §2.1 snapshot, computed as the proxy computes it for
// /api/profile when storage is "mmap".
import { loadShm } from './mmap-store.ts';
import {
  BUCKETS, HEADER_BYTES, H_BUCKETS, H_DEFAULT_PIPELINE_ID, H_MAGIC, H_PID, H_ROWS_USED, H_ROW_BYTES, H_ROW_CAPACITY,
  H_SEQ, H_SINCE_MS, H_STARTED_MS, H_SUB_BUCKET_BITS, H_VERSION, KIND_NAMES, KIND_STEP, KIND_TOTAL, KIND_UPSTREAM, KIND_OVERHEAD,
  LAYOUT_VERSION, MAGIC, NAME_BYTES, R_COUNT, R_KIND, R_PHASE, R_PIPELINE_ID, R_STEP, R_VARIANT, ROW_BYTES,
  SUB_BUCKET_BITS, VARIANT_BYTES, bucketPercentileUs,
} from './mmap-layout.ts';
import type { ProfileSnapshot, StepRow } from './profiler.ts';

export interface FileRow {
  kind: 'step' | 'total' | 'upstream' | 'overhead' | 'acquire';
  pipelineId: string;
  variant: string;
  step: string;
  phase: 'request' | 'response';
  count: number;
  errors: number;
  sumNs: number;
  maxNs: number;
  /** BUCKETS log-linear bucket counts (mmap-layout.ts). */
  buckets: Float64Array;
}

export interface FileContents {
  pid: number;
  startedMs: number;
  sinceMs: number;
  defaultPipelineId: string;
  capacity: number;
  rows: FileRow[];
}

/** Attempts at a consistent copy before giving up (the proxy holds the lock for a few microseconds per request). */
/**
 * How long a reader waits for a consistent copy. The writer's sequence number stays odd for as long
 * as one write takes: microseconds for a request, milliseconds when the primary of `--workers`
 * merges its workers' statistics into the file — so an odd number is waited out (1 ms sleeps), not
 * spun on, which would give up within that merge.
 */
const MAX_WAIT_MS = 2000;
const sleeper = new Int32Array(new SharedArrayBuffer(4));

function readName(u8: Uint8Array, at: number, size: number): string {
  const field = u8.subarray(at, at + size);
  const end = field.indexOf(0);
  return new TextDecoder().decode(end < 0 ? field : field.subarray(0, end));
}

/** Reads every published row of the file at `path`; throws an Error saying what is wrong with a file that is not one. */
export function readHistogramFile(path: string): FileContents {
  const buf = loadShm().map(path, 0, false);
  if (buf.byteLength < HEADER_BYTES) throw new Error(`${path}: not a profiling histogram file (${buf.byteLength} bytes)`);
  const u8 = new Uint8Array(buf);
  const view = new DataView(buf);
  const i32 = new Int32Array(buf, 0, buf.byteLength >> 2);
  const f64 = new Float64Array(buf, 0, buf.byteLength >> 3);
  const magic = new TextDecoder().decode(u8.subarray(H_MAGIC, H_MAGIC + 8));
  if (magic !== MAGIC) throw new Error(`${path}: not a profiling histogram file (magic ${JSON.stringify(magic)}, expected ${MAGIC})`);
  const version = view.getUint32(H_VERSION, true);
  if (version !== LAYOUT_VERSION) throw new Error(`${path}: layout version ${version}; this reader knows ${LAYOUT_VERSION}`);
  if (view.getUint32(H_ROW_BYTES, true) !== ROW_BYTES || view.getUint32(H_BUCKETS, true) !== BUCKETS || view.getUint32(H_SUB_BUCKET_BITS,
    true) !== SUB_BUCKET_BITS) {
    throw new Error(`${path}: unexpected row layout (row ${view.getUint32(H_ROW_BYTES, true)} bytes, ${view.getUint32(H_BUCKETS, true)} buckets)`);
  }
  const capacity = view.getUint32(H_ROW_CAPACITY, true);
  // The proxy sizes the file before it writes the header: a shorter one was cut (a partial copy),
  // and its rows past the end would silently read as missing.
  const want = HEADER_BYTES + capacity * ROW_BYTES;
  if (buf.byteLength < want) {
    throw new Error(`${path}: cut short: ${buf.byteLength} bytes, but its header says ${capacity} rows (${want} bytes); copy the whole file`);
  }
  const fit = capacity;
  let used = 0;
  let copy: Float64Array | null = null;
  const deadline = Date.now() + MAX_WAIT_MS;
  while (copy === null && Date.now() < deadline) {
    const before = Atomics.load(i32, H_SEQ >> 2);
    if ((before & 1) !== 0) {
      Atomics.wait(sleeper, 0, 0, 1);
      continue;
    }
    used = Math.min(Atomics.load(i32, H_ROWS_USED >> 2), fit);
    const c = f64.slice(HEADER_BYTES >> 3, (HEADER_BYTES + used * ROW_BYTES) >> 3);
    if (Atomics.load(i32, H_SEQ >> 2) === before) copy = c;
  }
  if (copy === null) throw new Error(`${path}: the rows kept changing; no consistent copy in ${MAX_WAIT_MS / 1000} s`);
  const rows: FileRow[] = [];
  for (let r = 0; r < used; r++) {
    const at = HEADER_BYTES + r * ROW_BYTES;
    const from = (r * ROW_BYTES + R_COUNT) >> 3;
    rows.push({
      kind: KIND_NAMES[view.getUint32(at + R_KIND, true)] as FileRow['kind'],
      pipelineId: readName(u8, at + R_PIPELINE_ID, NAME_BYTES),
      variant: readName(u8, at + R_VARIANT, VARIANT_BYTES),
      step: readName(u8, at + R_STEP, NAME_BYTES),
      phase: view.getUint32(at + R_PHASE, true) === 0 ? 'request' : 'response',
      count: copy[from], errors: copy[from + 1], sumNs: copy[from + 2], maxNs: copy[from + 3], buckets: copy.subarray(from + 4, from + 4 + BUCKETS),
    });
  }
  return {
    pid: view.getUint32(H_PID, true), startedMs: view.getFloat64(H_STARTED_MS, true), sinceMs: view.getFloat64(H_SINCE_MS, true),
    defaultPipelineId: readName(u8, H_DEFAULT_PIPELINE_ID, NAME_BYTES), capacity, rows,
  };
}

const avgUs = (r: FileRow) => (r.count === 0 ? 0 : Math.round(r.sumNs / r.count / 1000));

/** SPEC §2.1 for one graph of the file, as GET /api/profile answers it. */
export function fileSnapshot(f: FileContents, pipelineId: string, variant: string): ProfileSnapshot {
  const mine = f.rows.filter((r) => r.pipelineId === pipelineId && r.variant === variant);
  const one = (kind: number) => mine.find((r) => r.kind === KIND_NAMES[kind]);
  const steps = mine.filter((r) => r.kind === KIND_NAMES[KIND_STEP] && r.count > 0).map((r): StepRow => {
    const maxUs = Math.round(r.maxNs / 1000);
    const pct = (p: number) => bucketPercentileUs(r.buckets, 0, r.count, maxUs, p);
    return {
      name: r.step, phase: r.phase, avg_latency_us: avgUs(r),
      p50_latency_us: pct(50), p95_latency_us: pct(95), p99_latency_us: pct(99), max_latency_us: maxUs,
      invocations: r.count, errors: r.errors,
    };
  });
  steps.sort((a, b) => (a.phase === b.phase ? 0 : a.phase === 'request' ? -1 : 1));
  const total = one(KIND_TOTAL);
  const upstream = one(KIND_UPSTREAM);
  const overhead = one(KIND_OVERHEAD);
  return {
    total_requests: total?.count ?? 0,
    avg_total_latency_us: total === undefined ? 0 : avgUs(total),
    avg_upstream_latency_us: upstream === undefined ? 0 : avgUs(upstream),
    avg_pipeline_overhead_us: overhead === undefined ? 0 : avgUs(overhead),
    steps,
  };
}
