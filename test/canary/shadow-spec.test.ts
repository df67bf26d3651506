// A shadow canary's start request (runtime/canary/spec.ts) and its rules in the evaluation
// (runtime/canary/evaluator.ts): mode and shadow_pct, the shadow stage put before the default
// stages, what is refused with mode "shadow" and what only a shadow canary may use (each with its
// code and key path), canary.shadow's defaults; divergence_rate and the candidate's step-time P95
// read the shadowed requests, no data below min_window_requests, and a shadow stage is judged on them;
// the controller installs the shadow on the pipeline's slot and sets its share stage by stage.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseConfig } from '../../runtime/config/index.ts';
import {
  CanaryError, ShadowCanary, ShadowStats, ShadowWindow, SideWindow, defaultsFromConfig, evaluate, parseStartRequest, type CanaryErrorCode,
  type CanarySpec,
} from '../../runtime/canary/index.ts';
import { Exchange, PipelineManager, ShadowNext, ShadowRequest } from '../../runtime/pipeline/index.ts';
import { BUILTIN_PLUGIN_DIR } from '../../runtime/app/serve.ts';
import { serialize } from 'bson';
import { harness, LOGGING_CANDIDATE } from './helpers.ts';

const defaults = defaultsFromConfig(parseConfig({ canary: { shadow: { max_diffs: 7 } } }, null));
const CANDIDATE = { steps: [{ type: 'logging', config: {} }] };

function refused(body: Record<string, unknown>, code: CanaryErrorCode, message: RegExp): void {
  assert.throws(() => parseStartRequest({ candidate_config: CANDIDATE, ...body }, defaults),
    (e: unknown) => e instanceof CanaryError && e.code === code && message.test(e.message), JSON.stringify(body));
}

test('mode "shadow" with shadow_pct: a shadow stage before the default stages, canary.shadow\'s defaults merged with the body\'s', () => {
  const spec = parseStartRequest({ candidate_config: CANDIDATE, mode: 'shadow', shadow_pct: 10, shadow: { show_values: true } }, defaults);
  assert.deepEqual(spec.shadow, { shadow_pct: 10, ignore_paths: ['$clusterTime', 'operationTime'], show_values: true, max_diffs: 7,
    diverged_event_interval: '1m', upstream_reads: false, upstream_reads_concurrency: 4 });
  assert.equal(spec.stages[0].traffic_pct, 0);
  assert.deepEqual(spec.stages.slice(1), defaults.stages);
  assert.equal(spec.stages[0].min_duration, defaults.stages[0].min_duration);
  assert.equal(parseStartRequest({ candidate_config: CANDIDATE }, defaults).shadow, null);
});

test('refused: shadow_pct missing or out of range, shadow settings without mode "shadow", match/sticky/initial_traffic_pct with it', () => {
  refused({ mode: 'shadow' }, 'PROXY_ERR_CANARY_INVALID_TRAFFIC', /^shadow_pct: expected an integer 1\.\.100/);
  refused({ mode: 'shadow', shadow_pct: 0 }, 'PROXY_ERR_CANARY_INVALID_TRAFFIC', /^shadow_pct/);
  refused({ mode: 'shadow', shadow_pct: 101 }, 'PROXY_ERR_CANARY_INVALID_TRAFFIC', /^shadow_pct/);
  refused({ mode: 'mirror' }, 'PROXY_ERR_BAD_BODY', /^mode: expected "split" or "shadow"/);
  refused({ shadow_pct: 5 }, 'PROXY_ERR_BAD_BODY', /^shadow_pct: only with mode "shadow"/);
  refused({ shadow: {} }, 'PROXY_ERR_BAD_BODY', /^shadow: only with mode "shadow"/);
  refused({ shadow_upstream_reads: true }, 'PROXY_ERR_BAD_BODY', /^shadow_upstream_reads: only with mode "shadow"/);
  refused({ mode: 'shadow', shadow_pct: 5, shadow_upstream_reads: 'yes' }, 'PROXY_ERR_BAD_BODY', /^shadow_upstream_reads: expected a boolean/);
  refused({ mode: 'shadow', shadow_pct: 5, match: { app_name: 'x' } }, 'PROXY_ERR_BAD_BODY', /^match: not with mode "shadow"/);
  refused({ mode: 'shadow', shadow_pct: 5, sticky: 'session' }, 'PROXY_ERR_BAD_BODY', /^sticky: not with mode "shadow"/);
  refused({ mode: 'shadow', shadow_pct: 5, initial_traffic_pct: 0 }, 'PROXY_ERR_BAD_BODY', /^initial_traffic_pct: not with mode "shadow"/);
  refused({ mode: 'shadow', shadow_pct: 5, shadow: { show_values: 'yes' } }, 'PROXY_ERR_BAD_BODY', /^shadow\.show_values: /);
  refused({ mode: 'shadow', shadow_pct: 5, shadow: { nope: 1 } }, 'PROXY_ERR_BAD_BODY', /^shadow/);
  refused({ stages: [{ traffic_pct: 10, min_duration: '0', min_requests: 0, shadow_pct: 5 }] }, 'PROXY_ERR_CANARY_INVALID_STAGES',
    /^stages\.0\.shadow_pct: only with mode "shadow"/);
  refused({ rollback_rules: { divergence_rate: 0.1 } }, 'PROXY_ERR_CANARY_INVALID_RULES', /^rollback_rules\.divergence_rate: only with mode "shadow"/);
  refused({ auto_promote_rules: { max_candidate_latency_p95_delta_ms: 1 } }, 'PROXY_ERR_CANARY_INVALID_RULES',
    /^auto_promote_rules\.max_candidate_latency_p95_delta_ms: only with mode "shadow"/);
  refused({ mode: 'shadow', shadow_pct: 5, rollback_rules: { divergence_rate: 2 } }, 'PROXY_ERR_CANARY_INVALID_RULES', /^rollback_rules\.divergence_rate/);
});

