// Configuration of canary deployments (SPEC §2.8, §4.2, §6): the control plane, the defaults for
// canaries started through the API (`canary`, `rollback_rules`, `auto_promote_rules`,
// `notifications`). The API validates its request bodies with these same schemas
// (runtime/canary/spec.ts), so a key means the same thing in a file and in a request.
import * as v from 'valibot';
import { onReload, onRestart } from './applies.ts';
import { hostSchema, notRefusedUrl } from './address.ts';
import { expects, int } from './expects.ts';

/** `0`, `250ms`, `30s`, `10m`, `1h`, or a sum such as `1h30m`. */
export const CANARY_DURATION_PATTERN = /^(0|(\d+(ms|s|m|h))+)$/;

const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/** Milliseconds of a duration matching CANARY_DURATION_PATTERN; NaN when it does not match. */
export function canaryDurationMs(s: string): number {
  if (!CANARY_DURATION_PATTERN.test(s)) return NaN;
  if (s === '0') return 0;
  let ms = 0;
  for (const m of s.matchAll(/(\d+)(ms|s|m|h)/g)) ms += Number(m[1]) * UNIT_MS[m[2]];
  return ms;
}

/** The longest canary duration (a stage's min_duration, check_interval, …): a year, 8760h. */
export const MAX_CANARY_DURATION_MS = 8760 * 3_600_000;
/** The largest request count a canary key takes (min_requests, min_window_requests): a billion. */
export const MAX_CANARY_COUNT = 1_000_000_000;
/** The largest millisecond delta a rule takes (latency_p95_delta_ms, …): a day. */
export const MAX_CANARY_DELTA_MS = 86_400_000;
/** The most stages a canary has, and the most custom_metrics rules. */
export const MAX_CANARY_STAGES = 100;
export const MAX_CUSTOM_METRICS = 100;

/** How the docs and validation errors word a canary duration. */
export const CANARY_DURATION_PHRASE = 'duration like "30s", "10m", "1h30m", "250ms" or "0" (ms, s, m, h)';

const duration = (desc: string) => expects(v.pipe(v.string(), v.regex(CANARY_DURATION_PATTERN, `expected a ${CANARY_DURATION_PHRASE}`),
  v.rawCheck<string>(({ dataset, addIssue }) => {
    if (dataset.typed && canaryDurationMs(dataset.value) > MAX_CANARY_DURATION_MS) addIssue({ message: 'expected a duration of at most 8760h (a year)' });
  }), v.description(desc)), CANARY_DURATION_PHRASE);
// v.number() takes Infinity (JSON.parse reads 1e400 as Infinity) and v.integer() takes 1e300:
// every number below has a finite upper bound.
const pct = (desc: string) => v.pipe(v.number(), v.integer(), v.minValue(0), v.maxValue(100), v.description(desc));
const pctDelta = (desc: string) => expects(v.pipe(v.number(), v.minValue(0), v.maxValue(100), v.description(desc)), 'number 0..100');
const msDelta = (desc: string) => expects(v.pipe(v.number(), v.minValue(0), v.maxValue(MAX_CANARY_DELTA_MS), v.description(desc)),
  `number 0..${MAX_CANARY_DELTA_MS}`);
const count = (desc: string) => int(0, MAX_CANARY_COUNT, desc);

