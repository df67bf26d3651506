/** The logger shape the host uses (a subset of pino's). */
export interface Logger {
  trace(obj: object, msg: string): void;
  debug(obj: object, msg: string): void;
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
  /**
   * Optional: a structured line whose fields a plugin encoded itself (proxy_log_fields): `prefix`
   * is JSON members the host adds (step, pipeline), `members` UTF-8 JSON object members, valid
   * during the call only. Loggers without it get the members as the message of `level`.
   */
  record?(level: 'trace' | 'debug' | 'info' | 'warn' | 'error', prefix: string, members: Uint8Array): void;
}

const noop = (): void => {};

/** Default: warnings and errors to stderr, the rest dropped. */
export const defaultLogger: Logger = {
  trace: noop,
  debug: noop,
  info: noop,
  warn: (o, m) => console.warn(m, o),
  error: (o, m) => console.error(m, o),
};
