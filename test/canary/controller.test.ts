// Every row of SPEC §3's state table, with an injected clock and metric windows the test fills; the
// sustained timer (start, continue, reset), windows without evidence, the additive threshold
// example, --force, manual gates, the promote/rollback race, persistence across a restart.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { initHistograms } from '../../runtime/profiling/index.ts';
import { CanaryError } from '../../runtime/canary/index.ts';
import { harness, LOGGING_CANDIDATE, type Harness } from './helpers.ts';

/** Who asks, for slot.pick(): any client, a command without an lsid. */
const ANY_CLIENT = { id: 1, appName: '', clientAddress: '127.0.0.1:1', user: '' };
const NO_BODY = new Uint8Array(0);

await initHistograms();

const FAST_RULES = { error_rate_delta_pct: 5, latency_p95_delta_ms: 100, sustained_duration: '10s', check_interval: '5s', min_window_requests: 20 };
const LOOSE_PROMOTE = { min_duration: '0', min_requests: 0, max_error_rate_delta_pct: 1, max_latency_p95_delta_ms: 20 };

function body(extra: Record<string, unknown> = {}) {
  return {
    pipeline_id: 'default', candidate_config: LOGGING_CANDIDATE, rollback_rules: FAST_RULES, auto_promote_rules: LOOSE_PROMOTE,
    stages: [
      { traffic_pct: 10, min_duration: '10s', min_requests: 100 },
      { traffic_pct: 50, min_duration: '10s', min_requests: 100 },
      { traffic_pct: 100, min_duration: '0', min_requests: 0 },
    ],
    ...extra,
  };
}

/** One check interval passes with these windows; then the controller evaluates. */
async function tick(h: Harness, id: string, base: [number, number, number?], cand: [number, number, number?], ms = 5000) {
  h.clock.advance(ms);
  h.metrics.feed('baseline', base[0], base[1], base[2] ?? 1000);
  h.metrics.feed('candidate', cand[0], cand[1], cand[2] ?? 1000);
  return h.controller.evaluate(id);
}

async function rejects(p: Promise<unknown> | (() => unknown), code: string) {
  try {
    await (typeof p === 'function' ? p() : p);
  } catch (err) {
    assert.ok(err instanceof CanaryError, String(err));
    assert.equal(err.code, code, err.message);
    return err;
  }
  assert.fail(`expected ${code}`);
}

test('start: candidate loaded and split before active; canary.started; a second canary on the pipeline is refused (409)', async () => {
  const h = harness();
  const r = await h.controller.start(body()) as Record<string, any>;
  assert.equal(r.status, 'active');
  assert.equal(r.current_stage, 1);
  assert.equal(r.traffic_pct, 10);
  assert.match(r.candidate_version, /^sha256:[0-9a-f]{12}$/);
  assert.notEqual(r.candidate_version, r.baseline_version);
  const cand = h.manager.candidate('default');
  assert.ok(cand !== null && cand.key.variant === 'candidate');
  assert.deepEqual(cand.requestSteps.map((s) => s.id), ['wasm:logging']);
  assert.equal(h.manager.slot('default').selector !== null, true);
  assert.deepEqual(h.sink.types(), ['canary.started']);
  await rejects(h.controller.start(body()), 'PROXY_ERR_CANARY_EXISTS');
  await rejects(h.controller.start(body({ pipeline_id: 'nope' })), 'PROXY_ERR_CANARY_UNKNOWN_PIPELINE');
});

test('start: a candidate that fails to load is refused with the reason and nothing runs', async () => {
  const h = harness();
  const err = await rejects(h.controller.start(body({ candidate_config: { steps: [{ type: 'redact', plugin_id: 'no/such/module.wasm' }] } })),
    'PROXY_ERR_CANARY_CANDIDATE_REFUSED');
  assert.match(err.message, /no\/such\/module\.wasm|ENOENT|not found/i);
  const err2 = await rejects(h.controller.start(body({ candidate_config: { steps: [{ type: 'filter',
    config: { rules: [{ action: 'maybe' }] } }] } })), 'PROXY_ERR_CANARY_CANDIDATE_REFUSED');
  assert.match(err2.message, /filter/);
  assert.equal(h.manager.candidate('default'), null);
  assert.equal(h.controller.list().total, 0);
  assert.deepEqual(h.sink.types(), []);
});

