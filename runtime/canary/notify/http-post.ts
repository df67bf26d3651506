// One JSON POST with a deadline, through node:http (fetch refuses some ports and would hide the
// socket errors we log). Resolves with the status, never rejects: a network failure is an Outcome.
// `timeoutMs` bounds the whole exchange, the answer's body included: an idle timeout alone let a
// receiver that sent its headers and then trickled a byte now and then hold the call forever (a
// gate held the canary's evaluations with it, so no rollback rule ran).
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { lookup as dnsLookup, type LookupAddress, type LookupOptions } from 'node:dns';
import { refusedAddress, refusedUrl } from '../../config/index.ts';
import { httpOutcome, type Outcome } from './outcome.ts';

/** The code of a delivery refused because its host is, or resolves to, a link-local or unspecified address. */
export const URL_REFUSED = 'PROXY_ERR_CANARY_URL_REFUSED';

type LookupCallback = (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

/**
 * dns.lookup for a socket (an HTTP request's, an SMTP session's), refusing a name that resolves to
 * a link-local or unspecified address (checked where the URL or host is given only when it is an
 * address literal): the connection fails with `code` (URL_REFUSED; SMTP_HOST_REFUSED for an SMTP
 * session) and nothing is sent.
 */
export function guardedLookup(resolver: typeof dnsLookup, code: string = URL_REFUSED) {
  return (hostname: string, options: LookupOptions, callback: LookupCallback): void => resolver(hostname, { ...options, all: true },
    (err, addresses) => {
      if (err !== null) { callback(err, []); return; }
      for (const a of addresses) {
        const why = refusedAddress(a.address);
        if (why !== null) {
          callback(Object.assign(new Error(`${hostname} resolves to ${a.address}, ${why}: not called`), { code }), []);
          return;
        }
      }
      if (options.all === true) callback(null, addresses);
      else callback(null, addresses[0].address, addresses[0].family);
    });
}

/** `resolver`: how host names are resolved (dns.lookup; tests give names of their own). */
export function postJson(url: string, body: string, headers: Record<string, string>, timeoutMs: number,
  resolver: typeof dnsLookup = dnsLookup): Promise<Outcome> {
  return new Promise((resolveOnce) => {
    let timer: NodeJS.Timeout | null = null;
    let settled = false;
    const resolve = (o: Outcome) => {
      if (settled) return;
      settled = true;
      if (timer !== null) clearTimeout(timer);
      resolveOnce(o);
    };
    let u: URL;
    try {
      u = new URL(url);
    } catch {
      resolve({ ok: false, retry: false, error: `invalid URL ${url}` });
      return;
    }
    const refused = refusedUrl(url);
    if (refused !== null) {
      resolve({ ok: false, retry: false, error: `${URL_REFUSED}: ${refused}` });
      return;
    }
    const send = u.protocol === 'https:' ? httpsRequest : httpRequest;
    const req = send(u, {
      method: 'POST',
      lookup: guardedLookup(resolver),
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
      // Closed before its end (the connection lost mid-body): a failed attempt, never a hang.
      res.on('close', () => resolve({ ok: false, retry: true, error: 'the connection closed before the answer ended' }));
    });
    timer = setTimeout(() => {
      const err = new Error(`no answer within ${timeoutMs} ms`);
      resolve({ ok: false, retry: true, error: err.message });
      req.destroy(err);
    }, timeoutMs);
    // A name resolving to a refused address is retried like any network failure (its records may change).
    req.on('error', (err: NodeJS.ErrnoException) => resolve({ ok: false, retry: true, error: err.code ? `${err.code}: ${err.message}` : err.message }));
    req.end(body);
  });
}
