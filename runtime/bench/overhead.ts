// The pipeline overhead `proxy bench` reports: read from the proxy's profiling endpoint before and
// after the run, so the figure covers the run's requests only (plus any other traffic meanwhile)
// without resetting anybody's statistics.
//
// From GET /api/profile/histograms, which carries each graph's exact sums (total_sum_ns,
// upstream_sum_ns) and request counts: the run's mean is the difference of the exact sums over the
// difference of the counts. (GET /api/profile's averages are rounded to the µs; rebuilding a sum as
// average × count would err by up to half a µs times every request counted before the run.) Every
// graph of the proxy's default pipeline id counts — the baseline and, while a canary runs, the
// candidate, which serves part of the run's requests.
export interface ProfileTotals { requests: number; totalNs: number; upstreamNs: number }

export interface OverheadReading {
  /** Mean proxy time per request over the run (total − upstream), µs. */
  readonly avgOverheadUs: number;
  readonly avgTotalUs: number;
  readonly avgUpstreamUs: number;
  /** Requests the profiler sampled during the run. */
  readonly requests: number;
  readonly url: string;
}

interface HistogramsBody {
  default_pipeline_id?: string;
  graphs: Array<{ pipeline_id: string; pipeline: string; ok: number; errors: number; total_sum_ns: number; upstream_sum_ns: number }>;
}

/** The exact totals of the default pipeline's graphs in an /api/profile/histograms answer. */
export function totalsOf(body: HistogramsBody): ProfileTotals {
  const t: ProfileTotals = { requests: 0, totalNs: 0, upstreamNs: 0 };
  for (const g of body.graphs) {
    if (body.default_pipeline_id !== undefined && g.pipeline_id !== body.default_pipeline_id) continue;
    t.requests += g.ok + g.errors;
    t.totalNs += g.total_sum_ns;
    t.upstreamNs += g.upstream_sum_ns;
  }
  return t;
}

export const DEFAULT_PROFILING_URL = 'http://127.0.0.1:9091';

/** Totals from the endpoint, or a reason it cannot give them. */
export async function readTotals(url: string, token: string | null): Promise<ProfileTotals | string> {
  let r: Response;
  try {
    r = await fetch(`${url}/api/profile/histograms`, { headers: token === null ? {} : { authorization: `Bearer ${token}` },
      signal: AbortSignal.timeout(3000) });
  } catch {
    return `n/a (profiling endpoint not reachable at ${url})`;
  }
  if (r.status === 404) return `n/a (profiling disabled at ${url})`;
  if (r.status === 401) return `n/a (profiling endpoint at ${url} refused the token)`;
  if (r.status !== 200) return `n/a (profiling endpoint at ${url} answered ${r.status})`;
  return totalsOf(await r.json() as HistogramsBody);
}

/** The run's mean overhead from two readings; a reason string when it cannot be computed. */
export function overheadBetween(before: ProfileTotals, after: ProfileTotals, url: string): OverheadReading | string {
  const n = after.requests - before.requests;
  if (n <= 0) return `n/a (the profiler at ${url} sampled no request of this run: another proxy, or filters)`;
  const total = (after.totalNs - before.totalNs) / n / 1000;
  const upstream = (after.upstreamNs - before.upstreamNs) / n / 1000;
  // The note prints "overhead (total − upstream)": the difference of the rounded figures, so it adds up.
  const avgTotalUs = Math.round(total);
  const avgUpstreamUs = Math.round(upstream);
  return { avgOverheadUs: Math.max(0, avgTotalUs - avgUpstreamUs), avgTotalUs, avgUpstreamUs, requests: n, url };
}

export function overheadNote(o: OverheadReading): string {
  return `${o.avgOverheadUs} µs per request (total ${o.avgTotalUs} µs − upstream ${o.avgUpstreamUs} µs; ${o.requests} requests sampled at ${o.url})`;
}