test('start: invalid stages, rules, traffic and body are refused with their codes', async () => {
  const h = harness();
  await rejects(h.controller.start(body({ stages: [] })), 'PROXY_ERR_CANARY_INVALID_STAGES');
  await rejects(h.controller.start(body({ stages: [{ traffic_pct: 101, min_duration: '0', min_requests: 0 }] })), 'PROXY_ERR_CANARY_INVALID_STAGES');
  await rejects(h.controller.start(body({ stages: [{ traffic_pct: 50, min_duration: '0', min_requests: 0 },
    { traffic_pct: 10, min_duration: '0', min_requests: 0 }] })), 'PROXY_ERR_CANARY_INVALID_STAGES');
  await rejects(h.controller.start(body({ stages: [{ traffic_pct: 5, min_duration: 'soon', min_requests: 0 }] })), 'PROXY_ERR_CANARY_INVALID_STAGES');
  await rejects(h.controller.start(body({ rollback_rules: { sustained_duration: '5 minutes' } })), 'PROXY_ERR_CANARY_INVALID_RULES');
  await rejects(h.controller.start(body({ rollback_rules: { custom_metrics: [{ metric: 'proxy_plugin_x', threshold_delta: 1,
    comparison: 'about' }] } })), 'PROXY_ERR_CANARY_INVALID_RULES');
  await rejects(h.controller.start(body({ initial_traffic_pct: 150 })), 'PROXY_ERR_CANARY_INVALID_TRAFFIC');
  await rejects(h.controller.start(body({ initial_traffic_pct: 2.5 })), 'PROXY_ERR_CANARY_INVALID_TRAFFIC');
  await rejects(h.controller.start({ pipeline_id: 7, candidate_config: LOGGING_CANDIDATE }), 'PROXY_ERR_BAD_BODY');
  await rejects(h.controller.start([]), 'PROXY_ERR_BAD_BODY');
  await rejects(h.controller.start(body({ surprise: 1 })), 'PROXY_ERR_BAD_BODY');
});

test('start without pipeline_id: the default pipeline', async () => {
  const h = harness();
  const r = await h.controller.start({ candidate_config: LOGGING_CANDIDATE }) as Record<string, any>;
  assert.equal(r.pipeline_id, 'default');
  assert.notEqual(h.manager.candidate('default'), null);
});

test('config defaults apply to a canary started without stages or rules; the request overrides them key by key', async () => {
  const h = harness({ config: { canary: { auto_promote: true, stages: [{ traffic_pct: 7, min_duration: '1m', min_requests: 5 },
    { traffic_pct: 100, min_duration: '0', min_requests: 0 }] }, rollback_rules: { error_rate_delta_pct: 2, check_interval: '7s' } } });
  const r = await h.controller.start({ pipeline_id: 'default', candidate_config: LOGGING_CANDIDATE,
    rollback_rules: { latency_p95_delta_ms: 3 } }) as Record<string, any>;
  const rec = h.controller.record(r.canary_id);
  assert.equal(rec.traffic_pct, 7);
  assert.equal(rec.spec.auto_promote, true);
  assert.equal(rec.spec.rollback_rules.error_rate_delta_pct, 2);
  assert.equal(rec.spec.rollback_rules.check_interval, '7s');
  assert.equal(rec.spec.rollback_rules.latency_p95_delta_ms, 3);
});

