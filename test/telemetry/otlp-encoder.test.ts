// The proxy's OTLP/protobuf encoder (runtime/telemetry/otlp-encoder.ts) against the SDK's
// ProtobufTraceSerializer: spans built by the real Tracing.record (collected from the exporter it
// hands them to) and hand-made spans for the edges, encoded by both; each request is decoded field
// by field with the receiver's decoder (test/helpers/otlp-receiver.ts, every field of the
// opentelemetry-proto schema) and the two compared whole, and byte for byte. Also checked against
// what the spans say, so the two cannot agree on something wrong unnoticed; and the exporter
// (the SDK's HTTP transport with this encoder) against a real OTLP/HTTP receiver.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { performance } from 'node:perf_hooks';
import { SpanKind, SpanStatusCode, type Attributes, type SpanContext, type TraceState } from '@opentelemetry/api';
import type { ReadableSpan, SpanExporter } from '@opentelemetry/sdk-trace-node';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { ProtobufTraceSerializer } from '@opentelemetry/otlp-transformer';
import { Tracing, parseTraceparent, type TracedRequest, type TracingSettings } from '../../runtime/telemetry/index.ts';
import { RequestTimings, type StepTimer } from '../../runtime/pipeline/index.ts';
import { OtlpTraceEncoder, OtlpTraceSerializer, OtlpProtoTraceExporter } from '../../runtime/telemetry/otlp-encoder.ts';
import { decodeTraceRequest, decodeTraceRequestFields, startOtlpReceiver, type DecodedMessage } from '../helpers/otlp-receiver.ts';

const quiet = { trace() {}, debug() {}, info() {}, warn() {}, error() {} };

/** The spans a real Tracing builds for `requests`, as its exporter receives them. */
async function recordSpans(requests: TracedRequest[], settings: Partial<TracingSettings> = {}): Promise<ReadableSpan[]> {
  const got: ReadableSpan[] = [];
  const exporter: SpanExporter = {
    export(spans, done) {
      got.push(...spans);
      done({ code: 0 });
    },
    async shutdown() {},
  };
  const t = new Tracing({
    url: 'http://127.0.0.1:9/v1/traces', protocol: 'http/protobuf', serviceName: 'proxy-test', sampleRate: 1,
    resourceAttributes: { 'deployment.environment': 'test', 'host.name': 'höst-1' },
    maxQueueSpans: 100_000, maxBatchSpans: 100_000, exportIntervalMs: 60_000, exportTimeoutMs: 1000, ...settings,
  }, quiet, exporter);
  for (const r of requests) t.record(r);
  await t.close();
  return got;
}

const timer = (step: string, phase: 0 | 1): StepTimer => ({ step, phase, record() {}, subop() {} });

interface StepRun { timer: StepTimer; ns: number; error?: boolean; subops?: Array<[string, number]> }

function timingsOf(steps: StepRun[], rejectedAt = -1): RequestTimings {
  const t = new RequestTimings();
  for (const s of steps) {
    for (const [name, ns] of s.subops ?? []) t.subop(name, ns);
    t.step(s.timer, s.ns, s.error ?? false);
  }
  t.rejectedAt = rejectedAt;
  return t;
}

const OK_REPLY = { failed: false, errorCode: 0, errorName: '' };

/** A request through request steps, upstream and response steps; `at` is its performance.now() start. */
function request(at: number, over: Partial<TracedRequest> = {}): TracedRequest {
  return {
    parent: null, pipelineId: 'default', variant: 'baseline', op: 'find', db: 'app', collection: 'users',
    readAt: at, endAt: at + 2.5, requestPhaseAt: at + 0.01, responsePhaseAt: at + 2.2,
    upstreamStartedAt: at + 0.3, upstreamAcquiredAt: at + 0.35, upstreamWrittenAt: at + 0.4, upstreamRepliedAt: at + 2.1,
    upstream: '127.0.0.1:27017', ok: true, errorCode: 0, errorName: '', reply: OK_REPLY,
    timings: timingsOf([
      { timer: timer('wasm:filter', 0), ns: 12_345, subops: [['regex.eval', 4_321]] },
      { timer: timer('wasm:cache', 0), ns: 23_456, subops: [['cache.lookup', 7_000]] },
      { timer: timer('wasm:cache', 1), ns: 3_456, subops: [['cache.store', 1_000]] },
    ]),
    ...over,
  };
}

