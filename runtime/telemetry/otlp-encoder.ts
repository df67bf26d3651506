// The OTLP/protobuf encoding of the spans the proxy exports (docs/tracing.md), and the exporter
// that sends it with the SDK's OTLP HTTP transport.
//
// What it encodes: an ExportTraceServiceRequest (opentelemetry-proto collector/trace/v1) from
// ReadableSpans — spans grouped by resource, then by instrumentation scope (both by identity, in
// first-seen order, as the SDK's serializer groups them), each span with its ids, trace state,
// parent, name, kind, times, attributes (strings, numbers — integers in the int64 range as
// int_value, others as double_value —, booleans, byte arrays, arrays and key-value lists), dropped
// counts, status and flags (the W3C trace flags with the has-is-remote and is-remote bits). It
// writes the same fields in the same order as the SDK's ProtobufTraceSerializer
// (@opentelemetry/otlp-transformer 0.223), so the bytes are the same:
// test/telemetry/otlp-encoder.test.ts decodes both field by field and compares them, and the bytes.
//
// Why it exists: at sample_rate 0.01 tracing must cost at most 2% of the proxy's throughput, and
// the SDK's serializer spent ~5 µs encoding each span of ~480 bytes (bench/trace-decision.ts: 9
// spans, ~46 µs, per traced request) — far more than building the spans. This one takes ~1 µs a
// span in the same bench, about a fifth of the SDK's time on the same batches.
//
// How: each batch is written once into a reused scratch buffer and copied into the array
// returned. Attribute keys are encoded once, in a tree of the key sequences attribute objects have
// (so a span's keys are found by comparing interned strings, not by lookups), and a KeyValue whose
// string value is the one last written under that key at that place is copied whole (one
// request's spans repeat their database and pipeline values). ASCII strings are written without a
// UTF-8 encoder call; hex ids are decoded through a table, and a request's trace id and its spans'
// common parent id only once. Nested messages' lengths are written after their content: small
// messages shift by a byte in the rare case their length needs another, and the few outer ones
// leave gaps that the final copy skips.
//
// What falls back: a batch in which any span has events or links (the proxy makes neither) is
// encoded whole by ProtobufTraceSerializer.serializeRequest. Responses are decoded by the SDK's.
//
// The JSON protocol (http/json) is not here: it stays the SDK's exporter.
import type { ReadableSpan, SpanExporter } from '@opentelemetry/sdk-trace-node';
import { ProtobufTraceSerializer, TraceExporterMetricsHelper, type ISerializer, type IExportTraceServiceResponse } from '@opentelemetry/otlp-transformer';
import { OTLPExporterBase, type OTLPExporterNodeConfigBase } from '@opentelemetry/otlp-exporter-base';
import { createOtlpHttpExportDelegate, convertLegacyHttpOptions } from '@opentelemetry/otlp-exporter-base/node-http';
import { ProtoBuffer, toWords, varintSize } from './proto-buffer.ts';

type Resource = ReadableSpan['resource'];
type Scope = ReadableSpan['instrumentationScope'] & { attributes?: Record<string, unknown>; droppedAttributesCount?: number };

/** int64 bounds for int_value (as the SDK: integers outside them are sent as double_value). */
const MIN_INT64 = -(2 ** 63);
const MAX_INT64 = 2 ** 63;
/** Span flags (OTLP): the low 8 bits are the W3C trace flags. */
const FLAGS_HAS_IS_REMOTE = 0x100;
const FLAGS_IS_REMOTE = 0x200;
/** Scratch buffer: its starting size, and the size above which it is let go after a batch. */
const SCRATCH_BYTES = 256 * 1024;
const SCRATCH_KEEP_BYTES = 4 * 1024 * 1024;
/** Nodes in the attribute key tree (ours make a few dozen); keys past it, or of 125+ bytes, are encoded each time. */
const MAX_KEY_NODES = 4096;
/** Bytes reserved for an outer message's length (a uint32 varint at most). */
const OUTER_RESERVE = 5;

/**
 * An attribute key in the tree of key sequences: its children are the keys that followed it in an
 * attribute object. Holds the key's encoding (KeyValue.key and the KeyValue.value tag) and the
 * last string value written under it at this place, with that whole KeyValue's encoding once the
 * value came twice in a row (the attributes of one request's spans repeat their values).
 */
class KeyNode {
  child: KeyNode | null = null;
  sibling: KeyNode | null = null;
  value: string | undefined = undefined;
  /** KeyValue length, key, AnyValue length and AnyValue (toWords()); the tag is the caller's. */
  kv: Uint32Array | null = null;
  constructor(readonly key: string, readonly words: Uint32Array) {}
}

