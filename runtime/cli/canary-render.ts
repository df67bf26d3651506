// What `proxy canary status` and `proxy canary history` print for people: the control plane's
// answers (docs/canary.md) as text. Pure functions of those answers and the time now, so a test
// renders what a real controller answered without a process or a clock of its own.
import { formatDuration } from '../canary/index.ts';
import { forTerminal } from '../log/index.ts';

export interface Side { requests: number; error_rate_pct: number; latency_p50_ms?: number; latency_p95_ms: number; latency_p99_ms?: number; errors?: number }
export interface Rule { rule: string; value: number | null; threshold: number; met: boolean; state?: string; sustained_for?: string; comparison?: string }
export interface Condition { condition: string; value: unknown; threshold: unknown; met: boolean }
export interface Status {
  canary_id: string; pipeline_id: string; status: string; current_stage: number; traffic_pct: number; started_at: string;
  stage_entered_at: string; elapsed: string; description?: string; auto_promote?: boolean; baseline_version?: string; candidate_version?: string;
  stages?: Array<{ traffic_pct: number; min_duration: string; min_requests: number; manual_gate?: boolean }>;
  metrics?: { window?: string; baseline: Side; candidate: Side };
  rollback_status?: { error_rate_sustained_for?: string; latency_sustained_for?: string; healthy?: boolean; evidence?: string };
  rules?: Rule[];
  promotion?: { eligible?: boolean; manual_gate?: boolean; conditions?: Condition[];
    gate?: { url: string; last: { ok: boolean; result: string; at: string } | null } | null };
  match?: Record<string, string | string[]> | null; sticky?: string | null;
  evaluation?: { result?: string; window_requests?: { baseline: number; candidate: number }; min_window_requests?: number };
}
/** GET …/report: how a finished canary ended. */
export interface Report { outcome: string | null; ended_at: string | null; duration: string; reason: string | null; triggered_by: string | null }
export interface HistoryEntry { at: string; event: string; stage?: number; traffic_pct?: number; message?: string; details?: Record<string, unknown> }
export interface History { canary_id: string; pipeline_id: string; description?: string; status?: string; baseline_version?: string;
  candidate_version?: string; history: HistoryEntry[] }

export function table(headers: string[], rows: string[][]): string {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) => cells.map((c, i) => (i === cells.length - 1 ? c : (c ?? '').padEnd(widths[i]))).join('  ').trimEnd();
  return [line(headers), ...rows.map(line)].join('\n') + '\n';
}

export const num = (n: number | null | undefined, digits = 2) => (n === null || n === undefined ||
  Number.isNaN(n) ? '-' : Number.isInteger(n) ? String(n) : n.toFixed(digits).replace(/\.?0+$/, ''));
/** A condition's value or threshold: numbers rounded, null (no evidence yet) said so. */
const shown = (x: unknown) => (x === null || x === undefined ? 'no data' : typeof x === 'number' ? num(x, 3) : String(x));

export const isRunning = (status: string) => status === 'active' || status === 'paused';

/** How long ago an ISO time was, as the control plane writes durations ("4m12s"). */
const ago = (at: string, now: number) => formatDuration(now - Date.parse(at));

/**
 * One canary's status. A running canary shows how long ago it started and how long each rule has
 * been breached so far; a finished one (`report` given) when it ended and after how long, how it
 * ended, and the rules' state when it ended.
 */
