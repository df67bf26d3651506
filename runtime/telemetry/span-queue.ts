// A bounded span queue in front of an OTLP exporter. The SDK's BatchSpanProcessor bounds its queue
// too, but it drops silently; here every span that does not reach the collector — queue full, or
// an export that failed or timed out — is counted (proxy_trace_spans_dropped_total in /metrics).
// One export is in flight at a time: a slow or down collector holds that one request, the queue
// fills, and later spans are dropped and counted; requests never wait for any of it.
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

export class BoundedSpanQueue implements SpanProcessor {
  /** Spans handed to the exporter and acknowledged by the collector. */
  exported = 0;
  /** Spans dropped because the queue was full. */
  droppedQueueFull = 0;
  /** Spans lost in exports that failed (collector down, refused, timed out). */
  droppedExportFailed = 0;
  private readonly exporter: SpanExporter;
  private readonly opts: SpanQueueOptions;
  private readonly log: Pick<Log, 'warn'>;
  private queue: ReadableSpan[] = [];
  private inFlight = false;
  private timer: NodeJS.Timeout | null = null;
  private closed = false;
  private flushing = 0;
  private lastFailureLog = 0;
  private failuresSinceLog = 0;
  private readonly onTimer = () => {
    this.timer = null;
    this.exportBatch();
  };

  constructor(exporter: SpanExporter, opts: SpanQueueOptions, log: Pick<Log, 'warn'>) {
    this.exporter = exporter;
    this.opts = opts;
    this.log = log;
  }

  get queued(): number {
    return this.queue.length;
  }

  get dropped(): number {
    return this.droppedQueueFull + this.droppedExportFailed;
  }

  onStart(): void {}

  onEnd(span: ReadableSpan): void {
    if (this.closed || this.queue.length >= this.opts.maxQueue) {
      this.droppedQueueFull++;
      return;
    }
    this.queue.push(span);
    if (this.queue.length >= this.opts.maxBatch) this.exportBatch();
    else if (this.timer === null && !this.inFlight) this.timer = setTimeout(this.onTimer, this.opts.intervalMs).unref();
  }

  private exportBatch(): void {
    if (this.inFlight || this.queue.length === 0) return;
    if (this.timer !== null) {
      clearTimeout(this.timer);
      this.timer = null;
    }
    const batch = this.queue.length <= this.opts.maxBatch ? this.queue : this.queue.slice(0, this.opts.maxBatch);
    this.queue = batch === this.queue ? [] : this.queue.slice(batch.length);
    this.inFlight = true;
    this.exporter.export(batch, (result) => {
      this.inFlight = false;
      if (result.code === EXPORT_SUCCESS) this.exported += batch.length;
      else this.failed(batch.length, result.error);
      if (this.queue.length >= this.opts.maxBatch || (this.flushing > 0 && this.queue.length > 0)) this.exportBatch();
      else if (this.queue.length > 0 && this.timer === null) this.timer = setTimeout(this.onTimer, this.opts.intervalMs).unref();
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
    if (this.inFlight || this.queue.length > 0) return;
    const w = this.waiters;
    this.waiters = [];
    for (const fn of w) fn();
  }

  /** Exports everything queued (in batches, without waiting for the interval); resolves when nothing is queued or in flight. */
  async forceFlush(): Promise<void> {
    this.flushing++;
    try {
      while (this.inFlight || this.queue.length > 0) {
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
    this.droppedQueueFull += this.queue.length;
    this.queue = [];
    // The exporter's own shutdown waits for its requests in flight: not past the deadline either.
    await Promise.race([this.exporter.shutdown(), new Promise<void>((resolve) => setTimeout(resolve, 100).unref())]);
  }
}
