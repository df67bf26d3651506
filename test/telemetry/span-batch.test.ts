// Sampled requests' spans written in batches (runtime/telemetry/pending-traces.ts, tracing.ts
// SpanBatch, span-queue.ts): a sampled request's end only copies what its spans need; the spans
// are written when the export runs, when a batch's worth is pending, and at flush and shutdown.
// These tests export to a real OTLP/HTTP receiver (test/helpers/otlp-receiver.ts) and check that
// requests still pending reach it on flush() and close() — and through a real proxy at its
// shutdown —, that the queue's bound covers pending and written spans (dropped whole and counted
// when the request ends), and that requests recorded from the same reused RequestTimings and reply
// (as a connection reuses them) export their own steps, timings and errors.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { performance } from 'node:perf_hooks';
import { MongoClient } from 'mongodb';
import { Tracing, type TracedRequest, type TracingSettings } from '../../runtime/telemetry/index.ts';
import { RequestTimings, type StepTimer } from '../../runtime/pipeline/index.ts';
import { startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from '../helpers/otlp-receiver.ts';
import { withProxy, Closes } from '../helpers/proxy.ts';
import { until } from '../helpers/until.ts';

const quiet = { trace() {}, debug() {}, info() {}, warn() {}, error() {} };

const cleanups: Array<() => Promise<unknown>> = [];
after(async () => {
  for (const fn of cleanups.reverse()) await fn().catch(() => {});
});

async function receiver(opts: { delayMs?: number } = {}): Promise<OtlpReceiver> {
  const r = await startOtlpReceiver(opts);
  cleanups.push(() => r.close());
  return r;
}

/** http/protobuf to `r` through the real exporter; no export before 60 s unless a batch fills. */
function tracing(r: OtlpReceiver, over: Partial<TracingSettings> = {}): Tracing {
  return new Tracing({
    url: `${r.url}/v1/traces`, protocol: 'http/protobuf', serviceName: 'batch-test', sampleRate: 1, resourceAttributes: {},
    maxQueueSpans: 100_000, maxBatchSpans: 100_000, exportIntervalMs: 60_000, exportTimeoutMs: 5000, semconvStabilityOptIn: '', ...over,
  }, quiet);
}

const timer = (step: string, phase: 0 | 1): StepTimer => ({ step, phase, record() {}, subop() {} });
const FILTER = timer('wasm:filter', 0);
const CACHE = timer('wasm:cache', 0);
const AUDIT = timer('wasm:audit', 1);

/** A find on `collection` through filter (one sub-operation) and cache, then upstream: 7 spans. */
function request(collection: string, at = performance.now()): TracedRequest {
  const t = new RequestTimings();
  t.subop('regex.eval', 3_000);
  t.step(FILTER, 11_000, false);
  t.step(CACHE, 22_000, false);
  return {
    parent: null, pipelineId: 'default', variant: 'baseline', op: 'find', db: 'app', collection,
    readAt: at, endAt: at + 2, requestPhaseAt: at + 0.01, responsePhaseAt: -1,
    upstreamStartedAt: at + 0.1, upstreamAcquiredAt: at + 0.2, upstreamWrittenAt: at + 0.3, upstreamRepliedAt: at + 1.9,
    upstream: '127.0.0.1:27017', ok: true, errorCode: 0, errorName: '', reply: { failed: false, errorCode: 0, errorName: '' }, timings: t,
  };
}
const SPANS_PER_REQUEST = 7;

const rootsOf = (spans: ReceivedSpan[]) => spans.filter((s) => s.name === 'proxy.request');
const traceOf = (spans: ReceivedSpan[], root: ReceivedSpan) => spans.filter((s) => s.traceId === root.traceId);
const stepsUnder = (all: ReceivedSpan[], root: ReceivedSpan) => all.filter((s) => s.parentSpanId === root.spanId && s.name.startsWith('proxy.step.'))
  .sort((a, b) => (a.startNs < b.startNs ? -1 : a.startNs > b.startNs ? 1 : 0));

test('spans of sampled requests still pending are counted as queued, not exported before their time, and exported by flush() and by close()',
  async () => {
    const r = await receiver();
    const t = tracing(r);
    t.record(request('a'));
    t.record(request('b'));
    assert.equal(t.queue.queued, 2 * SPANS_PER_REQUEST, 'the pending requests\' spans are queued');
    // Nothing starts an export before the 60 s interval: the receiver has had time to get one.
    await new Promise((resolve) => setTimeout(resolve, 200));
    assert.equal(r.requests.length, 0, 'no export yet');
    await t.flush();
    assert.equal(r.spans.length, 2 * SPANS_PER_REQUEST, 'flush() wrote and exported the pending requests');
    assert.deepEqual(rootsOf(r.spans).map((s) => s.attributes['db.upstream.collection']), ['a', 'b']);
    assert.equal(t.queue.exported, 2 * SPANS_PER_REQUEST);
    assert.equal(t.queue.queued, 0);

    t.record(request('c'));
    assert.equal(t.queue.queued, SPANS_PER_REQUEST);
    await t.close();
    assert.equal(r.spans.length, 3 * SPANS_PER_REQUEST, 'close() wrote and exported the request still pending');
    assert.deepEqual(rootsOf(r.spans).map((s) => s.attributes['db.upstream.collection']), ['a', 'b', 'c']);
    assert.equal(t.queue.dropped, 0);
  });

test('the queue bound covers written and pending spans: a request over it is dropped whole and counted (queue_full) when it ends, the ' +
  'others exported', async () => {
  // The first batch is held by the receiver; two more batches' worth wait, written or pending.
  const r = await receiver({ delayMs: 300 });
  const t = tracing(r, { maxBatchSpans: 2 * SPANS_PER_REQUEST, maxQueueSpans: 3 * SPANS_PER_REQUEST });
  const nextTurn = () => new Promise((resolve) => setImmediate(resolve));
  // 1, 2: a batch's worth pending → written on the next turn, and its export starts (in flight: no longer queued).
  t.record(request('r1'));
  t.record(request('r2'));
  assert.equal(t.queue.queued, 2 * SPANS_PER_REQUEST, 'pending until the turn ends');
  await nextTurn();
  assert.equal(t.queue.queued, 0, 'the first batch is in flight');
  // 3, 4: written into the queue while the export is in flight; 5: pending — at the bound.
  t.record(request('r3'));
  t.record(request('r4'));
  await nextTurn();
  t.record(request('r5'));
  assert.equal(t.queue.queued, 3 * SPANS_PER_REQUEST);
  assert.equal(t.queue.droppedQueueFull, 0);
  t.record(request('r6'));
  assert.equal(t.queue.droppedQueueFull, SPANS_PER_REQUEST, 'the sixth request\'s spans dropped, all of them, when it ended');
  assert.equal(t.queue.queued, 3 * SPANS_PER_REQUEST, 'the bound held');
  await t.close();
  assert.deepEqual(rootsOf(r.spans).map((s) => s.attributes['db.upstream.collection']), ['r1', 'r2', 'r3', 'r4', 'r5']);
  assert.equal(r.spans.length, 5 * SPANS_PER_REQUEST, 'no part of the dropped request was sent');
  assert.equal(t.queue.exported, 5 * SPANS_PER_REQUEST);
  assert.ok(r.requests.every((q) => q.spans <= 2 * SPANS_PER_REQUEST), 'batches of at most max_batch_spans, cut between requests');
});

test('two sampled requests recorded from the same RequestTimings, reply and record (reused as a connection does): each exports its own ' +
  'steps, durations, sub-operations and errors', async () => {
  const r = await receiver();
  const t = tracing(r);
  const at = performance.now();
  const rec = request('first', at);
  const timings = rec.timings;
  const reply = rec.reply as { failed: boolean; errorCode: number; errorName: string };
  rec.ok = false;
  rec.errorCode = 11000;
  rec.errorName = 'DuplicateKey';
  reply.failed = true;
  reply.errorCode = 11000;
  reply.errorName = 'DuplicateKey';
  t.record(rec);
  // The connection's next request: the same objects refilled.
  timings.reset();
  timings.step(AUDIT, 44_000, true);
  Object.assign(rec, { op: 'insert', collection: 'second', ok: true, errorCode: 0, errorName: '', requestPhaseAt: -1, responsePhaseAt: at + 5.1,
    readAt: at + 5, endAt: at + 6, upstreamStartedAt: at + 5.01, upstreamAcquiredAt: at + 5.02, upstreamWrittenAt: at + 5.03, upstreamRepliedAt: at + 5.09 });
  reply.failed = false;
  reply.errorCode = 0;
  reply.errorName = '';
  t.record(rec);
  // And again, so the store holds three requests whose timings were all the same object; this one
  // with a sub-operation of a step that recorded no invocation (it makes no span).
  timings.reset();
  timings.subop('orphan', 5_000);
  Object.assign(rec, { op: 'ping', collection: 'third', upstreamStartedAt: 0, upstreamAcquiredAt: 0, upstreamWrittenAt: 0, upstreamRepliedAt: 0,
    upstream: '', responsePhaseAt: -1 });
  t.record(rec);
  const queued = t.queue.queued;
  await t.flush();
  assert.equal(r.spans.length, queued, 'as many spans written as were counted when the requests ended');
  assert.equal(r.spans.length, SPANS_PER_REQUEST + 5 + 1);

  const roots = rootsOf(r.spans);
  assert.deepEqual(roots.map((s) => s.attributes['db.operation']), ['find', 'insert', 'ping']);
  const [first, second, third] = roots;
  const a = traceOf(r.spans, first);
  const steps1 = stepsUnder(a, first);
  assert.deepEqual(steps1.map((s) => [s.name, s.attributes['proxy.step.duration_us'], s.attributes['proxy.step.error']]),
    [['proxy.step.filter', 11, false], ['proxy.step.cache', 22, false]]);
  assert.deepEqual(a.filter((s) => s.parentSpanId === steps1[0].spanId).map((s) => [s.name, s.attributes['proxy.subop.duration_us']]), [['regex.eval', 3]]);
  assert.equal(first.status, 2);
  assert.equal(first.attributes['error.type'], 'DuplicateKey');
  const op1 = a.find((s) => s.name === 'find first')!;
  assert.equal(op1.status, 2, 'the first request\'s reply failed');
  assert.equal(op1.attributes['db.response.status_code'], '11000');
  assert.equal(a.length, SPANS_PER_REQUEST);

  const b = traceOf(r.spans, second);
  assert.deepEqual(stepsUnder(b, second).map((s) => [s.name, s.attributes['proxy.step.duration_us'], s.attributes['proxy.step.phase'],
    s.attributes['proxy.step.error']]), [['proxy.step.audit', 44, 'response', true]]);
  assert.equal(b.some((s) => s.name === 'regex.eval'), false, 'no sub-operation of the first request');
  assert.equal(second.status, 0);
  const op2 = b.find((s) => s.name === 'insert second')!;
  assert.equal(op2.status, 0, 'the second request\'s reply did not fail');
  assert.equal(op2.attributes['error.type'], undefined);
  assert.equal(Number(second.endNs - second.startNs), 1_000_000, 'its own times');

  const c = traceOf(r.spans, third);
  assert.deepEqual(c.map((s) => s.name), ['proxy.request'], 'no steps, no upstream');
  assert.equal(c[0].attributes['net.peer.name'], undefined);
  assert.equal(new Set(roots.map((s) => s.traceId)).size, 3, 'three traces');
});

test('a real proxy, one driver connection: a rejected and a served request, both still pending, export their own steps at the proxy\'s ' +
  'shutdown; /metrics counts them as queued meanwhile', async () => {
  const r = await receiver();
  const closes = new Closes();
  const { proxy, uri } = await withProxy(closes, {
    pipeline: { request: ['filter', 'cache'], response: ['cache'] },
    steps: {
      filter: { config: { rules: [{ name: 'no-secrets', action: 'deny', collections: ['secrets'] }], default: 'allow' } },
      cache: { config: { ttl_ms: 60000 } },
    },
    profiling: { port: 0 },
    telemetry: { otlp_endpoint: r.url, service_name: 'batch-test', sample_rate: 1, export_interval_ms: 3_600_000, max_batch_spans: 100_000 },
  });
  cleanups.push(() => closes.run());
  const client = new MongoClient(uri, { maxPoolSize: 1, serverSelectionTimeoutMS: 5000 });
  await client.connect();
  const db = client.db('app');
  await assert.rejects(db.collection('secrets').findOne({}), /denied by filter rule "no-secrets"/);
  assert.equal((await db.collection('users').find({ a: 1 }).toArray()).length, 0);
  await client.close();
  const metrics = await (await fetch(`${proxy.profilingUrl}/metrics`)).text();
  const queued = Number(/^proxy_trace_spans_queued (\d+)$/m.exec(metrics)?.[1]);
  assert.ok(queued >= 2, `the pending requests' spans are queued (${queued})`);
  assert.equal(r.requests.length, 0, 'nothing exported before the shutdown');

  await closes.run();
  await until('the spans reach the receiver', () => r.spans.length >= queued, 10_000);
  assert.equal(r.spans.length, queued, 'every span queued at the shutdown, exported');
  const root = (coll: string) => {
    const roots = rootsOf(r.spans).filter((s) => s.attributes['db.upstream.collection'] === coll && s.attributes['db.operation'] === 'find');
    assert.equal(roots.length, 1, `one find on ${coll}`);
    return roots[0];
  };
  const secrets = root('secrets');
  const users = root('users');
  const s1 = stepsUnder(traceOf(r.spans, secrets), secrets);
  assert.deepEqual(s1.map((s) => [s.name, s.attributes['proxy.step.error']]), [['proxy.step.filter', true]], 'the rejected request: only its filter step');
  assert.equal(traceOf(r.spans, secrets).some((s) => s.name === 'proxy.upstream'), false);
  const s2 = stepsUnder(traceOf(r.spans, users), users);
  assert.deepEqual(s2.map((s) => `${s.name}/${s.attributes['proxy.step.phase']}`),
    ['proxy.step.filter/request', 'proxy.step.cache/request', 'proxy.step.cache/response'], 'the served request: its three steps');
  assert.ok(traceOf(r.spans, users).some((s) => s.name === 'find users'), 'and its upstream operation');
  for (const s of [...s1, ...s2]) {
    const us = Number(s.endNs - s.startNs) / 1000;
    assert.ok(Math.abs(us - (s.attributes['proxy.step.duration_us'] as number)) <= 1, `${s.name}: its own duration`);
  }
});

test('a pending request whose spans cannot be written (a value the writer refuses) is dropped and counted as export_failed with a warn ' +
  'line; the requests around it are exported and flush() returns', async () => {
  const r = await receiver();
  const warnings: Array<[string, Record<string, unknown>]> = [];
  const log = { ...quiet, warn(msg: string, fields?: Record<string, unknown>) { warnings.push([msg, fields ?? {}]); } };
  const t = new Tracing({
    url: `${r.url}/v1/traces`, protocol: 'http/protobuf', serviceName: 'batch-test', sampleRate: 1, resourceAttributes: {},
    maxQueueSpans: 100_000, maxBatchSpans: 100_000, exportIntervalMs: 60_000, exportTimeoutMs: 5000, semconvStabilityOptIn: '',
  }, log);
  t.record(request('before'));
  // The connection never hands over a command name that is not a string: the writer throws on it.
  t.record({ ...request('bad'), op: undefined as unknown as string });
  t.record(request('after'));
  await t.flush();
  assert.deepEqual(rootsOf(r.spans).map((s) => s.attributes['db.upstream.collection']), ['before', 'after']);
  assert.equal(t.queue.droppedExportFailed, SPANS_PER_REQUEST, 'the unwritable request\'s spans, counted');
  assert.equal(t.queue.exported, 2 * SPANS_PER_REQUEST);
  assert.equal(t.queue.queued, 0);
  assert.deepEqual(warnings.map(([msg, f]) => [msg, f.spans]), [['trace spans could not be written; dropped', SPANS_PER_REQUEST]]);
  // Only an unwritable request pending: the flush finds nothing to export, and returns.
  t.record({ ...request('bad'), op: undefined as unknown as string });
  await t.flush();
  assert.equal(t.queue.droppedExportFailed, 2 * SPANS_PER_REQUEST);
  assert.equal(r.requests.length, 1, 'no empty export');
  await t.close();
});
