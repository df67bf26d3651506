// The plugin author's surface. See docs/plugins.md and examples/.
export { Step, registerStep } from "./step";
export { Context, property } from "./context";
export { RequestContext } from "./request";
export { Action, Phase, Phases, LogLevel, MetricKind, Property } from "./abi";
export { log, LogRecord } from "./log";
export { Counter, CounterSeries, Gauge, GaugeSeries, Histogram, HistogramSeries, subop, SubOp } from "./metrics";
export { kv } from "./kv";
export { nowNs } from "./clock";
