// One load-generating connection: a closed loop of one request in flight at a time (as drivers
// do per connection). The object is its own frame sink and socket listener target, so the loop
// allocates no closures per request; the send path patches 4 bytes and writes a pre-built buffer.
import { connect, type Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import type { Histogram } from 'hdr-histogram-js';
import { Framer, HEADER_SIZE, OP_MSG, ReplyPeek, WireError, parseOpMsg, type FrameSink } from '../wire/index.ts';
import { formatHostPort } from '../config/index.ts';
import { BenchError } from './errors.ts';

/** Shared by all connections of a run (one thread, so plain counters suffice). */
export class RunTally {
  requests = 0;
  errors = 0;
  readonly histogram: Histogram;
  constructor(histogram: Histogram) {
    this.histogram = histogram;
  }
}

const enum Phase { Connecting = 0, Command = 1, Loop = 2, Done = 3 }

let nextRequestId = 1;

export class BenchConnection implements FrameSink {
  private readonly socket: Socket;
  private readonly framer: Framer;
  private readonly peek = new ReplyPeek();
  private phase: Phase = Phase.Connecting;
  private frames: Buffer[] = [];
  private cursor = 0;
  private inFlight = 0;
  private sentAt = 0;
  private deadline = 0;
  private tally: RunTally | null = null;
  private settle: ((value: Buffer) => void) | null = null;
  private fail: ((err: Error) => void) | null = null;
  private failure: Error | null = null;

  private constructor(socket: Socket) {
    this.socket = socket;
    this.framer = new Framer(this);
    socket.setNoDelay(true);
    socket.on('data', (chunk: Buffer) => this.framer.push(chunk));
    socket.on('error', (err: Error) => this.abort(new BenchError('PROXY_ERR_BENCH_CONNECT', `connection error: ${err.message}`, { cause: err })));
    socket.on('close', () => this.abort(new BenchError('PROXY_ERR_BENCH_CONNECT', 'connection closed by the target')));
  }

  static open(host: string, port: number, timeoutMs: number): Promise<BenchConnection> {
    return new Promise((resolve, reject) => {
      const socket = connect({ host, port });
      const timer = setTimeout(() => {
        socket.destroy();
        reject(new BenchError('PROXY_ERR_BENCH_CONNECT', `cannot connect to ${formatHostPort(host, port)} within ${timeoutMs} ms`));
      }, timeoutMs);
      socket.once('connect', () => {
        clearTimeout(timer);
        socket.removeAllListeners('error');
        resolve(new BenchConnection(socket));
      });
      socket.once('error', (err) => {
        clearTimeout(timer);
        reject(new BenchError('PROXY_ERR_BENCH_CONNECT', `cannot connect to ${formatHostPort(host, port)}: ${err.message}`, { cause: err }));
      });
    });
  }

  /** Sends one command outside the measured loop (handshake, seeding) and returns its reply body. */
  command(frame: Buffer): Promise<Buffer> {
    if (this.failure !== null) return Promise.reject(this.failure);
    this.phase = Phase.Command;
    return new Promise((resolve, reject) => {
      this.settle = resolve;
      this.fail = reject;
      this.inFlight = nextRequestId++;
      frame.writeInt32LE(this.inFlight, 4);
      this.socket.write(frame);
    });
  }

  /** Runs the closed loop until `deadline` (performance.now() ms); resolves after the last reply. */
  loop(frames: Buffer[], tally: RunTally, deadline: number): Promise<void> {
    if (this.failure !== null) return Promise.reject(this.failure);
    this.frames = frames;
    this.tally = tally;
    this.deadline = deadline;
    this.phase = Phase.Loop;
    return new Promise<void>((resolve, reject) => {
      this.settle = () => resolve();
      this.fail = reject;
      this.sendNext();
    });
  }

  close(): void {
    this.phase = Phase.Done;
    this.socket.removeAllListeners('close');
    this.socket.on('error', () => {});
    this.socket.destroy();
  }

  private sendNext(): void {
    const frame = this.frames[this.cursor];
    this.cursor = this.cursor + 1 === this.frames.length ? 0 : this.cursor + 1;
    this.inFlight = nextRequestId++;
    if (nextRequestId > 0x7fffffff) nextRequestId = 1;
    frame.writeInt32LE(this.inFlight, 4);
    this.sentAt = performance.now();
    this.socket.write(frame);
  }

  onFrame(frame: Buffer): void {
    const now = performance.now();
    if (frame.length < HEADER_SIZE || frame.readInt32LE(8) !== this.inFlight) {
      this.abort(new BenchError('PROXY_ERR_BENCH_PROTOCOL',
        `reply responseTo ${frame.length >= 12 ? frame.readInt32LE(8) : '?'} does not match the request in flight (${this.inFlight})`));
      return;
    }
    if (frame.readInt32LE(12) !== OP_MSG) {
      this.abort(new BenchError('PROXY_ERR_BENCH_PROTOCOL', `reply opcode ${frame.readInt32LE(12)} is not OP_MSG`));
      return;
    }
    let body: Buffer;
    try {
      body = parseOpMsg(frame).body;
    } catch (err) {
      this.abort(new BenchError('PROXY_ERR_BENCH_PROTOCOL', `unparseable reply: ${(err as Error).message}`, { cause: err }));
      return;
    }
    if (this.phase === Phase.Command) {
      const settle = this.settle!;
      this.settle = null;
      this.fail = null;
      settle(body);
      return;
    }
    if (this.phase !== Phase.Loop) return;
    const tally = this.tally!;
    tally.requests++;
    let us = Math.round((now - this.sentAt) * 1000);
    if (us < 1) us = 1;
    tally.histogram.recordValue(us);
    if (!this.peek.read(body).ok || this.peek.hasWriteErrors) tally.errors++;
    if (now < this.deadline) {
      this.sendNext();
      return;
    }
    this.phase = Phase.Done;
    const settle = this.settle!;
    this.settle = null;
    this.fail = null;
    settle(body);
  }

  onFrameError(err: WireError): void {
    this.abort(new BenchError('PROXY_ERR_BENCH_PROTOCOL', `unframeable reply stream: ${err.message}`, { cause: err }));
  }

  private abort(err: Error): void {
    if (this.failure !== null) return;
    this.failure = err;
    const fail = this.fail;
    this.settle = null;
    this.fail = null;
    if (this.phase !== Phase.Done) this.socket.destroy();
    if (fail !== null) fail(err);
  }
}
