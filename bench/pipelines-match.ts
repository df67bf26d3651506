// The per-request cost of choosing a pipeline (config `pipelines`), in process: what a client
// connection does between reading a request and running its graph — CommandPeek.read of the
// command (which every request pays anyway, so the ratios are against real per-request work) and
// `(graphs ?? routeRequest()).pick(...)` (client-connection.ts) — with one pipeline and with 20.
//
// Cases (ns per request, median of rounds; each round runs every case, order rotated):
//   1 pipeline                    the connection holds the slot: the cost before `pipelines` existed
//   20, by app_name               connection-level matches: the route is fixed once per connection
//   20, by collection (memo)      request-level matches (collection globs), 50 collections the memo
//                                 remembers: one memo lookup per request
//   20, by db+collection+command  all three request keys tested: three nested memo lookups
//   20, no memo (scan)            every request names a new collection past the memo's bound: the
//                                 ordered scan of 20 candidates (a client naming ever new collections)
// The commands are real OP_MSG bodies (find with a filter, $db, lsid), peeked as the server does,
// so the strings the match reads are fresh per request as they are in the proxy.
//
// Usage: node --import tsx bench/pipelines-match.ts [--requests 2000000] [--rounds 5]
// Prints a table and the ratio of each case to "1 pipeline" (issue 22's target: ≤ 1.02× with 20).
import { serialize, Binary } from 'bson';
import { CommandPeek } from '../runtime/wire/index.ts';
import { PipelineManager, PipelineRouting, MEMO_LIMIT, type ConnectionRoute, type GraphSlot, type RouteEntry } from '../runtime/pipeline/index.ts';
import type { MatchSpec } from '../runtime/config/index.ts';
import { arg } from './lib.ts';

const REQUESTS = Number(arg('--requests', '2000000'));
const ROUNDS = Number(arg('--rounds', '5'));
const COLLECTIONS = 50;

const manager = new PipelineManager();
const conn = { id: 1, appName: 'shop', clientAddress: '127.0.0.1:50000', user: '' };

/** Request bodies: find on `coll<i % n>` of db `shop` (or `prefix<i>` when `fresh`), as a driver sends them. */
function bodies(n: number, prefix = 'coll'): Buffer[] {
  const lsid = { id: new Binary(Buffer.alloc(16, 7), 4) };
  const out: Buffer[] = [];
  for (let i = 0; i < n; i++) out.push(Buffer.from(serialize({ find: `${prefix}${i}`, filter: { _id: i, status: 'open' }, limit: 1, lsid, $db: 'shop' })));
  return out;
}

function routing(n: number, match: (i: number) => MatchSpec): PipelineRouting {
  const entries: RouteEntry[] = [];
  for (let i = 0; i < n - 1; i++) entries.push({ id: `p${i}`, match: match(i), slot: manager.slot(`p${i}`) });
  entries.push({ id: 'default', match: {}, slot: manager.slot('default') });
  return new PipelineRouting(entries);
}

/** The connection's routing fields and its per-request expression, as client-connection.ts has them. */
class Conn {
  graphs: GraphSlot | null;
  route: ConnectionRoute | null = null;
  readonly peek = new CommandPeek();
  constructor(readonly routing: PipelineRouting) {
    this.graphs = routing.single;
  }
  routeRequest(): GraphSlot {
    let r = this.route;
    if (r === null) {
      r = this.route = this.routing.forConnection(conn.appName, conn.user, '127.0.0.1');
      if (r.fixed !== null) return this.graphs = r.fixed;
    }
    const peek = this.peek;
    return r.pick(peek.op, peek.db, peek.collection);
  }
  request(body: Buffer): unknown {
    this.peek.read(body);
    return (this.graphs ?? this.routeRequest()).pick(conn, body, -1);
  }
}

interface Case { name: string; conn: Conn; bodies: Buffer[] }

const recycled = bodies(COLLECTIONS);
const fresh = bodies(4096, 'fresh');
const cases: Case[] = [
  { name: '1 pipeline', conn: new Conn(PipelineRouting.single(manager.slot('default'))), bodies: recycled },
  { name: '20, by app_name', conn: new Conn(routing(20, (i) => ({ app_name: `app${i}-*` }))), bodies: recycled },
  { name: '20, by collection (memo)', conn: new Conn(routing(20, (i) => ({ collection: `other${i}_*` }))), bodies: recycled },
  { name: '20, by db+collection+command', conn: new Conn(routing(20, (i) => ({ db: `db${i}`, collection: `other${i}_*`,
    command: ['insert', 'update'] }))), bodies: recycled },
  { name: '20, no memo (scan)', conn: new Conn(routing(20, (i) => ({ collection: `other${i}_*` }))), bodies: fresh },
];

function run(c: Case): number {
  let sink = 0;
  const b = c.bodies;
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < REQUESTS; i++) if (c.conn.request(b[i % b.length]) !== null) sink++;
  const ns = Number(process.hrtime.bigint() - t0) / REQUESTS;
  if (sink !== REQUESTS) throw new Error('a request got no graph');
  return ns;
}

// The scan case's memo is full of other collections first, so none of its requests hits it.
const scan = cases[cases.length - 1].conn;
for (const b of bodies(MEMO_LIMIT, 'warm')) scan.request(b);
// Warm-up: every case once.
for (const c of cases) run(c);
const samples = new Map<string, number[]>(cases.map((c) => [c.name, []]));
for (let r = 0; r < ROUNDS; r++) {
  for (let k = 0; k < cases.length; k++) {
    const c = cases[(k + r) % cases.length];
    samples.get(c.name)!.push(run(c));
  }
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const base = median(samples.get('1 pipeline')!);
console.log(`pipelines-match: ${REQUESTS} requests × ${ROUNDS} rounds per case (median ns/request: peek + pipeline choice + graph pick)`);
console.log('| case | ns/request | vs 1 pipeline |');
console.log('|---|---|---|');
for (const c of cases) {
  const m = median(samples.get(c.name)!);
  console.log(`| ${c.name} | ${m.toFixed(1)} | ${(m / base).toFixed(3)}× |`);
}
