// Prometheus text for the profiler's distributions, built at scrape time from plain numbers (no
// prom-client call on the request path). Names, help, types and label names are the metric table's
// (runtime/metrics/table.ts); every series carries the graph it comes from: pipeline_id and
// pipeline (baseline/candidate).
import type { Profiler } from './profiler.ts';
import type { Distribution } from './latency-stats.ts';
import { expositionHeader } from '../metrics/index.ts';
import { phaseName } from '../wasm/index.ts';

function esc(v: string): string {
  return v.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"');
}

function histogram(out: string[], name: string, labels: string, s: Distribution): void {
  let cumulative = 0;
  for (let i = 0; i < s.bounds.length; i++) {
    cumulative += s.counts[i];
    out.push(`${name}_bucket{${labels},le="${s.bounds[i]}"} ${cumulative}`);
  }
  out.push(`${name}_bucket{${labels},le="+Inf"} ${s.count}`);
  out.push(`${name}_sum{${labels}} ${s.sumNs / 1000}`);
  out.push(`${name}_count{${labels}} ${s.count}`);
}

export function profilingMetricsText(p: Profiler): string {
  const lat = expositionHeader('proxy_step_latency_us');
  const slow = expositionHeader('proxy_step_slow_total');
  const suppressed = expositionHeader('proxy_step_slow_log_suppressed_total');
  const req = expositionHeader('proxy_requests_total');
  const dur = expositionHeader('proxy_request_duration_seconds');
  for (const g of p.allGraphs()) {
    const gl = `pipeline_id="${esc(g.pipelineId)}",pipeline="${esc(g.variant)}"`;
    for (const s of g.rows) {
      if (s.latency.count === 0 && s.slow === 0) continue;
      const sl = `${gl},step="${esc(s.step)}",phase="${phaseName(s.phase)}"`;
      histogram(lat, 'proxy_step_latency_us', sl, s.latency);
      slow.push(`proxy_step_slow_total{${sl}} ${s.slow}`);
      suppressed.push(`proxy_step_slow_log_suppressed_total{${sl}} ${s.suppressedTotal}`);
    }
    req.push(`proxy_requests_total{${gl},status="ok"} ${g.ok}`);
    req.push(`proxy_requests_total{${gl},status="error"} ${g.errors}`);
    for (const q of [0.5, 0.95, 0.99]) {
      const v = g.total.count === 0 ? 0 : g.total.hdr.getValueAtPercentile(q * 100) / 1e6;
      dur.push(`proxy_request_duration_seconds{${gl},quantile="${q}"} ${v}`);
    }
    dur.push(`proxy_request_duration_seconds_sum{${gl}} ${g.total.sumNs / 1e9}`);
    dur.push(`proxy_request_duration_seconds_count{${gl}} ${g.total.count}`);
  }
  return [...lat, ...slow, ...suppressed, ...req, ...dur].join('\n') + '\n';
}
