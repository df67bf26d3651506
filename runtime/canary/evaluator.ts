// One evaluation of a canary (SPEC §3 rollback engine steps 1–5 and the four auto-promote
// conditions), as a pure function of its figures and its persisted timers: no I/O, no clock of its
// own, so every row of the state machine is testable with injected windows and times.
import { canaryDurationMs } from '../config/index.ts';
import type { RuleReading } from './events.ts';
import { mannWhitneyWorse, errorRateWorse } from './judge.ts';
import { isShadowStage, type AutoPromoteRules, type CanarySpec, type Stage } from './spec.ts';
import { buckets, round, type SideWindow } from './windows.ts';
import type { ShadowWindow } from './shadow-windows.ts';

export type RuleStateName = 'ok' | 'warning' | 'breaching' | 'no_data';

export interface RuleStatus {
  rule: string;
  value: number | null;
  threshold: number;
  comparison?: 'greater_than' | 'less_than';
  /** The rollback condition holds (delta beyond threshold, and significant when the judge is on). */
  met: boolean;
  state: RuleStateName;
  sustained_for: string;
  /** Judge's one-sided p-value, when the judge is on and the rule could be tested. */
  p_value?: number;
}

export interface ConditionStatus {
  condition: 'min_duration' | 'min_requests' | 'max_error_rate_delta_pct' | 'max_latency_p95_delta_ms' | 'judge' | 'max_divergence_rate'
    | 'max_candidate_latency_p95_delta_ms';
  value: string | number | null;
  threshold: string | number;
  met: boolean;
}

export interface Evaluation {
  at: number;
  result: 'ok' | 'warning' | 'breaching' | 'inconclusive';
  window_requests: { baseline: number; candidate: number };
  rules: RuleStatus[];
  /** Timers after this evaluation (rule → breach start). */
  timers: Record<string, number>;
  /** Rules whose timer reached sustained_duration: roll back. */
  rollback: RuleReading[];
  /** Rules that entered the warning zone (or breach) and had not warned in this episode. */
  warnings: RuleReading[];
  warned: string[];
  conditions: ConditionStatus[];
  /** The four conditions hold, the window is evidence, no breach is running. */
  promotable: boolean;
}

/** Custom-metric values of one window, per rule metric: NaN when there is no data. */
export type CustomValues = Map<string, { baseline: number; candidate: number }>;

export interface EvaluationInput {
  spec: CanarySpec;
  stage: Stage;
  now: number;
  /** When this window began (the previous evaluation, or when the windows were primed). */
  windowStart: number;
  stageEnteredAt: number;
  stageCandidateRequests: number;
  timers: Record<string, number>;
  warned: readonly string[];
  window: { baseline: SideWindow; candidate: SideWindow };
  stageWindow: { baseline: SideWindow; candidate: SideWindow };
  custom: CustomValues;
  warningShare: number;
  /**
   * A shadow canary's shadowed requests, this window's and the stage's (null: not a shadow canary).
   * In a shadow stage (traffic_pct 0) they are the evidence of every rule and condition; in any
   * stage they are what divergence_rate and candidate_latency_p95_delta_ms read.
   */
  shadow?: { window: ShadowWindow; stage: ShadowWindow } | null;
}

export function formatDuration(ms: number): string {
  if (!(ms > 0)) return '0s';
  if (ms < 1000) return `${Math.round(ms)}ms`;
  let s = Math.floor(ms / 1000);
  const h = Math.floor(s / 3600);
  s -= h * 3600;
  const m = Math.floor(s / 60);
  s -= m * 60;
  return `${h > 0 ? `${h}h` : ''}${m > 0 ? `${m}m` : ''}${s > 0 || (h === 0 && m === 0) ? `${s}s` : ''}`;
}

/** Candidate minus baseline error rate, percentage points; NaN without requests on a side. */
/** Candidate minus baseline error rate, percentage points; NaN without requests on a side. Rounded
 *  to 1e-9 so that binary fractions do not decide a comparison (5.02 − 0.02 is 5.000000000000001). */
