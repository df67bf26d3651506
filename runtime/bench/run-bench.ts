// `runBench`: opens N connections to a target, handshakes each with an OP_MSG `hello`, seeds the
// collection the operation reads, then runs every connection's closed loop for the duration and
// returns throughput, latency percentiles (µs, HDR histogram) and error counts.
import { performance } from 'node:perf_hooks';
import * as hdr from 'hdr-histogram-js';
import { ReplyPeek } from '../wire/index.ts';
import { BenchConnection, RunTally } from './bench-connection.ts';
import { BenchError } from './errors.ts';
import { FIND_COLLECTION, SEED_DOCS, dropFrame, helloFrame, opFrames, seedFrame } from './frames.ts';
import { parseConnections, parseOp, parseTarget, type BenchOp } from './options.ts';
import { overheadBetween, overheadNote, readTotals, type OverheadReading } from './overhead.ts';

export interface BenchProgress {
  readonly elapsedMs: number;
  readonly requests: number;
  /** Requests per second since the loop started. */
  readonly throughput: number;
  readonly p50Us: number;
  readonly errors: number;
}

export interface BenchOptions {
  /** `mongodb://host:port` of the server, proxy or forwarder under test (first host used). */
  target: string;
  connections: number;
  durationMs: number;
  op?: BenchOp;
  /** Called about once a second while the loop runs. */
  onProgress?: (p: BenchProgress) => void;
  /** Per-connection connect timeout (default 5000 ms). */
  connectTimeoutMs?: number;
  /** The target proxy's profiling endpoint, for the pipeline overhead (null: not asked). */
  profilingUrl?: string | null;
  profilingToken?: string | null;
}

export interface LatencySummary {
  readonly p50: number;
  readonly p90: number;
  readonly p99: number;
  readonly max: number;
  readonly mean: number;
}

export interface BenchResult {
  readonly target: string;
  readonly op: BenchOp;
  readonly connections: number;
  /** Measured wall time of the loop (a little over the asked duration: the last replies are awaited). */
  readonly elapsedMs: number;
  readonly requests: number;
  readonly errors: number;
  /** Requests per second. */
  readonly throughput: number;
  /** Microseconds. */
  readonly latencyUs: LatencySummary;
  /** The proxy's mean own time per request over the run, from its profiling endpoint; null when it could not be read. */
  readonly overhead: OverheadReading | null;
  /** The overhead in words, or why it is not available. */
  readonly overheadNote: string;
}

export const OVERHEAD_NOTE = 'n/a (no profiling endpoint given)';

export async function runBench(opts: BenchOptions): Promise<BenchResult> {
  const { host, port } = parseTarget(opts.target);
  const connections = parseConnections(opts.connections);
  const op = parseOp(opts.op ?? 'find');
  if (!(Number.isFinite(opts.durationMs) && opts.durationMs >= 1)) {
    throw new BenchError('PROXY_ERR_BENCH_BAD_OPTION', `durationMs ${opts.durationMs} must be a positive number`);
  }
  const timeout = opts.connectTimeoutMs ?? 5000;

  const conns: BenchConnection[] = [];
  try {
    const opened = await Promise.allSettled(Array.from({ length: connections }, () => BenchConnection.open(host, port, timeout)));
    for (const r of opened) if (r.status === 'fulfilled') conns.push(r.value);
    const failed = opened.find((r) => r.status === 'rejected');
    if (failed !== undefined) throw (failed as PromiseRejectedResult).reason;

    const peek = new ReplyPeek();
    await Promise.all(conns.map(async (c) => {
      const reply = await c.command(helloFrame());
      if (!peek.read(reply).ok) throw new BenchError('PROXY_ERR_BENCH_PROTOCOL', `hello refused by the target (code ${peek.code})`);
    }));
    if (op === 'find') await seed(conns[0], peek);

    const histogram = hdr.build({ lowestDiscernibleValue: 1, highestTrackableValue: 60_000_000, numberOfSignificantValueDigits: 3 });
    const tally = new RunTally(histogram);
    const frames = conns.map((_, i) => opFrames(op, i));
    const start = performance.now();
    const deadline = start + opts.durationMs;
    let timer: NodeJS.Timeout | null = null;
    const onProgress = opts.onProgress;
    if (onProgress !== undefined) {
      timer = setInterval(() => {
        const elapsedMs = performance.now() - start;
        onProgress({
          elapsedMs, requests: tally.requests, errors: tally.errors,
          throughput: tally.requests / (elapsedMs / 1000), p50Us: histogram.getValueAtPercentile(50),
        });
      }, 1000);
    }
    const url = opts.profilingUrl ?? null;
    const token = opts.profilingToken ?? null;
    const before = url === null ? OVERHEAD_NOTE : await readTotals(url, token);
    try {
      await Promise.all(conns.map((c, i) => c.loop(frames[i], tally, deadline)));
    } finally {
      if (timer !== null) clearInterval(timer);
    }
    const elapsedMs = performance.now() - start;
    const afterTotals = url === null || typeof before === 'string' ? before : await readTotals(url, token);
    const overhead = typeof before === 'string' || typeof afterTotals === 'string' ? (typeof before === 'string' ? before : afterTotals as string)
      : overheadBetween(before, afterTotals, url!);
    const result: BenchResult = {
      target: opts.target, op, connections, elapsedMs: Math.round(elapsedMs),
      requests: tally.requests, errors: tally.errors,
      throughput: Math.round(tally.requests / (elapsedMs / 1000)),
      latencyUs: {
        p50: histogram.getValueAtPercentile(50),
        p90: histogram.getValueAtPercentile(90),
        p99: histogram.getValueAtPercentile(99),
        max: histogram.maxValue,
        mean: Math.round(histogram.mean),
      },
      overhead: typeof overhead === 'string' ? null : overhead,
      overheadNote: typeof overhead === 'string' ? overhead : overheadNote(overhead),
    };
    histogram.destroy();
    return result;
  } finally {
    for (const c of conns) c.close();
  }
}

/** Drops and refills `bench.items` so every run finds the same 1,000 documents. */
async function seed(conn: BenchConnection, peek: ReplyPeek): Promise<void> {
  await conn.command(dropFrame(FIND_COLLECTION)); // NamespaceNotFound on a fresh server is fine
  const reply = await conn.command(seedFrame());
  if (!peek.read(reply).ok || peek.hasWriteErrors) {
    throw new BenchError('PROXY_ERR_BENCH_PROTOCOL', `seeding ${SEED_DOCS} documents into bench.${FIND_COLLECTION} failed (code ${peek.code})`);
  }
}
