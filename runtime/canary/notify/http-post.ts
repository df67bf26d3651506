// One JSON POST with a deadline, through node:http (fetch refuses some ports and would hide the
// socket errors we log). Resolves with the status, never rejects: a network failure is an Outcome.
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { httpOutcome, type Outcome } from './outcome.ts';

export function postJson(url: string, body: string, headers: Record<string, string>, timeoutMs: number): Promise<Outcome> {
  return new Promise((resolve) => {
    let u: URL;
    try {
      u = new URL(url);
    } catch {
      resolve({ ok: false, retry: false, error: `invalid URL ${url}` });
      return;
    }
    const send = u.protocol === 'https:' ? httpsRequest : httpRequest;
    const req = send(u, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)), ...headers },
    }, (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (d: Buffer) => {
        // Only the start of an error body is logged; do not hold a large answer.
        if (size < 4096) chunks.push(d);
        size += d.length;
      });
      res.on('end', () => {
        const retryAfter = res.headers['retry-after'];
        resolve(httpOutcome(res.statusCode ?? 0, Buffer.concat(chunks).toString('utf8').trim(), Array.isArray(retryAfter) ? retryAfter[0] : retryAfter));
      });
      res.on('error', (err) => resolve({ ok: false, retry: true, error: err.message }));
    });
    req.setTimeout(timeoutMs, () => req.destroy(new Error(`no answer within ${timeoutMs} ms`)));
    req.on('error', (err: NodeJS.ErrnoException) => resolve({ ok: false, retry: true, error: err.code ? `${err.code}: ${err.message}` : err.message }));
    req.end(body);
  });
}
