// Where profiling's cost goes in a running proxy: one `proxy serve` child under `--cpu-prof`,
// bench/pipeline-bench.ts's `eight` pipeline, `profiling.enabled` switched off and on by reload
// (SIGHUP) between measured load windows. The V8 CPU profile's samples are split by the windows
// (both sides read CLOCK_MONOTONIC: the profile's timestamps and process.hrtime here), so each
// function's main-thread time per request is had for each state from the same process, the same
// JIT and the same sockets — the between-process noise of pipeline-bench does not enter, and
// neither do idle time or the reload and warm-up between windows.
//
// Prints the main thread's busy µs per request in each state and the functions whose time per
// request differs most. The sampling profiler adds its own cost to both states alike.
//
// With `--compare pipeline` the two states are instead the empty pipeline and the eight
// built-ins (profiling off in both): where the eight steps' cost goes in the running proxy.
//
// Usage: node --import tsx bench/profiling-split.ts [--rounds 4] [--duration 3s] [--connections 16] [--compare profiling|pipeline]
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runBench, parseDuration } from '../runtime/bench/index.ts';
import { arg, eightBuiltinsWire, freePort, startChild, startSeededDevdb, stopChildren } from './lib.ts';

const ROOT = new URL('..', import.meta.url).pathname;
const rounds = Number(arg('--rounds', '4'));
const durationMs = parseDuration(arg('--duration', '3s'));
const connections = Number(arg('--connections', '16'));
const compare = arg('--compare', 'profiling');
if (compare !== 'profiling' && compare !== 'pipeline') throw new Error('--compare: profiling or pipeline');
/** The two states' names: [off, on]. */
const STATES = compare === 'profiling' ? ['profiling off', 'profiling on'] : ['empty pipeline', 'eight built-ins'];

interface ProfileNode { id: number; callFrame: { functionName: string; url: string; lineNumber: number }; children?: number[] }
interface CpuProfile { nodes: ProfileNode[]; startTime: number; samples: number[]; timeDeltas: number[] }

