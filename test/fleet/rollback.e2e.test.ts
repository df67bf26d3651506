// Three real proxy processes in one fleet on a real etcd: a bad candidate is rolled back on all
// three within the sustained window + 2 s, decided on the evidence merged from the instances (the
// leader serves no traffic itself, so its own counts alone could never decide); every instance shows
// the evaluator's samples and last evaluation; a custom_metrics rule reads every instance's plugin
// metrics.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { until } from '../helpers/until.ts';
import { arms, startFleet, traffic } from './stack.ts';

const FILTER = { steps: [{ type: 'filter', config: { rules: [{ name: 'no-bad', action: 'deny', field: { path: 'filter.k', equals: 'bad' } }] } }] };

test('a bad candidate is rolled back on all three within sustained_duration + 2 s, on evidence merged from the instances that served it',
  async (t) => {
    const fleet = await startFleet(t, 3);
    const leader = (await fleet.leader())!;
    const followers = fleet.instances.filter((x) => x.id !== leader);
    // Traffic only through the followers: one request in five is denied by the candidate's filter.
    const loads = followers.map((x) => traffic(x.uri, 5));
    t.after(() => Promise.all(loads.map((l) => l.stop())));
    const sustainedMs = 3000;
    const created = await followers[0].call('POST', '/api/v1/canary', {
      pipeline_id: 'default', candidate_config: FILTER, auto_promote: false,
      stages: [{ traffic_pct: 50, min_duration: '0', min_requests: 0 }, { traffic_pct: 100, min_duration: '0', min_requests: 0 }],
      rollback_rules: { error_rate_delta_pct: 5, latency_p95_delta_ms: 5000, sustained_duration: '3s', check_interval: '1s', min_window_requests: 5 },
    });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const id = created.body.canary_id as string;
    const seen = new Map<string, number>();
    await until('every instance to have rolled back', async () => {
      await Promise.all(fleet.instances.map(async (x) => {
        if (seen.has(x.id)) return;
        const s = await x.call('GET', `/api/v1/canary/${id}`);
        if (s.body.status === 'rolled_back' && (await arms(x)).candidate === 0) seen.set(x.id, Date.now());
      }));
      return seen.size === 3;
    }, 60_000, 100);
    const history = (await fleet.byId(leader).call('GET', `/api/v1/canary/${id}/history`)).body.history as any[];
    const breach = history.find((e) => e.event === 'breach_started');
    const rolled = history.find((e) => e.event === 'rolled_back');
    assert.ok(breach !== undefined && rolled !== undefined, JSON.stringify(history));
    assert.equal(rolled.details.triggered_by, 'automatic');
    assert.deepEqual(rolled.details.evidence.instances_read, ['i1', 'i2', 'i3'], 'the decision read every instance');
    assert.deepEqual(rolled.details.evidence.unreadable, []);
    const breachAt = Date.parse(breach.at);
    for (const [xid, at] of seen) {
      assert.ok(at - breachAt <= sustainedMs + 1000 + 2000, `${xid} rolled back ${at - breachAt} ms after the breach began`);
    }
    // The leader served nothing: the decision was made on the followers' counts.
    const samples = (await fleet.byId(leader).call('GET', `/api/v1/canary/${id}/metrics`)).body.samples as any[];
    const counted = samples.reduce((n, s) => n + s.candidate.requests, 0);
    assert.ok(counted > 0, 'the leader\'s evaluation windows counted candidate requests it did not serve');
    assert.equal((await arms(fleet.byId(leader))).candidate, 0);
    const events = history.filter((e) => e.event === 'rolled_back');
    assert.equal(events.length, 1);
    // Every instance shows the fleet's evaluation: the same samples (the evaluator writes them through the
    // store) and the evaluator's last result, rules and stage figures in the status.
    const lead = (await fleet.byId(leader).call('GET', `/api/v1/canary/${id}`)).body;
    assert.equal(lead.evaluation.result, 'breaching');
    for (const x of followers) {
      assert.deepEqual((await x.call('GET', `/api/v1/canary/${id}/metrics`)).body.samples, samples, `${x.id} shows the fleet's samples`);
      const st = (await x.call('GET', `/api/v1/canary/${id}`)).body;
      assert.deepEqual([st.evaluation, st.rules, st.metrics, st.rollback_status.evidence], [lead.evaluation, lead.rules, lead.metrics,
        lead.rollback_status.evidence], `${x.id} shows the evaluator's last evaluation`);
    }
    for (const l of loads) assert.equal(l.counts.failed, 0);
  });

