// What each channel kind sends for one canary event (documented in docs/notifications.md):
// the webhook's JSON body, the e-mail's subject and text, the PagerDuty Events API v2 event.
import type { CanaryEvent, CanaryEventType, DivergenceSummary, NotificationChannel, RuleReading, SideMetrics } from '../events.ts';
import { forTerminal } from '../../log/index.ts';

/** Bumped when a field changes meaning or goes away (adding fields does not bump it). */
export const WEBHOOK_PAYLOAD_VERSION = 1;

const TITLES: Record<CanaryEventType, string> = {
  'canary.started': 'canary started',
  'canary.promoted': 'canary promoted',
  'canary.rolled_back': 'canary rolled back',
  'canary.completed': 'canary completed',
  'canary.threshold_warning': 'canary threshold warning',
  'canary.diverged': 'shadow canary diverged',
  'canary.store_unreachable': 'fleet store unreachable',
  'canary.fail_safe': 'fleet fail-safe engaged',
};

/** One line for people: what happened to which canary, where, and why. */
export function summary(e: CanaryEvent, instance: string): string {
  const where = `pipeline ${e.pipeline_id} (canary ${e.canary_id}) on ${instance}`;
  switch (e.type) {
    case 'canary.started': return `Canary started: ${where}, stage ${e.stage} at ${e.traffic_pct}% (candidate ${e.candidate_version})`;
    case 'canary.promoted': return `Canary promoted: ${where}, stage ${e.previous_stage ?? e.stage - 1} → ${e.stage} at ${e.traffic_pct}%`;
    case 'canary.completed': return `Canary completed: ${where}, candidate ${e.candidate_version} is the baseline`;
    case 'canary.rolled_back': return `Canary rolled back (${e.triggered_by ?? 'unknown'}): ${where}${e.reason ? `: ${e.reason}` : rulesText(e.rules)}`;
    case 'canary.threshold_warning': return `Canary threshold warning: ${where}${rulesText(e.rules)}`;
    case 'canary.diverged': return `Shadow canary diverged: ${where}: ${e.divergence?.diverged ?? 0} of ${e.divergence?.sampled ?? 0} shadowed requests`;
    case 'canary.store_unreachable':
    case 'canary.fail_safe':
      return `${e.type === 'canary.fail_safe' ? 'Fleet fail-safe engaged' : 'Fleet store unreachable'}: ${where}: ${e.fleet?.detail ?? ''}`;
  }
}

function rulesText(rules: RuleReading[] | undefined): string {
  if (rules === undefined || rules.length === 0) return '';
  return ` (${rules.map((r) => `${r.rule} ${fmt(r.value)} > ${fmt(r.threshold)}${r.sustained_for ? ` for ${r.sustained_for}` : ''}`).join('; ')})`;
}

const fmt = (n: number) => (Number.isInteger(n) ? String(n) : n.toFixed(3).replace(/0+$/, ''));

export interface WebhookBody {
  version: number;
  id: string;
  type: CanaryEventType;
  at: string;
  instance: string;
  summary: string;
  canary: {
    canary_id: string; pipeline_id: string; stage: number; previous_stage?: number; traffic_pct: number;
    baseline_version: string; candidate_version: string; description?: string;
  };
  reason?: string;
  triggered_by?: string;
  metrics?: { baseline: SideMetrics; candidate: SideMetrics };
  rules?: RuleReading[];
  divergence?: DivergenceSummary;
  fleet?: CanaryEvent['fleet'];
}

export function webhookBody(e: CanaryEvent, instance: string): WebhookBody {
  const body: WebhookBody = {
    version: WEBHOOK_PAYLOAD_VERSION,
    id: e.id,
    type: e.type,
    at: e.at,
    instance,
    summary: summary(e, instance),
    canary: {
      canary_id: e.canary_id, pipeline_id: e.pipeline_id, stage: e.stage, traffic_pct: e.traffic_pct,
      baseline_version: e.baseline_version, candidate_version: e.candidate_version,
    },
  };
  if (e.previous_stage !== undefined) body.canary.previous_stage = e.previous_stage;
  if (e.description !== undefined) body.canary.description = e.description;
  if (e.reason !== undefined) body.reason = e.reason;
  if (e.triggered_by !== undefined) body.triggered_by = e.triggered_by;
  if (e.metrics !== undefined) body.metrics = e.metrics;
  if (e.rules !== undefined) body.rules = e.rules;
  if (e.divergence !== undefined) body.divergence = e.divergence;
  if (e.fleet !== undefined) body.fleet = e.fleet;
  return body;
}

