// Who a request comes from, matched against a selection of clients: the client's appName (a glob),
// the user its connection authenticated as, its address (CIDR). Built once from its settings;
// match() reads only the connection's facts, never the request, and is cached per connection by its
// callers where it runs per request.
import { BlockList, isIPv4, isIPv6 } from 'node:net';
import type { ConnectionInfo } from './exchange.ts';

/** The settings (API and configuration key names): each key is one value or a list (any of them). */
export interface ClientMatchSpec {
  app_name?: string | string[];
  user?: string | string[];
  client?: string | string[];
}

const list = (x: string | string[] | undefined): string[] | null => (x === undefined ? null : Array.isArray(x) ? x : [x]);

/** A glob where `*` is any run of characters and `?` one character; everything else is literal. */
export function globRegExp(glob: string): RegExp {
  let src = '';
  for (const ch of glob) src += ch === '*' ? '.*' : ch === '?' ? '.' : ch.replace(/[\\^$.|+()[\]{}]/g, '\\$&');
  return new RegExp(`^${src}$`, 's');
}

/** `10.0.0.0/8`, `::1/128`, or a bare address (one host); throws a message naming the value. */
export function parseCidr(cidr: string): { address: string; prefix: number; family: 'ipv4' | 'ipv6' } {
  const slash = cidr.indexOf('/');
  const address = slash < 0 ? cidr : cidr.slice(0, slash);
  const family = isIPv4(address) ? 'ipv4' : isIPv6(address) ? 'ipv6' : null;
  if (family === null) throw new Error(`"${cidr}" is not an IPv4 or IPv6 address or CIDR block`);
  const max = family === 'ipv4' ? 32 : 128;
  const prefix = slash < 0 ? max : Number(cidr.slice(slash + 1));
  if (!/^\d+$/.test(slash < 0 ? String(max) : cidr.slice(slash + 1)) || prefix > max) throw new Error(`"${cidr}": the prefix length must be 0..${max}`);
  return { address, prefix, family };
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
  private readonly apps: RegExp[] | null;
  private readonly users: ReadonlySet<string> | null;
  private readonly clients: BlockList | null;

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
    this.apps = apps === null ? null : apps.map(globRegExp);
    this.users = users === null ? null : new Set(users);
    if (clients === null) this.clients = null;
    else {
      const b = new BlockList();
      for (const c of clients) {
        let p;
        try {
          p = parseCidr(c);
        } catch (err) {
          throw new Error(`match.client: ${(err as Error).message}`);
        }
        b.addSubnet(p.address, p.prefix, p.family);
      }
      this.clients = b;
    }
  }

  /** Every key given holds (one of its values): appName glob, user, client address. */
  matches(conn: ConnectionInfo): boolean {
    if (this.apps !== null && !this.apps.some((r) => r.test(conn.appName))) return false;
    if (this.users !== null && !this.users.has(conn.user)) return false;
    if (this.clients !== null) {
      const host = hostOf(conn.clientAddress);
      const family = isIPv4(host) ? 'ipv4' : isIPv6(host) ? 'ipv6' : null;
      if (family === null || !this.clients.check(host, family)) return false;
    }
    return true;
  }
}
