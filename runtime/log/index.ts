// Structured logs (pino). Disabled levels are no-op functions assigned once at configuration
// time (pino's habit), so a disabled `debug` costs one call to an empty function and nothing else.
// Lines go to stderr, batched (BufferedFdSink): `json` (one object per line) or `pretty`
// (timestamp, level, logger, message, fields), and to the recent-lines ring `proxy logs` reads.
import { writeSync } from 'node:fs';
import { pino, type Logger as PinoLogger } from 'pino';
import { LogRing, type LogLines } from './ring.ts';
import { LOG_LEVEL_VALUES as LEVELS, type LogLevel } from './levels.ts';
import type { Log, LogFn } from './log.ts';
export { LogRing, type LogFollower, type LogLines } from './ring.ts';
export { LOG_LEVELS, LOG_LEVEL_VALUES, isLogLevel, type LogLevel } from './levels.ts';
export type { Log, LogFields, LogFn } from './log.ts';

const noop: LogFn = () => {};

export interface LogSink {
  write(line: string): void;
  /** Optional: the line `head` + `body` + `}\n` from bytes (`body` is valid during the call only). */
  writeRecord?(head: Uint8Array, body: Uint8Array): void;
}

const utf8Decoder = new TextDecoder();

// toISOString per line costs more than the rest of an access-log line: reuse it within a millisecond.
let isoMs = 0;
let isoText = '';
function isoNow(): string {
  const ms = Date.now();
  if (ms !== isoMs) {
    isoMs = ms;
    isoText = new Date(ms).toISOString();
  }
  return isoText;
}

/**
 * Batches lines and writes them to a file descriptor at most every FLUSH_INTERVAL_MS (or at
 * 64 KiB): an access log at one line per request would otherwise cost one write(2) per request —
 * writes to stderr are synchronous for files and pipes on Linux, and at low concurrency, where each
 * event-loop turn carries one request, a per-turn flush is still one write per request, in the way
 * of the next request. Flushed synchronously on exit so nothing buffered is lost when the process
 * ends (a SIGKILL loses at most the last interval's lines).
 */
export class BufferedFdSink implements LogSink {
  private readonly fd: number;
  private buf = Buffer.allocUnsafe(FLUSH_AT);
  private len = 0;
  private scheduled = false;
  private readonly flushBound = () => this.flush();

  constructor(fd: number) {
    this.fd = fd;
    process.on('exit', this.flushBound);
  }

  write(line: string): void {
    this.reserve(line.length * 3);
    this.len += this.buf.write(line, this.len, 'utf8');
    this.written();
  }

  writeRecord(head: Uint8Array, body: Uint8Array): void {
    const n = head.length + body.length + 2;
    this.reserve(n);
    const buf = this.buf;
    let at = this.len;
    buf.set(head, at);
    at += head.length;
    buf.set(body, at);
    at += body.length;
    buf[at++] = 0x7d; // }
    buf[at++] = 0x0a;
    this.len = at;
    this.written();
  }

  flush(): void {
    this.scheduled = false;
    if (this.len === 0) return;
    const n = this.len;
    this.len = 0;
    try {
      writeSync(this.fd, this.buf, 0, n);
    } catch {
      // EAGAIN on a non-blocking pipe or a closed stderr: dropping log lines beats blocking or crashing.
    }
  }

  /** Room for `n` more bytes: flush what is pending, and grow for a line longer than the buffer. */
  private reserve(n: number): void {
    if (this.len + n <= this.buf.length) return;
    this.flush();
    if (n > this.buf.length) this.buf = Buffer.allocUnsafe(n);
  }

  private written(): void {
    if (this.len >= FLUSH_AT) this.flush();
    else if (!this.scheduled) {
      this.scheduled = true;
      setTimeout(this.flushBound, FLUSH_INTERVAL_MS).unref();
    }
  }
}

const FLUSH_AT = 65536;
const FLUSH_INTERVAL_MS = 10;

let stderrSink: BufferedFdSink | null = null;
/** The process-wide buffered stderr sink (one per process, so lines from all loggers stay ordered). */
export function stderrLogSink(): BufferedFdSink {
  if (stderrSink === null) stderrSink = new BufferedFdSink(2);
  return stderrSink;
}

