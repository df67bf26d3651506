// `proxy bench`: raw wire-protocol load against a target (SPEC.md §4.3). Option errors exit 2
// with the reason; a target that cannot be reached or misbehaves exits 1.
import type { CAC } from 'cac';
import { exitCodeOf } from '../errors/catalogue.ts';
import { httpBaseUrl, typedOption } from './argv.ts';
import {
  BENCH_OPS, BenchError, DEFAULT_PROFILING_URL, formatProgress, formatResult, parseConnections, parseDuration, parseOp, parseTarget, runBench,
  type BenchOp, type BenchProgress,
} from '../bench/index.ts';

interface BenchCliOptions {
  connections: unknown;
  duration: unknown;
  target: unknown;
  op: unknown;
  json?: boolean;
  profilingUrl?: string;
  profilingToken?: string;
}

export function registerBench(cli: CAC): void {
  cli.command('bench', 'Raw wire-protocol load generator: throughput and latency percentiles of a target')
    .option('--connections <n>', 'concurrent connections, one request in flight each', { default: 1 })
    .option('--duration <d>', 'how long to run (e.g. 500ms, 10s, 1m)', { default: '10s' })
    .option('--target <uri>', 'mongodb://host:port of the proxy or server under test', { default: 'mongodb://127.0.0.1:27018' })
    .option('--op <op>', `operation: ${BENCH_OPS.join(' | ')}`, { default: 'find' })
    .option('--json', 'print the result as JSON on stdout')
    .option('--profiling-url <url>', `the target proxy's profiling endpoint, for the pipeline overhead (default $PROXY_PROFILE_URL, ` +
      `else ${DEFAULT_PROFILING_URL}; "none" skips it)`)
    .option('--profiling-token <token>', 'bearer token of the profiling endpoint (default $PROXY_PROFILE_TOKEN)')
    .action(benchCommand);
}

async function benchCommand(opts: BenchCliOptions): Promise<void> {
  let connections: number;
  let durationMs: number;
  let op: BenchOp;
  let profilingUrl: string | null;
  const target = String(opts.target);
  try {
    // As typed: cac would have turned "1e1" into 10, which parseConnections' digits-only check would miss.
    connections = parseConnections(typedOption('connections') ?? opts.connections);
    durationMs = parseDuration(opts.duration);
    op = parseOp(opts.op);
    parseTarget(target);
    profilingUrl = profilingEndpoint(opts.profilingUrl);
  } catch (err) {
    process.stderr.write(`proxy bench: ${(err as Error).message}\n`);
    process.exit(2);
  }
  const tty = process.stderr.isTTY === true;
  // On a terminal the progress line rewrites itself; in a pipe or log file each second is a line.
  const onProgress = tty
    ? (p: BenchProgress) => process.stderr.write(`\r\x1b[2K${formatProgress(p)}`)
    : (p: BenchProgress) => process.stderr.write(`${formatProgress(p)}\n`);
  try {
    const result = await runBench({
      target, connections, durationMs, op, onProgress,
      profilingUrl, profilingToken: opts.profilingToken ?? process.env.PROXY_PROFILE_TOKEN ?? null,
    });
    if (tty) process.stderr.write('\r\x1b[2K');
    process.stdout.write(opts.json === true ? `${JSON.stringify(result, null, 2)}\n` : formatResult(result));
  } catch (err) {
    if (tty) process.stderr.write('\n');
    const code = err instanceof BenchError ? ` [${err.code}]` : '';
    process.stderr.write(`proxy bench: ${(err as Error).message}${code}\n`);
    process.exit(err instanceof BenchError ? exitCodeOf(err.code) : 1);
  }
}

/** The profiling endpoint read for the overhead (--profiling-url, $PROXY_PROFILE_URL, the default), null for "none"; a bad URL or port throws. */
function profilingEndpoint(option: string | undefined): string | null {
  const text = option ?? process.env.PROXY_PROFILE_URL ?? DEFAULT_PROFILING_URL;
  if (text === 'none') return null;
  const r = httpBaseUrl(text, option !== undefined ? '--profiling-url' : process.env.PROXY_PROFILE_URL !== undefined ? '$PROXY_PROFILE_URL' :
    'the profiling URL');
  if ('problem' in r) throw new Error(r.problem);
  return r.url;
}
