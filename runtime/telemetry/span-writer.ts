// A traced request's spans written straight into OTLP/protobuf `Span` messages (the entries of
// ScopeSpans.spans), with no span or attribute object in between: the http/protobuf path of
// tracing (tracing.ts). The spans, their ids, times, attributes, statuses and order are the ones
// Tracing.record() builds as ReadableSpans for the http/json exporter, and the bytes are the SDK
// serializer's for those spans (test/telemetry/span-writer.test.ts compares them, byte for byte).
//
// Why: at sample_rate 0.01 the proxy traces one request in a hundred, so this code is cold, and in
// the running proxy a sampled request cost ~110 µs in building ~14 ReadableSpans with their
// attribute objects and ~50 µs more in encoding them at export (a CPU profile at 4,000 requests/s:
// about 2 µs per request in all, 5% of the proxy's CPU). Here the attribute keys are constant
// bytes, the database attributes every span of a request repeats are encoded once per request and
// copied, ids go from the random pool into the message as bytes, and times are written as the
// nanoseconds they are. The stable OpenTelemetry database names (semconv.ts) are a second block,
// written only when opted in and copied only onto the request and operation spans.
import type { RequestTimings } from '../pipeline/index.ts';
import { phaseName } from '../wasm/index.ts';
import { HEX_PAIR, ProtoBuffer, varintSize } from './proto-buffer.ts';
import type { IdSource } from './ids.ts';
import { StepLayout } from './step-layout.ts';
import type { TracedRequest } from './tracing.ts';

/** OTLP Span.kind (the API's SpanKind + 1). */
const KIND_INTERNAL = 1;
const KIND_SERVER = 2;
const KIND_CLIENT = 3;
/** Status.code: UNSET and ERROR. */
const UNSET = 0;
const ERROR = 2;
/** Span.flags: the W3C sampled flag, has-is-remote, is-remote. */
const FLAGS_LOCAL = 0x101;
const FLAGS_REMOTE_PARENT = 0x301;
/** Span.attributes (9), and the tag of one KeyValue in a list of its own (Resource.attributes). */
export const SPAN_ATTRIBUTE = 0x4a;
const INT64 = 2 ** 63;

/** A KeyValue's key field and its value's tag: 0x0a, key length (a varint), key, 0x12. */
function key(k: string): Uint8Array {
  const b = Buffer.from(k, 'utf8');
  const len: number[] = [];
  for (let v = b.length; ; v >>>= 7) {
    if (v < 0x80) {
      len.push(v);
      break;
    }
    len.push((v & 0x7f) | 0x80);
  }
  return Uint8Array.from([0x0a, ...len, ...b, 0x12]);
}

const K = {
  dbSystem: key('db.system'), dbOperation: key('db.operation'), dbSystemName: key('db.system.name'), dbOperationName: key('db.operation.name'),
  dbNamespace: key('db.namespace'), pipelineId: key('proxy.pipeline.id'), pipeline: key('proxy.pipeline'),
  upstreamCollection: key('db.upstream.collection'), collectionName: key('db.collection.name'),
  peerName: key('net.peer.name'), peerPort: key('net.peer.port'), serverAddress: key('server.address'), serverPort: key('server.port'),
  stepName: key('proxy.step.name'), stepPhase: key('proxy.step.phase'), stepDuration: key('proxy.step.duration_us'), stepError: key('proxy.step.error'),
  stepOrder: key('proxy.step.order'), subopDuration: key('proxy.subop.duration_us'), requestDuration: key('proxy.request.duration_us'),
  statusCode: key('db.response.status_code'), errorType: key('error.type'),
};

/** The bytes of an integer as the SDK's writeVarint writes it (negative: int64 two's complement, 10 bytes). */
function int64VarintSize(v: number): number {
  if (v < 0) return 10;
  let n = 1;
  while (v >= 0x80) {
    v = Math.floor(v / 0x80);
    n++;
  }
  return n;
}

