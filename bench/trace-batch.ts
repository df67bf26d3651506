// What a sampled request costs when it is rare, in one process: N ordinary requests run between two
// sampled ones (the proxy at sample_rate 1/(N+1)), so the code and data that run only for sampled
// requests — the connection's hand-over to Tracing.record, the span writing, the queue, the export
// stand-in — are as cold as the ordinary traffic leaves them. Every request goes through the same
// traced graph (8 request-phase `continue` steps, as bench/trace-decision.ts); the loop yields to
// the event loop every --turn requests (as the proxy does between reads), so the timers and
// immediates the span queue schedules run inside the measurement, and each round ends with a
// flush, also timed. The export stand-in puts each batch in its envelope and accepts it.
//
//   ordinary — N+1 ordinary requests per cycle;
//   sampled  — N ordinary requests, then one sampled: timed, recorded (Tracing.record).
// µs per sampled request = (sampled − ordinary) / cycles, each side's minimum over interleaved rounds; the
// same with N = 0 (every request sampled, everything hot) is printed beside it for scale.
// --evict KiB: before each cycle's last request, read a buffer of that size (one byte per 64-byte
// line) in both cases, standing for the rest of a running proxy's working set (sockets, other
// connections' buffers, BSON): 0 by default.
//
// Before/after: the script uses Tracing's public API only (record, flush, envelope, the
// encodedExporter part), so the same file run on a tree before the batched span writing (where
// record() wrote a request's spans when it ended) gives the "before" figure.
// Run briefly: node --import tsx bench/trace-batch.ts [--between 100] [--cycles 300] [--rounds 5] [--turn 50] [--evict 0]
import { performance } from 'node:perf_hooks';
import { Tracing, TracingRecorder } from '../runtime/telemetry/index.ts';
import { arg } from './lib.ts';
import { STEPS, idleGraph, plainRequest, quiet, tracedRequest } from './trace-lib.ts';

const BETWEEN = Number(arg('--between', '100'));
const CYCLES = Number(arg('--cycles', '300'));
const ROUNDS = Number(arg('--rounds', '5'));
const TURN = Number(arg('--turn', '50'));
const EVICT = Number(arg('--evict', '0')) * 1024;

let exportedSpans = 0;
function tracing(): Tracing {
  const t: Tracing = new Tracing({
    url: 'http://127.0.0.1:4318/v1/traces', protocol: 'http/protobuf', serviceName: 'bench', sampleRate: 0,
    resourceAttributes: {}, maxQueueSpans: 1 << 20, maxBatchSpans: 512, exportIntervalMs: 1000, exportTimeoutMs: 1000,
  }, quiet, undefined, {
    encodedExporter: {
      export(batch, done) {
        t.envelope!.wrap(batch.bytes);
        exportedSpans += batch.spans;
        done({ code: 0 });
      },
      async shutdown() {},
    },
  });
  return t;
}

const p = await idleGraph(new TracingRecorder(null));
const evictBuf = new Uint8Array(EVICT);
let sink = 0;
const turn = () => new Promise<void>((resolve) => setImmediate(resolve));

function evict(): void {
  for (let i = 0; i < evictBuf.length; i += 64) sink += evictBuf[i];
}

function ordinary(): void {
  plainRequest(p);
}

function sampled(t: Tracing): void {
  tracedRequest(t, p);
}

/** ms for `cycles` cycles of `between` ordinary requests and a last one, sampled when `t` is given; with the closing flush. */
async function run(t: Tracing | null, between: number, cycles: number): Promise<number> {
  let n = 0;
  const t0 = performance.now();
  for (let c = 0; c < cycles; c++) {
    for (let i = 0; i < between; i++) {
      ordinary();
      if (++n % TURN === 0) await turn();
    }
    evict();
    if (t !== null) sampled(t);
    else ordinary();
    if (++n % TURN === 0) await turn();
  }
  if (t !== null) await t.flush();
  return performance.now() - t0;
}

const tr = tracing();
const cases = [
  { name: `1 sampled in ${BETWEEN + 1}`, between: BETWEEN, cycles: CYCLES },
  { name: 'every request sampled', between: 0, cycles: CYCLES * 10 },
];
// Per case, the minimum of each side over the rounds (a warm-up round first, not counted): the
// difference of two minima is far steadier on a shared machine than the minimum of differences.
const baseMs = new Map<string, number>();
const tracedMs = new Map<string, number>();
for (let r = 0; r <= ROUNDS; r++) {
  for (const c of cases) {
    const traced = await run(tr, c.between, c.cycles);
    const base = await run(null, c.between, c.cycles);
    if (r === 0) continue;
    baseMs.set(c.name, Math.min(baseMs.get(c.name) ?? Infinity, base));
    tracedMs.set(c.name, Math.min(tracedMs.get(c.name) ?? Infinity, traced));
    process.stderr.write(`round ${r} ${c.name}: ${base.toFixed(2)} ms ordinary, ${traced.toFixed(2)} ms with sampled\n`);
  }
}
await tr.close();
console.log(`${STEPS} continue steps; a turn of the event loop every ${TURN} requests; evict ${EVICT / 1024} KiB; min of ${ROUNDS} interleaved rounds:`);
for (const c of cases) {
  const us = ((tracedMs.get(c.name)! - baseMs.get(c.name)!) * 1000) / c.cycles;
  console.log(`  ${c.name.padEnd(24)} ${us.toFixed(1).padStart(7)} µs per sampled request (${c.cycles} sampled per round, with their export; ` +
    `ordinary requests ${((baseMs.get(c.name)! * 1000) / (c.cycles * (c.between + 1))).toFixed(2)} µs each)`);
}
console.log(`  spans exported: ${exportedSpans}; dropped: ${tr.queue.dropped}${sink < 0 ? ' ' : ''}`);