/** Our encoding and the SDK's of `spans`: decoded whole, equal, and the same bytes. Returns the decoded request. */
function assertSameAsSdk(spans: ReadableSpan[], what: string, encoder?: OtlpTraceEncoder): DecodedMessage {
  const ours = encoder !== undefined ? encoder.encode(spans) : OtlpTraceSerializer.serializeRequest(spans)!;
  const theirs = ProtobufTraceSerializer.serializeRequest(spans)!;
  const decoded = decodeTraceRequestFields(ours);
  assert.deepStrictEqual(decoded, decodeTraceRequestFields(theirs), `${what}: the request decodes as the SDK serializer's does`);
  assert.ok(Buffer.from(ours).equals(Buffer.from(theirs)), `${what}: the same bytes as the SDK serializer's (${ours.length} and ${theirs.length})`);
  return decoded;
}

const arr = (v: unknown) => v as DecodedMessage[];
const msg = (v: unknown) => v as DecodedMessage;
/** The decoded spans of a request, in order, with their resource's and scope's index. */
function spansOf(req: DecodedMessage): Array<{ span: DecodedMessage; resource: number; scope: string }> {
  const out: Array<{ span: DecodedMessage; resource: number; scope: string }> = [];
  arr(req.resource_spans).forEach((rs, i) => {
    for (const ss of arr(rs.scope_spans)) for (const span of arr(ss.spans)) out.push({ span, resource: i, scope: String(msg(ss.scope).name) });
  });
  return out;
}
/** A decoded KeyValue list as key → AnyValue. */
function attrsOf(m: DecodedMessage): Record<string, DecodedMessage> {
  return Object.fromEntries(arr(m.attributes ?? []).map((kv) => [String(kv.key), msg(kv.value)]));
}