/** The UTF-8 length of `s`. */
function utf8Length(s: string): number {
  for (let i = 0; i < s.length; i++) if (s.charCodeAt(i) > 0x7f) return Buffer.byteLength(s, 'utf8');
  return s.length;
}

/** Writes KeyValues: the attribute primitives of SpanWriter and of the per-request block. */
class KeyValues extends ProtoBuffer {
  /** A string field: length and UTF-8 bytes, `len` known. */
  private utf8(s: string, len: number): void {
    this.ensure(5 + len);
    const at = this.uvarintAt(this.pos, len);
    if (len === s.length) {
      const buf = this.buf;
      for (let i = 0; i < len; i++) buf[at + i] = s.charCodeAt(i);
      this.pos = at + len;
    } else {
      this.pos = at + this.buf.write(s, at, len, 'utf8');
    }
  }

  private keyValueHead(tag: number, k: Uint8Array, anyLen: number): void {
    this.ensure(16 + k.length);
    const buf = this.buf;
    buf[this.pos] = tag;
    let p = this.uvarintAt(this.pos + 1, k.length + varintSize(anyLen) + anyLen);
    buf.set(k, p);
    p = this.uvarintAt(p + k.length, anyLen);
    this.pos = p;
  }

  kvString(tag: number, k: Uint8Array, value: string): void {
    const len = utf8Length(value);
    this.keyValueHead(tag, k, 1 + varintSize(len) + len);
    this.buf[this.pos++] = 0x0a; // AnyValue.string_value (1)
    this.utf8(value, len);
  }

  kvNumber(tag: number, k: Uint8Array, value: number): void {
    if (Number.isInteger(value) && value >= -INT64 && value < INT64) {
      this.keyValueHead(tag, k, 1 + int64VarintSize(value));
      this.buf[this.pos++] = 0x18; // AnyValue.int_value (3)
      this.varint(value);
      return;
    }
    this.keyValueHead(tag, k, 9);
    this.ensure(9);
    this.buf[this.pos++] = 0x21; // AnyValue.double_value (4, fixed64)
    this.buf.writeDoubleLE(value, this.pos);
    this.pos += 8;
  }

  kvBool(tag: number, k: Uint8Array, value: boolean): void {
    this.keyValueHead(tag, k, 2);
    this.ensure(2);
    this.buf[this.pos++] = 0x10; // AnyValue.bool_value (2)
    this.buf[this.pos++] = value ? 1 : 0;
  }

  /** The bytes written, [0, pos). */
  written(): Uint8Array {
    return this.buf.subarray(0, this.pos);
  }

  reset(): void {
    this.pos = 0;
  }
}

/**
 * The attributes every span of one request carries (the contract's database names and the pipeline),
 * encoded once per request; and, when opted in, the stable OpenTelemetry database names in `stable`
 * (for the request and operation spans). Attributes without a value (no collection, no upstream)
 * are left out.
 */
class RequestBlock extends KeyValues {
  readonly stable = new KeyValues(512);

  write(r: TracedRequest, withStable: boolean): void {
    this.reset();
    const t = SPAN_ATTRIBUTE;
    this.kvString(t, K.dbSystem, 'mongodb');
    this.kvString(t, K.dbOperation, r.op);
    this.kvString(t, K.pipelineId, r.pipelineId);
    this.kvString(t, K.pipeline, r.variant);
    if (r.collection !== '') this.kvString(t, K.upstreamCollection, r.collection);
    let host = '';
    let port = 0;
    if (r.upstream !== '') {
      const i = r.upstream.lastIndexOf(':');
      host = r.upstream.slice(0, i);
      port = Number(r.upstream.slice(i + 1));
      this.kvString(t, K.peerName, host);
      this.kvNumber(t, K.peerPort, port);
    }
    if (!withStable) return;
    const s = this.stable;
    s.reset();
    s.kvString(t, K.dbSystemName, 'mongodb');
    s.kvString(t, K.dbOperationName, r.op);
    s.kvString(t, K.dbNamespace, r.db);
    if (r.collection !== '') s.kvString(t, K.collectionName, r.collection);
    if (r.upstream !== '') {
      s.kvString(t, K.serverAddress, host);
      s.kvNumber(t, K.serverPort, port);
    }
  }
}

