// Parsing of `upstream.uri` (mongodb://host:port[/db][?options], or mongodb+srv://name[/db][?options]
// resolved through DNS by srv.ts). The host list is a HostSource: fixed for mongodb://, re-resolved
// periodically for mongodb+srv://. A single host without `replicaSet` is proxied as it is (one
// pool); a list of hosts, or `replicaSet=`, is a topology the proxy monitors itself (topology.ts): a
// replica set (writes to the primary, reads by the client's read preference) or a list of mongos
// routers (requests spread over the healthy ones). A route step's URI is one pool (pool.ts): with
// several hosts it uses the first one that accepts a connection, moving to the next when an
// attempt fails.
// TLS options are spelled as drivers spell them (URI option names are case-insensitive): tls (or
// ssl), tlsCAFile, tlsCertificateKeyFile, tlsCertificateKeyFilePassword,
// tlsAllowInvalidCertificates, tlsAllowInvalidHostnames, tlsInsecure (both of the last two).
import type { Log } from '../log/index.ts';
import { readRegularFileSync } from '../fs/index.ts';
import { ProxyError, ErrorCodes } from '../errors/index.ts';
import type { LookupFunction } from 'node:net';
import type { Credentials, ScramMechanism } from './scram.ts';
import { StaticHostSource, type HostSource } from './host-source.ts';
import {
  DEFAULT_SRV_RESCAN_INTERVAL_MS, SrvHostSource, createResolver, lookupSrv, parseTxtOptions, pickHosts, resolverLookup,
} from './srv.ts';

export interface UpstreamAddress {
  readonly uri: string;
  /** The hosts to connect to, read when a connection is opened (live for mongodb+srv://). */
  readonly hosts: HostSource;
  /** Resolves host names for upstream sockets; null: the system's (dns.lookup). */
  readonly lookup: LookupFunction | null;
  /** The URI's options, keys lower-cased (for mongodb+srv://, TXT record options under the URI's). */
  readonly options: ReadonlyMap<string, string>;
  readonly username: string | null;
  /** Set when the URI carries a user: the proxy authenticates every upstream connection. */
  readonly credentials: Credentials | null;
  /** Set with tls=true (or ssl=true): every upstream connection is TLS. */
  readonly tls: UpstreamTls | null;
  /** The `replicaSet` option: the set's name every member must report (null: not given). */
  readonly replicaSet: string | null;
}

export interface UpstreamTls {
  /** PEM certificate authorities (tlsCAFile); null: the system's. */
  readonly ca: Buffer | null;
  /** PEM certificate and private key in one file (tlsCertificateKeyFile), for client certificates. */
  readonly certificateKey: Buffer | null;
  readonly passphrase: string | undefined;
  readonly allowInvalidCertificates: boolean;
  readonly allowInvalidHostnames: boolean;
}

const TLS_OPTIONS = ['tls', 'ssl', 'tlscafile', 'tlscertificatekeyfile', 'tlscertificatekeyfilepassword',
  'tlsallowinvalidcertificates', 'tlsallowinvalidhostnames', 'tlsinsecure'];

function bad(message: string): ProxyError {
  return new ProxyError(ErrorCodes.BadValue, `upstream.uri ${message}`);
}

function flag(params: Map<string, string>, name: string): boolean | null {
  const v = params.get(name.toLowerCase());
  if (v === undefined) return null;
  if (v === 'true') return true;
  if (v === 'false') return false;
  throw bad(`${name}=${v}: expected true or false`);
}

function readPem(params: Map<string, string>, name: string): Buffer | null {
  const path = params.get(name.toLowerCase());
  if (path === undefined) return null;
  try {
    return readRegularFileSync(path);
  } catch (err) {
    throw bad(`${name}: cannot read ${path}: ${(err as Error).message}`);
  }
}

