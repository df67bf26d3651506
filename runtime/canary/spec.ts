// What a canary is asked to do: the validated start request, with the configuration's defaults
// filled in (SPEC §2.8: the file's keys are defaults for canaries started through the API, which may
// override them). Validation uses the configuration's own schemas, so a key means the same in both.
import { checkChannels } from './notify/channels.ts';
import type { NotificationsConfig } from '../config/index.ts';
import * as v from 'valibot';
import {
  autoPromoteRulesSchema, canaryDurationMs, judgeSchema, rollbackRulesSchema, stagesSchema, MAX_STEPS_PER_PHASE,
  type ProxyConfig,
} from '../config/index.ts';
import type { NotificationChannel } from './events.ts';
import { CanaryError } from './errors.ts';
import { ClientMatch, type ClientMatchSpec } from '../pipeline/client-match.ts';
import type { Sticky } from './aimed-selector.ts';

export type Stage = v.InferOutput<typeof stagesSchema>[number];
export type RollbackRules = v.InferOutput<typeof rollbackRulesSchema>;
export type AutoPromoteRules = v.InferOutput<typeof autoPromoteRulesSchema>;
export type JudgeSettings = v.InferOutput<typeof judgeSchema>;

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
}

export function defaultsFromConfig(c: ProxyConfig): CanaryDefaults {
  return {
    stages: c.canary.stages, auto_promote: c.canary.auto_promote, rollback_rules: c.rollback_rules,
    auto_promote_rules: c.auto_promote_rules, judge: c.canary.judge,
    notifications: { webhook_secret: c.notifications.webhook_secret, smtp: c.notifications.smtp },
    plugin_dirs: c.canary.plugin_dirs,
    default_pipeline_id: c.pipeline.id,
  };
}

const STEP_TYPE = /^(wasm:)?[a-z][a-z0-9_-]*$/;

const candidateStepSchema = v.strictObject({
  type: v.pipe(v.string(), v.regex(STEP_TYPE, 'expected a step name like "rate_limit" or "wasm:redact"')),
  config: v.optional(v.record(v.string(), v.unknown())),
  plugin_id: v.optional(v.pipe(v.string(), v.minLength(1))),
  phase: v.optional(v.picklist(['request', 'response'])),
  on_error: v.optional(v.picklist(['open', 'closed'])),
});

// Bounded like the configuration's phases (MAX_STEPS_PER_PHASE), so a start request cannot make
// the proxy compile and instantiate an unbounded graph.
const candidatePhase = v.pipe(v.array(v.pipe(v.string(), v.regex(STEP_TYPE))),
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

/** Validates a POST /api/v1/canary body and fills in the defaults. Throws CanaryError (400 codes). */
export function parseStartRequest(body: unknown, defaults: CanaryDefaults): CanarySpec {
  if (!isObject(body)) throw new CanaryError('PROXY_ERR_BAD_BODY', 'expected a JSON object');
  const known = new Set(['pipeline_id', 'candidate_config', 'initial_traffic_pct', 'rollback_rules', 'stages', 'auto_promote', 'auto_promote_rules',
    'judge', 'notifications', 'description', 'match', 'sticky']);
  for (const k of Object.keys(body)) if (!known.has(k)) throw new CanaryError('PROXY_ERR_BAD_BODY', `unknown field "${k}"`);
  // No pipeline_id: the default pipeline (the one requests no `pipelines` match go through).
  const pipelineId = body.pipeline_id === undefined ? defaults.default_pipeline_id ?? 'default' : body.pipeline_id;
  if (typeof pipelineId !== 'string' || pipelineId === '') throw new CanaryError('PROXY_ERR_BAD_BODY', 'pipeline_id: expected a non-empty string');
  if (body.candidate_config === undefined) throw new CanaryError('PROXY_ERR_BAD_BODY', 'candidate_config: required');
  const candidate = parsePart(candidateConfigSchema, body.candidate_config, 'candidate_config', 'PROXY_ERR_BAD_BODY');
  let stages = body.stages === undefined ? defaults.stages.map((s) => ({ ...s })) : parsePart(stagesSchema, body.stages, 'stages',
    'PROXY_ERR_CANARY_INVALID_STAGES');
  checkDurations(stages);
  const match = parseMatch(body.match);
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
  if (canaryDurationMs(rollback.check_interval) <= 0) throw new CanaryError('PROXY_ERR_CANARY_INVALID_RULES', 'rollback_rules.check_interval: must ' +
    'be longer than 0');
  const promote = parsePart(autoPromoteRulesSchema, merge('auto_promote_rules', body.auto_promote_rules, defaults.auto_promote_rules),
    'auto_promote_rules', 'PROXY_ERR_CANARY_INVALID_RULES');
  const judge = parsePart(judgeSchema, merge('judge', body.judge, defaults.judge), 'judge', 'PROXY_ERR_BAD_BODY');
  let channels: NotificationChannel[] | null = null;
  if (body.notifications !== undefined) {
    if (!isObject(body.notifications)) throw new CanaryError('PROXY_ERR_BAD_BODY', 'notifications: expected an object { channels: [...] }');
    // The config file's rules too (a webhook needs a secret, email needs notifications.smtp, a
    // pager takes only the events it can page): refused here with the key path, not at delivery.
    const checked = checkChannels(body.notifications.channels ?? [], defaults.notifications);
    if (checked.channels === null) {
      const first = checked.issues[0]!;
      throw new CanaryError('PROXY_ERR_BAD_BODY', `${first.path}: ${first.message}`, { issues: checked.issues });
    }
    channels = checked.channels;
  }
  if (body.description !== undefined && typeof body.description !== 'string') throw new CanaryError('PROXY_ERR_BAD_BODY', 'description: expected a string');
  return {
    pipeline_id: pipelineId, candidate_config: candidate as CandidateConfig, stages,
    auto_promote: (body.auto_promote as boolean | undefined) ?? defaults.auto_promote,
    rollback_rules: rollback, auto_promote_rules: promote, judge, channels,
    description: (body.description as string | undefined) ?? null,
    match, sticky: (body.sticky as Sticky | undefined) ?? null,
  };
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
