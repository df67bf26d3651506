// In-process cost of each built-in step: a `find` and a one-document reply run N times through the
// eight-step pipeline of bench/pipeline-bench.ts (cache entries expire at once, so every find is a
// miss + store), with a recorder summing each step's time (one hrtime pair per step) and its
// sub-operations. No sockets: this is the plugins' own cost, metering included.
// Usage: node --import tsx bench/step-costs.ts [N]
import { serialize, Long } from 'bson';
import { PipelineManager, Exchange, callbackRecorder } from '../runtime/pipeline/index.ts';
import { BUILTIN_PLUGIN_DIR } from '../runtime/app/serve.ts';
import { devNullHostLogger, eightBuiltinsInProcess } from './lib.ts';

const N = Number(process.argv[2] ?? 20000);
const steps = new Map<string, number>();
const subops = new Map<string, number>();
const recorder = callbackRecorder(true,
  (_p, step, phase, ns) => { const k = `${step} ${phase ? 'response' : 'request'}`; steps.set(k, (steps.get(k) ?? 0) + ns); },
  (_p, step, _ph, name, ns) => { const k = `${step} ${name}`; subops.set(k, (subops.get(k) ?? 0) + ns); });
const quiet = devNullHostLogger();
const manager = new PipelineManager({ recorder, pluginDir: BUILTIN_PLUGIN_DIR, logger: quiet });
const pipeline = await manager.load(eightBuiltinsInProcess());
const conn = { id: 1, appName: 'proxy bench', clientAddress: '127.0.0.1:50000', user: '' };
const reply = Buffer.from(serialize({ cursor: { firstBatch: [{ _id: 5, name: 'item-5', qty: 5, tags: ['a', 'b'] }], id: Long.ZERO,
  ns: 'bench.items' }, ok: 1 }));
const t0 = performance.now();
for (let i = 0; i < N; i++) {
  const body = Buffer.from(serialize({ find: 'items', filter: { _id: i % 1000 }, limit: 1, $db: 'bench' }));
  const ex = new Exchange(conn, 'bench', 'find', 'bench', 'items', body, null);
  ex.requestId = i;
  pipeline.runRequest(ex);
  if (ex.verdict === 0) {
    ex.replyBody = reply;
    pipeline.runResponse(ex);
  }
}
const us = (ns: number) => (ns / N / 1000).toFixed(2);
console.log(`${N} requests; ${((performance.now() - t0) * 1000 / N).toFixed(2)} µs per request in all (BSON encoding of the test command included)`);
for (const [k, v] of [...steps].sort((a, b) => b[1] - a[1])) console.log(`${k.padEnd(30)} ${us(v)} µs`);
for (const [k, v] of [...subops].sort((a, b) => b[1] - a[1])) console.log(`  sub-op ${k.padEnd(36)} ${us(v)} µs`);
