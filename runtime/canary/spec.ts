// What a canary is asked to do: the validated start request, with the configuration's defaults
// filled in (SPEC §2.8: the file's keys are defaults for canaries started through the API, which may
// override them). Validation uses the configuration's own schemas, so a key means the same in both.
import { checkChannels } from './notify/channels.ts';
import { refusedUrl, type NotificationsConfig } from '../config/index.ts';
import * as v from 'valibot';
import {
  autoPromoteRulesSchema, canaryDurationMs, judgeSchema, rollbackRulesSchema, shadowSchema, stagesSchema, MAX_STEPS_PER_PHASE,
  stepConfigSchema, type ProxyConfig,
} from '../config/index.ts';
import type { NotificationChannel } from './events.ts';
import { CanaryError } from './errors.ts';
import { ClientMatch, type ClientMatchSpec } from '../pipeline/client-match.ts';
import type { Sticky } from './aimed-selector.ts';

/** The shortest rollback_rules.check_interval (ms). */
export const MIN_CHECK_INTERVAL_MS = 100;

/** The longest `description` of a start request, in characters (it is copied into every event and notification). */
export const MAX_DESCRIPTION_CHARS = 4096;
/** The longest rollback `reason`, in characters (copied into the event, the notifications and the history). */
export const MAX_REASON_CHARS = 1024;
/** The longest candidate step `type` and `plugin_id` (a package name or a path), in characters. */
export const MAX_STEP_TYPE_CHARS = 128;
export const MAX_PLUGIN_ID_CHARS = 4096;

/**
 * A free-text field of a request body: absent (undefined), or a string of at most `max` characters;
 * otherwise PROXY_ERR_BAD_BODY naming the field.
 */
export function optionalText(value: unknown, field: string, max: number): string | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'string') throw new CanaryError('PROXY_ERR_BAD_BODY', `${field}: expected a string`);
  if (value.length > max) throw new CanaryError('PROXY_ERR_BAD_BODY', `${field}: at most ${max} characters, got ${value.length}`);
  return value;
}

export type Stage = v.InferOutput<typeof stagesSchema>[number];
export type RollbackRules = v.InferOutput<typeof rollbackRulesSchema>;
export type AutoPromoteRules = v.InferOutput<typeof autoPromoteRulesSchema>;
export type JudgeSettings = v.InferOutput<typeof judgeSchema>;
export type ShadowDefaults = v.InferOutput<typeof shadowSchema>;

/** A shadow canary's settings (mode "shadow"): the sampled share and how its diffs are made. */
export interface ShadowSpec {
  /** Share of the baseline's requests shadowed at a stage with traffic_pct 0 (a stage's own shadow_pct overrides it). */
  shadow_pct: number;
  ignore_paths: string[];
  show_values: boolean;
  max_diffs: number;
  diverged_event_interval: string;
  /** shadow_upstream_reads: a read whose command differs is sent upstream for the candidate (absent in records from before it existed: off). */
  upstream_reads?: boolean;
  upstream_reads_concurrency?: number;
}

export interface CandidateStep {
  type: string;
  config?: Record<string, unknown>;
  plugin_id?: string;
  phase?: 'request' | 'response';
  on_error?: 'open' | 'closed';
}

export interface CandidateConfig {
  steps: CandidateStep[];
  pipeline?: { request?: string[]; response?: string[] };
}

/** Everything a running canary needs to know about what it was asked; persisted as JSON. */
export interface CanarySpec {
  pipeline_id: string;
  candidate_config: CandidateConfig;
  stages: Stage[];
  auto_promote: boolean;
  rollback_rules: RollbackRules;
  auto_promote_rules: AutoPromoteRules;
  judge: JudgeSettings;
  /** Inline channels, or null for the configured defaults. */
  channels: NotificationChannel[] | null;
  description: string | null;
  /** Aimed canary: these clients always get the candidate (absent in records from before it existed). */
  match?: ClientMatchSpec | null;
  /** Whose draw is kept: per connection, per session (lsid), or null: per request. */
  sticky?: Sticky | null;
  /** Mode "shadow": the candidate also runs unseen beside the baseline (absent in records from before it existed: mode "split"). */
  shadow?: ShadowSpec | null;
}

