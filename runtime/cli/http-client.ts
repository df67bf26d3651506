// The one HTTP client of the CLI commands that talk to a running proxy (`proxy logs`, `proxy
// profile`, `proxy canary`). node:http and node:https rather than fetch: fetch refuses the Fetch
// standard's "bad ports" (6000, 6665–6669, 10080, …) whatever the server, and an admin, profiling
// or control-plane port may be one of them. Each command turns the errors into its own messages and
// exit codes; this module only moves bytes.
import { request, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';

/** How long a request may go without a byte from the server (connecting included). */
export const REQUEST_TIMEOUT_MS = 15_000;

export interface RequestOptions {
  method?: string;
  headers?: Record<string, string>;
  body?: string;
  /** Socket idle time before the request fails with code ETIMEDOUT (default REQUEST_TIMEOUT_MS). */
  timeoutMs?: number;
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

/** The whole answer, whatever its status (the caller reads error bodies too). */
export async function httpRequest(url: URL, opts: RequestOptions = {}): Promise<HttpAnswer> {
  const res = await openRequest(url, opts);
  const chunks: Buffer[] = [];
  for await (const chunk of res) chunks.push(chunk as Buffer);
  return { status: res.statusCode ?? 0, type: String(res.headers['content-type'] ?? ''), body: Buffer.concat(chunks).toString('utf8') };
}
