// The log levels, declared once: the configuration schema's `log.level` picklist, the admin API's
// `level` filter (GET /api/v1/logs), `proxy logs --level` and the Logger all read this table. The
// plugin ABI numbers its levels 0..4 (runtime/wasm/abi-spec.ts, LogLevel); those numbers map to these
// names by the WIT case names, which are these names.

/** Lowest first. */
export const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error'] as const;

export type LogLevel = (typeof LOG_LEVELS)[number];

/** pino's numbers for the levels: the `level` of a JSON line is the name; a filter compares these. */
export const LOG_LEVEL_VALUES: Readonly<Record<LogLevel, number>> = { trace: 10, debug: 20, info: 30, warn: 40, error: 50 };

export function isLogLevel(s: string): s is LogLevel {
  return (LOG_LEVELS as readonly string[]).includes(s);
}
