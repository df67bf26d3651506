// Bounded span queues in front of an OTLP exporter. The SDK's BatchSpanProcessor bounds its queue
// too, but it drops silently; here every span that does not reach the collector — queue full, or
// an export that failed or timed out — is counted (proxy_trace_spans_dropped_total in /metrics).
// One export is in flight at a time: a slow or down collector holds that one request, the queue
// fills, and later spans are dropped and counted; requests never wait for any of it.
//
// Two queues share that logic (ExportQueue): BoundedSpanQueue holds ReadableSpans (the http/json
// exporter, and exporters given in tests); EncodedSpanQueue holds spans encoded as OTLP protobuf by
// span-writer.ts, one request's spans at a time, in one growing byte arena — and, before that, the
// requests admitted but not yet written (pending-traces.ts): a sampled request's spans are counted
// against the bound when the request ends (queued or dropped whole, as before), and written into
// the arena in one pass over all pending requests when a batch is taken for export (the interval's
// timer; right after the turn in which max_batch_spans spans came to be queued), and at flush and
// shutdown.
import type { Log } from '../log/index.ts';
import type { ReadableSpan, SpanExporter, SpanProcessor } from '@opentelemetry/sdk-trace-node';

/** ExportResultCode.SUCCESS (@opentelemetry/core). */
const EXPORT_SUCCESS = 0;

export interface SpanQueueOptions {
  maxQueue: number;
  maxBatch: number;
  intervalMs: number;
}

/** How often at most a failing export is logged (the counter counts every dropped span). */
const FAILURE_LOG_INTERVAL_MS = 10_000;

/** What an export reports (the SDK's ExportResult). */
export interface ExportResult { code: number; error?: Error }

/** Spans encoded as OTLP/protobuf ScopeSpans.spans entries, and how many. */
export interface EncodedSpans { bytes: Uint8Array; spans: number }

/** An exporter of encoded spans (export-thread.ts ThreadedTraceExporter). */
export interface EncodedSpanExporter {
  export(batch: EncodedSpans, done: (result: ExportResult) => void): void;
  shutdown(): Promise<void>;
}

/** Where EncodedSpanQueue's admitted requests wait to be written (tracing.ts over pending-traces.ts). */
export interface PendingSpanSource {
  /** Writes every pending request's spans into the queue (EncodedSpanQueue.append), oldest first. */
  writePending(): void;
  /** Forgets every pending request (the queue is being emptied). */
  discardPending(): void;
}

/** The bounded queue's logic over a batch type: counts, the export in flight, the timer, flush and shutdown. */
export abstract class ExportQueue<Batch> {
  /** Spans handed to the exporter and acknowledged by the collector. */
  exported = 0;
  /** Spans dropped because the queue was full. */
  droppedQueueFull = 0;
  /** Spans lost in exports that failed (collector down, refused, timed out). */
  droppedExportFailed = 0;
  protected readonly opts: SpanQueueOptions;
  private readonly log: Pick<Log, 'warn'>;
  protected closed = false;
  protected inFlight = false;
  private timer: NodeJS.Timeout | null = null;
  private flushing = 0;
  private lastFailureLog = 0;
  private failuresSinceLog = 0;
  private readonly onTimer = () => {
    this.timer = null;
    this.exportBatch();
  };

  constructor(opts: SpanQueueOptions, log: Pick<Log, 'warn'>) {
    this.opts = opts;
    this.log = log;
  }

  /** Spans queued, not yet handed to the exporter. */
  abstract get queued(): number;

  get dropped(): number {
    return this.droppedQueueFull + this.droppedExportFailed;
  }

  /** Takes the oldest queued spans, at most `max` (but at least one item), as a batch. */
  protected abstract take(max: number): { batch: Batch; spans: number };
  /** Hands a batch to the exporter. */
  protected abstract send(batch: Batch, done: (result: ExportResult) => void): void;
  /** Empties the queue; returns how many spans were in it. */
  protected abstract clear(): number;
  protected abstract shutdownExporter(): Promise<void>;

  /** After spans were queued: an export when a batch is full, else the interval's timer. */
  protected added(): void {
    if (this.queued >= this.opts.maxBatch) this.exportBatch();
    else if (this.timer === null && !this.inFlight) this.timer = setTimeout(this.onTimer, this.opts.intervalMs).unref();
  }

  /** Before a batch is taken: what the queue holds made ready to take (EncodedSpanQueue writes its pending requests). */
  protected prepare(): void {}

