// The plugin author's surface. See docs/plugins.md and examples/.
export { Step, Phases, registerStep } from "./step";
export { Context, Action, Phase, property } from "./context";
export { log, LogLevel, LogRecord } from "./log";
export { Counter, Gauge, Histogram, subop, SubOp } from "./metrics";
export { kv } from "./kv";
export { nowNs } from "./clock";