export function renderStatus(answer: Status, verbose: boolean, now: number, reportAnswer: Report | null = null): string {
  const s = forTerminal(answer);
  const report = forTerminal(reportAnswer);
  const stages = s.stages?.length;
  const finished = !isRunning(s.status);
  const lines: string[] = [
    `canary ${s.canary_id}  pipeline ${s.pipeline_id}  ${s.status.toUpperCase()}`,
    `  stage      ${s.current_stage}${stages ? ` of ${stages}` : ''}, ${s.traffic_pct}% to the ` +
      `candidate${s.auto_promote === undefined ? '' : s.auto_promote ? ' (auto-promote)' : ' (manual promotion)'}`,
  ];
  // `elapsed` is the time since the start while the canary runs, and its whole length once it has ended.
  if (!finished) lines.push(`  started    ${s.started_at} (${s.elapsed} ago); stage entered ${s.stage_entered_at}`);
  else if (report?.ended_at != null) lines.push(`  started    ${s.started_at}; ended ${report.ended_at} (${ago(report.ended_at, now)} ago), ` +
    `after ${s.elapsed}`);
  else lines.push(`  started    ${s.started_at} (${ago(s.started_at, now)} ago); ran ${s.elapsed}`);
  if (finished && report?.outcome != null) {
    const how = report.outcome === 'rolled_back' ? 'rolled back' : report.outcome;
    lines.push(`  outcome    ${how}${report.triggered_by ? ` (${report.triggered_by})` : ''}${report.reason ? `: ${report.reason}` : ''}`);
  }
  if (s.baseline_version !== undefined) lines.push(`  versions   baseline ${s.baseline_version}, candidate ${s.candidate_version ?? '-'}`);
  if (s.description) lines.push(`  about      ${s.description}`);
  if (s.match != null || s.sticky != null) {
    const aim = s.match == null ? 'everyone by the stage\'s share' : `always ${Object.entries(s.match).map(([k,
      v]) => `${k} ${([] as string[]).concat(v).join('|')}`).join(' and ')}; the others by the stage's share`;
    lines.push(`  aimed      ${aim}${s.sticky != null ? `; sticky per ${s.sticky}` : ''}`);
  }
  const gate = s.promotion?.gate;
  if (gate != null) lines.push(`  gate       ${gate.url}: ${gate.last === null ? 'not asked yet at this ' +
    'stage' : `${gate.last.ok ? 'confirmed' : 'HOLDING'} (${gate.last.result}, ${gate.last.at})`}`);
  const ev = s.evaluation;
  // A canary that ended before its first evaluation has no evaluation to show, not a pending one.
  if (ev?.result !== undefined && !(finished && ev.result === 'pending')) {
    const counts = ev.window_requests ? ` (last window: baseline ${ev.window_requests.baseline}, candidate ${ev.window_requests.candidate} ` +
      `requests${ev.result === 'inconclusive' && ev.min_window_requests !== undefined ? `; ${ev.min_window_requests} needed on each ` +
      `side` : ''})` : '';
    lines.push(`  evaluation ${ev.result}${counts}`);
  }
  const rs = s.rollback_status;
  if (rs !== undefined) {
    const breached = `error rate breached for ${rs.error_rate_sustained_for ?? '0s'}, latency for ${rs.latency_sustained_for ?? '0s'}`;
    if (!finished) lines.push(`  health     ${rs.healthy === false ? 'UNHEALTHY' : 'healthy'}; ${breached}`);
    else lines.push(`  health     when it ended: ${rs.healthy === false ? `a rollback rule was breached; ${breached}` : 'no rollback rule breached'}`);
  }
  if (s.metrics !== undefined) {
    lines.push('', table(['', 'REQUESTS', 'ERROR %', 'P50 MS', 'P95 MS', 'P99 MS'], (['baseline', 'candidate'] as const).map((side) => {
      const m = s.metrics![side];
      return [side, String(m.requests), num(m.error_rate_pct, 3), num(m.latency_p50_ms), num(m.latency_p95_ms), num(m.latency_p99_ms)];
    })).trimEnd());
  }
  if (verbose) {
    if (s.rules !== undefined && s.rules.length > 0) {
      lines.push('', 'Rollback rules (last window; "breached" = its rollback condition holds):');
      lines.push(table(['RULE', 'VALUE', 'THRESHOLD', 'STATE', 'SUSTAINED'], s.rules.map((r) => [
        r.rule, r.value === null ? 'no data' : num(r.value, 3), `${r.comparison === 'less_than' ? '< ' : '> '}${num(r.threshold, 3)}`,
        r.met ? 'breached' : (r.state ?? 'ok'), r.sustained_for ?? '-',
      ])).trimEnd());
    }
    const p = s.promotion;
    if (p?.conditions !== undefined) {
      lines.push('', `Auto-promote conditions (stage window)${p.manual_gate ? '; this stage has a manual gate' : ''}${p.eligible ? ': all met' : ''}:`);
      lines.push(table(['CONDITION', 'CURRENT', 'NEEDS', ''], p.conditions.map((cd) => [
        cd.condition, shown(cd.value), `${cd.condition.startsWith('max_') ? '<= ' : '>= '}${shown(cd.threshold)}`,
        cd.met ? 'met' : 'unmet',
      ])).trimEnd());
    }
  }
  return `${lines.join('\n')}\n`;
}

export function renderHistory(answer: History): string {
  const h = forTerminal(answer);
  const head = `canary ${h.canary_id}  pipeline ${h.pipeline_id}${h.status ? `  ${h.status.toUpperCase()}` : ''}\n`
    + (h.description ? `  about      ${h.description}\n` : '')
    + (h.baseline_version ? `  versions   baseline ${h.baseline_version}, candidate ${h.candidate_version ?? '-'}\n` : '');
  return `${head}\n${table(['AT', 'EVENT', 'STAGE', 'TRAFFIC', 'DETAIL'], h.history.map((e) => [
    e.at, e.event, e.stage === undefined ? '' : String(e.stage), e.traffic_pct === undefined ? '' : `${e.traffic_pct}%`, historyDetail(e),
  ]))}`;
}

