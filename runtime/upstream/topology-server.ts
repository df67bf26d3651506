// One server of a multi-host upstream as the topology sees it (a Server Description in the SDAM
// specification's terms, with its pool), and the reading of a hello reply into one.
import type { Document } from 'bson';
import type { UpstreamInfo } from './connection.ts';
import type { UpstreamPool } from './pool.ts';
import type { SelectableServer } from './read-preference.ts';
import type { ServerMonitor } from './server-monitor.ts';
import { hostKey } from './host-source.ts';

export type ServerType = 'Unknown' | 'Standalone' | 'Mongos' | 'RSPrimary' | 'RSSecondary' | 'RSArbiter' | 'RSOther' | 'RSGhost';

/** One member of the topology: what its monitor last learnt, and its pool. */
export class TopologyServer implements SelectableServer {
  readonly address: string;
  readonly host: string;
  readonly port: number;
  type: ServerType = 'Unknown';
  setName: string | null = null;
  setVersion: number | null = null;
  electionId: string | null = null;
  /** The primary this server names (its hello's `primary`). */
  primary: string | null = null;
  tags: Record<string, string> = {};
  rttMs = 0;
  lastWriteDate = 0;
  lastUpdateTime = 0;
  error: string | null = null;
  /** Still a member (false once the primary's list leaves it out). */
  member = true;
  info: UpstreamInfo | null = null;
  readonly monitor: ServerMonitor;
  private poolInstance: UpstreamPool | null = null;
  private readonly makePool: (s: TopologyServer) => UpstreamPool;

  constructor(host: string, port: number, monitor: (s: TopologyServer) => ServerMonitor, makePool: (s: TopologyServer) => UpstreamPool) {
    this.host = host;
    this.port = port;
    this.address = hostKey({ host, port });
    this.makePool = makePool;
    this.monitor = monitor(this);
  }

  get isPrimary(): boolean { return this.type === 'RSPrimary'; }
  get isSecondary(): boolean { return this.type === 'RSSecondary'; }
  get isMongos(): boolean { return this.type === 'Mongos'; }

  /** The server's pool (opened on first use). */
  get pool(): UpstreamPool {
    return this.poolInstance ??= this.makePool(this);
  }

  get hasPool(): boolean { return this.poolInstance !== null; }

  markUnknown(error: string): void {
    this.type = 'Unknown';
    this.error = error;
    this.setVersion = null;
    this.electionId = null;
    this.primary = null;
  }

  closePool(): void {
    this.poolInstance?.close();
  }
}

export function serverType(r: Document): ServerType {
  if (r.msg === 'isdbgrid') return 'Mongos';
  if (r.isreplicaset === true) return 'RSGhost';
  if (typeof r.setName === 'string') {
    if (r.isWritablePrimary === true || r.ismaster === true) return 'RSPrimary';
    if (r.secondary === true) return 'RSSecondary';
    if (r.arbiterOnly === true) return 'RSArbiter';
    return 'RSOther';
  }
  return 'Standalone';
}

export function memberList(hello: Document | null): string[] {
  if (hello === null) return [];
  const out: string[] = [];
  for (const key of ['hosts', 'passives', 'arbiters']) {
    const list = hello[key];
    if (Array.isArray(list)) for (const a of list) if (typeof a === 'string') out.push(a.toLowerCase());
  }
  return out;
}

export function splitAddress(a: string): { host: string; port: number } | null {
  const m = /^(\[[^\]]+\]|[^:]+)(?::(\d+))?$/.exec(a);
  if (m === null) return null;
  const port = m[2] === undefined ? 27017 : Number(m[2]);
  return port > 0 && port < 65536 ? { host: m[1].replace(/^\[|\]$/g, ''), port } : null;
}

/** Orders (electionId, setVersion) pairs: ObjectId hex strings compare as their bytes do. */
export function compareElection(e1: string, v1: number, e2: string, v2: number): number {
  if (e1 !== e2) return e1 < e2 ? -1 : 1;
  return v1 - v2;
}