export const stageSchema = v.strictObject({
  traffic_pct: onReload(pct('Percentage of requests sent to the candidate in this stage (0..100).')),
  min_duration: onReload(duration('Minimum time at the stage before it may be promoted.')),
  min_requests: onReload(count('Minimum candidate requests since entering the stage before it may be promoted.')),
  shadow_pct: onReload(v.optional(pct('A shadow canary (mode `shadow`) only: share of the requests the baseline serves at this stage on which the ' +
    'candidate also runs, unseen, to be compared. Default: the canary\'s `shadow_pct` at a stage with traffic_pct 0, none at an exposed stage.'))),
  manual_gate: onReload(v.optional(v.pipe(v.boolean(), v.description('With auto_promote, the canary pauses here (status `paused`) until promoted by hand.')))),
  gate: onReload(v.optional(v.pipe(v.strictObject({
    url: onReload(v.pipe(v.string(), v.url('expected an http:// or https:// URL'), v.regex(/^https?:\/\//i, 'expected an http:// or https:// URL'),
      notRefusedUrl,
      v.description('Where the gate is POSTed the canary\'s state.'))),
    timeout_ms: onReload(v.optional(v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(60_000),
      v.description('How long the gate has to answer, ms.')), 5000)),
  }), v.description('Pre-promotion webhook: the canary leaves this stage only after a POST to `url` answers 2xx within `timeout_ms` (default ' +
    '5000); a failure or timeout holds the stage and is retried at each evaluation.')))),
});

export const stagesSchema = v.pipe(
  v.array(stageSchema),
  v.minLength(1, 'at least one stage is needed'),
  v.maxLength(MAX_CANARY_STAGES, `at most ${MAX_CANARY_STAGES} stages`),
  v.check((a) => a.every((s, i) => i === 0 || s.traffic_pct >= a[i - 1].traffic_pct), 'traffic_pct must not decrease from one stage to the next'),
);

export const DEFAULT_STAGES = [
  { traffic_pct: 5, min_duration: '5m', min_requests: 100 },
  { traffic_pct: 25, min_duration: '5m', min_requests: 500 },
  { traffic_pct: 50, min_duration: '10m', min_requests: 1000 },
  { traffic_pct: 100, min_duration: '0', min_requests: 0 },
];

export const customMetricSchema = v.strictObject({
  metric: onReload(v.pipe(v.string(), v.regex(/^proxy_plugin_[a-zA-Z0-9_]+$/, 'expected a plugin metric name (proxy_plugin_…)'),
    v.description('Plugin metric (proxy_plugin_…) compared between the graphs.'))),
  threshold_delta: onReload(v.pipe(v.number(), v.minValue(-Number.MAX_SAFE_INTEGER), v.maxValue(Number.MAX_SAFE_INTEGER),
    v.description('Candidate minus baseline beyond which the rule is breached.'))),
  comparison: onReload(v.optional(v.pipe(v.picklist(['greater_than', 'less_than']),
    v.description('`greater_than`: breached when the delta exceeds threshold_delta; `less_than`: when it is below it.')), 'greater_than')),
});

export const rollbackRulesSchema = v.strictObject({
  error_rate_delta_pct: onReload(v.optional(pctDelta('Roll back when the candidate error rate exceeds the baseline\'s by more than this many ' +
    'percentage points (additive: baseline 0.02 and 5.0 trigger above 5.02).'), 5)),
  latency_p95_delta_ms: onReload(v.optional(msDelta('Roll back when the candidate P95 latency exceeds the baseline\'s by more than this many ' +
    'milliseconds.'), 100)),
  sustained_duration: onReload(v.optional(duration('How long a breach must persist, evaluation after evaluation, before the rollback.'), '20s')),
  check_interval: onReload(v.optional(duration('How often the canary is evaluated (the evaluation window).'), '5s')),
  custom_metrics: onReload(v.optional(v.pipe(v.array(customMetricSchema), v.maxLength(MAX_CUSTOM_METRICS, `at most ${MAX_CUSTOM_METRICS} rules`),
    v.description('Extra rules over plugin metrics (see docs/canary.md).')), [])),
  divergence_rate: onReload(v.optional(v.pipe(v.number(), v.minValue(0), v.maxValue(1), v.description('Shadow canaries: roll back when the share ' +
    '(0..1) of shadowed requests on which the candidate diverged from the baseline exceeds this.')))),
  candidate_latency_p95_delta_ms: onReload(v.optional(msDelta('Shadow canaries: roll back when the P95 of the candidate\'s steps\' time on the ' +
    'shadowed requests exceeds the baseline\'s on the same requests by more than this many milliseconds.'))),
  min_window_requests: onReload(v.optional(count('Fewer requests than this on either side in a window is no evidence: the window neither starts ' +
    'nor resets a timer and never promotes.'), 20)),
});

