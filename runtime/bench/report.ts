// Human-readable lines for the `proxy bench` command: a progress line and the final summary.
import type { BenchProgress, BenchResult } from './run-bench.ts';

function int(n: number): string {
  return Math.round(n).toLocaleString('en-US');
}

export function formatProgress(p: BenchProgress): string {
  return `[${(p.elapsedMs / 1000).toFixed(1)}s] ${int(p.requests)} requests, ${int(p.throughput)} req/s, p50 ${int(p.p50Us)} µs, errors ${int(p.errors)}`;
}

export function formatResult(r: BenchResult): string {
  const l = r.latencyUs;
  return [
    `target:     ${r.target} (op ${r.op}, ${r.connections} connection${r.connections === 1 ? '' : 's'}, ${(r.elapsedMs / 1000).toFixed(2)} s)`,
    `requests:   ${int(r.requests)}`,
    `throughput: ${int(r.throughput)} req/s`,
    `latency:    p50 ${int(l.p50)} µs, p90 ${int(l.p90)} µs, p99 ${int(l.p99)} µs, max ${int(l.max)} µs`,
    `errors:     ${int(r.errors)}`,
    `overhead:   ${r.overheadNote}`,
  ].join('\n') + '\n';
}
