// Sampled requests whose spans are not written yet: the http/protobuf path of tracing (tracing.ts)
// copies what a sampled request's spans need here when the request ends, and writes the spans of
// every pending request in one pass later (span-writer.ts, the same bytes as when they were written
// at the request's end) — just before an export, on the event loop's turn after the one in which
// max_batch_spans spans came to be queued, and at flush and shutdown (span-queue.ts
// EncodedSpanQueue drives it).
//
// Why: at sample_rate 0.01 about a hundred ordinary requests run between two sampled ones, so the
// span writer's code and data were cold at every sampled request (evicted from the CPU caches, and
// not run often enough for V8 to optimize it): a sampled request cost many times more in the
// running proxy than in a hot loop. Here a sampled request's end is a few copies into arrays, and
// the writer runs over many requests at once, warm for all but the first.
//
// The copy is needed: the connection reuses its RequestTimings and its reply peek for its next
// request. Nothing is made per request: the requests' numbers, strings and timers go into typed
// arrays and reference arrays with a fixed stride, grown (doubled) when full and kept after; the
// steps and sub-operations of all pending requests are packed one after the other. Ids are not
// drawn here: the writer draws them when it writes, in the requests' order, as it did at each
// request's end (no id leaves the proxy before its spans are exported).
import { RequestTimings, type StepTimer, type Variant } from '../pipeline/index.ts';
import type { TraceParent } from './traceparent.ts';
import type { TracedRequest, UpstreamReply } from './tracing.ts';

// Per request: its times (Float64Array), its counts and codes (Int32Array), its strings.
const T_READ = 0;
const T_END = 1;
const T_REQUEST_PHASE = 2;
const T_RESPONSE_PHASE = 3;
const T_UP_STARTED = 4;
const T_UP_ACQUIRED = 5;
const T_UP_WRITTEN = 6;
const T_UP_REPLIED = 7;
const TIMES = 8;
const I_STEP_FROM = 0;
const I_STEPS = 1;
const I_SUB_FROM = 2;
const I_SUBS = 3;
const I_REJECTED_AT = 4;
const I_ERROR_CODE = 5;
const I_REPLY_CODE = 6;
const I_FLAGS = 7;
const I_SPANS = 8;
const INTS = 9;
const S_PIPELINE = 0;
const S_VARIANT = 1;
const S_OP = 2;
const S_DB = 3;
const S_COLLECTION = 4;
const S_UPSTREAM = 5;
const S_ERROR_NAME = 6;
const S_REPLY_NAME = 7;
const STRINGS = 8;
const FLAG_OK = 1;
const FLAG_REPLY_FAILED = 2;

/** Held in emptied timer slots, so a written request's graph is not kept alive by the store. */
const NO_TIMER: StepTimer = { step: '', phase: 0, record() {}, subop() {} };

/** A pending request read back for the writer: one per store, refilled per request (a TracedRequest). */
class PendingRequest implements TracedRequest {
  parent: TraceParent | null = null;
  pipelineId = '';
  variant: Variant = 'baseline';
  op = '';
  db = '';
  collection = '';
  readAt = 0;
  endAt = 0;
  requestPhaseAt = -1;
  responsePhaseAt = -1;
  upstreamStartedAt = 0;
  upstreamAcquiredAt = 0;
  upstreamWrittenAt = 0;
  upstreamRepliedAt = 0;
  upstream = '';
  ok = true;
  errorCode = 0;
  errorName = '';
  readonly reply: { failed: boolean; errorCode: number; errorName: string } = { failed: false, errorCode: 0, errorName: '' };
  readonly timings = new RequestTimings();
}

export class PendingTraces {
  /** Requests pending, and the spans they will make. */
  count = 0;
  spans = 0;
  private times = new Float64Array(64 * TIMES);
  private ints = new Int32Array(64 * INTS);
  private readonly strings: string[] = [];
  private readonly parents: Array<TraceParent | null> = [];
  // The steps and sub-operations of the pending requests, packed in order.
  private steps = 0;
  private readonly timers: StepTimer[] = [];
  private stepNs = new Float64Array(512);
  private stepErrors = new Uint8Array(512);
  private subs = 0;
  /** A sub-operation's step invocation, within its request (as RequestTimings.subOf). */
  private subOf = new Int32Array(512);
  private readonly subNames: string[] = [];
  private subNs = new Float64Array(512);
  private readonly view = new PendingRequest();