test('auto-promotion: only when all four conditions hold (min_duration, min_requests, error delta, P95 delta); canary.promoted', async () => {
  const h = harness();
  const { canary_id: id } = await h.controller.start(body({ auto_promote: true })) as { canary_id: string };
  // 5 s at stage, 50 candidate requests: neither time nor volume yet.
  let ev = await tick(h, id, [450, 0], [50, 0]);
  assert.equal(ev!.promotable, false);
  assert.deepEqual(ev!.conditions.filter((c) => !c.met).map((c) => c.condition), ['min_duration', 'min_requests']);
  // 10 s, 100 requests, but candidate errors 2 % over the stage (> max 1 point): no promotion.
  ev = await tick(h, id, [450, 0], [50, 2]);
  assert.equal(h.controller.record(id).current_stage, 1);
  assert.deepEqual(ev!.conditions.filter((c) => !c.met).map((c) => c.condition), ['max_error_rate_delta_pct']);
  // More clean traffic brings the stage's delta under 1 point (2 / 200 = 1 %): promoted.
  ev = await tick(h, id, [900, 0], [100, 0]);
  assert.equal(ev!.promotable, true);
  const r = h.controller.record(id);
  assert.equal(r.current_stage, 2);
  assert.equal(r.traffic_pct, 50);
  assert.equal(r.stage_candidate_requests, 0);
  assert.deepEqual(h.sink.types(), ['canary.started', 'canary.promoted']);
  assert.equal(h.sink.events[1].event.previous_stage, 1);
  // P95 delta above max_latency_p95_delta_ms (20 ms) blocks promotion at stage 2.
  await tick(h, id, [500, 0, 1000], [500, 0, 40_000], 11_000);
  assert.equal(h.controller.record(id).current_stage, 2);
  const st = h.controller.status(id) as any;
  assert.equal(st.promotion.conditions.find((c: any) => c.condition === 'max_latency_p95_delta_ms').met, false);
});

test('windows with too few requests are no evidence: they never promote and neither start nor reset the sustained timer', async () => {
  const h = harness();
  const { canary_id: id } = await h.controller.start(body({ auto_promote: true,
    stages: [{ traffic_pct: 10, min_duration: '0', min_requests: 0 }, { traffic_pct: 100, min_duration: '0',
      min_requests: 0 }] })) as { canary_id: string };
  // Few requests, even perfect ones: inconclusive, not promoted.
  let ev = await tick(h, id, [5, 0], [5, 0]);
  assert.equal(ev!.result, 'inconclusive');
  assert.equal(ev!.promotable, false);
  assert.equal(h.controller.record(id).current_stage, 1);
  const st = h.controller.status(id) as any;
  assert.equal(st.rollback_status.evidence, 'inconclusive');
  assert.deepEqual(st.evaluation.window_requests, { baseline: 5, candidate: 5 });
  assert.ok(st.rules.every((r: any) => r.state === 'no_data' && r.value === null));
  // A breach starts the timer (at the start of the window that showed it) ...
  ev = await tick(h, id, [100, 0], [100, 50]);
  const since = h.controller.record(id).timers.error_rate_delta_pct;
  assert.equal(since, h.clock.now() - 5000);
  // ... an inconclusive window (all-error candidate, 3 requests) neither resets nor restarts it ...
  ev = await tick(h, id, [100, 0], [3, 0]);
  assert.equal(ev!.result, 'inconclusive');
  assert.equal(h.controller.record(id).timers.error_rate_delta_pct, since);
  // ... and the next breaching window, 15 s after the breach began, rolls back.
  ev = await tick(h, id, [100, 0], [100, 50]);
  assert.equal(h.controller.record(id).status, 'rolled_back');
});

test('sustained timer: starts on a breach, continues, resets when the delta falls back, rolls back after sustained_duration', async () => {
  const h = harness();
  const { canary_id: id } = await h.controller.start(body()) as { canary_id: string };
  // The timer starts where the window that showed the breach began (the previous evaluation).
  await tick(h, id, [100, 0], [100, 20]); // breach over the window (t1 − 5 s, t1]
  const t1 = h.clock.now();
  assert.equal(h.controller.record(id).timers.error_rate_delta_pct, t1 - 5000);
  await tick(h, id, [100, 0], [100, 0]); // back within: reset
  assert.equal(h.controller.record(id).timers.error_rate_delta_pct, undefined);
  await tick(h, id, [100, 0], [100, 20]); // a new breach: the timer starts again
  const t3 = h.clock.now();
  assert.equal(h.controller.record(id).timers.error_rate_delta_pct, t3 - 5000);
  assert.equal(h.controller.record(id).status, 'active'); // 5 s of breach: still active
  const st = h.controller.status(id) as any;
  assert.equal(st.rollback_status.error_rate_sustained_for, '5s');
  assert.equal(st.rollback_status.healthy, false);
  await tick(h, id, [100, 0], [100, 20]); // two windows, 10 s = sustained_duration: rolled back
  const r = h.controller.record(id);
  assert.equal(r.status, 'rolled_back');
  assert.equal(r.outcome!.triggered_by, 'automatic');
  assert.equal(r.outcome!.rules[0].rule, 'error_rate_delta_pct');
  assert.equal(r.outcome!.rules[0].sustained_for, '10s');
  assert.equal(h.manager.candidate('default'), null);
  assert.equal(h.manager.slot('default').selector, null);
  const types = h.sink.types();
  assert.deepEqual(types, ['canary.started', 'canary.threshold_warning', 'canary.threshold_warning', 'canary.rolled_back']);
  const rep = h.controller.report(id) as any;
  assert.equal(rep.outcome, 'rolled_back');
  assert.equal(rep.triggering_rules[0].rule, 'error_rate_delta_pct');
  assert.equal(rep.timeline.length, 1);
  assert.ok(rep.final_comparison.deltas.error_rate_pct > 5);
});