async function main(): Promise<void> {
  const tmp = mkdtempSync(join(tmpdir(), 'profiling-split-'));
  const proxyBin = join(ROOT, 'bin/proxy.mjs');
  const devUri = await startSeededDevdb(ROOT);

  const port = await freePort();
  const file = join(tmp, 'proxy.json');
  const logFile = join(tmp, 'proxy.log');
  const eight = eightBuiltinsWire(devUri, { ttl_ms: 1, max_bytes: 786_432 });
  const config = (on: boolean) => JSON.stringify({
    listen: `127.0.0.1:${port}`, upstream: { uri: devUri }, log: { level: 'info' }, admin: { reload_on_change: false },
    profiling: { enabled: compare === 'profiling' && on, port: 0 },
    ...(compare === 'profiling' || on ? eight : { pipeline: { id: eight.pipeline.id, request: [], response: [] } }),
  });
  writeFileSync(file, config(false));
  const profDir = join(tmp, 'prof');
  const proxy = await startChild('proxy', process.execPath, ['--cpu-prof', `--cpu-prof-dir=${profDir}`, proxyBin, 'serve', '--config', file, '--workers', '1'],
    port, ROOT, logFile);
  const uri = `mongodb://127.0.0.1:${port}`;

  // Each SIGHUP ends in one of these log lines: "configuration reloaded" (also its warn form, keys
  // needing a restart), "configuration unchanged since the last reload" (the file says what the
  // proxy already runs: round 2 on writes the state the previous round ended in), or an error
  // ("configuration reload refused" / "configuration reload failed"), which stops the run.
  let reloads = 0;
  const outcomes = () => readFileSync(logFile, 'utf8').split('\n')
    .filter((l) => /"configuration (reloaded|unchanged since the last reload|reload refused|reload failed)/.test(l));
  const windows: Array<{ on: boolean; t0: number; t1: number; requests: number }> = [];
  for (let r = 0; r < rounds; r++) {
    for (const on of r % 2 === 0 ? [false, true] : [true, false]) {
      writeFileSync(file, config(on));
      proxy.kill('SIGHUP');
      reloads++;
      const until = Date.now() + 15_000;
      let seen = outcomes();
      while (seen.length < reloads) {
        if (Date.now() > until) throw new Error(`no reload outcome logged within 15 s of SIGHUP ${reloads} (${logFile})`);
        await new Promise((res) => setTimeout(res, 20));
        seen = outcomes();
      }
      const failed = seen.find((l) => /"configuration reload (refused|failed)/.test(l));
      if (failed !== undefined) throw new Error(`reload ${reloads} failed: ${failed}`);
      await runBench({ target: uri, connections, durationMs: 700, op: 'find' }); // warm-up, not counted
      const t0 = Number(process.hrtime.bigint() / 1000n);
      const res = await runBench({ target: uri, connections, durationMs, op: 'find' });
      const t1 = Number(process.hrtime.bigint() / 1000n);
      windows.push({ on, t0, t1, requests: res.requests });
      process.stderr.write(`round ${r + 1}/${rounds} ${STATES[on ? 1 : 0]}: ${res.throughput} req/s\n`);
    }
  }
  const exited = new Promise((res) => proxy.once('exit', res));
  proxy.kill('SIGTERM');
  await exited;
  stopChildren();

  const files = readdirSync(profDir).map((f) => join(profDir, f)).sort((a, b) => statSync(b).size - statSync(a).size);
  const prof = JSON.parse(readFileSync(files[0], 'utf8')) as CpuProfile; // the main thread's (the largest)
  rmSync(tmp, { recursive: true, force: true });
  const nodes = new Map(prof.nodes.map((n) => [n.id, n]));
  // Native functions (no script) are named with their caller: `writeBuffer` is both a socket write
  // (under writeGeneric) and a file write (under fs.writeSync, the log sink's flush).
  const parent = new Map<number, ProfileNode>();
  for (const n of prof.nodes) for (const c of n.children ?? []) parent.set(c, n);
  const self = [new Map<string, number>(), new Map<string, number>()]; // [off, on], µs
  const requests = [0, 0];
  for (const w of windows) requests[w.on ? 1 : 0] += w.requests;
  let t = prof.startTime;
  let matched = 0;
  for (let i = 0; i < prof.samples.length; i++) {
    t += prof.timeDeltas[i];
    const w = windows.find((x) => t >= x.t0 && t < x.t1);
    if (w === undefined) continue;
    const node = nodes.get(prof.samples[i])!;
    const cf = node.callFrame;
    if (cf.functionName === '(idle)') continue;
    matched++;
    const caller = cf.url === '' && !cf.functionName.startsWith('(') ? parent.get(node.id)?.callFrame.functionName : undefined;
    const key = `${cf.functionName || '(anonymous)'} ${cf.url.split('/').slice(-2).join('/')}:${cf.lineNumber + 1}${caller === undefined ? '' : ` ` +
      `< ${caller || '(anonymous)'}`}`;
    const m = self[w.on ? 1 : 0];
    m.set(key, (m.get(key) ?? 0) + (prof.timeDeltas[i + 1] ?? prof.timeDeltas[i]));
  }
  if (matched === 0) throw new Error('no profile sample fell in a measured window (clock bases differ?)');
  const perReq = (s: 0 | 1, k: string) => (self[s].get(k) ?? 0) / requests[s];
  const busy = (s: 0 | 1) => [...self[s].values()].reduce((a, b) => a + b, 0) / requests[s];
  console.log(`${rounds} rounds of ${durationMs / 1000} s per state, ${connections} connections; ${requests[0]} requests ` +
    `with ${STATES[0]}, ${requests[1]} with ${STATES[1]}`);
  console.log(`main thread busy: ${busy(0).toFixed(2)} µs/request with ${STATES[0]}, ${busy(1).toFixed(2)} with ${STATES[1]} ` +
    `(${(busy(1) - busy(0) >= 0 ? '+' : '')}${(busy(1) - busy(0)).toFixed(2)})`);
  const keys = [...new Set([...self[0].keys(), ...self[1].keys()])];
  keys.sort((a, b) => Math.abs(perReq(1, b) - perReq(0, b)) - Math.abs(perReq(1, a) - perReq(0, a)));
  console.log(`${'A'.padStart(8)} ${'B'.padStart(8)}   change  function (µs/request; A: ${STATES[0]}, B: ${STATES[1]})`);
  for (const k of keys.slice(0, Number(arg('--top', '25')))) {
    const d = perReq(1, k) - perReq(0, k);
    console.log(`${perReq(0, k).toFixed(3).padStart(8)} ${perReq(1, k).toFixed(3).padStart(8)} ${(d >= 0 ? '+' : '') + d.toFixed(3)}  ${k}`);
  }
}

main().catch((err) => {
  stopChildren();
  process.stderr.write(`profiling-split: ${(err as Error).stack ?? err}\n`);
  process.exit(1);
});
