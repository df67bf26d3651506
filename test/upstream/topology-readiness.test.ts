// /readyz for a multi-host upstream reflects whether the topology can serve, as its monitors see
// it — not whether the first seed is reachable: a replica set is ready while a primary is known
// (whichever member it is), and not ready without one (503, reason no_primary); a mongos list is
// ready while one router answers (503, reason no_router when none does).
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { DevMongos, DevReplicaSet } from '../../runtime/devdb/index.ts';
import type { RunningProxy } from '../../runtime/app/serve.ts';
import { until } from '../helpers/until.ts';
import { withProxy } from '../helpers/proxy.ts';

const TOKEN = 'readiness-test-admin-token';
const cleanups: Array<() => Promise<unknown>> = [];
after(async () => {
  for (const c of cleanups.reverse()) await c().catch(() => {});
});

async function proxy(uri: string): Promise<RunningProxy> {
  // Closed with the rest, last opened first.
  const { proxy: p } = await withProxy({ after: (fn) => cleanups.push(async () => fn()) }, {
    upstream: { uri, connect_timeout_ms: 1000, heartbeat_ms: 500 },
    admin: { listen: '127.0.0.1:0', token: TOKEN },
  });
  return p;
}

interface Readiness { status: number; ready: boolean; reason?: string; upstream: string; message?: string }

async function readyz(p: RunningProxy): Promise<Readiness> {
  const r = await fetch(`${p.adminUrl}/readyz`);
  return { status: r.status, ...(await r.json() as Omit<Readiness, 'status'>) };
}

test('replica set: ready while a primary is known, also after the seed member dies; no primary → 503 no_primary', async () => {
  const rs = await DevReplicaSet.start(3, 'rs0');
  cleanups.push(() => rs.close());
  // Only member 0 as the seed: the pool the proxy used to probe for readiness.
  const p = await proxy(rs.uri([0]));
  const t = p.server.router.topology!;
  await until('the primary and both secondaries', () => t.primary !== null && t.usableServers.length === 3);
  const up = await readyz(p);
  assert.equal(up.status, 200);
  assert.equal(up.ready, true);
  assert.match(up.upstream, /^ReplicaSet rs0: /);

  // Member 1 takes over, then the seed (member 0) dies.
  rs.stepDown(1);
  await rs.kill(0);
  await until('member 1 is the primary and member 0 Unknown', () =>
    t.primary?.port === rs.members[1].port && [...t.allServers()].find((s) => s.port === rs.members[0].port)?.type === 'Unknown');
  const moved = await readyz(p);
  assert.equal(moved.status, 200, JSON.stringify(moved));
  assert.equal(moved.ready, true);

  // The primary dies too: member 2 is a secondary with nobody to follow.
  await rs.kill(1);
  await until('no primary', () => t.primary === null);
  const none = await readyz(p);
  assert.equal(none.status, 503);
  assert.equal(none.ready, false);
  assert.equal(none.reason, 'no_primary');
  assert.match(none.message!, /rs0 has no known primary \(1 secondary reachable\)/);

  // An election: ready again.
  rs.stepDown(2);
  await until('ready again with member 2 primary', async () => (await readyz(p)).status === 200);
  assert.equal(t.primary?.port, rs.members[2].port);
});

test('mongos list: ready while one router answers, also when the first seed is down; none → 503 no_router', async () => {
  const routers = await DevMongos.startMany(2);
  const open = new Set(routers);
  cleanups.push(async () => { for (const r of open) await r.server!.close(); });
  const p = await proxy(`mongodb://${routers.map((r) => r.address).join(',')}/`);
  const t = p.server.router.topology!;
  await until('both routers', () => t.usableServers.length === 2);
  assert.equal((await readyz(p)).status, 200);

  await routers[0].server!.close();
  open.delete(routers[0]);
  await until('router 0 out of selection', () => t.usableServers.length === 1);
  const one = await readyz(p);
  assert.equal(one.status, 200, JSON.stringify(one));
  assert.match(one.upstream, /^Sharded: /);

  await routers[1].server!.close();
  open.delete(routers[1]);
  await until('no router usable', () => t.usableServers.length === 0);
  const none = await readyz(p);
  assert.equal(none.status, 503);
  assert.equal(none.reason, 'no_router');
  assert.match(none.message!, /no mongos router answered its last check/);
});