test('additive threshold: baseline 0.02 % and threshold 5.0 trigger above 5.02 %, not at it', async () => {
  const h = harness();
  const { canary_id: id } = await h.controller.start(body({ rollback_rules: { ...FAST_RULES, sustained_duration: '0' } })) as { canary_id: string };
  let ev = await tick(h, id, [10_000, 2], [10_000, 502]); // 0.02 % vs 5.02 %: delta 5.00, not above
  assert.equal(ev!.rules[0].value, 5);
  assert.equal(ev!.rules[0].met, false);
  assert.equal(h.controller.record(id).status, 'active');
  ev = await tick(h, id, [10_000, 2], [10_000, 503]); // 5.03 %: above 5.02
  assert.equal(ev!.rules[0].met, true);
  assert.equal(h.controller.record(id).status, 'rolled_back');
});

test('P95 latency delta in ms and a custom metric rule roll back; values compared with the threshold, never NaN', async () => {
  const h = harness();
  const rules = { ...FAST_RULES, sustained_duration: '0', custom_metrics: [{ metric: 'proxy_plugin_x_errors_total', threshold_delta: 0.1,
    comparison: 'greater_than' }] };
  const { canary_id: id } = await h.controller.start(body({ rollback_rules: rules })) as { canary_id: string };
  // No custom series yet: the custom rule has no data (not a breach).
  let ev = await tick(h, id, [100, 0, 1000], [100, 0, 1000]);
  assert.equal(ev!.rules.find((r) => r.rule === 'custom:proxy_plugin_x_errors_total')!.state, 'no_data');
  // Counter per request: candidate 0.5 per request vs baseline 0 → delta 0.5 > 0.1.
  h.metrics.customs.set('proxy_plugin_x_errors_total/default/baseline', { kind: 'counter', value: 0, sum: 0, count: 0 });
  h.metrics.customs.set('proxy_plugin_x_errors_total/default/candidate', { kind: 'counter', value: 0, sum: 0, count: 0 });
  await tick(h, id, [100, 0], [100, 0]);
  h.metrics.customs.set('proxy_plugin_x_errors_total/default/candidate', { kind: 'counter', value: 50, sum: 0, count: 0 });
  ev = await tick(h, id, [100, 0], [100, 0]);
  const custom = ev!.rules.find((r) => r.rule === 'custom:proxy_plugin_x_errors_total')!;
  assert.equal(custom.value, 0.5);
  assert.equal(custom.met, true);
  assert.equal(h.controller.record(id).status, 'rolled_back');

  const h2 = harness();
  const { canary_id: id2 } = await h2.controller.start(body({ rollback_rules: { ...FAST_RULES, sustained_duration: '0' } })) as { canary_id: string };
  ev = await tick(h2, id2, [100, 0, 1000], [100, 0, 150_000]); // P95 1 ms vs 150 ms: delta ≈ 149 > 100
  const lat = ev!.rules.find((r) => r.rule === 'latency_p95_delta_ms')!;
  assert.ok(lat.value! > 100 && lat.value! < 151, String(lat.value));
  assert.equal(h2.controller.record(id2).status, 'rolled_back');
});

