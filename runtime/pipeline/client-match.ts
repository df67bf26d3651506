// Who a request comes from, matched against a selection of clients: the client's appName (a glob),
// the user its connection authenticated as, its address (CIDR). Built once from its settings;
// match() reads only the connection's facts, never the request, and is cached per connection by its
// callers where it runs per request.
// Globs and CIDR blocks mean what they mean in a pipeline's `match` (config `pipelines`): one
// implementation, runtime/config/pipeline-match.ts.
import { isIPv4 } from 'node:net';
import { compileCidrs, compileGlob, globRegExp, parseCidr as parseBlock, type Cidr, type StringTest } from '../config/index.ts';
import type { ConnectionInfo } from './exchange.ts';

export { globRegExp };

/** The settings (API and configuration key names): each key is one value or a list (any of them). */
export interface ClientMatchSpec {
  app_name?: string | string[];
  user?: string | string[];
  client?: string | string[];
}

const list = (x: string | string[] | undefined): string[] | null => (x === undefined ? null : Array.isArray(x) ? x : [x]);

/** `10.0.0.0/8`, `::1/128`, or a bare address (one host); throws a message naming the value. */
export function parseCidr(cidr: string): { address: string; prefix: number; family: 'ipv4' | 'ipv6' } {
  const block = parseBlock(cidr);
  if (typeof block === 'string') throw new Error(block);
  const slash = cidr.indexOf('/');
  return { address: slash < 0 ? cidr : cidr.slice(0, slash), prefix: block.prefix, family: block.family === 4 ? 'ipv4' : 'ipv6' };
}

/** The host part of a connection's `host:port` (IPv6 hosts have colons; an IPv4-mapped IPv6 host is its IPv4 address). */
export function hostOf(clientAddress: string): string {
  const colon = clientAddress.lastIndexOf(':');
  let host = colon < 0 ? clientAddress : clientAddress.slice(0, colon);
  if (host.startsWith('[') && host.endsWith(']')) host = host.slice(1, -1);
  if (host.startsWith('::ffff:') && isIPv4(host.slice(7))) host = host.slice(7);
  return host;
}

export class ClientMatch {
  readonly spec: ClientMatchSpec;
  private readonly apps: StringTest[] | null;
  private readonly users: ReadonlySet<string> | null;
  private readonly clients: StringTest | null;

  /** Throws an Error whose message names the bad key (`app_name`, `user`, `client`). */
  constructor(spec: ClientMatchSpec) {
    this.spec = spec;
    const apps = list(spec.app_name);
    const users = list(spec.user);
    const clients = list(spec.client);
    if (apps === null && users === null && clients === null) throw new Error('match: give at least one of app_name, user, client');
    for (const [key, values] of [['app_name', apps], ['user', users], ['client', clients]] as const) {
      if (values === null) continue;
      if (values.length === 0) throw new Error(`match.${key}: an empty list matches nothing`);
      for (const x of values) if (typeof x !== 'string' || x === '') throw new Error(`match.${key}: expected a non-empty string or a list of them`);
    }
    this.apps = apps === null ? null : apps.map(compileGlob);
    this.users = users === null ? null : new Set(users);
    if (clients === null) this.clients = null;
    else {
      const blocks: Cidr[] = [];
      for (const c of clients) {
        const block = parseBlock(c);
        if (typeof block === 'string') throw new Error(`match.client: ${block}`);
        blocks.push(block);
      }
      this.clients = compileCidrs(blocks);
    }
  }

  /** Every key given holds (one of its values): appName glob, user, client address. */
  matches(conn: ConnectionInfo): boolean {
    if (this.apps !== null && !this.apps.some((t) => t(conn.appName))) return false;
    if (this.users !== null && !this.users.has(conn.user)) return false;
    if (this.clients !== null && !this.clients(hostOf(conn.clientAddress))) return false;
    return true;
  }
}
