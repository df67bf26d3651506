// Public surface of the pipeline executor.
export { Verdict, Exchange, type ConnectionInfo } from './exchange.ts';
export { Pipeline } from './pipeline.ts';
export {
  PipelineManager, stepName, DEFAULT_PIPELINE_ID, DEFAULT_MAX_MEMORY_PAGES,
  type StepSettings, type PipelineConfig, type PipelineManagerOptions,
} from './manager.ts';
export { StepRunner, defaultOnError } from './step-runner.ts';
export { GraphKey } from './graph-key.ts';
export { VARIANTS, isVariant, type Variant } from '../config/index.ts';
export { GraphSlot } from './graph-slot.ts';
export { PipelineRouting, ConnectionRoute, MEMO_LIMIT, MEMO_BUDGET, type RouteEntry } from './routing.ts';
export { PercentSelector, type GraphSelector } from './selector.ts';
export { ClientMatch, globRegExp, parseCidr, hostOf, type ClientMatchSpec } from './client-match.ts';
export type { ArmRecorder } from './arm-recorder.ts';
export { ShadowRequest, ShadowNext, type GraphShadow } from './shadow.ts';
export { RejectionCounts, MAX_REJECTION_SERIES, type RejectionSeries } from './rejections.ts';
export { callbackRecorder, type StepRecorder, type StepTimer } from './recorder.ts';
export { RequestTimings } from './request-timings.ts';
export type { HostLog } from '../wasm/index.ts';
export type { DocSequence } from '../wire/index.ts';