  /**
   * The spans `r`'s writing will make: its steps and their sub-operations, proxy.upstream,
   * connection.acquire and the operation when it went upstream, and proxy.request.
   */
  static spansOf(r: TracedRequest): number {
    const t = r.timings;
    let n = 1 + t.count;
    for (let j = 0; j < t.subCount && t.subOf[j] < t.count; j++) n++;
    if (r.upstreamStartedAt > 0) n += r.upstreamWrittenAt > 0 ? 3 : 2;
    return n;
  }

  /** Copies `r` (`spans`: spansOf(r)) to the end of the store. */
  add(r: TracedRequest, spans: number): void {
    const i = this.count++;
    if (this.count * INTS > this.ints.length) this.growRequests();
    const t = r.timings;
    const times = this.times;
    const tb = i * TIMES;
    times[tb + T_READ] = r.readAt;
    times[tb + T_END] = r.endAt;
    times[tb + T_REQUEST_PHASE] = r.requestPhaseAt;
    times[tb + T_RESPONSE_PHASE] = r.responsePhaseAt;
    times[tb + T_UP_STARTED] = r.upstreamStartedAt;
    times[tb + T_UP_ACQUIRED] = r.upstreamAcquiredAt;
    times[tb + T_UP_WRITTEN] = r.upstreamWrittenAt;
    times[tb + T_UP_REPLIED] = r.upstreamRepliedAt;
    // The reply is read only when there was one (the connection's peek holds an older reply otherwise).
    const replied = r.upstreamRepliedAt > 0;
    const reply: UpstreamReply = r.reply;
    const ints = this.ints;
    const ib = i * INTS;
    ints[ib + I_ERROR_CODE] = r.errorCode;
    ints[ib + I_REPLY_CODE] = replied ? reply.errorCode : 0;
    ints[ib + I_FLAGS] = (r.ok ? FLAG_OK : 0) | (replied && reply.failed ? FLAG_REPLY_FAILED : 0);
    ints[ib + I_REJECTED_AT] = t.rejectedAt;
    ints[ib + I_SPANS] = spans;
    const s = this.strings;
    const sb = i * STRINGS;
    s[sb + S_PIPELINE] = r.pipelineId;
    s[sb + S_VARIANT] = r.variant;
    s[sb + S_OP] = r.op;
    s[sb + S_DB] = r.db;
    s[sb + S_COLLECTION] = r.collection;
    s[sb + S_UPSTREAM] = r.upstream;
    s[sb + S_ERROR_NAME] = r.errorName;
    s[sb + S_REPLY_NAME] = replied ? reply.errorName : '';
    this.parents[i] = r.parent;

    const steps = t.count;
    const from = this.steps;
    if (from + steps > this.stepNs.length) this.growSteps(from + steps);
    const timers = this.timers;
    const ns = this.stepNs;
    const errors = this.stepErrors;
    for (let k = 0; k < steps; k++) {
      timers[from + k] = t.timers[k];
      ns[from + k] = t.ns[k];
      errors[from + k] = t.errors[k] ? 1 : 0;
    }
    this.steps = from + steps;
    ints[ib + I_STEP_FROM] = from;
    ints[ib + I_STEPS] = steps;
    // Sub-operations of a step that recorded no invocation (subOf = count) make no span: not kept.
    let subs = 0;
    while (subs < t.subCount && t.subOf[subs] < steps) subs++;
    const subFrom = this.subs;
    if (subFrom + subs > this.subNs.length) this.growSubs(subFrom + subs);
    const subOf = this.subOf;
    const names = this.subNames;
    const subNs = this.subNs;
    for (let k = 0; k < subs; k++) {
      subOf[subFrom + k] = t.subOf[k];
      names[subFrom + k] = t.subNames[k];
      subNs[subFrom + k] = t.subNs[k];
    }
    this.subs = subFrom + subs;
    ints[ib + I_SUB_FROM] = subFrom;
    ints[ib + I_SUBS] = subs;
    this.spans += spans;
  }

