// The read side of the controller: the bodies of GET /api/v1/canary (list), GET …/{id} (status),
// …/history and …/report, built from a canary's record and what the process holds in memory (the
// stage windows and the last evaluation). Shapes documented in docs/canary.md.
import { formatDuration, pendingStatus, type Evaluation } from './evaluator.ts';
import type { CanaryRecord, EvaluationView, HistoryEntry } from './store.ts';
import { round, type SideWindow } from './windows.ts';
import { stageShadowPct } from './spec.ts';
import type { DiffRecord, ShadowFigures } from './shadow.ts';
import type { ShadowWindow } from './shadow-windows.ts';

export interface CanaryView {
  readonly record: CanaryRecord;
  readonly stage: { baseline: SideWindow; candidate: SideWindow };
  readonly lastEval: Evaluation | null;
  /** The last answer of a stage's gate (gate.ts), with the stage it was for. */
  readonly lastGate?: { stage: number; ok: boolean; result: string; ms: number; at: number } | null;
  /** A shadow canary's comparison and the current stage's shadowed requests. */
  readonly shadow?: ShadowFigures | null;
  readonly shadowStage?: ShadowWindow;
  /** In a fleet, on an instance that does not evaluate: the evaluator's last view. */
  readonly adopted?: EvaluationView | null;
}

/** The evaluator's view, when this instance shows another's and it is of the current stage. */
function adoptedView(c: CanaryView): EvaluationView | null {
  const a = c.adopted ?? null;
  return a !== null && a.stage === c.record.current_stage ? a : null;
}

/** How many of the latest diffs the status (and the dashboard's feed) carries. */
const STATUS_DIFFS = 5;

function diffRow(d: DiffRecord): Record<string, unknown> {
  const row: Record<string, unknown> = { at: iso(d.at), kind: d.kind, op: d.op, db: d.db, collection: d.collection, baseline: d.baseline,
    candidate: d.candidate, paths: d.paths, truncated: d.truncated, reply: d.reply === null ? null : { ...d.reply } };
  // In a fleet, the instance that shadowed the request.
  if (d.instance_id !== undefined) row.instance_id = d.instance_id;
  return row;
}

/** The `shadow` part of a status: counts since the start, the current stage's figures, the latest diffs. */
function shadowStatus(c: CanaryView): Record<string, unknown> | null {
  const r = c.record;
  const sh = r.spec.shadow;
  if (sh == null) return null;
  const sc = c.shadow ?? null;
  const sampled = sc?.sampled ?? 0;
  const diverged = sc?.diverged ?? 0;
  const running = r.status === 'active' || r.status === 'paused';
  return {
    shadow_pct: running ? stageShadowPct(r.spec, r.spec.stages[r.current_stage - 1]) : 0, show_values: sh.show_values, ignore_paths: sh.ignore_paths,
    sampled, diverged, divergence_rate: sampled === 0 ? null : round(diverged / sampled, 6),
    by_kind: sc === null ? { outcome: 0, request: 0, reply: 0 } : { ...sc.byKind },
    stage: adoptedView(c)?.shadow_stage ?? c.shadowStage?.view() ?? null, memory_bytes: sc?.memoryBytes ?? 0,
    upstream_reads: sh.upstream_reads === true, reads: sc?.reads ?? 0, reads_in_flight: sc?.readsInFlight ?? 0,
    latest_diffs: (sc?.diffs() ?? []).slice(0, STATUS_DIFFS).map(diffRow),
  };
}

/** GET /api/v1/canary/{id}/diffs. */
export function diffsView(c: CanaryView, _now: number): Record<string, unknown> {
  const r = c.record;
  const s = shadowStatus(c)!;
  const sc = c.shadow ?? null;
  return {
    canary_id: r.id, pipeline_id: r.pipeline_id, status: r.status, shadow_pct: s.shadow_pct, show_values: s.show_values, ignore_paths: s.ignore_paths,
    sampled: s.sampled, diverged: s.diverged, divergence_rate: s.divergence_rate, by_kind: s.by_kind, memory_bytes: s.memory_bytes,
    upstream_reads: s.upstream_reads, reads: s.reads,
    max_diffs: r.spec.shadow!.max_diffs, diffs: (sc?.diffs() ?? []).map(diffRow),
  };
}

export function iso(ms: number): string {
  return new Date(ms).toISOString();
}

/** One row of GET /api/v1/canary. */
export function listRow(r: CanaryRecord): Record<string, unknown> {
  return {
    canary_id: r.id, pipeline_id: r.pipeline_id, status: r.status, current_stage: r.current_stage, traffic_pct: r.traffic_pct,
    started_at: iso(r.created_at), description: r.spec.description, baseline_version: r.baseline_version, candidate_version: r.candidate_version,
  };
}