/** A window of `n` shadowed requests, `diverged` of them divergent, each graph's steps taking the given µs. */
function shadowWindow(n: number, diverged: number, baselineUs = 100, candidateUs = 100): ShadowWindow {
  const w = new ShadowWindow();
  w.sampled = n;
  w.diverged = diverged;
  w.byKind.reply = diverged;
  const side = (us: number) => {
    const s = new SideWindow();
    s.requests = n;
    if (n > 0) s.latencyUs.recordValueWithCount(us, n);
    return s;
  };
  w.baseline.add(side(baselineUs));
  w.candidate.add(side(candidateUs));
  return w;
}

function spec(rules: Record<string, unknown>, promote: Record<string, unknown> = {}): CanarySpec {
  return parseStartRequest({
    candidate_config: CANDIDATE, mode: 'shadow', shadow_pct: 100, auto_promote: true,
    stages: [{ traffic_pct: 0, min_duration: '0', min_requests: 10 }, { traffic_pct: 100, min_duration: '0', min_requests: 0 }],
    rollback_rules: { min_window_requests: 10, sustained_duration: '0', ...rules }, auto_promote_rules: promote,
  }, defaults);
}

function run(s: CanarySpec, w: ShadowWindow) {
  const empty = { baseline: new SideWindow(), candidate: new SideWindow() };
  return evaluate({
    spec: s, stage: s.stages[0], now: 10_000, windowStart: 5000, stageEnteredAt: 0, stageCandidateRequests: w.sampled, timers: {}, warned: [],
    window: empty, stageWindow: empty, custom: new Map(), warningShare: 0.8, shadow: { window: w, stage: w },
  });
}

test('divergence_rate and candidate_latency_p95_delta_ms read the shadowed requests; too few of them is no data', () => {
  const s = spec({ divergence_rate: 0.2, candidate_latency_p95_delta_ms: 1 });
  const breach = run(s, shadowWindow(50, 20, 100, 5000));
  const rule = (ev: ReturnType<typeof run>, name: string) => ev.rules.find((r) => r.rule === name)!;
  assert.equal(rule(breach, 'divergence_rate').value, 0.4);
  assert.equal(rule(breach, 'divergence_rate').state, 'breaching');
  assert.equal(rule(breach, 'candidate_latency_p95_delta_ms').state, 'breaching');
  assert.deepEqual(breach.rollback.map((r) => r.rule).sort(), ['candidate_latency_p95_delta_ms', 'divergence_rate']);
  const few = run(s, shadowWindow(5, 5));
  assert.equal(rule(few, 'divergence_rate').state, 'no_data');
  assert.equal(few.result, 'inconclusive');
  assert.equal(run(s, shadowWindow(50, 5)).rollback.length, 0);
});