/** An id written last (hex) and its encoded bytes, reused while the same id repeats. */
interface IdMemo { hex: string; words: Uint32Array }

/** Encodes ExportTraceServiceRequests; one instance, reused (its buffer and key cache persist). */
export class OtlpTraceEncoder extends ProtoBuffer {
  constructor() {
    super(SCRATCH_BYTES);
  }

  /** [position, length] pairs of bytes in `buf` that are not part of the message (outer length reserves). */
  private gaps: number[] = [];
  /** Bytes in gaps so far, and its value when each open outer message was opened (their content's gaps are not content). */
  private gapBytes = 0;
  private readonly outerGapBytes: number[] = [];
  /** The attribute keys seen, as a tree of the key sequences attribute objects had (KeyNode). */
  private readonly keyRoot = new KeyNode('', new Uint32Array(1));
  private keyNodes = 0;
  /** The last trace id and the last parent span id written: their hex, and their bytes (toWords()). */
  private readonly lastTrace: IdMemo = { hex: '', words: new Uint32Array(1) };
  private readonly lastParent: IdMemo = { hex: '', words: new Uint32Array(1) };

  /** The request's bytes; a new array the caller owns. */
  encode(spans: readonly ReadableSpan[]): Uint8Array {
    if (spans.length === 0) return new Uint8Array(0);
    const first = spans[0];
    let single = true;
    for (let i = 0; i < spans.length; i++) {
      const s = spans[i];
      if (s.events.length !== 0 || s.links.length !== 0) return ProtobufTraceSerializer.serializeRequest(spans as ReadableSpan[])!;
      if (s.resource !== first.resource || s.instrumentationScope !== first.instrumentationScope) single = false;
    }
    this.pos = 0;
    this.gaps.length = 0;
    this.gapBytes = 0;
    this.outerGapBytes.length = 0;
    try {
      if (single) {
        this.resourceSpans(first.resource, [spans]);
      } else {
        for (const [resource, scopes] of groupSpans(spans)) this.resourceSpans(resource, [...scopes.values()]);
      }
      return this.finish();
    } finally {
      if (this.buf.length > SCRATCH_KEEP_BYTES) this.use(Buffer.allocUnsafe(SCRATCH_BYTES));
    }
  }

  /** Copies the written bytes, without the gaps, into a new array. */
  private finish(): Uint8Array {
    const gaps = this.gaps;
    // Gaps are recorded as their messages close (inner first): put them in position order.
    const order: Array<[number, number]> = [];
    let skipped = 0;
    for (let i = 0; i < gaps.length; i += 2) {
      order.push([gaps[i], gaps[i + 1]]);
      skipped += gaps[i + 1];
    }
    order.sort((a, b) => a[0] - b[0]);
    const out = Buffer.allocUnsafeSlow(this.pos - skipped);
    let from = 0;
    let to = 0;
    for (const [at, len] of order) {
      out.set(this.buf.subarray(from, at), to);
      to += at - from;
      from = at + len;
    }
    out.set(this.buf.subarray(from, this.pos), to);
    return out;
  }

  /** Reserves the bytes for an outer message's length; returns where. */
  private openOuter(): number {
    this.outerGapBytes.push(this.gapBytes);
    return this.open(OUTER_RESERVE);
  }

  /** Closes an outer message opened at `at`: its length ends the reserve, the bytes before it are a gap. */
  private closeOuter(at: number): void {
    const len = this.pos - at - OUTER_RESERVE - (this.gapBytes - this.outerGapBytes.pop()!);
    const size = varintSize(len);
    this.uvarintAt(at + OUTER_RESERVE - size, len);
    if (size < OUTER_RESERVE) {
      this.gaps.push(at, OUTER_RESERVE - size);
      this.gapBytes += OUTER_RESERVE - size;
    }
  }

