// `proxy canary` end to end: a real proxy (`proxy serve` as a child process, with the control plane,
// the canary controller, its SQLite store and the notifier) and the commands of SPEC §4.3 run as
// the real CLI (`node bin/proxy.mjs canary …`) with the example files of examples/canary/. The
// canary's notifications go to a real webhook receiver and their signatures are checked. Errors and
// `status --watch` timing: canary-errors.e2e.test.ts.
import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { verifySignature } from '../../runtime/canary/notify/index.ts';

import { SECRET, startStack, type Run, type Stack } from './canary-stack.ts';
import { until } from '../helpers/until.ts';

let stack: Stack;
let dir = '';
const cli = (args: string[], env: Record<string, string> = {}): Promise<Run> => stack.cli(args, env);

before(async () => {
  stack = await startStack();
  dir = stack.dir;
});

after(async () => {
  await stack.close();
});

let firstId = '';
let secondId = '';

test('start: the example files are sent as the documented body; a second start on the pipeline is refused with the API code and exit 1', async () => {
  const none = await cli(['list']);
  assert.equal(none.code, 0, none.stderr);
  assert.match(none.stdout, /no active or paused canaries/);

  const r = await cli(['start', '--pipeline', 'default', '--candidate-config', 'examples/canary/candidate.json',
    '--stages', 'examples/canary/stages-2.yaml', '--rollback-rules', 'examples/canary/rollback-rules.yaml',
    '--traffic', '10', '--description', 'e2e: per-client rate limit']);
  assert.equal(r.code, 0, r.stderr);
  const m = /^canary (\S+) started on pipeline default: stage 1, 10% to the candidate$/m.exec(r.stdout);
  assert.ok(m, r.stdout);
  firstId = m[1];
  assert.match(r.stdout, /follow it with: proxy canary status default --watch/);

  const again = await cli(['start', '--pipeline', 'default', '--candidate-config', 'examples/canary/candidate.json']);
  assert.equal(again.code, 1);
  assert.match(again.stderr, /^proxy canary start: 409 PROXY_ERR_CANARY_EXISTS: /);
});

test('list (table, --output json) and status (table, --verbose with each auto-promote condition, --json)', async () => {
  const l = await cli(['list']);
  assert.equal(l.code, 0, l.stderr);
  assert.match(l.stdout, /^CANARY ID +PIPELINE +STATUS +STAGE +TRAFFIC +STARTED +DESCRIPTION$/m);
  assert.match(l.stdout, new RegExp(`^${firstId} +default +active +1 +10% +\\S+ +e2e: per-client rate limit$`, 'm'));
  const lj = await cli(['list', '--output', 'json']);
  const listed = JSON.parse(lj.stdout);
  assert.equal(listed.total, 1);
  assert.equal(listed.canaries[0].canary_id, firstId);

  const s = await cli(['status', 'default']);
  assert.equal(s.code, 0, s.stderr);
  assert.match(s.stdout, new RegExp(`^canary ${firstId} +pipeline default +ACTIVE$`, 'm'));
  assert.match(s.stdout, /stage +1 of 2, 10% to the candidate \(manual promotion\)/);
  assert.match(s.stdout, /about +e2e: per-client rate limit/);
  assert.match(s.stdout, /^baseline +\d+/m);
  assert.doesNotMatch(s.stdout, /Auto-promote conditions/);

  const v = await cli(['status', 'default', '--verbose']);
  assert.equal(v.code, 0, v.stderr);
  assert.match(v.stdout, /Auto-promote conditions \(stage window\)/);
  for (const cond of ['min_duration', 'min_requests', 'max_error_rate_delta_pct', 'max_latency_p95_delta_ms']) {
    assert.match(v.stdout, new RegExp(`^${cond} +(\\S+|no data) +(>=|<=) \\S+ +(met|unmet)$`, 'm'), `${cond} listed with value, threshold, met/unmet`);
  }
  assert.match(v.stdout, /^min_duration +\S+ +>= 10m +unmet$/m, 'stage 1 needs 10m');
  assert.match(v.stdout, /^min_requests +0 +>= 1000 +unmet$/m);
  assert.match(v.stdout, /Rollback rules/);
  assert.match(v.stdout, /^error_rate_delta_pct +/m);

  const j = await cli(['status', 'default', '--json']);
  const body = JSON.parse(j.stdout);
  assert.equal(body.canary_id, firstId);
  assert.equal(body.traffic_pct, 10);
});

test('promote: refused while the stage minimums are unmet (exit 1, code, unmet conditions); --force moves on and completes the 2-stage canary', async () => {
  const refused = await cli(['promote', 'default']);
  assert.equal(refused.code, 1);
  assert.match(refused.stderr, /^proxy canary promote: 409 PROXY_ERR_CANARY_INVALID_STATE: /);
  assert.match(refused.stderr, /unmet min_duration/);

  const forced = await cli(['promote', 'default', '--force']);
  assert.equal(forced.code, 0, forced.stderr);
  assert.match(forced.stdout, new RegExp(`^canary ${firstId} on default: stage 1 → 2, 100% to the candidate — completed: the candidate is the baseline$`, 'm'));

  const l = await cli(['list']);
  assert.match(l.stdout, /no active or paused canaries/);
  const all = await cli(['list', '--all']);
  assert.match(all.stdout, new RegExp(`^${firstId} +default +completed +2 +100%`, 'm'));
  const gone = await cli(['promote', 'default']);
  assert.equal(gone.code, 3);
  assert.match(gone.stderr, /no active or paused canary on pipeline "default" \(its last canary \S+ is completed\)/);
});

