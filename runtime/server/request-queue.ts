// A client connection's intake: the requests read off its socket and not started yet, in arrival
// order, each with when it was read; and the reading side of backpressure. Reading stops while
// the client's unread replies are over their bound (ReplyWriter.blocked) or too many of its
// requests, or too many bytes of them, are queued (clients.max_queued_requests,
// clients.max_queued_request_bytes), and resumes when none holds (the queue with hysteresis: at
// or below half of both bounds). A request is always queued whole, so the queue holds at most its
// byte bound plus one request: without the byte bound, 64 pipelined requests of 48 MB each held
// 3 GB. A client that pipelines without reading thus costs at most the queue bounds plus the
// reply bound.
import type { Socket } from 'node:net';

export class RequestQueue {
  /** Reading is paused. */
  paused = false;
  /** When the last request was read (performance.now()). */
  lastReadAt = 0;
  /** When the request shift() returned last was read (performance.now()). */
  readAt = 0;
  private readonly frames: Buffer[] = [];
  private readonly readAts: number[] = [];
  private readonly max: number;
  private readonly maxBytes: number;
  private readonly socket: Socket;
  /** Bytes of the requests queued. */
  private queuedBytes = 0;

  constructor(socket: Socket, maxQueued: number, maxQueuedBytes = Number.MAX_SAFE_INTEGER) {
    this.socket = socket;
    this.max = maxQueued;
    this.maxBytes = maxQueuedBytes;
  }

  /** Bytes of the requests queued. */
  get bytes(): number {
    return this.queuedBytes;
  }

  get length(): number {
    return this.frames.length;
  }

  /** Queues `frame`, read at `now`. True when that puts the queue over its bound (reading must stop). */
  push(frame: Buffer, now: number): boolean {
    this.lastReadAt = now;
    this.frames.push(frame);
    this.readAts.push(now);
    this.queuedBytes += frame.length;
    return this.frames.length > this.max || this.queuedBytes > this.maxBytes;
  }

  /** The oldest request (the queue is not empty); `readAt` is when it was read. */
  shift(): Buffer {
    this.readAt = this.readAts.shift()!;
    const frame = this.frames.shift()!;
    this.queuedBytes -= frame.length;
    return frame;
  }

  clear(): void {
    this.frames.length = 0;
    this.readAts.length = 0;
    this.queuedBytes = 0;
  }

  /**
   * Draining with nothing queued: reading resumes if it was paused, so that what the client has
   * already written is read (and answered) rather than left unread; as that counts as reading,
   * the connection's quiet time starts `now`.
   */
  resumeToDrain(now: number): void {
    if (!this.paused) return;
    this.paused = false;
    this.lastReadAt = now;
    this.socket.resume();
  }

  /** Pauses or resumes reading; `blocked`: the client's unread replies are over their bound. */
  updateReading(blocked: boolean): void {
    const stop = blocked || this.frames.length > this.max || this.queuedBytes > this.maxBytes;
    if (stop) {
      if (!this.paused) {
        this.paused = true;
        this.socket.pause();
      }
    } else if (this.paused && this.frames.length <= this.max >> 1 && this.queuedBytes <= this.maxBytes / 2) {
      this.paused = false;
      this.socket.resume();
    }
  }
}
