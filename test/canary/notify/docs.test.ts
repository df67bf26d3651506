// docs/notifications.md shows what the channels send: its examples are checked against the payload
// builders with the same event, so the documentation cannot drift from the code.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { emailMessage, pagerEvent, webhookBody } from '../../../runtime/canary/notify/index.ts';
import type { CanaryEvent } from '../../../runtime/canary/events.ts';

const doc = readFileSync('docs/notifications.md', 'utf8');

/** The n-th fenced block (with this language tag) after a heading. */
function block(heading: string, lang: string, n = 0): string {
  const from = doc.indexOf(`\n${heading}\n`);
  assert.ok(from >= 0, heading);
  const blocks = [...doc.slice(from).matchAll(new RegExp('```' + lang + '\\n([\\s\\S]*?)```', 'g'))];
  return blocks[n][1];
}

const event: CanaryEvent = {
  id: 'c-7f3a9b2e41d0:2:canary.rolled_back', type: 'canary.rolled_back', at: '2026-11-24T06:12:40.512Z',
  canary_id: 'c-7f3a9b2e41d0', pipeline_id: 'default', stage: 2, traffic_pct: 25,
  baseline_version: 'sha256:4be1c0d2e9aa', candidate_version: 'sha256:91c07d3b55e0', description: 'redact v2',
  reason: 'error_rate_delta_pct 9.58 > 5 for 20s', triggered_by: 'automatic',
  rules: [{ rule: 'error_rate_delta_pct', value: 9.58, threshold: 5, sustained_for: '20s' }],
  metrics: {
    baseline: { requests: 9500, error_rate_pct: 0.02, latency_p50_ms: 0.41, latency_p95_ms: 1.2, latency_p99_ms: 2.9 },
    candidate: { requests: 500, error_rate_pct: 9.6, latency_p50_ms: 0.43, latency_p95_ms: 1.3, latency_p99_ms: 3.1 },
  },
};

test('the webhook example is webhookBody of the example event', () => {
  assert.deepEqual(JSON.parse(block('## Webhook', 'json')), webhookBody(event, 'proxy-eu-1'));
});

test('the email example has the subject, event headers and text emailMessage gives', () => {
  const text = block('## Email', '');
  const [head, body] = text.split('\n\n', 2).length === 2 ? [text.slice(0, text.indexOf('\n\n')), text.slice(text.indexOf('\n\n') + 2)] : ['', ''];
  const m = emailMessage(event, 'proxy-eu-1');
  assert.ok(head.includes(`Subject: ${m.subject}`), head);
  assert.ok(head.includes(`X-Proxy-Event-ID: ${event.id}`));
  assert.equal(body, m.text);
});

test('the pager examples are pagerEvent of the example event (trigger) and of its completion (resolve)', () => {
  const trigger = JSON.parse(block('## Pager (PagerDuty Events API v2)', 'json', 0));
  const want = pagerEvent(event, { type: 'pager', integration_key: '<INTEGRATION_KEY>' }, 'proxy-eu-1')!;
  const { custom_details: shown, ...shownPayload } = trigger.payload;
  const { custom_details: real, ...realPayload } = want.payload!;
  assert.deepEqual({ ...trigger, payload: shownPayload }, { ...want, payload: realPayload });
  const { summary: _s, ...withoutSummary } = webhookBody(event, 'proxy-eu-1');
  assert.deepEqual(real, withoutSummary, 'custom_details is the webhook body without summary');
  assert.equal(shown.id, event.id);
  const resolve = JSON.parse(block('## Pager (PagerDuty Events API v2)', 'json', 1));
  assert.deepEqual(resolve, pagerEvent({ ...event, type: 'canary.completed' }, { type: 'pager', integration_key: '<INTEGRATION_KEY>' }, 'proxy-eu-1'));
});