/** The share of the baseline's requests a shadow canary shadows at `stage` (0: none). */
export function stageShadowPct(spec: CanarySpec, stage: Stage): number {
  const sh = spec.shadow;
  if (sh == null) return 0;
  return stage.shadow_pct ?? (stage.traffic_pct === 0 ? sh.shadow_pct : 0);
}

/** Whether `stage` of a shadow canary serves no client with the candidate: its evidence is the shadowed requests'. */
export function isShadowStage(spec: CanarySpec, stage: Stage): boolean {
  return spec.shadow != null && stage.traffic_pct === 0;
}

export interface CanaryDefaults {
  stages: Stage[];
  auto_promote: boolean;
  rollback_rules: RollbackRules;
  auto_promote_rules: AutoPromoteRules;
  judge: JudgeSettings;
  /** What inline channels are checked against (a webhook needs a secret, email needs smtp). */
  notifications: Pick<NotificationsConfig, 'webhook_secret' | 'smtp'>;
  /** canary.plugin_dirs: where a candidate's plugin_id paths may be, besides the built-in and configured ones. */
  plugin_dirs: readonly string[];
  /** The pipeline a start request without pipeline_id is for: the default pipeline ("default" when not given). */
  default_pipeline_id?: string;
  /** canary.shadow: shadow canaries' defaults (absent: the schema's). */
  shadow?: ShadowDefaults;
}

export function defaultsFromConfig(c: ProxyConfig): CanaryDefaults {
  return {
    stages: c.canary.stages, auto_promote: c.canary.auto_promote, rollback_rules: c.rollback_rules,
    auto_promote_rules: c.auto_promote_rules, judge: c.canary.judge,
    notifications: { webhook_secret: c.notifications.webhook_secret, smtp: c.notifications.smtp },
    plugin_dirs: c.canary.plugin_dirs,
    default_pipeline_id: c.pipeline.id,
    shadow: c.canary.shadow,
  };
}

const STEP_TYPE = /^(wasm:)?[a-z][a-z0-9_-]*$/;

const candidateStepSchema = v.strictObject({
  type: v.pipe(v.string(), v.maxLength(MAX_STEP_TYPE_CHARS, `at most ${MAX_STEP_TYPE_CHARS} characters`),
    v.regex(STEP_TYPE, 'expected a step name like "rate_limit" or "wasm:redact"')),
  config: v.optional(stepConfigSchema),
  plugin_id: v.optional(v.pipe(v.string(), v.minLength(1), v.maxLength(MAX_PLUGIN_ID_CHARS, `at most ${MAX_PLUGIN_ID_CHARS} characters`))),
  phase: v.optional(v.picklist(['request', 'response'])),
  on_error: v.optional(v.picklist(['open', 'closed'])),
});

// Bounded like the configuration's phases (MAX_STEPS_PER_PHASE), so a start request cannot make
// the proxy compile and instantiate an unbounded graph.
const stepName = v.pipe(v.string(), v.maxLength(MAX_STEP_TYPE_CHARS, `at most ${MAX_STEP_TYPE_CHARS} characters`), v.regex(STEP_TYPE));
const candidatePhase = v.pipe(v.array(stepName),
  v.maxLength(MAX_STEPS_PER_PHASE, `at most ${MAX_STEPS_PER_PHASE} steps per phase`));
const candidateConfigSchema = v.strictObject({
  steps: v.pipe(v.array(candidateStepSchema), v.maxLength(2 * MAX_STEPS_PER_PHASE, `at most ${2 * MAX_STEPS_PER_PHASE} steps ` +
    `(${MAX_STEPS_PER_PHASE} per phase)`)),
  pipeline: v.optional(v.strictObject({
    request: v.optional(candidatePhase),
    response: v.optional(candidatePhase),
  })),
});

function issueText(issues: readonly v.BaseIssue<unknown>[], prefix: string): string {
  const i = issues[0];
  const path = (i.path ?? []).map((p) => String(p.key)).join('.');
  return `${prefix}${path === '' ? '' : (prefix === '' ? '' : '.') + path}: ${i.message}`;
}

function parsePart<S extends v.GenericSchema>(schema: S, value: unknown, field: string, code: ConstructorParameters<typeof CanaryError>[0]): v.InferOutput<S> {
  const r = v.safeParse(schema, value);
  if (!r.success) throw new CanaryError(code, issueText(r.issues, field));
  return r.output;
}