test('start with --auto-promote and 7 stages; promote is refused while auto-promotion is on; rollback --reason; rollback --all with nothing left', async () => {
  const r = await cli(['start', '--pipeline', 'default', '--candidate-config', 'examples/canary/candidate.json',
    '--stages', 'examples/canary/stages-7.yaml', '--auto-promote', '--json']);
  assert.equal(r.code, 0, r.stderr);
  const started = JSON.parse(r.stdout);
  secondId = started.canary_id;
  assert.equal(started.traffic_pct, 1);
  const s = await cli(['status', 'default']);
  assert.match(s.stdout, /stage +1 of 7, 1% to the candidate \(auto-promote\)/);
  const p = await cli(['promote', 'default']);
  assert.equal(p.code, 1);
  assert.match(p.stderr, /PROXY_ERR_CANARY_INVALID_STATE/);

  const noReason = await cli(['rollback', 'default']);
  assert.equal(noReason.code, 2);
  assert.match(noReason.stderr, /needs --reason/);
  const rb = await cli(['rollback', 'default', '--reason', 'e2e: manual check failed']);
  assert.equal(rb.code, 0, rb.stderr);
  assert.match(rb.stdout, new RegExp(`^canary ${secondId} on default: rolled back at \\S+ \\(manual\\): e2e: manual check failed$`, 'm'));
  assert.match(rb.stdout, /final: baseline \d+ requests/);

  const all = await cli(['rollback', '--all', '--reason', 'nothing']);
  assert.equal(all.code, 0, all.stderr);
  assert.match(all.stdout, /nothing to roll back/);
});

test('rollback --all rolls back every active canary (here one replacing a plugin: candidate-redact.yaml); status --watch stops by itself on a ' +
  'finished canary', async () => {
  const r = await cli(['start', '--pipeline', 'default', '--candidate-config', 'examples/canary/candidate-redact.yaml', '--json']);
  assert.equal(r.code, 0, r.stderr);
  const id = JSON.parse(r.stdout).canary_id;
  const all = await cli(['rollback', '--all', '--reason', 'e2e: all']);
  assert.equal(all.code, 0, all.stderr);
  assert.match(all.stdout, new RegExp(`^canary ${id} on default: rolled back`, 'm'));
  const w = await cli(['status', 'default', '--watch']);
  assert.equal(w.code, 0, w.stderr);
  assert.match(w.stdout, /ROLLED_BACK/);
  assert.equal(w.stdout.match(/Ctrl-C to stop/g)?.length, 1, 'one frame: the canary is finished');
});

test('history and metrics --format csv --output <file> of a canary id', async () => {
  const h = await cli(['history', secondId]);
  assert.equal(h.code, 0, h.stderr);
  assert.match(h.stdout, new RegExp(`^canary ${secondId} +pipeline default +ROLLED_BACK$`, 'm'));
  assert.match(h.stdout, /^AT +EVENT +STAGE +TRAFFIC +DETAIL$/m);
  assert.match(h.stdout, /^\S+ +started +1 +1%/m);
  assert.match(h.stdout, /^\S+ +rolled_back +1 +1% .*e2e: manual check failed/m);
  const hj = JSON.parse((await cli(['history', secondId, '--json'])).stdout);
  assert.deepEqual(hj.history.map((e: { event: string }) => e.event).filter((e: string) => e === 'started' || e === 'rolled_back'), ['started', 'rolled_back']);

  const file = join(dir, 'metrics.csv');
  const m = await cli(['metrics', secondId, '--format', 'csv', '--output', file]);
  assert.equal(m.code, 0, m.stderr);
  assert.match(m.stderr, new RegExp(`^wrote ${file.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} \\(csv, \\d+ rows\\)$`, 'm'));
  assert.equal(readFileSync(file, 'utf8').split('\n')[0],
    'at,stage,traffic_pct,pipeline,requests,errors,error_rate_pct,latency_p50_ms,latency_p95_ms,latency_p99_ms');
  const mj = await cli(['metrics', secondId, '--format', 'json']);
  assert.equal(JSON.parse(mj.stdout).canary_id, secondId);
});

test('notifications of those transitions reached the webhook, signed, one per transition', async () => {
  await until('the rollback notification', () => stack.hook.received.some((r) => JSON.parse(r.body).canary.canary_id === secondId &&
    JSON.parse(r.body).type === 'canary.rolled_back'));
  for (const r of stack.hook.received) {
    assert.ok(verifySignature(SECRET, String(r.headers['x-proxy-timestamp']), r.body, String(r.headers['x-proxy-signature'])));
  }
  const of = (id: string) => stack.hook.received.map((r) => JSON.parse(r.body)).filter((b) => b.canary.canary_id === id).map((b) => b.type);
  assert.deepEqual(of(firstId), ['canary.started', 'canary.promoted', 'canary.completed']);
  assert.deepEqual(of(secondId), ['canary.started', 'canary.rolled_back']);
  const rolled = stack.hook.received.map((r) => JSON.parse(r.body)).find((b) => b.canary.canary_id === secondId && b.type === 'canary.rolled_back');
  assert.equal(rolled.instance, 'e2e-proxy');
  assert.equal(rolled.reason, 'e2e: manual check failed');
  assert.equal(rolled.triggered_by, 'manual');
  const ids = stack.hook.received.map((r) => r.headers['x-proxy-event-id']);
  assert.equal(new Set(ids).size, ids.length, 'no duplicate');
});