  private exportBatch(): void {
    if (this.inFlight) return;
    this.prepare();
    if (this.queued === 0) {
      // Nothing after all (pending requests that could not be written): a flush waiting on it is done.
      this.settled();
      return;
    }
    if (this.timer !== null) {
      clearTimeout(this.timer);
      this.timer = null;
    }
    const { batch, spans } = this.take(this.opts.maxBatch);
    this.inFlight = true;
    this.send(batch, (result) => {
      this.inFlight = false;
      if (result.code === EXPORT_SUCCESS) this.exported += spans;
      else this.failed(spans, result.error);
      if (this.queued >= this.opts.maxBatch || (this.flushing > 0 && this.queued > 0)) this.exportBatch();
      else if (this.queued > 0 && this.timer === null) this.timer = setTimeout(this.onTimer, this.opts.intervalMs).unref();
      this.settled();
    });
  }

  private failed(n: number, error: Error | undefined): void {
    this.droppedExportFailed += n;
    this.failuresSinceLog++;
    const now = Date.now();
    if (now - this.lastFailureLog < FAILURE_LOG_INTERVAL_MS) return;
    this.log.warn('trace export failed; spans dropped', {
      spans: n, failed_exports: this.failuresSinceLog, dropped_total: this.dropped, error: error?.message ?? 'unknown',
    });
    this.lastFailureLog = now;
    this.failuresSinceLog = 0;
  }

  private waiters: Array<() => void> = [];
  private settled(): void {
    if (this.inFlight || this.queued > 0) return;
    const w = this.waiters;
    this.waiters = [];
    for (const fn of w) fn();
  }

  /** Exports everything queued (in batches, without waiting for the interval); resolves when nothing is queued or in flight. */
  async forceFlush(): Promise<void> {
    this.flushing++;
    try {
      while (this.inFlight || this.queued > 0) {
        await new Promise<void>((resolve) => {
          this.waiters.push(resolve);
          this.exportBatch();
        });
      }
    } finally {
      this.flushing--;
    }
  }

  /**
   * Exports what is queued, waiting at most `deadlineMs` (a down collector must not hold a
   * shutdown: its exporter retries); spans still queued then are dropped and counted.
   */
  async shutdown(deadlineMs = 5000): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<void>((resolve) => { timer = setTimeout(resolve, deadlineMs); });
    await Promise.race([this.forceFlush(), deadline]);
    clearTimeout(timer);
    this.closed = true;
    if (this.timer !== null) clearTimeout(this.timer);
    this.droppedQueueFull += this.clear();
    // The exporter's own shutdown waits for its requests in flight: not past the deadline either.
    await Promise.race([this.shutdownExporter(), new Promise<void>((resolve) => setTimeout(resolve, 100).unref())]);
  }
}

/** ReadableSpans, for the SDK's exporters (http/json) and exporters given in tests. */
export class BoundedSpanQueue extends ExportQueue<ReadableSpan[]> implements SpanProcessor {
  private readonly exporter: SpanExporter;
  private queue: ReadableSpan[] = [];

  constructor(exporter: SpanExporter, opts: SpanQueueOptions, log: Pick<Log, 'warn'>) {
    super(opts, log);
    this.exporter = exporter;
  }

  get queued(): number {
    return this.queue.length;
  }

  onStart(): void {}

  onEnd(span: ReadableSpan): void {
    if (this.closed || this.queue.length >= this.opts.maxQueue) {
      this.droppedQueueFull++;
      return;
    }
    this.queue.push(span);
    this.added();
  }

  protected take(max: number): { batch: ReadableSpan[]; spans: number } {
    const batch = this.queue.length <= max ? this.queue : this.queue.slice(0, max);
    this.queue = batch === this.queue ? [] : this.queue.slice(batch.length);
    return { batch, spans: batch.length };
  }

  protected send(batch: ReadableSpan[], done: (result: ExportResult) => void): void {
    this.exporter.export(batch, done);
  }

  protected clear(): number {
    const n = this.queue.length;
    this.queue = [];
    return n;
  }

  protected shutdownExporter(): Promise<void> {
    return this.exporter.shutdown();
  }
}

/** Arena bytes kept between batches; a larger arena is let go of once emptied. */
const ARENA_BYTES = 64 * 1024;
const ARENA_KEEP_BYTES = 4 * 1024 * 1024;

/**
 * Encoded spans, a request's at a time (a request's spans are admitted whole or dropped whole),
 * in one arena; a batch is whole requests, at most maxBatch spans unless one request has more.
 */
