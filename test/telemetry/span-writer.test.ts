// The http/protobuf path of tracing (runtime/telemetry/span-writer.ts): a traced request's spans
// written straight as OTLP protobuf must be the very bytes the SDK's ProtobufTraceSerializer makes
// of the ReadableSpans the http/json path builds for the same requests. Two Tracings with the same
// seeded id source record the same requests, one on each path; the SDK serializes the first's
// spans; the second's batches, in their envelope, must equal that byte for byte (and decode the
// same, field by field, for a readable failure). Then what the spans say is read back, and the
// queue's bounds: a request's spans are queued or dropped whole, and a batch is whole requests.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { performance } from 'node:perf_hooks';
import type { ReadableSpan, SpanExporter } from '@opentelemetry/sdk-trace-node';
import { ProtobufTraceSerializer } from '@opentelemetry/otlp-transformer';
import { Tracing, parseTraceparent, type TracedRequest, type TracingSettings } from '../../runtime/telemetry/index.ts';
import type { EncodedSpans } from '../../runtime/telemetry/span-queue.ts';
import { RequestTimings, type StepTimer } from '../../runtime/pipeline/index.ts';
import { decodeTraceRequestFields, type DecodedMessage } from '../helpers/otlp-receiver.ts';

const quiet = { trace() {}, debug() {}, info() {}, warn() {}, error() {} };

/** The same pseudo-random pool bytes for every Tracing made with it. */
function seededFill(seed: number): (pool: Uint8Array) => void {
  let x = seed >>> 0;
  return (pool) => {
    for (let i = 0; i < pool.length; i++) {
      x ^= x << 13;
      x ^= x >>> 17;
      x ^= x << 5;
      x >>>= 0;
      // Every 97th byte zero runs make an all-zero id now and then (it must be drawn again on both paths).
      pool[i] = i % 97 < 9 ? 0 : x & 0xff;
    }
  };
}

/** The settings of these tests: OTEL_SEMCONV_STABILITY_OPT_IN unset whatever this process's environment says. */
const SETTINGS: TracingSettings = {
  url: 'http://127.0.0.1:9/v1/traces', protocol: 'http/protobuf', serviceName: 'proxy-test', sampleRate: 1,
  resourceAttributes: { 'deployment.environment': 'test', 'host.name': 'höst-1' },
  maxQueueSpans: 100_000, maxBatchSpans: 100_000, exportIntervalMs: 60_000, exportTimeoutMs: 1000, semconvStabilityOptIn: '',
};
const OPTED_IN: Partial<TracingSettings> = { semconvStabilityOptIn: 'database/dup' };

/** The ReadableSpans the http/json path builds for `requests`. */
async function readableSpans(requests: TracedRequest[], seed: number, settings: Partial<TracingSettings> = {}): Promise<ReadableSpan[]> {
  const got: ReadableSpan[] = [];
  const exporter: SpanExporter = { export(spans, done) { got.push(...spans); done({ code: 0 }); }, async shutdown() {} };
  const t = new Tracing({ ...SETTINGS, ...settings }, quiet, exporter, { randomFill: seededFill(seed) });
  for (const r of requests) t.record(r);
  await t.close();
  return got;
}

/** The requests the http/protobuf path sends for `requests` (each batch in its envelope), and their span counts. */
async function writtenRequests(requests: TracedRequest[], seed: number, settings: Partial<TracingSettings> = {}): Promise<{ bodies: Uint8Array[];
  spans: number[]; tracing: Tracing; counted: number }> {
  const batches: EncodedSpans[] = [];
  const t = new Tracing({ ...SETTINGS, ...settings }, quiet, undefined, {
    randomFill: seededFill(seed),
    encodedExporter: { export(batch, done) { batches.push(batch); done({ code: 0 }); }, async shutdown() {} },
  });
  for (const r of requests) t.record(r);
  // Counted against the queue's bound when each request ended (the spans are written later).
  const counted = t.queue.queued + t.queue.droppedQueueFull;
  await t.close();
  return { bodies: batches.map((b) => t.envelope!.wrap(b.bytes)), spans: batches.map((b) => b.spans), tracing: t, counted };
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
      { timer: timer('wasm:cache', 0), ns: 23_456, subops: [['cache.lookup', 7_000], ['cache.kv', 1_500]] },
      { timer: timer('wasm:cache', 1), ns: 3_456, subops: [['cache.store', 1_000]] },
    ]),
    ...over,
  };
}

