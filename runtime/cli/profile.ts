// `proxy profile` (SPEC.md §4.3): a client of the profiling HTTP endpoint (runtime/http/profiling.ts).
// Forms: the current snapshot (no mode flag), a one-shot window report (--duration), a live tail of
// slow steps (--live), a flame graph (--flamegraph), one step's detail (--step), two reports
// compared (--compare), an export of the snapshot (--export) and several instances merged
// (--aggregate); and the snapshot read from a shared-memory histogram file instead of the endpoint
// (--mmap, profiling.storage "mmap"). Exit codes: 0 ok, 1 the endpoint failed or refused, 2 bad usage.
//
// Windows are differences, not resets: a timed form reads GET /api/profile/histograms at the start
// and at the end and subtracts the HDR histograms, so it measures exactly its window without
// clearing statistics other readers (dashboards, canary rules, a second `proxy profile`) rely on.
// `--reset` clears them first (POST /api/profile/reset, every graph) for whoever wants that too.
// Percentiles of merged instances come from added histograms, never from averaged percentiles.
import type { CAC } from 'cac';
import { readFileSync, writeFileSync } from 'node:fs';
import * as hdr from 'hdr-histogram-js';
import { typedOption, httpBaseUrl, endpointUrl } from './argv.ts';
import { ANSWER_TOO_LARGE, httpRequest } from './http-client.ts';
import { exitCodeOf, type CodesOf } from '../errors/catalogue.ts';
import { parseDuration } from '../bench/index.ts';
import { fileSnapshot, foldedText, readHistogramFile } from '../profiling/index.ts';
import { isVariant, type Variant } from '../config/index.ts';
import { terminalSafe } from '../log/index.ts';

const DEFAULT_URL = 'http://127.0.0.1:9091';
const REQUEST_TIMEOUT_MS = 10_000;
const LIVE_INTERVAL_MS = 1000;
const BAR_WIDTH = 40;

export type ProfileErrorCode = CodesOf<'ProfileError'>;

/** A failed `proxy profile`: usage mistakes exit 2, everything else 1 (the catalogue's exit codes). */
export class ProfileError extends Error {
  readonly code: ProfileErrorCode;
  /** The endpoint's HTTP status, when it answered with an error. */
  readonly status: number | null;
  constructor(code: ProfileErrorCode, message: string, status: number | null = null) {
    super(message);
    this.name = 'ProfileError';
    this.code = code;
    this.status = status;
  }
  get exitCode(): number { return exitCodeOf(this.code); }
}

const usage = (message: string): never => { throw new ProfileError('PROXY_ERR_PROFILE_USAGE', message); };

// ---- What the endpoint answers (runtime/http/profiling.ts) -------------------------------------

interface StepRow {
  name: string; phase: string; avg_latency_us: number; p50_latency_us: number; p95_latency_us: number;
  p99_latency_us: number; max_latency_us: number; invocations: number; errors: number;
}
interface Snapshot {
  total_requests: number; avg_total_latency_us: number; avg_upstream_latency_us: number; avg_pipeline_overhead_us: number; steps: StepRow[];
}
interface HistStep { name: string; phase: string; invocations: number; errors: number; sum_ns: number; max_ns: number; slow: number; hdr: string }
interface HistGraph {
  pipeline_id: string; pipeline: string; ok: number; errors: number;
  total: string; total_sum_ns: number; upstream: string; upstream_sum_ns: number; steps: HistStep[];
}
interface HistBody { since: string; graphs: HistGraph[] }
interface Bucket { le_us: number | '+Inf'; count: number }
interface Distribution {
  invocations: number; errors: number; avg_latency_us: number | null; p50_latency_us: number | null; p90_latency_us: number | null;
  p95_latency_us: number | null; p99_latency_us: number | null; p999_latency_us: number | null; max_latency_us: number | null; buckets: Bucket[];
}
interface StepPhase extends Distribution { phase: string; slow: number; subops: Array<Distribution & { name: string }> }
interface StepDetail { name: string; pipeline_id: string; pipeline: string; phases: StepPhase[] }

// ---- HTTP ---------------------------------------------------------------------------------------

class ProfileClient {
  readonly url: string;
  private readonly token: string | null;
  /** --worker: every read asks for that worker's figures alone (a proxy with workers). */
  private readonly worker: string | null;

  constructor(url: string, token: string | null, worker: string | null = null) {
    this.url = url;
    this.token = token;
    this.worker = worker;
  }

  async text(method: 'GET' | 'POST', path: string, query: Record<string, string | undefined> = {}): Promise<string> {
    const u = new URL(this.url + path);
    for (const [k, v] of Object.entries(query)) if (v !== undefined) u.searchParams.set(k, v);
    if (this.worker !== null && method === 'GET') u.searchParams.set('worker', this.worker);
    const headers: Record<string, string> = {};
    if (this.token !== null) headers.authorization = `Bearer ${this.token}`;
    let res: { status: number; body: string };
    try {
      res = await httpRequest(u, { method, headers, timeoutMs: REQUEST_TIMEOUT_MS });
    } catch (err) {
      const e = err as NodeJS.ErrnoException & { total?: boolean };
      const code = e.code;
      if (code === ANSWER_TOO_LARGE) throw new ProfileError('PROXY_ERR_PROFILE_DATA', e.message);
      if (code === 'ETIMEDOUT') throw new ProfileError('PROXY_ERR_PROFILE_UNREACHABLE', `profiling endpoint at ${this.url} ` +
        (e.total === true ? e.message : `did not answer within ${REQUEST_TIMEOUT_MS / 1000} s`));
      throw new ProfileError('PROXY_ERR_PROFILE_UNREACHABLE', `profiling endpoint not reachable at ${this.url} (is profiling configured? see ` +
        `docs/profiling.md)${code === undefined ? '' : ` [${code}]`}`);
    }
    const body = res.body;
    if (res.status >= 200 && res.status < 300) return body;
    let error: { code?: string; message?: string } = {};
    try { error = (JSON.parse(body) as { error?: typeof error }).error ?? {}; } catch { /* not the proxy's error body */ }
    if (res.status === 401) {
      throw new ProfileError('PROXY_ERR_PROFILE_TOKEN', `token rejected by ${this.url}${this.token === null ? ' (the endpoint requires one: ' +
        '--token or PROXY_PROFILE_TOKEN)' : ''}`);
    }
    // A 404 that names a missing resource (an unknown step) is that; any other 404 is the disabled profiler.
    if (res.status === 404 && error.code !== 'PROXY_ERR_NOT_FOUND') {
      throw new ProfileError('PROXY_ERR_PROFILE_DISABLED', `profiling is disabled at ${this.url} (profiling.enabled: false)`);
    }
    throw new ProfileError('PROXY_ERR_PROFILE_HTTP', `${method} ${u.pathname} at ${this.url} ` +
      `answered ${res.status}: ${error.message ?? body.slice(0, 200)}`, res.status);
  }

  async json<T>(method: 'GET' | 'POST', path: string, query: Record<string, string | undefined> = {}): Promise<T> {
    const body = await this.text(method, path, query);
    try {
      return JSON.parse(body) as T;
    } catch {
      throw new ProfileError('PROXY_ERR_PROFILE_DATA', `${path} at ${this.url} did not answer JSON`);
    }
  }
}

