// The one parser of the addresses the proxy listens on: `listen` and `admin.listen` ("host:port"),
// `profiling.host` and `control_plane.host` (a host alone). The schema validates with it, so a bad
// address is refused at load with its key path before any port opens, and the listeners and the
// URLs they print use its output: an IPv6 host is written `[::1]:9090` in an address and in a URL,
// and handed to `listen()` bare (`::1`), which is what Node's resolver accepts.
import { BlockList, isIPv4, isIPv6 } from 'node:net';
import { getSystemErrorMap } from 'node:util';
import * as v from 'valibot';
import { expects } from './expects.ts';

export interface HostPort {
  /** Without brackets: `127.0.0.1`, `::1`, `localhost`. */
  host: string;
  port: number;
}

/**
 * A host name: dot-separated labels of letters, digits and inner hyphens (RFC 1123), at most 253
 * characters; `_` is allowed too, as container runtimes' DNS names (compose services) use it.
 */
const HOST_NAME = /^(?=.{1,253}$)[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?(?:\.[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?)*\.?$/;

/** A host alone (`127.0.0.1`, `::1`, `[::1]`, `localhost`) → the host without brackets, or why not. */
export function parseHost(text: string): string | { problem: string } {
  if (text.startsWith('[') || text.endsWith(']')) {
    const inner = text.startsWith('[') && text.endsWith(']') ? text.slice(1, -1) : null;
    if (inner === null || !isIPv6(inner)) return { problem: `"${text}" is not a bracketed IPv6 address` };
    return inner;
  }
  if (text.includes(':')) return isIPv6(text) ? text : { problem: `"${text}" is not an IPv6 address` };
  if (/^[\d.]+$/.test(text)) return isIPv4(text) ? text : { problem: `"${text}" is not an IPv4 address` };
  if (!HOST_NAME.test(text)) return { problem: `"${text}" is not a host name or IP address` };
  return text;
}

/** `host:port`, `[v6]:port` → host (without brackets) and port 0..65535, or why not. */
export function parseHostPort(text: string): HostPort | { problem: string } {
  const i = text.lastIndexOf(':');
  if (i < 0) return { problem: `"${text}" has no port (write host:port, e.g. 127.0.0.1:9090)` };
  const hostText = text.slice(0, i);
  const portText = text.slice(i + 1);
  if (hostText === '') return { problem: `"${text}" has no host (write host:port, e.g. 127.0.0.1:9090)` };
  if (hostText.includes(':') && !hostText.startsWith('[')) {
    return { problem: `"${text}": an IPv6 host goes in brackets, e.g. [::1]:9090` };
  }
  if (!/^\d{1,5}$/.test(portText) || Number(portText) > 65535) return { problem: `"${text}": the port must be an integer 0..65535` };
  const host = parseHost(hostText);
  if (typeof host !== 'string') return host;
  return { host, port: Number(portText) };
}

/** Like parseHostPort, for addresses the schema has already accepted: throws on a bad one. */
export function hostPort(text: string): HostPort {
  const a = parseHostPort(text);
  if ('problem' in a) throw new TypeError(`not a host:port address: ${a.problem}`);
  return a;
}

/** `::1` → `[::1]`, anything else as it is: the host as written before `:port` or in a URL. */
export function bracketHost(host: string): string {
  return host.includes(':') ? `[${host}]` : host;
}

/** `host:port` with an IPv6 host bracketed. */
export function formatHostPort(host: string, port: number): string {
  return `${bracketHost(host)}:${port}`;
}

/**
 * A system error's reason without the address Node appends to its message (`connect ECONNREFUSED
 * ::1:27017` writes an IPv6 address bare): `connection refused (ECONNREFUSED)`. Any other error: its
 * message.
 */
export function errorReason(err: Error): string {
  const e = err as NodeJS.ErrnoException;
  const reason = typeof e.errno === 'number' && typeof e.code === 'string' ? getSystemErrorMap().get(e.errno)?.[1] : undefined;
  return reason === undefined ? err.message : `${reason} (${e.code})`;
}

/** Why listening on host:port failed, the address bracketed: `cannot listen on [::1]:9090: address already in use (EADDRINUSE)`. */
export function listenFailure(host: string, port: number, err: Error): string {
  return `cannot listen on ${formatHostPort(host, port)}: ${errorReason(err)}`;
}

/** `http://host:port` with an IPv6 host bracketed (a zone index escaped, as URLs need). */
export function httpUrl(host: string, port: number): string {
  return `http://${bracketHost(host.replace('%', '%25'))}:${port}`;
}

/** The schema for a "host:port" key: refused with the parser's reason. */
export function hostPortSchema(description: string) {
  return expects(
    v.pipe(
      v.string(),
      v.rawCheck(({ dataset, addIssue }) => {
        if (!dataset.typed) return;
        const a = parseHostPort(dataset.value);
        if ('problem' in a) addIssue({ message: a.problem });
      }),
      v.description(description),
    ),
    'string "host:port" or "[ipv6]:port", port 0..65535',
  );
}

/** The schema for a host key (an address to bind): refused with the parser's reason. */
export function hostSchema(description: string) {
  return expects(
    v.pipe(
      v.string(),
      v.rawCheck(({ dataset, addIssue }) => {
        if (!dataset.typed) return;
        const h = parseHost(dataset.value);
        if (typeof h !== 'string') addIssue({ message: h.problem });
      }),
      v.description(description),
    ),
    'string: a host name, IPv4 or IPv6 address',
  );
}

// Addresses the canary never calls (notification webhooks and pagers, promotion gates): the
// link-local ranges (169.254.0.0/16 holds the cloud metadata service, 169.254.169.254) and the
// unspecified address (0.0.0.0/8 and ::, which connect to this host). IPv4-mapped IPv6 forms
// (::ffff:169.254.169.254) match the IPv4 rules. Loopback and private ranges stay allowed.
const LINK_LOCAL = new BlockList();
LINK_LOCAL.addSubnet('169.254.0.0', 16, 'ipv4');
LINK_LOCAL.addSubnet('fe80::', 10, 'ipv6');
const UNSPECIFIED = new BlockList();
UNSPECIFIED.addSubnet('0.0.0.0', 8, 'ipv4');
UNSPECIFIED.addAddress('::', 'ipv6');

/**
 * Why a canary must not call `host` (an IP address, bracketed or not): "a link-local address" or
 * "the unspecified address"; null for any other address and for a host name.
 */
export function refusedAddress(host: string): string | null {
  const h = host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host;
  const family = isIPv4(h) ? 'ipv4' : isIPv6(h) ? 'ipv6' : null;
  if (family === null) return null;
  if (UNSPECIFIED.check(h, family)) return 'the unspecified address';
  return LINK_LOCAL.check(h, family) ? 'a link-local address' : null;
}

/**
 * The problem with calling `host` (a host name or address, as a URL or the SMTP settings give it)
 * when it is a refused address in any spelling a URL accepts (`2852039166`, `0xa9.254.169.254`,
 * `::ffff:169.254.169.254`); else null. A host name is checked where it is resolved.
 */
export function refusedHost(host: string): string | null {
  let h = host;
  try {
    // The WHATWG URL parser writes every IPv4 spelling as a dotted quad and IPv6 in its short form;
    // taken only when the whole text is the URL's host (not `user@host`, `host/path`, `host:port`).
    const u = new URL(`http://${isIPv6(host) ? `[${host}]` : host}/`);
    if (u.username === '' && u.password === '' && u.port === '' && u.pathname === '/' && u.search === '' && u.hash === '') h = u.hostname;
  } catch { /* not a URL host: checked as written */ }
  const why = refusedAddress(h);
  return why === null ? null : `${h} is ${why}: the canary never calls link-local (169.254.0.0/16, fe80::/10) or unspecified (0.0.0.0/8, ::) ` +
    'addresses';
}

/** The problem with an http(s) URL the canary calls, when its host is a refused address literal; else null. */
export function refusedUrl(url: string): string | null {
  let host: string;
  try { host = new URL(url).hostname; } catch { return null; }
  return refusedHost(host);
}

/** A valibot check of a text with `refused` (refusedUrl, refusedHost): refused with its problem (a raw check, so the message is kept). */
function notRefused(refused: (text: string) => string | null) {
  return v.rawCheck<string>(({ dataset, addIssue }) => {
    const problem = dataset.typed ? refused(dataset.value) : null;
    if (problem !== null) addIssue({ message: problem });
  });
}

/** A valibot check of a URL the canary calls. */
export const notRefusedUrl = notRefused(refusedUrl);
/** A valibot check of a host the canary calls (notifications.smtp.host). */
export const notRefusedHost = notRefused(refusedHost);
