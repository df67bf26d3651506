// The canary's notification events (SPEC §6): what the controller emits on each transition and
// what the notification channels (notify/) deliver. The controller builds one CanaryEvent per
// transition and hands it to a CanaryEventSink; delivery (channels, filters, retries, the outbox
// that survives restarts) is the sink's business, never the controller's.

export const CANARY_EVENT_TYPES = [
  'canary.started',
  'canary.promoted',
  'canary.rolled_back',
  'canary.completed',
  'canary.threshold_warning',
  'canary.diverged',
  'canary.store_unreachable',
  'canary.fail_safe',
] as const;

export type CanaryEventType = typeof CANARY_EVENT_TYPES[number];

/**
 * The one form of an event id (docs/canary.md, "Event ids"): a transition's is
 * `<canary_id>:<version>:<type>` — the record's version after the transition, so it is the same on
 * every retry and after a restart, and two transitions never share one; a threshold warning (no
 * transition, no version bump) is `<canary_id>:warning:<ms>:canary.threshold_warning`, with the
 * evaluation's time in ms since the epoch. Receivers deduplicate on it (webhook `X-Proxy-Event-Id`,
 * email `X-Proxy-Event-Id` and `Message-ID`, the payload's `id`).
 */
export function transitionEventId(canaryId: string, version: number, type: TransitionEventType): string {
  return `${canaryId}:${version}:${type}`;
}

/** The events raised by a transition (a new version of the record); the others are reports. */
export type TransitionEventType = 'canary.started' | 'canary.promoted' | 'canary.rolled_back' | 'canary.completed';

/** An instance's report on the fleet store (canary.store_unreachable, canary.fail_safe; no transition
 *  either): `<canary_id>:fleet:<instance_id>:<ms>:<type>`, the instance's own, since each instance
 *  sees the store for itself. */
export function fleetEventId(canaryId: string, instanceId: string, atMs: number, type: 'canary.store_unreachable' | 'canary.fail_safe'): string {
  return `${canaryId}:fleet:${instanceId}:${atMs}:${type}`;
}

export function warningEventId(canaryId: string, atMs: number): string {
  return `${canaryId}:warning:${atMs}:canary.threshold_warning`;
}

/** A shadow canary's divergence report (no transition either): `<canary_id>:diverged:<ms>:canary.diverged`. */
export function divergedEventId(canaryId: string, atMs: number): string {
  return `${canaryId}:diverged:${atMs}:canary.diverged`;
}

/** Matches every form; the groups are the canary id, then the version or the warning's or divergence report's ms. */
export const EVENT_ID_PATTERN = /^(c-[0-9a-f]+):(?:(\d+):(canary\.(?:started|promoted|rolled_back|completed))|warning:(\d+):canary\.threshold_warning|diverged:(\d+):canary\.diverged|fleet:[^:]+:(\d+):canary\.(?:store_unreachable|fail_safe))$/;

/** One side's figures over the evaluation window (SPEC §2.8 metrics.baseline / .candidate). */
export interface SideMetrics {
  requests: number;
  error_rate_pct: number;
  latency_p50_ms: number;
  latency_p95_ms: number;
  latency_p99_ms: number;
}

/** A rule's state when the event was raised: what mattered for a rollback or a warning. */
export interface RuleReading {
  /** `error_rate_delta_pct`, `latency_p95_delta_ms`, or `custom:<metric>`. */
  rule: string;
  value: number;
  threshold: number;
  /** How long the condition has held (duration string, e.g. `12s`), when it is a sustained rule. */
  sustained_for?: string;
}

export interface CanaryEvent {
  /** Unique, stable across retries and restarts: receivers deduplicate on it. */
  id: string;
  type: CanaryEventType;
  /** ISO 8601 UTC. */
  at: string;
  canary_id: string;
  pipeline_id: string;
  stage: number;
  traffic_pct: number;
  baseline_version: string;
  candidate_version: string;
  description?: string;
  /** canary.promoted: the stage left. */
  previous_stage?: number;
  /** canary.rolled_back: the reason given, and `manual` or `automatic`. */
  reason?: string;
  triggered_by?: string;
  metrics?: { baseline: SideMetrics; candidate: SideMetrics };
  rules?: RuleReading[];
  /** canary.diverged: the shadowed requests of the evaluation window and how many diverged, by kind, with the latest diffs' paths. */
  divergence?: DivergenceSummary;
  /** canary.store_unreachable, canary.fail_safe: the instance that cannot reach the fleet store, since when, and what it does meanwhile. */
  fleet?: { instance_id: string; unreachable_since: string; fail_safe: boolean; detail: string };
}

export interface DivergenceSummary {
  sampled: number;
  diverged: number;
  divergence_rate: number;
  by_kind: Record<string, number>;
  /** The latest divergent requests (at most 5): kind, operation, namespace and differing paths (never values). */
  latest: Array<{ kind: string; op: string; ns: string; paths: string[] }>;
}

/** Where the controller sends events. `emit` must not throw and must not block: it records the
 *  event durably (or queues it) and returns; channels are given inline per canary or null for the
 *  configured defaults. */
export interface CanaryEventSink {
  emit(event: CanaryEvent, channels: NotificationChannel[] | null): void;
  close(): Promise<void>;
}

/** SPEC §6 channel object. */
export interface NotificationChannel {
  type: 'webhook' | 'email' | 'pager';
  url?: string;
  addresses?: string[];
  integration_key?: string;
  severity?: string;
  /** Only these events; absent = all. */
  events?: CanaryEventType[];
}
