// The pipeline overhead `proxy bench` reports: read from the proxy's profiling endpoint
// (GET /api/profile) before and after the run, so the figure covers the run's requests only
// (plus any other traffic meanwhile) without resetting anybody's statistics.
export interface ProfileTotals { requests: number; totalUs: number; upstreamUs: number }

export interface OverheadReading {
  /** Mean proxy time per request over the run (total − upstream), µs. */
  readonly avgOverheadUs: number;
  readonly avgTotalUs: number;
  readonly avgUpstreamUs: number;
  /** Requests the profiler sampled during the run. */
  readonly requests: number;
  readonly url: string;
}

export const DEFAULT_PROFILING_URL = 'http://127.0.0.1:9091';

/** Totals from the endpoint, or a reason it cannot give them. */
export async function readTotals(url: string, token: string | null): Promise<ProfileTotals | string> {
  let r: Response;
  try {
    r = await fetch(`${url}/api/profile`, { headers: token === null ? {} : { authorization: `Bearer ${token}` }, signal: AbortSignal.timeout(3000) });
  } catch {
    return `n/a (profiling endpoint not reachable at ${url})`;
  }
  if (r.status === 404) return `n/a (profiling disabled at ${url})`;
  if (r.status === 401) return `n/a (profiling endpoint at ${url} refused the token)`;
  if (r.status !== 200) return `n/a (profiling endpoint at ${url} answered ${r.status})`;
  const s = await r.json() as { total_requests: number; avg_total_latency_us: number; avg_upstream_latency_us: number };
  return { requests: s.total_requests, totalUs: s.avg_total_latency_us * s.total_requests, upstreamUs: s.avg_upstream_latency_us * s.total_requests };
}

/** The run's mean overhead from two readings; a reason string when it cannot be computed. */
export function overheadBetween(before: ProfileTotals, after: ProfileTotals, url: string): OverheadReading | string {
  const n = after.requests - before.requests;
  if (n <= 0) return `n/a (the profiler at ${url} sampled no request of this run: another proxy, or filters)`;
  const total = (after.totalUs - before.totalUs) / n;
  const upstream = (after.upstreamUs - before.upstreamUs) / n;
  // The note prints "overhead (total − upstream)": the difference of the rounded figures, so it adds up.
  const avgTotalUs = Math.round(total);
  const avgUpstreamUs = Math.round(upstream);
  return { avgOverheadUs: Math.max(0, avgTotalUs - avgUpstreamUs), avgTotalUs, avgUpstreamUs, requests: n, url };
}

export function overheadNote(o: OverheadReading): string {
  return `${o.avgOverheadUs} µs per request (total ${o.avgTotalUs} µs − upstream ${o.avgUpstreamUs} µs; ${o.requests} requests sampled at ${o.url})`;
}
