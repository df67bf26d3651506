// Public surface of the profiling subsystem: the profiler (a StepRecorder), its distributions,
// per-request frames and the Prometheus exposition.
export {
  Profiler, StepStats, GraphStats, MAX_SUBOPS_PER_STEP, SLOW_LINES_PER_SECOND, SLOW_SUPPRESSED_MESSAGE,
  type ProfilingSettings, type MmapStorage, type ProfileSnapshot, type StepRow, type CompletedRequest, type RestoreSummary,
} from './profiler.ts';
export { StateFormatError, type ProfilerState } from './profiler-state.ts';
export { SnapshotStore, durationToMs, STATE_FILE, type SnapshotStoreOptions, type LivePoint } from './snapshot-store.ts';
export { MAX_SERIES_POINTS, seriesFileName, type SeriesQuery, type SeriesPoint, type SeriesStepPoint } from './series-file.ts';
export { type SeriesRecord } from './interval-stats.ts';
export { LatencyStats, initHistograms, newHdr, HIGHEST_TRACKABLE_US, type Distribution } from './latency-stats.ts';
export { FrameRing, type RequestFrame, type FrameStep, type FrameSubop } from './frames.ts';
export { profilingMetricsText } from './prometheus.ts';
export { foldFrames, foldedText, TOP_REQUEST, TOP_UPSTREAM, TOP_RESPONSE, TOP_PROXY, ACQUIRE } from './folded.ts';
export { HistogramFile, MappedLatencyStats, mmapFitIssue, loadShm, SHM_ADDON_PATH } from './mmap-store.ts';
export { readHistogramFile, fileSnapshot, type FileRow, type FileContents } from './mmap-reader.ts';