  private resourceSpans(resource: Resource, scopes: ReadonlyArray<readonly ReadableSpan[]>): void {
    this.byte(0x0a); // ExportTraceServiceRequest.resource_spans (1)
    const rs = this.openOuter();
    this.byte(0x0a); // ResourceSpans.resource (1)
    const r = this.openOuter();
    if (resource.attributes) this.attributes(resource.attributes, 0x0a); // Resource.attributes (1)
    this.byte(0x10); // Resource.dropped_attributes_count (2): 0, as the SDK sends it
    this.byte(0);
    this.closeOuter(r);
    for (const spans of scopes) {
      this.byte(0x12); // ResourceSpans.scope_spans (2)
      const ss = this.openOuter();
      const scope = spans[0].instrumentationScope as Scope;
      this.scope(scope);
      for (let i = 0; i < spans.length; i++) this.span(spans[i]);
      if (scope.schemaUrl) {
        this.byte(0x1a); // ScopeSpans.schema_url (3)
        this.str(scope.schemaUrl);
      }
      this.closeOuter(ss);
    }
    if (resource.schemaUrl) {
      this.byte(0x1a); // ResourceSpans.schema_url (3)
      this.str(resource.schemaUrl);
    }
    this.closeOuter(rs);
  }

  private scope(scope: Scope): void {
    this.byte(0x0a); // ScopeSpans.scope (1)
    const at = this.open(1);
    this.byte(0x0a); // InstrumentationScope.name (1)
    this.str(scope.name);
    if (scope.version) {
      this.byte(0x12); // version (2)
      this.str(scope.version);
    }
    if (scope.attributes) this.attributes(scope.attributes, 0x1a); // attributes (3)
    if (scope.droppedAttributesCount) {
      this.byte(0x20); // dropped_attributes_count (4)
      this.varint(scope.droppedAttributesCount);
    }
    this.close(at, 1);
  }

  /** Writes the id `hex`: the bytes `memo` kept when it is the same id again, else decoded (and kept). */
  private memoId(hex: string, memo: IdMemo): void {
    if (hex === memo.hex) {
      this.words(memo.words);
      return;
    }
    const from = this.pos;
    this.id(hex);
    memo.hex = hex;
    memo.words = this.captureWords(from, this.pos);
  }

  private span(s: ReadableSpan): void {
    this.ensure(4);
    this.buf[this.pos] = 0x12; // ScopeSpans.spans (2)
    const at = this.pos + 1; // 2 bytes for the span's length (close())
    this.buf[at + 2] = 0x0a; // trace_id (1)
    this.pos = at + 3;
    const ctx = s.spanContext();
    this.memoId(ctx.traceId, this.lastTrace);
    this.byte(0x12); // span_id (2)
    if (ctx.spanId === this.lastParent.hex) this.words(this.lastParent.words); // a parent follows its children
    else this.id(ctx.spanId);
    const traceState = ctx.traceState?.serialize();
    if (traceState) {
      this.byte(0x1a); // trace_state (3)
      this.str(traceState);
    }
    const parent = s.parentSpanContext;
    if (parent?.spanId) {
      this.byte(0x22); // parent_span_id (4)
      this.memoId(parent.spanId, this.lastParent);
    }
    this.byte(0x2a); // name (5)
    this.str(s.name);
    const kind = s.kind == null ? 0 : s.kind + 1; // the API has no "unspecified"
    if (kind !== 0) {
      this.byte(0x30); // kind (6)
      this.varint(kind);
    }
    this.byte(0x39); // start_time_unix_nano (7, fixed64)
    this.nanos(s.startTime[0], s.startTime[1]);
    this.byte(0x41); // end_time_unix_nano (8, fixed64)
    this.nanos(s.endTime[0], s.endTime[1]);
    if (s.attributes) this.attributes(s.attributes, 0x4a); // attributes (9)
    const status = s.status;
    const code = status.code;
    const flags = (ctx.traceFlags & 0xff) | FLAGS_HAS_IS_REMOTE | (parent?.isRemote ? FLAGS_IS_REMOTE : 0);
    if (s.droppedAttributesCount === 0 && s.droppedEventsCount === 0 && s.droppedLinksCount === 0 && !status.message &&
      code >= 0 && code < 0x80 && Number.isInteger(code)) {
      // The usual tail, in one go: nothing dropped, a status without a message.
      this.ensure(16);
      const buf = this.buf;
      const p = this.pos;
      buf[p] = 0x50; // dropped_attributes_count (10)
      buf[p + 1] = 0;
      buf[p + 2] = 0x60; // dropped_events_count (12); events (11): none on this path
      buf[p + 3] = 0;
      buf[p + 4] = 0x70; // dropped_links_count (14); links (13): none on this path
      buf[p + 5] = 0;
      buf[p + 6] = 0x7a; // status (15)
      buf[p + 7] = 2;
      buf[p + 8] = 0x18; // Status.code (3)
      buf[p + 9] = code;
      this.pos = p + 10;
    } else {
      this.byte(0x50);
      this.varint(s.droppedAttributesCount);
      this.byte(0x60);
      this.varint(s.droppedEventsCount);
      this.byte(0x70);
      this.varint(s.droppedLinksCount);
      this.byte(0x7a);
      const st = this.open(1);
      if (status.message) {
        this.byte(0x12); // Status.message (2)
        this.str(status.message);
      }
      this.byte(0x18);
      this.varint(code);
      this.close(st, 1);
    }
    this.ensure(6);
    this.buf[this.pos++] = 0x85; // flags (16, fixed32)
    this.buf[this.pos++] = 0x01;
    this.fixed32(flags);
    this.close(at, 2);
  }

