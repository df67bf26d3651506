// Public surface of the configuration layer.
export { ConfigError, type ConfigIssue } from './errors.ts';
export { loadConfig, parseConfig, formatPath, CONFIG_FILE_NAMES, type LoadedConfig } from './load.ts';
export {
  ProxyConfigSchema,
  BUILTIN_STEPS,
  STEP_ID_PATTERN,
  defaultConfig,
  schemaKeys,
  type ProxyConfig,
  type ProxyConfigInput,
  type StepConfig,
  type StepId,
  type SchemaKey,
} from './schema.ts';
export { renderConfigDocs, CONFIG_DOCS_PATH } from './docs.ts';
export {
  canaryDurationMs, CANARY_DURATION_PATTERN, DEFAULT_STAGES,
  stageSchema, stagesSchema, rollbackRulesSchema, autoPromoteRulesSchema, judgeSchema, channelSchema,
  canarySchema, controlPlaneSchema, notificationsSchema, customMetricSchema,
} from './canary-schema.ts';