/** The TLS settings of the URI's options (null without tls/ssl=true); files are read here. */
function parseTls(params: Map<string, string>): UpstreamTls | null {
  const tls = flag(params, 'tls');
  const ssl = flag(params, 'ssl');
  if (tls !== null && ssl !== null && tls !== ssl) throw bad('tls and ssl disagree');
  const on = tls ?? ssl ?? false;
  const insecure = flag(params, 'tlsInsecure');
  const invalidCerts = flag(params, 'tlsAllowInvalidCertificates');
  const invalidHosts = flag(params, 'tlsAllowInvalidHostnames');
  if (insecure !== null && (invalidCerts !== null || invalidHosts !== null)) {
    throw bad('tlsInsecure cannot be combined with tlsAllowInvalidCertificates or tlsAllowInvalidHostnames (it sets both)');
  }
  if (!on) {
    const stray = TLS_OPTIONS.slice(2).find((o) => params.has(o));
    if (stray !== undefined) throw bad(`has TLS options (${stray}) but not tls=true`);
    return null;
  }
  return {
    ca: readPem(params, 'tlsCAFile'),
    certificateKey: readPem(params, 'tlsCertificateKeyFile'),
    passphrase: params.get('tlscertificatekeyfilepassword'),
    allowInvalidCertificates: insecure ?? invalidCerts ?? false,
    allowInvalidHostnames: insecure ?? invalidHosts ?? false,
  };
}

const MECHANISMS: readonly ScramMechanism[] = ['SCRAM-SHA-256', 'SCRAM-SHA-1'];

interface UriParts {
  srv: boolean;
  userinfo: string | undefined;
  hostPart: string;
  /** The path's database, '' when none. */
  db: string;
  params: Map<string, string>;
}

function splitUri(uri: string): UriParts {
  const m = /^(mongodb|mongodb\+srv):\/\/(?:([^@/]*)@)?([^/?]+)(\/[^?]*)?(\?.*)?$/.exec(uri);
  if (m === null) {
    throw new ProxyError(ErrorCodes.BadValue, `upstream.uri "${uri}" is not a mongodb:// or mongodb+srv:// URI`);
  }
  const params = new Map<string, string>();
  for (const [k, v] of new URLSearchParams((m[5] ?? '').slice(1))) params.set(k.toLowerCase(), v);
  return { srv: m[1] === 'mongodb+srv', userinfo: m[2], hostPart: m[3], db: (m[4] ?? '').slice(1), params };
}

/** The address a URI's parts describe once its hosts are known. */
function buildAddress(uri: string, parts: UriParts, hosts: HostSource, params: Map<string, string>, lookup: LookupFunction | null): UpstreamAddress {
  let username: string | null = null;
  let credentials: Credentials | null = null;
  if (parts.userinfo) {
    const colon = parts.userinfo.indexOf(':');
    username = decodeURIComponent(colon < 0 ? parts.userinfo : parts.userinfo.slice(0, colon));
    const password = colon < 0 ? '' : decodeURIComponent(parts.userinfo.slice(colon + 1));
    const mechanism = (params.get('authmechanism') ?? 'SCRAM-SHA-256') as ScramMechanism;
    if (!MECHANISMS.includes(mechanism)) {
      throw new ProxyError(ErrorCodes.BadValue, `upstream.uri authMechanism "${mechanism}" is not supported (use ${MECHANISMS.join(' or ')})`);
    }
    credentials = { username, password, source: params.get('authsource') ?? (decodeURIComponent(parts.db) || 'admin'), mechanism };
  }
  const replicaSet = params.get('replicaset') ?? null;
  if (replicaSet === '') throw bad('replicaSet is empty');
  return { uri, hosts, lookup, options: params, username, credentials, tls: parseTls(params), replicaSet };
}

/** Parses a mongodb:// URI. A mongodb+srv:// URI needs DNS: use resolveUpstreamUri. */
export function parseUpstreamUri(uri: string): UpstreamAddress {
  const parts = splitUri(uri);
  if (parts.srv) throw bad('mongodb+srv:// is resolved for the configured upstream.uri only (at startup, through DNS); list the hosts as ' +
    'mongodb://host:port,host:port here');
  for (const o of ['srvServiceName', 'srvMaxHosts']) {
    if (parts.params.has(o.toLowerCase())) throw bad(`${o} is only allowed with mongodb+srv://`);
  }
  const hosts = parts.hostPart.split(',').map((h) => {
    const hm = /^(\[[^\]]+\]|[^:]+)(?::(\d+))?$/.exec(h);
    if (hm === null) throw new ProxyError(ErrorCodes.BadValue, `upstream.uri host "${h}" is not host[:port]`);
    const port = hm[2] === undefined ? 27017 : Number(hm[2]);
    if (!(port > 0 && port < 65536)) throw new ProxyError(ErrorCodes.BadValue, `upstream.uri port ${hm[2]} is out of range`);
    return { host: hm[1].replace(/^\[|\]$/g, ''), port };
  });
  return buildAddress(uri, parts, new StaticHostSource(hosts), parts.params, null);
}