/** What `pino` writes to: its JSON lines go to the ring or forwarder (when there is one) and to the sink, as they are or pretty. */
class PinoDestination {
  private readonly sink: LogSink;
  private readonly ring: LogLines | null;
  private readonly pretty: boolean;
  constructor(sink: LogSink, ring: LogLines | null, pretty: boolean) {
    this.sink = sink;
    this.ring = ring;
    this.pretty = pretty;
  }
  write(line: string): void {
    if (this.ring !== null) this.ring.push(line);
    this.sink.write(this.pretty ? prettyLine(line) : line);
  }
}

// Characters a terminal acts on instead of showing: C0 and C1 controls (ESC starts the sequences
// that clear the screen, move the cursor, retitle the window), DEL, and the bidirectional overrides
// that reorder what follows. Clients choose many logged strings (appName, user, collection names).
// eslint-disable-next-line no-control-regex -- matching the control characters is the point
const TERMINAL_UNSAFE = /[\u0000-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g;

/** `s` with every character a terminal would act on written as an escape (`\n`, `\u001b`): one line, shown as sent. */
export function terminalSafe(s: string): string {
  return s.replace(TERMINAL_UNSAFE, (c) => c === '\n' ? '\\n' : c === '\r' ? '\\r' : c === '\t' ? '\\t'
    : `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

/**
 * `v` with every string in it, keys too, made safe to show as lines of text (terminalSafe: control
 * characters escaped, one line each): an API answer `proxy canary` prints, an event an email tells.
 * They hold strings clients chose (the namespaces, field names and values of a shadow canary's
 * diffs, a matched appName) and strings API callers chose (a description, a rollback reason): none
 * may move the cursor, clear the screen or forge a line.
 */
export function forTerminal<T>(v: T): T {
  if (typeof v === 'string') return terminalSafe(v) as T;
  if (Array.isArray(v)) return v.map((x: unknown) => forTerminal(x)) as T;
  if (v !== null && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [terminalSafe(k), forTerminal(x)])) as T;
  return v;
}

/**
 * `time LEVEL logger msg k=v ...` from one pino JSON line (the pretty format is for a terminal, like
 * pino-pretty): one line whatever the strings in it hold, control characters escaped.
 */
export function prettyLine(json: string): string {
  let o: Record<string, unknown>;
  try {
    o = JSON.parse(json) as Record<string, unknown>;
  } catch {
    return `${terminalSafe(json)}\n`;
  }
  let line = `${String(o.time)} ${String(o.level).toUpperCase().padEnd(5)} ${String(o.logger ?? '')} ${String(o.msg ?? '')}`;
  for (const k in o) {
    if (k === 'time' || k === 'level' || k === 'logger' || k === 'msg') continue;
    const v = o[k];
    line += ` ${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`;
  }
  return `${terminalSafe(line)}\n`;
}

/**
 * The proxy's logger: pino underneath (one JSON object per line: `level`, `time` ISO 8601 UTC,
 * `logger` (the name, e.g. proxy::profiling), the fields, `msg`). The same (message, fields)
 * surface as before; children share the root's pino instance (pino's bindings: the logger name is
 * serialised once per child, not per line).
 */
export class Logger implements Log {
  readonly name: string;
  trace: LogFn = noop;
  debug: LogFn = noop;
  info: LogFn = noop;
  warn: LogFn = noop;
  error: LogFn = noop;
  /** The recent-lines ring this logger family feeds (null: none, or a forwarder: a worker's lines go to the primary's ring). */
  readonly ring: LogRing | null;
  /** Where each line's copy goes: the ring, a forwarder, or nowhere. */
  private readonly lines: LogLines | null;
  /** Fields on every line (a worker's index), passed on to children; and as JSON members (`"worker":0,`) for the record lines. */
  private readonly base: Record<string, string | number> | null;
  private readonly baseMembers: string;
  /** The lowest level this logger writes. */
  readonly level: LogLevel;
  private readonly min: number;
  private readonly format: 'json' | 'pretty';
  private readonly sink: LogSink;
  private readonly root: PinoLogger;

  /**
   * `ring`: the recent-lines ring, or another LogLines (a worker's forwarder). `base`: fields on
   * every line of this logger family (a worker's index), right after `time`; with `root` pino has
   * them already, and they are kept for the record lines only.
   */
  constructor(name: string, level: LogLevel = 'info', format: 'json' | 'pretty' = 'json', sink: LogSink = stderrLogSink(),
    ring: LogLines | null = null, root?: PinoLogger, base: Record<string, string | number> | null = null) {
    this.name = name;
    this.level = level;
    this.format = format;
    this.sink = sink;
    this.ring = ring instanceof LogRing ? ring : null;
    this.lines = ring;
    this.base = base;
    this.baseMembers = base === null ? '' : Object.entries(base).map(([k, v]) => `${JSON.stringify(k)}:${JSON.stringify(v)},`).join('');
    const min = LEVELS[level];
    this.min = min;
    this.root = root ?? pino({
      level,
      base,
      messageKey: 'msg',
      timestamp: isoTimestamp,
      formatters: { level: levelLabel },
    }, new PinoDestination(sink, ring, format === 'pretty'));
    const p = this.root.child({ logger: name });
    // Disabled levels stay `noop`, assigned now: the hot path never checks a level.
    if (LEVELS.trace >= min) this.trace = (msg, fields) => (fields === undefined ? p.trace(msg) : p.trace(fields, msg));
    if (LEVELS.debug >= min) this.debug = (msg, fields) => (fields === undefined ? p.debug(msg) : p.debug(fields, msg));
    if (LEVELS.info >= min) this.info = (msg, fields) => (fields === undefined ? p.info(msg) : p.info(fields, msg));
    if (LEVELS.warn >= min) this.warn = (msg, fields) => (fields === undefined ? p.warn(msg) : p.warn(fields, msg));
    if (LEVELS.error >= min) this.error = (msg, fields) => (fields === undefined ? p.error(msg) : p.error(fields, msg));
  }

  child(name: string): Logger {
    return new Logger(name, this.level, this.format, this.sink, this.lines, this.root, this.base);
  }

  /**
   * A line whose fields arrive pre-encoded: `members` is UTF-8 JSON object members (`"k":v,...`),
   * trusted to be well formed (the plugin host checks it carries no line break). `prefix` is
   * more members written by the caller (ending with a comma). Costs no JSON encoding here: the
   * sink gets the bytes after a cached head, and the ring (when there is one) a copy of the line.
   */
  record(level: LogLevel, prefix: string, members: Uint8Array): void {
    if (LEVELS[level] < this.min) return;
    const sink = this.sink;
    const time = isoNow();
    if (time !== this.headTime || level !== this.headLevel || prefix !== this.headPrefix) {
      this.headTime = time;
      this.headLevel = level;
      this.headPrefix = prefix;
      this.jsonHead = Buffer.from(`{"level":"${level}","time":"${time}",${this.baseMembers}"logger":${JSON.stringify(this.name)},${prefix}`);
      this.head = this.format === 'json' ? this.jsonHead
        : Buffer.from(`${time} ${level.toUpperCase().padEnd(5)} ${this.name} {${this.baseMembers}${prefix}`);
    }
    if (this.lines !== null) {
      const h = this.jsonHead;
      const line = Buffer.allocUnsafe(h.length + members.length + 2);
      line.set(h, 0);
      line.set(members, h.length);
      line[line.length - 2] = 0x7d; // }
      line[line.length - 1] = 0x0a;
      this.lines.push(line);
    }
    // Pretty is for a terminal: the JSON escapes C0 controls but not C1 ones (U+009B is a CSI to
    // some terminals) nor bidirectional overrides, which a client's strings may hold.
    if (this.format === 'pretty') sink.write(`${terminalSafe(this.head.toString() + utf8Decoder.decode(members))}}\n`);
    else if (sink.writeRecord !== undefined) sink.writeRecord(this.head, members);
    else sink.write(this.head.toString() + utf8Decoder.decode(members) + '}\n');
  }

  // The head of the last record line (it changes once per millisecond at most).
  private head = Buffer.alloc(0);
  private jsonHead = Buffer.alloc(0);
  private headTime = '';
  private headLevel = '';
  private headPrefix = '';
}

function isoTimestamp(): string {
  return `,"time":"${isoNow()}"`;
}

function levelLabel(label: string): { level: string } {
  return { level: label };
}
