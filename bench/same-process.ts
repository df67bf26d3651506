// The three throughput targets measured inside one proxy process each, switching what is compared
// by a configuration reload (SIGHUP) between interleaved runs, instead of one process per variant.
//
// Why: bench/pipeline-bench.ts runs each variant in its own `proxy serve` process, and two
// processes running the same code differ from each other by more than the targets' margins on this
// shared 2-core machine (its runs of 2026-11-26 put the same build's tracing at 0.87×, 0.95× and
// 1.05× of `eight`; see RESULTS.md). Within one process a variant and its baseline share the heap,
// the JIT's shared code and the kernel's socket state, so what differs is what the variant adds.
// What the reload switches is exactly what a user switches: `profiling.enabled`,
// `telemetry.sample_rate` and the pipeline (all apply on reload; docs/configuration.md).
//
//   process A — `eight` (bench/pipeline-bench.ts's eight built-ins: cache ttl_ms 1, so every find
//     is a miss + store) with a `profiling` block and a `telemetry` block (OTLP/protobuf to a
//     collector stand-in in this process), switched between:
//       empty       — the empty pipeline (profiling off, sample_rate 0);
//       eight       — profiling.enabled false, telemetry.sample_rate 0;
//       eight-prof  — profiling.enabled true;
//       eight-trace — telemetry.sample_rate 0.01.
//     Tracing "off" is sample_rate 0 here: with export configured and nothing sampled a request
//     costs one comparison more than with no telemetry block (bench/trace-decision.ts measures
//     that in process: "sample_rate 0" against "off").
//   process B — the cache-full target of issue 8: the eight built-ins with cache max_bytes 16 MiB,
//     ttl 60 s, kv_max_bytes 16 MiB + 64 KiB, every find a distinct cache key (bench/cache-full.ts's
//     load), against the empty pipeline. Switching to the empty pipeline drops the cache's store,
//     so each eight-16m run is preceded by a fill (distinct finds until the store evicts).
//
// Each run: reload, 500 ms of warm-up load (not counted), then the measured run. Rounds rotate the
// order. Figures are medians; each ratio is the median of the per-round ratios (a variant and its
// baseline measured minutes apart would carry the machine's drift), with the range over rounds.
// CPU µs/request = the proxy's utime + stime (/proc) over the run's requests.
//
// Usage: node --import tsx bench/same-process.ts [--rounds 5] [--duration 3s] [--label text]
//        [--output bench/RESULTS.md] [--skip-cache-full]
import { spawnSync } from 'node:child_process';
import { createServer } from 'node:http';
import { closeSync, mkdtempSync, openSync, readSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { runBench, parseDuration } from '../runtime/bench/index.ts';
import { arg, cpuMicros, distinctKeyRun, eightBuiltinsWire, freePort, median, startChild, startSeededDevdb, stopChildren, writeResultsSection } from './lib.ts';

const ROOT = new URL('..', import.meta.url).pathname;
const durationText = arg('--duration', '3s');
const durationMs = parseDuration(durationText);
const rounds = Number(arg('--rounds', '5'));
const label = arg('--label', 'current');
const output = arg('--output', join(ROOT, 'bench/RESULTS.md'));
const cacheFull = !process.argv.includes('--skip-cache-full');
const argvText = process.argv.slice(2).join(' ');
const WARMUP_MS = 500;

type StateA = 'empty' | 'eight' | 'eight-prof' | 'eight-trace' | 'eight-spin2';
const calibrate = process.argv.includes('--calibrate');
const STATES_A: readonly StateA[] = ['empty', 'eight', 'eight-prof', 'eight-trace', ...(calibrate ? ['eight-spin2' as const] : [])];
type StateB = 'empty-distinct' | 'eight-16m';
const CONNECTION_COUNTS = [16, 1] as const;

const EMPTY = { pipeline: { id: 'bench', request: [], response: [] }, steps: {} };

/** A proxy child whose configuration file the bench rewrites and reloads. */
class Reloadable {
  readonly uri: string;
  private state = '';
  constructor(readonly name: string, readonly pid: number, readonly port: number, readonly file: string, readonly logFile: string,
    private readonly base: object, private readonly variants: Record<string, object>) {
    this.uri = `mongodb://127.0.0.1:${port}`;
  }

  static config(port: number, base: object, variant: object): string {
    return JSON.stringify({ listen: `127.0.0.1:${port}`, log: { level: 'info' }, admin: { reload_on_change: false }, ...base, ...variant });
  }

  /** Switches to `state` (rewrite + SIGHUP) and waits for the proxy's "configuration reloaded" line. */
  async use(state: string): Promise<void> {
    if (state === this.state) return;
    this.logAt = statSync(this.logFile).size;
    writeFileSync(this.file, Reloadable.config(this.port, this.base, this.variants[state]));
    process.kill(this.pid, 'SIGHUP');
    const until = Date.now() + 15_000;
    let text = '';
    while (!text.includes('configuration reload')) {
      if (Date.now() > until) throw new Error(`${this.name}: no reload within 15 s (${this.logFile})`);
      await new Promise((r) => setTimeout(r, 20));
      text += this.newLog();
    }
    if (text.includes('configuration reload refused')) throw new Error(`${this.name}: reload ` +
      `refused: ${text.slice(text.indexOf('configuration reload refused') - 200, text.indexOf('configuration reload refused') + 400)}`);
    if (text.includes('take effect only after a restart')) throw new Error(`${this.name}: a switch needed a restart (${this.logFile})`);
    this.state = state;
  }

  private logAt = 0;
  /** What the proxy logged since the last read (only the new bytes: the access log grows by MB/s). */
  private newLog(): string {
    const size = statSync(this.logFile).size;
    if (size <= this.logAt) return '';
    const buf = Buffer.alloc(size - this.logAt);
    const fd = openSync(this.logFile, 'r');
    try {
      readSync(fd, buf, 0, buf.length, this.logAt);
    } finally {
      closeSync(fd);
    }
    this.logAt = size;
    return buf.toString('utf8');
  }
}

interface Sample { tp: number; p50: number; cpu: number; errors: number }

async function main(): Promise<void> {
  const tmp = mkdtempSync(join(tmpdir(), 'same-process-'));
  const proxyBin = join(ROOT, 'bin/proxy.mjs');
  const devUri = await startSeededDevdb(ROOT);

  let exportRequests = 0;
  const collector = createServer((req, res) => {
    req.resume();
    req.on('end', () => { exportRequests++; res.writeHead(200, { 'content-type': 'application/x-protobuf' }); res.end(); });
  });
  await new Promise<void>((r) => collector.listen(0, '127.0.0.1', r));
  const collectorUrl = `http://127.0.0.1:${(collector.address() as { port: number }).port}`;

  async function start(name: string, base: object, variants: Record<string, object>, first: string): Promise<Reloadable> {
    const port = await freePort();
    const file = join(tmp, `${name}.json`);
    const logFile = join(tmp, `${name}.log`);
    writeFileSync(file, Reloadable.config(port, base, variants[first]));
    const child = await startChild(`proxy ${name}`, process.execPath, [proxyBin, 'serve', '--config', file, '--workers', '1'], port, ROOT, logFile);
    const p = new Reloadable(name, child.pid!, port, file, logFile, base, variants);
    await p.use(first); // a reload before measuring: every state measured is a reloaded one
    return p;
  }

  const prof = (enabled: boolean) => ({ enabled, port: 0 });
  const tel = (rate: number) => ({ otlp_endpoint: collectorUrl, sample_rate: rate });
  const eightA = eightBuiltinsWire(devUri, { ttl_ms: 1, max_bytes: 786_432 });
  const a = await start('a', { upstream: { uri: devUri } }, {
    empty: { ...EMPTY, profiling: prof(false), telemetry: tel(0) },
    eight: { ...eightA, profiling: prof(false), telemetry: tel(0) },
    'eight-prof': { ...eightA, profiling: prof(true), telemetry: tel(0) },
    'eight-trace': { ...eightA, profiling: prof(false), telemetry: tel(0.01) },
    // --calibrate: `eight` plus a step that busy-waits 2 µs per request (the test fixture spin.wasm):
    // a known CPU cost, to see what a known cost per request becomes over the wire.
    'eight-spin2': {
      pipeline: { ...eightA.pipeline, request: [...eightA.pipeline.request, 'spin'] },
      steps: { ...eightA.steps, spin: { module: join(ROOT, 'build/test-plugins/spin.wasm'), config: { us: 2 } } },
      profiling: prof(false), telemetry: tel(0),
    },
  }, 'empty');

  const samplesA = new Map<string, Sample[]>();
  const perRound = new Map<string, number[]>(); // `${variant}/${baseline}/${c}` → ratios
  const measureA = async (s: StateA, c: number, ms: number): Promise<Sample> => {
    await a.use(s);
    await runBench({ target: a.uri, connections: c, durationMs: WARMUP_MS, op: 'find' });
    const before = cpuMicros(a.pid);
    const r = await runBench({ target: a.uri, connections: c, durationMs: ms, op: 'find' });
    return { tp: r.throughput, p50: r.latencyUs.p50, cpu: (cpuMicros(a.pid) - before) / Math.max(1, r.requests), errors: r.errors };
  };
  process.stderr.write('process A: warming up…\n');
  for (const s of STATES_A) await measureA(s, 16, 1000);
  for (let r = 0; r < rounds; r++) {
    const order = STATES_A.map((_, i) => STATES_A[(i + r) % STATES_A.length]);
    for (const c of CONNECTION_COUNTS) {
      const got = new Map<StateA, Sample>();
      for (const s of order) {
        const x = await measureA(s, c, durationMs);
        got.set(s, x);
        const key = `${s}/${c}`;
        if (!samplesA.has(key)) samplesA.set(key, []);
        samplesA.get(key)!.push(x);
        process.stderr.write(`A round ${r + 1}/${rounds} ${s.padEnd(11)} c=${String(c).padStart(2)}: ${x.tp} req/s, p50 ${x.p50} µs, ` +
          `cpu ${x.cpu.toFixed(1)} µs/req, errors ${x.errors}\n`);
      }
      for (const [v, b] of [['eight', 'empty'], ['eight-prof', 'eight'], ['eight-trace', 'eight'],
        ...(calibrate ? [['eight-spin2', 'eight'] as const] : [])] as const) {
        const k = `${v}/${b}/${c}`;
        if (!perRound.has(k)) perRound.set(k, []);
        perRound.get(k)!.push(got.get(v)!.tp / got.get(b)!.tp);
      }
    }
  }

  const samplesB = new Map<StateB, Sample[]>();
  if (cacheFull) {
    const b = await start('b', { upstream: { uri: devUri } }, {
      'empty-distinct': EMPTY,
      'eight-16m': eightBuiltinsWire(devUri, { ttl_ms: 60_000, max_bytes: 16 << 20 }, (16 << 20) + 65536),
    }, 'empty-distinct');
    const measureB = async (s: StateB, ms: number): Promise<Sample> => {
      await b.use(s);
      // The eight-16m store starts empty after each switch: fill it (distinct keys) until it evicts.
      await distinctKeyRun(b.port, 16, s === 'eight-16m' ? 6000 : WARMUP_MS);
      const before = cpuMicros(b.pid);
      const r = await distinctKeyRun(b.port, 16, ms);
      return { tp: r.throughput, p50: r.p50, cpu: (cpuMicros(b.pid) - before) / Math.max(1, r.requests), errors: r.errors };
    };
    const order: StateB[] = ['empty-distinct', 'eight-16m'];
    for (let r = 0; r < rounds; r++) {
      const got = new Map<StateB, Sample>();
      for (let i = 0; i < order.length; i++) {
        const s = order[(i + r) % order.length];
        const x = await measureB(s, durationMs);
        got.set(s, x);
        if (!samplesB.has(s)) samplesB.set(s, []);
        samplesB.get(s)!.push(x);
        process.stderr.write(`B round ${r + 1}/${rounds} ${s.padEnd(14)}: ${x.tp} req/s, p50 ${x.p50} µs, cpu ${x.cpu.toFixed(1)} µs/req, ` +
          `errors ${x.errors}\n`);
      }
      const k = 'eight-16m/empty-distinct/16';
      if (!perRound.has(k)) perRound.set(k, []);
      perRound.get(k)!.push(got.get('eight-16m')!.tp / got.get('empty-distinct')!.tp);
    }
  }
  stopChildren();
  collector.close();
  rmSync(tmp, { recursive: true, force: true });

  const names: Record<string, string> = {
    empty: 'empty pipeline', eight: 'eight built-ins (cache misses)', 'eight-prof': 'eight built-ins, profiling on',
    'eight-trace': 'eight built-ins, tracing at sample_rate 0.01', 'empty-distinct': 'empty pipeline, distinct keys',
    'eight-16m': 'eight built-ins, cache 16 MiB full, distinct keys',
    'eight-spin2': 'eight built-ins + a step busy-waiting 2 µs (calibration)',
  };
  const L: string[] = [];
  L.push(`## Same-process A/B — ${label}`, '');
  L.push(`- Command: \`node --import tsx bench/same-process.ts ${argvText}\``);
  L.push(`- Date: ${new Date().toISOString()}; git ${spawnSync('git', ['rev-parse', '--short', 'HEAD'],
    { cwd: ROOT, encoding: 'utf8' }).stdout.trim()} + working tree`);
  L.push(`- Machine: ${cpus().length} cores (${cpus()[0]?.model.trim() ?? '?'}), Node ${process.version}; load generator, devdb and the proxy ` +
    `share the cores. ${rounds} rounds of ${durationText} per cell after a ${WARMUP_MS} ms warm-up; variants switched by reload inside one proxy ` +
    `process (bench/same-process.ts header).`);
  L.push('');
  L.push('| process | state | connections | throughput (req/s) | p50 (µs) | proxy CPU µs/request | errors |');
  L.push('|---|---|---:|---:|---:|---:|---:|');
  for (const c of CONNECTION_COUNTS) for (const s of STATES_A) {
    const ss = samplesA.get(`${s}/${c}`)!;
    L.push(`| A | ${names[s]} | ${c} | ${Math.round(median(ss.map((x) => x.tp))).toLocaleString('en-US')} | ${median(ss.map((x) => x.p50))} ` +
      `| ${median(ss.map((x) => x.cpu)).toFixed(1)} | ${ss.reduce((n, x) => n + x.errors, 0)} |`);
  }
  for (const [s, ss] of samplesB) {
    L.push(`| B | ${names[s]} | 16 | ${Math.round(median(ss.map((x) => x.tp))).toLocaleString('en-US')} | ${median(ss.map((x) => x.p50))} ` +
      `| ${median(ss.map((x) => x.cpu)).toFixed(1)} | ${ss.reduce((n, x) => n + x.errors, 0)} |`);
  }
  L.push('', '### Targets (median of the per-round ratios; range over rounds)', '');
  const ratio = (k: string) => {
    const xs = perRound.get(k)!;
    return { m: median(xs), lo: Math.min(...xs), hi: Math.max(...xs) };
  };
  const line = (what: string, k: string, target: number) => {
    if (!perRound.has(k)) return;
    const r = ratio(k);
    L.push(`- ${what}: ${r.m.toFixed(3)}× (rounds ${r.lo.toFixed(3)}–${r.hi.toFixed(3)}) — target ≥ ${target}× — **${r.m >= target ? 'PASS' : 'FAIL'}**`);
  };
  for (const c of CONNECTION_COUNTS) {
    const cs = `${c} connection${c === 1 ? '' : 's'}`;
    if (c === 16) line(`Issue 8: eight built-ins vs empty pipeline, ${cs}`, `eight/empty/${c}`, 0.85);
    else {
      const r = ratio(`eight/empty/${c}`);
      L.push(`- (Issue 8's target is at 16 connections; at ${cs} the eight built-ins make ${r.m.toFixed(3)}× of the empty pipeline, ` +
        `rounds ${r.lo.toFixed(3)}–${r.hi.toFixed(3)}: one request at a time pays every step's latency.)`);
    }
    line(`Issue 9: profiling on vs off (eight built-ins), ${cs}`, `eight-prof/eight/${c}`, 0.97);
    line(`Issue 10: tracing at sample_rate 0.01 vs 0 (eight built-ins), ${cs}`, `eight-trace/eight/${c}`, 0.98);
    if (calibrate) {
      const k = `eight-spin2/eight/${c}`;
      const r = ratio(k);
      const cpu = (st: StateA) => median(samplesA.get(`${st}/${c}`)!.map((x) => x.cpu));
      L.push(`- Calibration, ${cs}: a known 2 µs busy-wait step: ${r.m.toFixed(3)}× (rounds ${r.lo.toFixed(3)}–${r.hi.toFixed(3)}), proxy CPU ` +
        `+${(cpu('eight-spin2') - cpu('eight')).toFixed(1)} µs/request (profiling on: +${(cpu('eight-prof') - cpu('eight')).toFixed(1)})`);
    }
  }
  line('Issue 8: eight built-ins with a full 16 MiB cache, distinct keys, vs empty pipeline, 16 connections', 'eight-16m/empty-distinct/16', 0.85);
  L.push(`- ${exportRequests} OTLP export requests reached the collector stand-in.`, '');
  const section = L.join('\n');

  writeResultsSection(output, `## Same-process A/B — ${label}`, section);
  process.stdout.write(section + '\n');
}

main().catch((err) => {
  stopChildren();
  process.stderr.write(`same-process: ${(err as Error).stack ?? err}\n`);
  process.exit(1);
});
