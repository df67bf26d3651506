// What the plugin host logs with: the Logger's five levels (message, then fields), and `record`
// when the logger has it — a plugin's structured records (proxy_log_fields) are then written with
// their pre-encoded fields; without it they are logged as the message of their level.
import type { Log, LogLevel } from '../log/index.ts';

export type HostLog = Pick<Log, LogLevel> & Partial<Pick<Log, 'record'>>;

const noop = (): void => {};

/** Default: warnings and errors to stderr, the rest dropped. */
export const defaultLogger: HostLog = {
  trace: noop,
  debug: noop,
  info: noop,
  warn: (msg, fields) => (fields === undefined ? console.warn(msg) : console.warn(msg, fields)),
  error: (msg, fields) => (fields === undefined ? console.error(msg) : console.error(msg, fields)),
};