export function errorRateDelta(b: SideWindow, c: SideWindow): number {
  return round(c.errorRatePct() - b.errorRatePct(), 9);
}

export function p95Delta(b: SideWindow, c: SideWindow): number {
  return round(c.percentileMs(95) - b.percentileMs(95), 9);
}

/** The stage's thresholds for promotion: the stage's own, floored by auto_promote_rules. */
export function stageMinimums(stage: Stage, rules: AutoPromoteRules): { durationMs: number; duration: string; requests: number } {
  const a = canaryDurationMs(stage.min_duration);
  const b = canaryDurationMs(rules.min_duration);
  return a >= b ? { durationMs: a, duration: stage.min_duration, requests: Math.max(stage.min_requests, rules.min_requests) }
    : { durationMs: b, duration: rules.min_duration, requests: Math.max(stage.min_requests, rules.min_requests) };
}

/** The promotion conditions that concern time and volume (what `force` skips). */
export function volumeConditions(input: Pick<EvaluationInput, 'spec' | 'stage' | 'now' | 'stageEnteredAt' | 'stageCandidateRequests'>): ConditionStatus[] {
  const min = stageMinimums(input.stage, input.spec.auto_promote_rules);
  const at = Math.max(0, input.now - input.stageEnteredAt);
  return [
    { condition: 'min_duration', value: formatDuration(at), threshold: min.duration, met: at >= min.durationMs },
    { condition: 'min_requests', value: input.stageCandidateRequests, threshold: min.requests, met: input.stageCandidateRequests >= min.requests },
  ];
}

/**
 * Rules and promotion conditions before a canary's first evaluation: every rule and condition the
 * spec has, the ones that need a window's data shown as `no_data` / null (so a status read in the
 * first check_interval lists the same rows as any later one).
 */
export function pendingStatus(input: Pick<EvaluationInput,
  'spec' | 'stage' | 'now' | 'stageEnteredAt' | 'stageCandidateRequests'>): { rules: RuleStatus[]; conditions: ConditionStatus[] } {
  const { spec } = input;
  const rr = spec.rollback_rules;
  const none = (rule: string, threshold: number, comparison?: 'greater_than' | 'less_than'): RuleStatus =>
    ({ rule, value: null, threshold, ...(comparison === undefined ? {} : { comparison }), met: false, state: 'no_data', sustained_for: formatDuration(0) });
  const rules = [
    none('error_rate_delta_pct', rr.error_rate_delta_pct),
    none('latency_p95_delta_ms', rr.latency_p95_delta_ms),
    ...rr.custom_metrics.map((m) => none(`custom:${m.metric}`, m.threshold_delta, m.comparison)),
  ];
  if (spec.shadow != null && rr.divergence_rate !== undefined) rules.push(none('divergence_rate', rr.divergence_rate));
  if (spec.shadow != null && rr.candidate_latency_p95_delta_ms !== undefined) rules.push(none('candidate_latency_p95_delta_ms',
    rr.candidate_latency_p95_delta_ms));
  const apr = spec.auto_promote_rules;
  const conditions: ConditionStatus[] = [
    ...volumeConditions(input),
    { condition: 'max_error_rate_delta_pct', value: null, threshold: apr.max_error_rate_delta_pct, met: false },
    { condition: 'max_latency_p95_delta_ms', value: null, threshold: apr.max_latency_p95_delta_ms, met: false },
  ];
  if (spec.shadow != null && apr.max_divergence_rate !== undefined) conditions.push({ condition: 'max_divergence_rate', value: null,
    threshold: apr.max_divergence_rate, met: false });
  if (spec.shadow != null && apr.max_candidate_latency_p95_delta_ms !== undefined) conditions.push({ condition: 'max_candidate_latency_p95_delta_ms',
    value: null, threshold: apr.max_candidate_latency_p95_delta_ms, met: false });
  if (spec.judge.enabled) conditions.push({ condition: 'judge', value: null, threshold: round(1 - spec.judge.confidence, 6), met: false });
  return { rules, conditions };
}