function isObject(x: unknown): x is Record<string, unknown> {
  return typeof x === 'object' && x !== null && !Array.isArray(x);
}

/** Every stage's durations parse (the regex has checked the form; this guards the sums). */
function checkDurations(stages: Stage[]): void {
  stages.forEach((s, i) => {
    if (!Number.isFinite(canaryDurationMs(s.min_duration))) throw new CanaryError('PROXY_ERR_CANARY_INVALID_STAGES', `stages.${i}.min_duration: ` +
      `bad duration "${s.min_duration}"`);
  });
}

/**
 * The URLs a start request makes the canary call (stages' gates, inline channels): one whose host
 * is a link-local or unspecified address is PROXY_ERR_CANARY_URL_REFUSED, naming the key, before
 * any other check of those parts (which would refuse it too, with their own code).
 */
function refuseUrls(body: Record<string, unknown>): void {
  const check = (url: unknown, path: string) => {
    const problem = typeof url === 'string' ? refusedUrl(url) : null;
    if (problem !== null) throw new CanaryError('PROXY_ERR_CANARY_URL_REFUSED', `${path}: ${problem}`);
  };
  if (Array.isArray(body.stages)) body.stages.forEach((s, i) => { if (isObject(s) && isObject(s.gate)) check(s.gate.url, `stages.${i}.gate.url`); });
  const n = body.notifications;
  if (isObject(n) && Array.isArray(n.channels)) n.channels.forEach((c, i) => { if (isObject(c)) check(c.url, `notifications.channels[${i}].url`); });
}

