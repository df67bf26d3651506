// Shared pieces of the bench scripts: command-line arguments, child processes that must be
// listening before a run starts, and the CPU time of a process from /proc.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { closeSync, existsSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import { connect, createServer } from 'node:net';
import { join } from 'node:path';
import { serialize } from 'bson';
import * as hdr from 'hdr-histogram-js';
import { runBench } from '../runtime/bench/index.ts';
import { BenchConnection, RunTally } from '../runtime/bench/bench-connection.ts';
import { encodeOpMsg } from '../runtime/wire/index.ts';
import { Logger, BufferedFdSink } from '../runtime/log/index.ts';
import type { PipelineConfig } from '../runtime/pipeline/index.ts';

export function arg(name: string, fallback: string): string {
  const i = process.argv.indexOf(name);
  return i > 0 && i + 1 < process.argv.length ? process.argv[i + 1] : fallback;
}

export const CLK_TCK = Number(spawnSync('getconf', ['CLK_TCK']).stdout?.toString().trim() || 100);

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

export function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const c = connect({ host: '127.0.0.1', port });
    c.once('connect', () => { c.destroy(); resolve(true); });
    c.once('error', () => resolve(false));
  });
}

/** Child processes started by startChild, killed by stopChildren. */
export const children: ChildProcess[] = [];

/**
 * Starts a child and waits until it accepts connections on `port`. Its stderr goes to `logFile`
 * (a production-like log file: never a pipe into the bench process, whose CPU the load generator
 * needs) or, without one, is kept in memory for the error message.
 */
