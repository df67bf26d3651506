// DNS seedlist discovery for `mongodb+srv://` upstreams, after MongoDB's "Initial DNS Seedlist
// Discovery" and "Polling SRV Records for mongos Discovery" specifications
// (github.com/mongodb/specifications, source/initial-dns-seedlist-discovery and
// source/polling-srv-records-for-mongos-discovery):
// - hosts come from the SRV records of `_{srvServiceName}._tcp.{hostname}` (priority and weight
//   ignored); every target must lie inside the SRV name's {domainname};
// - default options come from the one TXT record of {hostname} (authSource, replicaSet and
//   loadBalanced only);
// - the list is re-resolved periodically; a failed or empty rescan keeps the last good list.
// Node's resolver does not report the TTL of SRV records, so rescans run every
// `rescanIntervalMs` — what the polling specification prescribes when TTLs cannot be read.
import type { Log } from '../log/index.ts';
import { Resolver } from 'node:dns/promises';
import { isIP, type LookupFunction } from 'node:net';
import type { LookupAddress } from 'node:dns';
import { ErrorCodes, ProxyError } from '../errors/index.ts';
import { formatHostPort } from '../config/index.ts';
import { hostKey, type HostAddress, type HostSource } from './host-source.ts';

/** The rescan interval when none is configured (the polling specification's 60 s). */
export const DEFAULT_SRV_RESCAN_INTERVAL_MS = 60_000;
/** After a failed rescan, try again this soon (the drivers' default heartbeatFrequencyMS) or at the interval if shorter. */
export const SRV_RETRY_AFTER_FAILURE_MS = 10_000;
/** Options a TXT record may carry (lower-cased); anything else is refused. */
export const TXT_OPTIONS: readonly string[] = ['authsource', 'replicaset', 'loadbalanced'];

/** Per query: time out after this long, try this many times (c-ares defaults would wait ~75 s on a dead server). */
const DNS_TIMEOUT_MS = 2000;
const DNS_TRIES = 2;

function srvError(message: string, cause?: unknown): ProxyError {
  return new ProxyError(ErrorCodes.BadValue, `upstream.uri mongodb+srv: ${message}`, [], { cause });
}

/** A resolver asking `servers` ("ip" or "ip:port", "[ipv6]:port"), or the system's servers when empty. */
export function createResolver(servers: readonly string[]): Resolver {
  const r = new Resolver({ timeout: DNS_TIMEOUT_MS, tries: DNS_TRIES });
  if (servers.length > 0) {
    try {
      r.setServers(servers as string[]);
    } catch (err) {
      throw new ProxyError(ErrorCodes.BadValue, `upstream.dns_servers ${JSON.stringify(servers)}: ${(err as Error).message}`, [], { cause: err });
    }
  }
  return r;
}

function lower(name: string): string {
  return name.toLowerCase().replace(/\.$/, '');
}

/**
 * Whether an SRV target may be used for the SRV host name `srvHost`: it must end in the host's
 * {domainname} (the name less its left-most label when it has three or more labels, else the
 * whole name) and so, for a name of one or two labels, have at least one more label.
 */
export function targetInDomain(target: string, srvHost: string): boolean {
  const host = lower(srvHost);
  const parts = host.split('.');
  const domain = parts.length >= 3 ? parts.slice(1).join('.') : host;
  return lower(target).endsWith(`.${domain}`);
}

/** The parent domain targets are checked against (for messages). */
export function srvDomainName(srvHost: string): string {
  const parts = lower(srvHost).split('.');
  return parts.length >= 3 ? parts.slice(1).join('.') : parts.join('.');
}

function dnsReason(err: unknown): string {
  const e = err as NodeJS.ErrnoException;
  return e.code !== undefined ? `${e.code} (${e.message})` : String(e.message ?? err);
}

/** `max` hosts chosen at random (Fisher-Yates), or all of them when `max` is 0 or not smaller. */
export function pickHosts<T>(hosts: readonly T[], max: number): T[] {
  const out = hosts.slice();
  if (max <= 0 || max >= out.length) return out;
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    const t = out[i];
    out[i] = out[j];
    out[j] = t;
  }
  return out.slice(0, max);
}

export interface SrvLookup {
  /** `_{service}._tcp.{hostname}` */
  readonly srvName: string;
  /** Every valid target (before srvMaxHosts). */
  readonly hosts: HostAddress[];
  /** The TXT record's strings joined, or null without a TXT record. */
  readonly txt: string | null;
}

