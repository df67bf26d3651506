// profiling.storage: "mmap" — the histograms live in a file mapped into the proxy's memory
// (native/shm, a small N-API addon: Node has no mmap), in the fixed layout of mmap-layout.ts, so
// another process reads live counts from the file while the proxy runs (`proxy profile --mmap`).
//
// HistogramFile owns the mapping, hands out rows and keeps the file's sequence number (a seqlock:
// the profiler calls begin() before it records a request, a reset or a restore, end() after).
// MappedLatencyStats is a LatencyStats whose count, errors, sum, max and log-linear bucket counts
// are words of its row; record() writes them in place — no allocation, no WebAssembly call.
// Everything else the profiler serves from a distribution (HDR encodings for
// /api/profile/histograms, --aggregate, snapshots, the series) is derived from the buckets when
// asked, off the request path.
import { closeSync, openSync, readSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as hdr from 'hdr-histogram-js';
import { ConfigError, type ConfigIssue, type Variant } from '../config/index.ts';
import { newHdr, type Distribution } from './latency-stats.ts';
import {
  BUCKETS, HEADER_BYTES, H_BUCKETS, H_DEFAULT_PIPELINE_ID, H_HEADER_BYTES, H_MAGIC, H_PID, H_ROWS_USED, H_ROW_BYTES,
  H_ROW_CAPACITY, H_SINCE_MS, H_STARTED_MS, H_SUB_BUCKET_BITS, H_VERSION, LAYOUT_VERSION, MAGIC, MAX_US, NAME_BYTES,
  H_SEQ, R_BUCKETS, R_COUNT, R_KIND, R_PHASE, R_PIPELINE_ID, R_STEP, R_VARIANT, ROW_BYTES, SUB_BUCKET_BITS, VARIANT_BYTES,
  bucketHighUs, bucketIndex, bucketPercentileUs, rowCapacity, rowsPerGraph,
} from './mmap-layout.ts';

export const SHM_ADDON_PATH = resolve(dirname(fileURLToPath(import.meta.url)), '../../native/shm/build/Release/shm.node');

interface ShmAddon {
  /** Maps `path` (MAP_SHARED): writable creates it and sets its size to `bytes`; read-only maps it whole (bytes 0). */
  map(path: string, bytes: number, writable: boolean): ArrayBuffer;
  /** How many SIGBUS faults in the addon's mappings (a file shrunk under them) it repaired. */
  faults(): number;
  /** Drops the exclusive lock a writable mapping holds on its file (the mapping stays until collected). */
  release(buffer: ArrayBuffer): boolean;
}

/** The pid in the header of the histogram file at `path`, if it is one; null otherwise. */
function headerPid(path: string): number | null {
  let fd: number | null = null;
  try {
    fd = openSync(path, 'r');
    const head = Buffer.alloc(H_PID + 4);
    if (readSync(fd, head, 0, head.length, 0) < head.length || head.toString('latin1', H_MAGIC, H_MAGIC + 8) !== MAGIC) return null;
    return head.readUInt32LE(H_PID);
  } catch {
    return null;
  } finally {
    if (fd !== null) closeSync(fd);
  }
}

let addon: ShmAddon | null = null;
/** Loads native/shm; throws a ConfigError on `profiling.storage` when it was not built. */
export function loadShm(): ShmAddon {
  if (addon !== null) return addon;
  try {
    addon = createRequire(import.meta.url)(SHM_ADDON_PATH) as ShmAddon;
  } catch (err) {
    throw new ConfigError(null, [{
      path: 'profiling.storage',
      message: `"mmap" needs the native addon ${SHM_ADDON_PATH}, built by \`npm run build\` (${(err as Error).message.split('\n')[0]})`,
    }], { cause: err });
  }
  return addon;
}

type FitPipeline = { id: string; request: readonly string[]; response: readonly string[] };

/**
 * Whether the configured pipelines fit a file of `sizeMb`: room for a baseline and a candidate
 * graph of each (every step is timed in both phases), and names that fit their fields. Null when
 * they fit. With several pipelines, a name that does not fit is reported at `pipelines` with the
 * pipeline's id.
 */
export function mmapFitIssue(pipelines: readonly FitPipeline[] | FitPipeline, sizeMb: number): ConfigIssue | null {
  const list: readonly FitPipeline[] = Array.isArray(pipelines) ? pipelines : [pipelines as FitPipeline];
  const enc = new TextEncoder();
  let need = 0;
  let total = 0;
  for (let k = 0; k < list.length; k++) {
    const p = list[k];
    const one = list.length === 1;
    const at = one ? 'pipeline' : 'pipelines';
    const who = one ? '' : `pipeline "${p.id}": `;
    if (enc.encode(p.id).length >= NAME_BYTES) return { path: one ? 'pipeline.id' : at, message: `${who}${one ? '' : 'id '}must be at ` +
      `most ${NAME_BYTES - 1} bytes with profiling.storage "mmap" (the file's name field)` };
    for (const phase of ['request', 'response'] as const) {
      const i = p[phase].findIndex((s) => enc.encode(s.startsWith('wasm:') ? s : `wasm:${s}`).length >= NAME_BYTES);
      if (i >= 0) return { path: one ? `pipeline.${phase}[${i}]` : at, message: `${who}step names must be at most ${NAME_BYTES - 6} bytes with ` +
        `profiling.storage "mmap" (the file's name field)` };
    }
    const steps = new Set([...p.request, ...p.response].map((id) => (id.startsWith('wasm:') ? id : `wasm:${id}`))).size;
    need += 2 * rowsPerGraph(steps);
    total += steps;
  }
  const have = rowCapacity(sizeMb);
  if (need <= have) return null;
  const mb = Math.ceil((need * ROW_BYTES + HEADER_BYTES) / (1024 * 1024));
  const shape = list.length === 1 ? `2 graphs × (4 + 2 phases × ${total} steps)` : `${list.length} pipelines, each 2 graphs × (4 + 2 phases × its steps)`;
  return {
    path: 'profiling.mmap_size_mb',
    message: `${sizeMb} MiB holds ${have} histogram rows of ${ROW_BYTES} bytes; ${list.length === 1 ? 'this pipeline needs' : 'these pipelines ' +
      'need'} ${need} (${shape}): set at least ${mb}`,
  };
}

export class HistogramFile {
  readonly path: string;
  readonly capacity: number;
  readonly f64: Float64Array;
  readonly i32: Int32Array;
  private readonly u8: Uint8Array;
  /** The mapping lives as long as this ArrayBuffer is reachable. */
  private readonly buffer: ArrayBuffer;
  private used = 0;
  private seq = 0;
  /** begin() calls not yet ended (they nest). */
  private depth = 0;
  private readonly defaultPipelineId: string;
  private readonly startedMs = Date.now();
  /** Each allocated row's names, to write them again after the file was cut under the mapping. */
  private readonly rowNames: [number, number, string, Variant, string, number][] = [];
  private faultsSeen: number;

  private constructor(path: string, buffer: ArrayBuffer, defaultPipelineId: string, faults: number) {
    this.path = path;
    this.defaultPipelineId = defaultPipelineId;
    this.faultsSeen = faults;
    this.buffer = buffer;
    this.f64 = new Float64Array(buffer);
    this.i32 = new Int32Array(buffer);
    this.u8 = new Uint8Array(buffer);
    this.capacity = Math.floor((buffer.byteLength - HEADER_BYTES) / ROW_BYTES);
  }

  /**
   * Creates (or takes over and clears) the file at `path`, `sizeMb` MiB, and writes its header.
   * Throws a ConfigError on `profiling.mmap_path` when it cannot be opened or mapped, an Error when
   * another process (another proxy) holds its lock.
   */
  static create(path: string, sizeMb: number, defaultPipelineId: string,
    onCut?: (info: { file: string; faults: number }) => void): HistogramFile {
    const shm = loadShm();
    let buffer: ArrayBuffer;
    try {
      buffer = shm.map(path, sizeMb * 1024 * 1024, true);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'SHM_FILE_LOCKED') {
        // Not a configuration error (the same file is fine once the other proxy stops): the start stops, exit 1.
        const pid = headerPid(path);
        const who = pid === null ? '' : ` (pid ${pid} wrote its header)`;
        throw new Error(`cannot use the profiling histogram file ${path}: another process holds it${who}; one proxy per file: give each ` +
          'proxy its own profiling.mmap_path (the file was not changed)', { cause: err });
      }
      throw new ConfigError(null, [{ path: 'profiling.mmap_path', message: (err as Error).message }], { cause: err });
    }
    const f = new HistogramFile(path, buffer, defaultPipelineId, shm.faults());
    f.u8.fill(0);
    f.writeHeader();
    if (onCut !== undefined) {
      // The addon keeps a file shrunk under the mapping at its size (its SIGBUS handler); here the
      // header and the rows' names are written again, once a second at most, and it is said.
      // A weak reference: the timer does not keep a file nobody uses mapped (the mapping goes with
      // its buffer); it stops once the file is collected.
      const ref = new WeakRef(f);
      const timer = setInterval(() => {
        const file = ref.deref();
        if (file === undefined) {
          clearInterval(timer);
          return;
        }
        const n = shm.faults();
        if (n === file.faultsSeen) return;
        file.faultsSeen = n;
        file.rewrite();
        onCut({ file: file.path, faults: n });
      }, 1000).unref();
    }
    return f;
  }

  /**
   * Drops the file's lock (the proxy stops): another proxy may take the file over. The mapping
   * stays until this object is collected; nothing should be recorded into it after this.
   */
  release(): void {
    loadShm().release(this.buffer);
  }

  /** After the file was cut under the mapping (its pages read as zeros again): the header and row names. */
  private rewrite(): void {
    this.writeHeader();
    for (const [row, kind, pipelineId, variant, step, phase] of this.rowNames) this.writeRowNames(row, kind, pipelineId, variant, step, phase);
    Atomics.store(this.i32, H_ROWS_USED >> 2, this.used);
  }

  private writeHeader(): void {
    const f = this.u8;
    const view = new DataView(this.buffer);
    view.setUint32(H_VERSION, LAYOUT_VERSION, true);
    view.setUint32(H_HEADER_BYTES, HEADER_BYTES, true);
    view.setUint32(H_ROW_BYTES, ROW_BYTES, true);
    view.setUint32(H_ROW_CAPACITY, this.capacity, true);
    view.setUint32(H_BUCKETS, BUCKETS, true);
    view.setUint32(H_SUB_BUCKET_BITS, SUB_BUCKET_BITS, true);
    view.setUint32(H_PID, process.pid, true);
    view.setFloat64(H_STARTED_MS, this.startedMs, true);
    view.setFloat64(H_SINCE_MS, Date.now(), true); // a cut file's counts start again from zero
    this.writeName(H_DEFAULT_PIPELINE_ID, NAME_BYTES, this.defaultPipelineId);
    // The magic last: a reader that sees it sees the whole header.
    new TextEncoder().encodeInto(MAGIC, f.subarray(H_MAGIC, H_MAGIC + 8));
  }

  get rowsUsed(): number {
    return this.used;
  }

  /** Claims the next row for a distribution; -1 when the file is full. */
  allocate(kind: number, pipelineId: string, variant: Variant, step: string, phase: number): number {
    if (this.used >= this.capacity) return -1;
    const row = this.used;
    this.writeRowNames(row, kind, pipelineId, variant, step, phase);
    this.rowNames.push([row, kind, pipelineId, variant, step, phase]);
    this.used = row + 1;
    Atomics.store(this.i32, H_ROWS_USED >> 2, this.used); // publishes the row to readers
    return row;
  }

  /**
   * Before writing rows: the sequence number becomes odd. Atomics.store is sequentially
   * consistent, so it is visible before the row writes that follow (on any CPU).
   */
  begin(): void {
    if (this.depth++ === 0) Atomics.store(this.i32, H_SEQ >> 2, ++this.seq);
  }

  /**
   * After writing rows: the sequence number becomes even, after every row write before it. Pairs
   * nest: only the outermost end() publishes (a merge of several states is one write to readers).
   */
  end(): void {
    if (--this.depth === 0) Atomics.store(this.i32, H_SEQ >> 2, ++this.seq);
  }

  /** Records when the statistics were last reset (the header's since field). */
  markReset(ms: number): void {
    this.f64[H_SINCE_MS >> 3] = ms;
  }

  private writeRowNames(row: number, kind: number, pipelineId: string, variant: Variant, step: string, phase: number): void {
    const at = HEADER_BYTES + row * ROW_BYTES;
    this.i32[(at + R_KIND) >> 2] = kind;
    this.i32[(at + R_PHASE) >> 2] = phase;
    this.writeName(at + R_PIPELINE_ID, NAME_BYTES, pipelineId);
    this.writeName(at + R_VARIANT, VARIANT_BYTES, variant);
    this.writeName(at + R_STEP, NAME_BYTES, step);
  }

  private writeName(at: number, size: number, text: string): void {
    const dst = this.u8.subarray(at, at + size - 1); // at least one NUL stays
    dst.fill(0);
    new TextEncoder().encodeInto(text, dst);
  }
}

