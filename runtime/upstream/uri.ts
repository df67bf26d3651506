// Parsing of `upstream.uri` (mongodb://host:port[/db][?options]). A single host without
// `replicaSet` is proxied as it is (one pool, today's behaviour); a list of hosts, or `replicaSet=`,
// is a topology the proxy monitors itself (topology.ts): a replica set (writes to the primary, reads
// by the client's read preference) or a list of mongos routers (requests spread over the healthy ones).
// A route step's URI is one pool (pool.ts): with several hosts it uses the first one that accepts a
// connection, moving to the next when an attempt fails.
// TLS options are spelled as drivers spell them (URI option names are case-insensitive): tls (or
// ssl), tlsCAFile, tlsCertificateKeyFile, tlsCertificateKeyFilePassword,
// tlsAllowInvalidCertificates, tlsAllowInvalidHostnames, tlsInsecure (both of the last two).
import { readFileSync } from 'node:fs';
import { ProxyError, ErrorCodes } from '../errors/index.ts';
import type { Credentials, ScramMechanism } from './scram.ts';

export interface UpstreamAddress {
  readonly uri: string;
  readonly hosts: readonly { host: string; port: number }[];
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
    return readFileSync(path);
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
  const params = new Map<string, string>();
  for (const [k, v] of new URLSearchParams((m[4] ?? '').slice(1))) params.set(k.toLowerCase(), v);
  let username: string | null = null;
  let credentials: Credentials | null = null;
  if (m[1]) {
    const colon = m[1].indexOf(':');
    username = decodeURIComponent(colon < 0 ? m[1] : m[1].slice(0, colon));
    const password = colon < 0 ? '' : decodeURIComponent(m[1].slice(colon + 1));
    const pathDb = (m[3] ?? '').slice(1);
    const mechanism = (params.get('authmechanism') ?? 'SCRAM-SHA-256') as ScramMechanism;
    if (!MECHANISMS.includes(mechanism)) {
      throw new ProxyError(ErrorCodes.BadValue, `upstream.uri authMechanism "${mechanism}" is not supported (use ${MECHANISMS.join(' or ')})`);
    }
    credentials = { username, password, source: params.get('authsource') ?? (pathDb || 'admin'), mechanism };
  }
  const replicaSet = params.get('replicaset') ?? null;
  if (replicaSet === '') throw bad('replicaSet is empty');
  return { uri, hosts, username, credentials, tls: parseTls(params), replicaSet };
}