// ---- Windows: end minus start, per distribution -------------------------------------------------

/** One distribution over a window: exact count, errors, sum and (bounded) max, HDR for percentiles. */
interface Dist { count: number; errors: number; sumNs: number; maxUs: number; hdr: hdr.Histogram }
interface WindowStep extends Dist { name: string; phase: string; slow: number }
interface WindowGraph { pipelineId: string; variant: string; ok: number; errors: number; total: Dist; upstream: Dist; steps: WindowStep[] }

const decode = (b64: string): hdr.Histogram => hdr.decodeFromCompressedBase64(b64, 32, false);
const graphKey = (id: string, variant: string) => `${id}\0${variant}`;
const stepKey = (name: string, phase: string) => `${name}\0${phase}`;

function windowDist(end: string, start: string | undefined, count: number, errors: number, sumNs: number, maxNs: number): Dist {
  const h = decode(end);
  if (start !== undefined) h.subtract(decode(start));
  // HDR's max is a bucket's highest equivalent value; the endpoint's exact cumulative max bounds it.
  const maxUs = count === 0 ? 0 : Math.min(h.maxValue, Number.isFinite(maxNs) ? maxNs / 1000 : Infinity);
  return { count, errors, sumNs, maxUs, hdr: h };
}

/**
 * The window between two reads of /api/profile/histograms (start null: everything since the last
 * reset). A reset inside the window (`since` moved) leaves only what followed it: the end alone.
 */
function windowOf(end: HistBody, start: HistBody | null): WindowGraph[] {
  const base = new Map<string, HistGraph>();
  if (start !== null && start.since === end.since) for (const g of start.graphs) base.set(graphKey(g.pipeline_id, g.pipeline), g);
  return end.graphs.map((g) => {
    const s = base.get(graphKey(g.pipeline_id, g.pipeline));
    const ok = g.ok - (s?.ok ?? 0);
    const errors = g.errors - (s?.errors ?? 0);
    const before = new Map((s?.steps ?? []).map((x) => [stepKey(x.name, x.phase), x]));
    return {
      pipelineId: g.pipeline_id, variant: g.pipeline, ok, errors,
      total: windowDist(g.total, s?.total, ok + errors, errors, g.total_sum_ns - (s?.total_sum_ns ?? 0), Infinity),
      upstream: windowDist(g.upstream, s?.upstream, ok + errors, 0, g.upstream_sum_ns - (s?.upstream_sum_ns ?? 0), Infinity),
      steps: g.steps.map((x) => {
        const b = before.get(stepKey(x.name, x.phase));
        const d = windowDist(x.hdr, b?.hdr, x.invocations - (b?.invocations ?? 0), x.errors - (b?.errors ?? 0), x.sum_ns - (b?.sum_ns ?? 0), x.max_ns);
        return { ...d, name: x.name, phase: x.phase, slow: x.slow - (b?.slow ?? 0) };
      }).filter((x) => x.count > 0),
    };
  });
}

function addDist(into: Dist, d: Dist): void {
  into.count += d.count;
  into.errors += d.errors;
  into.sumNs += d.sumNs;
  into.maxUs = Math.max(into.maxUs, d.maxUs);
  into.hdr.add(d.hdr);
}

/** Several instances' windows as one: histograms added per (graph, step, phase). */
function mergeWindows(all: WindowGraph[][]): WindowGraph[] {
  const graphs = new Map<string, WindowGraph>();
  for (const list of all) {
    for (const g of list) {
      const k = graphKey(g.pipelineId, g.variant);
      const m = graphs.get(k);
      if (m === undefined) { graphs.set(k, g); continue; }
      m.ok += g.ok;
      m.errors += g.errors;
      addDist(m.total, g.total);
      addDist(m.upstream, g.upstream);
      for (const s of g.steps) {
        const t = m.steps.find((x) => x.name === s.name && x.phase === s.phase);
        if (t === undefined) m.steps.push(s);
        else { addDist(t, s); t.slow += s.slow; }
      }
    }
  }
  return [...graphs.values()];
}

/** The graph a window is about: --pipeline-id if given, else the variant's busiest graph. */
function pickGraph(graphs: WindowGraph[], id: string | undefined, variant: string): WindowGraph | null {
  let best: WindowGraph | null = null;
  for (const g of graphs) {
    if (g.variant !== variant || (id !== undefined && g.pipelineId !== id)) continue;
    if (best === null || g.total.count > best.total.count) best = g;
  }
  return best;
}

const avgUs = (d: Dist) => (d.count === 0 ? 0 : Math.round(d.sumNs / d.count / 1000));
const pUs = (d: Dist, p: number) => (d.count === 0 ? 0 : Math.round(d.hdr.getValueAtPercentile(p)));

function stepRow(s: WindowStep): StepRow {
  return {
    name: s.name, phase: s.phase, avg_latency_us: avgUs(s), p50_latency_us: pUs(s, 50), p95_latency_us: pUs(s, 95),
    p99_latency_us: pUs(s, 99), max_latency_us: Math.round(s.maxUs), invocations: s.count, errors: s.errors,
  };
}

// ---- The report (--duration, --aggregate; read by --compare) -----------------------------------

/** SPEC §2.1's snapshot fields plus the window's: one shape for one instance and for merged ones. */
export interface ProfileReport extends Snapshot {
  report: 'proxy-profile';
  source: string[];
  pipeline_id: string | null;
  pipeline: string;
  started_at: string;
  duration_s: number;
  /** Statistics were reset by someone else during the window: it covers only what followed. */
  reset_during_window: boolean;
  errors: number;
  error_rate_pct: number;
  throughput_rps: number;
  p50_total_latency_us: number;
  p95_total_latency_us: number;
  p99_total_latency_us: number;
  max_total_latency_us: number;
  slowest_step: { name: string; phase: string; p99_latency_us: number } | null;
  /** Folded stacks (`a;b;c µs` lines) of the window, for a differential flame graph; null if not available. */
  folded: string | null;
  instances?: Array<{ url: string; total_requests: number; errors: number; throughput_rps: number; avg_total_latency_us: number;
    p99_total_latency_us: number }>;
}

const round1 = (n: number) => Math.round(n * 10) / 10;

function buildReport(g: WindowGraph | null, o: { source: string[]; pipelineId?: string; variant: Variant; startedAt: number; elapsedMs: number;
  resetDuringWindow: boolean; folded: string | null }): ProfileReport {
  const total = g?.total.count ?? 0;
  const errors = g?.errors ?? 0;
  const steps = (g?.steps ?? []).map(stepRow).sort((a, b) => b.p99_latency_us - a.p99_latency_us || b.avg_latency_us - a.avg_latency_us);
  const avgTotal = g === null ? 0 : avgUs(g.total);
  const avgUpstream = g === null ? 0 : avgUs(g.upstream);
  const durationS = Math.max(0.001, Math.round(o.elapsedMs) / 1000);
  return {
    report: 'proxy-profile', source: o.source, pipeline_id: g?.pipelineId ?? o.pipelineId ?? null, pipeline: o.variant,
    started_at: new Date(o.startedAt).toISOString(), duration_s: durationS, reset_during_window: o.resetDuringWindow,
    total_requests: total, errors, error_rate_pct: total === 0 ? 0 : Math.round((errors / total) * 1e6) / 1e4,
    throughput_rps: round1(total / durationS),
    avg_total_latency_us: avgTotal, avg_upstream_latency_us: avgUpstream,
    avg_pipeline_overhead_us: g === null ? 0 : Math.max(0, Math.round((g.total.sumNs - g.upstream.sumNs) / Math.max(1, total) / 1000)),
    p50_total_latency_us: g === null ? 0 : pUs(g.total, 50), p95_total_latency_us: g === null ? 0 : pUs(g.total, 95),
    p99_total_latency_us: g === null ? 0 : pUs(g.total, 99), max_total_latency_us: g === null ? 0 : Math.round(g.total.maxUs),
    slowest_step: steps.length === 0 ? null : { name: steps[0].name, phase: steps[0].phase, p99_latency_us: steps[0].p99_latency_us },
    steps, folded: o.folded,
  };
}