export function evaluate(input: EvaluationInput): Evaluation {
  const { spec, now, window } = input;
  const rr = spec.rollback_rules;
  const judge = spec.judge.enabled;
  const alpha = 1 - spec.judge.confidence;
  const sustainedMs = canaryDurationMs(rr.sustained_duration);
  const shadow = spec.shadow != null ? input.shadow ?? null : null;
  // A shadow stage serves no client with the candidate: both graphs' figures are those of the shadowed requests.
  const shadowStage = shadow !== null && isShadowStage(spec, input.stage);
  const b = shadowStage ? shadow.window.baseline : window.baseline;
  const c = shadowStage ? shadow.window.candidate : window.candidate;
  const evidence = b.requests >= rr.min_window_requests && c.requests >= rr.min_window_requests && b.requests > 0 && c.requests > 0;
  const shadowEvidence = shadow !== null && shadow.window.sampled >= rr.min_window_requests && shadow.window.sampled > 0;
  const timers: Record<string, number> = { ...input.timers };
  const warned = new Set(input.warned);
  const rules: RuleStatus[] = [];
  const rollback: RuleReading[] = [];
  const warnings: RuleReading[] = [];

  const judgeRule = (rule: string, value: number, threshold: number, comparison: 'greater_than' | 'less_than', test: (() => number) | null,
    enough = evidence): void => {
    const since = timers[rule];
    if (!enough || !Number.isFinite(value)) {
      // No evidence: the timer neither starts nor resets.
      rules.push({ rule, value: null, threshold, comparison, met: false, state: 'no_data',
        sustained_for: formatDuration(since === undefined ? 0 : now - since) });
      return;
    }
    const beyond = comparison === 'greater_than' ? value > threshold : value < threshold;
    let p: number | undefined;
    let met = beyond;
    if (beyond && judge && test !== null) {
      p = test();
      met = p < alpha;
    }
    let state: RuleStateName;
    if (met) {
      // The window as a whole showed the breach: a new timer starts where the window began, so a
      // breach held over windows covering sustained_duration rolls back at the window that completes it.
      const start = since ?? Math.min(input.windowStart, now);
      timers[rule] = start;
      state = 'breaching';
      const reading: RuleReading = { rule, value: round(value), threshold, sustained_for: formatDuration(now - start) };
      if (now - start >= sustainedMs) rollback.push(reading);
      if (!warned.has(rule)) {
        warned.add(rule);
        warnings.push(reading);
      }
    } else {
      delete timers[rule];
      const share = input.warningShare;
      const near = comparison === 'greater_than' ? threshold > 0 && value > threshold * share : threshold < 0 && value < threshold * share;
      state = near ? 'warning' : 'ok';
      if (near && !warned.has(rule)) {
        warned.add(rule);
        warnings.push({ rule, value: round(value), threshold });
      }
      if (!near) warned.delete(rule); // the episode is over: a later approach warns again
    }
    const status: RuleStatus = { rule, value: round(value), threshold, met, state,
      sustained_for: formatDuration(timers[rule] === undefined ? 0 : now - timers[rule]) };
    if (rule.startsWith('custom:')) status.comparison = comparison;
    if (p !== undefined) status.p_value = round(p, 6);
    rules.push(status);
  };

  judgeRule('error_rate_delta_pct', errorRateDelta(b, c), rr.error_rate_delta_pct, 'greater_than',
    () => errorRateWorse(c.errors, c.requests, b.errors, b.requests).p);
  judgeRule('latency_p95_delta_ms', p95Delta(b, c), rr.latency_p95_delta_ms, 'greater_than',
    () => mannWhitneyWorse(buckets(c.latencyUs), buckets(b.latencyUs)).p);
  for (const m of rr.custom_metrics) {
    const v = input.custom.get(m.metric);
    const delta = v === undefined ? NaN : v.candidate - v.baseline;
    judgeRule(`custom:${m.metric}`, delta, m.threshold_delta, m.comparison, null);
  }
  if (shadow !== null) {
    const w = shadow.window;
    if (rr.divergence_rate !== undefined) judgeRule('divergence_rate', w.divergenceRate(), rr.divergence_rate, 'greater_than', null, shadowEvidence);
    if (rr.candidate_latency_p95_delta_ms !== undefined) {
      judgeRule('candidate_latency_p95_delta_ms', p95Delta(w.baseline, w.candidate), rr.candidate_latency_p95_delta_ms, 'greater_than',
        () => mannWhitneyWorse(buckets(w.candidate.latencyUs), buckets(w.baseline.latencyUs)).p, shadowEvidence);
    }
  }
  // `comparison` is shown for custom rules only (the two built-in rules are always greater_than).
  for (const r of rules) if (!r.rule.startsWith('custom:')) delete r.comparison;

  // Auto-promote conditions, over the whole stage.
  const sb = shadowStage ? shadow.stage.baseline : input.stageWindow.baseline;
  const sc = shadowStage ? shadow.stage.candidate : input.stageWindow.candidate;
  const stageEvidence = sb.requests >= rr.min_window_requests && sc.requests >= rr.min_window_requests;
  const apr = spec.auto_promote_rules;
  const errD = stageEvidence ? errorRateDelta(sb, sc) : NaN;
  const latD = stageEvidence ? p95Delta(sb, sc) : NaN;
  const conditions: ConditionStatus[] = [
    ...volumeConditions(input),
    { condition: 'max_error_rate_delta_pct', value: Number.isFinite(errD) ? round(errD) : null, threshold: apr.max_error_rate_delta_pct,
      met: Number.isFinite(errD) && errD <= apr.max_error_rate_delta_pct },
    { condition: 'max_latency_p95_delta_ms', value: Number.isFinite(latD) ? round(latD) : null, threshold: apr.max_latency_p95_delta_ms,
      met: Number.isFinite(latD) && latD <= apr.max_latency_p95_delta_ms },
  ];
  if (shadow !== null) {
    const st = shadow.stage;
    const shadowStageEvidence = st.sampled >= rr.min_window_requests && st.sampled > 0;
    if (apr.max_divergence_rate !== undefined) {
      const rate = shadowStageEvidence ? st.divergenceRate() : NaN;
      conditions.push({ condition: 'max_divergence_rate', value: Number.isFinite(rate) ? round(rate, 6) : null, threshold: apr.max_divergence_rate,
        met: Number.isFinite(rate) && rate <= apr.max_divergence_rate });
    }
    if (apr.max_candidate_latency_p95_delta_ms !== undefined) {
      const d = shadowStageEvidence ? p95Delta(st.baseline, st.candidate) : NaN;
      conditions.push({ condition: 'max_candidate_latency_p95_delta_ms', value: Number.isFinite(d) ? round(d) : null,
        threshold: apr.max_candidate_latency_p95_delta_ms, met: Number.isFinite(d) && d <= apr.max_candidate_latency_p95_delta_ms });
    }
  }
  if (judge) {
    let pMin: number | null = null;
    if (stageEvidence) {
      pMin = Math.min(errorRateWorse(sc.errors, sc.requests, sb.errors, sb.requests).p, mannWhitneyWorse(buckets(sc.latencyUs), buckets(sb.latencyUs)).p);
    }
    conditions.push({ condition: 'judge', value: pMin === null ? null : round(pMin, 6), threshold: round(alpha, 6), met: pMin !== null && pMin >= alpha });
  }
  const breaching = Object.keys(timers).length > 0;
  const promotable = evidence && !breaching && conditions.every((x) => x.met);
  const result = !evidence ? 'inconclusive'
    : rules.some((r) => r.state === 'breaching') ? 'breaching'
    : rules.some((r) => r.state === 'warning') ? 'warning' : 'ok';
  return {
    at: now, result, window_requests: { baseline: b.requests, candidate: c.requests }, rules, timers, rollback, warnings,
    warned: [...warned], conditions, promotable,
  };
}