test('threshold_warning: once per episode when a delta passes warning_share (0.8) of its threshold', async () => {
  const h = harness();
  const { canary_id: id } = await h.controller.start(body()) as { canary_id: string };
  await tick(h, id, [1000, 0], [100, 3]); // 3 points: below 4
  assert.deepEqual(h.sink.types(), ['canary.started']);
  let ev = await tick(h, id, [1000, 0], [200, 9]); // 4.5 points: warning
  assert.equal(ev!.result, 'warning');
  ev = await tick(h, id, [1000, 0], [500, 23]); // still near: no second warning
  assert.deepEqual(h.sink.types(), ['canary.started', 'canary.threshold_warning']);
  const w = h.sink.events[1].event;
  assert.equal(w.rules![0].rule, 'error_rate_delta_pct');
  assert.equal(w.rules![0].threshold, 5);
  await tick(h, id, [1000, 0], [100, 0]); // the episode ends
  await tick(h, id, [1000, 0], [200, 9]); // a new approach warns again
  assert.deepEqual(h.sink.types(), ['canary.started', 'canary.threshold_warning', 'canary.threshold_warning']);
});

test('manual promote: refused while auto-promotion runs (409), needs min_duration/min_requests unless force', async () => {
  const h = harness();
  const { canary_id: auto } = await h.controller.start(body({ auto_promote: true })) as { canary_id: string };
  await rejects(h.controller.promote(auto), 'PROXY_ERR_CANARY_INVALID_STATE');
  h.controller.rollback(auto, { reason: 'next test' });

  const { canary_id: id } = await h.controller.start(body({ auto_promote: false })) as { canary_id: string };
  const err = await rejects(h.controller.promote(id), 'PROXY_ERR_CANARY_INVALID_STATE');
  assert.match(err.message, /min_duration/);
  const r = await h.controller.promote(id, { force: true }) as any;
  assert.equal(r.previous_stage, 1);
  assert.equal(r.current_stage, 2);
  assert.equal(r.traffic_pct, 50);
  assert.match(r.message, /stage 2 of 3/);
  // Unforced, once time and volume are there.
  await tick(h, id, [900, 0], [100, 0], 11_000);
  // Auto-promotion is off: the evaluation did not promote.
  assert.equal(h.controller.record(id).current_stage, 2);
  const r2 = await h.controller.promote(id) as any;
  assert.equal(r2.status, 'completed');
  assert.deepEqual(h.sink.types().slice(-3), ['canary.promoted', 'canary.promoted', 'canary.completed']);
});

test('manual gate: auto conditions met → paused; promote resumes; a failing candidate is rolled back even while paused', async () => {
  const h = harness();
  const stages = [
    { traffic_pct: 10, min_duration: '0', min_requests: 0, manual_gate: true },
    { traffic_pct: 50, min_duration: '0', min_requests: 0, manual_gate: true },
    { traffic_pct: 100, min_duration: '0', min_requests: 0 },
  ];
  const { canary_id: id } = await h.controller.start(body({ auto_promote: true, stages })) as { canary_id: string };
  await tick(h, id, [100, 0], [100, 0]);
  assert.equal(h.controller.record(id).status, 'paused');
  assert.equal(h.controller.record(id).current_stage, 1);
  await tick(h, id, [100, 0], [100, 0]);
  assert.equal(h.controller.record(id).status, 'paused');
  const r = await h.controller.promote(id) as any; // the gate is the approval: no force needed
  assert.equal(r.current_stage, 2);
  assert.equal(h.controller.record(id).status, 'active');
  await tick(h, id, [100, 0], [100, 0]);
  assert.equal(h.controller.record(id).status, 'paused');
  // Paused at the gate, the candidate starts failing: still rolled back.
  await tick(h, id, [100, 0], [100, 30]);
  await tick(h, id, [100, 0], [100, 30]);
  await tick(h, id, [100, 0], [100, 30]);
  assert.equal(h.controller.record(id).status, 'rolled_back');
  assert.equal(h.controller.record(id).outcome!.triggered_by, 'automatic');
});