export class EncodedSpanQueue extends ExportQueue<EncodedSpans> {
  private readonly exporter: EncodedSpanExporter;
  private arena: Buffer = Buffer.allocUnsafe(ARENA_BYTES);
  private used = 0;
  /** Per queued request: where its bytes end in the arena, and its span count. */
  private readonly ends: number[] = [];
  private readonly counts: number[] = [];
  private spans = 0;
  /** Spans of admitted requests not yet written (in the source). */
  private pending = 0;
  private source: PendingSpanSource | null = null;
  private writeScheduled = false;
  private readonly onWrite = () => {
    this.writeScheduled = false;
    if (this.closed) return;
    if (this.pending > 0) this.source!.writePending();
    this.added();
  };

  constructor(exporter: EncodedSpanExporter, opts: SpanQueueOptions, log: Pick<Log, 'warn'>) {
    super(opts, log);
    this.exporter = exporter;
  }

  /** Where admitted requests wait (set once, before the first admit()). */
  setSource(source: PendingSpanSource): void {
    this.source = source;
  }

  /** Spans written and spans pending. */
  get queued(): number {
    return this.spans + this.pending;
  }

  /**
   * Admits a request of `spans` spans, to be written later by the source: false — its spans
   * dropped whole and counted — when the queue (written and pending spans) would pass its bound,
   * or is closed.
   */
  admit(spans: number): boolean {
    if (this.closed || this.spans + this.pending + spans > this.opts.maxQueue) {
      this.droppedQueueFull += spans;
      return false;
    }
    this.pending += spans;
    return true;
  }

  /**
   * After an admitted request was stored: once a batch's worth is queued, the pending requests are
   * written and the export started on the next turn of the event loop (setImmediate, once per
   * batch), not in the turn of the request that filled the batch; else the interval's timer.
   */
  admitted(): void {
    const max = this.opts.maxBatch;
    // While an export is in flight a written batch waits: the pending requests are written a batch at a time.
    if (this.pending < max && (this.queued < max || this.inFlight)) this.added();
    else if (!this.writeScheduled) {
      this.writeScheduled = true;
      setImmediate(this.onWrite);
    }
  }

  /** One admitted request's encoded spans (copied into the arena); `admitted`: the spans it was admitted with. */
  append(bytes: Uint8Array, spans: number, admitted: number): void {
    this.pending -= admitted;
    if (this.used + bytes.length > this.arena.length) {
      let size = this.arena.length * 2;
      while (size < this.used + bytes.length) size *= 2;
      const bigger = Buffer.allocUnsafe(size);
      this.arena.copy(bigger, 0, 0, this.used);
      this.arena = bigger;
    }
    this.arena.set(bytes, this.used);
    this.used += bytes.length;
    this.ends.push(this.used);
    this.counts.push(spans);
    this.spans += spans;
  }

  /** An admitted request whose spans could not be written: its spans count as lost (export_failed). */
  lost(admitted: number): void {
    this.pending -= admitted;
    this.droppedExportFailed += admitted;
  }

  protected override prepare(): void {
    if (this.pending > 0) this.source!.writePending();
  }

  protected take(max: number): { batch: EncodedSpans; spans: number } {
    let n = 1;
    let spans = this.counts[0];
    while (n < this.counts.length && spans + this.counts[n] <= max) spans += this.counts[n++];
    const end = this.ends[n - 1];
    const batch = { bytes: new Uint8Array(this.arena.subarray(0, end)), spans };
    this.arena.copyWithin(0, end, this.used);
    this.used -= end;
    this.ends.splice(0, n);
    this.counts.splice(0, n);
    for (let i = 0; i < this.ends.length; i++) this.ends[i] -= end;
    this.spans -= spans;
    if (this.used === 0 && this.arena.length > ARENA_KEEP_BYTES) this.arena = Buffer.allocUnsafe(ARENA_BYTES);
    return { batch, spans };
  }

  protected send(batch: EncodedSpans, done: (result: ExportResult) => void): void {
    this.exporter.export(batch, done);
  }

  protected clear(): number {
    const n = this.spans + this.pending;
    if (this.pending > 0) this.source!.discardPending();
    this.pending = 0;
    this.used = 0;
    this.ends.length = 0;
    this.counts.length = 0;
    this.spans = 0;
    return n;
  }

  protected shutdownExporter(): Promise<void> {
    return this.exporter.shutdown();
  }
}