export interface ResolveOptions {
  /** DNS servers for mongodb+srv:// (SRV, TXT and the targets' addresses); empty: the system's. */
  dnsServers?: readonly string[];
  /** How often the SRV records are re-resolved. */
  rescanIntervalMs?: number;
  log: Pick<Log, 'info' | 'warn'>;
}

const HOSTNAME = /^[A-Za-z0-9_]([A-Za-z0-9_-]*[A-Za-z0-9_])?(\.[A-Za-z0-9_]([A-Za-z0-9_-]*[A-Za-z0-9_])?)*\.?$/;
const SERVICE_NAME = /^[A-Za-z0-9]([A-Za-z0-9-]{0,60}[A-Za-z0-9])?$/;

/**
 * Parses `upstream.uri`; a mongodb+srv:// URI is resolved through DNS first (SRV and TXT), and its
 * host list is then re-resolved every `rescanIntervalMs` until `hosts.close()`. Errors name the URI
 * part, or the DNS name and the reason.
 */
export async function resolveUpstreamUri(uri: string, opts: ResolveOptions): Promise<UpstreamAddress> {
  const parts = splitUri(uri);
  if (!parts.srv) return parseUpstreamUri(uri);
  // Checked before any DNS query, as the specification requires.
  if (parts.hostPart.includes(',')) throw bad(`mongodb+srv:// takes exactly one host name, got "${parts.hostPart}"`);
  if (/:\d*$/.test(parts.hostPart) || parts.hostPart.startsWith('[')) {
    throw bad(`mongodb+srv:// host "${parts.hostPart}" must be a DNS name without a port (ports come from the SRV records)`);
  }
  const hostname = parts.hostPart.toLowerCase().replace(/\.$/, '');
  if (!HOSTNAME.test(hostname)) throw bad(`mongodb+srv:// host "${parts.hostPart}" is not a DNS name`);
  const serviceName = parts.params.get('srvservicename') ?? 'mongodb';
  if (!SERVICE_NAME.test(serviceName)) throw bad(`srvServiceName=${serviceName}: expected letters, digits and inner hyphens (at most 62)`);
  const maxText = parts.params.get('srvmaxhosts') ?? '0';
  if (!/^\d+$/.test(maxText)) throw bad(`srvMaxHosts=${maxText}: expected a non-negative integer`);
  const maxHosts = Number(maxText);
  parseTls(withDefaultTls(parts.params)); // URI-only TLS mistakes are reported before DNS is asked

  const resolver = createResolver(opts.dnsServers ?? []);
  const found = await lookupSrv(resolver, hostname, serviceName);
  const params = found.txt === null ? new Map<string, string>() : parseTxtOptions(found.txt, hostname);
  for (const [k, v] of parts.params) params.set(k, v); // the URI's options win over the TXT record's
  if (maxHosts > 0 && params.has('replicaset')) throw bad(`srvMaxHosts=${maxHosts} cannot be combined with replicaSet`);
  if (maxHosts > 0 && params.get('loadbalanced') === 'true') throw bad(`srvMaxHosts=${maxHosts} cannot be combined with loadBalanced=true`);
  const hosts = new SrvHostSource(pickHosts(found.hosts, maxHosts), {
    resolver, hostname, srvName: found.srvName, maxHosts,
    rescanIntervalMs: opts.rescanIntervalMs ?? DEFAULT_SRV_RESCAN_INTERVAL_MS, log: opts.log,
  });
  try {
    return buildAddress(uri, parts, hosts, withDefaultTls(params), (opts.dnsServers ?? []).length > 0 ? resolverLookup(resolver) : null);
  } catch (err) {
    hosts.close();
    throw err;
  }
}

/** mongodb+srv:// implies TLS unless the URI turns it off (tls=false or ssl=false). */
function withDefaultTls(params: Map<string, string>): Map<string, string> {
  if (params.has('tls') || params.has('ssl')) return params;
  const out = new Map(params);
  out.set('tls', 'true');
  return out;
}
