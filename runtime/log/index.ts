// A small structured logger. Disabled levels are no-op functions assigned once at configuration
// time (pino's habit), so a disabled `debug` costs one call to an empty function and nothing else.
// Lines go to stderr, batched (BufferedFdSink): `json` (one object per line) or `pretty`
// (timestamp, level, logger, message, fields).
import { writeSync } from 'node:fs';

export type LogLevel = 'trace' | 'debug' | 'info' | 'warn' | 'error';
export type LogFields = Record<string, unknown>;
type LogFn = (msg: string, fields?: LogFields) => void;

const LEVELS: Record<LogLevel, number> = { trace: 10, debug: 20, info: 30, warn: 40, error: 50 };
const noop: LogFn = () => {};

export interface LogSink { write(line: string): void }

/**
 * Batches lines and writes them to a file descriptor once per event-loop turn (or at 64 KiB):
 * an access log at one line per request would otherwise cost one write(2) per request — writes to
 * stderr are synchronous for files and pipes on Linux. Flushed synchronously on exit so nothing
 * buffered is lost when the process ends.
 */
export class BufferedFdSink implements LogSink {
  private readonly fd: number;
  private parts: string[] = [];
  private bytes = 0;
  private scheduled = false;
  private readonly flushBound = () => this.flush();

  constructor(fd: number) {
    this.fd = fd;
    process.on('exit', this.flushBound);
  }

  write(line: string): void {
    this.parts.push(line);
    this.bytes += line.length;
    if (this.bytes >= 65536) this.flush();
    else if (!this.scheduled) {
      this.scheduled = true;
      setImmediate(this.flushBound);
    }
  }

  flush(): void {
    this.scheduled = false;
    if (this.parts.length === 0) return;
    const text = this.parts.length === 1 ? this.parts[0] : this.parts.join('');
    this.parts = [];
    this.bytes = 0;
    try {
      writeSync(this.fd, text);
    } catch {
      // EAGAIN on a non-blocking pipe or a closed stderr: dropping log lines beats blocking or crashing.
    }
  }
}

let stderrSink: BufferedFdSink | null = null;
/** The process-wide buffered stderr sink (one per process, so lines from all loggers stay ordered). */
export function stderrLogSink(): BufferedFdSink {
  if (stderrSink === null) stderrSink = new BufferedFdSink(2);
  return stderrSink;
}

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

  constructor(name: string, level: LogLevel = 'info', format: 'json' | 'pretty' = 'json', sink: LogSink = stderrLogSink()) {
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