/** Validates a POST /api/v1/canary body and fills in the defaults. Throws CanaryError (400 codes). */
export function parseStartRequest(body: unknown, defaults: CanaryDefaults): CanarySpec {
  if (!isObject(body)) throw new CanaryError('PROXY_ERR_BAD_BODY', 'expected a JSON object');
  const known = new Set(['pipeline_id', 'candidate_config', 'initial_traffic_pct', 'rollback_rules', 'stages', 'auto_promote', 'auto_promote_rules',
    'judge', 'notifications', 'description', 'match', 'sticky', 'mode', 'shadow_pct', 'shadow', 'shadow_upstream_reads']);
  for (const k of Object.keys(body)) if (!known.has(k)) throw new CanaryError('PROXY_ERR_BAD_BODY', `unknown field "${k}"`);
  // No pipeline_id: the default pipeline (the one requests no `pipelines` match go through).
  const pipelineId = body.pipeline_id === undefined ? defaults.default_pipeline_id ?? 'default' : body.pipeline_id;
  if (typeof pipelineId !== 'string' || pipelineId === '') throw new CanaryError('PROXY_ERR_BAD_BODY', 'pipeline_id: expected a non-empty string');
  const description = optionalText(body.description, 'description', MAX_DESCRIPTION_CHARS) ?? null;
  refuseUrls(body);
  if (body.candidate_config === undefined) throw new CanaryError('PROXY_ERR_BAD_BODY', 'candidate_config: required');
  const candidate = parsePart(candidateConfigSchema, body.candidate_config, 'candidate_config', 'PROXY_ERR_BAD_BODY');
  let stages = body.stages === undefined ? defaults.stages.map((s) => ({ ...s })) : parsePart(stagesSchema, body.stages, 'stages',
    'PROXY_ERR_CANARY_INVALID_STAGES');
  checkDurations(stages);
  const shadow = parseShadow(body, defaults);
  if (shadow !== null && body.stages === undefined) {
    // The default stages, after a shadow stage as long as their first: no client sees the candidate until it is promoted.
    stages = [{ traffic_pct: 0, min_duration: stages[0].min_duration, min_requests: stages[0].min_requests }, ...stages];
  }
  stages.forEach((st, i) => {
    if (st.shadow_pct !== undefined && shadow === null) throw new CanaryError('PROXY_ERR_CANARY_INVALID_STAGES', `stages.${i}.shadow_pct: only with ` +
      'mode "shadow"');
  });
  const match = parseMatch(body.match);
  if (shadow !== null && (match !== null || body.sticky !== undefined)) throw new CanaryError('PROXY_ERR_BAD_BODY', `${match !== null ? 'match' : 'sticky'}: ` +
    'not with mode "shadow"');
  if (shadow !== null && body.initial_traffic_pct !== undefined) throw new CanaryError('PROXY_ERR_BAD_BODY', 'initial_traffic_pct: not with mode ' +
    '"shadow" (give `stages`: a stage with traffic_pct 0 is a shadow stage)');
  if (body.sticky !== undefined && body.sticky !== 'connection' && body.sticky !== 'session') {
    throw new CanaryError('PROXY_ERR_BAD_BODY', `sticky: expected "connection" or "session", received ${JSON.stringify(body.sticky)}`);
  }
  // Aimed at chosen clients and no initial_traffic_pct: stage 1 tries the candidate on them alone.
  if (match !== null && body.initial_traffic_pct === undefined) stages = [{ ...stages[0], traffic_pct: 0 }, ...stages.slice(1)];
  if (body.initial_traffic_pct !== undefined) {
    const t = body.initial_traffic_pct;
    if (typeof t !== 'number' || !Number.isInteger(t) || t < 0 || t > 100) throw new CanaryError('PROXY_ERR_CANARY_INVALID_TRAFFIC',
      `initial_traffic_pct: expected an integer 0..100, received ${JSON.stringify(t)}`);
    if (stages.length > 1 && t > stages[1].traffic_pct) throw new CanaryError('PROXY_ERR_CANARY_INVALID_STAGES', `initial_traffic_pct ${t} is ` +
      `above stage 2's traffic_pct ${stages[1].traffic_pct}`);
    stages = [{ ...stages[0], traffic_pct: t }, ...stages.slice(1)];
  }
  if (body.auto_promote !== undefined && typeof body.auto_promote !== 'boolean') throw new CanaryError('PROXY_ERR_BAD_BODY', 'auto_promote: ' +
    'expected a boolean');
  const merge = (name: string, given: unknown, base: object): Record<string, unknown> => {
    if (given === undefined) return { ...base };
    if (!isObject(given)) throw new CanaryError(name === 'judge' ? 'PROXY_ERR_BAD_BODY' : 'PROXY_ERR_CANARY_INVALID_RULES', `${name}: expected an object`);
    return { ...base, ...given };
  };
  const rollback = parsePart(rollbackRulesSchema, merge('rollback_rules', body.rollback_rules, defaults.rollback_rules), 'rollback_rules',
    'PROXY_ERR_CANARY_INVALID_RULES');
  // Each evaluation reads both graphs' histograms and writes a sample to the store: a millisecond
  // interval ("1ms") would keep the proxy busy with little else.
  if (canaryDurationMs(rollback.check_interval) < MIN_CHECK_INTERVAL_MS) {
    throw new CanaryError('PROXY_ERR_CANARY_INVALID_RULES', `rollback_rules.check_interval: must be at least ${MIN_CHECK_INTERVAL_MS}ms, got ` +
      `"${rollback.check_interval}"`);
  }
  const promote = parsePart(autoPromoteRulesSchema, merge('auto_promote_rules', body.auto_promote_rules, defaults.auto_promote_rules),
    'auto_promote_rules', 'PROXY_ERR_CANARY_INVALID_RULES');
  if (shadow === null) {
    const shadowOnly = (o: unknown, keys: string[], name: string) => {
      for (const k of keys) {
        if (isObject(o) && o[k] !== undefined) throw new CanaryError('PROXY_ERR_CANARY_INVALID_RULES', `${name}.${k}: only with mode "shadow"`);
      }
    };
    shadowOnly(body.rollback_rules, ['divergence_rate', 'candidate_latency_p95_delta_ms'], 'rollback_rules');
    shadowOnly(body.auto_promote_rules, ['max_divergence_rate', 'max_candidate_latency_p95_delta_ms'], 'auto_promote_rules');
  }
  const judge = parsePart(judgeSchema, merge('judge', body.judge, defaults.judge), 'judge', 'PROXY_ERR_BAD_BODY');
  let channels: NotificationChannel[] | null = null;
  if (body.notifications !== undefined) {
    if (!isObject(body.notifications)) throw new CanaryError('PROXY_ERR_BAD_BODY', 'notifications: expected an object { channels: [...] }');
    // Given channels replace the configured ones, so a misspelt key would silence the canary.
    for (const k of Object.keys(body.notifications)) {
      if (k !== 'channels') throw new CanaryError('PROXY_ERR_BAD_BODY', `notifications: unknown field ${JSON.stringify(k)} (only channels)`);
    }
    if (body.notifications.channels === undefined) throw new CanaryError('PROXY_ERR_BAD_BODY', 'notifications.channels: required (an empty list ' +
      'sends this canary\'s events nowhere; without notifications the configured channels apply)');
    // The config file's rules too (a webhook needs a secret, email needs notifications.smtp, a
    // pager takes only the events it can page): refused here with the key path, not at delivery.
    const checked = checkChannels(body.notifications.channels, defaults.notifications);
    if (checked.channels === null) {
      const first = checked.issues[0]!;
      throw new CanaryError('PROXY_ERR_BAD_BODY', `${first.path}: ${first.message}`, { issues: checked.issues });
    }
    channels = checked.channels;
  }
  return {
    pipeline_id: pipelineId, candidate_config: candidate as CandidateConfig, stages,
    auto_promote: (body.auto_promote as boolean | undefined) ?? defaults.auto_promote,
    rollback_rules: rollback, auto_promote_rules: promote, judge, channels,
    description,
    match, sticky: (body.sticky as Sticky | undefined) ?? null,
    shadow,
  };
}

