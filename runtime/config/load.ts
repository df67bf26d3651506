// Finding, reading and validating the configuration file. Every failure, from a missing file to a
// YAML syntax error to a bad key, becomes one ConfigError listing `<file>: <key path>: <reason>`.
import { stat } from 'node:fs/promises';
import { extname, resolve } from 'node:path';
import * as v from 'valibot';
import { parseDocument } from 'yaml';
import { parse as parseToml } from 'smol-toml';
import { readFileOrPipe } from '../fs/index.ts';
import { ConfigError, type ConfigIssue } from './errors.ts';
import {
  ProxyConfigSchema,
  defaultConfig,
  describeExpected,
  objectKeysAt,
  recordKeySchemaAt,
  schemaAtPath,
  type ProxyConfig,
} from './schema.ts';

/** Looked for, in this order, in the working directory when no file is named. */
export const CONFIG_FILE_NAMES = ['proxy.json', 'proxy.yaml', 'proxy.yml', 'proxy.toml'] as const;

/** A configuration file's format, when its name does not tell it (`serve --config <(…)` reads /dev/fd/63). */
export const CONFIG_FORMATS = ['json', 'yaml', 'toml'] as const;
export type ConfigFormat = typeof CONFIG_FORMATS[number];

export interface LoadedConfig {
  config: ProxyConfig;
  /** Absolute path of the file read, or null when the defaults were used. */
  source: string | null;
}

/** `format`: how to read the file, whatever its extension (absent: by the extension). */
export async function loadConfig(opts: { file?: string; cwd?: string; format?: ConfigFormat } = {}): Promise<LoadedConfig> {
  const cwd = opts.cwd ?? process.cwd();
  let file: string | null = null;
  if (opts.file !== undefined) {
    file = resolve(cwd, opts.file);
  } else {
    for (const name of CONFIG_FILE_NAMES) {
      const candidate = resolve(cwd, name);
      if (await isFile(candidate)) {
        file = candidate;
        break;
      }
    }
  }
  if (file === null) return { config: defaultConfig(), source: null };

  let text: string;
  try {
    text = await readConfigFile(file);
  } catch (err) {
    throw new ConfigError(file, [{ path: '', message: `cannot read file: ${(err as Error).message}` }], { cause: err });
  }
  return { config: parseConfigText(text, file, opts.format), source: file };
}

/** The largest configuration file read: configurations are kilobytes; a larger file is a mistake (or /dev/zero). */
export const MAX_CONFIG_BYTES = 4 * 1024 * 1024;

/** How long a configuration file that is a pipe may stay silent (no data, no end) before reading it fails. */
export const CONFIG_PIPE_IDLE_MS = 5000;

/**
 * A configuration file's text, read to at most MAX_CONFIG_BYTES (larger: an error saying so; a
 * device is read the same way). A pipe (a FIFO, process substitution) is read as it comes, and
 * fails after CONFIG_PIPE_IDLE_MS without data or end of file instead of waiting for ever.
 */
export async function readConfigFile(file: string, idleMs = CONFIG_PIPE_IDLE_MS): Promise<string> {
  const buf = await readFileOrPipe(file, { maxBytes: MAX_CONFIG_BYTES, idleMs });
  if (buf.length > MAX_CONFIG_BYTES) throw new Error(`larger than ${MAX_CONFIG_BYTES / (1024 * 1024)} MiB; a configuration file may be at most that`);
  return buf.toString('utf8');
}

/** The configuration in a file's text, read as `format` or else the file's extension says (a reload that has read the file itself). */
export function parseConfigText(text: string, file: string, format?: ConfigFormat): ProxyConfig {
  return parseConfig(parseText(text, file, format), file);
}

/** Validates an already-parsed object (a reload, a test, a config built in code). */
export function parseConfig(obj: unknown, source: string | null): ProxyConfig {
  const result = v.safeParse(ProxyConfigSchema, obj ?? {});
  if (result.success) return result.output;
  throw new ConfigError(source, toIssues(result.issues));
}

async function isFile(path: string): Promise<boolean> {
  try {
    return (await stat(path)).isFile();
  } catch {
    return false;
  }
}

const FORMAT_OF_EXTENSION: Record<string, ConfigFormat> = { '.json': 'json', '.yaml': 'yaml', '.yml': 'yaml', '.toml': 'toml' };