// ---- Text output ----------------------------------------------------------------------------------

const int = (n: number) => Math.round(n).toLocaleString('en-US');
const opt = (n: number | null) => (n === null ? '-' : int(n));

/** Plain aligned columns; the first `left` columns are left-aligned, the rest (numbers) right. */
function table(head: string[], rows: string[][], left = 2): string {
  const w = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const line = (r: string[]) => r.map((c, i) => (i < left ? c.padEnd(w[i]) : c.padStart(w[i]))).join('  ').trimEnd();
  return [line(head), ...rows.map(line)].join('\n') + '\n';
}

function stepsTable(rows: StepRow[]): string {
  if (rows.length === 0) return '(no step statistics)\n';
  const sorted = [...rows].sort((a, b) => b.p99_latency_us - a.p99_latency_us);
  return table(['step', 'phase', 'avg µs', 'p50', 'p95', 'p99', 'max', 'calls', 'error rate'], sorted.map((r) => [
    r.name, r.phase, int(r.avg_latency_us), int(r.p50_latency_us), int(r.p95_latency_us), int(r.p99_latency_us),
    int(r.max_latency_us), int(r.invocations), `${(r.invocations === 0 ? 0 : (100 * r.errors) / r.invocations).toFixed(2)}%`,
  ]));
}

function formatReport(r: ProfileReport): string {
  const where = r.pipeline_id === null ? r.pipeline : `${r.pipeline_id}/${r.pipeline}`;
  return [
    `profile of ${where} over ${r.duration_s.toFixed(2)} s (${r.source.join(', ')})${r.reset_during_window ? ' — statistics were reset during the ' +
      'window' : ''}`,
    `requests:  ${int(r.total_requests)} (${r.throughput_rps.toLocaleString('en-US')} req/s), errors ${int(r.errors)} (${r.error_rate_pct.toFixed(2)}%)`,
    `latency:   avg ${int(r.avg_total_latency_us)} µs, p50 ${int(r.p50_total_latency_us)}, p95 ${int(r.p95_total_latency_us)}, ` +
      `p99 ${int(r.p99_total_latency_us)}, max ${int(r.max_total_latency_us)}`,
    `upstream:  avg ${int(r.avg_upstream_latency_us)} µs`,
    `overhead:  avg ${int(r.avg_pipeline_overhead_us)} µs (total minus upstream)`,
    `slowest:   ${r.slowest_step === null ? '-' : `${r.slowest_step.name} (${r.slowest_step.phase}) p99 ${int(r.slowest_step.p99_latency_us)} µs`}`,
    '', stepsTable(r.steps),
  ].join('\n');
}

/** A text histogram of bucket counts, from the first to the last non-empty bucket. */
function bucketBars(buckets: Bucket[]): string {
  const first = buckets.findIndex((b) => b.count > 0);
  if (first < 0) return '  (no invocations)\n';
  let last = buckets.length - 1;
  while (buckets[last].count === 0) last--;
  const total = buckets.reduce((a, b) => a + b.count, 0);
  const most = Math.max(...buckets.map((b) => b.count));
  const rows = buckets.slice(first, last + 1).map((b, i) => {
    const label = b.le_us === '+Inf' ? `> ${int(Number(buckets[buckets.length - 2]?.le_us ?? 0))} µs` : `≤ ${int(b.le_us)} µs`;
    return [`  ${label}`, int(b.count), '█'.repeat(Math.round((b.count / most) * BAR_WIDTH)).padEnd(BAR_WIDTH),
      `${((100 * b.count) / total).toFixed(1)}%`, String(first + i)];
  });
  const w0 = Math.max(...rows.map((r) => r[0].length));
  const w1 = Math.max(...rows.map((r) => r[1].length));
  return rows.map((r) => `${r[0].padEnd(w0)}  ${r[1].padStart(w1)}  ${r[2]}  ${r[3].padStart(6)}`).join('\n') + '\n';
}

/** Progress of a timed run: one rewritten line on stderr, only on a terminal. */
function startProgress(label: string, ms: number): () => void {
  if (process.stderr.isTTY !== true) return () => {};
  const t0 = Date.now();
  const draw = () => {
    const e = Date.now() - t0;
    const n = Math.min(30, Math.round((e / ms) * 30));
    process.stderr.write(`\r\x1b[2K${label} [${'#'.repeat(n)}${'.'.repeat(30 - n)}] ${(e / 1000).toFixed(1)} / ${(ms / 1000).toFixed(1)} s`);
  };
  draw();
  const timer = setInterval(draw, 250);
  return () => { clearInterval(timer); process.stderr.write('\r\x1b[2K'); };
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

function writeOut(file: string | undefined, text: string): void {
  if (file === undefined) { process.stdout.write(text); return; }
  try {
    writeFileSync(file, text);
  } catch (err) {
    throw new ProfileError('PROXY_ERR_PROFILE_DATA', `cannot write ${file}: ${(err as Error).message}`);
  }
}

/** Folded text (`a;b;c 12.5` per line, as `?format=folded` serves it) → stack → µs. */
function parseFolded(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    const i = line.lastIndexOf(' ');
    const v = Number(line.slice(i + 1));
    if (i > 0 && Number.isFinite(v)) out.set(line.slice(0, i), (out.get(line.slice(0, i)) ?? 0) + v);
  }
  return out;
}

/** Sum of a Prometheus sample over the series whose labels include `labels`; null if none. */
function metricValue(text: string, name: string, labels: Record<string, string>): number | null {
  let sum: number | null = null;
  for (const line of text.split('\n')) {
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)/.exec(line);
    if (m === null || m[1] !== name) continue;
    const have: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(/([a-zA-Z_]\w*)="((?:[^"\\]|\\.)*)"/g)) have[l[1]] = l[2].replace(/\\(.)/g, (_, c: string) => (c === 'n' ? '\n' : c));
    if (Object.entries(labels).every(([k, v]) => have[k] === v)) sum = (sum ?? 0) + Number(m[3]);
  }
  return sum;
}

// ---- Options -------------------------------------------------------------------------------------

interface ProfileCliOptions {
  url?: unknown; token?: unknown; pipelineId?: unknown; pipeline?: unknown; variant?: unknown; json?: boolean; duration?: unknown; output?: unknown;
  reset?: boolean; live?: boolean; threshold?: unknown; flamegraph?: boolean; minWidth?: unknown; title?: unknown; step?: unknown;
  compare?: unknown; export?: boolean; format?: unknown; aggregate?: boolean; instances?: unknown; mmap?: unknown; worker?: unknown;
}