/** `mode`, `shadow_pct` and `shadow`: the shadow settings (with canary.shadow's defaults), or null for mode "split". */
function parseShadow(body: Record<string, unknown>, defaults: CanaryDefaults): ShadowSpec | null {
  const mode = body.mode ?? 'split';
  if (mode !== 'split' && mode !== 'shadow') throw new CanaryError('PROXY_ERR_BAD_BODY', `mode: expected "split" or "shadow", received ` +
    `${JSON.stringify(mode)}`);
  if (mode === 'split') {
    for (const k of ['shadow_pct', 'shadow', 'shadow_upstream_reads']) {
      if (body[k] !== undefined) throw new CanaryError('PROXY_ERR_BAD_BODY', `${k}: only with mode "shadow"`);
    }
    return null;
  }
  const reads = body.shadow_upstream_reads ?? false;
  if (typeof reads !== 'boolean') throw new CanaryError('PROXY_ERR_BAD_BODY', 'shadow_upstream_reads: expected a boolean');
  const p = body.shadow_pct;
  if (typeof p !== 'number' || !Number.isInteger(p) || p < 1 || p > 100) throw new CanaryError('PROXY_ERR_CANARY_INVALID_TRAFFIC', 'shadow_pct: ' +
    `expected an integer 1..100 (the share of requests shadowed), received ${JSON.stringify(p)}`);
  if (body.shadow !== undefined && !isObject(body.shadow)) throw new CanaryError('PROXY_ERR_BAD_BODY', 'shadow: expected an object { show_values?, ' +
    'ignore_paths?, max_diffs?, diverged_event_interval?, upstream_reads_concurrency? }');
  const base = v.parse(shadowSchema, defaults.shadow ?? {});
  const merged = parsePart(shadowSchema, { ...base, ...(body.shadow as Record<string, unknown> | undefined) }, 'shadow', 'PROXY_ERR_BAD_BODY');
  return { shadow_pct: p, ignore_paths: merged.ignore_paths, show_values: merged.show_values, max_diffs: merged.max_diffs,
    diverged_event_interval: merged.diverged_event_interval, upstream_reads: reads, upstream_reads_concurrency: merged.upstream_reads_concurrency };
}

/** `match`: { app_name?, user?, client? }, each a string or a list of strings; null when absent. */
function parseMatch(x: unknown): ClientMatchSpec | null {
  if (x === undefined || x === null) return null;
  if (!isObject(x)) throw new CanaryError('PROXY_ERR_BAD_BODY', 'match: expected an object { app_name?, user?, client? }');
  for (const k of Object.keys(x)) if (k !== 'app_name' && k !== 'user' && k !== 'client') throw new CanaryError('PROXY_ERR_BAD_BODY', `match: ` +
    `unknown field "${k}" (app_name, user, client)`);
  try {
    return new ClientMatch(x as ClientMatchSpec).spec;
  } catch (err) {
    throw new CanaryError('PROXY_ERR_BAD_BODY', (err as Error).message);
  }
}