/** The requests of every kind the proxy traces. */
function variety(t0: number): TracedRequest[] {
  const parent = parseTraceparent('00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01');
  assert.ok(typeof parent !== 'string');
  return [
    // Continues the client's trace: the root's parent is remote; non-ASCII names and values.
    request(t0, { parent, db: 'bäse', collection: 'коллекция', pipelineId: 'grüne-pipeline' }),
    // The upstream replied DuplicateKey; a response step failed too.
    request(t0 + 3, {
      op: 'insert', ok: false, errorCode: 11000, errorName: 'DuplicateKey', reply: { failed: true, errorCode: 11000, errorName: 'DuplicateKey' },
      timings: timingsOf([{ timer: timer('wasm:filter', 0), ns: 1_000 }, { timer: timer('wasm:audit-ünicode', 1), ns: 2_000, error: true }]),
    }),
    // A write reply ok: 1 with a write error the proxy knows by code only.
    request(t0 + 4, { op: 'update', ok: true, errorCode: 11000, errorName: '', reply: { failed: true, errorCode: 11000, errorName: '' } }),
    // Rejected by a request step: no upstream call.
    request(t0 + 6, {
      ok: false, errorCode: 13, errorName: '', collection: 'secrets', upstream: '', responsePhaseAt: -1,
      upstreamStartedAt: 0, upstreamAcquiredAt: 0, upstreamWrittenAt: 0, upstreamRepliedAt: 0,
      timings: timingsOf([{ timer: timer('wasm:filter', 0), ns: 5_000 }], 0),
    }),
    // A command without a collection whose upstream call timed out (no reply), not yet acquired.
    request(t0 + 9, { op: 'ping', collection: '', ok: false, errorCode: 50, errorName: 'MaxTimeMSExpired', upstreamRepliedAt: 0, upstreamAcquiredAt: 0 }),
    // Not yet written upstream when it failed; an error without a code.
    request(t0 + 10, { ok: false, errorCode: 0, errorName: '', upstreamWrittenAt: 0, upstreamRepliedAt: 0 }),
    // Long values (lengths of two bytes), an IPv6 upstream, a slow step (a large duration), a candidate.
    request(t0 + 12, {
      collection: 'c'.repeat(300), db: 'd'.repeat(130), upstream: '[::1]:27018', variant: 'candidate', endAt: t0 + 12 + 90_000,
      timings: timingsOf([{ timer: timer('wasm:' + 's'.repeat(140), 0), ns: 3_000_000_000, subops: [['x'.repeat(200), 5]] }]),
    }),
    // No steps at all (the empty pipeline).
    request(t0 + 15, { timings: timingsOf([]), requestPhaseAt: -1, responsePhaseAt: -1 }),
  ];
}

const arr = (v: unknown) => v as DecodedMessage[];
const attrsOf = (m: DecodedMessage): Record<string, DecodedMessage> =>
  Object.fromEntries(arr(m.attributes ?? []).map((kv) => [String(kv.key), kv.value as DecodedMessage]));

