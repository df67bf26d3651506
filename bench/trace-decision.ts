// What tracing costs a request, in one process (no sockets, no noise from other processes): the
// same request through 8 request-phase `continue` steps (a plugin whose onRequest does nothing —
// the steps are as cheap as steps get, so the relative cost shown is the worst case), with
//   off   — no tracing: the untimed loop;
//   0     — tracing on, sample_rate 0: the per-request decision, then the untimed loop;
//   0.01  — tracing on, sample_rate 0.01: 1% of requests timed and turned into spans (built and
//           queued for an exporter that accepts at once), 99% as above;
//   1     — every request traced (for scale);
//   1, ReadableSpans — every request traced on the http/json path's way: ReadableSpans with their
//           attribute objects, encoded at export by the SDK's ProtobufTraceSerializer.
// The other cases take the http/protobuf path: a sampled request's end copies what its spans need
// into the pending store, and the spans are written as protobuf in one pass before each export
// (runtime/telemetry/span-writer.ts) — in this loop, at the closing flush, so the writing shows in
// the "with export" column; the exporter stand-in puts each batch in its envelope. What an
// export costs (the envelope copy, or the SDK's encoding) runs off the request's turn, on the export
// timer, but it is CPU the proxy spends for tracing, so it is reported per request beside the
// request-path cost ("with export"), and per span.
// Rounds interleaved, the minimum of each case kept (the machine is shared).
// Run: node --import tsx bench/trace-decision.ts [--rounds 7]
import { performance } from 'node:perf_hooks';
import type { Pipeline } from '../runtime/pipeline/index.ts';
import { Tracing, TracingRecorder } from '../runtime/telemetry/index.ts';
import type { ReadableSpan, SpanExporter } from '@opentelemetry/sdk-trace-node';
import { ProtobufTraceSerializer } from '@opentelemetry/otlp-transformer';
import type { EncodedSpanExporter } from '../runtime/telemetry/span-queue.ts';
import { arg } from './lib.ts';
import { STEPS, idleGraph, plainRequest, quiet, tracedRequest } from './trace-lib.ts';

const ITER = 20_000;
const ROUNDS = Number(arg('--rounds', '7'));

let exportedSpans = 0;
let exportedBytes = 0;
let exportNs = 0;
/** The http/json path's exporter stand-in: ReadableSpans, encoded by the SDK's protobuf serializer (timed as export). */
const readableExporter: SpanExporter = {
  export(spans: ReadableSpan[], done) {
    const t0 = performance.now();
    exportedBytes += ProtobufTraceSerializer.serializeRequest(spans)?.length ?? 0;
    exportNs += (performance.now() - t0) * 1e6;
    exportedSpans += spans.length;
    done({ code: 0 });
  },
  async shutdown() {},
};
/** The http/protobuf path's stand-in: batches already encoded, put in their envelope (timed as export). */
function encodedExporter(t: () => Tracing): EncodedSpanExporter {
  return {
    export(batch, done) {
      const t0 = performance.now();
      exportedBytes += t().envelope!.wrap(batch.bytes).length;
      exportNs += (performance.now() - t0) * 1e6;
      exportedSpans += batch.spans;
      done({ code: 0 });
    },
    async shutdown() {},
  };
}

function tracing(rate: number, readable = false): Tracing {
  const settings = {
    url: 'http://127.0.0.1:4318/v1/traces', protocol: 'http/protobuf' as const, serviceName: 'bench', sampleRate: rate,
    resourceAttributes: {}, maxQueueSpans: 1 << 20, maxBatchSpans: 512, exportIntervalMs: 1000, exportTimeoutMs: 1000,
  };
  if (readable) return new Tracing(settings, quiet, readableExporter);
  const t: Tracing = new Tracing(settings, quiet, undefined, { encodedExporter: encodedExporter(() => t) });
  return t;
}

const plain = await idleGraph();
const traced = await idleGraph(new TracingRecorder(null));
const cases: Array<{ name: string; t: Tracing | null; p: Pipeline }> = [
  { name: 'off', t: null, p: plain },
  { name: 'sample_rate 0', t: tracing(0), p: traced },
  { name: 'sample_rate 0.01', t: tracing(0.01), p: traced },
  { name: 'sample_rate 1', t: tracing(1), p: traced },
  { name: '1, ReadableSpans', t: tracing(1, true), p: traced },
];

/** ns per request: the connection's part of the work (decision, phase start, spans for sampled ones). */
function run(c: (typeof cases)[number]): number {
  const t = c.t;
  const p = c.p;
  const t0 = performance.now();
  for (let i = 0; i < ITER; i++) {
    const readAt = performance.now();
    if (t !== null && t.sample(null)) tracedRequest(t, p, readAt);
    else plainRequest(p);
  }
  return ((performance.now() - t0) * 1e6) / ITER;
}

const best = new Map<string, number>();
const exportPerRequest = new Map<string, number>();
/** Per case: ns of encoding per span exported (in the loop and at the flush), the minimum over rounds. */
const encodingPerSpan = new Map<string, number>();
for (let r = 0; r < ROUNDS; r++) {
  for (const c of cases) {
    const spans0 = exportedSpans;
    const ns0 = exportNs;
    const ns = run(c);
    best.set(c.name, Math.min(best.get(c.name) ?? Infinity, ns));
    const before = exportNs;
    await c.t?.flush();
    exportPerRequest.set(c.name, Math.min(exportPerRequest.get(c.name) ?? Infinity, (exportNs - before) / ITER));
    if (exportedSpans > spans0) {
      encodingPerSpan.set(c.name, Math.min(encodingPerSpan.get(c.name) ?? Infinity, (exportNs - ns0) / (exportedSpans - spans0)));
    }
    process.stderr.write(`round ${r + 1} ${c.name}: ${ns.toFixed(0)} ns\n`);
  }
}
const off = best.get('off')!;
console.log(`${STEPS} continue steps, ${ITER} requests per round, min of ${ROUNDS} interleaved rounds:`);
for (const c of cases) {
  const ns = best.get(c.name)!;
  const ex = exportPerRequest.get(c.name) ?? 0;
  console.log(`  tracing ${c.name.padEnd(16)} ${ns.toFixed(0).padStart(6)} ns/request  (${(off / ns).toFixed(3)}× the throughput of off, ` +
    `+${(ns - off).toFixed(0)} ns)` +
    `; with export encoding +${(ns + ex - off).toFixed(0)} ns (${(off / (ns + ex)).toFixed(3)}×)` +
    (encodingPerSpan.has(c.name) ? `; encoding ${encodingPerSpan.get(c.name)!.toFixed(0)} ns/span` : ''));
}
console.log(`  spans exported: ${exportedSpans} (${(exportedBytes / Math.max(1, exportedSpans)).toFixed(0)} protobuf bytes ` +
  `and ${(exportNs / Math.max(1, exportedSpans)).toFixed(0)} ns of encoding per span, over all rounds)`);