type Mode = 'snapshot' | 'report' | 'live' | 'flamegraph' | 'step' | 'compare' | 'export' | 'aggregate' | 'mmap';

/** Options each form accepts beyond the common ones (url, token, pipeline, pipeline-id, variant, json). */
const MODE_OPTIONS: Record<Mode, readonly string[]> = {
  snapshot: [], report: ['duration', 'output', 'reset'], live: ['threshold'], flamegraph: ['duration', 'output', 'minWidth', 'title', 'format'],
  step: ['duration', 'reset'], compare: ['output'], export: ['format', 'output'], aggregate: ['instances', 'duration', 'output', 'reset'],
  mmap: [],
};
const FLAG_OF: Record<string, string> = { minWidth: '--min-width', pipelineId: '--pipeline-id' };

/** cac (mri) turns number-looking values into numbers ("007" → 7; a long digit token loses digits): take them as typed. */
function raw(name: string, parsed: unknown): string | undefined {
  if (parsed === undefined) return undefined;
  return typedOption(name) ?? String(parsed);
}

function baseUrl(text: string, what: string): string {
  const r = httpBaseUrl(text, what);
  return 'url' in r ? r.url : usage(r.problem);
}

function durationMs(text: string | undefined): number {
  try {
    return parseDuration(text);
  } catch (err) {
    return usage((err as Error).message);
  }
}

/** `500us`, `500µs`, `2ms` or a bare number of microseconds. */
function parseThresholdUs(text: string): number {
  const m = /^(\d+(?:\.\d+)?)\s*(us|µs|ms)?$/.exec(text.trim());
  if (m === null || Number(m[1]) <= 0) return usage(`--threshold "${text}" is not a duration in microseconds (use e.g. 500us or 2ms)`);
  return Number(m[1]) * (m[2] === 'ms' ? 1000 : 1);
}

interface Ctx { client: ProfileClient; pipelineId?: string; variant: Variant; json: boolean; o: ProfileCliOptions; experiment?: string }

export function registerProfile(cli: CAC): void {
  cli.command('profile [experiment]', 'Read the profiling endpoint: snapshot, window report, live tail, flame graph, step detail, compare, export, aggregate')
    .option('--url <url>', `profiling endpoint (default $PROXY_PROFILE_URL, else ${DEFAULT_URL})`)
    .option('--token <token>', 'bearer token of the endpoint (default $PROXY_PROFILE_TOKEN)')
    .option('--pipeline <id>', 'pipeline whose graph to read (default: the default pipeline; windows: the busiest graph); "baseline" or ' +
      '"candidate" here still mean --variant')
    .option('--pipeline-id <id>', 'the same as --pipeline <id>')
    .option('--variant <variant>', 'baseline | candidate (default baseline)')
    .option('--json', 'machine-readable output on stdout')
    .option('--duration <d>', 'window to measure (10s, 1m); for --flamegraph the window looked back on')
    .option('--output <file>', 'write the report / SVG / export / diff SVG to this file')
    .option('--reset', 'clear every statistic (all graphs) before a timed window')
    .option('--live', 'tail steps slower than --threshold, every second; summary on Ctrl-C')
    .option('--threshold <n>us', 'slow threshold of --live (e.g. 500us, 2ms; default 1000us)')
    .option('--flamegraph', 'save the flame graph of the last --duration')
    .option('--min-width <pct>', 'flame graph: hide frames narrower than this percentage')
    .option('--title <text>', 'flame graph title')
    .option('--step <name>', 'one step\'s detail: distribution, sub-operations (cache: hit rate)')
    .option('--compare <baseline.json>', 'compare two reports: --compare <baseline.json> <experiment.json>')
    .option('--export', 'the snapshot, one line or row per (step, phase)')
    .option('--format <fmt>', 'jsonl | csv for --export; svg | folded for --flamegraph')
    .option('--aggregate', 'merge the histograms of several instances (--instances)')
    .option('--instances <list>', 'host:port,host:port of the profiling endpoints to merge')
    .option('--worker <i>', 'a proxy with workers: read worker i\'s figures alone (default: the whole machine)')
    .option('--mmap <path>', 'the snapshot read from the histogram file of profiling.storage "mmap" (read-only; no endpoint needed)')
    .action(async (experiment: unknown, o: ProfileCliOptions) => {
      // `proxy profile … | head`: a reader that goes away ends the command quietly.
      process.stdout.on('error', (err: NodeJS.ErrnoException) => { if (err.code === 'EPIPE') process.exit(0); throw err; });
      try {
        await profileCommand(experiment === undefined ? undefined : String(experiment), o);
      } catch (err) {
        if (!(err instanceof ProfileError)) throw err;
        process.stderr.write(`proxy profile: ${err.message}\n`);
        process.exit(err.exitCode);
      }
    });
}

async function profileCommand(experiment: string | undefined, o: ProfileCliOptions): Promise<void> {
  const flags: Array<[Mode, boolean]> = [
    ['live', o.live === true], ['flamegraph', o.flamegraph === true], ['step', o.step !== undefined],
    ['compare', o.compare !== undefined], ['export', o.export === true], ['aggregate', o.aggregate === true], ['mmap', o.mmap !== undefined],
  ];
  const chosen = flags.filter((f) => f[1]).map((f) => f[0]);
  if (chosen.length > 1) usage(`choose one of --live, --flamegraph, --step, --compare, --export, --aggregate, --mmap ` +
    `(got ${chosen.map((m) => `--${m}`).join(', ')})`);
  const mode: Mode = chosen[0] ?? (o.duration !== undefined ? 'report' : 'snapshot');
  // The file form reads no endpoint: --url and --token would be silently ignored, so they are refused.
  const endpoint = mode === 'mmap' ? [] : mode === 'aggregate' ? ['url', 'token'] : ['url', 'token', 'worker'];
  const allowed = new Set([...endpoint, 'pipelineId', 'pipeline', 'variant', 'json', mode, ...MODE_OPTIONS[mode]]);
  for (const [k, v] of Object.entries(o)) {
    if (k === '--' || k.includes('-') || v === undefined) continue;
    if (!allowed.has(k)) usage(`${FLAG_OF[k] ?? `--${k}`} does not apply to ${mode === 'snapshot' ? 'the ' +
      'snapshot' : mode === 'report' ? '--duration' : `--${mode}`}`);
  }
  if (experiment !== undefined && mode !== 'compare') usage(`unexpected argument "${experiment}"`);
  // --pipeline names a pipeline; its old meaning, the graph variant, is kept for "baseline" and
  // "candidate" (ids a configuration refuses, so no pipeline is shadowed by it).
  const pipelineArg = raw('pipeline', o.pipeline);
  const legacyVariant = pipelineArg !== undefined && isVariant(pipelineArg) ? pipelineArg : undefined;
  const pipelineIdArg = raw('pipeline-id', o.pipelineId);
  const pipelineId = legacyVariant === undefined ? pipelineArg : undefined;
  if (pipelineId !== undefined && pipelineIdArg !== undefined && pipelineId !== pipelineIdArg) usage(`--pipeline ${pipelineId} and ` +
    `--pipeline-id ${pipelineIdArg} name different pipelines`);
  const variantArg = raw('variant', o.variant);
  if (variantArg !== undefined && legacyVariant !== undefined && variantArg !== legacyVariant) usage(`--variant ${variantArg} and ` +
    `--pipeline ${legacyVariant} disagree`);
  const variantName = variantArg ?? legacyVariant ?? 'baseline';
  const variant = isVariant(variantName) ? variantName : usage(`--variant must be baseline or candidate, got "${variantName}"`);
  const given = endpointUrl('url', raw('url', o.url), 'PROXY_PROFILE_URL', DEFAULT_URL);
  const url = 'url' in given ? given.url : usage(given.problem);
  const token = raw('token', o.token) ?? process.env.PROXY_PROFILE_TOKEN ?? null;
  const worker = raw('worker', o.worker) ?? null;
  if (worker !== null && !/^\d+$/.test(worker)) usage(`--worker must be a worker's index (0, 1, …), got "${worker}"`);
  const ctx: Ctx = { client: new ProfileClient(url, token === '' ? null : token, worker), pipelineId: pipelineId ?? pipelineIdArg, variant,
    json: o.json === true, o, experiment };
  switch (mode) {
    case 'snapshot': return snapshotCommand(ctx);
    case 'report': return reportCommand(ctx);
    case 'live': return liveCommand(ctx);
    case 'flamegraph': return flamegraphCommand(ctx);
    case 'step': return stepCommand(ctx);
    case 'compare': return compareCommand(ctx);
    case 'export': return exportCommand(ctx);
    case 'aggregate': return aggregateCommand(ctx, token === '' ? null : token);
    case 'mmap': return mmapCommand(ctx);
  }
}