/** The object a configuration file's text holds (as `format`, else by its extension: JSON, YAML or TOML), not yet validated. */
export function parseText(text: string, file: string, format?: ConfigFormat): unknown {
  const ext = extname(file).toLowerCase();
  switch (format ?? FORMAT_OF_EXTENSION[ext]) {
    case 'json':
      try {
        return JSON.parse(text);
      } catch (err) {
        throw new ConfigError(file, [{ path: '', message: `invalid JSON: ${jsonPosition(text, (err as Error).message)}` }], { cause: err });
      }
    case 'yaml': {
      const doc = parseDocument(text);
      if (doc.errors.length > 0) {
        const issues = doc.errors.map((e) => ({ path: '', message: `invalid YAML: ${firstLine(e.message)}` }));
        throw new ConfigError(file, issues, { cause: doc.errors[0] });
      }
      return doc.toJS();
    }
    case 'toml':
      try {
        return parseToml(text);
      } catch (err) {
        const e = err as Error & { line?: number; column?: number };
        const at = e.line !== undefined ? ` at line ${e.line}, column ${e.column}` : '';
        const reason = firstLine(e.message).replace(/^Invalid TOML document: /, '');
        throw new ConfigError(file, [{ path: '', message: `invalid TOML${at}: ${reason}` }], { cause: err });
      }
    default:
      throw new ConfigError(file, [{ path: '', message: `${ext === '' ? 'no file extension' : `unsupported file extension "${ext}"`} to tell the ` +
        'format (use .json, .yaml, .yml or .toml; `proxy serve --config-format json|yaml|toml` names it for a file without one, such as ' +
        'the pipe of --config <(…))' }]);
  }
}

function firstLine(message: string): string {
  return message.split('\n', 1)[0].replace(/:$/, '');
}

/** V8 reports a character offset only; turn it into the line and column an editor shows. */
function jsonPosition(text: string, message: string): string {
  const m = /at position (\d+)/.exec(message);
  if (!m || /line \d+/.test(message)) return message;
  const pos = Number(m[1]);
  const before = text.slice(0, pos).split('\n');
  return `${message.slice(0, m.index).trimEnd()} at line ${before.length}, column ${before[before.length - 1].length + 1}`;
}

type Issue = v.InferIssue<typeof ProxyConfigSchema>;

function toIssues(issues: readonly Issue[]): ConfigIssue[] {
  const out: ConfigIssue[] = [];
  const seen = new Set<string>();
  for (const issue of issues) {
    const converted = toIssue(issue);
    const id = `${converted.path}\0${converted.message}`;
    if (seen.has(id)) continue;
    seen.add(id);
    out.push(converted);
  }
  return out;
}

function toIssue(issue: Issue): ConfigIssue {
  const items = issue.path ?? [];
  const keys = items.map((p) => p.key as string | number);
  const path = formatPath(keys);
  const last = items[items.length - 1] as { origin?: string } | undefined;

  if (issue.type === 'raw_check') return { path, message: issue.message };
  if (last?.origin === 'key') {
    // A required key that is absent (valibot reports it on the key, with nothing as the input).
    if (issue.input === undefined && issue.received === 'undefined') return { path, message: 'is required' };
    if (issue.expected === 'never') {
      const key = String(keys[keys.length - 1]);
      const near = closest(key, objectKeysAt(keys.slice(0, -1)));
      return { path, message: `unknown key "${key}"${near === null ? '' : `; did you mean "${near}"?`}` };
    }
    const keySchema = recordKeySchemaAt(keys.slice(0, -1));
    const expected = keySchema ? describeExpected(keySchema) : (issue.expected ?? 'a valid key');
    return { path, message: `invalid key: expected ${expected}, received ${show(issue.input)}` };
  }
  const schema = schemaAtPath(keys);
  const expected = schema ? describeExpected(schema) : (issue.expected ?? 'a valid value');
  return { path, message: `expected ${expected}, received ${show(issue.input)}` };
}

/** The known key nearest to a misspelt one (edit distance at most 2, and less than half its length), or null. */
export function closest(key: string, known: readonly string[]): string | null {
  let best: string | null = null;
  let bestDistance = Math.min(2, Math.floor((key.length - 1) / 2));
  for (const k of known) {
    const d = editDistance(key.toLowerCase(), k.toLowerCase());
    if (d <= bestDistance && (best === null || d < editDistance(key.toLowerCase(), best.toLowerCase()))) {
      best = k;
      bestDistance = d;
    }
  }
  return best;
}

/** Levenshtein distance, with an adjacent swap counting as one edit (a common typo). */
function editDistance(a: string, b: string): number {
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) => [i, ...new Array<number>(b.length).fill(0)]);
  for (let j = 1; j <= b.length; j++) d[0][j] = j;
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      d[i][j] = Math.min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d[i][j] = Math.min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.length][b.length];
}

/** `['pipeline', 'request', 1]` → `pipeline.request[1]`. */
export function formatPath(keys: readonly (string | number)[]): string {
  let out = '';
  for (const key of keys) {
    if (typeof key === 'number') out += `[${key}]`;
    else out += out === '' ? key : `.${key}`;
  }
  return out;
}

function show(value: unknown): string {
  if (value === undefined) return 'nothing';
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (value instanceof Date) return 'a date';
  if (typeof value === 'object') return 'an object';
  if (typeof value === 'string') return JSON.stringify(value.length > 60 ? `${value.slice(0, 57)}...` : value);
  return String(value);
}
