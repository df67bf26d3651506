// One run, four ways to reach the same development upstream, same load:
//   direct   — the load generator talks to devdb itself;
//   pipe     — through a 20-line Node `net` forwarder (bench/node-pipe.mjs): the honest baseline
//              for what any Node relay costs;
//   haproxy  — through Debian's HAProxy in TCP mode (one thread, like a Node process);
//   proxy    — through `proxy serve` with an empty pipeline.
// Each at 1 and 16 connections, rounds interleaved (target order rotates per round) and the
// median of the rounds reported, because the machine is small and shared. CPU per request is the
// relay process's utime+stime from /proc/<pid>/stat over the measurement, divided by requests.
//
// Usage: node --import tsx bench/wire-bench.ts [--duration 1s] [--rounds 3] [--output bench/RESULTS.md]
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { runBench, parseDuration, type BenchResult } from '../runtime/bench/index.ts';
import { arg, CLK_TCK, cpuMicros, freePort, median, runRounds, startChild, stopChildren, type Sample as LibSample } from './lib.ts';

const ROOT = new URL('..', import.meta.url).pathname;
const CONNECTION_COUNTS = [1, 16] as const;
type TargetName = 'direct' | 'pipe' | 'haproxy' | 'proxy';
const TARGETS: readonly TargetName[] = ['direct', 'pipe', 'haproxy', 'proxy'];

const durationText = arg('--duration', '1s');
const durationMs = parseDuration(durationText);
const rounds = Number(arg('--rounds', '3'));
const output = arg('--output', join(ROOT, 'bench/RESULTS.md'));

type Sample = LibSample<BenchResult>;

