// Parsing of `upstream.uri` (mongodb://host:port[/db][?options]). A single host is proxied; a list
// uses the first reachable host in order (the proxy fronts one server or one mongos per URI).
import { ProxyError, ErrorCodes } from '../errors/index.ts';
import type { Credentials, ScramMechanism } from './scram.ts';

export interface UpstreamAddress {
  readonly uri: string;
  readonly hosts: readonly { host: string; port: number }[];
  readonly username: string | null;
  /** Set when the URI carries a user: the proxy authenticates every upstream connection. */
  readonly credentials: Credentials | null;
}

const MECHANISMS: readonly ScramMechanism[] = ['SCRAM-SHA-256', 'SCRAM-SHA-1'];

export function parseUpstreamUri(uri: string): UpstreamAddress {
  const m = /^mongodb:\/\/(?:([^@/]*)@)?([^/?]+)(\/[^?]*)?(\?.*)?$/.exec(uri);
  if (m === null) {
    throw new ProxyError(ErrorCodes.BadValue, `upstream.uri "${uri}" is not a mongodb:// URI (mongodb+srv is not supported)`);
  }
  const hosts = m[2].split(',').map((h) => {
    const hm = /^(\[[^\]]+\]|[^:]+)(?::(\d+))?$/.exec(h);
    if (hm === null) throw new ProxyError(ErrorCodes.BadValue, `upstream.uri host "${h}" is not host[:port]`);
    const port = hm[2] === undefined ? 27017 : Number(hm[2]);
    if (!(port > 0 && port < 65536)) throw new ProxyError(ErrorCodes.BadValue, `upstream.uri port ${hm[2]} is out of range`);
    return { host: hm[1].replace(/^\[|\]$/g, ''), port };
  });
  let username: string | null = null;
  let credentials: Credentials | null = null;
  if (m[1]) {
    const colon = m[1].indexOf(':');
    username = decodeURIComponent(colon < 0 ? m[1] : m[1].slice(0, colon));
    const password = colon < 0 ? '' : decodeURIComponent(m[1].slice(colon + 1));
    const params = new URLSearchParams((m[4] ?? '').slice(1));
    const pathDb = (m[3] ?? '').slice(1);
    const mechanism = (params.get('authMechanism') ?? 'SCRAM-SHA-256') as ScramMechanism;
    if (!MECHANISMS.includes(mechanism)) {
      throw new ProxyError(ErrorCodes.BadValue, `upstream.uri authMechanism "${mechanism}" is not supported (use ${MECHANISMS.join(' or ')})`);
    }
    credentials = { username, password, source: params.get('authSource') ?? (pathDb || 'admin'), mechanism };
  }
  return { uri, hosts, username, credentials };
}
