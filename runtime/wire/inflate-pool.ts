// Decompression off the event loop: OP_COMPRESSED messages too large to inflate inline
// (compression.ts, INLINE_INFLATE_BYTES) are inflated by worker threads (inflate-worker.mjs), each
// bounded by its declared size. A 45 KB zlib frame can declare 47 MB; inflated on the event loop,
// 200 of them stalled every other client for seconds.
//
// Bounds: a client connection handles one request at a time, so it has at most one message
// being inflated (its reading pauses behind it through its request queue); across the proxy, the
// declared bytes being inflated at once are bounded by `maxInflatingBytes` (a semaphore on
// declared sizes: messages wait in arrival order until theirs fits; one message always fits).
//
// Memory: a worker's zstd WebAssembly memory grows with the largest message it decompressed and
// never shrinks, and a large message's buffers stay in the worker until its next garbage
// collection, which an idle worker may never run. So a worker that holds more than
// `retainBytes` (zstd memory), or inflated a message of more than half that, is ended once it has
// been idle for RETIRE_IDLE_MS — its memory goes back to the system at once — and a new one
// starts when needed (about 35 ms). A burst of large messages reuses one worker.
//
// The pool belongs to its server (one per proxy), and a connection is its own InflateOwner: no
// closure per message.
import { Worker } from 'node:worker_threads';
import { availableParallelism } from 'node:os';
import { HEADER_SIZE } from './constants.ts';
import { COMPRESSED_PREFIX } from './compression.ts';
import { WireError } from './errors.ts';

export interface InflateOwner {
  /** The decompressed message (header included, requestID and responseTo as sent). */
  onInflated(frame: Buffer): void;
  /**
   * It did not decompress to its declared size (WireError), or a worker failed (Error).
   * `moreToCome`: for a message that did not decompress, its OP_MSG flag as the worker read it from
   * the whole data (null: not an OP_MSG, or unreadable); undefined when the worker could not say.
   */
  onInflateFailed(err: Error, moreToCome?: boolean | null): void;
}

export interface InflatePoolOptions {
  /** Worker threads at most (default: the cores less one for the event loop, at least 1, at most 4). */
  workers?: number;
  /** Declared bytes being inflated at once across the pool (default 64 MiB; a single message always fits). */
  maxInflatingBytes?: number;
  /** Memory an idle worker may keep (default 32 MiB; see above). */
  retainBytes?: number;
}

export const DEFAULT_MAX_INFLATING_BYTES = 64 * 1024 * 1024;
/** zstd's WebAssembly memory starts at 16 MiB; a worker that needed twice that is ended when idle. */
const DEFAULT_RETAIN_BYTES = 32 * 1024 * 1024;
const RETIRE_IDLE_MS = 1000;

class Job {
  readonly id: number;
  readonly owner: InflateOwner;
  readonly frame: Buffer;
  readonly size: number;
  cancelled = false;
  constructor(id: number, owner: InflateOwner, frame: Buffer, size: number) {
    this.id = id;
    this.owner = owner;
    this.frame = frame;
    this.size = size;
  }
}

class Slot {
  readonly worker: Worker;
  job: Job | null = null;
  /** It holds more memory than it may keep while idle: ended after RETIRE_IDLE_MS without work. */
  heavy = false;
  retireTimer: NodeJS.Timeout | null = null;
  constructor(worker: Worker) {
    this.worker = worker;
  }
}

interface WorkerReply { id: number; ok: boolean; frame?: ArrayBuffer; message?: string; moreToCome?: boolean | null; heap: number }

export interface InflatePoolStats {
  inflated: number;
  failed: number;
  /** Messages whose connection closed while they waited or were being inflated. */
  cancelled: number;
  workersStarted: number;
  /** Idle workers ended to give back their memory (retainBytes). */
  workersRecycled: number;
  /** The most declared bytes inflated at once. */
  peakInflatingBytes: number;
}

export class InflatePool {
  readonly maxWorkers: number;
  readonly maxInflatingBytes: number;
  readonly retainBytes: number;
  readonly stats: InflatePoolStats = { inflated: 0, failed: 0, cancelled: 0, workersStarted: 0, workersRecycled: 0, peakInflatingBytes: 0 };
  private readonly waiting: Job[] = [];
  private readonly slots: Slot[] = [];
  /** Declared bytes of the messages in workers now. */
  private inflatingBytes = 0;
  private nextId = 1;
  private closed = false;

  constructor(opts: InflatePoolOptions = {}) {
    this.maxWorkers = opts.workers ?? Math.max(1, Math.min(4, availableParallelism() - 1));
    this.maxInflatingBytes = opts.maxInflatingBytes ?? DEFAULT_MAX_INFLATING_BYTES;
    this.retainBytes = opts.retainBytes ?? DEFAULT_RETAIN_BYTES;
  }

  /** Messages waiting for a worker or for room under maxInflatingBytes. */
  get queued(): number {
    return this.waiting.length;
  }

  /** Workers running now. */
  get workers(): number {
    return this.slots.length;
  }

  /**
   * Inflates `frame`, an OP_COMPRESSED frame checked by compressedSize (declared `size`); the
   * owner is told the outcome later, never during this call. The frame's memory may be handed to
   * the worker: the caller must not read it afterwards.
   */
  inflate(frame: Buffer, size: number, owner: InflateOwner): void {
    if (this.closed) {
      queueMicrotask(() => owner.onInflateFailed(new Error('the proxy is shutting down')));
      return;
    }
    this.waiting.push(new Job(this.nextId++, owner, frame, size));
    this.pump();
  }