export async function startChild(name: string, cmd: string, args: string[], port: number, cwd: string,
  logFile: string | null = null, timeoutMs = 30_000): Promise<ChildProcess> {
  const out = logFile === null ? 'pipe' : openSync(logFile, 'w');
  const child = spawn(cmd, args, { cwd, stdio: ['ignore', 'ignore', out] });
  if (typeof out === 'number') closeSync(out);
  children.push(child);
  let stderr = '';
  child.stderr?.on('data', (d: Buffer) => { if (stderr.length < 65536) stderr += d.toString(); });
  const errText = () => stderr || (logFile === null ? '' : readFileSync(logFile, 'utf8').slice(-4000));
  const until = Date.now() + timeoutMs;
  while (Date.now() < until) {
    if (child.exitCode !== null) throw new Error(`${name} exited (${child.exitCode}): ${errText()}`);
    if (await accepts(port)) return child;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${name} did not listen on ${port} within ${timeoutMs / 1000} s: ${errText()}`);
}

export function stopChildren(): void {
  for (const c of children.splice(0)) if (c.exitCode === null) c.kill('SIGKILL');
}

/** utime + stime of a process in microseconds (all its threads). */
export function cpuMicros(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return ((Number(f[11]) + Number(f[12])) * 1_000_000) / CLK_TCK;
}

export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 === 1 ? s[m] : (s[m - 1] + s[m]) / 2;
}

/** One measured run: the load result and the relay's CPU per request (null: not measured). */
export interface Sample<R> { result: R; cpu: number | null }

/**
 * Warm-up (one short run per target), then `rounds` rounds over every (connections, target) pair,
 * the target order rotated each round so no target always runs first on a noisy machine. Returns
 * the samples keyed `<target>/<connections>`.
 */
export async function runRounds<T extends string, R extends { throughput: number; errors: number; latencyUs: { p50: number; p99: number } }>(
  targets: readonly T[], connectionCounts: readonly number[], rounds: number, durationMs: number, warmupMs: number,
  measure: (target: T, connections: number, ms: number) => Promise<Sample<R>>,
): Promise<Map<string, Sample<R>[]>> {
  process.stderr.write(`warming up (${targets.join(', ')})…\n`);
  for (const t of targets) await measure(t, 16, warmupMs);
  const width = Math.max(...targets.map((t) => t.length));
  const samples = new Map<string, Sample<R>[]>();
  for (let r = 0; r < rounds; r++) {
    const order = targets.map((_, i) => targets[(i + r) % targets.length]);
    for (const c of connectionCounts) {
      for (const t of order) {
        const s = await measure(t, c, durationMs);
        const key = `${t}/${c}`;
        if (!samples.has(key)) samples.set(key, []);
        samples.get(key)!.push(s);
        process.stderr.write(`round ${r + 1}/${rounds} ${t.padEnd(width)} c=${String(c).padStart(2)}: ${s.result.throughput} req/s, ` +
          `p50 ${s.result.latencyUs.p50} µs, p99 ${s.result.latencyUs.p99} µs, errors ${s.result.errors}` +
          `${s.cpu === null ? '' : `, cpu ${s.cpu.toFixed(1)} µs/req`}\n`);
      }
    }
  }
  return samples;
}

/** The host logger of the in-process benches: the proxy's own logger and batching sink, writing to
 *  /dev/null, so a logging step's lines cost what they cost in `proxy serve`, minus the disk. */
export function devNullHostLogger(): Logger {
  return new Logger('pipeline', 'info', 'json', new BufferedFdSink(openSync('/dev/null', 'w')));
}

/** The eight built-ins of bench/pipeline-bench.ts for the in-process benches: every step on its
 *  full path, none rejecting, cache entries expiring at once (each find a miss + store), the route
 *  rule pointing at an upstream nobody calls. */
export function eightBuiltinsInProcess(): PipelineConfig {
  const page = { max_memory_pages: 256 };
  return {
    pipeline: { id: 'bench', request: ['metrics', 'logging', 'auth', 'rate_limit', 'filter', 'cache', 'route'],
      response: ['transform', 'cache', 'logging', 'metrics'] },
    steps: {
      logging: { config: { sample_rate: 1, level: 'info' }, ...page }, metrics: { config: {}, ...page },
      auth: { config: { provider: 'static', apps: ['proxy bench'] }, ...page },
      rate_limit: { config: { max_rps: 10_000_000 }, ...page },
      filter: { config: { rules: [{ name: 'all', action: 'allow' }], default: 'deny' }, ...page },
      cache: { config: { ttl_ms: 1, max_bytes: 786_432 }, ...page },
      route: { config: { rules: [{ dbs: ['bench'], upstream: 'mongodb://127.0.0.1:27017' }] }, ...page },
      transform: { config: { response: [{ op: 'rename', path: 'no_such_field', to: 'renamed' }] }, ...page },
    },
  };
}

/** Replaces the section that starts with `heading` (a "## …" line) in the markdown file `output`, or appends it. */
export function writeResultsSection(output: string, heading: string, section: string): void {
  let md = existsSync(output) ? readFileSync(output, 'utf8') : '';
  const head = `${heading}\n`;
  const at = md.indexOf(head);
  if (at >= 0) {
    const next = md.indexOf('\n## ', at + head.length);
    md = md.slice(0, at) + section + (next >= 0 ? md.slice(next + 1) : '');
  } else {
    md = md.replace(/\n*$/, '\n\n') + section;
  }
  writeFileSync(output, md.replace(/\n*$/, '\n'));
}

/** Starts `proxy devdb` (a child, stopped by stopChildren) with `bench.items` seeded; returns its URI. */
export async function startSeededDevdb(root: string): Promise<string> {
  const port = await freePort();
  const uri = `mongodb://127.0.0.1:${port}`;
  await startChild('devdb', process.execPath, [join(root, 'bin/proxy.mjs'), 'devdb', '--port', String(port)], port, root);
  await runBench({ target: uri, connections: 1, durationMs: 100, op: 'find' }); // seeds bench.items
  return uri;
}

/**
 * bench/pipeline-bench.ts's eight built-ins through the proxy, permissive: every step on its full
 * path, none rejecting the bench load; the route rule sends `bench` to `devUri`. `cache` is the
 * cache step's config (and its kv_max_bytes when given).
 */
export function eightBuiltinsWire(devUri: string, cache: object, kvMaxBytes?: number): { pipeline: { id: string; request: string[];
  response: string[] }; steps: Record<string, object> } {
  return {
    pipeline: {
      id: 'bench',
      request: ['metrics', 'logging', 'auth', 'rate_limit', 'filter', 'cache', 'route'],
      response: ['transform', 'cache', 'logging', 'metrics'],
    },
    steps: {
      // Production-like: every request logged at info (the proxy writes info, to a file).
      logging: { config: { sample_rate: 1, level: 'info' } },
      metrics: { config: {} },
      auth: { config: { provider: 'static', apps: ['proxy bench'] } },
      rate_limit: { config: { max_rps: 10_000_000 } },
      filter: { config: { rules: [{ name: 'all', action: 'allow' }], default: 'deny' } },
      cache: { config: cache, ...(kvMaxBytes === undefined ? {} : { kv_max_bytes: kvMaxBytes }) },
      route: { config: { rules: [{ dbs: ['bench'], upstream: devUri }] } },
      transform: { config: { response: [{ op: 'rename', path: 'no_such_field', to: 'renamed' }] } },
    },
  };
}

/** Distinct-key finds per connection per run: far more than one run sends, so no cache key repeats. */
const DISTINCT_FRAMES = 12_000;
let distinctRuns = 0;

/**
 * A run of `find`s by `_id` on `bench.items` where every command is a distinct cache key (a
 * distinct `comment`), `connections` connections for `ms`, one request in flight each.
 */
export async function distinctKeyRun(port: number, connections: number, ms: number): Promise<{ throughput: number; requests: number; p50: number;
  errors: number }> {
  const conns = await Promise.all(Array.from({ length: connections }, () => BenchConnection.open('127.0.0.1', port, 5000)));
  try {
    const hello = encodeOpMsg(0, 0, 0, serialize({ hello: 1, client: { application: { name: 'proxy bench' } }, $db: 'admin' }));
    for (const c of conns) await c.command(Buffer.from(hello));
    const run = distinctRuns++;
    const frames = conns.map((_, conn) => Array.from({ length: DISTINCT_FRAMES }, (_, k) => encodeOpMsg(0, 0, 0, serialize({
      find: 'items', filter: { _id: (conn * 61 + k) % 1000 }, limit: 1, singleBatch: true, comment: `r${run}c${conn}k${k}`, $db: 'bench',
    }))));
    const h = hdr.build({ lowestDiscernibleValue: 1, highestTrackableValue: 60_000_000, numberOfSignificantValueDigits: 3 });
    const tally = new RunTally(h);
    const start = performance.now();
    await Promise.all(conns.map((c, i) => c.loop(frames[i], tally, start + ms)));
    const elapsed = performance.now() - start;
    const out = { throughput: Math.round(tally.requests / (elapsed / 1000)), requests: tally.requests, p50: h.getValueAtPercentile(50), errors: tally.errors };
    h.destroy();
    return out;
  } finally {
    for (const c of conns) c.close();
  }
}