  /** The spans pending request `i` makes (as given to add()). */
  spansAt(i: number): number {
    return this.ints[i * INTS + I_SPANS];
  }

  /** Pending request `i` as a TracedRequest: valid until the next read(). */
  read(i: number): TracedRequest {
    const v = this.view;
    const times = this.times;
    const tb = i * TIMES;
    v.readAt = times[tb + T_READ];
    v.endAt = times[tb + T_END];
    v.requestPhaseAt = times[tb + T_REQUEST_PHASE];
    v.responsePhaseAt = times[tb + T_RESPONSE_PHASE];
    v.upstreamStartedAt = times[tb + T_UP_STARTED];
    v.upstreamAcquiredAt = times[tb + T_UP_ACQUIRED];
    v.upstreamWrittenAt = times[tb + T_UP_WRITTEN];
    v.upstreamRepliedAt = times[tb + T_UP_REPLIED];
    const ints = this.ints;
    const ib = i * INTS;
    const flags = ints[ib + I_FLAGS];
    v.ok = (flags & FLAG_OK) !== 0;
    v.errorCode = ints[ib + I_ERROR_CODE];
    v.reply.failed = (flags & FLAG_REPLY_FAILED) !== 0;
    v.reply.errorCode = ints[ib + I_REPLY_CODE];
    const s = this.strings;
    const sb = i * STRINGS;
    v.pipelineId = s[sb + S_PIPELINE];
    v.variant = s[sb + S_VARIANT] as Variant;
    v.op = s[sb + S_OP];
    v.db = s[sb + S_DB];
    v.collection = s[sb + S_COLLECTION];
    v.upstream = s[sb + S_UPSTREAM];
    v.errorName = s[sb + S_ERROR_NAME];
    v.reply.errorName = s[sb + S_REPLY_NAME];
    v.parent = this.parents[i];

    const t = v.timings;
    const from = ints[ib + I_STEP_FROM];
    const steps = ints[ib + I_STEPS];
    for (let k = 0; k < steps; k++) {
      t.timers[k] = this.timers[from + k];
      t.ns[k] = this.stepNs[from + k];
      t.errors[k] = this.stepErrors[from + k] === 1;
    }
    t.count = steps;
    const subFrom = ints[ib + I_SUB_FROM];
    const subs = ints[ib + I_SUBS];
    for (let k = 0; k < subs; k++) {
      t.subOf[k] = this.subOf[subFrom + k];
      t.subNames[k] = this.subNames[subFrom + k];
      t.subNs[k] = this.subNs[subFrom + k];
    }
    t.subCount = subs;
    t.rejectedAt = ints[ib + I_REJECTED_AT];
    return v;
  }

  /** Empties the store (after its requests were written, or to drop them); keeps its arrays. */
  clear(): void {
    // Let go of the requests' timers and trace contexts (their graphs may be gone by now).
    for (let k = 0; k < this.steps; k++) this.timers[k] = NO_TIMER;
    for (let i = 0; i < this.count; i++) this.parents[i] = null;
    const t = this.view.timings;
    for (let k = 0; k < t.count; k++) t.timers[k] = NO_TIMER;
    this.view.parent = null;
    this.count = 0;
    this.spans = 0;
    this.steps = 0;
    this.subs = 0;
  }

  private growRequests(): void {
    this.times = grown(this.times, this.times.length * 2);
    this.ints = grown(this.ints, this.ints.length * 2);
  }

  private growSteps(need: number): void {
    const size = doubledTo(this.stepNs.length, need);
    this.stepNs = grown(this.stepNs, size);
    this.stepErrors = grown(this.stepErrors, size);
  }

  private growSubs(need: number): void {
    const size = doubledTo(this.subNs.length, need);
    this.subOf = grown(this.subOf, size);
    this.subNs = grown(this.subNs, size);
  }
}

/** `size` doubled until it holds `need`. */
function doubledTo(size: number, need: number): number {
  size *= 2;
  while (size < need) size *= 2;
  return size;
}

type Grown = Float64Array | Int32Array | Uint8Array;

/** A copy of `a` with room for `size` elements. */
function grown<T extends Grown>(a: T, size: number): T {
  const b = new (a.constructor as new (n: number) => T)(size);
  b.set(a);
  return b;
}