/**
 * The email of an event: plain text, one `Name: value` line per field. Every string of the event
 * is written on one line with its control characters escaped (a rollback reason from the API, the
 * namespaces clients chose in a divergence summary): none can forge a line of the message.
 */
export function emailMessage(event: CanaryEvent, instance: string): { subject: string; text: string } {
  const e = forTerminal(event);
  const subject = `[proxy] ${TITLES[e.type]}: ${e.pipeline_id} (${e.canary_id}) on ${instance}`;
  const lines = [
    summary(e, instance),
    '',
    `Event:       ${e.type}`,
    `Event id:    ${e.id}`,
    `At:          ${e.at}`,
    `Instance:    ${instance}`,
    `Pipeline:    ${e.pipeline_id}`,
    `Canary:      ${e.canary_id}`,
    `Stage:       ${e.stage}${e.previous_stage !== undefined ? ` (from ${e.previous_stage})` : ''}`,
    `Traffic:     ${e.traffic_pct}% to the candidate`,
    `Baseline:    ${e.baseline_version}`,
    `Candidate:   ${e.candidate_version}`,
  ];
  if (e.description !== undefined) lines.push(`Description: ${e.description}`);
  if (e.reason !== undefined) lines.push(`Reason:      ${e.reason}`);
  if (e.triggered_by !== undefined) lines.push(`Triggered:   ${e.triggered_by}`);
  if (e.rules !== undefined && e.rules.length > 0) {
    lines.push('', 'Rules:');
    for (const r of e.rules) lines.push(`  ${r.rule}: ${fmt(r.value)} (threshold ${fmt(r.threshold)})${r.sustained_for ? `, sustained ` +
      `for ${r.sustained_for}` : ''}`);
  }
  if (e.divergence !== undefined) {
    const d = e.divergence;
    lines.push('', `Divergence:  ${d.diverged} of ${d.sampled} shadowed requests (${Object.entries(d.by_kind).map(([k, n]) => `${k} ${n}`).join(', ')})`);
    for (const l of d.latest) lines.push(`  ${l.kind} ${l.op} ${l.ns}: ${l.paths.join(', ') || '(outcome)'}`);
  }
  if (e.metrics !== undefined) {
    lines.push('', '             requests  error %   p50 ms   p95 ms   p99 ms');
    for (const side of ['baseline', 'candidate'] as const) {
      const m = e.metrics[side];
      lines.push(`  ${side.padEnd(10)} ${String(m.requests).padStart(9)} ${fmt(m.error_rate_pct).padStart(8)} `
        + `${fmt(m.latency_p50_ms).padStart(8)} ${fmt(m.latency_p95_ms).padStart(8)} ${fmt(m.latency_p99_ms).padStart(8)}`);
    }
  }
  return { subject, text: `${lines.join('\n')}\n` };
}

/** The incident key of a canary: a rollback (or warning) triggers it, completion resolves it. */
export const pagerDedupKey = (e: CanaryEvent) => `proxy-canary-${e.canary_id}`;

export interface PagerEvent {
  routing_key: string;
  event_action: 'trigger' | 'resolve';
  dedup_key: string;
  payload?: {
    summary: string; source: string; severity: string; timestamp: string; component: string; group: string; class: string;
    custom_details: Record<string, unknown>;
  };
}

/** PagerDuty Events API v2; null for an event a pager never receives (start, promotion). */
export function pagerEvent(e: CanaryEvent, channel: NotificationChannel, instance: string): PagerEvent | null {
  const routing_key = channel.integration_key ?? '';
  const dedup_key = pagerDedupKey(e);
  if (e.type === 'canary.completed') return { routing_key, event_action: 'resolve', dedup_key };
  if (e.type !== 'canary.rolled_back' && e.type !== 'canary.threshold_warning') return null;
  const details = webhookBody(e, instance) as unknown as Record<string, unknown>;
  delete details.summary;
  return {
    routing_key,
    event_action: 'trigger',
    dedup_key,
    payload: {
      summary: summary(e, instance).slice(0, 1024),
      source: instance,
      severity: e.type === 'canary.threshold_warning' ? 'warning' : (channel.severity ?? 'critical'),
      timestamp: e.at,
      component: e.pipeline_id,
      group: 'canary',
      class: e.type,
      custom_details: details,
    },
  };
}
