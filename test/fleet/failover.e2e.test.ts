// The leader of a three-instance fleet fails: killed with -9 mid-stage, another instance evaluates
// within the lease TTL plus etcd's lease-revocation check (and milliseconds) — it campaigns on the
// watch's delete of the leader key and starts evaluating as it wins — and the stage (with its
// stage_entered_at) is kept, with exactly one promotion; paused with SIGSTOP past its lease, it is
// replaced, and once resumed it follows the new leader and writes nothing.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Etcd3 } from 'etcd3';
import { until } from '../helpers/until.ts';
import { startFleet, traffic, type Fleet, type Instance } from './stack.ts';

const FILTER = { steps: [{ type: 'filter', config: { rules: [] } }] };
const TTL_S = 2;

async function evaluator(fleet: Fleet, except: string): Promise<Instance | null> {
  for (const x of fleet.instances) {
    if (x.id === except || !x.alive()) continue;
    const s = await x.call('GET', '/api/v1/fleet');
    if (s.body.evaluating === true && s.body.leader === x.id) return x;
  }
  return null;
}

async function start(fleet: Fleet, via: Instance, stage1: string): Promise<string> {
  const created = await via.call('POST', '/api/v1/canary', {
    pipeline_id: 'default', candidate_config: FILTER, auto_promote: true,
    stages: [{ traffic_pct: 20, min_duration: stage1, min_requests: 0 }, { traffic_pct: 40, min_duration: '1h', min_requests: 0 },
      { traffic_pct: 100, min_duration: '0', min_requests: 0 }],
    rollback_rules: { check_interval: '500ms', min_window_requests: 5 },
  });
  assert.equal(created.status, 201, JSON.stringify(created.body));
  return created.body.canary_id as string;
}

test('kill -9 the leader mid-stage: another instance takes over within the lease TTL + 0.75 s, keeps the stage and stage_entered_at, promotes once',
  async (t) => {
    const fleet = await startFleet(t, 3, { ttl: TTL_S });
    // When etcd revokes the dead leader's lease: the delete of the leader key, seen by a watch here.
    const etcd = new Etcd3({ hosts: fleet.etcd.endpoint });
    t.after(() => etcd.close());
    let revokedAt = 0;
    const watch = await etcd.watch().key('/fleet-e2e/leader').create();
    watch.on('delete', () => { revokedAt = Date.now(); });
    const old = fleet.byId((await fleet.leader())!);
    const others = fleet.instances.filter((x) => x !== old);
    const loads = others.map((x) => traffic(x.uri, 1000));
    t.after(() => Promise.all(loads.map((l) => l.stop())));
    const id = await start(fleet, others[0], '10s');
    // The record reaches the other instances through etcd's watch, not before the 201.
    let before: any = null;
    await until('the canary on another instance', async () => {
      const r = await others[1].call('GET', `/api/v1/canary/${id}`);
      if (r.status === 200) before = r.body;
      return before !== null;
    }, 10_000, 50);
    assert.equal(before.current_stage, 1);
    await new Promise((r) => setTimeout(r, 2000));
    old.kill('SIGKILL');
    const killedAt = Date.now();
    let next: Instance | null = null;
    await until('another instance to evaluate', async () => (next = await evaluator(fleet, old.id)) !== null, 20_000, 50);
    const took = Date.now() - killedAt;
    t.diagnostic(`takeover: lease revoked ${revokedAt - killedAt} ms after the kill, new leader evaluating ${took} ms after it (TTL ${TTL_S} s)`);
    // The lease expires at most a TTL after the kill (its last keep-alive came before), etcd revokes
    // it within its 0.5 s check, the followers campaign on the watch's delete and the winner evaluates
    // at once; 0.25 s is left for this loaded machine (and the 50 ms polling here).
    assert.ok(revokedAt > 0, 'the leader key was deleted when the lease expired');
    assert.ok(took <= TTL_S * 1000 + 750, `took over ${took} ms after the kill (lease TTL ${TTL_S} s; revoked after ${revokedAt - killedAt} ms)`);
    await watch.cancel();
    const after = (await next!.call('GET', `/api/v1/canary/${id}`)).body;
    assert.equal(after.current_stage, 1, 'the stage is kept');
    assert.equal(after.stage_entered_at, before.stage_entered_at, 'stage_entered_at is kept');
    // The stage's 10 s count from when it was entered, not from the takeover.
    await until('the promotion to stage 2 on both survivors', async () => {
      const s = await Promise.all(others.map((x) => x.call('GET', `/api/v1/canary/${id}`)));
      return s.every((x) => x.body.current_stage === 2);
    }, 30_000, 100);
    const history = (await next!.call('GET', `/api/v1/canary/${id}/history`)).body.history as any[];
    const promoted = history.filter((e) => e.event === 'promoted');
    assert.equal(promoted.length, 1, `one promotion: ${JSON.stringify(promoted)}`);
    const enteredMs = Date.parse(before.stage_entered_at);
    assert.ok(Date.parse(promoted[0].at) - enteredMs >= 10_000, 'promoted when the stage\'s min_duration was over, counted from its entry');
    await new Promise((r) => setTimeout(r, 1500));
    const still = (await next!.call('GET', `/api/v1/canary/${id}/history`)).body.history as any[];
    assert.equal(still.filter((e) => e.event === 'promoted').length, 1, 'no duplicate promotion');
    for (const l of loads) assert.equal(l.counts.failed, 0);
  });

