// What profiling costs per request, in process: the eight built-ins of bench/pipeline-bench.ts run
// a `find` and its reply through two graphs — one built with profiling off (the untimed loop), one
// with the real Profiler on (timed loop, sub-operations of the requests whose frame the ring keeps, RequestTimings, commit into the
// histograms and the frame ring, as a client connection does per request). Rounds interleaved,
// minimum of each kept: the machine is shared. No sockets, so the difference is profiling's alone.
//
// --evict-kb N writes one double in each 64-byte line of an N KiB array after every request, in
// both states alike: a stand-in for what the rest of a running proxy's request (sockets, buffers,
// the other process on the core) does to the CPU's caches between two requests, so that the records'
// cost with their data out of the nearest caches can be read here too.
//
// --offered-rate R gives the flame-graph ring a clock that advances 1000 / R ms per request, so it
// keeps the share of requests' frames (with their sub-operations timed) that a proxy serving R
// requests a second keeps — flamegraph_frames per 60 s — rather than the far smaller share of a
// loop running as fast as it can.
//
// Usage: node --import tsx bench/profiling-cost.ts [--rounds 8] [--requests 20000] [--evict-kb 0] [--offered-rate 0]
import { performance } from 'node:perf_hooks';
import { serialize, Long } from 'bson';
import { PipelineManager, Exchange, type Pipeline } from '../runtime/pipeline/index.ts';
import { RequestTimings } from '../runtime/pipeline/request-timings.ts';
import { BUILTIN_PLUGIN_DIR, profilingSettings } from '../runtime/app/serve.ts';
import { Profiler, type CompletedRequest } from '../runtime/profiling/index.ts';
import { parseConfig } from '../runtime/config/index.ts';
import { arg, devNullHostLogger, eightBuiltinsInProcess } from './lib.ts';

const rounds = Number(arg('--rounds', '8'));
const requests = Number(arg('--requests', '20000'));
const evictKb = Number(arg('--evict-kb', '0'));
const evict = new Float64Array(evictKb * 128);
const offeredRate = Number(arg('--offered-rate', '0'));
let virtualMs = 0;
let framedCount = 0, timedCount = 0;
const hostLog = devNullHostLogger();
const config = eightBuiltinsInProcess();
const profiler = await Profiler.create(profilingSettings(parseConfig({ profiling: { enabled: true } }, null).profiling!), { warn() {} });
const off = await new PipelineManager({ pluginDir: BUILTIN_PLUGIN_DIR, logger: hostLog }).load(config);
const on = await new PipelineManager({ pluginDir: BUILTIN_PLUGIN_DIR, logger: hostLog, recorder: profiler }).load(config);

const conn = { id: 1, appName: 'proxy bench', clientAddress: '127.0.0.1:50000', user: '' };
const reply = Buffer.from(serialize({ cursor: { firstBatch: [{ _id: 5, name: 'item-5', qty: 5, tags: ['a', 'b'] }], id: Long.ZERO,
  ns: 'bench.items' }, ok: 1 }));
const bodies = Array.from({ length: 1000 }, (_, i) => Buffer.from(serialize({ find: 'items', filter: { _id: i }, limit: 1, $db: 'bench' })));
const timings = new RequestTimings();
const completed: CompletedRequest = { pipelineId: 'bench', variant: 'baseline', op: 'find', collection: 'items', totalNs: 0, acquireNs: 0,
  upstreamNs: 0, ok: true, timings };

function run(p: Pipeline, timed: boolean): number {
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < requests; i++) {
    const ex = new Exchange(conn, 'bench', 'find', 'bench', 'items', bodies[i % 1000]!, null);
    ex.requestId = i;
    if (timed) {
      // As a client connection does (RequestRecord.begin): sub-operations are timed only when the
      // flame-graph ring keeps the request's frame (all of them below flamegraph_frames per minute).
      timings.reset();
      const framed = profiler.admitFrame(offeredRate > 0 ? (virtualMs += 1000 / offeredRate) : performance.now());
      timedCount++;
      if (framed) framedCount++;
      timings.subops = framed;
      // Without sampling filters step times go straight to the histograms, and are stored for the
      // request only when its frame is kept.
      const direct = profiler.recordsDirect;
      timings.direct = direct;
      timings.keep = !direct || framed;
      completed.framed = framed;
      ex.timings = timings;
    }
    p.runRequest(ex);
    if (ex.verdict === 0) {
      ex.replyBody = reply;
      p.runResponse(ex);
    }
    if (evictKb > 0) for (let k = 0; k < evict.length; k += 8) evict[k]++;
    if (timed) {
      completed.totalNs = 150_000; completed.upstreamNs = 100_000;
      profiler.commit(completed);
    }
  }
  return Number(process.hrtime.bigint() - t0) / requests;
}

let bestOff = Infinity, bestOn = Infinity;
for (let r = 0; r < rounds; r++) {
  bestOff = Math.min(bestOff, run(off, false));
  bestOn = Math.min(bestOn, run(on, true));
}
console.log(`eight built-ins, profiling off: ${bestOff.toFixed(0)} ns/request; on: ${bestOn.toFixed(0)} ns/request; `
  + `profiling costs ${(bestOn - bestOff).toFixed(0)} ns/request (min of ${rounds} interleaved rounds of ${requests}; `
  + `${(100 * framedCount / timedCount).toFixed(2)} % of requests framed${offeredRate > 0 ? ` at ${offeredRate} req/s offered` : ''})`);