/** The initial lookup: SRV and TXT records, both validated; any problem is an error naming the record. */
export async function lookupSrv(resolver: Resolver, hostname: string, serviceName: string): Promise<SrvLookup> {
  const srvName = `_${serviceName}._tcp.${hostname}`;
  const [srv, txt] = await Promise.all([
    resolver.resolveSrv(srvName).then((r) => r, (err: unknown) => {
      throw srvError(`DNS SRV lookup of ${srvName} failed: ${dnsReason(err)}`, err);
    }),
    resolver.resolveTxt(hostname).then((r) => r, (err: NodeJS.ErrnoException) => {
      // No TXT record is the usual case, not an error.
      if (err.code === 'ENODATA' || err.code === 'ENOTFOUND') return [] as string[][];
      throw srvError(`DNS TXT lookup of ${hostname} failed: ${dnsReason(err)}`, err);
    }),
  ]);
  if (srv.length === 0) throw srvError(`DNS SRV lookup of ${srvName} returned no records`);
  const hosts: HostAddress[] = [];
  for (const r of srv) {
    if (!targetInDomain(r.name, hostname)) {
      throw srvError(`SRV record ${srvName} points at ${r.name}, which is not inside ${srvDomainName(hostname)} (targets must share the parent ` +
        `domain of ${hostname})`);
    }
    hosts.push({ host: lower(r.name), port: r.port });
  }
  if (txt.length > 1) {
    throw srvError(`${hostname} has ${txt.length} TXT records; at most one is allowed (${txt.map((t) => JSON.stringify(t.join(''))).join(', ')})`);
  }
  return { srvName, hosts, txt: txt.length === 1 ? txt[0].join('') : null };
}

/** A TXT record's options (keys lower-cased): only authSource, replicaSet and loadBalanced. */
export function parseTxtOptions(txt: string, hostname: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const [k, v] of new URLSearchParams(txt)) {
    const key = k.toLowerCase();
    if (!TXT_OPTIONS.includes(key)) {
      throw srvError(`TXT record of ${hostname} ("${txt}") sets ${k}; only authSource, replicaSet and loadBalanced are allowed there`);
    }
    if (key === 'loadbalanced' && v !== 'true' && v !== 'false') {
      throw srvError(`TXT record of ${hostname}: loadBalanced=${v}: expected true or false`);
    }
    if (v === '') throw srvError(`TXT record of ${hostname}: ${k} has no value`);
    out.set(key, v);
  }
  return out;
}

/**
 * The `lookup` for sockets to SRV targets when DNS servers are configured: A records, then AAAA,
 * from the same resolver that answered the SRV query (the system's getaddrinfo would not ask it).
 */
