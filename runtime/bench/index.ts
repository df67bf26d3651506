// Public surface of the raw wire-protocol load generator behind `proxy bench` and bench/.
export { DEFAULT_PROFILING_URL, readTotals, overheadBetween, totalsOf, type OverheadReading, type ProfileTotals } from './overhead.ts';
export { runBench, OVERHEAD_NOTE, type BenchOptions, type BenchResult, type BenchProgress, type LatencySummary } from './run-bench.ts';
export { parseDuration, parseConnections, parseOp, parseTarget, BENCH_OPS, type BenchOp } from './options.ts';
export { BenchError, type BenchErrorCode } from './errors.ts';
export { formatProgress, formatResult } from './report.ts';
