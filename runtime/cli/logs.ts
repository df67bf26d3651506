// `proxy logs`: the running proxy's recent log lines (the ring behind GET /api/v1/logs on the admin
// port), then every new line as it is written (Ctrl-C stops). --filter keeps lines containing a
// text (case-insensitive), --level the lines at a level or above, --tail how many recent lines to
// show first, --worker one worker's lines (a proxy with workers: the ring holds every process's).
// Readable for people (time LEVEL logger message fields), --json prints the JSON lines.
import type { IncomingMessage } from 'node:http';
import type { CAC } from 'cac';
import { loadConfig } from '../config/index.ts';
import { prettyLine, isLogLevel, LOG_LEVELS } from '../log/index.ts';
import { digitsOption, httpBaseUrl } from './argv.ts';
import { answerTooLarge, MAX_ANSWER_BYTES, openRequest, REQUEST_TIMEOUT_MS } from './http-client.ts';

interface LogsOptions {
  url?: unknown;
  token?: unknown;
  config?: unknown;
  filter?: unknown;
  level?: unknown;
  tail?: unknown;
  worker?: unknown;
  json?: boolean;
  follow?: boolean;
}

export class LogsError extends Error {
  /** 2 for what the user can fix (usage, an unreachable proxy, a refused token), 1 for an answer the command cannot take. */
  readonly exitCode: number;
  constructor(message: string, exitCode = 2) {
    super(message);
    this.exitCode = exitCode;
  }
}

async function endpoint(opts: LogsOptions): Promise<{ url: string; token: string | null }> {
  let url = typeof opts.url === 'string' ? opts.url : process.env.PROXY_ADMIN_URL;
  let what = typeof opts.url === 'string' ? '--url' : '$PROXY_ADMIN_URL';
  let token = typeof opts.token === 'string' ? opts.token : process.env.PROXY_ADMIN_TOKEN ?? null;
  if (typeof opts.config === 'string') {
    const { config } = await loadConfig({ file: opts.config });
    if (config.admin?.listen === undefined) throw new LogsError(`${opts.config} has no admin.listen: the proxy serves its logs on the admin port`);
    if (url === undefined) [url, what] = [`http://${config.admin.listen}`, `admin.listen of ${opts.config}`];
    token ??= config.admin.token ?? null;
  }
  if (url === undefined) throw new LogsError('which proxy? give --url http://<admin.listen> (or $PROXY_ADMIN_URL), or --config <the proxy\'s config file>');
  const base = httpBaseUrl(url, what);
  if ('problem' in base) throw new LogsError(base.problem);
  return { url: base.url, token };
}