export function resolverLookup(resolver: Resolver): LookupFunction {
  return (hostname, options, callback) => {
    const cb = callback as (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;
    resolveAddresses(resolver, hostname, options.family).then((list) => {
      if (options.all === true) cb(null, list);
      else cb(null, list[0].address, list[0].family);
    }, (err: NodeJS.ErrnoException) => cb(err, ''));
  };
}

async function resolveAddresses(resolver: Resolver, hostname: string, family: number | string | undefined): Promise<LookupAddress[]> {
  const fam = family === 'IPv4' ? 4 : family === 'IPv6' ? 6 : Number(family ?? 0);
  if (isIP(hostname) !== 0) return [{ address: hostname, family: isIP(hostname) }];
  let first: unknown = null;
  if (fam !== 6) {
    try {
      const v4 = await resolver.resolve4(hostname);
      if (v4.length > 0) return v4.map((address) => ({ address, family: 4 }));
    } catch (err) {
      first = err;
    }
  }
  if (fam !== 4) {
    try {
      const v6 = await resolver.resolve6(hostname);
      if (v6.length > 0) return v6.map((address) => ({ address, family: 6 }));
    } catch (err) {
      first ??= err;
    }
  }
  const e = new Error(`cannot resolve ${hostname} with upstream.dns_servers ${resolver.getServers().join(',')}: ${first === null ? 'no address ' +
    'records' : dnsReason(first)}`) as NodeJS.ErrnoException;
  e.code = (first as NodeJS.ErrnoException | null)?.code ?? 'ENOTFOUND';
  throw e;
}

export interface SrvHostSourceOptions {
  resolver: Resolver;
  hostname: string;
  srvName: string;
  /** srvMaxHosts: 0 is no limit. */
  maxHosts: number;
  rescanIntervalMs: number;
  log: Pick<Log, 'info' | 'warn'>;
}

/**
 * The live host list of a `mongodb+srv://` upstream. Rescans the SRV records every
 * `rescanIntervalMs` (counted from the end of the previous scan); hosts that stay keep their
 * place, gone ones are dropped, new ones appended (at random up to srvMaxHosts). Targets outside
 * the domain are skipped with a warning; a failed or empty rescan keeps the list, warns once per
 * failure streak, and retries after SRV_RETRY_AFTER_FAILURE_MS.
 */
export class SrvHostSource implements HostSource {
  private hosts: readonly HostAddress[];
  private readonly opts: SrvHostSourceOptions;
  private readonly listeners = new Set<(hosts: readonly HostAddress[]) => void>();
  private timer: NodeJS.Timeout | null = null;
  private closed = false;
  private failing = false;
  private skipped = '';
  version = 1;
  /** Completed rescans (successful or not), for tests and metrics. */
  rescans = 0;

  constructor(initial: readonly HostAddress[], opts: SrvHostSourceOptions) {
    this.hosts = initial;
    this.opts = opts;
    this.schedule(opts.rescanIntervalMs);
  }

  current(): readonly HostAddress[] {
    return this.hosts;
  }

  onChange(listener: (hosts: readonly HostAddress[]) => void): () => void {
    this.listeners.add(listener);
    return () => { this.listeners.delete(listener); };
  }

  close(): void {
    this.closed = true;
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    this.listeners.clear();
  }

  private schedule(ms: number): void {
    if (this.closed) return;
    this.timer = setTimeout(() => { this.timer = null; void this.rescan(); }, ms);
    this.timer.unref();
  }

  /** One rescan; resolves when its result is applied (tests call it directly). */
  async rescan(): Promise<void> {
    const { resolver, srvName, hostname, log } = this.opts;
    let next: HostAddress[] | null = null;
    let reason = '';
    try {
      const records = await resolver.resolveSrv(srvName);
      const valid: HostAddress[] = [];
      const skipped: string[] = [];
      for (const r of records) {
        if (targetInDomain(r.name, hostname)) valid.push({ host: lower(r.name), port: r.port });
        else skipped.push(formatHostPort(r.name, r.port));
      }
      const key = skipped.join(',');
      if (key !== this.skipped && skipped.length > 0) {
        log.warn('SRV rescan: skipped targets outside the parent domain', { srv: srvName, domain: srvDomainName(hostname), skipped });
      }
      this.skipped = key;
      if (valid.length > 0) next = valid;
      else reason = records.length === 0 ? 'no SRV records' : 'no SRV record inside the parent domain';
    } catch (err) {
      reason = dnsReason(err);
    }
    if (this.closed) return;
    this.rescans++;
    if (next === null) {
      if (!this.failing) {
        this.failing = true;
        log.warn('SRV rescan failed; keeping the last host list', { srv: srvName, error: reason, hosts: this.hosts.map(hostKey) });
      }
      this.schedule(Math.min(SRV_RETRY_AFTER_FAILURE_MS, this.opts.rescanIntervalMs));
      return;
    }
    if (this.failing) {
      this.failing = false;
      log.info('SRV rescan succeeded again', { srv: srvName });
    }
    this.apply(next);
    this.schedule(this.opts.rescanIntervalMs);
  }

  private apply(valid: readonly HostAddress[]): void {
    const validKeys = new Set(valid.map(hostKey));
    const kept = this.hosts.filter((h) => validKeys.has(hostKey(h)));
    const keptKeys = new Set(kept.map(hostKey));
    const fresh = valid.filter((h) => !keptKeys.has(hostKey(h)));
    const room = this.opts.maxHosts > 0 ? this.opts.maxHosts - kept.length : fresh.length;
    const next = kept.concat(pickHosts(fresh, room).slice(0, Math.max(0, room)));
    if (next.length === this.hosts.length && next.every((h, i) => hostKey(h) === hostKey(this.hosts[i]))) return;
    const before = this.hosts.map(hostKey);
    this.hosts = next;
    this.version++;
    this.opts.log.info('SRV rescan: upstream host list changed', { srv: this.opts.srvName, before, after: next.map(hostKey) });
    for (const l of this.listeners) l(next);
  }
}