test('spans from Tracing.record — remote parent, steps, sub-operations, upstream, a failed request, non-ASCII names and values — encode as the SDK ' +
  'serializer encodes them', async () => {
  const parent = parseTraceparent('00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01');
  assert.ok(typeof parent !== 'string');
  const t0 = performance.now();
  const spans = await recordSpans([
    // Continues the client's trace: the root's parent is remote.
    request(t0, { parent, db: 'bäse', collection: 'коллекция', pipelineId: 'grüne-pipeline' }),
    // Failed: the upstream replied DuplicateKey; a response step failed too.
    request(t0 + 3, {
      op: 'insert', ok: false, errorCode: 11000, errorName: 'DuplicateKey', reply: { failed: true, errorCode: 11000, errorName: 'DuplicateKey' },
      timings: timingsOf([
        { timer: timer('wasm:filter', 0), ns: 1_000 },
        { timer: timer('wasm:audit-ünicode', 1), ns: 2_000, error: true },
      ]),
    }),
    // Rejected by a request step: no upstream call.
    request(t0 + 6, {
      ok: false, errorCode: 13, errorName: '', collection: 'secrets', upstream: '', responsePhaseAt: -1,
      upstreamStartedAt: 0, upstreamAcquiredAt: 0, upstreamWrittenAt: 0, upstreamRepliedAt: 0,
      timings: timingsOf([{ timer: timer('wasm:filter', 0), ns: 5_000 }], 0),
    }),
    // A command without a collection, whose upstream call timed out (no reply).
    request(t0 + 9, { op: 'ping', collection: '', ok: false, errorCode: 50, errorName: 'MaxTimeMSExpired', upstreamRepliedAt: 0 }),
  ]);
  assert.ok(spans.length >= 25, `Tracing built ${spans.length} spans`);
  const decoded = assertSameAsSdk(spans, 'Tracing spans');

  // What the spans say, read back (not only "the same as the SDK").
  assert.equal(arr(decoded.resource_spans).length, 1, 'one resource');
  const rs = arr(decoded.resource_spans)[0];
  const resource = attrsOf(msg(rs.resource));
  assert.deepStrictEqual(resource['service.name'], { string_value: 'proxy-test' });
  assert.deepStrictEqual(resource['host.name'], { string_value: 'höst-1' });
  assert.deepStrictEqual(msg(arr(rs.scope_spans)[0].scope), { name: 'pipeline-proxy' });
  const out = spansOf(decoded).map((s) => s.span);
  assert.equal(out.length, spans.length);
  spans.forEach((s, i) => {
    const d = out[i];
    assert.equal(d.name, s.name);
    assert.equal(d.trace_id, s.spanContext().traceId);
    assert.equal(d.span_id, s.spanContext().spanId);
    assert.equal(d.parent_span_id, s.parentSpanContext?.spanId);
    assert.equal(d.kind, s.kind + 1);
    assert.equal(d.start_time_unix_nano, BigInt(s.startTime[0]) * 1_000_000_000n + BigInt(s.startTime[1]));
    assert.equal(d.end_time_unix_nano, BigInt(s.endTime[0]) * 1_000_000_000n + BigInt(s.endTime[1]));
    assert.equal(d.flags, 0x100 | 1 | (s.parentSpanContext?.isRemote ? 0x200 : 0));
    assert.deepStrictEqual(Object.keys(attrsOf(d)), Object.keys(s.attributes), `${s.name}: every attribute, in order`);
  });
  const roots = out.filter((d) => d.name === 'proxy.request');
  assert.equal(roots.length, 4);
  assert.equal(roots[0].parent_span_id, '00f067aa0ba902b7', 'the first root continues the client trace');
  assert.equal(roots[0].trace_id, '4bf92f3577b34da6a3ce929d0e0e4736');
  assert.equal(roots[0].flags, 0x301, 'sampled, has-is-remote, is-remote');
  assert.equal(roots[1].flags, 0x101, 'a root without a client parent: not remote');
  assert.deepStrictEqual(attrsOf(roots[0])['db.collection.name'], { string_value: 'коллекция' });
  assert.deepStrictEqual(attrsOf(roots[0])['db.namespace'], { string_value: 'bäse' });
  assert.deepStrictEqual(attrsOf(roots[0])['net.peer.port'], { int_value: 27017n });
  assert.deepStrictEqual(roots[0].status, { code: 0 });
  assert.deepStrictEqual(roots[1].status, { message: 'DuplicateKey', code: 2 });
  assert.deepStrictEqual(attrsOf(roots[1])['error.type'], { string_value: 'DuplicateKey' });
  const failedStep = out.find((d) => d.name === 'proxy.step.audit-ünicode');
  assert.ok(failedStep !== undefined, 'the non-ASCII step name');
  assert.deepStrictEqual(failedStep.status, { code: 2 });
  assert.deepStrictEqual(attrsOf(failedStep)['proxy.step.error'], { bool_value: true });
  assert.ok(out.some((d) => d.name === 'insert users' && d.kind === SpanKind.CLIENT + 1));
  assert.ok(out.some((d) => d.name === 'find коллекция'), 'the operation span named with its non-ASCII collection');
});

test('many requests in one batch, values changing and repeating under the same keys, encoded again and again by one encoder', async () => {
  let seed = 12345;
  const pick = <T>(xs: readonly T[]): T => {
    seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
    return xs[(seed >>> 8) % xs.length];
  };
  const t0 = performance.now();
  const requests: TracedRequest[] = [];
  for (let i = 0; i < 60; i++) {
    requests.push(request(t0 + i * 3, {
      op: pick(['find', 'find', 'insert', 'aggregate', 'update']), db: pick(['app', 'app', 'logs', 'ünïcode-db']),
      collection: pick(['users', 'users', 'events', '', 'x'.repeat(130)]), pipelineId: pick(['default', 'canary-β']),
      variant: pick(['baseline', 'candidate']), upstream: pick(['127.0.0.1:27017', 'db-2.example.com:27018', '']),
      ok: pick([true, true, true, false]), errorCode: pick([0, 0, 11000, 2]),
    }));
  }
  const spans = await recordSpans(requests);
  const encoder = new OtlpTraceEncoder();
  for (let round = 1; round <= 3; round++) assertSameAsSdk(spans, `batch of ${spans.length}, round ${round}`, encoder);
  // In pieces, as the queue sends them, and backwards (every value change in the other order).
  for (let i = 0; i < spans.length; i += 37) assertSameAsSdk(spans.slice(i, i + 37), `spans ${i}..`, encoder);
  assertSameAsSdk([...spans].reverse(), 'reversed', encoder);
});

