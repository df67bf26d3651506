// The plugin author's surface. See docs/plugins.md and examples/.
export { Step, registerStep } from "./step";
export { Context, property } from "./context";
export { Action, Phase, Phases, LogLevel, MetricKind, Property } from "./abi";
export { log, LogRecord } from "./log";
export { Counter, Gauge, Histogram, subop, SubOp } from "./metrics";
export { kv } from "./kv";
export { nowNs } from "./clock";
