// The eight built-ins' pipeline (bench/crossover-config.mjs: request rate_limit, auth, filter, route,
// transform, cache; response cache, transform, metrics, logging; a 16 MiB cache) run in this one
// process without sockets, to read the steps' WebAssembly and host-call cost per request apart
// from the wire. Every command is distinct (4,096 bodies cycle, each with the request's sequence
// number written over its filter's _id), so in the steady state every request is a miss, a store
// and an eviction, as in the crossover run. (With the 4,096 commands alone the host store, at
// ~240 bytes an entry, held all of them: the misses came only from the ledger deleting the entry
// stored again since, which the crossover run's distinct keys never do.)
// Usage: node --import tsx bench/eight-inprocess.ts [requests per round, 200000] ['<config fragment JSON>']
//   prints ns/request over 5 rounds (after a warm-up round), sorted, and their median; then the
//   process's CPU time per request (all threads: GC helpers too), its minimum and median round.
//   COUNT=1            also prints host calls per request, by step and import
//   DROP=f1,f2         replaces these host imports with no-ops (what a host call costs; not a real run)
//   PLUGIN_DIR=<dir>   loads the plugins from <dir> instead of build/plugins (A/B of two builds)
// The machine is shared: compare two states by alternating runs, several pairs.
import { serialize, Long } from 'bson';
import { PipelineManager, Exchange } from '../runtime/pipeline/index.ts';
import { BUILTIN_PLUGIN_DIR } from '../runtime/app/serve.ts';
import { PluginInstance } from '../runtime/wasm/plugin-instance.ts';
import { devNullHostLogger } from './lib.ts';
import { execFileSync } from 'node:child_process';

const N = Number(process.argv[2] ?? 200000);
const counts = new Map<string, number>();
if (process.env.DROP) {
  const drop = process.env.DROP.split(',');
  const orig = (PluginInstance.prototype as any).imports;
  (PluginInstance.prototype as any).imports = function () {
    const imps = orig.call(this);
    for (const k of drop) imps[k] = k.includes('number') ? (() => 1) : (() => {});
    return imps;
  };
}
if (process.env.COUNT) {
  const orig = (PluginInstance.prototype as any).imports;
  (PluginInstance.prototype as any).imports = function () {
    const imps = orig.call(this);
    const step = this.services.step;
    for (const k of Object.keys(imps)) {
      const f = imps[k]; const key = `${step} ${k}`;
      imps[k] = (...a: any[]) => { counts.set(key, (counts.get(key) ?? 0) + 1); return f(...a); };
    }
    return imps;
  };
}
const cfg = JSON.parse(execFileSync('node', ['bench/crossover-config.mjs', '1', '2', process.argv[3] ?? '{}'], { encoding: 'utf8' }));
const quiet = devNullHostLogger();
const manager = new PipelineManager({ recorder: null, pluginDir: process.env.PLUGIN_DIR ?? BUILTIN_PLUGIN_DIR, logger: quiet } as any);
const pipeline = await manager.load({ pipeline: { id: 'bench', ...cfg.pipeline }, steps: cfg.steps } as any);
const conn = { id: 1, appName: 'proxy bench', clientAddress: '127.0.0.1:50000', user: '' };
const reply = Buffer.from(serialize({ cursor: { firstBatch: [{ _id: 5, name: 'item-5', qty: 5, tags: ['a', 'b'] }], id: Long.ZERO,
  ns: 'bench.items' }, ok: 1 }));
const bodies: Buffer[] = [];
/** Where each body's filter._id (an int32) lies: the request's sequence number is written there. */
const idAt: number[] = [];
const ID_FIELD = Buffer.from([0x10, 0x5f, 0x69, 0x64, 0]); // int32 "_id"
for (let i = 0; i < 4096; i++) {
  const b = Buffer.from(serialize({ find: 'items', filter: { _id: i, n: 'x'.repeat(i % 7) }, limit: 1, $db: 'bench' }));
  bodies.push(b);
  idAt.push(b.indexOf(ID_FIELD) + ID_FIELD.length);
}
let seq = 0;
let cpuNs = 0;
function run(n: number): number {
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  for (let i = 0; i < n; i++) {
    const body = bodies[i & 4095]!;
    body.writeInt32LE(seq & 0x7fffffff, idAt[i & 4095]!); // a distinct command per request
    const ex = new Exchange(conn, 'bench', 'find', 'bench', 'items', body, null);
    ex.requestId = seq++;
    ex.newRequest = null;
    pipeline.runRequest(ex);
    if (ex.verdict === 0) { ex.replyBody = reply; pipeline.runResponse(ex); }
  }
  const c = process.cpuUsage(c0);
  cpuNs = (c.user + c.system) * 1e3 / n;
  return (performance.now() - t0) * 1e6 / n;
}
run(50000);
const r: number[] = [];
const cpu: number[] = [];
for (let k = 0; k < 5; k++) { r.push(run(N)); cpu.push(cpuNs); }
r.sort((a, b) => a - b);
cpu.sort((a, b) => a - b);
console.log('ns/request', r.map((x) => x.toFixed(0)).join(' '), 'median', r[2]!.toFixed(0), '| process CPU ns/request min', cpu[0]!.toFixed(0),
  'median', cpu[2]!.toFixed(0));
if (process.env.COUNT) { const tot = 5 * N + 50000; for (const [k, v] of [...counts].sort()) console.log((v / tot).toFixed(2), k); }
