// Public surface of the canary subsystem: the controller (state machine, evaluation, persistence),
// its graphs and metrics interfaces, the event contract with the notification channels.
export { CanaryController, systemClock, intervalScheduler, type Clock, type Scheduler, type ControllerOptions, type Listener } from './controller.ts';
export { CanaryError, CANARY_ERROR_CODES, type CanaryErrorCode } from './errors.ts';
export { PipelineCanaryGraphs, candidatePipelineConfig, type Aim, type CanaryGraphs, type PreparedCandidate, type RetainedBaseline } from './graphs.ts';
export { AimedSelector, sessionDraw, saltOf, type Sticky } from './aimed-selector.ts';
export { CanaryStore, type CanaryRecord, type CanaryStatus, type HistoryEntry, type PromotionRecord, type Sample } from './store.ts';
export { Promotions, stepsFingerprint, type BaselineChoice } from './promotions.ts';
export { parseStartRequest, defaultsFromConfig, optionalText, MAX_DESCRIPTION_CHARS, MAX_REASON_CHARS,
  type CanarySpec, type CanaryDefaults, type Stage, type CandidateConfig } from './spec.ts';
export { evaluate, formatDuration, type Evaluation, type RuleStatus, type ConditionStatus } from './evaluator.ts';
export { mannWhitneyWorse, twoProportionWorse, errorRateWorse, fisherWorse, logGamma, normalUpperTail, FISHER_MAX_ERRORS } from './judge.ts';
export { SideWindow, WindowTracker, emptyHistogram, jsCopy, buckets, HIGHEST_TRACKABLE_US, type CanaryMetricsSource, type GraphTotals,
  type CustomReading } from './windows.ts';
export { ArmEvidence, CanaryEvidence } from './arm-evidence.ts';
export * from './events.ts';
export { LogEventSink, RecordingEventSink } from './sinks.ts';
export { statusView, historyView, reportView, listRow, type CanaryView } from './views.ts';
export { CustomMetricWindows } from './custom-metrics.ts';
export { ShadowCanary, ShadowStats, DIVERGENCE_KINDS, MAX_DIFF_ENTRIES, SHADOW_READ_COMMANDS, type DivergenceKind, type DiffRecord, type ShadowFigures,
  type ShadowSettings } from './shadow.ts';
export { diffBson, typeName, type DiffEntry, type DiffChange, type DiffOptions, type DiffResult } from './bson-diff.ts';
export { ShadowWindow, ShadowTracker } from './shadow-windows.ts';
export { registerShadowMetrics, SHADOW_METRICS } from './shadow-metrics.ts';
