// What code that logs takes: the Logger's public shape. A module that needs less takes a subset,
// `Pick<Log, 'warn' | 'error'>`, so a test hands it a small object and nothing else is assumed.
// One argument order everywhere: the message, then the fields (optional, so they go last; the
// Logger hands them to pino in its own order).
import type { LogLevel } from './levels.ts';

export type LogFields = Record<string, unknown>;
export type LogFn = (msg: string, fields?: LogFields) => void;

export interface Log {
  trace: LogFn;
  debug: LogFn;
  info: LogFn;
  warn: LogFn;
  error: LogFn;
  /** A logger for a part of the proxy (`proxy::profiling`), writing where this one writes. */
  child(name: string): Log;
  /**
   * A line whose fields arrive pre-encoded: `members` is UTF-8 JSON object members (`"k":v,...`,
   * valid during the call only) and `prefix` more members the caller adds (ending with a comma).
   * How the plugin host writes a plugin's structured records without re-encoding them.
   */
  record(level: LogLevel, prefix: string, members: Uint8Array): void;
}