test('last stage → completed: the candidate becomes the baseline, the old one is retained, restorable, released after the grace period', async () => {
  const h = harness({ gracePeriodMs: 300 });
  const before = h.manager.get('default');
  const { canary_id: id } = await h.controller.start(body({ stages: [{ traffic_pct: 20, min_duration: '0', min_requests: 0 },
    { traffic_pct: 100, min_duration: '0', min_requests: 0 }] })) as { canary_id: string };
  const r = await h.controller.promote(id) as any;
  assert.equal(r.status, 'completed');
  const now = h.manager.get('default');
  assert.notEqual(now, before);
  assert.equal(now.key.variant, 'baseline');
  assert.deepEqual(now.requestSteps.map((s) => s.id), ['wasm:logging']);
  assert.equal(h.manager.candidate('default'), null);
  assert.equal(h.sink.types().at(-1), 'canary.completed');
  // Terminal for promote, rollback, PATCH.
  await rejects(h.controller.promote(id), 'PROXY_ERR_CANARY_INVALID_STATE');
  await rejects(() => h.controller.rollback(id), 'PROXY_ERR_CANARY_INVALID_STATE');
  await rejects(() => h.controller.patch(id, 10), 'PROXY_ERR_CANARY_INVALID_STATE');
  // Restore within the grace period.
  const res = h.controller.restoreBaseline(id) as any;
  assert.equal(res.baseline_version, h.controller.record(id).baseline_version);
  assert.equal(h.manager.get('default'), before);
  await rejects(() => h.controller.restoreBaseline(id), 'PROXY_ERR_CANARY_INVALID_STATE');
  // A second canary completes; after the grace period its old baseline is released.
  const { canary_id: id2 } = await h.controller.start(body({ stages: [{ traffic_pct: 100, min_duration: '0', min_requests: 0 }] })) as { canary_id: string };
  assert.equal(h.controller.record(id2).status, 'completed');
  await new Promise((r) => setTimeout(r, 400));
  await rejects(() => h.controller.restoreBaseline(id2), 'PROXY_ERR_CANARY_INVALID_STATE');
  assert.equal((h.controller.history(id2) as any).history.at(-1).event, 'baseline_released');
});

test('rollback: manual, always; terminal; the candidate unloaded and 100 % to the baseline', async () => {
  const h = harness();
  const { canary_id: id } = await h.controller.start(body()) as { canary_id: string };
  await tick(h, id, [900, 0], [100, 0]);
  const r = h.controller.rollback(id, { reason: 'looks odd' }) as any;
  assert.equal(r.status, 'rolled_back');
  assert.equal(r.triggered_by, 'manual');
  assert.equal(r.reason, 'looks odd');
  assert.equal(r.final_metrics.candidate.requests, 100);
  assert.equal(r.final_metrics.baseline.requests, 900);
  assert.equal(h.manager.candidate('default'), null);
  assert.equal(h.manager.slot('default').pick(ANY_CLIENT, NO_BODY, -1), h.manager.get('default'));
  await rejects(() => h.controller.rollback(id), 'PROXY_ERR_CANARY_INVALID_STATE');
  await rejects(h.controller.promote(id, { force: true }), 'PROXY_ERR_CANARY_INVALID_STATE');
  assert.deepEqual(h.sink.types(), ['canary.started', 'canary.rolled_back']);
  // A new canary may start on the pipeline.
  await h.controller.start(body());
});

test('PATCH: only traffic_pct changes, stage unchanged; out of range refused', async () => {
  const h = harness();
  const { canary_id: id } = await h.controller.start(body()) as { canary_id: string };
  const r = h.controller.patch(id, 33) as any;
  assert.equal(r.traffic_pct, 33);
  assert.equal(h.controller.record(id).current_stage, 1);
  await rejects(() => h.controller.patch(id, 101), 'PROXY_ERR_CANARY_INVALID_TRAFFIC');
  await rejects(() => h.controller.patch(id, -1), 'PROXY_ERR_CANARY_INVALID_TRAFFIC');
  await rejects(() => h.controller.patch(id, '50'), 'PROXY_ERR_CANARY_INVALID_TRAFFIC');
  assert.deepEqual(h.sink.types(), ['canary.started']);
});

