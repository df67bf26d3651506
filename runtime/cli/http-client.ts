// The one HTTP client of the CLI commands that talk to a running proxy (`proxy logs`, `proxy
// profile`, `proxy canary`). node:http and node:https rather than fetch: fetch refuses the Fetch
// standard's "bad ports" (6000, 6665–6669, 10080, …) whatever the server, and an admin, profiling
// or control-plane port may be one of them. Each command turns the errors into its own messages and
// exit codes; this module only moves bytes.
import { request, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';

/** How long a request may go without a byte from the server (connecting included). */
export const REQUEST_TIMEOUT_MS = 15_000;

/**
 * The most a whole answer may take, first byte to last (a server that trickles a byte every few
 * seconds never trips the idle timeout). Far above any real answer of the proxy's APIs.
 */
export const TOTAL_TIMEOUT_MS = 120_000;

/** The most of an answer body the CLI reads (64 MiB): far above any real answer; a server that streams forever stops here. */
export const MAX_ANSWER_BYTES = 64 * 1024 * 1024;

/** `64 MiB`: MAX_ANSWER_BYTES as the messages and docs say it. */
export const MAX_ANSWER_TEXT = `${MAX_ANSWER_BYTES / 1024 / 1024} MiB`;

/** Code of the error when an answer (or, for a stream, one line of it) passes MAX_ANSWER_BYTES. */
export const ANSWER_TOO_LARGE = 'EANSWERTOOLARGE';

/** The error of an answer past MAX_ANSWER_BYTES: names the URL; code ANSWER_TOO_LARGE. */
export function answerTooLarge(url: URL | string, what = 'answer'): NodeJS.ErrnoException {
  const u = typeof url === 'string' ? url : `${url.origin}${url.pathname}`;
  return Object.assign(new Error(`the ${what} from ${u} is larger than ${MAX_ANSWER_TEXT}: stopped reading it`), { code: ANSWER_TOO_LARGE });
}

export interface RequestOptions {
  method?: string;
  headers?: Record<string, string>;
  body?: string;
  /** Socket idle time before the request fails with code ETIMEDOUT (default REQUEST_TIMEOUT_MS). */
  timeoutMs?: number;
  /** Whole-answer time before httpRequest fails with code ETIMEDOUT and `total: true` (default TOTAL_TIMEOUT_MS). */
  totalTimeoutMs?: number;
  signal?: AbortSignal;
}

/** A whole answer: status, Content-Type and the body as text. */
export interface HttpAnswer {
  status: number;
  type: string;
  body: string;
}

/**
 * Sends the request and resolves once the answer's headers are in; its body is then read from the
 * returned stream. With `stream`, the idle timeout stops at the headers (a followed log may be
 * quiet for hours); without, it covers the body as well. Connection errors reject with the
 * system's code (ECONNREFUSED, ENOTFOUND, …), a timeout with code ETIMEDOUT, an abort with the
 * signal's AbortError.
 */
export function openRequest(url: URL, opts: RequestOptions = {}, stream = false): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    const send = url.protocol === 'https:' ? httpsRequest : request;
    const req = send(url, { method: opts.method ?? 'GET', headers: opts.headers, signal: opts.signal }, (res) => {
      if (stream) req.setTimeout(0);
      resolve(res);
    });
    req.setTimeout(opts.timeoutMs ?? REQUEST_TIMEOUT_MS, () => req.destroy(Object.assign(new Error('timed out'), { code: 'ETIMEDOUT' })));
    req.on('error', reject);
    req.end(opts.body);
  });
}

/**
 * The whole answer, whatever its status (the caller reads error bodies too). A body past
 * MAX_ANSWER_BYTES closes the connection and rejects with code ANSWER_TOO_LARGE; an answer not
 * complete within `totalTimeoutMs` rejects with code ETIMEDOUT and `total: true`.
 */
export async function httpRequest(url: URL, opts: RequestOptions = {}): Promise<HttpAnswer> {
  const totalMs = opts.totalTimeoutMs ?? TOTAL_TIMEOUT_MS;
  const deadline = new AbortController();
  const timer = setTimeout(() => deadline.abort(), totalMs);
  const signal = opts.signal === undefined ? deadline.signal : AbortSignal.any([opts.signal, deadline.signal]);
  const timedOut = () => Object.assign(new Error(`did not finish its answer within ${totalMs / 1000} s`), { code: 'ETIMEDOUT', total: true });
  try {
    let res: IncomingMessage;
    try {
      res = await openRequest(url, { ...opts, signal });
    } catch (err) {
      throw deadline.signal.aborted && opts.signal?.aborted !== true ? timedOut() : err;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    try {
      for await (const chunk of res) {
        size += (chunk as Buffer).length;
        if (size > MAX_ANSWER_BYTES) {
          res.destroy();
          throw answerTooLarge(url);
        }
        chunks.push(chunk as Buffer);
      }
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === ANSWER_TOO_LARGE) throw err;
      throw deadline.signal.aborted && opts.signal?.aborted !== true ? timedOut() : err;
    }
    return { status: res.statusCode ?? 0, type: String(res.headers['content-type'] ?? ''), body: Buffer.concat(chunks).toString('utf8') };
  } finally {
    clearTimeout(timer);
  }
}