/** Prints the lines through `out` until the proxy closes the stream or `signal` aborts (then it returns). */
export async function runLogs(opts: LogsOptions, out: (s: string) => void = (s) => process.stdout.write(s), signal?: AbortSignal): Promise<void> {
  const level = opts.level === undefined ? 'trace' : String(opts.level);
  if (!isLogLevel(level)) throw new LogsError(`--level must be one of ${LOG_LEVELS.join(', ')}`);
  // Digits only, as the API's `tail` and `worker`: cac would have taken "1e3" as 1000.
  const integer = (name: string, parsed: unknown): number | undefined => {
    const r = digitsOption(name, parsed);
    if ('problem' in r) throw new LogsError(r.problem);
    return r.value;
  };
  const tail = integer('tail', opts.tail) ?? 20;
  const worker = integer('worker', opts.worker);
  const { url, token } = await endpoint(opts);
  const q = new URLSearchParams({ tail: String(tail), level, follow: opts.follow === false ? 'false' : 'true' });
  if (opts.filter !== undefined) q.set('filter', String(opts.filter));
  if (worker !== undefined) q.set('worker', String(worker));
  const headers: Record<string, string> = {};
  if (token !== null) headers.authorization = `Bearer ${token}`;
  let res: IncomingMessage;
  try {
    res = await openRequest(new URL(`${url}/api/v1/logs?${q}`), { headers, signal }, true);
  } catch (err) {
    if (signal?.aborted === true) return;
    const e = err as NodeJS.ErrnoException;
    throw new LogsError(`cannot reach ${url}: ${e.code === 'ETIMEDOUT' ? `no answer within ${REQUEST_TIMEOUT_MS / 1000} s` : e.message}`);
  }
  const decoder = new TextDecoder();
  const status = res.statusCode ?? 0;
  if (status === 401) {
    res.resume();
    throw new LogsError(`token rejected by ${url} (--token, $PROXY_ADMIN_TOKEN or the config's admin.token)`);
  }
  if (status < 200 || status >= 300) {
    let body = '';
    let size = 0;
    for await (const chunk of res) {
      size += (chunk as Buffer).length;
      if (size > MAX_ANSWER_BYTES) {
        res.destroy();
        throw new LogsError(answerTooLarge(`${url}/api/v1/logs`, `${status} answer`).message, 1);
      }
      body += decoder.decode(chunk as Buffer, { stream: true });
    }
    let message = body;
    try {
      message = (JSON.parse(body) as { error: { message: string } }).error.message;
    } catch { /* not an error document */ }
    throw new LogsError(`${url}/api/v1/logs answered ${status}: ${message}`);
  }
  const print = (line: string) => out(opts.json === true ? `${line}\n` : prettyLine(line));
  let pending = '';
  try {
    for await (const chunk of res) {
      const text = decoder.decode(chunk as Buffer, { stream: true });
      // Look for a newline in the new text only: a long line is not scanned again per chunk.
      let nl = text.indexOf('\n');
      if (nl >= 0) nl += pending.length;
      pending += text;
      for (; nl >= 0; nl = pending.indexOf('\n')) {
        const line = pending.slice(0, nl);
        pending = pending.slice(nl + 1);
        if (line !== '') print(line);
      }
      if (pending.length > MAX_ANSWER_BYTES) {
        res.destroy();
        throw new LogsError(answerTooLarge(`${url}/api/v1/logs`, 'log line').message, 1);
      }
    }
  } catch (err) {
    if (err instanceof LogsError) throw err;
    if (signal?.aborted === true) return;
    throw new LogsError(`the log stream from ${url} broke off: ${(err as Error).message}`);
  }
  if (pending !== '') print(pending);
}

export function registerLogs(cli: CAC): void {
  cli.command('logs', 'Show the running proxy\'s recent log lines, then follow new ones (admin API)')
    .option('--url <url>', 'admin API of the proxy, http://<admin.listen> (default $PROXY_ADMIN_URL)')
    .option('--token <token>', 'admin bearer token (default $PROXY_ADMIN_TOKEN)')
    .option('--config <file>', 'read admin.listen and admin.token from the proxy\'s configuration file')
    .option('--filter <text>', 'only lines containing this text (case-insensitive)')
    .option('--level <level>', `only lines at this level or above: ${LOG_LEVELS.join(', ')}`)
    .option('--tail <n>', 'recent lines shown first (default 20)')
    .option('--worker <i>', 'a proxy with workers: only the lines worker i wrote (default: every process\'s)')
    .option('--json', 'print the JSON lines as they are (for machines)')
    // Declared as --follow (default true), not --no-follow: cac prints a negated option's implied
    // default, so "--no-follow … (default: true)" read as if not following were the default.
    // --no-follow still sets follow to false (the parser's no- prefix).
    .option('--follow', 'after the recent lines, follow new ones until Ctrl-C; --no-follow prints them and exits', { default: true })
    .action(async (opts: LogsOptions) => {
      try {
        await runLogs(opts);
      } catch (err) {
        if (err instanceof LogsError) {
          process.stderr.write(`proxy logs: ${err.message}\n`);
          process.exit(err.exitCode);
        }
        throw err;
      }
    });
}