/** Writes the spans of traced requests; one per Tracing, reused. */
export class SpanWriter extends KeyValues {
  private readonly ids: IdSource;
  private readonly origin: number;
  private readonly block = new RequestBlock(1024);
  private readonly traceId = new Uint8Array(16);
  private readonly rootId = new Uint8Array(8);
  private readonly stepId = new Uint8Array(8);
  private readonly upId = new Uint8Array(8);
  private readonly remoteParent = new Uint8Array(8);
  private readonly layout = new StepLayout();
  /** The stable database names on the request and operation spans too (semconv.ts). */
  private readonly stableNames: boolean;
  /** Spans written since reset(). */
  spans = 0;

  /** `origin`: performance.timeOrigin (request times are performance.now() ms). */
  constructor(ids: IdSource, origin: number, stableNames: boolean) {
    super(16 * 1024);
    this.ids = ids;
    this.origin = origin;
    this.stableNames = stableNames;
  }

  override reset(): void {
    super.reset();
    this.spans = 0;
  }

  /**
   * Writes the spans of `r` (after what is written): the steps in order, each followed by its
   * sub-operations, then proxy.upstream, connection.acquire and the operation, then the root.
   * `errorType`: the request's failure ('' when it did not fail); `replyErrorType`: the failure
   * its upstream reply reports ('' when none).
   */
  request(r: TracedRequest, errorType: string, replyErrorType: string): void {
    const failed = errorType !== '';
    const parent = r.parent;
    if (parent !== null) {
      hexInto(parent.traceId, this.traceId);
      hexInto(parent.spanId, this.remoteParent);
    } else {
      this.ids.into(this.traceId, 0, 16);
    }
    this.ids.into(this.rootId, 0, 8);
    const block = this.block;
    const stable = this.stableNames;
    block.write(r, stable);
    const t: RequestTimings = r.timings;
    const l = this.layout;
    const a = SPAN_ATTRIBUTE;
    l.start(r);
    while (l.nextStep()) {
      const step = t.timers[l.step].step;
      const s = this.begin(`proxy.step.${l.name}`, KIND_INTERNAL, this.rootId, this.stepId, l.at, l.end);
      this.kvString(a, K.stepName, step);
      this.kvString(a, K.stepPhase, phaseName(t.timers[l.step].phase));
      this.kvNumber(a, K.stepDuration, Math.round(t.ns[l.step] / 1000));
      this.kvBool(a, K.stepError, l.error);
      this.kvNumber(a, K.stepOrder, l.order);
      this.copy(block.written());
      if (l.rejected) this.error(r.errorCode, errorType);
      this.end(s, l.error ? ERROR : UNSET, '', false);
      while (l.nextSubop()) {
        const so = this.begin(t.subNames[l.sub], KIND_INTERNAL, this.stepId, null, l.subAt, l.subEnd);
        this.kvString(a, K.stepName, step);
        this.kvNumber(a, K.subopDuration, Math.round(t.subNs[l.sub] / 1000));
        this.kvString(a, K.pipelineId, r.pipelineId);
        this.kvString(a, K.pipeline, r.variant);
        this.end(so, UNSET, '', false);
      }
    }

    if (r.upstreamStartedAt > 0) {
      const upEnd = r.upstreamRepliedAt > 0 ? r.upstreamRepliedAt : r.endAt;
      const up = this.begin('proxy.upstream', KIND_INTERNAL, this.rootId, this.upId, r.upstreamStartedAt, upEnd);
      this.copy(block.written());
      this.end(up, UNSET, '', false);
      const acquired = r.upstreamAcquiredAt > 0 ? r.upstreamAcquiredAt : upEnd;
      const acq = this.begin('connection.acquire', KIND_INTERNAL, this.upId, null, r.upstreamStartedAt, acquired);
      this.copy(block.written());
      this.end(acq, UNSET, '', false);
      if (r.upstreamWrittenAt > 0) {
        // Failed when its reply reports a failure, or — no reply — when the request failed.
        const replied = r.upstreamRepliedAt > 0;
        const opFailed = replied ? r.reply.failed : failed;
        const op = this.begin(r.collection === '' ? r.op : `${r.op} ${r.collection}`, KIND_CLIENT, this.upId, null, r.upstreamWrittenAt, upEnd);
        this.copy(block.written());
        if (stable) this.copy(block.stable.written());
        if (opFailed) {
          if (replied) this.error(r.reply.errorCode, replyErrorType);
          else this.error(r.errorCode, errorType);
        }
        this.end(op, opFailed ? ERROR : UNSET, '', false);
      }
    }
    const root = this.begin('proxy.request', KIND_SERVER, parent !== null ? this.remoteParent : null, this.rootId, r.readAt, r.endAt, false);
    this.copy(block.written());
    if (stable) this.copy(block.stable.written());
    this.kvNumber(SPAN_ATTRIBUTE, K.requestDuration, Math.round((r.endAt - r.readAt) * 1000));
    if (failed) this.error(r.errorCode, errorType);
    this.end(root, failed ? ERROR : UNSET, errorType, parent !== null);
  }