export const autoPromoteRulesSchema = v.strictObject({
  min_duration: onReload(v.optional(duration('Floor on every stage\'s min_duration for automatic promotion.'), '0')),
  min_requests: onReload(v.optional(count('Floor on every stage\'s min_requests for automatic promotion.'), 0)),
  max_error_rate_delta_pct: onReload(v.optional(pctDelta('Promote only when the candidate error rate exceeds the baseline\'s by at most this many ' +
    'points (stage window).'), 1)),
  max_latency_p95_delta_ms: onReload(v.optional(msDelta('Promote only when the candidate P95 exceeds the baseline\'s by at most this many ms (stage ' +
    'window).'), 20)),
  max_divergence_rate: onReload(v.optional(v.pipe(v.number(), v.minValue(0), v.maxValue(1), v.description('Shadow canaries: promote only when at ' +
    'most this share (0..1) of the stage\'s shadowed requests diverged.')))),
  max_candidate_latency_p95_delta_ms: onReload(v.optional(msDelta('Shadow canaries: promote only when the P95 of the candidate\'s steps\' time on ' +
    'the stage\'s shadowed requests exceeds the baseline\'s by at most this many ms.'))),
});

export const judgeSchema = v.strictObject({
  enabled: onReload(v.optional(v.pipe(v.boolean(), v.description('Statistical judge: a breach or a promotion also needs a one-sided significance ' +
    'test (errors: Fisher exact test, z-test past 5000 errors; latency: Mann-Whitney U on the windows\' histograms).')), false)),
  confidence: onReload(v.optional(v.pipe(v.number(), v.minValue(0.5), v.maxValue(0.9999),
    v.description('Confidence of the judge\'s one-sided tests (0.5..0.9999).')), 0.98)),
});

// Notifications (channelSchema, notificationsSchema) live in notifications-schema.ts.
export { notificationChannel as channelSchema, notificationsSchema } from './notifications-schema.ts';

/** Paths no diff compares by default: what differs between any two replies of a server. */
export const DEFAULT_SHADOW_IGNORE_PATHS = ['$clusterTime', 'operationTime'];

export const shadowSchema = v.strictObject({
  ignore_paths: onReload(v.optional(v.pipe(v.array(v.pipe(v.string(), v.minLength(1), v.maxLength(1024))), v.maxLength(100),
    v.description('Dotted paths a shadow canary\'s diff skips, with everything under them (array elements by index, e.g. `cursor.id`).')),
  DEFAULT_SHADOW_IGNORE_PATHS)),
  show_values: onReload(v.optional(v.pipe(v.boolean(), v.description('Diffs show the differing values; by default only paths and types (the ' +
    'candidate may be the plugin that redacts).')), false)),
  max_diffs: onReload(v.optional(v.pipe(v.number(), v.integer(), v.minValue(0), v.maxValue(10_000),
    v.description('Divergent requests\' diffs kept per shadow canary (a ring: the oldest is dropped).')), 100)),
  diverged_event_interval: onReload(v.optional(duration('At most one `canary.diverged` event per canary per this interval.'), '1m')),
  upstream_reads_concurrency: onReload(v.optional(v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(64),
    v.description('With `shadow_upstream_reads`: at most this many of a shadow canary\'s own reads (a find, count or distinct whose command ' +
    'differs from the baseline\'s) under way at once; a read past it is not fetched.')), 4)),
});