for (const [mode, settings] of [['OTEL_SEMCONV_STABILITY_OPT_IN unset', {}], ['opted in to the stable database names', OPTED_IN]] as const) {
  test(`${mode}: the spans written as protobuf are, byte for byte, what the SDK serializer makes of the ReadableSpans built for the same ` +
    'requests', async () => {
    const t0 = performance.now();
    const requests = variety(t0);
    const spans = await readableSpans(requests, 7, settings);
    const theirs = ProtobufTraceSerializer.serializeRequest(spans)!;
    const ours = await writtenRequests(requests, 7, settings);
    assert.equal(ours.bodies.length, 1, 'one batch');
    assert.equal(ours.spans[0], spans.length, 'as many spans');
    assert.equal(ours.counted, spans.length, 'as many spans counted when the requests ended as were written');
    assert.deepStrictEqual(decodeTraceRequestFields(ours.bodies[0]), decodeTraceRequestFields(theirs), 'decodes as the SDK serializer\'s request');
    assert.ok(Buffer.from(ours.bodies[0]).equals(Buffer.from(theirs)), `the same bytes (${ours.bodies[0].length} and ${theirs.length})`);
  });
}

test('the spans written as protobuf say what they should: ids, parents, errors, statuses', async () => {
  const t0 = performance.now();
  const requests = variety(t0);
  const spans = await readableSpans(requests, 7);
  const ours = await writtenRequests(requests, 7);
  assert.equal(ours.bodies.length, 1, 'one batch');
  assert.equal(ours.spans[0], spans.length, 'as many spans');
  const decoded = decodeTraceRequestFields(ours.bodies[0]);
  const rs = arr(decoded.resource_spans)[0];
  assert.deepStrictEqual(attrsOf(rs.resource as DecodedMessage)['host.name'], { string_value: 'höst-1' });
  const out = arr(arr(rs.scope_spans)[0].spans);
  const roots = out.filter((d) => d.name === 'proxy.request');
  assert.equal(roots.length, requests.length, 'one root per request');
  assert.equal(roots[0].trace_id, '4bf92f3577b34da6a3ce929d0e0e4736');
  assert.equal(roots[0].parent_span_id, '00f067aa0ba902b7');
  assert.equal(roots[0].flags, 0x301);
  assert.deepStrictEqual(roots[1].status, { message: 'DuplicateKey', code: 2 });
  assert.deepStrictEqual(attrsOf(roots[2])['error.type'], { string_value: 'DuplicateKey' }, 'a code the proxy knows, named');
  const ids = out.map((d) => d.span_id);
  assert.equal(new Set(ids).size, ids.length, 'every span id distinct');
  assert.ok(ids.every((id) => id !== '0000000000000000'), 'no all-zero id (the pool has zero runs)');
});

for (const [mode, settings] of [['OTEL_SEMCONV_STABILITY_OPT_IN unset', {}], ['opted in', OPTED_IN]] as const) {
  test(`${mode}: many requests, values changing under the same keys: still the SDK's bytes, batch after batch`, async () => {
    let seed = 12345;
    const pick = <T>(xs: readonly T[]): T => {
      seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
      return xs[(seed >>> 8) % xs.length];
    };
    const t0 = performance.now();
    const requests: TracedRequest[] = [];
    for (let i = 0; i < 80; i++) {
      requests.push(request(t0 + i * 3, {
        op: pick(['find', 'find', 'insert', 'aggregate']), db: pick(['app', 'logs', 'ünïcode-db']), collection: pick(['users', '', 'x'.repeat(130)]),
        pipelineId: pick(['default', 'canary-β']), variant: pick(['baseline', 'candidate']), upstream: pick(['127.0.0.1:27017', 'db-2.example.com:27018', '']),
        ok: pick([true, true, false]), errorCode: pick([0, 0, 11000, 2]),
      }));
    }
    const spans = await readableSpans(requests, 99, settings);
    // Batches of at most 100 spans, cut between requests: each must be the SDK's encoding of the same spans.
    const ours = await writtenRequests(requests, 99, { maxBatchSpans: 100, ...settings });
    assert.ok(ours.bodies.length > 5, `${ours.bodies.length} batches`);
    let from = 0;
    ours.bodies.forEach((body, i) => {
      assert.ok(ours.spans[i] <= 100, `batch ${i}: ${ours.spans[i]} spans`);
      const theirs = ProtobufTraceSerializer.serializeRequest(spans.slice(from, from + ours.spans[i]))!;
      assert.ok(Buffer.from(body).equals(Buffer.from(theirs)), `batch ${i}: the same bytes`);
      from += ours.spans[i];
    });
    assert.equal(from, spans.length, 'every span exported');
    assert.equal(ours.tracing.queue.exported, spans.length);
  });
}