  /**
   * Opens a span: ScopeSpans.spans tag, room for its length, trace id, its id (drawn into `id`, or
   * `id` as it is when `draw` is false; a fresh id not kept when `id` is null), parent, name, kind
   * and times. Returns where its length goes.
   */
  private begin(name: string, kind: number, parent: Uint8Array | null, id: Uint8Array | null, start: number, end: number, draw = true): number {
    this.ensure(64);
    const buf = this.buf;
    buf[this.pos] = 0x12; // ScopeSpans.spans (2)
    const at = this.pos + 1; // 2 bytes for the length (end())
    let p = at + 2;
    buf[p] = 0x0a; // trace_id (1)
    buf[p + 1] = 16;
    buf.set(this.traceId, p + 2);
    p += 18;
    buf[p] = 0x12; // span_id (2)
    buf[p + 1] = 8;
    if (id === null) this.ids.into(buf, p + 2, 8);
    else {
      if (draw) this.ids.into(id, 0, 8);
      buf.set(id, p + 2);
    }
    p += 10;
    if (parent !== null) {
      buf[p] = 0x22; // parent_span_id (4)
      buf[p + 1] = 8;
      buf.set(parent, p + 2);
      p += 10;
    }
    buf[p] = 0x2a; // name (5)
    this.pos = p + 1;
    this.str(name);
    this.ensure(20);
    this.buf[this.pos] = 0x30; // kind (6)
    this.buf[this.pos + 1] = kind;
    this.buf[this.pos + 2] = 0x39; // start_time_unix_nano (7, fixed64)
    this.pos += 3;
    this.time(start);
    this.buf[this.pos++] = 0x41; // end_time_unix_nano (8, fixed64)
    this.time(end);
    return at;
  }

  /** Closes the span opened at `at`: dropped counts, status, flags, and its length. */
  private end(at: number, code: number, message: string, remoteParent: boolean): void {
    this.ensure(16);
    const buf = this.buf;
    let p = this.pos;
    buf[p] = 0x50; // dropped_attributes_count (10)
    buf[p + 1] = 0;
    buf[p + 2] = 0x60; // dropped_events_count (12)
    buf[p + 3] = 0;
    buf[p + 4] = 0x70; // dropped_links_count (14)
    buf[p + 5] = 0;
    buf[p + 6] = 0x7a; // status (15)
    if (message === '') {
      buf[p + 7] = 2;
      buf[p + 8] = 0x18; // Status.code (3)
      buf[p + 9] = code;
      this.pos = p + 10;
    } else {
      const st = p + 7;
      this.pos = p + 8;
      this.buf[this.pos++] = 0x12; // Status.message (2)
      this.str(message);
      this.ensure(8);
      this.buf[this.pos++] = 0x18;
      this.buf[this.pos++] = code;
      this.close(st, 1);
    }
    this.ensure(6);
    p = this.pos;
    this.buf[p] = 0x85; // flags (16, fixed32)
    this.buf[p + 1] = 0x01;
    this.pos = p + 2;
    this.fixed32(remoteParent ? FLAGS_REMOTE_PARENT : FLAGS_LOCAL);
    this.close(at, 2);
    this.spans++;
  }