const graphQuery = (c: Ctx) => ({ pipeline_id: c.pipelineId, pipeline: c.variant });
const output = (c: Ctx) => raw('output', c.o.output);

// ---- Forms ---------------------------------------------------------------------------------------

async function snapshotCommand(c: Ctx): Promise<void> {
  printSnapshot(c, await c.client.json<Snapshot>('GET', '/api/profile', graphQuery(c)));
}

/** The snapshot form's output from a histogram file: the same JSON and table. */
async function mmapCommand(c: Ctx): Promise<void> {
  const path = raw('mmap', c.o.mmap);
  if (path === undefined || path === '' || path === 'true') return usage('--mmap needs the path of the histogram file (profiling.mmap_path)');
  let f: ReturnType<typeof readHistogramFile>;
  try {
    f = readHistogramFile(path);
  } catch (err) {
    throw new ProfileError('PROXY_ERR_PROFILE_DATA', (err as Error).message);
  }
  printSnapshot(c, fileSnapshot(f, c.pipelineId ?? f.defaultPipelineId, c.variant));
}

function printSnapshot(c: Ctx, s: Snapshot): void {
  if (c.json) { process.stdout.write(`${JSON.stringify(s, null, 2)}\n`); return; }
  process.stdout.write([
    `requests: ${int(s.total_requests)} since the last reset; avg total ${int(s.avg_total_latency_us)} µs, ` +
      `upstream ${int(s.avg_upstream_latency_us)} µs, overhead ${int(s.avg_pipeline_overhead_us)} µs`,
    '', stepsTable(s.steps),
  ].join('\n'));
}

/** Reads histograms now, waits `ms` (progress on a terminal), reads again: the window of every graph. */
async function measure(clients: ProfileClient[], ms: number | null, reset: boolean): Promise<{ windows: WindowGraph[][]; startedAt: number;
  elapsedMs: number; resetDuringWindow: boolean }> {
  if (reset) await Promise.all(clients.map((cl) => cl.text('POST', '/api/profile/reset')));
  const startedAt = Date.now();
  const starts = ms === null ? clients.map(() => null) : await Promise.all(clients.map((cl) => cl.json<HistBody>('GET', '/api/profile/histograms')));
  const t0 = performance.now();
  if (ms !== null) {
    const stop = startProgress('profiling', ms);
    await sleep(ms);
    stop();
  }
  const ends = await Promise.all(clients.map((cl) => cl.json<HistBody>('GET', '/api/profile/histograms')));
  const elapsedMs = ms === null ? Date.now() - Math.min(...ends.map((e) => Date.parse(e.since))) : performance.now() - t0;
  const resetDuringWindow = starts.some((s, i) => s !== null && s.since !== ends[i].since);
  return { windows: ends.map((e, i) => windowOf(e, starts[i])), startedAt: ms === null ? Date.now() - elapsedMs : startedAt, elapsedMs, resetDuringWindow };
}

async function foldedWindow(client: ProfileClient, g: WindowGraph | null, elapsedMs: number): Promise<Map<string, number> | null> {
  if (g === null) return null;
  try {
    const text = await client.text('GET', '/api/profile/flamegraph', { format: 'folded', duration: `${Math.ceil(elapsedMs)}ms`,
      pipeline_id: g.pipelineId, pipeline: g.variant });
    return parseFolded(text);
  } catch (err) {
    process.stderr.write(`proxy profile: no folded stacks in the report: ${(err as Error).message}\n`);
    return null;
  }
}

function emitReport(c: Ctx, r: ProfileReport): void {
  const file = output(c);
  if (file !== undefined) writeOut(file, `${JSON.stringify(r, null, 2)}\n`);
  process.stdout.write(c.json ? `${JSON.stringify(r, null, 2)}\n` : formatReport(r) + (file === undefined ? '' : `\nreport written to ${file}\n`));
}

async function reportCommand(c: Ctx): Promise<void> {
  const ms = durationMs(raw('duration', c.o.duration));
  const m = await measure([c.client], ms, c.o.reset === true);
  const g = pickGraph(m.windows[0], c.pipelineId, c.variant);
  const folded = await foldedWindow(c.client, g, m.elapsedMs);
  emitReport(c, buildReport(g, { source: [c.client.url], pipelineId: c.pipelineId, variant: c.variant, startedAt: m.startedAt, elapsedMs: m.elapsedMs,
    resetDuringWindow: m.resetDuringWindow, folded: folded === null ? null : foldedText(folded) }));
}

