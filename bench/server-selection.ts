// What choosing the upstream server costs a request, in one process (no sockets): the command's
// one-pass peek plus UpstreamRouter.choose, each case against the single-host path over the same
// command, for
//   single host          — today's path (nothing looked up);
//   rs, no $readPreference — a replica set of 3: the primary;
//   rs, secondary        — `$readPreference: { mode: 'secondary' }` (matched byte by byte);
//   rs, secondary + tags — tag sets (the sub-document is decoded: the slow path);
//   mongos list of 3     — round robin within the latency window.
// The topology's servers are set from hello replies handed to it directly (its monitors are not
// started). Rounds interleaved, the minimum of each case kept (the machine is shared).
// Run: node --import tsx bench/server-selection.ts [--rounds 7]
import { performance } from 'node:perf_hooks';
import { serialize, ObjectId, type Document } from 'bson';
import { CommandPeek } from '../runtime/wire/index.ts';
import { Topology, UpstreamPool, UpstreamRouter, parseUpstreamUri } from '../runtime/upstream/index.ts';
import { arg } from './lib.ts';

const ITER = 200_000;
const ROUNDS = Number(arg('--rounds', '7'));
const quiet = { info() {}, warn() {} };
const POOL = { poolSize: 4, minIdle: 0, maxIdleTimeMs: 60_000, connectTimeoutMs: 1000, waitQueueTimeoutMs: 1000 };
const OPTS = { heartbeatMs: 10_000, localThresholdMs: 15, serverSelectionTimeoutMs: 1000 };
const HOSTS = ['10.0.0.1:27017', '10.0.0.2:27017', '10.0.0.3:27017'];

function topology(uri: string, hello: (i: number) => Document): Topology {
  const t = new Topology(parseUpstreamUri(uri), POOL, OPTS, quiet);
  let i = 0;
  for (const s of t.allServers()) t.onHello(s.monitor, hello(i++), 1 + i);
  return t;
}

const rs = topology(`mongodb://${HOSTS.join(',')}/?replicaSet=rs0`, (i) => ({
  ok: 1, setName: 'rs0', hosts: HOSTS, setVersion: 1, isWritablePrimary: i === 0, secondary: i !== 0,
  electionId: i === 0 ? new ObjectId('7fffffff0000000000000001') : undefined, tags: { dc: i === 2 ? 'east' : 'west' },
  lastWrite: { lastWriteDate: new Date() }, maxWireVersion: 21,
}));
const mongos = topology(`mongodb://${HOSTS.join(',')}`, () => ({ ok: 1, msg: 'isdbgrid', maxWireVersion: 21 }));
if (rs.primary === null || rs.usableServers.length !== 3 || mongos.usableServers.length !== 3) throw new Error('topologies not set up');

const single = new UpstreamPool(parseUpstreamUri('mongodb://10.0.0.9:27017'), POOL, quiet);
const body = (extra: Document) => Buffer.from(serialize({ find: 'users', filter: { a: 1 }, limit: 1, ...extra, lsid: { id: new ObjectId() }, $db: 'app' }));
const cases = [
  { name: 'single host', router: new UpstreamRouter(single, POOL, quiet), body: body({}) },
  { name: 'rs, no $readPreference', router: new UpstreamRouter(single, POOL, quiet, rs), body: body({}) },
  { name: 'rs, secondary', router: new UpstreamRouter(single, POOL, quiet, rs), body: body({ $readPreference: { mode: 'secondary' } }) },
  { name: 'rs, secondary + tags', router: new UpstreamRouter(single, POOL, quiet, rs),
    body: body({ $readPreference: { mode: 'secondary', tags: [{ dc: 'east' }] } }) },
  { name: 'mongos list of 3', router: new UpstreamRouter(single, POOL, quiet, mongos), body: body({ $readPreference: { mode: 'secondary' } }) },
];

const peek = new CommandPeek();
const singleRouter = cases[0].router;
// Each case next to the single-host path over the same command (the peek's share is the same).
const runs = cases.flatMap((c) => [c, { name: `${c.name} (single-host path)`, router: singleRouter, body: c.body }]);
const best = runs.map(() => Infinity);
let sink = 0;
for (let r = 0; r < ROUNDS; r++) {
  runs.forEach((c, k) => {
    const t0 = performance.now();
    for (let i = 0; i < ITER; i++) {
      peek.read(c.body);
      if (c.router.choose(peek, c.body, null) !== null) sink++;
    }
    best[k] = Math.min(best[k], ((performance.now() - t0) * 1e6) / ITER);
  });
}
for (let k = 0; k < runs.length; k += 2) {
  console.log(`  ${runs[k].name.padEnd(24)} ${best[k].toFixed(0).padStart(5)} ns/request  (+${(best[k] - best[k + 1]).toFixed(0)} ns over the ` +
    `single-host path, same command: ${best[k + 1].toFixed(0)} ns)`);
}
if (sink === 0) console.log('');
for (const t of [rs, mongos]) t.close();
single.close();