/**
 * A distribution stored in a row of the histogram file; the same members as LatencyStats, so the
 * profiler, the endpoints and the snapshot store use either. Every write (record, the setters,
 * reset, addEncoded) must happen between the file's begin() and end(). The Prometheus bucket
 * counts (`counts`, against profiling.histogram_buckets) stay in process memory, as in LatencyStats.
 */
export class MappedLatencyStats implements Distribution {
  readonly bounds: readonly number[];
  readonly counts: Float64Array;
  readonly row: number;
  private readonly f: Float64Array;
  /** f64 index of count; errors, sum and max follow. */
  private readonly at: number;
  /** f64 index of the first bucket. */
  private readonly bucketAt: number;
  private materialised: hdr.Histogram | null = null;
  private materialisedCount = -1;
  private materialisedSum = -1;

  constructor(file: HistogramFile, row: number, bounds: readonly number[]) {
    const base = HEADER_BYTES + row * ROW_BYTES;
    this.row = row;
    this.f = file.f64;
    this.at = (base + R_COUNT) >> 3;
    this.bucketAt = (base + R_BUCKETS) >> 3;
    this.bounds = bounds;
    this.counts = new Float64Array(bounds.length + 1);
  }

  record(ns: number, error: boolean): void {
    const f = this.f;
    const a = this.at;
    f[a]++;
    if (error) f[a + 1]++;
    f[a + 2] += ns;
    if (ns > f[a + 3]) f[a + 3] = ns;
    const us = ns / 1000;
    f[this.bucketAt + bucketIndex(us < MAX_US ? Math.round(us) : MAX_US)]++;
    const b = this.bounds;
    let i = 0;
    while (i < b.length && us > b[i]) i++;
    this.counts[i]++;
  }

