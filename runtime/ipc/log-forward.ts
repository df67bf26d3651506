// A worker's log lines in the primary's ring (`proxy logs`, GET /api/v1/logs). Each worker writes
// its lines to stderr itself, as before; a copy of each JSON line (carrying `"worker": <i>`, the
// worker logger's base field) goes to this forwarder instead of a ring of its own. The forwarder
// batches them and sends a batch over the cluster IPC channel at most every FLUSH_MS, one batch in
// flight at a time: while the primary has not taken the last one (its channel is full, it is busy),
// lines wait here up to MAX_LINES lines or MAX_BYTES bytes, and the lines past that are dropped and
// counted, never queued — a log flood in a worker can neither grow a queue without end nor block the
// worker, and a flooding worker sends the primary at most MAX_LINES lines per FLUSH_MS. The primary
// holds at most one batch per worker besides its fixed-size ring, and logs how many lines a worker
// dropped (at the first drop, then at a drop DROP_NOTICE_MS or more after its last notice, with the
// count since).
import type { LogLines, LogRing } from '../log/index.ts';
import type { Log } from '../log/log.ts';
import type { IpcEvent } from './worker-channel.ts';

/** A batch is sent at most this often. */
export const FLUSH_MS = 50;
/** Lines waiting for the next batch, at most (the primary's default ring holds 1000). */
export const MAX_LINES = 1000;
/** Bytes waiting for the next batch, at most. */
export const MAX_BYTES = 512 * 1024;
/** The primary says a worker's lines were dropped at most this often. */
const DROP_NOTICE_MS = 10_000;

/** One batch on the channel: the lines (JSON, as the logger wrote them), and how many were dropped before them. */
export interface LogBatch { lines: Array<string | Uint8Array>; dropped: number }

/** Sends one batch; `done` once it has left this process (the channel took it) or could not. */
export type SendBatch = (batch: LogBatch, done: () => void) => void;

/** Over the worker's IPC channel (the primary's WorkerChannel gets it as the event `logs`). */
export const sendToPrimary: SendBatch = (batch, done) => {
  if (!process.connected) {
    done();
    return;
  }
  try {
    process.send!({ kind: 'proxy:evt', op: 'logs', body: batch } satisfies IpcEvent, undefined, {}, () => done());
  } catch {
    done();
  }
};

/** The worker's end: the LogLines its logger copies each line to. */
export class WorkerLogForwarder implements LogLines {
  private readonly send: SendBatch;
  private pending: Array<string | Uint8Array> = [];
  private bytes = 0;
  private dropped = 0;
  private inFlight = false;
  private timer: NodeJS.Timeout | null = null;
  private readonly flushBound = () => this.flush();
  private readonly sentBound = () => this.sent();

  constructor(send: SendBatch = sendToPrimary) {
    this.send = send;
  }

  push(line: string | Uint8Array): void {
    const n = typeof line === 'string' ? line.length : line.byteLength;
    if (this.pending.length >= MAX_LINES || this.bytes + n > MAX_BYTES) {
      this.dropped++;
      return;
    }
    this.pending.push(line);
    this.bytes += n;
    if (this.timer === null && !this.inFlight) {
      this.timer = setTimeout(this.flushBound, FLUSH_MS);
      this.timer.unref();
    }
  }

  /** Lines waiting now (for tests and the drain). */
  get waiting(): number {
    return this.pending.length;
  }

  /** Sends what waits now, unless a batch is still on its way (then it goes when that one has left). */
  flush(): void {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    if (this.inFlight || (this.pending.length === 0 && this.dropped === 0)) return;
    const batch: LogBatch = { lines: this.pending, dropped: this.dropped };
    this.pending = [];
    this.bytes = 0;
    this.dropped = 0;
    this.inFlight = true;
    this.send(batch, this.sentBound);
  }

  private sent(): void {
    this.inFlight = false;
    if ((this.pending.length > 0 || this.dropped > 0) && this.timer === null) {
      this.timer = setTimeout(this.flushBound, FLUSH_MS);
      this.timer.unref();
    }
  }
}

/** The primary's end: puts worker `index`'s batches into `ring` and says, now and then, how many lines it dropped. */
export class WorkerLogReceiver {
  private readonly ring: LogRing;
  private readonly log: Pick<Log, 'warn'>;
  private readonly dropped = new Map<number, { count: number; noticed: number }>();

  constructor(ring: LogRing, log: Pick<Log, 'warn'>) {
    this.ring = ring;
    this.log = log;
  }

  accept(index: number, batch: LogBatch): void {
    for (const line of batch.lines) this.ring.push(line);
    if (batch.dropped === 0) return;
    let d = this.dropped.get(index);
    if (d === undefined) this.dropped.set(index, d = { count: 0, noticed: 0 });
    d.count += batch.dropped;
    const now = Date.now();
    if (now - d.noticed < DROP_NOTICE_MS) return;
    this.log.warn('a worker wrote log lines faster than they reach the primary: lines left out of proxy logs (they are on its stderr)',
      { worker: index, dropped: d.count });
    d.count = 0;
    d.noticed = now;
  }
}