/** A hand-made span: the ReadableSpan shape with whatever the test sets. */
function handSpan(o: {
  name?: string; kind?: SpanKind; attributes?: Attributes; status?: ReadableSpan['status']; parent?: SpanContext;
  traceId?: string; spanId?: string; traceFlags?: number; traceState?: TraceState; start?: [number, number]; end?: [number, number];
  resource?: ReadableSpan['resource']; scope?: ReadableSpan['instrumentationScope']; events?: ReadableSpan['events']; links?: ReadableSpan['links'];
  dropped?: [number, number, number];
}): ReadableSpan {
  const ctx: SpanContext = {
    traceId: o.traceId ?? '0af7651916cd43dd8448eb211c80319c', spanId: o.spanId ?? 'b7ad6b7169203331', traceFlags: o.traceFlags ?? 1,
    traceState: o.traceState,
  };
  const span = {
    name: o.name ?? 'hand-made', kind: 'kind' in o ? o.kind : SpanKind.INTERNAL, spanContext: () => ctx, parentSpanContext: o.parent,
    startTime: o.start ?? [1_764_000_000, 123_456_789], endTime: o.end ?? [1_764_000_001, 5], status: o.status ?? { code: SpanStatusCode.UNSET },
    attributes: o.attributes ?? {}, links: o.links ?? [], events: o.events ?? [], duration: [1, 0], ended: true,
    resource: o.resource ?? resourceFromAttributes({ 'service.name': 'hand' }), instrumentationScope: o.scope ?? { name: 'pipeline-proxy' },
    droppedAttributesCount: o.dropped?.[0] ?? 0, droppedEventsCount: o.dropped?.[1] ?? 0, droppedLinksCount: o.dropped?.[2] ?? 0,
  };
  return span as unknown as ReadableSpan;
}