  get count(): number { return this.f[this.at]; }
  set count(v: number) { this.f[this.at] = v; }
  get errors(): number { return this.f[this.at + 1]; }
  set errors(v: number) { this.f[this.at + 1] = v; }
  get sumNs(): number { return this.f[this.at + 2]; }
  set sumNs(v: number) { this.f[this.at + 2] = v; }
  get maxNs(): number { return this.f[this.at + 3]; }
  set maxNs(v: number) { this.f[this.at + 3] = v; }

  avgUs(): number { return this.count === 0 ? 0 : Math.round(this.sumNs / this.count / 1000); }
  maxUs(): number { return Math.round(this.maxNs / 1000); }
  /** From the log-linear buckets (mmap-layout.ts), exactly as `proxy profile --mmap` computes it. */
  percentileUs(p: number): number { return bucketPercentileUs(this.f, this.bucketAt, this.count, this.maxUs(), p); }

  /**
   * An HDR histogram holding the buckets' values (each bucket's count at its high end, at most the
   * max), rebuilt when the row changed: what the encodings, merges and interval figures read.
   */
  get hdr(): hdr.Histogram {
    const h = this.materialised ??= newHdr();
    if (this.materialisedCount === this.count && this.materialisedSum === this.sumNs) return h;
    h.reset();
    const maxUs = this.maxUs();
    for (let i = 0; i < BUCKETS; i++) {
      const n = this.f[this.bucketAt + i];
      if (n > 0) h.recordValueWithCount(Math.min(bucketHighUs(i), maxUs), n);
    }
    this.materialisedCount = this.count;
    this.materialisedSum = this.sumNs;
    return h;
  }