export const canarySchema = v.strictObject({
  stages: onReload(v.optional(v.pipe(stagesSchema, v.description('Default stages of a canary started without `stages`.')), DEFAULT_STAGES)),
  auto_promote: onReload(v.optional(v.pipe(v.boolean(), v.description('Default: promote automatically when the four auto-promote conditions hold.')), false)),
  data_dir: onRestart(v.optional(v.pipe(v.string(), v.minLength(1), v.description('Directory of the canary store (canary.db, SQLite; created if ' +
    'missing; relative to the working directory).')), 'data/canary')),
  baseline_grace_period: onRestart(v.optional(duration('How long the old baseline graph is kept after a canary completes (restorable with POST ' +
    '/api/v1/canary/{id}/restore-baseline).'), '15m')),
  warning_share: onRestart(v.optional(v.pipe(v.number(), v.minValue(0.01), v.maxValue(1),
    v.description('canary.threshold_warning is emitted when a delta passes this share of its rollback threshold.')), 0.8)),
  max_samples: onRestart(v.optional(v.pipe(v.number(), v.integer(), v.minValue(10), v.maxValue(10_000_000),
    v.description('Evaluation samples kept per canary (GET …/metrics); older ones are dropped.')), 10000)),
  judge: onReload(v.optional(v.pipe(judgeSchema, v.description('Optional statistical judge (docs/canary.md).')), {})),
  shadow: onReload(v.optional(v.pipe(shadowSchema, v.description('Defaults of shadow canaries (mode `shadow`, docs/canary.md "Shadow canaries"); ' +
    'a start request\'s `shadow` object overrides them key by key.')), {})),
  plugin_dirs: onReload(v.optional(v.pipe(v.array(v.pipe(v.string(), v.minLength(1))),
    v.description('Directories a candidate step\'s `plugin_id` path may load a .wasm module from (relative to the working directory), besides the ' +
    'built-in plugin directory and the directories of the configured steps\' modules; a path is allowed when its real location (symlinks followed) ' +
    'is inside one of them. Any other `plugin_id` must name an installed npm package. Read when a canary starts or resumes.')), [])),
});

/** The default `max_connections` of each HTTP listener (admin, profiling, control_plane). */
export const DEFAULT_HTTP_MAX_CONNECTIONS = 1000;

/** `max_connections` of an HTTP listener (`admin.`, `profiling.`, `control_plane.`); `listener` names it in the description. */
export function maxConnectionsSchema(listener: string) {
  return onReload(v.optional(int(1, 1_000_000, `Connections the ${listener} serves at once (keep-alive connections, canary feeds and log ` +
    'follows included); one past it is closed as it is accepted and counted in proxy_http_connections_refused_total. It keeps connections to this port, ' +
    'which need no token, from using up the process\'s file descriptors (and with them client and upstream connections). A reload changes it for ' +
    'the running listener.'), DEFAULT_HTTP_MAX_CONNECTIONS));
}

export const controlPlaneSchema = v.strictObject({
  host: onReload(v.optional(hostSchema('Address the canary control plane binds (a host name, IPv4 or IPv6 address). A reload that changes it opens ' +
    'the new address first and then closes the old one; an address that cannot be bound refuses the reload (the old listener and configuration ' +
    'stay).'), '127.0.0.1')),
  port: onReload(v.optional(v.pipe(v.number(), v.integer(), v.minValue(0), v.maxValue(65535),
    v.description('Port of the canary control-plane API (/api/v1/canary); 0 picks a free one. A reload that changes it opens the new address first ' +
    'and then closes the old one; an address that cannot be bound refuses the reload (the old listener and configuration stay).')), 9092)),
  tokens: onReload(v.optional(v.pipe(v.array(v.pipe(v.string(), v.minLength(16))),
    v.description('Bearer tokens accepted (each at least 16 characters). With none here and the environment variable unset, every request is ' +
    'refused (401). A reload replaces them: a removed token is refused from the next request on, and a WebSocket feed opened with it is closed ' +
    '(code 4401).')), [])),
  token_env: onReload(v.optional(v.pipe(v.string(), v.minLength(1), v.description('Environment variable whose value is also accepted as a bearer ' +
    'token; read at start and on every reload.')), 'PROXY_CONTROL_PLANE_TOKEN')),
  max_connections: maxConnectionsSchema('control plane'),
});