test('a custom_metrics rule reads the plugin metrics of every instance (the leader serves none): its fleet-wide reading rolls the candidate back ' +
  'on all three', async (t) => {
  // The metrics step counts one request per request on both graphs (proxy_plugin_requests_total).
  const fleet = await startFleet(t, 3, { extra: () => ({ pipeline: { id: 'default', request: [], response: ['metrics'] } }) });
  const leader = fleet.byId((await fleet.leader())!);
  const followers = fleet.instances.filter((x) => x !== leader);
  const loads = followers.map((x) => traffic(x.uri, 1000));
  t.after(() => Promise.all(loads.map((l) => l.stop())));
  // Breaches while candidate − baseline < 0.5 per request: a delta of 0 once both sides have readings (never on NaN).
  const created = await followers[1].call('POST', '/api/v1/canary', {
    pipeline_id: 'default', candidate_config: { steps: [{ type: 'logging', config: {} }] }, auto_promote: false,
    stages: [{ traffic_pct: 50, min_duration: '0', min_requests: 0 }, { traffic_pct: 100, min_duration: '0', min_requests: 0 }],
    rollback_rules: { error_rate_delta_pct: 50, latency_p95_delta_ms: 5000, sustained_duration: '2s', check_interval: '1s', min_window_requests: 5,
      custom_metrics: [{ metric: 'proxy_plugin_requests_total', threshold_delta: 0.5, comparison: 'less_than' }] },
  });
  assert.equal(created.status, 201, JSON.stringify(created.body));
  const id = created.body.canary_id as string;
  for (const x of fleet.instances) {
    await until(`${x.id} to roll back`, async () => (await x.call('GET', `/api/v1/canary/${id}`)).body.status === 'rolled_back', 60_000, 200);
  }
  const report = (await leader.call('GET', `/api/v1/canary/${id}/report`)).body;
  assert.equal(report.triggered_by, 'automatic');
  assert.deepEqual(report.triggering_rules.map((r: any) => r.rule), ['custom:proxy_plugin_requests_total'], JSON.stringify(report));
  assert.ok(Math.abs(report.triggering_rules[0].value) < 0.05, `per request, both graphs alike: ${report.triggering_rules[0].value}`);
  // The leader served nothing: it has no series of that metric at all, so the reading was the followers'.
  const own = await leader.call('GET', '/api/v1/fleet/evidence/default?custom=proxy_plugin_requests_total');
  assert.deepEqual(own.body.custom, { proxy_plugin_requests_total: { baseline: null, candidate: null } });
  const served = await followers[0].call('GET', '/api/v1/fleet/evidence/default?custom=proxy_plugin_requests_total');
  assert.equal(served.body.custom.proxy_plugin_requests_total.baseline.kind, 'counter');
  assert.ok(served.body.custom.proxy_plugin_requests_total.baseline.value > 0);
  const bad = await leader.call('GET', '/api/v1/fleet/evidence/default?custom=not_a_plugin_metric');
  assert.equal(bad.status, 400);
  assert.equal(bad.body.error.code, 'PROXY_ERR_BAD_QUERY');
  for (const l of loads) assert.equal(l.counts.failed, 0);
});

test('too few instances answer for the evidence: the window is inconclusive, the instance not read is named, and a bad candidate is not rolled ' +
  'back until it answers again', async (t) => {
  // Every instance must answer (quorum 100 %); a paused one stays registered (lease 10 s) but cannot answer within 500 ms.
  const fleet = await startFleet(t, 3, { ttl: 10, fleet: { evidence_quorum_pct: 100, evidence_timeout_ms: 500 } });
  const leader = fleet.byId((await fleet.leader())!);
  const [quiet, busy] = fleet.instances.filter((x) => x !== leader);
  const load = traffic(busy.uri, 5);
  t.after(() => load.stop());
  const created = await busy.call('POST', '/api/v1/canary', {
    pipeline_id: 'default', candidate_config: FILTER, auto_promote: false,
    stages: [{ traffic_pct: 50, min_duration: '0', min_requests: 0 }, { traffic_pct: 100, min_duration: '0', min_requests: 0 }],
    rollback_rules: { error_rate_delta_pct: 5, latency_p95_delta_ms: 5000, sustained_duration: '2s', check_interval: '1s', min_window_requests: 5 },
  });
  assert.equal(created.status, 201, JSON.stringify(created.body));
  const id = created.body.canary_id as string;
  await until(`${quiet.id} to split`, async () => (await quiet.call('GET', `/api/v1/canary/${id}`)).body.traffic_pct === 50, 10_000, 100);
  quiet.kill('SIGSTOP');
  t.after(() => { quiet.kill('SIGCONT'); });
  const history = async () => (await leader.call('GET', `/api/v1/canary/${id}/history`)).body.history as any[];
  await until('an inconclusive evaluation naming the paused instance', async () => (await history()).some((e) => e.event === 'evidence_incomplete'),
    20_000, 200);
  // Well past the sustained window with the candidate failing one request in five: no rollback.
  await new Promise((r) => setTimeout(r, 5000));
  const h = await history();
  assert.equal(h.some((e) => e.event === 'rolled_back'), false, 'no decision without the quorum');
  const incomplete = h.filter((e) => e.event === 'evidence_incomplete');
  assert.ok(incomplete.length >= 3);
  assert.deepEqual(incomplete[0].details.evidence.unreadable.map((u: any) => u.instance_id), [quiet.id]);
  assert.equal(incomplete[0].details.evidence.quorum, false);
  assert.equal((await leader.call('GET', `/api/v1/canary/${id}`)).body.status, 'active');
  quiet.kill('SIGCONT');
  await until('the rollback once every instance answers', async () => (await history()).some((e) => e.event === 'rolled_back'), 30_000, 200);
  const rolled = (await history()).find((e) => e.event === 'rolled_back');
  assert.deepEqual(rolled.details.evidence.instances_read.length, 3);
});