  /** A performance.now() time as the ReadableSpan path turns it into an HrTime, then as fixed64 nanoseconds. */
  private time(ms: number): void {
    const t = this.origin + ms;
    const s = Math.floor(t / 1000);
    this.nanos(s, Math.round((t - s * 1000) * 1e6));
  }

  /** The error attributes of a failed span: the code (when there is one) and its type. */
  private error(code: number, type: string): void {
    if (code !== 0) this.kvString(SPAN_ATTRIBUTE, K.statusCode, String(code));
    this.kvString(SPAN_ATTRIBUTE, K.errorType, type);
  }

  private copy(bytes: Uint8Array): void {
    this.ensure(bytes.length);
    this.buf.set(bytes, this.pos);
    this.pos += bytes.length;
  }
}

/** 32 or 16 lowercase hex characters into bytes. */
function hexInto(hex: string, to: Uint8Array): void {
  for (let i = 0; i < to.length; i++) to[i] = HEX_PAIR[(hex.charCodeAt(2 * i) << 7) | hex.charCodeAt(2 * i + 1)];
}

/**
 * The ExportTraceServiceRequest around a batch of encoded spans: one ResourceSpans with the
 * resource (its attributes, dropped count 0) and one ScopeSpans with the scope's name, as the SDK
 * serializer writes them for spans of one resource and one scope.
 */
export class BatchEnvelope {
  private readonly resource: Uint8Array;
  private readonly scope: Uint8Array;

  constructor(resourceAttributes: Readonly<Record<string, unknown>>, scopeName: string) {
    const r = new KeyValues(1024);
    for (const k of Object.keys(resourceAttributes)) {
      const v = resourceAttributes[k];
      if (typeof v === 'string') r.kvString(0x0a, key(k), v); // Resource.attributes (1)
      else if (typeof v === 'number') r.kvNumber(0x0a, key(k), v);
      else if (typeof v === 'boolean') r.kvBool(0x0a, key(k), v);
      else throw new TypeError(`resource attribute ${k}: only strings, numbers and booleans are exported`);
    }
    this.resource = Uint8Array.from([...r.written(), 0x10, 0]); // Resource.dropped_attributes_count (2): 0
    const name = Buffer.from(scopeName, 'utf8');
    if (name.length > 120) throw new TypeError('scope name too long');
    this.scope = Uint8Array.from([0x0a, name.length, ...name]); // InstrumentationScope.name (1)
  }

  /** The whole request for `spans` (ScopeSpans.spans entries): one new array. */
  wrap(spans: Uint8Array): Uint8Array {
    const scopeSpans = 1 + varintSize(this.scope.length) + this.scope.length + spans.length;
    const resourceSpans = 1 + varintSize(this.resource.length) + this.resource.length + 1 + varintSize(scopeSpans) + scopeSpans;
    const out = Buffer.allocUnsafeSlow(1 + varintSize(resourceSpans) + resourceSpans);
    let p = 0;
    const varint = (v: number) => {
      while (v > 0x7f) {
        out[p++] = (v & 0x7f) | 0x80;
        v >>>= 7;
      }
      out[p++] = v;
    };
    out[p++] = 0x0a; // ExportTraceServiceRequest.resource_spans (1)
    varint(resourceSpans);
    out[p++] = 0x0a; // ResourceSpans.resource (1)
    varint(this.resource.length);
    out.set(this.resource, p);
    p += this.resource.length;
    out[p++] = 0x12; // ResourceSpans.scope_spans (2)
    varint(scopeSpans);
    out[p++] = 0x0a; // ScopeSpans.scope (1)
    varint(this.scope.length);
    out.set(this.scope, p);
    p += this.scope.length;
    out.set(spans, p);
    return out;
  }
}
