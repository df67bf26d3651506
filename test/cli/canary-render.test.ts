// What `proxy canary status` and `history` print for a finished canary, from what a real controller
// (test clock, fed windows) answers: the start is "ago" from now and the run's length is said as
// such; "breached for" stops at the rollback; a manual rollback of a candidate that breached
// nothing is not UNHEALTHY; each rule is named once per history line.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { initHistograms } from '../../runtime/profiling/index.ts';
import {
  historyDetail, renderDiffs, renderHistory, renderStatus, type Diffs, type History, type Report, type Status,
} from '../../runtime/cli/canary-render.ts';
import { harness, LOGGING_CANDIDATE, type Harness } from '../canary/helpers.ts';

await initHistograms();

const RULES = { error_rate_delta_pct: 5, latency_p95_delta_ms: 100, sustained_duration: '10s', check_interval: '5s', min_window_requests: 20 };

async function start(h: Harness): Promise<string> {
  const r = await h.controller.start({
    pipeline_id: 'default', candidate_config: LOGGING_CANDIDATE, rollback_rules: RULES,
    stages: [{ traffic_pct: 10, min_duration: '10m', min_requests: 100 }, { traffic_pct: 100, min_duration: '0', min_requests: 0 }],
  }) as { canary_id: string };
  return r.canary_id;
}

async function tick(h: Harness, id: string, candidateErrors: number): Promise<void> {
  h.clock.advance(5000);
  h.metrics.feed('baseline', 100, 0);
  h.metrics.feed('candidate', 100, candidateErrors);
  await h.controller.evaluate(id);
}

const views = (h: Harness, id: string) => ({
  status: h.controller.status(id) as unknown as Status,
  report: h.controller.report(id) as unknown as Report,
  history: h.controller.history(id) as unknown as History,
});

test('status of an automatically rolled-back canary: ended when, after how long, why; "breached for" stops at the rollback', async () => {
  const h = harness();
  const id = await start(h);
  await tick(h, id, 20); // a breach over this window: the timer starts where it began
  await tick(h, id, 20); // sustained 10 s → rolled back
  assert.equal(h.controller.record(id).status, 'rolled_back');
  const endedAt = h.clock.now();
  h.clock.advance(60_000); // read a minute later
  const { status, report } = views(h, id);
  assert.equal(status.rollback_status?.error_rate_sustained_for, '10s', 'the breach had lasted 10 s when it rolled back, and no longer counts');
  assert.equal(status.rollback_status?.healthy, false);
  const text = renderStatus(status, false, h.clock.now(), report);
  assert.match(text, /ROLLED_BACK/);
  assert.match(text, new RegExp(`  started    \\S+; ended ${new Date(endedAt).toISOString().replaceAll('.', '\\.')} \\(1m ago\\), after 10s\\n`));
  assert.match(text, /  outcome    rolled back \(automatic\): error_rate_delta_pct \S+ > 5 for 10s\n/);
  assert.match(text, /  health     when it ended: a rollback rule was breached; error rate breached for 10s, latency for 0s\n/);
  assert.doesNotMatch(text, /ago\); stage entered/, 'the run\'s length is not shown as "ago"');
});

test('status of a rollback before any evaluation: no "evaluation pending" line', async () => {
  const h = harness();
  const id = await start(h);
  h.clock.advance(2000);
  h.controller.rollback(id, { reason: 'wrong candidate' });
  const { status, report } = views(h, id);
  const text = renderStatus(status, false, h.clock.now(), report);
  assert.doesNotMatch(text, /evaluation/);
  assert.match(text, /ended \S+ \(0s ago\), after 2s\n  outcome    rolled back \(manual\): wrong candidate\n/);
});