test('the edges: every kind of attribute value, long and non-ASCII strings and keys, trace state, times, kinds, status, flags, dropped counts, ' +
  'span sizes', () => {
  const resource = resourceFromAttributes({ 'service.name': 'edges', 'int.attr': 42, 'double.attr': 2.5, 'bool.attr': true });
  const scope = { name: 'pipeline-proxy' };
  const traceState: TraceState = {
    set() { return traceState; }, unset() { return traceState; }, get() { return undefined; },
    serialize: () => 'rojo=00f067aa0ba902b7,congo=t61rcWkgMzE',
  };
  const values: Record<string, unknown> = {
    'int.zero': 0, 'int.small': 7, 'int.127': 127, 'int.128': 128, 'int.int32max': 0x7fffffff, 'int.2^31': 2 ** 31,
    'int.uint32max': 0xffffffff, 'int.2^32': 2 ** 32, 'int.max_safe': Number.MAX_SAFE_INTEGER, 'int.2^62': 2 ** 62,
    'int.minus_one': -1, 'int.minus_2^40': -(2 ** 40), 'int.min_int64': -(2 ** 63), 'int.minus_zero': -0,
    'num.2^63': 2 ** 63, 'num.fraction': 0.25, 'num.negative_fraction': -1234.5678, 'num.tiny': 5e-324, 'num.nan': NaN,
    'num.inf': Infinity, 'num.minus_inf': -Infinity,
    'bool.true': true, 'bool.false': false,
    'str.empty': '', 'str.short': 'mongodb', 'str.120': 'x'.repeat(120), 'str.125': 'x'.repeat(125), 'str.300': 'y'.repeat(300),
    'str.utf8': 'naïve — 日本語 🚀', 'str.lone_surrogate': 'a\ud800b', 'str.100_non_ascii': 'é'.repeat(100),
    'ключ': 'значение', ['k'.repeat(126)]: 'a key too long for the key cache', ['ü'.repeat(70)]: 'a multi-byte long key',
    'arr.str': ['a', 'β', ''], 'arr.num': [1, 2.5, -3, 2 ** 63], 'arr.bool': [true, false], 'arr.holes': [null, 'x', undefined],
    'arr.empty': [], 'arr.nested': [[1, 'two'], []], 'bytes': new Uint8Array([0, 1, 127, 128, 255]), 'bytes.empty': new Uint8Array(0),
    'undefined': undefined, 'null': null, 'kvlist': { a: 1, b: { c: 'd', e: [true] }, 'ü': 'v' },
  };
  const spans: ReadableSpan[] = [
    handSpan({ resource, scope, name: 'all values', attributes: values as Attributes }),
    // The same values again, twice (the encoder's repeat-value path), and once more in another key order.
    handSpan({ resource, scope, name: 'all values again', attributes: values as Attributes }),
    handSpan({ resource, scope, name: 'all values again', attributes: values as Attributes }),
    handSpan({ resource, scope, name: 'reversed', attributes: Object.fromEntries(Object.entries(values).reverse()) as Attributes }),
    handSpan({ resource, scope, name: 'tiny', attributes: {} }), // under 128 bytes
    handSpan({
      resource, scope, name: 'n'.repeat(200), kind: SpanKind.PRODUCER, traceState,
      parent: { traceId: '0af7651916cd43dd8448eb211c80319c', spanId: '00f067aa0ba902b7', traceFlags: 1, isRemote: false },
      status: { code: SpanStatusCode.ERROR, message: 'échec: 重複キー' }, dropped: [3, 2, 1], traceFlags: 0,
    }),
    handSpan({ resource, scope, name: 'ok status', kind: undefined as unknown as SpanKind, status: { code: SpanStatusCode.OK }, traceFlags: 0xff }),
    handSpan({ resource, scope, name: 'status message only', status: { code: SpanStatusCode.UNSET, message: 'm' } }),
    handSpan({ resource, scope, name: 'upper-case ids', traceId: '0AF7651916CD43DD8448EB211C80319C', spanId: 'B7AD6B7169203331',
      parent: { traceId: '0AF7651916CD43DD8448EB211C80319C', spanId: 'ABCDEF0123456789', traceFlags: 1, isRemote: true } }),
    handSpan({ resource, scope, name: 'empty parent span id', parent: { traceId: '0af7651916cd43dd8448eb211c80319c', spanId: '', traceFlags: 1 } }),
    handSpan({ resource, scope, name: 'times', start: [0, 0], end: [1_764_000_000, 999_999_999] }),
    handSpan({ resource, scope, name: 'times 2', start: [4_102_444_800, 1_000_000_000], end: [18_000_000_000, 1] }),
    // Over 16 KiB (a 3-byte length).
    handSpan({ resource, scope, name: 'big', attributes: Object.fromEntries(Array.from({ length: 300 }, (_, i) => [`attr.${i}`, `value ${i} `.repeat(12)])) }),
  ];
  const decoded = assertSameAsSdk(spans, 'edge spans', new OtlpTraceEncoder());
  const out = spansOf(decoded).map((s) => s.span);
  const a = attrsOf(out[0]);
  // Read back: integers as int_value, the rest as double_value, the SDK's choice for each.
  assert.deepStrictEqual(a['int.small'], { int_value: 7n });
  assert.deepStrictEqual(a['int.min_int64'], { int_value: -(2n ** 63n) });
  assert.deepStrictEqual(a['int.minus_one'], { int_value: -1n });
  assert.deepStrictEqual(a['num.2^63'], { double_value: 2 ** 63 });
  assert.deepStrictEqual(a['num.fraction'], { double_value: 0.25 });
  assert.deepStrictEqual(a['num.nan'], { double_value: NaN });
  assert.deepStrictEqual(a['bool.false'], { bool_value: false });
  assert.deepStrictEqual(a['str.utf8'], { string_value: 'naïve — 日本語 🚀' });
  assert.deepStrictEqual(a['str.lone_surrogate'], { string_value: 'a\ufffdb' });
  assert.deepStrictEqual(a['ключ'], { string_value: 'значение' });
  assert.deepStrictEqual(a['bytes'], { bytes_value: '00017f80ff' });
  assert.deepStrictEqual(a['undefined'], {});
  assert.deepStrictEqual(a['arr.str'], { array_value: { values: [{ string_value: 'a' }, { string_value: 'β' }, { string_value: '' }] } });
  assert.equal(Object.keys(a).length, Object.keys(values).length);
  assert.equal(out[5].trace_state, 'rojo=00f067aa0ba902b7,congo=t61rcWkgMzE');
  assert.deepStrictEqual(out[5].status, { message: 'échec: 重複キー', code: 2 });
  assert.deepStrictEqual([out[5].dropped_attributes_count, out[5].dropped_events_count, out[5].dropped_links_count], [3, 2, 1]);
  assert.equal(out[5].flags, 0x100);
  assert.equal(out[6].kind, undefined, 'no kind: the field is left out');
  assert.equal(out[6].flags, 0x1ff);
  assert.equal(out[8].span_id, 'b7ad6b7169203331');
  assert.equal(out[8].parent_span_id, 'abcdef0123456789');
  assert.equal(out[9].parent_span_id, undefined);
  assert.equal(out[10].start_time_unix_nano, 0n);
  assert.equal(out[11].start_time_unix_nano, 4_102_444_801_000_000_000n);
  assert.equal(out[11].end_time_unix_nano, 18_000_000_000_000_000_001n);
  assert.deepStrictEqual(attrsOf(msg(arr(decoded.resource_spans)[0].resource))['double.attr'], { double_value: 2.5 });
});

