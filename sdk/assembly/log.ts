import { proxy_log, strPtr, strLen } from "./host";

export const enum LogLevel { Trace = 0, Debug = 1, Info = 2, Warn = 3, Error = 4 }

/** Plugin logging; lines go to the proxy's logger tagged with the step and pipeline. */
export namespace log {
  export function trace(msg: string): void { proxy_log(LogLevel.Trace, strPtr(msg), strLen(msg)); }
  export function debug(msg: string): void { proxy_log(LogLevel.Debug, strPtr(msg), strLen(msg)); }
  export function info(msg: string): void { proxy_log(LogLevel.Info, strPtr(msg), strLen(msg)); }
  export function warn(msg: string): void { proxy_log(LogLevel.Warn, strPtr(msg), strLen(msg)); }
  export function error(msg: string): void { proxy_log(LogLevel.Error, strPtr(msg), strLen(msg)); }
}
