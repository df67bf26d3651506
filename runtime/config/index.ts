// Public surface of the configuration layer.
export { ConfigError, type ConfigIssue } from './errors.ts';
export {
  loadConfig, parseConfig, parseConfigText, parseText, readConfigFile, MAX_CONFIG_BYTES, formatPath, CONFIG_FILE_NAMES, CONFIG_FORMATS, type LoadedConfig,
  type ConfigFormat,
} from './load.ts';
export {
  ProxyConfigSchema,
  BUILTIN_STEPS,
  unknownStep,
  STEP_ID_PATTERN,
  MAX_STEPS_PER_PHASE,
  MAX_STEP_CONFIG_DEPTH,
  stepConfigSchema,
  defaultConfig,
  schemaKeys,
  type ProxyConfig,
  type ProxyConfigInput,
  type StepConfig,
  type StepId,
  type SchemaKey,
} from './schema.ts';
export { renderConfigDocs, CONFIG_DOCS_PATH } from './docs.ts';
export { restartKeys } from './reload.ts';
export { MAX_TIMER_MS } from './expects.ts';
export { VARIANTS, isVariant, type Variant } from './variant.ts';
export { pipelineEntries, defaultPipelineId, matchesAll, RESERVED_PIPELINE_IDS, type PipelineEntry } from './pipeline-list.ts';
export {
  MATCH_KEYS, CONNECTION_KEYS, REQUEST_KEYS, GLOB_KEYS, COMMAND_ALIASES, compileGlob, globRegExp, compileCidrs, parseCidr, valuesOf, matchCovers,
  type MatchKey, type MatchSpec, type StringTest, type Cidr,
} from './pipeline-match.ts';
export { appliesOf, type Applies } from './applies.ts';
export {
  canaryDurationMs, CANARY_DURATION_PATTERN, DEFAULT_STAGES,
  stageSchema, stagesSchema, rollbackRulesSchema, autoPromoteRulesSchema, judgeSchema, channelSchema,
  canarySchema, controlPlaneSchema, notificationsSchema, customMetricSchema, shadowSchema, DEFAULT_SHADOW_IGNORE_PATHS, DEFAULT_HTTP_MAX_CONNECTIONS,
} from './canary-schema.ts';
export {
  channelProblems, notificationChannel, NOTIFICATION_EVENTS, PAGER_EVENTS, PAGERDUTY_EVENTS_URL, PAGER_SEVERITIES,
  type NotificationsConfig, type NotificationChannelConfig,
} from './notifications-schema.ts';
export { parseHost, parseHostPort, refusedAddress, refusedHost, refusedUrl, hostPort, bracketHost, formatHostPort, httpUrl, listenFailure, errorReason,
  type HostPort } from './address.ts';
