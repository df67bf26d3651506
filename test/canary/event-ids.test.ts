// Event ids in their one documented form, from the controller to the receivers: a transition's is
// `<canary_id>:<version>:<type>` (the record's version after it), a threshold warning's is
// `<canary_id>:warning:<ms>:canary.threshold_warning`; the same id reaches a real webhook receiver
// (X-Proxy-Event-Id, the body's id) and a real SMTP server (X-Proxy-Event-Id, Message-ID); the docs
// state both forms.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { initHistograms } from '../../runtime/profiling/index.ts';
import { EVENT_ID_PATTERN, transitionEventId, warningEventId } from '../../runtime/canary/index.ts';
import { Notifier } from '../../runtime/canary/notify/index.ts';
import { harness, LOGGING_CANDIDATE } from './helpers.ts';
import { httpReceiver, MemoryLog, settings, smtpReceiver, testLogger } from './notify/helpers.ts';
import { until } from '../helpers/until.ts';

await initHistograms();

const RULES = { error_rate_delta_pct: 5, latency_p95_delta_ms: 100, sustained_duration: '1h', check_interval: '5s', min_window_requests: 20 };

test('the controller emits transition ids <canary_id>:<version>:<type> and warning ids <canary_id>:warning:<ms>:canary.threshold_warning', async () => {
  const h = harness();
  const { canary_id: id } = await h.controller.start({
    pipeline_id: 'default', candidate_config: LOGGING_CANDIDATE, rollback_rules: RULES, auto_promote: false,
    stages: [{ traffic_pct: 10, min_duration: '0', min_requests: 0 }, { traffic_pct: 50, min_duration: '1h', min_requests: 0 },
      { traffic_pct: 100, min_duration: '0', min_requests: 0 }],
  }) as { canary_id: string };
  // 4.5 % candidate errors against 0: past 0.8 of the 5-point threshold, not beyond it.
  h.clock.advance(5000);
  h.metrics.feed('baseline', 450, 0);
  h.metrics.feed('candidate', 200, 9);
  await h.controller.evaluate(id);
  const warnedAt = h.clock.now();
  await h.controller.promote(id);
  h.controller.rollback(id, { reason: 'done' });
  const ids = h.sink.events.map((e) => e.event.id);
  assert.deepEqual(ids, [
    `${id}:2:canary.started`,
    `${id}:warning:${warnedAt}:canary.threshold_warning`,
    `${id}:3:canary.promoted`,
    `${id}:4:canary.rolled_back`,
  ]);
  assert.equal(h.controller.record(id).version, 4, 'the version in a transition id is the record\'s after it');
  for (const x of ids) assert.match(x, EVENT_ID_PATTERN);
  assert.equal(transitionEventId(id, 3, 'canary.promoted'), ids[2]);
  assert.equal(warningEventId(id, warnedAt), ids[1]);
});

test('the same ids reach a real webhook receiver (X-Proxy-Event-Id, body id) and a real SMTP server (X-Proxy-Event-Id, Message-ID)', async () => {
  const h = harness();
  const { canary_id: id } = await h.controller.start({
    pipeline_id: 'default', candidate_config: LOGGING_CANDIDATE, rollback_rules: RULES, auto_promote: false,
    stages: [{ traffic_pct: 10, min_duration: '0', min_requests: 0 }, { traffic_pct: 100, min_duration: '0', min_requests: 0 }],
  }) as { canary_id: string };
  h.clock.advance(5000);
  h.metrics.feed('baseline', 450, 0);
  h.metrics.feed('candidate', 200, 9);
  await h.controller.evaluate(id);
  const events = h.sink.events.map((e) => e.event);
  assert.deepEqual(events.map((e) => e.type), ['canary.started', 'canary.threshold_warning']);
  const hook = await httpReceiver();
  const smtp = await smtpReceiver();
  const n = new Notifier({
    settings: settings({
      webhook_secret: 'event-id-secret-0123456789', smtp: { host: '127.0.0.1', port: smtp.port, from: 'proxy@example.com' },
      channels: [{ type: 'webhook', url: hook.url }, { type: 'email', addresses: ['oncall@example.com'] }],
    }),
    log: testLogger(new MemoryLog()),
  });
  try {
    for (const e of events) n.emit(e, null);
    await until('two webhooks and two mails', () => hook.received.length === 2 && smtp.mails.length === 2);
    for (const e of events) {
      const w = hook.received.find((r) => r.headers['x-proxy-event'] === e.type)!;
      assert.equal(w.headers['x-proxy-event-id'], e.id);
      assert.equal(JSON.parse(w.body).id, e.id);
      const esc = e.id.replace(/[.]/g, '\\.');
      // Long header lines are folded (RFC 5322): unfold before matching.
      const unfolded = smtp.mails.map((x) => x.raw.replace(/\r?\n[ \t]+/g, ' '));
      const m = unfolded.find((raw) => new RegExp(`^X-Proxy-Event-Id: ${esc}\\r?$`, 'mi').test(raw));
      assert.ok(m !== undefined, `a mail with X-Proxy-Event-Id ${e.id}`);
      assert.match(m, new RegExp(`^Message-ID: <${esc}\\.[0-9a-f]{16}@pipeline-proxy>\\r?$`, 'mi'));
    }
    assert.match(events[1].id, new RegExp(`^${id}:warning:\\d+:canary\\.threshold_warning$`));
  } finally {
    await n.close();
    await hook.close();
    await smtp.close();
  }
});

test('docs/canary.md states both forms; docs/notifications.md\'s example ids are in the form', () => {
  const canary = readFileSync('docs/canary.md', 'utf8');
  assert.ok(canary.includes('`<canary_id>:<version>:<type>`'));
  assert.ok(canary.includes('`<canary_id>:warning:<ms>:canary.threshold_warning`'));
  const notifications = readFileSync('docs/notifications.md', 'utf8');
  const shown = [...notifications.matchAll(/\bc-[0-9a-f]{12}:[^\s<>`".]+(?:\.[a-z_]+)?/g)].map((m) => m[0]).filter((x) => x.includes('canary'));
  assert.ok(shown.length > 0);
  for (const x of shown) assert.match(x, EVENT_ID_PATTERN);
});