test('SIGSTOP the leader past its lease: another instance leads; after SIGCONT the old leader follows and writes nothing', async (t) => {
  const fleet = await startFleet(t, 3, { ttl: TTL_S });
  const old = fleet.byId((await fleet.leader())!);
  const others = fleet.instances.filter((x) => x !== old);
  const loads = others.map((x) => traffic(x.uri, 1000));
  t.after(() => Promise.all(loads.map((l) => l.stop())));
  const id = await start(fleet, others[0], '1h');
  await until('an evaluation by the leader', async () => (await old.call('GET', `/api/v1/canary/${id}/metrics`)).body.samples.length > 0, 20_000, 100);
  old.kill('SIGSTOP');
  let next: Instance | null = null;
  await until('another instance to lead', async () => (next = await evaluator(fleet, old.id)) !== null, 20_000, 50);
  const state = (await next!.call('GET', `/api/v1/canary/${id}`)).body;
  await new Promise((r) => setTimeout(r, TTL_S * 1000));
  old.kill('SIGCONT');
  await until('the old leader to report the new one and follow', async () => {
    const s = (await old.call('GET', '/api/v1/fleet')).body;
    return s.leader === next!.id && s.evaluating === false;
  }, 10_000, 50);
  // The samples are the fleet's (in etcd), each naming the instance that evaluated: from here on only the new leader's are added.
  const by = async (who: string) => ((await old.call('GET', `/api/v1/canary/${id}/metrics`)).body.samples as any[])
    .filter((s) => s.evaluated_by === who).length;
  const [oldBefore, nextBefore] = [await by(old.id), await by(next!.id)];
  assert.ok(oldBefore > 0, 'the old leader\'s evaluations are in the series');
  await new Promise((r) => setTimeout(r, 2000));
  assert.equal(await by(old.id), oldBefore, 'the old leader evaluates no more');
  assert.ok(await by(next!.id) > nextBefore, 'the new leader evaluates, and every instance reads its samples');
  const now = (await next!.call('GET', `/api/v1/canary/${id}`)).body;
  assert.equal(now.version, state.version, 'nothing was written to the canary (no transition) by anyone');
  assert.equal(now.current_stage, 1);
  assert.ok(old.output().includes('this instance follows'), 'the old leader said it follows');
  const fleetNow = (await next!.call('GET', '/api/v1/fleet')).body;
  assert.deepEqual(fleetNow.instances.map((x: any) => x.instance_id), ['i1', 'i2', 'i3'], 'the old leader registered again');
  assert.equal(fleetNow.leader, next!.id);
});
