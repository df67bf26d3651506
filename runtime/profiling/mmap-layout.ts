// The fixed layout of the shared-memory histogram file (profiling.storage: "mmap"), shared by the
// proxy that writes it (mmap-store.ts) and every reader (mmap-reader.ts, `proxy profile --mmap`).
// docs/profiling.md ("Shared-memory histograms") documents it byte by byte; change both together
// and bump LAYOUT_VERSION. All numbers are little-endian (the host's order; the file is not meant
// to travel between machines). The model is Agrona's counters file: a header, then fixed-size rows
// padded to 128 bytes. One sequence number in the header guards every row: the proxy makes it odd
// before it records a request (all its rows) and even after, so a reader that copies the rows
// between two equal even values has a consistent picture — a request's step counts and its totals
// together — at the price of two atomic stores per request instead of two per row.

export const MAGIC = 'PPXHIST1';
export const LAYOUT_VERSION = 1;
export const HEADER_BYTES = 512;

/** Header field byte offsets. */
export const H_MAGIC = 0; // 8 ASCII bytes
export const H_VERSION = 8; // u32
export const H_HEADER_BYTES = 12; // u32
export const H_ROW_BYTES = 16; // u32
export const H_ROW_CAPACITY = 20; // u32
export const H_ROWS_USED = 24; // i32, written with Atomics.store after the row's identity
export const H_BUCKETS = 28; // u32
export const H_SUB_BUCKET_BITS = 32; // u32
export const H_PID = 36; // u32
export const H_STARTED_MS = 40; // f64, ms since the epoch
export const H_SINCE_MS = 48; // f64, last reset (ms since the epoch)
export const H_SEQ = 56; // i32 seqlock over every row: odd while the proxy writes
export const H_DEFAULT_PIPELINE_ID = 64; // 64 bytes UTF-8, NUL-padded
export const NAME_BYTES = 64;

/**
 * Log-linear buckets of integer microseconds: 0..63 µs one bucket each (exact); above, every power
 * of two [2^e, 2^(e+1)) is split into 2^SUB_BUCKET_BITS = 32 equal buckets (≤ 3.2% wide), up to
 * 2^26 − 1 µs (67 s). Values are clamped to 60 s as in the HDR histograms.
 */
export const SUB_BUCKET_BITS = 5;
export const BUCKETS = 704;
export const MAX_US = 60_000_000;

/** Row field byte offsets (from the row's start). */
export const R_KIND = 4; // u32, one of the KIND_* below
export const R_PHASE = 8; // u32: 0 request, 1 response (steps); 0 otherwise
export const R_PIPELINE_ID = 16; // 64 bytes UTF-8, NUL-padded
export const R_VARIANT = 80; // 16 bytes: "baseline" | "candidate"
export const R_STEP = 96; // 64 bytes: "wasm:<name>" for steps, empty otherwise
export const R_COUNT = 160; // f64
export const R_ERRORS = 168; // f64
export const R_SUM_NS = 176; // f64
export const R_MAX_NS = 184; // f64
export const R_BUCKETS = 192; // f64 × BUCKETS
/** 192 + 704 × 8 = 5824, padded to a multiple of 128 bytes. */
export const ROW_BYTES = 5888;
export const VARIANT_BYTES = 16;

/** Row kinds (R_KIND). */
export const KIND_STEP = 1;
export const KIND_TOTAL = 2;
export const KIND_UPSTREAM = 3;
export const KIND_OVERHEAD = 4;
export const KIND_ACQUIRE = 5;
export const KIND_NAMES: Record<number, string> = { 1: 'step', 2: 'total', 3: 'upstream', 4: 'overhead', 5: 'acquire' };

/** Rows a file of `mb` MiB holds. */
export function rowCapacity(mb: number): number {
  return Math.floor((mb * 1024 * 1024 - HEADER_BYTES) / ROW_BYTES);
}

/** Rows one graph needs: total, upstream, overhead, acquire, and one per (step, phase) — a row for both phases of every step, whichever it acts in. */
export function rowsPerGraph(steps: number): number {
  return 4 + 2 * steps;
}

/** Bucket of a whole number of microseconds (0 ≤ us ≤ MAX_US). */
export function bucketIndex(us: number): number {
  if (us < 64) return us;
  const e = 31 - Math.clz32(us);
  return ((e - 4) << SUB_BUCKET_BITS) + (us >>> (e - SUB_BUCKET_BITS)) - 32;
}

/** Highest value (µs) bucket `i` holds; percentiles report it (as HDR's highest equivalent value). */
export function bucketHighUs(i: number): number {
  if (i < 64) return i;
  const shift = (i >> SUB_BUCKET_BITS) - 1;
  return ((32 + (i & 31)) << shift) + (1 << shift) - 1;
}

/**
 * The value at percentile `p` of the counts in `f64[from .. from + BUCKETS)`: the high end of the
 * bucket holding the ⌈p/100 × count⌉-th value (at least the first), at most `maxUs`.
 */
export function bucketPercentileUs(f64: Float64Array, from: number, count: number, maxUs: number, p: number): number {
  if (count === 0) return 0;
  const rank = Math.max(1, Math.ceil((p / 100) * count));
  let seen = 0;
  for (let i = 0; i < BUCKETS; i++) {
    seen += f64[from + i];
    if (seen >= rank) return Math.min(bucketHighUs(i), maxUs);
  }
  return maxUs;
}