  /** Adds the values of an HdrHistogram (compressed base64) into the buckets: a restored snapshot. */
  addEncoded(b64: string): void {
    const js = hdr.decodeFromCompressedBase64(b64, 32, false) as unknown as hdr.JsHistogram;
    for (let i = 0; i < js.countsArrayLength; i++) {
      const n = js.getCountAtIndex(i);
      if (n === 0) continue;
      const us = Math.min(Math.round(js.valueFromIndex(i)), MAX_US);
      this.f[this.bucketAt + bucketIndex(us)] += n;
    }
  }

  reset(): void {
    this.f.fill(0, this.at, this.bucketAt + BUCKETS);
    this.counts.fill(0);
  }

  /**
   * After the file was cut under the mapping, its row restarted from zero (with whatever was
   * recorded between the fault and now, up to a second): the histogram_buckets counts of /metrics,
   * kept in process memory, are rebuilt from the row's buckets (each at its high end, at most the
   * max — within the 1/32 width of a bucket for those few values), so `le` never exceeds `+Inf`
   * and the counts add up to `_count` again.
   */
  rebuildMemory(): void {
    this.counts.fill(0);
    const b = this.bounds;
    const maxUs = this.maxUs();
    for (let k = 0; k < BUCKETS; k++) {
      const n = this.f[this.bucketAt + k];
      if (n === 0) continue;
      const us = Math.min(bucketHighUs(k), maxUs);
      let i = 0;
      while (i < b.length && us > b[i]) i++;
      this.counts[i] += n;
    }
  }

  destroy(): void {
    this.materialised?.destroy();
    this.materialised = null;
  }
}