test('a shadow stage is judged on its shadowed requests: clean ones promote, divergent ones do not', () => {
  const s = spec({}, { max_divergence_rate: 0, max_candidate_latency_p95_delta_ms: 5 });
  const clean = run(s, shadowWindow(50, 0));
  assert.equal(clean.result, 'ok');
  assert.equal(clean.promotable, true, JSON.stringify(clean.conditions));
  const divergent = run(s, shadowWindow(50, 1));
  assert.equal(divergent.promotable, false);
  assert.deepEqual(divergent.conditions.find((c) => c.condition === 'max_divergence_rate'), { condition: 'max_divergence_rate', value: 0.02,
    threshold: 0, met: false });
});

test('the request path\'s shadow follows the canary: installed at start, its share set per stage, kept across a restart, gone at rollback', async () => {
  const h = harness();
  const r = await h.controller.start({
    pipeline_id: 'default', candidate_config: LOGGING_CANDIDATE, mode: 'shadow', shadow_pct: 30, auto_promote: false,
    stages: [{ traffic_pct: 0, min_duration: '0', min_requests: 0 }, { traffic_pct: 10, min_duration: '0', min_requests: 0, shadow_pct: 50 },
      { traffic_pct: 50, min_duration: '0', min_requests: 0 }, { traffic_pct: 100, min_duration: '0', min_requests: 0 }],
  }) as { canary_id: string };
  const slot = h.manager.slot('default');
  const pct = () => (slot.shadow as ShadowCanary | null)?.pct ?? null;
  assert.ok(slot.shadow !== null && slot.shadow.candidate === slot.candidate, 'the candidate graph is the one shadowed');
  assert.equal(pct(), 30, 'a shadow stage: the canary\'s shadow_pct');
  await h.controller.promote(r.canary_id, { force: true });
  assert.equal(pct(), 50, 'an exposed stage with its own shadow_pct');
  await h.controller.promote(r.canary_id, { force: true });
  assert.equal(pct(), 0, 'an exposed stage without one: the shadowing ends');
  const h2 = harness({ dir: h.dir, clock: h.clock });
  await h2.controller.resume();
  assert.equal((h2.manager.slot('default').shadow as ShadowCanary).pct, 0, 'resumed at stage 3');
  h2.controller.rollback(r.canary_id, { reason: 'test' });
  assert.equal(h2.manager.slot('default').shadow, null);
  assert.equal((h2.controller.status(r.canary_id) as any).shadow.shadow_pct, 0);
  await h.controller.close();
  await h2.controller.close();
});

test('the ring of diffs is bounded: the latest max_diffs kept, its bytes counted, and uncounted when the pipeline\'s next shadow canary starts', async () => {
  const manager = new PipelineManager({ pluginDir: BUILTIN_PLUGIN_DIR });
  const candidate = await manager.build({ pipeline: { id: 'default', request: [], response: [] }, steps: {} }, 'candidate');
  const stats = new ShadowStats();
  const sc = new ShadowCanary(candidate, { pct: 100, ignorePaths: [], showValues: false, maxDiffs: 3, upstreamReads: false, maxReads: 1 }, stats);
  const conn = { id: 1, appName: '', clientAddress: '', user: '' };
  const body = serialize({ find: 'c', filter: {}, $db: 'app' });
  const s = new ShadowRequest();
  const sizes: number[] = [];
  for (let i = 0; i < 10; i++) {
    s.reset('find', 'app', 'c');
    s.baseline = new Exchange(conn, 'default', 'find', 'app', 'c', body, null);
    s.candidate = new Exchange(conn, 'default', 'find', 'app', 'c', body, null);
    s.candidate.newRequest = serialize({ find: 'c', filter: {}, limit: i, $db: 'app' });
    assert.equal(sc.requestDone(s), ShadowNext.Done);
    sizes.push(stats.memoryBytes);
  }
  assert.equal(sc.diverged, 10);
  assert.equal(sc.byKind.request, 10);
  assert.equal(sc.diffs().length, 3, 'the ring keeps max_diffs');
  assert.ok(sizes[9] > 0 && sizes[9] === sizes[2], `bytes stop growing once the ring is full: ${sizes.join(',')}`);
  assert.equal(sc.memoryBytes, stats.memoryBytes);
  sc.close();
  assert.equal(stats.memoryBytes, 0);
  assert.equal(sc.diffs().length, 0);
});