  /** Repeated KeyValue under the tag `tag`, in the object's key order (own enumerable keys, as the SDK). */
  private attributes(attrs: Readonly<Record<string, unknown>>, tag: number): void {
    // Walk the key tree along this object's keys: a set of keys seen before costs a comparison of
    // (interned) strings per key, not a lookup.
    let node: KeyNode | null = this.keyRoot;
    for (const key in attrs) {
      if (!Object.prototype.hasOwnProperty.call(attrs, key)) continue;
      const value = attrs[key];
      if (node !== null) {
        let c: KeyNode | null = node.child;
        while (c !== null && c.key !== key) c = c.sibling;
        node = c ?? this.addKey(node, key);
      }
      if (node !== null) {
        if (typeof value === 'string' && value === node.value) {
          const kv = node.kv;
          if (kv !== null) {
            // The same string as the last time under this key: its KeyValue, copied.
            this.ensure(kv[0] + 4);
            this.buf[this.pos] = tag;
            this.copyWords(this.pos + 1, kv);
            this.pos += 1 + kv[0];
            continue;
          }
          const at = this.pos + 1;
          if (this.shortKeyValue(tag, node.words, value)) {
            node.kv = this.captureWords(at, this.pos);
            continue;
          }
        } else {
          if (typeof value === 'string' && value.length < 0x80) {
            node.value = value;
            node.kv = null;
          }
          if (this.shortKeyValue(tag, node.words, value)) continue;
        }
      }
      this.byte(tag);
      const kv = this.open(1);
      if (node !== null) this.words(node.words);
      else {
        this.byte(0x0a); // KeyValue.key (1)
        this.str(key);
        this.byte(0x12); // KeyValue.value (2)
      }
      const v = this.open(1);
      this.anyValue(value);
      this.close(v, 1);
      this.close(kv, 1);
    }
  }

  /** A new child of `parent` for `key` (null past MAX_KEY_NODES, or for a key of 125 bytes or more). */
  private addKey(parent: KeyNode, key: string): KeyNode | null {
    if (this.keyNodes >= MAX_KEY_NODES) return null;
    const b = Buffer.from(key, 'utf8');
    if (b.length + 3 >= 0x80) return null;
    const bytes = Buffer.alloc(b.length + 3);
    bytes[0] = 0x0a; // KeyValue.key (1)
    bytes[1] = b.length;
    b.copy(bytes, 2);
    bytes[b.length + 2] = 0x12; // KeyValue.value (2)
    const node = new KeyNode(key, toWords(bytes));
    node.sibling = parent.child;
    parent.child = node;
    this.keyNodes++;
    return node;
  }

  /**
   * The usual attribute — a key from the tree and an ASCII string, a non-negative int32 or a
   * boolean, under 128 bytes in all — written with both lengths known before it; false (nothing
   * written) for any other.
   */
  private shortKeyValue(tag: number, key: Uint32Array, value: unknown): boolean {
    const n = key[0];
    // Layout: tag, KeyValue length, key and value tag (n bytes), AnyValue length, AnyValue. The
    // key is copied first (its words may run up to 3 bytes past it), then the value after it.
    let anyLen: number;
    const p = this.pos;
    if (typeof value === 'string') {
      const len = value.length;
      anyLen = 2 + len;
      if (n + 1 + anyLen >= 0x80) return false;
      this.ensure(n + anyLen + 6);
      this.copyWords(p + 2, key);
      const buf = this.buf;
      const at = p + n + 5; // the string's bytes, after its tag and length
      for (let i = 0; i < len; i++) {
        const c = value.charCodeAt(i);
        if (c > 0x7f) return false;
        buf[at + i] = c;
      }
      buf[at - 2] = 0x0a; // AnyValue.string_value (1)
      buf[at - 1] = len;
    } else if (typeof value === 'number') {
      if (!(value >= 0 && value <= 0x7fffffff && Number.isInteger(value))) return false;
      anyLen = 1 + varintSize(value);
      this.ensure(n + anyLen + 6);
      this.copyWords(p + 2, key);
      this.buf[p + n + 3] = 0x18; // AnyValue.int_value (3)
      this.uvarintAt(p + n + 4, value);
    } else if (typeof value === 'boolean') {
      anyLen = 2;
      this.ensure(n + anyLen + 6);
      this.copyWords(p + 2, key);
      this.buf[p + n + 3] = 0x10; // AnyValue.bool_value (2)
      this.buf[p + n + 4] = value ? 1 : 0;
    } else {
      return false;
    }
    const buf = this.buf;
    buf[p] = tag;
    buf[p + 1] = n + 1 + anyLen;
    buf[p + 2 + n] = anyLen;
    this.pos = p + 3 + n + anyLen;
    return true;
  }

