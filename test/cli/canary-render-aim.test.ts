// What `proxy canary status` prints for an aimed, sticky canary held at a gate: who is aimed at and
// how stickiness works, and the gate's last answer at this stage (from a real controller and a real
// local HTTP gate answering 500).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { initHistograms } from '../../runtime/profiling/index.ts';
import { renderStatus, type Status } from '../../runtime/cli/canary-render.ts';
import { harness, LOGGING_CANDIDATE } from '../canary/helpers.ts';
import { httpReceiver } from '../canary/notify/helpers.ts';

await initHistograms();

test('status names the aim, the stickiness and a gate that holds the stage', async () => {
  const hook = await httpReceiver();
  hook.statuses.push(500);
  try {
    const h = harness();
    const { canary_id: id } = await h.controller.start({
      pipeline_id: 'default', candidate_config: LOGGING_CANDIDATE, auto_promote: true,
      match: { app_name: ['reports-*', 'etl'], user: 'ann' }, sticky: 'session',
      rollback_rules: { check_interval: '5s', min_window_requests: 20 }, auto_promote_rules: { min_duration: '0', min_requests: 0 },
      stages: [{ traffic_pct: 10, min_duration: '0', min_requests: 0, gate: { url: hook.url } }, { traffic_pct: 100, min_duration: '0', min_requests: 0 }],
    }) as { canary_id: string };
    let text = renderStatus(h.controller.status(id) as unknown as Status, false, h.clock.now());
    assert.match(text, /  aimed      always app_name reports-\*\|etl and user ann; the others by the stage's share; sticky per session\n/);
    assert.match(text, /  gate       http:\/\/127\.0\.0\.1:\d+\/hook: not asked yet at this stage\n/);
    h.clock.advance(5000);
    h.metrics.feed('baseline', 100, 0);
    h.metrics.feed('candidate', 100, 0);
    await h.controller.evaluate(id);
    text = renderStatus(h.controller.status(id) as unknown as Status, false, h.clock.now());
    assert.match(text, /  gate       http:\/\/127\.0\.0\.1:\d+\/hook: HOLDING \(HTTP 500/);
  } finally {
    await hook.close();
  }
});