test('race: a promote that completes and a rollback sent together — exactly one wins, the other gets 409', async () => {
  for (const order of ['promote-first', 'rollback-first'] as const) {
    const h = harness();
    const { canary_id: id } = await h.controller.start(body({ stages: [{ traffic_pct: 10, min_duration: '0', min_requests: 0 },
      { traffic_pct: 100, min_duration: '0', min_requests: 0 }] })) as { canary_id: string };
    const ops = order === 'promote-first'
      ? [h.controller.promote(id), Promise.resolve().then(() => h.controller.rollback(id, { reason: 'race' }))]
      : [Promise.resolve().then(() => h.controller.rollback(id, { reason: 'race' })), h.controller.promote(id)];
    const results = await Promise.allSettled(ops);
    const won = results.filter((x) => x.status === 'fulfilled');
    const lost = results.filter((x) => x.status === 'rejected') as PromiseRejectedResult[];
    assert.equal(won.length, 1, order);
    assert.equal(lost.length, 1, order);
    assert.ok(lost[0].reason instanceof CanaryError && ['PROXY_ERR_CANARY_CONFLICT', 'PROXY_ERR_CANARY_INVALID_STATE'].includes(lost[0].reason.code),
      String(lost[0].reason));
    // The loser left no trace: one terminal event, and the graphs agree with the status.
    const status = h.controller.record(id).status;
    const types = h.sink.types();
    assert.equal(types.filter((t) => t === 'canary.completed' || t === 'canary.rolled_back').length, 1);
    if (status === 'rolled_back') assert.deepEqual(h.manager.get('default').requestSteps.map((s) => s.id), []);
    else assert.deepEqual(h.manager.get('default').requestSteps.map((s) => s.id), ['wasm:logging']);
    assert.equal(h.manager.candidate('default'), null);
  }
});

test('compare-and-set: two transitions sent with the same expected_version — the second gets 409', async () => {
  const h = harness();
  const { canary_id: id } = await h.controller.start(body()) as { canary_id: string };
  const v = h.controller.record(id).version;
  await h.controller.promote(id, { force: true, expectedVersion: v });
  await rejects(() => h.controller.rollback(id, { expectedVersion: v }), 'PROXY_ERR_CANARY_CONFLICT');
  assert.equal(h.controller.record(id).status, 'active');
});

test('restart: an active canary resumes at its stage, candidate rebuilt before the split, timers from persisted absolute times', async () => {
  const h = harness();
  const { canary_id: id } = await h.controller.start(body({ auto_promote: false })) as { canary_id: string };
  await h.controller.promote(id, { force: true });
  await tick(h, id, [100, 0], [100, 30]); // breach starts
  const since = h.controller.record(id).timers.error_rate_delta_pct;
  const entered = h.controller.record(id).stage_entered_at;
  await h.controller.close();
  h.store.close();
  // A new process: new store handle on the same file, new graphs, same (moved-on) clock.
  h.clock.advance(7000);
  const h2 = harness({ dir: h.dir, clock: h.clock });
  assert.equal(h2.manager.candidate('default'), null);
  await h2.controller.resume();
  const r = h2.controller.record(id);
  assert.equal(r.status, 'active');
  assert.equal(r.current_stage, 2);
  assert.equal(r.traffic_pct, 50);
  assert.equal(r.stage_entered_at, entered);
  assert.equal(r.timers.error_rate_delta_pct, since);
  assert.ok(h2.manager.candidate('default') !== null);
  assert.equal((h2.controller.history(id) as any).history.at(-1).event, 'resumed');
  // The next breaching window comes 17 s after the breach began (> 10 s): rolled back at once.
  await tick(h2, id, [100, 0], [100, 30]);
  assert.equal(h2.controller.record(id).status, 'rolled_back');
  assert.equal(h2.controller.record(id).outcome!.rules[0].sustained_for, '17s');
});

test('history, report and metrics samples are persisted and ordered', async () => {
  const h = harness();
  const { canary_id: id } = await h.controller.start(body({ description: 'logging v2' })) as { canary_id: string };
  await tick(h, id, [95, 1], [5, 0]);
  await tick(h, id, [95, 0], [5, 0]);
  await h.controller.promote(id, { force: true });
  h.controller.rollback(id, { reason: 'done' });
  const hist = h.controller.history(id) as any;
  assert.equal(hist.description, 'logging v2');
  assert.deepEqual(hist.history.map((e: any) => e.event), ['started', 'promoted', 'rolled_back']);
  const s = await h.controller.samples(id);
  assert.equal(s.samples.length, 2);
  assert.equal(s.samples[0].baseline.requests, 95);
  assert.equal(s.samples[0].baseline.errors, 1);
  assert.equal(s.samples[0].candidate.requests, 5);
  const rep = h.controller.report(id) as any;
  assert.equal(rep.description, 'logging v2');
  assert.deepEqual(rep.timeline.map((t: any) => [t.stage, t.traffic_pct]), [[1, 10], [2, 50]]);
  assert.equal(rep.triggered_by, 'manual');
  assert.deepEqual(rep.triggering_rules, []);
});