test('several resources and scopes in one batch are grouped as the SDK groups them (by identity, in first-seen order)', async () => {
  const t0 = performance.now();
  const a = await recordSpans([request(t0), request(t0 + 3)]);
  const b = await recordSpans([request(t0 + 6, { op: 'insert' })], { serviceName: 'other-proxy', resourceAttributes: { region: 'eu' } });
  const withSchema = resourceFromAttributes({ 'service.name': 'schema', 'n': 1 }, { schemaUrl: 'https://opentelemetry.io/schemas/1.30.0' });
  const scopeB = { name: 'other-scope', version: '1.2.3', schemaUrl: 'https://example.com/scope-schema' };
  const scopeC = { name: 'pipeline-proxy' }; // equal to Tracing's scope, but another object: another group
  const scopeAttrs = { name: 'with-attributes', attributes: { 'scope.attr': 'x', n: 2 }, droppedAttributesCount: 4 } as ReadableSpan['instrumentationScope'];
  const batch: ReadableSpan[] = [
    a[0], b[0], handSpan({ resource: a[0].resource, scope: scopeB, name: 'scope b' }), a[1], b[1],
    handSpan({ resource: withSchema, scope: scopeC, name: 'schema resource' }), handSpan({ resource: a[0].resource, scope: scopeC, name: 'scope c' }),
    handSpan({ resource: withSchema, scope: scopeAttrs, name: 'scope attrs' }), handSpan({ resource: a[0].resource, scope: scopeB, name: 'scope b 2' }),
    ...a.slice(2), ...b.slice(2),
  ];
  const decoded = assertSameAsSdk(batch, 'mixed resources and scopes');
  const rss = arr(decoded.resource_spans);
  assert.equal(rss.length, 3);
  assert.deepStrictEqual(rss.map((rs) => attrsOf(msg(rs.resource))['service.name']),
    [{ string_value: 'proxy-test' }, { string_value: 'other-proxy' }, { string_value: 'schema' }]);
  assert.deepStrictEqual(rss.map((rs) => arr(rs.scope_spans).map((ss) => `${String(msg(ss.scope).name)}:${arr(ss.spans).length}`)),
    [[`pipeline-proxy:${a.length}`, 'other-scope:2', 'pipeline-proxy:1'], [`pipeline-proxy:${b.length}`], ['pipeline-proxy:1', 'with-attributes:1']]);
  assert.equal(rss[2].schema_url, 'https://opentelemetry.io/schemas/1.30.0');
  const scopeSpansB = arr(rss[0].scope_spans)[1];
  assert.deepStrictEqual(msg(scopeSpansB.scope), { name: 'other-scope', version: '1.2.3' });
  assert.equal(scopeSpansB.schema_url, 'https://example.com/scope-schema');
  assert.deepStrictEqual(arr(scopeSpansB.spans).map((s) => s.name), ['scope b', 'scope b 2']);
  assert.deepStrictEqual(msg(arr(rss[2].scope_spans)[1].scope).dropped_attributes_count, 4);
});

