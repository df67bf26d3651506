// One request's state as it travels through the pipeline. Every field is initialised in the
// constructor so all exchanges share one hidden class. A client connection keeps one and reset()s
// it per request (its requests run one at a time), so a request allocates no exchange; `serial`
// tells its requests apart (a plugin's per-request context is keyed by it, not by the object).
import { foldSequences, ElementCursor, BSON_DOCUMENT, utf8, type DocSequence } from '../wire/index.ts';
import { Phase, type HostExchange } from '../wasm/index.ts';
import type { RequestTimings } from './request-timings.ts';

export const enum Verdict { Continue = 0, Reject = 1, LocalReply = 2 }

export interface ConnectionInfo { readonly id: number; appName: string; clientAddress: string; user: string }

export class Exchange implements HostExchange {
  readonly conn: ConnectionInfo;
  /** Unique per request in this process (a new one per constructor call and per reset()). */
  serial: number;
  pipelineId: string;
  op: string;
  db: string;
  collection: string;
  requestBody: Uint8Array;
  sequences: DocSequence[] | null;
  /** Client request id (set by the server; property `request_id`). */
  requestId: number;
  phase: Phase;
  verdict: Verdict;
  rejectCode: number;
  rejectCodeName: string;
  rejectMessage: string;
  localReply: Uint8Array | null;
  newRequest: Uint8Array | null;
  replyBody: Uint8Array | null;
  newReply: Uint8Array | null;
  route: string | null;
  startedAt: number;
  /** The request's timings while the profiler records it (set by the connection); null otherwise. */
  timings: RequestTimings | null;
  private folded: Uint8Array | null;
  /** The reply the cached status below was read from (statusOk -1: none read yet). */
  private statusOf: Uint8Array | null;
  private statusOk: number;
  private statusCode: number;

  /** `startedAt`: performance.now() when the proxy read the request off the socket (elapsed_ns counts from it). */
  constructor(conn: ConnectionInfo, pipelineId: string, op: string, db: string, collection: string,
    requestBody: Uint8Array, sequences: DocSequence[] | null, startedAt = performance.now()) {
    this.conn = conn;
    this.serial = ++lastSerial;
    this.pipelineId = pipelineId;
    this.op = op;
    this.db = db;
    this.collection = collection;
    this.requestBody = requestBody;
    this.sequences = sequences;
    this.requestId = 0;
    this.phase = Phase.Request;
    this.verdict = Verdict.Continue;
    this.rejectCode = 0;
    this.rejectCodeName = '';
    this.rejectMessage = '';
    this.localReply = null;
    this.newRequest = null;
    this.replyBody = null;
    this.newReply = null;
    this.route = null;
    this.startedAt = startedAt;
    this.timings = null;
    this.folded = null;
    this.statusOf = null;
    this.statusOk = -1;
    this.statusCode = 0;
  }

  /** Makes this the exchange of a new request (the constructor's arguments, conn aside). The
   *  constructor assigns the same fields itself rather than calling this, so V8 sees each field's
   *  first value there (startedAt a float from the start, not undefined first). */
  reset(pipelineId: string, op: string, db: string, collection: string, requestBody: Uint8Array, sequences: DocSequence[] | null,
    startedAt: number): void {
    this.serial = ++lastSerial;
    this.pipelineId = pipelineId;
    this.op = op;
    this.db = db;
    this.collection = collection;
    this.requestBody = requestBody;
    this.sequences = sequences;
    this.requestId = 0;
    this.phase = Phase.Request;
    this.verdict = Verdict.Continue;
    this.rejectCode = 0;
    this.rejectCodeName = '';
    this.rejectMessage = '';
    this.localReply = null;
    this.newRequest = null;
    this.replyBody = null;
    this.newReply = null;
    this.route = null;
    this.startedAt = startedAt;
    this.timings = null;
    this.folded = null;
    this.statusOf = null;
    this.statusOk = -1;
    this.statusCode = 0;
  }

  /** The command document a plugin sees: a replacement if a step set one, else the body with
   *  document sequences folded in — computed on first use, at most once. */
  requestDocument(): Uint8Array {
    if (this.newRequest !== null) return this.newRequest;
    let f = this.folded;
    if (f === null) {
      f = this.sequences === null ? this.requestBody : foldSequences(this.requestBody, this.sequences);
      this.folded = f;
    }
    return f;
  }

  replyOk(): number {
    this.readStatus();
    return this.statusOk;
  }

  replyCode(): number {
    this.readStatus();
    return this.statusCode;
  }

  /**
   * `reply`'s `ok` and `code` as the connection already read them (its reply peek, while it records
   * the request or counts it for a canary): reply_ok and reply_code then read the reply no second
   * time. Holds until a step replaces the reply.
   */
  knownStatus(reply: Uint8Array, ok: boolean, code: number): void {
    this.statusOf = reply;
    this.statusOk = ok ? 1 : 0;
    this.statusCode = Number.isFinite(code) ? code : 0;
  }

  /** Peeks `ok` and `code` of the reply the response steps see now (a step may have replaced it). */
  private readStatus(): void {
    const reply = this.newReply ?? this.replyBody ?? this.localReply;
    if (reply === this.statusOf) return;
    this.statusOf = reply;
    this.statusOk = -1;
    this.statusCode = 0;
    if (reply === null) return;
    this.statusOk = 0;
    const cur = statusCursor;
    try {
      const buf = reply instanceof Buffer ? reply : Buffer.from(reply.buffer, reply.byteOffset, reply.byteLength);
      cur.open(buf, 0);
      while (cur.next()) {
        if (cur.type === BSON_DOCUMENT) continue;
        if (cur.nameIs(K_OK)) this.statusOk = cur.number() === 1 ? 1 : 0;
        else if (cur.nameIs(K_CODE)) { const c = cur.number(); this.statusCode = Number.isFinite(c) ? c : 0; }
      }
    } catch {
      // a malformed reply: not ok
    }
  }
}

/** The last serial handed out (2^53 requests before it repeats). */
let lastSerial = 0;
const statusCursor = new ElementCursor();
const K_OK = utf8('ok');
const K_CODE = utf8('code');
