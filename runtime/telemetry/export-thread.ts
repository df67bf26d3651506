// The OTLP/HTTP protobuf trace exporter (docs/tracing.md): batches of spans already encoded by
// span-writer.ts are put in their ExportTraceServiceRequest envelope here and handed, bytes
// transferred rather than copied, to a worker thread (export-worker.mjs) that sends them with the
// OpenTelemetry SDK's HTTP transport.
//
// Why a thread: the HTTP client is Node's, and its sockets and responses are Node streams. Run on
// the event loop, an export every few seconds teaches the stream code that the proxy's own sockets
// run through (Readable.read, the chunk handling under every socket read) a second and third kind
// of stream: V8 then compiles that shared code for all of them — megamorphic property loads, calls
// no longer inlined — and every request pays, not only the traced ones. Measured at 5,000 req/s
// and sample_rate 0.01 (bench/RESULTS.md): those two functions alone cost ~0.2 µs per request with
// exports on the event loop and nothing without. In its own thread the HTTP client has its own
// JavaScript heap and compiled code; the export's own CPU leaves the event loop too.
//
// The thread starts with the first export and serves until shutdown. If it dies (it should not),
// the exports it had are reported failed (their spans counted as dropped) and the next export
// starts another.
import { Worker } from 'node:worker_threads';
import type { EncodedSpanExporter, EncodedSpans, ExportResult } from './span-queue.ts';
import type { BatchEnvelope } from './span-writer.ts';

/** ExportResultCode (@opentelemetry/core). */
const SUCCESS = 0;
const FAILED = 1;
export interface ExportThreadOptions {
  url: string;
  timeoutMillis: number;
}

/** Default: how long shutdown waits for the thread's requests in flight before ending it. */
const SHUTDOWN_WAIT_MS = 5000;

interface Reply { id: number; ok: boolean; message?: string }

export class ThreadedTraceExporter implements EncodedSpanExporter {
  private readonly envelope: BatchEnvelope;
  private readonly options: ExportThreadOptions;
  private readonly shutdownWaitMs: number;
  private worker: Worker | null = null;
  private nextId = 1;
  /** Exports (and a shutdown) sent to the thread and not answered yet, by id. */
  private readonly waiting = new Map<number, (r: Reply) => void>();

  constructor(envelope: BatchEnvelope, options: ExportThreadOptions, shutdownWaitMs = SHUTDOWN_WAIT_MS) {
    this.envelope = envelope;
    this.options = options;
    this.shutdownWaitMs = shutdownWaitMs;
  }

  export(batch: EncodedSpans, done: (result: ExportResult) => void): void {
    const bytes = this.envelope.wrap(batch.bytes);
    this.send({ bytes, spans: batch.spans }, bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength ? [bytes.buffer as ArrayBuffer] : [],
      (r) => done(r.ok ? { code: SUCCESS } : { code: FAILED, error: new Error(r.message ?? 'export failed') }));
  }

  /**
   * Ends the thread once its requests in flight have ended, or after the shutdown wait: exports
   * still unanswered then are reported failed (their spans counted as dropped).
   */
  async shutdown(): Promise<void> {
    const w = this.worker;
    if (w === null) return;
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, this.shutdownWaitMs);
      this.send({ shutdown: true }, [], () => {
        clearTimeout(timer);
        resolve();
      });
    });
    this.lost(w, 'was ended at shutdown');
    await w.terminate();
  }

  private send(message: object, transfer: ArrayBuffer[], reply: (r: Reply) => void): void {
    const w = this.worker ?? this.start();
    const id = this.nextId++;
    this.waiting.set(id, reply);
    // Referenced while it has work: the process does not exit with an export in flight.
    w.ref();
    w.postMessage({ id, ...message }, transfer);
  }

  private start(): Worker {
    const w = new Worker(new URL('./export-worker.mjs', import.meta.url), { execArgv: [], workerData: this.options });
    w.on('message', (r: Reply) => {
      const reply = this.waiting.get(r.id);
      if (reply === undefined) return;
      this.waiting.delete(r.id);
      if (this.waiting.size === 0) w.unref();
      reply(r);
    });
    w.on('error', (err: Error) => this.lost(w, `failed: ${err.message}`));
    w.on('exit', (code: number) => this.lost(w, `exited with code ${code}`));
    this.worker = w;
    return w;
  }

  /** The thread `w` is gone (or going): what it had not answered fails; the next export starts another. */
  private lost(w: Worker, why: string): void {
    if (this.worker !== w) return;
    this.worker = null;
    const replies = [...this.waiting.values()];
    this.waiting.clear();
    for (const reply of replies) reply({ id: 0, ok: false, message: `the trace export thread ${why}` });
  }
}