/** GET /api/v1/canary/{id}. */
export function statusView(c: CanaryView, now: number): Record<string, unknown> {
  const r = c.record;
  const end = r.outcome?.at ?? now;
  const ev = c.lastEval;
  // A finished canary's timers stop where it ended: "breached for" is how long the breach had
  // lasted then, not a counter that runs on after the rollback.
  const timerFor = (rule: string) => formatDuration(r.timers[rule] === undefined ? 0 : end - r.timers[rule]);
  const stage = r.spec.stages[r.current_stage - 1];
  const pending = ev === null ? pendingStatus({ spec: r.spec, stage, now, stageEnteredAt: r.stage_entered_at,
    stageCandidateRequests: r.stage_candidate_requests }) : null;
  const conditions = ev?.conditions ?? pending!.conditions;
  const inconclusive = ev?.result === 'inconclusive';
  return {
    canary_id: r.id, pipeline_id: r.pipeline_id, status: r.status, current_stage: r.current_stage, traffic_pct: r.traffic_pct,
    started_at: iso(r.created_at), stage_entered_at: iso(r.stage_entered_at), elapsed: formatDuration(end - r.created_at),
    version: r.version, description: r.spec.description, auto_promote: r.spec.auto_promote,
    baseline_version: r.baseline_version, candidate_version: r.candidate_version, stages: r.spec.stages,
    match: r.spec.match ?? null, sticky: r.spec.sticky ?? null,
    metrics: { window: 'stage', ...(adoptedView(c)?.metrics ?? { baseline: c.stage.baseline.metrics(), candidate: c.stage.candidate.metrics() }) },
    rollback_status: {
      error_rate_sustained_for: timerFor('error_rate_delta_pct'), latency_sustained_for: timerFor('latency_p95_delta_ms'),
      // No rollback rule breached (for a finished canary: when it ended). A manual rollback of a
      // candidate that breached nothing was healthy; the outcome is in `status` and the report.
      healthy: Object.keys(r.timers).length === 0,
      evidence: ev === null ? 'pending' : inconclusive ? 'inconclusive' : 'sufficient',
      last_evaluated_at: ev === null ? null : iso(ev.at),
    },
    rules: ev?.rules ?? pending!.rules,
    promotion: {
      eligible: ev?.promotable ?? false, manual_gate: stage.manual_gate === true, conditions,
      gate: stage.gate === undefined ? null : {
        url: stage.gate.url, timeout_ms: stage.gate.timeout_ms,
        last: c.lastGate == null || c.lastGate.stage !== r.current_stage ? null
        : { ok: c.lastGate.ok, result: c.lastGate.result, ms: c.lastGate.ms, at: iso(c.lastGate.at) },
      },
    },
    evaluation: {
      result: ev === null ? 'pending' : ev.result, window_requests: ev?.window_requests ?? { baseline: 0, candidate: 0 },
      min_window_requests: r.spec.rollback_rules.min_window_requests,
    },
    mode: r.spec.shadow == null ? 'split' : 'shadow',
    shadow: shadowStatus(c),
  };
}

export function historyView(r: CanaryRecord, entries: HistoryEntry[]): Record<string, unknown> {
  return {
    canary_id: r.id, pipeline_id: r.pipeline_id, description: r.spec.description, baseline_version: r.baseline_version,
    candidate_version: r.candidate_version, status: r.status,
    history: entries.map((e) => ({ ...e, at: iso(e.at) })),
  };
}

/** GET …/report: the rollback (or completion) report; for an active canary, the same shape so far. */
export function reportView(c: CanaryView, now: number): Record<string, unknown> {
  const r = c.record;
  const o = r.outcome;
  const final = o?.final ?? adoptedView(c)?.metrics ?? { baseline: c.stage.baseline.metrics(), candidate: c.stage.candidate.metrics() };
  const outcome = r.status === 'completed' || r.status === 'rolled_back' ? r.status : null;
  return {
    canary_id: r.id, pipeline_id: r.pipeline_id, description: r.spec.description,
    baseline_version: r.baseline_version, candidate_version: r.candidate_version, outcome,
    started_at: iso(r.created_at), ended_at: o === null ? null : iso(o.at), duration: formatDuration((o?.at ?? now) - r.created_at),
    reason: o?.reason ?? null, triggered_by: o?.triggered_by ?? null, triggering_rules: o?.rules ?? [],
    timeline: r.stages_visited.map((v) => ({
      stage: v.stage, traffic_pct: v.traffic_pct, entered_at: iso(v.entered_at), left_at: v.left_at === null ? null : iso(v.left_at),
      duration: formatDuration((v.left_at ?? o?.at ?? now) - v.entered_at), candidate_requests: v.candidate_requests,
    })),
    final_comparison: {
      baseline: final.baseline, candidate: final.candidate,
      deltas: { error_rate_pct: round(final.candidate.error_rate_pct - final.baseline.error_rate_pct),
        latency_p95_ms: round(final.candidate.latency_p95_ms - final.baseline.latency_p95_ms) },
    },
    candidate_config: r.spec.candidate_config,
  };
}