async function main(): Promise<void> {
  const tmp = mkdtempSync(join(tmpdir(), 'wire-bench-'));
  const [devPort, pipePort, haPort, proxyPort] = [await freePort(), await freePort(), await freePort(), await freePort()];
  const node = process.execPath;
  const proxyBin = join(ROOT, 'bin/proxy.mjs');
  const devUri = `mongodb://127.0.0.1:${devPort}`;

  await startChild('devdb', node, [proxyBin, 'devdb', '--port', String(devPort)], devPort, ROOT);
  const pipe = await startChild('node pipe', node, [join(ROOT, 'bench/node-pipe.mjs'), String(pipePort), '127.0.0.1', String(devPort)], pipePort, ROOT);
  const haCfg = join(tmp, 'haproxy.cfg');
  writeFileSync(haCfg, [
    'global', '  nbthread 1', '  maxconn 4096',
    'defaults', '  mode tcp', '  timeout connect 5s', '  timeout client 60s', '  timeout server 60s',
    'frontend bench_in', `  bind 127.0.0.1:${haPort}`, '  default_backend devdb',
    'backend devdb', `  server devdb 127.0.0.1:${devPort}`, '',
  ].join('\n'));
  const haproxy = await startChild('haproxy', 'haproxy', ['-f', haCfg, '-db'], haPort, ROOT);
  const proxyCfg = join(tmp, 'proxy.json');
  writeFileSync(proxyCfg, JSON.stringify({ listen: `127.0.0.1:${proxyPort}`, upstream: { uri: devUri }, log: { level: 'warn' } }));
  const proxy = await startChild('proxy', node, [proxyBin, 'serve', '--config', proxyCfg, '--workers', '1'], proxyPort, ROOT);

  const where: Record<TargetName, { uri: string; pid: number | null }> = {
    direct: { uri: devUri, pid: null },
    pipe: { uri: `mongodb://127.0.0.1:${pipePort}`, pid: pipe.pid! },
    haproxy: { uri: `mongodb://127.0.0.1:${haPort}`, pid: haproxy.pid! },
    proxy: { uri: `mongodb://127.0.0.1:${proxyPort}`, pid: proxy.pid! },
  };

  async function measure(t: TargetName, connections: number, ms: number): Promise<Sample> {
    const pid = where[t].pid;
    const before = pid === null ? 0 : cpuMicros(pid);
    const result = await runBench({ target: where[t].uri, connections, durationMs: ms, op: 'find' });
    const cpu = pid === null ? null : (cpuMicros(pid) - before) / Math.max(1, result.requests);
    return { result, cpu };
  }

  const samples = await runRounds(TARGETS, CONNECTION_COUNTS, rounds, durationMs, 500, measure);

  stopChildren();
  rmSync(tmp, { recursive: true, force: true });

  interface Row { target: TargetName; connections: number; throughput: number; p50: number; p99: number; cpu: number | null; errors: number }
  const rows: Row[] = [];
  for (const c of CONNECTION_COUNTS) {
    for (const t of TARGETS) {
      const ss = samples.get(`${t}/${c}`)!;
      rows.push({
        target: t, connections: c,
        throughput: median(ss.map((s) => s.result.throughput)),
        p50: median(ss.map((s) => s.result.latencyUs.p50)),
        p99: median(ss.map((s) => s.result.latencyUs.p99)),
        cpu: ss[0].cpu === null ? null : median(ss.map((s) => s.cpu!)),
        errors: ss.reduce((n, s) => n + s.result.errors, 0),
      });
    }
  }
  const row = (t: TargetName, c: number) => rows.find((x) => x.target === t && x.connections === c)!;

  const tpRatio = row('proxy', 16).throughput / row('pipe', 16).throughput;
  const proxyAdded = row('proxy', 1).p50 - row('direct', 1).p50;
  const haAdded = row('haproxy', 1).p50 - row('direct', 1).p50;
  const pass1 = tpRatio >= 0.9;
  const pass2 = proxyAdded <= 1.2 * haAdded;

  const label: Record<TargetName, string> = { direct: 'direct (devdb)', pipe: 'Node pipe', haproxy: 'HAProxy (tcp)', proxy: 'proxy (empty pipeline)' };
  const lines: string[] = [];
  lines.push('# Wire bench results', '');
  lines.push('Generated by `bench/wire-bench.ts`; see `bench/README.md` for what each target is.', '');
  lines.push(`- Command: \`node --import tsx bench/wire-bench.ts --duration ${durationText} --rounds ${rounds}\``);
  lines.push(`- Date: ${new Date().toISOString()}`);
  lines.push(`- Machine: ${cpus().length} cores (${cpus()[0]?.model.trim() ?? 'unknown CPU'}), ` +
    `Node ${process.version}, ${spawnSync('haproxy', ['-v']).stdout.toString().split('\n')[0]}. Shared with other work and noisy: the load ` +
    `generator, devdb and the relay all share these cores. Numbers are medians of ${rounds} interleaved ${durationText} runs per cell.`);
  lines.push('- Load: `find` on `bench.items` by `_id` (limit 1, 1,000 seeded docs), one request in flight per connection, pre-encoded OP_MSG frames.');
  lines.push(`- CPU µs/request: utime+stime of the relay process (/proc/<pid>/stat, ${CLK_TCK} Hz ticks) over the run ÷ requests; "—" for direct.`);
  lines.push('');
  lines.push('| target | connections | throughput (req/s) | p50 (µs) | p99 (µs) | added p50 vs direct (µs) | CPU µs/request | throughput vs Node ' +
    'pipe | errors |');
  lines.push('|---|---:|---:|---:|---:|---:|---:|---:|---:|');
  for (const r of rows) {
    const pipeRow = row('pipe', r.connections);
    lines.push(`| ${label[r.target]} | ${r.connections} | ${Math.round(r.throughput).toLocaleString('en-US')} | ${r.p50} | ${r.p99} ` +
      `| ${r.target === 'direct' ? '—' : Math.round(r.p50 - row('direct', r.connections).p50)} | ${r.cpu === null ? '—' : r.cpu.toFixed(1)} ` +
      `| ${(r.throughput / pipeRow.throughput).toFixed(2)}× | ${r.errors} |`);
  }
  lines.push('', '## Targets (empty pipeline, same run)', '');
  lines.push(`- Throughput at 16 connections ≥ 0.9× the Node pipe: proxy ${Math.round(row('proxy', 16).throughput)} req/s vs ` +
    `pipe ${Math.round(row('pipe', 16).throughput)} req/s = ${tpRatio.toFixed(2)}× — **${pass1 ? 'PASS' : 'FAIL'}**`);
  lines.push(`- Added p50 at 1 connection ≤ 1.2× HAProxy's: proxy adds ${proxyAdded} µs, HAProxy adds ${haAdded} µs ` +
    `(limit ${(1.2 * haAdded).toFixed(0)} µs) — **${pass2 ? 'PASS' : 'FAIL'}**`);
  lines.push('');
  const md = lines.join('\n') + '\n';
  // This script owns the top of the file; hand-written notes ("## Notes …") and the pipeline
  // bench's sections below it are kept.
  const previous = existsSync(output) ? readFileSync(output, 'utf8') : '';
  const marks = ['\n## Notes', '\n## Pipeline bench'].map((m) => previous.indexOf(m)).filter((i) => i >= 0);
  const keep = marks.length === 0 ? -1 : Math.min(...marks);
  writeFileSync(output, keep < 0 ? md : md + previous.slice(keep));
  process.stdout.write(md);
}

main().catch((err) => {
  stopChildren();
  process.stderr.write(`wire-bench: ${(err as Error).stack ?? err}\n`);
  process.exit(1);
});
