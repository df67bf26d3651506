// A shadow canary across three real proxy processes in one fleet on a real etcd: every instance
// shadows its own requests per the shared spec; the divergences of all of them are counted and
// merged — in every instance's status, status feed and `…/diffs` (each diff naming its instance)
// and in the evaluation — while clients are served by the baseline; an exposed stage ends the
// shadowing on every instance; a divergence rule decided on the
// followers' figures (the leader serves nothing) rolls the canary back on all three.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { WebSocket } from 'ws';
import { until } from '../helpers/until.ts';
import { TOKEN, arms, startFleet, traffic, type Instance } from './stack.ts';

/** The candidate denies `k: "bad"`, which the baseline (no steps) forwards: an outcome divergence on those requests. */
const FILTER = { steps: [{ type: 'filter', config: { rules: [{ name: 'no-bad', action: 'deny', field: { path: 'filter.k', equals: 'bad' } }] } }] };
/** A shadow stage that never promotes by itself, then an exposed one. */
const HOLD = [{ traffic_pct: 0, min_duration: '1h', min_requests: 1_000_000 }, { traffic_pct: 100, min_duration: '0', min_requests: 0 }];

/** An instance's own shadow figures, from its evidence (null: none there). */
async function own(x: Instance): Promise<{ canary_id: string; sampled: number; diverged: number } | null> {
  return (await x.call('GET', '/api/v1/fleet/evidence/default')).body.shadow ?? null;
}

/** Waits for a status on an instance's WebSocket feed that `ok` accepts (the feed shows what the instance holds; it does not read the others). */
async function feedUntil(x: Instance, id: string, ok: (canary: any) => boolean, ms: number): Promise<any> {
  const ws = new WebSocket(`${x.controlUrl.replace('http', 'ws')}/api/v1/canary/${id}/feed?interval_ms=200`, { headers: { authorization: `Bearer ${TOKEN}` } });
  try {
    return await new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no accepted status on ${x.id}'s feed within ${ms} ms`)), ms);
      ws.on('message', (data) => {
        const m = JSON.parse(String(data));
        if (m.type === 'status' && ok(m.canary)) {
          clearTimeout(timer);
          resolve(m.canary);
        }
      });
      ws.on('error', reject);
    });
  } finally {
    ws.close();
  }
}