  /** An AnyValue's fields (its length is the caller's), as the SDK's writeAnyValue. */
  private anyValue(value: unknown): void {
    switch (typeof value) {
      case 'string':
        this.byte(0x0a); // string_value (1)
        this.str(value);
        return;
      case 'boolean':
        this.ensure(2);
        this.buf[this.pos++] = 0x10; // bool_value (2)
        this.buf[this.pos++] = value ? 1 : 0;
        return;
      case 'number':
        if (Number.isInteger(value) && value >= MIN_INT64 && value < MAX_INT64) {
          this.byte(0x18); // int_value (3)
          this.varint(value);
        } else {
          this.ensure(9);
          this.buf[this.pos++] = 0x21; // double_value (4, fixed64)
          this.buf.writeDoubleLE(value, this.pos);
          this.pos += 8;
        }
        return;
    }
    if (value instanceof Uint8Array) {
      this.byte(0x3a); // bytes_value (7)
      this.bytes(value);
    } else if (Array.isArray(value)) {
      this.byte(0x2a); // array_value (5)
      const arr = this.open(1);
      for (const item of value) {
        this.byte(0x0a); // ArrayValue.values (1)
        const at = this.open(1);
        this.anyValue(item);
        this.close(at, 1);
      }
      this.close(arr, 1);
    } else if (typeof value === 'object' && value !== null) {
      this.byte(0x32); // kvlist_value (6)
      const list = this.open(1);
      this.attributes(value as Record<string, unknown>, 0x0a); // KeyValueList.values (1)
      this.close(list, 1);
    }
    // Anything else (undefined, null, a function…): an empty AnyValue, as the SDK sends it.
  }
}

/** Spans by resource, then by scope, both by identity and in first-seen order (the SDK's createResourceMap). */
function groupSpans(spans: readonly ReadableSpan[]): Map<Resource, Map<Scope, ReadableSpan[]>> {
  const byResource = new Map<Resource, Map<Scope, ReadableSpan[]>>();
  for (const s of spans) {
    let byScope = byResource.get(s.resource);
    if (byScope === undefined) byResource.set(s.resource, byScope = new Map());
    let list = byScope.get(s.instrumentationScope);
    if (list === undefined) byScope.set(s.instrumentationScope, list = []);
    list.push(s);
  }
  return byResource;
}

const encoder = new OtlpTraceEncoder();

/** The serializer the exporter uses: requests by OtlpTraceEncoder, responses by the SDK's. */
export const OtlpTraceSerializer: ISerializer<ReadableSpan[], IExportTraceServiceResponse> = {
  serializeRequest: (spans) => encoder.encode(spans),
  deserializeResponse: (data) => ProtobufTraceSerializer.deserializeResponse(data),
};

/**
 * The OTLP/HTTP protobuf trace exporter: built as the SDK's OTLPTraceExporter
 * (@opentelemetry/exporter-trace-otlp-proto) is — the same transport, retries, timeout, headers,
 * compression, concurrency limit and OTEL_EXPORTER_OTLP_* environment — with OtlpTraceSerializer.
 */
export class OtlpProtoTraceExporter extends OTLPExporterBase<ReadableSpan[]> implements SpanExporter {
  constructor(config: OTLPExporterNodeConfigBase = {}) {
    super(createOtlpHttpExportDelegate(
      convertLegacyHttpOptions(config, 'TRACES', 'v1/traces', { 'Content-Type': 'application/x-protobuf' }),
      OtlpTraceSerializer, 'otlp_http_span_exporter', TraceExporterMetricsHelper, config.selfObsMeterProvider));
  }
}
