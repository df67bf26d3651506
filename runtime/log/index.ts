// A small structured logger. Disabled levels are no-op functions assigned once at configuration
// time (pino's habit), so a disabled `debug` costs one call to an empty function and nothing else.
// Lines go to stderr: `json` (one object per line) or `pretty` (timestamp, level, logger, message, fields).

export type LogLevel = 'trace' | 'debug' | 'info' | 'warn' | 'error';
export type LogFields = Record<string, unknown>;
type LogFn = (msg: string, fields?: LogFields) => void;

const LEVELS: Record<LogLevel, number> = { trace: 10, debug: 20, info: 30, warn: 40, error: 50 };
const noop: LogFn = () => {};

export interface LogSink { write(line: string): void }

export class Logger {
  readonly name: string;
  trace: LogFn = noop;
  debug: LogFn = noop;
  info: LogFn = noop;
  warn: LogFn = noop;
  error: LogFn = noop;
  private readonly level: LogLevel;
  private readonly format: 'json' | 'pretty';
  private readonly sink: LogSink;

  constructor(name: string, level: LogLevel = 'info', format: 'json' | 'pretty' = 'json', sink: LogSink = process.stderr) {
    this.name = name;
    this.level = level;
    this.format = format;
    this.sink = sink;
    const min = LEVELS[level];
    for (const l of Object.keys(LEVELS) as LogLevel[]) {
      if (LEVELS[l] >= min) this[l] = (msg, fields) => this.emit(l, msg, fields);
    }
  }

  child(name: string): Logger {
    return new Logger(name, this.level, this.format, this.sink);
  }

  private emit(level: LogLevel, msg: string, fields?: LogFields): void {
    const time = new Date().toISOString();
    if (this.format === 'json') {
      this.sink.write(JSON.stringify({ time, level, logger: this.name, msg, ...fields }) + '\n');
      return;
    }
    let line = `${time} ${level.toUpperCase().padEnd(5)} ${this.name} ${msg}`;
    if (fields !== undefined) {
      for (const k in fields) line += ` ${k}=${typeof fields[k] === 'string' ? fields[k] : JSON.stringify(fields[k])}`;
    }
    this.sink.write(line + '\n');
  }
}

export const silentLogger = new Logger('silent', 'error', 'json', { write() {} });