  /** The owner's connection closed: its message is dropped (or its result, if a worker has it), and it is not told. */
  cancel(owner: InflateOwner): void {
    for (let i = 0; i < this.waiting.length; i++) {
      if (this.waiting[i].owner === owner) {
        this.waiting.splice(i, 1);
        this.stats.cancelled++;
        this.pump();
        return;
      }
    }
    for (const s of this.slots) {
      if (s.job !== null && s.job.owner === owner && !s.job.cancelled) {
        s.job.cancelled = true;
        this.stats.cancelled++;
      }
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    this.waiting.length = 0;
    for (const s of this.slots) if (s.retireTimer !== null) clearTimeout(s.retireTimer);
    const ending = this.slots.map((s) => s.worker.terminate());
    this.slots.length = 0;
    await Promise.all(ending);
  }

  private pump(): void {
    const waiting = this.waiting;
    while (waiting.length > 0) {
      const job = waiting[0];
      if (this.inflatingBytes > 0 && this.inflatingBytes + job.size > this.maxInflatingBytes) return;
      const slot = this.idleSlot();
      if (slot === null) return;
      waiting.shift();
      this.run(slot, job);
    }
  }

  private idleSlot(): Slot | null {
    for (const s of this.slots) if (s.job === null) return s;
    if (this.slots.length >= this.maxWorkers) return null;
    const worker = new Worker(new URL('./inflate-worker.mjs', import.meta.url), { execArgv: [] });
    const slot = new Slot(worker);
    worker.on('message', (m: WorkerReply) => this.onReply(slot, m));
    worker.on('error', (err: Error) => this.onWorkerFailed(slot, err));
    worker.on('exit', (code: number) => this.onWorkerFailed(slot, new Error(`exited with code ${code}`)));
    // An idle worker must not keep the process alive (unref() after the listeners, which ref it);
    // one with a message does (run()).
    worker.unref();
    this.slots.push(slot);
    this.stats.workersStarted++;
    return slot;
  }

  private run(slot: Slot, job: Job): void {
    slot.worker.ref();
    slot.job = job;
    if (slot.retireTimer !== null) {
      clearTimeout(slot.retireTimer);
      slot.retireTimer = null;
    }
    this.inflatingBytes += job.size;
    if (this.inflatingBytes > this.stats.peakInflatingBytes) this.stats.peakInflatingBytes = this.inflatingBytes;
    const f = job.frame;
    const at = HEADER_SIZE + COMPRESSED_PREFIX;
    const msg = {
      id: job.id, compressor: f[HEADER_SIZE + 8], size: job.size, data: null as Uint8Array | null,
      requestId: f.readInt32LE(4), responseTo: f.readInt32LE(8), opcode: f.readInt32LE(HEADER_SIZE),
    };
    // A frame assembled across socket chunks owns its memory: handed over, not copied. A view
    // into a chunk shared with other frames is copied (it is small: one socket read at most).
    if (f.byteOffset === 0 && f.byteLength === f.buffer.byteLength) {
      msg.data = new Uint8Array(f.buffer, at, f.length - at);
      try {
        slot.worker.postMessage(msg, [f.buffer as ArrayBuffer]);
        return;
      } catch {
        // Not transferable (memory Node or a native module owns): copied below.
      }
    }
    const data = new Uint8Array(f.length - at);
    data.set(f.subarray(at));
    msg.data = data;
    slot.worker.postMessage(msg, [data.buffer]);
  }

  private onReply(slot: Slot, m: WorkerReply): void {
    const job = slot.job;
    if (job === null || job.id !== m.id) return;
    slot.job = null;
    this.inflatingBytes -= job.size;
    if (m.heap > this.retainBytes || job.size > this.retainBytes / 2) slot.heavy = true;
    // The next message starts before this one is handled: the worker inflates while the event loop parses.
    this.pump();
    if (slot.job === null) slot.worker.unref();
    if (slot.job === null && slot.heavy && slot.retireTimer === null) {
      slot.retireTimer = setTimeout(() => this.retire(slot), RETIRE_IDLE_MS);
      slot.retireTimer.unref();
    }
    if (job.cancelled) return;
    if (m.ok) {
      this.stats.inflated++;
      job.owner.onInflated(Buffer.from(m.frame!));
    } else {
      this.stats.failed++;
      job.owner.onInflateFailed(new WireError('PROXY_ERR_BAD_COMPRESSION', m.message!, true), m.moreToCome);
    }
  }

  /** Ends an idle worker that holds more memory than it may keep; its memory goes back to the system. */
  private retire(slot: Slot): void {
    slot.retireTimer = null;
    const i = this.slots.indexOf(slot);
    if (i < 0 || slot.job !== null) return;
    this.slots.splice(i, 1);
    this.stats.workersRecycled++;
    void slot.worker.terminate();
  }

  private onWorkerFailed(slot: Slot, err: Error): void {
    const i = this.slots.indexOf(slot);
    if (i < 0) return; // retired or closed: its end was asked for
    this.slots.splice(i, 1);
    if (slot.retireTimer !== null) clearTimeout(slot.retireTimer);
    const job = slot.job;
    slot.job = null;
    if (job !== null) {
      this.inflatingBytes -= job.size;
      this.stats.failed++;
      if (!job.cancelled) job.owner.onInflateFailed(new Error(`decompression worker failed: ${err.message}`, { cause: err }));
    }
    this.pump();
  }
}
