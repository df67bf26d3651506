// The HTTP client of `proxy canary`: the control-plane API of docs/canary.md (SPEC §4.2), with a
// bearer token, and the errors the command reports (its exit codes are documented in docs/cli.md).
import { ANSWER_TOO_LARGE, httpRequest, REQUEST_TIMEOUT_MS, TOTAL_TIMEOUT_MS, type HttpAnswer } from './http-client.ts';
import { ERRORS, isErrorCode, type ProxyErrorCode } from '../errors/catalogue.ts';

/** Exit codes of `proxy canary` (docs/cli.md); those of the command's own codes are the catalogue's. */
export const EXIT = {
  ok: 0,
  /** The control plane refused the request (4xx other than 401/404) or failed (5xx). */
  refused: 1,
  /** Bad usage: an unknown or missing option, an unreadable or invalid file. */
  usage: ERRORS.PROXY_ERR_CANARY_CLI_USAGE.exit,
  /** No such canary, or no canary on the pipeline. */
  notFound: ERRORS.PROXY_ERR_CANARY_NOT_FOUND.exit,
  /** Missing or wrong token (401). */
  unauthorized: 4,
  /** The control plane did not answer (refused connection, timeout). */
  unreachable: ERRORS.PROXY_ERR_CANARY_CLI_UNREACHABLE.exit,
} as const;

/** A code of the catalogue (the control plane's, or the command's own), or `HTTP_<status>` for an answer without one. */
export type CanaryCliCode = ProxyErrorCode | `HTTP_${number}`;

export class CanaryCliError extends Error {
  readonly code: CanaryCliCode;
  readonly exitCode: number;
  readonly status: number | null;
  constructor(code: CanaryCliCode, message: string, exitCode: number, status: number | null = null) {
    super(message);
    this.name = 'CanaryCliError';
    this.code = code;
    this.exitCode = exitCode;
    this.status = status;
  }
}

export const usage = (message: string): never => { throw new CanaryCliError('PROXY_ERR_CANARY_CLI_USAGE', message, EXIT.usage); };

/**
 * How long the client waits for the first byte of an answer: a read, REQUEST_TIMEOUT_MS; a change
 * (create, promote, rollback, …), as long as a whole answer may take. A change is answered once every
 * worker, and on a fleet every other instance, has applied or checked it, which on a loaded machine
 * takes longer than a read ever should; giving up early would report a failure for a change that
 * then happens.
 */
export interface CanaryClientTimeouts { readMs: number; changeMs: number }
const TIMEOUTS: CanaryClientTimeouts = { readMs: REQUEST_TIMEOUT_MS, changeMs: TOTAL_TIMEOUT_MS };

export class CanaryClient {
  readonly url: string;
  private readonly token: string | null;
  private readonly timeouts: CanaryClientTimeouts;

  constructor(url: string, token: string | null, timeouts: CanaryClientTimeouts = TIMEOUTS) {
    this.url = url;
    this.token = token;
    this.timeouts = timeouts;
  }

  /** The body of a 2xx answer as text; any other answer becomes a CanaryCliError with the API's code and message. */
  async text(method: string, path: string, body?: unknown, query: Record<string, string> = {}): Promise<string> {
    const u = new URL(this.url + path);
    for (const [k, v] of Object.entries(query)) u.searchParams.set(k, v);
    const headers: Record<string, string> = { accept: 'application/json' };
    if (this.token !== null) headers.authorization = `Bearer ${this.token}`;
    let payload: string | undefined;
    if (body !== undefined) {
      payload = JSON.stringify(body);
      headers['content-type'] = 'application/json';
      headers['content-length'] = String(Buffer.byteLength(payload));
    }
    const change = method !== 'GET';
    const timeoutMs = change ? this.timeouts.changeMs : this.timeouts.readMs;
    // The whole answer's limit stays above the first byte's, so a silent server reports the first.
    const totalMs = timeoutMs >= TOTAL_TIMEOUT_MS ? timeoutMs + 1000 : TOTAL_TIMEOUT_MS;
    let res: HttpAnswer;
    try {
      res = await httpRequest(u, { method, headers, body: payload, timeoutMs, totalTimeoutMs: totalMs });
    } catch (err) {
      const e = err as NodeJS.ErrnoException & { total?: boolean };
      const code = e.code;
      if (code === ANSWER_TOO_LARGE) throw new CanaryCliError('PROXY_ERR_CANARY_CLI_DATA', e.message, ERRORS.PROXY_ERR_CANARY_CLI_DATA.exit);
      if (code === 'ETIMEDOUT' && change) {
        const what = e.total === true ? 'finish its answer to' : 'answer';
        throw new CanaryCliError('PROXY_ERR_CANARY_CLI_UNREACHABLE', `the control plane at ${this.url} did not ${what} the ${method} within ` +
          `${(e.total === true ? totalMs : timeoutMs) / 1000} s; it may still apply the change: check with ` +
          `\`${path.startsWith('/api/v1/fleet') ? 'proxy fleet' : 'proxy canary list'}\` before sending it again`, EXIT.unreachable);
      }
      const why = code !== 'ETIMEDOUT' ? `is not reachable${code ? ` (${code})` : ''}` : e.total === true ? e.message :
        `did not answer within ${timeoutMs / 1000} s`;
      throw new CanaryCliError('PROXY_ERR_CANARY_CLI_UNREACHABLE', `the control plane at ${this.url} ${why}; is control_plane configured? (--url ` +
        `or PROXY_CONTROL_URL)`, EXIT.unreachable);
    }
    if (res.status >= 200 && res.status < 300) return res.body;
    let error: { code?: string; message?: string; details?: unknown } = {};
    try { error = (JSON.parse(res.body) as { error?: typeof error }).error ?? {}; } catch { /* not the control plane's error body */ }
    const code: CanaryCliCode = isErrorCode(error.code) ? error.code : `HTTP_${res.status}`;
    let message = error.message ?? (res.body.slice(0, 200) || `HTTP ${res.status}`);
    if (res.status === 401) {
      if (this.token === null) message += ' (no token given: --token or PROXY_CONTROL_TOKEN)';
      throw new CanaryCliError(code, message, EXIT.unauthorized, 401);
    }
    const details = detailText(error.details);
    if (details !== '') message += `\n${details}`;
    throw new CanaryCliError(code, message, res.status === 404 ? EXIT.notFound : EXIT.refused, res.status);
  }

  async json<T>(method: string, path: string, body?: unknown, query: Record<string, string> = {}): Promise<T> {
    const text = await this.text(method, path, body, query);
    try {
      return JSON.parse(text) as T;
    } catch {
      throw new CanaryCliError('PROXY_ERR_CANARY_CLI_DATA', `${method} ${path} at ${this.url} did not answer JSON`, ERRORS.PROXY_ERR_CANARY_CLI_DATA.exit);
    }
  }
}

/** The unmet conditions of a refused promote, or other details, one per line. */
function detailText(details: unknown): string {
  if (details === undefined || details === null) return '';
  const d = details as { conditions?: Array<{ condition: string; value: unknown; threshold: unknown; met: boolean }> };
  if (Array.isArray(d.conditions)) {
    return d.conditions.map((c) => `  ${c.met ? 'met  ' : 'unmet'} ${c.condition}: ${String(c.value)} (needs ${String(c.threshold)})`).join('\n');
  }
  return `  ${JSON.stringify(details)}`;
}
