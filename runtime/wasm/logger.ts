// What the plugin host logs with: the Logger's five levels (message, then fields), and `record`
// when the logger has it — a plugin's structured records (proxy_log_fields) are then written with
// their pre-encoded fields; without it they are logged as the message of their level. `level`, when
// the logger has it, is the lowest level it writes (plugins read it: Property.LogLevel); without
// it every level counts as written.
import type { Log, LogLevel } from '../log/index.ts';

export type HostLog = Pick<Log, LogLevel> & Partial<Pick<Log, 'record'>> & { readonly level?: LogLevel };

const noop = (): void => {};

/** Default: warnings and errors to stderr, the rest dropped. */
export const defaultLogger: HostLog = {
  level: 'warn',
  trace: noop,
  debug: noop,
  info: noop,
  warn: (msg, fields) => (fields === undefined ? console.warn(msg) : console.warn(msg, fields)),
  error: (msg, fields) => (fields === undefined ? console.error(msg) : console.error(msg, fields)),
};