async function aggregateCommand(c: Ctx, token: string | null): Promise<void> {
  const list = raw('instances', c.o.instances);
  if (list === undefined) usage('--aggregate needs --instances host:port,host:port');
  const urls = [...new Set(list!.split(',').map((s) => s.trim()).filter((s) => s !== '').map((s) => baseUrl(s, '--instances')))];
  if (urls.length === 0) usage('--instances lists no instance');
  const ms = c.o.duration === undefined ? null : durationMs(raw('duration', c.o.duration));
  const clients = urls.map((u) => new ProfileClient(u, token));
  const m = await measure(clients, ms, c.o.reset === true);
  const g = pickGraph(mergeWindows(m.windows.map((w) => w.map(copyGraph))), c.pipelineId, c.variant);
  let folded: Map<string, number> | null = null;
  if (ms !== null && g !== null) {
    const parts = await Promise.all(clients.map((cl, i) => foldedWindow(cl, pickGraph(m.windows[i], g.pipelineId, g.variant), m.elapsedMs)));
    for (const p of parts) {
      if (p === null) continue;
      folded ??= new Map();
      for (const [k, v] of p) folded.set(k, (folded.get(k) ?? 0) + v);
    }
  }
  const r = buildReport(g, { source: urls, pipelineId: c.pipelineId, variant: c.variant, startedAt: m.startedAt, elapsedMs: m.elapsedMs,
    resetDuringWindow: m.resetDuringWindow, folded: folded === null ? null : foldedText(folded) });
  r.instances = urls.map((url, i) => {
    const one = buildReport(g === null ? null : pickGraph(m.windows[i], g.pipelineId, g.variant),
      { source: [url], variant: c.variant, startedAt: m.startedAt, elapsedMs: m.elapsedMs, resetDuringWindow: false, folded: null });
    return { url, total_requests: one.total_requests, errors: one.errors, throughput_rps: one.throughput_rps,
      avg_total_latency_us: one.avg_total_latency_us, p99_total_latency_us: one.p99_total_latency_us };
  });
  emitReport(c, r);
  if (!c.json) process.stdout.write(table(['instance', 'requests', 'req/s', 'avg µs', 'p99 µs', 'errors'],
    r.instances.map((x) => [x.url, int(x.total_requests), x.throughput_rps.toLocaleString('en-US'), int(x.avg_total_latency_us),
      int(x.p99_total_latency_us), int(x.errors)]), 1).replace(/^/, '\n'));
}

/** Merging adds into the first graph's histograms: copies keep each instance's own numbers intact. */
function copyGraph(g: WindowGraph): WindowGraph {
  const cp = <T extends Dist>(d: T): T => {
    const h = hdr.build({ lowestDiscernibleValue: 1, highestTrackableValue: d.hdr.highestTrackableValue, numberOfSignificantValueDigits: 3,
      bitBucketSize: 32, useWebAssembly: false });
    h.add(d.hdr);
    return { ...d, hdr: h };
  };
  return { ...g, total: cp(g.total), upstream: cp(g.upstream), steps: g.steps.map(cp) };
}

async function flamegraphCommand(c: Ctx): Promise<void> {
  const d = raw('duration', c.o.duration) ?? '60s';
  durationMs(d);
  const format = raw('format', c.o.format) ?? 'svg';
  if (format !== 'svg' && format !== 'folded') usage(`--format for --flamegraph is svg or folded, got "${format}"`);
  const minWidth = raw('min-width', c.o.minWidth);
  if (minWidth !== undefined && !(Number(minWidth) >= 0 && Number(minWidth) <= 100)) usage(`--min-width must be a percentage 0..100, got "${minWidth}"`);
  const body = await c.client.text('GET', '/api/profile/flamegraph', { ...graphQuery(c), duration: d, format, min_width: minWidth,
    title: raw('title', c.o.title) });
  const file = output(c);
  writeOut(file, body);
  if (file !== undefined) process.stdout.write(`flame graph of the last ${d} written to ${file}\n`);
}

