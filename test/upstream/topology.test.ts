// The topology's discovery rules against servers whose hello says exactly what a test wants (devdb
// servers on real sockets with a scripted hello): two members claiming to be primary (the newer
// electionId wins, the stale one is ignored), a member of another set, a standalone in a list, the
// primary's member list being authoritative, and waiting requests failing with a retryable error
// when no server fits.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { performance } from 'node:perf_hooks';
import { ObjectId, type Document } from 'bson';
import { DevDbServer, type DevMember } from '../../runtime/devdb/index.ts';
import { Topology, parseUpstreamUri, type PoolWaiter, type UpstreamConnection } from '../../runtime/upstream/index.ts';
import { CommandPeek } from '../../runtime/wire/index.ts';
import { serialize } from 'bson';
import type { ProxyError } from '../../runtime/errors/index.ts';
import { until } from '../helpers/until.ts';

/** A server whose hello gets `fields` (changeable between checks). */
class Scripted implements DevMember {
  fields: Document = {};
  before(): Document | null { return null; }
  after(name: string, _cmd: Document, reply: Document): void {
    if (name === 'hello' || name === 'isMaster') {
      Object.assign(reply, this.fields);
      for (const [k, v] of Object.entries(this.fields)) if (v === undefined) delete reply[k];
    }
  }
}

const servers: DevDbServer[] = [];
const topologies: Topology[] = [];
after(async () => {
  for (const t of topologies) t.close();
  for (const s of servers) await s.close();
});

async function scripted(n: number): Promise<{ m: Scripted; addr: string }[]> {
  const out: { m: Scripted; addr: string }[] = [];
  for (let i = 0; i < n; i++) {
    const m = new Scripted();
    const s = new DevDbServer(undefined, { member: m });
    servers.push(s);
    const a = await s.listen(0);
    out.push({ m, addr: `127.0.0.1:${a.port}` });
  }
  return out;
}

const log = { info() {}, warn() {} };
const POOL = { poolSize: 4, minIdle: 0, maxIdleTimeMs: 60_000, connectTimeoutMs: 2000, waitQueueTimeoutMs: 2000 };

function topology(uri: string, serverSelectionTimeoutMs = 5000): Topology {
  const t = new Topology(parseUpstreamUri(uri), POOL, { heartbeatMs: 10_000, localThresholdMs: 15, serverSelectionTimeoutMs }, log);
  topologies.push(t);
  return t;
}

const eid = (n: number) => ObjectId.createFromHexString(`7fffffff${n.toString(16).padStart(16, '0')}`);
const rsHello = (setName: string, hosts: string[], primary: boolean, electionId?: ObjectId): Document => ({
  setName, hosts, setVersion: 1, isWritablePrimary: primary, secondary: !primary, electionId: primary ? electionId : undefined,
});

test('two members claim to be primary: the newer electionId wins; the stale claim is ignored', async () => {
  const [a, b] = await scripted(2);
  const hosts = [a.addr, b.addr];
  b.m.fields = rsHello('rs0', hosts, true, eid(5));
  a.m.fields = rsHello('rs0', hosts, false);
  const t = topology(`mongodb://${a.addr},${b.addr}/?replicaSet=rs0`);
  await t.start(3000);
  await until('b primary', () => t.primary?.address === b.addr);
  // a now claims primary with an older election: stale, ignored; b stays primary.
  a.m.fields = rsHello('rs0', hosts, true, eid(3));
  const before = [...t.allServers()].find((s) => s.address === a.addr)!.monitor.checks;
  [...t.allServers()].find((s) => s.address === a.addr)!.monitor.requestCheck();
  await until('a checked again', () => [...t.allServers()].find((s) => s.address === a.addr)!.monitor.checks > before);
  assert.equal(t.primary?.address, b.addr);
  assert.equal([...t.allServers()].find((s) => s.address === a.addr)!.type, 'Unknown');
  // A newer election on a: a is primary, b (still claiming) is demoted until checked.
  a.m.fields = rsHello('rs0', hosts, true, eid(9));
  b.m.fields = rsHello('rs0', hosts, false);
  [...t.allServers()].find((s) => s.address === a.addr)!.monitor.requestCheck();
  await until('a primary', () => t.primary?.address === a.addr);
});

test('discovery: a member of another set and a standalone are left out; the primary\'s list is authoritative', async () => {
  const [p, other, alone, extra] = await scripted(4);
  p.m.fields = rsHello('rs1', [p.addr, extra.addr], true, eid(1));
  extra.m.fields = rsHello('rs1', [p.addr, extra.addr], false);
  other.m.fields = rsHello('elsewhere', [other.addr], true, eid(1));
  alone.m.fields = {};
  const t = topology(`mongodb://${p.addr},${other.addr},${alone.addr}/?replicaSet=rs1`);
  await t.start(3000);
  await until('primary and the discovered secondary', () => t.primary?.address === p.addr && t.usableServers.length === 2);
  const member = (addr: string) => [...t.allServers()].find((s) => s.address === addr)!.member;
  assert.equal(member(extra.addr), true, 'discovered from the primary\'s hosts');
  assert.equal(member(other.addr), false, 'another set name');
  assert.equal(member(alone.addr), false, 'a standalone');
  assert.deepEqual(t.usableServers.map((s) => s.address).sort(), [p.addr, extra.addr].sort());
});

test('several hosts without replicaSet: routers make a mongos list; no usable server → a retryable error after server_selection_timeout_ms', async () => {
  const [r1, r2] = await scripted(2);
  r1.m.fields = { msg: 'isdbgrid' };
  r2.m.fields = { msg: 'isdbgrid' };
  const t = topology(`mongodb://${r1.addr},${r2.addr}`, 400);
  await t.start(3000);
  await until('two routers', () => t.usableServers.length === 2);
  assert.equal(t.kind, 'Sharded');
  // Both routers turn into something else: nothing is usable, a request waits, then fails.
  r1.m.fields = { msg: undefined };
  r2.m.fields = { msg: undefined };
  for (const s of t.allServers()) s.monitor.requestCheck();
  await until('no router left', () => t.usableServers.length === 0);
  const peek = new CommandPeek();
  const body = Buffer.from(serialize({ find: 'c', $db: 'app' }));
  peek.read(body);
  const source = t.select(peek, body, null);
  const started = performance.now();
  const err = await new Promise<ProxyError>((resolve, reject) => {
    const waiter: PoolWaiter = {
      onConnection(conn: UpstreamConnection) { reject(new Error(`got a connection to ${conn.host}:${conn.port}`)); },
      onPoolError(e: ProxyError) { resolve(e); },
    };
    source.acquire(waiter);
  });
  assert.equal(err.code, 133);
  assert.deepEqual(err.labels, ['RetryableWriteError']);
  assert.match(err.message, /server_selection_timeout_ms \(400 ms\)/);
  assert.ok(performance.now() - started >= 350);
});