test('status of a manual rollback with no breach: not UNHEALTHY; the start is "ago" from now, not the run\'s length', async () => {
  const h = harness();
  const id = await start(h);
  await tick(h, id, 0);
  h.controller.rollback(id, { reason: 'change window closed' });
  h.clock.advance(30_000);
  const { status, report } = views(h, id);
  assert.equal(status.rollback_status?.healthy, true);
  assert.equal(status.elapsed, '5s', 'the API\'s elapsed is the run\'s length once it ended');
  const text = renderStatus(status, false, h.clock.now(), report);
  assert.doesNotMatch(text, /UNHEALTHY/);
  assert.match(text, /ended \S+ \(30s ago\), after 5s\n/);
  assert.match(text, /  outcome    rolled back \(manual\): change window closed\n/);
  assert.match(text, /  health     when it ended: no rollback rule breached\n/);
});

test('status of a running canary: started "ago", breached so far', async () => {
  const h = harness();
  const id = await start(h);
  await tick(h, id, 20);
  const text = renderStatus(views(h, id).status, false, h.clock.now());
  assert.match(text, /  started    \S+ \(5s ago\); stage entered /);
  assert.match(text, /  health     UNHEALTHY; error rate breached for 5s, latency for 0s\n/);
});

test('history: threshold_warning and rolled_back lines name each rule once', async () => {
  const h = harness();
  const id = await start(h);
  await tick(h, id, 4.5); // 4.5 points: past 0.8 of the 5-point threshold, a warning
  await tick(h, id, 20);
  await tick(h, id, 20);
  const { history } = views(h, id);
  const warning = history.history.find((e) => e.event === 'threshold_warning')!;
  const rolledBack = history.history.find((e) => e.event === 'rolled_back')!;
  assert.ok(warning !== undefined && rolledBack !== undefined, JSON.stringify(history.history.map((e) => e.event)));
  for (const e of [warning, rolledBack]) {
    const detail = historyDetail(e);
    assert.equal(detail.split('error_rate_delta_pct').length - 1, 1, `${e.event}: ${detail}`);
  }
  assert.match(historyDetail(rolledBack), /^rolled back \(automatic\): error_rate_delta_pct \S+ > 5 for 10s$/);
  const text = renderHistory(history);
  for (const line of text.split('\n')) assert.ok(line.split('error_rate_delta_pct').length <= 2, line);
});

test('diffs: in a fleet each group names the instances whose diffs it holds; one proxy\'s diffs have no such column', () => {
  const diff = (instance: string | undefined, path: string) => ({
    at: '2026-11-27T11:00:00.000Z', kind: 'reply', op: 'find', db: 'app', collection: 'users', baseline: 'replied', candidate: 'replied',
    truncated: false, paths: [{ path, change: 'changed' }], ...(instance === undefined ? {} : { instance_id: instance }),
  });
  const base = { canary_id: 'c-1', pipeline_id: 'default', status: 'active', shadow_pct: 100, sampled: 10, diverged: 4, divergence_rate: 0.4,
    by_kind: { reply: 4 }, memory_bytes: 100, max_diffs: 10, show_values: false };
  const fleet = renderDiffs({ ...base, diffs: [diff('i3', 'cursor.firstBatch.0.ssn'), diff('i1', 'cursor.firstBatch.0.ssn'),
    diff('i3', 'cursor.firstBatch.0.ssn'), diff('i2', 'ok')] } as Diffs);
  const lines = fleet.split('\n');
  assert.match(lines[1], /^COUNT\s+KIND\s+PATHS\s+INSTANCES\s+SAMPLE/);
  assert.match(lines[2], /^3\s+reply find\s+cursor\.firstBatch\.0\.ssn changed\s+i1, i3\s+app\.users/);
  assert.match(lines[3], /^1\s+reply find\s+ok changed\s+i2\s+app\.users/);
  const one = renderDiffs({ ...base, diffs: [diff(undefined, 'ok')] } as Diffs);
  assert.doesNotMatch(one, /INSTANCES/);
  assert.match(one.split('\n')[1], /^COUNT\s+KIND\s+PATHS\s+SAMPLE/);
});