async function exportCommand(c: Ctx): Promise<void> {
  const format = raw('format', c.o.format) ?? 'jsonl';
  if (format !== 'jsonl' && format !== 'csv') usage(`--format for --export is jsonl or csv, got "${format}"`);
  const s = await c.client.json<Snapshot>('GET', '/api/profile', graphQuery(c));
  const fields: Array<keyof StepRow> = ['name', 'phase', 'avg_latency_us', 'p50_latency_us', 'p95_latency_us', 'p99_latency_us', 'max_latency_us',
    'invocations', 'errors'];
  const csv = (v: unknown) => (/[",\n\r]/.test(String(v)) ? `"${String(v).replace(/"/g, '""')}"` : String(v));
  const text = format === 'jsonl'
    ? s.steps.map((r) => `${JSON.stringify(Object.fromEntries(fields.map((f) => [f, r[f]])))}\n`).join('')
    : [fields.join(','), ...s.steps.map((r) => fields.map((f) => csv(r[f])).join(','))].join('\n') + '\n';
  writeOut(output(c), text);
}

// ---- --live -----------------------------------------------------------------------------------------

interface LiveTotals { pipelineId: string; name: string; phase: string; calls: number; over: number; intervals: number; worstP99: number; max: number }

/** Invocations above `us` in a histogram: the first rank whose value exceeds it, by bisection. */
function countAbove(h: hdr.Histogram, us: number): number {
  const n = h.totalCount;
  if (n === 0 || h.maxValue <= us) return 0;
  let lo = 1;
  let hi = n;
  while (lo < hi) {
    const mid = Math.floor((lo + hi) / 2);
    if (h.getValueAtPercentile(((mid - 0.5) / n) * 100) > us) hi = mid;
    else lo = mid + 1;
  }
  return n - lo + 1;
}

async function liveCommand(c: Ctx): Promise<void> {
  const thresholdUs = parseThresholdUs(raw('threshold', c.o.threshold) ?? '1000us');
  let prev = await c.client.json<HistBody>('GET', '/api/profile/histograms');
  const totals = new Map<string, LiveTotals>();
  const t0 = Date.now();
  let intervals = 0;
  let stopped = false;
  let wake: () => void = () => {};
  let timer: NodeJS.Timeout | undefined;
  process.once('SIGINT', () => { stopped = true; clearTimeout(timer); wake(); });
  if (!c.json) process.stderr.write(`watching ${c.client.url} (${c.variant}): steps over ${int(thresholdUs)} µs, every second; Ctrl-C for the summary\n`);
  while (!stopped) {
    await new Promise<void>((r) => { wake = r; timer = setTimeout(r, LIVE_INTERVAL_MS); });
    if (stopped) break;
    let cur: HistBody;
    try {
      cur = await c.client.json<HistBody>('GET', '/api/profile/histograms');
    } catch (err) {
      process.stderr.write(`proxy profile: ${(err as Error).message} (retrying)\n`);
      continue;
    }
    intervals++;
    const at = new Date().toISOString().slice(11, 19);
    for (const g of windowOf(cur, prev)) {
      if (g.variant !== c.variant || (c.pipelineId !== undefined && g.pipelineId !== c.pipelineId)) continue;
      for (const s of g.steps) {
        const k = `${g.pipelineId}\0${s.name}\0${s.phase}`;
        const t = totals.get(k) ?? { pipelineId: g.pipelineId, name: s.name, phase: s.phase, calls: 0, over: 0, intervals: 0, worstP99: 0, max: 0 };
        totals.set(k, t);
        const over = countAbove(s.hdr, thresholdUs);
        const p99 = pUs(s, 99);
        t.calls += s.count;
        t.over += over;
        t.max = Math.max(t.max, Math.round(s.maxUs));
        t.worstP99 = Math.max(t.worstP99, p99);
        if (over === 0) continue;
        t.intervals++;
        const line = { time: at, pipeline_id: g.pipelineId, step: s.name, phase: s.phase, calls: s.count, over_threshold: over, p99_latency_us: p99,
          max_latency_us: Math.round(s.maxUs) };
        process.stdout.write(c.json ? `${JSON.stringify(line)}\n` : `${at}  ${s.name} ${s.phase}: ${int(over)} of ${int(s.count)} calls ` +
          `over ${int(thresholdUs)} µs, p99 ${int(p99)} µs, max ${int(line.max_latency_us)} µs\n`);
      }
    }
    prev = cur;
  }
  const rows = [...totals.values()].sort((a, b) => b.over - a.over || b.worstP99 - a.worstP99);
  const elapsed = (Date.now() - t0) / 1000;
  if (c.json) {
    process.stdout.write(`${JSON.stringify({ summary: { duration_s: elapsed, intervals, threshold_us: thresholdUs,
      steps: rows.map((r) => ({ pipeline_id: r.pipelineId, step: r.name, phase: r.phase, calls: r.calls, over_threshold: r.over,
      slow_intervals: r.intervals, worst_p99_latency_us: r.worstP99, max_latency_us: r.max })) } })}\n`);
  } else {
    process.stdout.write(`\nsummary: ${elapsed.toFixed(1)} s, ${intervals} intervals, threshold ${int(thresholdUs)} µs\n`);
    process.stdout.write(rows.length === 0 ? '(no step invocations)\n' : table(['step', 'phase', 'calls', 'over', 'slow intervals', 'worst p99 µs', 'max µs'],
      rows.map((r) => [r.name, r.phase, int(r.calls), `${int(r.over)} (${((100 * r.over) / Math.max(1, r.calls)).toFixed(2)}%)`, int(r.intervals),
        int(r.worstP99), int(r.max)])));
  }
  process.exitCode = 0;
}

// ---- --step -----------------------------------------------------------------------------------------

/** Upper bound of the bucket holding the p-th percentile of bucket counts (null when empty or +Inf). */
function bucketPercentile(buckets: Bucket[], p: number): number | null {
  const total = buckets.reduce((a, b) => a + b.count, 0);
  if (total === 0) return null;
  const rank = Math.max(1, Math.ceil((p / 100) * total));
  let seen = 0;
  for (const b of buckets) {
    seen += b.count;
    if (seen >= rank) return b.le_us === '+Inf' ? null : b.le_us;
  }
  return null;
}

function subtractBuckets(end: Bucket[], start: Bucket[] | undefined): Bucket[] {
  return end.map((b, i) => ({ le_us: b.le_us, count: b.count - (start?.[i]?.le_us === b.le_us ? start[i].count : 0) }));
}

async function stepDetailOrNull(c: Ctx, name: string): Promise<StepDetail | null> {
  try {
    return await c.client.json<StepDetail>('GET', `/api/profile/steps/${encodeURIComponent(name)}`, graphQuery(c));
  } catch (err) {
    if (err instanceof ProfileError && err.status === 404) return null;
    throw err;
  }
}

async function stepCommand(c: Ctx): Promise<void> {
  const name = raw('step', c.o.step)!;
  const ms = c.o.duration === undefined ? null : durationMs(raw('duration', c.o.duration));
  const cacheStep = name === 'cache' || name === 'wasm:cache';
  const metrics = () => (cacheStep ? c.client.text('GET', '/metrics') : Promise.resolve(''));
  if (ms !== null && c.o.reset === true) await c.client.text('POST', '/api/profile/reset');
  const [start, startHist, startMetrics] = ms === null ? [null, null, ''] : await Promise.all([stepDetailOrNull(c, name),
    c.client.json<HistBody>('GET', '/api/profile/histograms'), metrics()]);
  const t0 = performance.now();
  if (ms !== null) {
    const stop = startProgress(`profiling ${name}`, ms);
    await sleep(ms);
    stop();
  }
  const [end, endHist, endMetrics] = await Promise.all([stepDetailOrNull(c, name),
    ms === null ? null : c.client.json<HistBody>('GET', '/api/profile/histograms'), metrics()]);
  if (end === null) throw new ProfileError('PROXY_ERR_PROFILE_HTTP', `no statistics for step ${name} in ${c.pipelineId ?? 'the proxy\'s ' +
    'pipeline'}/${c.variant} at ${c.client.url}`);
  let detail = end;
  if (ms !== null && endHist !== null) {
    // Phase numbers from the subtracted HDR histograms; sub-operations have only bucket counts to
    // subtract, so their window percentiles are bucket upper bounds and their average is unknown.
    const reset = startHist !== null && startHist.since !== endHist.since;
    const g = windowOf(endHist, reset ? null : startHist).find((x) => x.pipelineId === end.pipeline_id && x.variant === end.pipeline);
    detail = { ...end, phases: end.phases.map((ph) => {
      const s = g?.steps.find((x) => x.name === end.name && x.phase === ph.phase);
      const before = reset ? undefined : start?.phases.find((x) => x.phase === ph.phase);
      const d = (p: number) => (s === undefined ? null : pUs(s, p));
      return {
        phase: ph.phase, slow: ph.slow - (before?.slow ?? 0), invocations: s?.count ?? 0, errors: s?.errors ?? 0,
        avg_latency_us: s === undefined ? null : avgUs(s), p50_latency_us: d(50), p90_latency_us: d(90), p95_latency_us: d(95),
        p99_latency_us: d(99), p999_latency_us: d(99.9), max_latency_us: s === undefined ? null : Math.round(s.maxUs),
        buckets: subtractBuckets(ph.buckets, before?.buckets),
        subops: ph.subops.map((so) => {
          const b = before?.subops.find((x) => x.name === so.name);
          const buckets = subtractBuckets(so.buckets, b?.buckets);
          return {
            name: so.name, invocations: so.invocations - (b?.invocations ?? 0), errors: so.errors - (b?.errors ?? 0), avg_latency_us: null,
            p50_latency_us: bucketPercentile(buckets, 50), p90_latency_us: bucketPercentile(buckets, 90), p95_latency_us: bucketPercentile(buckets, 95),
            p99_latency_us: bucketPercentile(buckets, 99), p999_latency_us: bucketPercentile(buckets, 99.9), max_latency_us: null, buckets,
          };
        }).filter((so) => so.invocations > 0),
      };
    }) };
  }
  let cache: { hits: number; misses: number; hit_rate_pct: number | null } | null = null;
  if (cacheStep) {
    const labels = { pipeline_id: end.pipeline_id, pipeline: end.pipeline };
    const hits = metricValue(endMetrics, 'proxy_plugin_cache_hits_total', labels);
    const misses = metricValue(endMetrics, 'proxy_plugin_cache_misses_total', labels);
    if (hits !== null || misses !== null) {
      const h = (hits ?? 0) - (ms === null ? 0 : metricValue(startMetrics, 'proxy_plugin_cache_hits_total', labels) ?? 0);
      const mi = (misses ?? 0) - (ms === null ? 0 : metricValue(startMetrics, 'proxy_plugin_cache_misses_total', labels) ?? 0);
      cache = { hits: h, misses: mi, hit_rate_pct: h + mi === 0 ? null : Math.round((h / (h + mi)) * 1e4) / 100 };
    }
  }
  const window_s = ms === null ? null : Math.round(performance.now() - t0) / 1000;
  if (c.json) { process.stdout.write(`${JSON.stringify({ ...detail, window_s, cache }, null, 2)}\n`); return; }
  const out = [`${detail.name} in ${detail.pipeline_id}/${detail.pipeline}, ${window_s === null ? 'since the last ' +
    'reset' : `over ${window_s.toFixed(2)} s`}`, ''];
  out.push(table(['phase', 'calls', 'errors', 'slow', 'avg µs', 'p50', 'p90', 'p95', 'p99', 'p99.9', 'max'], detail.phases.map((p) => [
    p.phase, int(p.invocations), int(p.errors), int(p.slow), opt(p.avg_latency_us), opt(p.p50_latency_us), opt(p.p90_latency_us),
    opt(p.p95_latency_us), opt(p.p99_latency_us), opt(p.p999_latency_us), opt(p.max_latency_us),
  ]), 1));
  const le = (v: number | null, approx: boolean) => (v === null ? '-' : approx ? `≤${int(v)}` : int(v));
  for (const p of detail.phases) {
    out.push(`${p.phase} distribution`, bucketBars(p.buckets).trimEnd(), '');
    if (p.subops.length === 0) continue;
    out.push(`${p.phase} sub-operations${window_s === null ? '' : ' (window percentiles are bucket bounds)'}`);
    // Sub-operation names are the plugins', possibly built from a request (a client's collection name).
    out.push(table(['name', 'calls', 'errors', 'avg µs', 'p50', 'p99', 'max'], p.subops.map((s) => [
      terminalSafe(s.name), int(s.invocations), int(s.errors), opt(s.avg_latency_us), le(s.p50_latency_us, window_s !== null),
      le(s.p99_latency_us, window_s !== null), opt(s.max_latency_us),
    ]), 1));
  }
  if (cacheStep) {
    out.push(cache === null ? 'cache: no proxy_plugin_cache_hits_total / _misses_total in /metrics for this graph'
      : `cache: ${int(cache.hits)} hits, ${int(cache.misses)} misses, hit rate ${cache.hit_rate_pct === null ? '-' : `${cache.hit_rate_pct.toFixed(2)}%`}`);
  }
  process.stdout.write(out.join('\n').trimEnd() + '\n');
}

// ---- --compare ---------------------------------------------------------------------------------------

function readReport(file: string): ProfileReport {
  let r: ProfileReport;
  try {
    r = JSON.parse(readFileSync(file, 'utf8')) as ProfileReport;
  } catch (err) {
    return usage(`cannot read report ${file}: ${(err as Error).message}`);
  }
  if (r === null || typeof r !== 'object' || r.report !== 'proxy-profile' || !Array.isArray(r.steps)) usage(`${file} is not a report of \`proxy ` +
    `profile --duration --output\``);
  return r;
}

interface Change { baseline: number; experiment: number; delta: number; delta_pct: number | null }
const change = (a: number, b: number): Change => ({ baseline: a, experiment: b, delta: Math.round((b - a) * 100) / 100,
  delta_pct: a === 0 ? null : Math.round(((b - a) / a) * 1e4) / 100 });

/** A report's folded stacks per request, so that windows of different length or load compare what each request cost. */
function perRequest(r: ProfileReport): Map<string, number> {
  const m = parseFolded(r.folded ?? '');
  const n = Math.max(1, r.total_requests);
  for (const [k, v] of m) m.set(k, v / n);
  return m;
}

async function compareCommand(c: Ctx): Promise<void> {
  const bFile = raw('compare', c.o.compare)!;
  if (c.experiment === undefined) usage('--compare needs two reports: --compare <baseline.json> <experiment.json>');
  const a = readReport(bFile);
  const b = readReport(c.experiment!);
  const metrics = {
    throughput_rps: change(a.throughput_rps, b.throughput_rps),
    avg_total_latency_us: change(a.avg_total_latency_us, b.avg_total_latency_us),
    p99_total_latency_us: change(a.p99_total_latency_us, b.p99_total_latency_us),
    avg_pipeline_overhead_us: change(a.avg_pipeline_overhead_us, b.avg_pipeline_overhead_us),
    error_rate_pct: change(a.error_rate_pct, b.error_rate_pct),
  };
  const keys = [...new Set([...a.steps, ...b.steps].map((s) => stepKey(s.name, s.phase)))];
  const steps = keys.map((k) => {
    const [name, phase] = k.split('\0');
    const x = a.steps.find((s) => s.name === name && s.phase === phase);
    const y = b.steps.find((s) => s.name === name && s.phase === phase);
    return {
      name, phase, status: x === undefined ? 'added' : y === undefined ? 'removed' : 'both',
      avg_latency_us: x === undefined || y === undefined ? null : change(x.avg_latency_us, y.avg_latency_us),
      p99_latency_us: x === undefined || y === undefined ? null : change(x.p99_latency_us, y.p99_latency_us),
    };
  });
  let svg: string | null = null;
  const file = output(c);
  if (file !== undefined) {
    if (a.folded === null || b.folded === null) throw new ProfileError('PROXY_ERR_PROFILE_DATA', `${a.folded === null ? bFile : c.experiment} ` +
      `carries no folded stacks: no differential flame graph`);
    const { renderDiffFlameGraph } = await import('../profiling/flamegraph-diff.ts');
    svg = renderDiffFlameGraph(perRequest(a), perRequest(b), { title: `${bFile} → ${c.experiment} (µs per request)`, minWidthPct: 0.1 });
  }
  const result = { baseline: bFile, experiment: c.experiment, metrics, steps };
  if (c.json) process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
  else {
    const pct = (ch: Change | null, pp = false) => (ch === null ? '-' : pp ? `${ch.delta >= 0 ? '+' : ''}${ch.delta.toFixed(2)} pp`
      : `${ch.delta >= 0 ? '+' : ''}${ch.delta.toLocaleString('en-US')}${ch.delta_pct === null ? '' : ` ` +
        `(${ch.delta_pct >= 0 ? '+' : ''}${ch.delta_pct.toFixed(1)}%)`}`);
    const num = (v: number) => v.toLocaleString('en-US');
    const m = metrics;
    process.stdout.write(table(['', 'baseline', 'experiment', 'change'], [
      ['throughput req/s', num(m.throughput_rps.baseline), num(m.throughput_rps.experiment), pct(m.throughput_rps)],
      ['avg latency µs', num(m.avg_total_latency_us.baseline), num(m.avg_total_latency_us.experiment), pct(m.avg_total_latency_us)],
      ['p99 latency µs', num(m.p99_total_latency_us.baseline), num(m.p99_total_latency_us.experiment), pct(m.p99_total_latency_us)],
      ['overhead µs', num(m.avg_pipeline_overhead_us.baseline), num(m.avg_pipeline_overhead_us.experiment), pct(m.avg_pipeline_overhead_us)],
      ['error rate', `${a.error_rate_pct.toFixed(2)}%`, `${b.error_rate_pct.toFixed(2)}%`, pct(m.error_rate_pct, true)],
    ], 1) + '\n' + (steps.length === 0 ? '(no steps)\n' : table(['step', 'phase', 'avg µs', 'Δ avg', 'p99 µs', 'Δ p99'], steps.map((s) => [
      s.name, s.phase,
      s.avg_latency_us === null ? s.status : `${num(s.avg_latency_us.baseline)} → ${num(s.avg_latency_us.experiment)}`, pct(s.avg_latency_us),
      s.p99_latency_us === null ? s.status : `${num(s.p99_latency_us.baseline)} → ${num(s.p99_latency_us.experiment)}`, pct(s.p99_latency_us),
    ]))));
  }
  if (svg !== null && file !== undefined) {
    writeOut(file, svg);
    if (!c.json) process.stdout.write(`\ndifferential flame graph written to ${file}\n`);
  }
}