test('a batch in which a span has events or links is encoded by the SDK serializer (the fallback), whole', async () => {
  const spans = await recordSpans([request(performance.now())]);
  const withEvent = handSpan({
    name: 'with event', resource: spans[0].resource, scope: spans[0].instrumentationScope,
    events: [{ name: 'exception', time: [1_764_000_000, 5], attributes: { 'exception.message': 'boom' }, droppedAttributesCount: 0 }],
  });
  const withLink = handSpan({
    name: 'with link', resource: spans[0].resource, scope: spans[0].instrumentationScope,
    links: [{ context: { traceId: '4bf92f3577b34da6a3ce929d0e0e4736', spanId: '00f067aa0ba902b7', traceFlags: 1, isRemote: true },
      attributes: { why: 'retry' } }],
  });
  for (const [what, batch] of [['an event', [...spans.slice(0, 3), withEvent, ...spans.slice(3)]], ['a link', [withLink, ...spans]]] as const) {
    const decoded = assertSameAsSdk([...batch], `a batch with ${what}`);
    const out = spansOf(decoded).map((s) => s.span);
    assert.equal(out.length, batch.length);
    const special = out.find((s) => s.name === (what === 'an event' ? 'with event' : 'with link'))!;
    if (what === 'an event') assert.deepStrictEqual(arr(special.events).map((e) => e.name), ['exception']);
    else assert.deepStrictEqual(arr(special.links).map((l) => l.span_id), ['00f067aa0ba902b7']);
  }
});

test('large batches: the buffer grows (and is let go of after), lengths of 3 and 4 bytes', () => {
  const encoder = new OtlpTraceEncoder();
  const big = handSpan({ name: 'big', attributes: Object.fromEntries(Array.from({ length: 200 }, (_, i) => [`attr.${i}`, 'v'.repeat(150)])) });
  assertSameAsSdk(Array.from({ length: 12 }, () => big), '~400 KB', encoder);
  assertSameAsSdk(Array.from({ length: 160 }, () => big), '~5 MB', encoder);
  assertSameAsSdk([big, big], 'small again', encoder);
  assert.equal(encoder.encode([]).length, 0);
  assert.equal(ProtobufTraceSerializer.serializeRequest([])!.length, 0);
});

test('OtlpProtoTraceExporter sends our encoding through the SDK HTTP transport to a real OTLP/HTTP receiver', async () => {
  const receiver = await startOtlpReceiver();
  try {
    const spans = await recordSpans([request(performance.now(), { db: 'bäse' })]);
    const exporter = new OtlpProtoTraceExporter({ url: `${receiver.url}/v1/traces`, timeoutMillis: 5000 });
    const result = await new Promise<{ code: number; error?: Error }>((resolve) => exporter.export(spans, resolve));
    assert.equal(result.code, 0, `export succeeded (${result.error?.message ?? ''})`);
    await exporter.shutdown();
    assert.deepStrictEqual(receiver.requests, [{ contentType: 'application/x-protobuf', spans: spans.length }]);
    const expected = decodeTraceRequest(Buffer.from(ProtobufTraceSerializer.serializeRequest(spans)!));
    assert.deepStrictEqual(receiver.spans, expected);
    assert.ok(receiver.spans.some((s) => s.attributes['db.namespace'] === 'bäse'));
  } finally {
    await receiver.close();
  }
});