test('a shadow canary counts divergences on all three instances, merged in every instance\'s status and diffs, clients served by the baseline; ' +
  'an exposed stage ends the shadowing on all three; a divergence rollback decided on the followers\' figures reaches all three', async (t) => {
  const fleet = await startFleet(t, 3);
  const leader = fleet.byId((await fleet.leader())!);
  const followers = fleet.instances.filter((x) => x !== leader);

  // 1. Traffic through all three: one request in five carries k: "bad".
  const everywhere = fleet.instances.map((x) => traffic(x.uri, 5));
  t.after(() => Promise.all(everywhere.map((l) => l.stop())));
  const created = await followers[0].call('POST', '/api/v1/canary', {
    pipeline_id: 'default', candidate_config: FILTER, mode: 'shadow', shadow_pct: 100, auto_promote: false,
    stages: [HOLD[0], { traffic_pct: 50, min_duration: '1h', min_requests: 0 }, HOLD[1]],
    // In a shadow stage the built-in rules read the shadowed requests (a denial is an error there): none may breach here.
    rollback_rules: { check_interval: '1s', min_window_requests: 5, error_rate_delta_pct: 50 },
  });
  assert.equal(created.status, 201, JSON.stringify(created.body));
  const id = created.body.canary_id as string;
  for (const x of fleet.instances) {
    await until(`${x.id} to shadow and count divergences`, async () => {
      const f = await own(x);
      return f !== null && f.canary_id === id && f.diverged > 0;
    }, 30_000, 200);
  }
  // A follower's feed, before any read of its status: the evaluator's view brings the fleet's figures and
  // newest diffs (its own comparison's diffs name no instance).
  const seen = await feedUntil(followers[1], id, (c) => new Set(c.shadow.latest_diffs.map((d: any) => d.instance_id).filter(Boolean)).size >= 2, 30_000);
  assert.ok(seen.shadow.diverged > 0);
  assert.notEqual(seen.evaluation.result, 'pending', 'the evaluator\'s result is shown');
  for (const x of fleet.instances) {
    // What each instance had counted before this read: the merge counts at least all of it.
    const counted = await Promise.all(fleet.instances.map(own));
    const sampled = counted.reduce((n, f) => n + f!.sampled, 0);
    const diverged = counted.reduce((n, f) => n + f!.diverged, 0);
    let d: any;
    await until(`${x.id}'s diffs to hold diffs from all three`, async () => {
      d = (await x.call('GET', `/api/v1/canary/${id}/diffs`)).body;
      return new Set(d.diffs.map((r: any) => r.instance_id)).size === 3;
    }, 20_000, 200);
    assert.ok(d.sampled >= sampled && d.diverged >= diverged, `${x.id}: ${d.sampled}/${d.diverged} merged, ${sampled}/${diverged} counted before`);
    assert.equal(d.by_kind.outcome, d.diverged, 'the filter\'s denials are outcome divergences');
    assert.ok(d.diffs.length <= 100, 'bounded by max_diffs');
    assert.ok(d.diffs.every((r: any) => r.kind === 'outcome' && r.baseline === 'forward' && /^reject:/.test(r.candidate)), JSON.stringify(d.diffs[0]));
    const st = (await x.call('GET', `/api/v1/canary/${id}`)).body;
    assert.equal(st.shadow.shadow_pct, 100);
    assert.ok(st.shadow.diverged >= diverged, `${x.id}'s status shows the fleet's divergences`);
  }
  await Promise.all(everywhere.map((l) => l.stop()));
  for (const l of everywhere) assert.deepEqual([l.counts.denied, l.counts.failed], [0, 0], 'every client was served by the baseline');
  // Promoted into an exposed stage without a shadow_pct of its own: the shadowing ends on every instance.
  const exposed = fleet.instances.map((x) => traffic(x.uri, 5));
  t.after(() => Promise.all(exposed.map((l) => l.stop())));
  assert.equal((await leader.call('POST', `/api/v1/canary/${id}/promote`, { force: true })).status, 200);
  for (const x of fleet.instances) {
    await until(`${x.id} to serve the candidate at stage 2`, async () => (await arms(x)).candidate > 20, 20_000, 200);
  }
  const shadowedAt = await Promise.all(fleet.instances.map(own));
  await new Promise((r) => setTimeout(r, 1500));
  assert.deepEqual((await Promise.all(fleet.instances.map(own))).map((f) => f!.sampled), shadowedAt.map((f) => f!.sampled));
  await Promise.all(exposed.map((l) => l.stop()));
  assert.equal((await leader.call('POST', `/api/v1/canary/${id}/rollback`, { reason: 'counted' })).status, 200);

  // 2. A divergence rule; traffic through the followers only.
  const loads = followers.map((x) => traffic(x.uri, 5));
  t.after(() => Promise.all(loads.map((l) => l.stop())));
  const second = await followers[1].call('POST', '/api/v1/canary', {
    pipeline_id: 'default', candidate_config: FILTER, mode: 'shadow', shadow_pct: 100, auto_promote: false, stages: HOLD,
    // Only the divergence rule may breach.
    rollback_rules: { check_interval: '1s', sustained_duration: '2s', min_window_requests: 5, divergence_rate: 0.1, error_rate_delta_pct: 50 },
  });
  assert.equal(second.status, 201, JSON.stringify(second.body));
  const id2 = second.body.canary_id as string;
  for (const x of fleet.instances) {
    await until(`${x.id} to roll back`, async () => (await x.call('GET', `/api/v1/canary/${id2}`)).body.status === 'rolled_back', 60_000, 200);
  }
  const report = (await followers[0].call('GET', `/api/v1/canary/${id2}/report`)).body;
  assert.equal(report.triggered_by, 'automatic');
  assert.deepEqual(report.triggering_rules.map((r: any) => r.rule), ['divergence_rate'], JSON.stringify(report));
  const history = (await followers[1].call('GET', `/api/v1/canary/${id2}/history`)).body.history as any[];
  assert.deepEqual(history.find((e) => e.event === 'rolled_back').details.evidence.instances_read, ['i1', 'i2', 'i3']);
  // The leader shadowed nothing: the decision was made on the followers' divergences.
  const lead = await own(leader);
  assert.equal(lead?.sampled ?? 0, 0);
  // Rolled back everywhere: nothing more is shadowed, on any instance, while the followers still serve.
  const at = await Promise.all(followers.map(own));
  await new Promise((r) => setTimeout(r, 1500));
  const later = await Promise.all(followers.map(own));
  assert.deepEqual(later.map((f) => f?.sampled), at.map((f) => f?.sampled));
  for (const l of loads) assert.deepEqual([l.counts.denied, l.counts.failed], [0, 0]);
});