test('a full queue drops a request\'s spans whole and counts them', async () => {
  const t0 = performance.now();
  const one = (await readableSpans([request(t0)], 1)).length;
  const ours = await writtenRequests([request(t0), request(t0 + 1), request(t0 + 2)], 1, { maxQueueSpans: 2 * one + 1, maxBatchSpans: 10_000 });
  assert.deepStrictEqual(ours.spans, [2 * one], 'two requests exported');
  assert.equal(ours.tracing.queue.droppedQueueFull, one, 'the third request\'s spans dropped, all of them');
});

const STABLE_DB_NAMES = ['db.system.name', 'db.operation.name', 'db.namespace', 'db.collection.name', 'server.address', 'server.port'];
const CONTRACT_DB_NAMES = ['db.system', 'db.operation', 'db.upstream.collection', 'net.peer.name', 'net.peer.port'];

/** The spans of one written request, decoded. */
async function writtenSpans(r: TracedRequest, settings: Partial<TracingSettings>): Promise<DecodedMessage[]> {
  const ours = await writtenRequests([r], 3, settings);
  return arr(arr(arr(decodeTraceRequestFields(ours.bodies[0]).resource_spans)[0].scope_spans)[0].spans);
}

test('the stable database names: on no span by default; opted in, after the contract\'s names on proxy.request and the operation span, and ' +
  'every other span unchanged', async () => {
  const r = request(performance.now(), { db: 'shop', collection: 'orders', upstream: 'db-1.example.com:27017' });
  const plain = await writtenSpans(r, {});
  const opted = await writtenSpans(r, OPTED_IN);
  assert.deepStrictEqual(plain.map((s) => s.name), ['proxy.step.filter', 'regex.eval', 'proxy.step.cache', 'cache.lookup', 'cache.kv',
    'proxy.step.cache', 'cache.store', 'proxy.upstream', 'connection.acquire', 'find orders', 'proxy.request']);
  assert.deepStrictEqual(opted.map((s) => s.name), plain.map((s) => s.name), 'the same spans');
  for (const s of plain) {
    const keys = Object.keys(attrsOf(s));
    for (const k of STABLE_DB_NAMES) assert.ok(!keys.includes(k), `default: ${String(s.name)} has no ${k}`);
    if (s.kind !== 1 || String(s.name).startsWith('proxy.') || s.name === 'connection.acquire') {
      for (const k of CONTRACT_DB_NAMES) assert.ok(keys.includes(k), `default: ${String(s.name)} has ${k}`);
    }
  }
  opted.forEach((s, i) => {
    if (s.name !== 'proxy.request' && s.name !== 'find orders') {
      assert.deepStrictEqual(s, plain[i], `opted in: ${String(s.name)} is the same span as by default`);
      return;
    }
    const kv = arr(s.attributes).map((a) => [String(a.key), (a.value as DecodedMessage).string_value ?? (a.value as DecodedMessage).int_value]);
    const keys = kv.map(([k]) => k);
    const plainKeys = arr(plain[i].attributes).map((a) => String(a.key));
    // The contract's names first, as by default; the stable names right after them; then the span's own (the root's duration).
    assert.deepStrictEqual(keys.filter((k) => !STABLE_DB_NAMES.includes(k as string)), plainKeys, `${String(s.name)}: the default attributes, in order`);
    const at = keys.indexOf('db.system.name');
    assert.deepStrictEqual(kv.slice(at, at + 6), [['db.system.name', 'mongodb'], ['db.operation.name', 'find'], ['db.namespace', 'shop'],
      ['db.collection.name', 'orders'], ['server.address', 'db-1.example.com'], ['server.port', 27017n]], `${String(s.name)}: the stable names`);
  });
});