/** An entry's message, then what its details add: a rule, trigger or reason the message already names is not repeated. */
export function historyDetail(e: HistoryEntry): string {
  const message = e.message ?? '';
  const parts: string[] = message === '' ? [] : [message];
  const d = e.details ?? {};
  if (typeof d.triggered_by === 'string' && !message.includes(d.triggered_by)) parts.push(`by ${d.triggered_by}`);
  if (typeof d.reason === 'string' && !message.includes(d.reason)) parts.push(`reason: ${d.reason}`);
  if (Array.isArray(d.rules)) {
    for (const r of d.rules as Rule[]) if (!message.includes(r.rule)) parts.push(`${r.rule} ${num(r.value, 3)} (threshold ${num(r.threshold, 3)})`);
  }
  return parts.join('; ');
}

/** GET /api/v1/canary/{id}/diffs (docs/canary.md, "Shadow canaries"). */
export interface Diffs {
  canary_id: string; pipeline_id: string; status: string; shadow_pct: number; show_values: boolean; sampled: number; diverged: number;
  divergence_rate: number | null; by_kind: Record<string, number>; memory_bytes: number; max_diffs: number;
  diffs: Array<{ at: string; kind: string; op: string; db: string; collection: string; baseline: string; candidate: string; truncated: boolean;
    /** In a fleet: the instance that shadowed the request. */
    instance_id?: string;
    paths: DiffPath[]; reply?: { status: string; paths: DiffPath[]; truncated: boolean } | null }>;
}

interface DiffPath { path: string; change: string; baseline_type?: string; candidate_type?: string; baseline?: string; candidate?: string }

/**
 * `proxy canary diffs`: the divergence counts, then the ring's diffs grouped by kind, operation and
 * differing paths — COUNT, KIND, PATHS, in a fleet the INSTANCES whose diffs the group holds, and
 * one SAMPLE (namespace, what each graph did or the values when shown, and when).
 */
export function renderDiffs(answer: Diffs): string {
  const d = forTerminal(answer);
  const rate = d.divergence_rate === null ? '-' : `${num(d.divergence_rate * 100, 2)}%`;
  const kinds = Object.entries(d.by_kind).map(([k, n]) => `${k} ${n}`).join(', ');
  const head = `canary ${d.canary_id} on ${d.pipeline_id} (${d.status}, shadowing ${d.shadow_pct}%): ${d.diverged} of ${d.sampled} shadowed ` +
    `requests diverged (${rate}) — ${kinds}\n`;
  if (d.diffs.length === 0) {
    return `${head}no diffs kept${d.diverged > 0 ? ' (the ring holds the diffs of a running canary, or its pipeline\'s latest)' : ''}\n`;
  }
  const groups = new Map<string, { count: number; kind: string; paths: string; instances: Set<string>; sample: Diffs['diffs'][number] }>();
  for (const x of d.diffs) {
    const paths = x.paths.length === 0 ? `(${x.baseline} vs ${x.candidate})` : x.paths.map((p) => `${p.path} ${p.change}`).join(', ') +
      (x.truncated ? ', …' : '');
    const key = `${x.kind}\0${x.op}\0${paths}`;
    let g = groups.get(key);
    if (g === undefined) groups.set(key, g = { count: 0, kind: `${x.kind} ${x.op}`, paths, instances: new Set(), sample: x });
    g.count++;
    if (x.instance_id !== undefined) g.instances.add(x.instance_id);
  }
  const fleet = d.diffs.some((x) => x.instance_id !== undefined);
  const sample = (x: Diffs['diffs'][number]): string => {
    const ns = x.collection === '' ? x.db : `${x.db}.${x.collection}`;
    const shown = x.paths.filter((p) => p.baseline !== undefined || p.candidate !== undefined).slice(0, 2)
      .map((p) => `${p.path}: ${p.baseline ?? '(none)'} → ${p.candidate ?? '(none)'}`).join('; ');
    // With shadow_upstream_reads: what the candidate's own read would have answered differently.
    const reply = x.reply == null ? '' : x.reply.status !== 'fetched' ? ` (its read: ${x.reply.status})`
      : ` (its read's answer: ${x.reply.paths.length === 0 ? 'the same' : x.reply.paths.map((p) => `${p.path} ${p.change}`).join(', ')})`;
    return `${ns} ${x.at}${shown === '' ? '' : ` ${shown}`}${reply}`;
  };
  const rows = [...groups.values()].sort((a, b) => b.count - a.count)
    .map((g) => [String(g.count), g.kind, g.paths, ...(fleet ? [[...g.instances].sort().join(', ')] : []), sample(g.sample)]);
  return `${head}${table(['COUNT', 'KIND', 'PATHS', ...(fleet ? ['INSTANCES'] : []), 'SAMPLE'], rows)}` +
    `(the latest ${d.diffs.length} diffs, at most ${d.max_diffs}; values ${d.show_values ? 'shown' : 'hidden (shadow.show_values)'})\n`;
}
