// The notifier against real receivers: an HTTP server (webhook, PagerDuty Events API shape) and an
// SMTP server (smtp-server), all on 127.0.0.1; the outbox in a real SQLite file for the restart case.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Registry } from 'prom-client';
import { Notifier, registerNotificationMetrics, verifySignature, checkChannels, outboxPath, type StoredChannel } from '../../../runtime/canary/notify/index.ts';
import { CANARY_EVENT_TYPES } from '../../../runtime/canary/events.ts';
import { NOTIFICATION_EVENTS } from '../../../runtime/config/index.ts';
import { event, httpReceiver, MemoryLog, settings, sleep, smtpReceiver, testLogger } from './helpers.ts';
import { until } from '../../helpers/until.ts';

const SECRET = 'test-secret-0123456789';
const dir = mkdtempSync(join(tmpdir(), 'proxy-notify-'));

test('webhook: delivered to a real HTTP server, HMAC-SHA256 signature over timestamp.body verifies, a 500 is retried with the same body and event id',
  async () => {
    const rx = await httpReceiver();
    rx.statuses.push(500);
    const log = new MemoryLog();
    const n = new Notifier({ settings: settings({ webhook_secret: SECRET, channels: [{ type: 'webhook', url: rx.url }] }), log: testLogger(log) });
    try {
      const e = event('canary.rolled_back', {
        triggered_by: 'automatic', description: 'redact v2',
        rules: [{ rule: 'error_rate_delta_pct', value: 7.5, threshold: 5, sustained_for: '30s' }],
        metrics: {
          baseline: { requests: 1000, error_rate_pct: 0.1, latency_p50_ms: 1, latency_p95_ms: 2, latency_p99_ms: 3 },
          candidate: { requests: 100, error_rate_pct: 7.6, latency_p50_ms: 1, latency_p95_ms: 2.5, latency_p99_ms: 4 },
        },
      });
      n.emit(e, null);
      await until('delivery after the retry', () => n.counts().delivered === 1);
      assert.equal(rx.received.length, 2, 'one failed attempt (500) and one delivered');
      const [first, second] = rx.received;
      assert.equal(first.body, second.body, 'the retry sends the same body');
      for (const r of rx.received) {
        assert.equal(r.method, 'POST');
        assert.equal(r.headers['content-type'], 'application/json');
        assert.equal(r.headers['x-proxy-event-id'], e.id);
        assert.equal(r.headers['x-proxy-event'], 'canary.rolled_back');
        const ts = String(r.headers['x-proxy-timestamp']);
        assert.match(ts, /^\d{10}$/);
        assert.ok(Math.abs(Number(ts) - Date.now() / 1000) < 10, 'timestamp is the attempt time');
        assert.ok(verifySignature(SECRET, ts, r.body, String(r.headers['x-proxy-signature'])), 'signature verifies');
        assert.ok(!verifySignature('another-secret-0123456', ts, r.body, String(r.headers['x-proxy-signature'])), 'a wrong secret does not verify');
        assert.ok(!verifySignature(SECRET, String(Number(ts) + 1), r.body, String(r.headers['x-proxy-signature'])), 'the timestamp is signed');
      }
      assert.deepEqual([first.headers['x-proxy-delivery-attempt'], second.headers['x-proxy-delivery-attempt']], ['1', '2']);
      const body = JSON.parse(second.body);
      assert.equal(body.id, e.id);
      assert.equal(body.type, 'canary.rolled_back');
      assert.equal(body.instance, 'proxy-test-1');
      assert.deepEqual(body.canary, { canary_id: 'cn_test1', pipeline_id: 'orders', stage: 2, traffic_pct: 25, baseline_version: 'redact@1.0.0',
        candidate_version: 'redact@2.0.0', description: 'redact v2' });
      assert.equal(body.reason, undefined);
      assert.equal(body.triggered_by, 'automatic');
      assert.deepEqual(body.rules, e.rules);
      assert.deepEqual(body.metrics, e.metrics);
      assert.match(body.summary, /error_rate_delta_pct 7\.5 > 5 for 30s/);
      assert.deepEqual(n.stats.webhook, { delivered: 1, failed: 0, retries: 1, refused: 0 });
      assert.equal(log.find('notification attempt failed; will retry').length, 1);
    } finally {
      await n.close();
      await rx.close();
    }
  });

test('webhook: a 4xx other than 408/429 is given up after one attempt and logged; 408 and 429 are retried; attempts stop at max_attempts', async () => {
  const rx = await httpReceiver();
  const log = new MemoryLog();
  rx.statuses.push(400);
  const n = new Notifier({ settings: settings({ webhook_secret: SECRET, max_attempts: 3, channels: [{ type: 'webhook', url: rx.url }] }),
    log: testLogger(log) });
  try {
    n.emit(event('canary.started'), null);
    await until('give-up on 400', () => n.counts().failed === 1);
    assert.equal(rx.received.length, 1);
    const given = log.find('notification given up');
    assert.equal(given.length, 1);
    assert.equal(given[0].reason, 'refused by the receiver');
    assert.match(String(given[0].error), /HTTP 400/);

    rx.statuses.push(408, 429);
    n.emit(event('canary.promoted'), null);
    await until('delivery after 408 and 429', () => n.counts().delivered === 1);
    assert.equal(rx.received.length, 4);

    rx.statuses.push(503, 503, 503, 503);
    n.emit(event('canary.completed'), null);
    await until('give-up after max_attempts', () => n.counts().failed === 2);
    assert.equal(rx.received.length, 7, 'exactly max_attempts (3) attempts');
    assert.equal(log.find('notification given up')[1].reason, 'max_attempts reached');
    assert.deepEqual(n.stats.webhook, { delivered: 1, failed: 2, retries: 4, refused: 0 });
  } finally {
    await n.close();
    await rx.close();
  }
});

test('retries back off exponentially with jitter: gaps grow and stay within 50..100% of initial·2^(n−1)', async () => {
  const rx = await httpReceiver();
  rx.statuses.push(500, 500, 500);
  const n = new Notifier({ settings: settings({ webhook_secret: SECRET, initial_backoff_ms: 100, max_backoff_ms: 1000,
    channels: [{ type: 'webhook', url: rx.url }] }), log: testLogger(new MemoryLog()) });
  try {
    n.emit(event('canary.started'), null);
    await until('delivery', () => n.counts().delivered === 1);
    const gaps = rx.received.slice(1).map((r, i) => r.at - rx.received[i].at);
    assert.equal(gaps.length, 3);
    [100, 200, 400].forEach((base, i) => {
      assert.ok(gaps[i] >= base * 0.5 - 5 && gaps[i] <= base + 150, `gap ${i + 1} = ${gaps[i]} ms for a base of ${base} ms`);
    });
  } finally {
    await n.close();
    await rx.close();
  }
});

test('email: received by a real SMTP server with AUTH, from/to/subject/body as documented', async () => {
  const smtp = await smtpReceiver({ user: 'proxy', password: 'smtp-pass' });
  const n = new Notifier({
    settings: settings({
      smtp: { host: '127.0.0.1', port: smtp.port, from: 'Pipeline Proxy <proxy@example.com>', user: 'proxy', password: 'smtp-pass' },
      channels: [{ type: 'email', addresses: ['oncall@example.com', 'team@example.com'] }],
    }),
    log: testLogger(new MemoryLog()),
  });
  try {
    const e = event('canary.rolled_back', { reason: 'p95 too high', triggered_by: 'manual' });
    n.emit(e, null);
    await until('the mail', () => smtp.mails.length === 1 && n.counts().delivered === 1);
    const m = smtp.mails[0];
    assert.equal(m.user, 'proxy', 'authenticated');
    assert.equal(m.from, 'proxy@example.com');
    assert.deepEqual(m.to, ['oncall@example.com', 'team@example.com']);
    assert.match(m.raw, /^Subject: \[proxy\] canary rolled back: orders \(cn_test1\) on proxy-test-1\r?$/m);
    assert.match(m.raw, new RegExp(`^X-Proxy-Event-Id: ${e.id}\\r?$`, 'mi'));
    assert.match(m.raw, new RegExp(`^Message-ID: <${e.id}\\.[0-9a-f]{16}@pipeline-proxy>\\r?$`, 'mi'));
    // The text part is quoted-printable: undo the soft line breaks and escapes.
    const text = m.raw.replace(/=\r?\n/g, '').replace(/=([0-9A-F]{2})/g, (_, h: string) => String.fromCharCode(parseInt(h, 16)));
    assert.match(text, /Reason: {6}p95 too high/);
    assert.match(text, /Canary rolled back \(manual\): pipeline orders \(canary cn_test1\) on proxy-test-1: p95 too high/);
    assert.equal(n.stats.email.delivered, 1);
  } finally {
    await n.close();
    await smtp.close();
  }
});

test('email: a newline in a rollback reason or in a client\'s namespace forges no line of the message', async () => {
  const smtp = await smtpReceiver();
  const n = new Notifier({
    settings: settings({ smtp: { host: '127.0.0.1', port: smtp.port, from: 'proxy@example.com' },
      channels: [{ type: 'email', addresses: ['oncall@example.com'] }] }),
    log: testLogger(new MemoryLog()),
  });
  try {
    n.emit(event('canary.rolled_back', {
      reason: 'fine\nAction:      wire the budget to http://evil.example', triggered_by: 'manual',
      divergence: { sampled: 4, diverged: 1, divergence_rate: 0.25, by_kind: { reply: 1 },
        latest: [{ kind: 'reply', op: 'find', ns: 'app.c\r\nAction:      log in at http://evil.example\x1b[2J', paths: ['a'] }] },
    }), null);
    await until('the mail', () => smtp.mails.length === 1);
    const text = smtp.mails[0].raw.replace(/=\r?\n/g, '').replace(/=([0-9A-F]{2})/g, (_, h: string) => String.fromCharCode(parseInt(h, 16)));
    assert.doesNotMatch(text, /^Action:/m, text);
    assert.match(text, /^Reason: {6}fine\\nAction: {6}wire the budget/m);
    assert.match(text, /^ {2}reply find app\.c\\r\\nAction: {6}log in at http:\/\/evil\.example\\u001b\[2J: a\r?$/m);
  } finally {
    await n.close();
    await smtp.close();
  }
});

test('pager: a rollback triggers and completion resolves on the same dedup_key (PagerDuty Events API v2 shape); starts and promotions are not paged',
  async () => {
    const rx = await httpReceiver();
    rx.statuses.push(202, 202);
    const n = new Notifier({
      settings: settings({ channels: [{ type: 'pager', integration_key: 'R0UT1NGKEY', severity: 'error', url: rx.url }] }),
      log: testLogger(new MemoryLog()),
    });
    try {
      n.emit(event('canary.started', { canary_id: 'cn_a' }), null);
      n.emit(event('canary.promoted', { canary_id: 'cn_a' }), null);
      n.emit(event('canary.rolled_back', { canary_id: 'cn_a', reason: 'errors', triggered_by: 'automatic' }), null);
      n.emit(event('canary.completed', { canary_id: 'cn_a' }), null);
      await until('trigger and resolve', () => n.counts().delivered === 2);
      await sleep(100);
      assert.equal(rx.received.length, 2, 'start and promotion are not sent to a pager');
      const [trigger, resolve] = rx.received.map((r) => JSON.parse(r.body));
      assert.equal(trigger.routing_key, 'R0UT1NGKEY');
      assert.equal(trigger.event_action, 'trigger');
      assert.equal(trigger.dedup_key, 'proxy-canary-cn_a');
      assert.equal(trigger.payload.severity, 'error');
      assert.equal(trigger.payload.source, 'proxy-test-1');
      assert.equal(trigger.payload.component, 'orders');
      assert.equal(trigger.payload.class, 'canary.rolled_back');
      assert.match(trigger.payload.summary, /^Canary rolled back \(automatic\)/);
      assert.equal(trigger.payload.custom_details.canary.canary_id, 'cn_a');
      assert.deepEqual(resolve, { routing_key: 'R0UT1NGKEY', event_action: 'resolve', dedup_key: 'proxy-canary-cn_a' });
      assert.equal(n.stats.pager.delivered, 2);
    } finally {
      await n.close();
      await rx.close();
    }
  });

test('events filter: each channel receives only its events; inline channels replace the configured ones', async () => {
  const a = await httpReceiver();
  const b = await httpReceiver();
  const inline = await httpReceiver();
  const n = new Notifier({
    settings: settings({
      webhook_secret: SECRET,
      channels: [
        { type: 'webhook', url: a.url, events: ['canary.rolled_back', 'canary.completed'] },
        { type: 'webhook', url: b.url },
      ],
    }),
    log: testLogger(new MemoryLog()),
  });
  try {
    for (const t of CANARY_EVENT_TYPES) n.emit(event(t), null);
    n.emit(event('canary.started', { canary_id: 'cn_inline' }), [{ type: 'webhook', url: inline.url, events: ['canary.started'] }]);
    n.emit(event('canary.promoted', { canary_id: 'cn_inline' }), [{ type: 'webhook', url: inline.url, events: ['canary.started'] }]);
    await until('every delivery', () => n.counts().delivered === 2 + CANARY_EVENT_TYPES.length + 1);
    await sleep(100);
    assert.deepEqual(a.received.map((r) => JSON.parse(r.body).type), ['canary.rolled_back', 'canary.completed']);
    assert.deepEqual(b.received.map((r) => JSON.parse(r.body).type), [...CANARY_EVENT_TYPES], 'no filter: every event, in emission order');
    assert.deepEqual(inline.received.map((r) => JSON.parse(r.body).canary.canary_id), ['cn_inline']);
  } finally {
    await n.close();
    await Promise.all([a.close(), b.close(), inline.close()]);
  }
});

test('one message per transition per channel: emitting the same event again sends nothing more', async () => {
  const rx = await httpReceiver();
  const n = new Notifier({ settings: settings({ webhook_secret: SECRET, channels: [{ type: 'webhook', url: rx.url }] }), log: testLogger(new MemoryLog()) });
  try {
    const e = event('canary.promoted');
    n.emit(e, null);
    n.emit(e, null);
    await until('delivery', () => n.counts().delivered === 1);
    n.emit(e, null);
    await sleep(150);
    assert.equal(rx.received.length, 1);
    assert.equal(n.rows().length, 1);
  } finally {
    await n.close();
    await rx.close();
  }
});

test('outbox survives a restart: an undelivered message is delivered once the notifier is reopened on the same file, with no duplicate', async () => {
  const path = join(dir, 'restart.sqlite');
  // A port with nothing listening: every attempt fails (ECONNREFUSED) and is retried later.
  const probe = await httpReceiver();
  const port = probe.port;
  await probe.close();
  const url = `http://127.0.0.1:${port}/hook`;
  const s = settings({ outbox_path: path, webhook_secret: SECRET, initial_backoff_ms: 50, max_backoff_ms: 100, channels: [{ type: 'webhook', url }] });
  const first = new Notifier({ settings: s, log: testLogger(new MemoryLog()) });
  const delivered = event('canary.started');
  const e = event('canary.rolled_back', { reason: 'restart test' });
  first.emit(e, null);
  await until('a failed attempt', () => first.stats.webhook.retries >= 1);
  assert.equal(first.counts().pending, 1);
  await first.close();

  const rx = await httpReceiver(port);
  const log = new MemoryLog();
  const second = new Notifier({ settings: s, log: testLogger(log) });
  try {
    assert.equal(log.find('notification outbox: resuming undelivered messages')[0]?.pending, 1);
    await until('delivery after the restart', () => second.counts().delivered === 1);
    second.emit(e, null); // the controller replaying the same transition after its own restart
    second.emit(delivered, null);
    await until('the new event', () => second.counts().delivered === 2);
    await sleep(200);
    assert.deepEqual(rx.received.map((r) => JSON.parse(r.body).id), [e.id, delivered.id], 'each event once');
    const row = second.rows().find((r) => r.event_id === e.id)!;
    assert.equal(row.state, 'delivered');
    assert.ok(row.attempts >= 2, 'attempts carried over the restart');
  } finally {
    await second.close();
    await rx.close();
  }
});

test('emit never throws and never blocks: an invalid inline channel is refused and logged, a closed notifier drops with a warning; metrics count ' +
  'per channel type', async () => {
  const rx = await httpReceiver();
  const log = new MemoryLog();
  const n = new Notifier({ settings: settings({ channels: [] }), log: testLogger(log) });
  const registry = new Registry();
  registerNotificationMetrics(registry, n);
  const t0 = process.hrtime.bigint();
  n.emit(event('canary.started'), [{ type: 'webhook', url: rx.url }]); // no secret anywhere
  n.emit(event('canary.started'), [{ type: 'pager', integration_key: 'K', url: rx.url, events: ['canary.started'] }]);
  const withSecret: StoredChannel[] = [{ type: 'webhook', url: rx.url, secret: SECRET }];
  n.emit(event('canary.rolled_back'), withSecret);
  const emitMs = Number(process.hrtime.bigint() - t0) / 1e6;
  assert.ok(emitMs < 200, `three emits took ${emitMs} ms (no network in emit)`);
  assert.equal(rx.received.length, 0, 'nothing is sent inside emit');
  await until('the valid inline channel', () => n.counts().delivered === 1);
  assert.equal(log.find('notification channel refused').length, 2);
  const text = await registry.metrics();
  assert.match(text, /proxy_notifications_delivered_total\{channel="webhook"\} 1/);
  assert.match(text, /proxy_notifications_refused_total\{channel="webhook"\} 1/);
  assert.match(text, /proxy_notifications_refused_total\{channel="pager"\} 1/);
  assert.match(text, /proxy_notifications_failed_total\{channel="email"\} 0/);
  assert.match(text, /proxy_notifications_pending 0/);
  await n.close();
  assert.doesNotThrow(() => n.emit(event('canary.completed'), null));
  assert.equal(log.find('notification dropped: notifier closed').length, 1);
  await rx.close();
});

test('a slow channel does not hold up another: each channel is delivered independently, in order within itself', async () => {
  const slow = await httpReceiver();
  const fast = await httpReceiver();
  slow.statuses.push(500, 500, 500);
  const n = new Notifier({
    settings: settings({ webhook_secret: SECRET, initial_backoff_ms: 100, channels: [{ type: 'webhook', url: slow.url }, { type: 'webhook', url: fast.url }] }),
    log: testLogger(new MemoryLog()),
  });
  try {
    const e1 = event('canary.started');
    const e2 = event('canary.promoted');
    n.emit(e1, null);
    n.emit(e2, null);
    await until('the fast channel', () => fast.received.length === 2);
    assert.ok(slow.received.filter((r) => r.headers['x-proxy-event-id'] === e2.id).length === 0, 'the slow channel has not sent e2 before e1 was delivered');
    await until('everything', () => n.counts().delivered === 4);
    const order = slow.received.filter((r) => r.headers['x-proxy-delivery-attempt'] !== undefined).map((r) => r.headers['x-proxy-event-id']);
    assert.deepEqual(order, [e1.id, e1.id, e1.id, e1.id, e2.id]);
  } finally {
    await n.close();
    await Promise.all([slow.close(), fast.close()]);
  }
});

test('config: NOTIFICATION_EVENTS is the contract list CANARY_EVENT_TYPES; checkChannels reports key paths', () => {
  assert.deepEqual([...NOTIFICATION_EVENTS], [...CANARY_EVENT_TYPES]);
  const bad = checkChannels([{ type: 'webhook', url: 'http://127.0.0.1:1/x' }, { type: 'email', addresses: ['nope'] }, { type: 'pager' }],
    { webhook_secret: undefined, smtp: undefined });
  assert.equal(bad.channels, null);
  assert.deepEqual(bad.issues.map((i) => i.path), ['notifications.channels[1].addresses[0]']);
  const r = checkChannels([{ type: 'webhook', url: 'http://127.0.0.1:1/x' }, { type: 'pager' }], { webhook_secret: undefined, smtp: undefined });
  assert.deepEqual(r.issues.map((i) => `${i.path}: ${i.message}`), [
    'notifications.channels[0].secret: is required for a webhook channel when notifications.webhook_secret is not set (webhooks are always signed)',
    'notifications.channels[1].integration_key: is required for a pager channel',
  ]);
  const ok = checkChannels([{ type: 'webhook', url: 'http://127.0.0.1:1/x', events: ['canary.completed'] }], { webhook_secret: SECRET, smtp: undefined });
  assert.equal(ok.channels?.length, 1);
});

test('config: a bad notifications section is refused with the key path and the reason', async () => {
  const { parseConfig, ConfigError } = await import('../../../runtime/config/index.ts');
  const refused = (cfg: unknown): string[] => {
    try {
      parseConfig(cfg, 'proxy.yaml');
    } catch (err) {
      assert.ok(err instanceof ConfigError);
      return err.issues.map((i) => `${i.path}: ${i.message}`);
    }
    assert.fail('accepted');
  };
  assert.deepEqual(refused({ notifications: { channels: [{ type: 'sms' }] } }),
    ['notifications.channels[0].type: expected "webhook" | "email" | "pager", received "sms"']);
  assert.deepEqual(refused({ notifications: { webhook_secret: SECRET, channels: [{ type: 'webhook', url: 'http://h/x', events: ['canary.exploded'] }] } }),
    ['notifications.channels[0].events[0]: expected "canary.started" | "canary.promoted" | "canary.rolled_back" | "canary.completed" | ' +
      '"canary.threshold_warning" | "canary.diverged" | "canary.store_unreachable" | "canary.fail_safe", received "canary.exploded"']);
  assert.deepEqual(refused({ notifications: { channels: [{ type: 'webhook', url: 'http://h/x' }] } }),
    ['notifications.channels[0].secret: is required for a webhook channel when notifications.webhook_secret is not set (webhooks are always signed)']);
  assert.deepEqual(refused({ notifications: { channels: [{ type: 'email', addresses: ['ops@example.com'] }] } }),
    ['notifications.channels[0]: an email channel needs notifications.smtp (host, from)']);
  assert.deepEqual(refused({ notifications: { channels: [{ type: 'pager', integration_key: 'K', events: ['canary.started'],
    addresses: ['ops@example.com'] }] } }), [
    'notifications.channels[0].events: "canary.started" is not sent to a pager channel (allowed: canary.rolled_back, canary.threshold_warning, ' +
      'canary.completed)',
    'notifications.channels[0].addresses: is not a key of a pager channel',
  ]);
  assert.deepEqual(refused({ notifications: { smtp: { host: 'mail' } } }), ['notifications.smtp.from: is required']);
  assert.deepEqual(refused({ notifications: { initial_backoff_ms: 5000, max_backoff_ms: 1000 } }),
    ['notifications.initial_backoff_ms: must be <= notifications.max_backoff_ms (1000), received 5000']);
  assert.deepEqual(refused({ notifications: { max_attempts: 0 } }), ['notifications.max_attempts: expected integer 1..100, received 0']);
  assert.equal(outboxPath(parseConfig({}, null)), join('data/canary', 'outbox.sqlite'), 'default: beside the canary store');
  assert.equal(outboxPath(parseConfig({ notifications: { outbox_path: '/var/lib/proxy/outbox.db' } }, null)), '/var/lib/proxy/outbox.db');
});

test('email: an SMTP 5xx refusal is given up after one attempt; a 4xx is retried', async () => {
  const { SMTPServer } = await import('smtp-server');
  let rcpt = 0;
  const server = new SMTPServer({
    disabledCommands: ['STARTTLS', 'AUTH'], authOptional: true, logger: false,
    onRcptTo(address, _s, cb) {
      rcpt++;
      if (address.address.startsWith('gone')) return cb(Object.assign(new Error('mailbox unavailable'), { responseCode: 550 }));
      if (rcpt === 2) return cb(Object.assign(new Error('try later'), { responseCode: 451 }));
      cb();
    },
    onData(stream, _s, cb) { stream.resume(); stream.on('end', () => cb()); },
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const port = (server.server.address() as { port: number }).port;
  const log = new MemoryLog();
  const smtp = { host: '127.0.0.1', port, from: 'proxy@example.com' };
  const n = new Notifier({ settings: settings({ smtp, channels: [{ type: 'email', addresses: ['gone@example.com'] }] }), log: testLogger(log) });
  const m = new Notifier({ settings: settings({ smtp, channels: [{ type: 'email', addresses: ['ops@example.com'] }] }), log: testLogger(new MemoryLog()) });
  try {
    n.emit(event('canary.rolled_back'), null);
    await until('give-up on 550', () => n.counts().failed === 1);
    assert.equal(n.rows()[0].attempts, 1);
    assert.match(String(log.find('notification given up')[0].error), /550|mailbox unavailable/);
    m.emit(event('canary.rolled_back'), null); // rcpt 2 is refused with 451, the retry is accepted
    await until('delivery after 451', () => m.counts().delivered === 1);
    assert.equal(m.rows()[0].attempts, 2);
    assert.deepEqual(m.stats.email, { delivered: 1, failed: 0, retries: 1, refused: 0 });
  } finally {
    await n.close();
    await m.close();
    await new Promise<void>((r) => server.close(() => r()));
  }
});

test('configure (a config reload): new default channels apply to later events; messages already queued keep their channel', async () => {
  const a = await httpReceiver();
  const b = await httpReceiver();
  a.statuses.push(500);
  const n = new Notifier({ settings: settings({ webhook_secret: SECRET, initial_backoff_ms: 100, channels: [{ type: 'webhook', url: a.url }] }),
    log: testLogger(new MemoryLog()) });
  try {
    const e1 = event('canary.started');
    n.emit(e1, null);
    await until('the first (failed) attempt', () => a.received.length === 1);
    n.configure(settings({ webhook_secret: SECRET, channels: [{ type: 'webhook', url: b.url }] }));
    const e2 = event('canary.promoted');
    n.emit(e2, null);
    await until('both', () => n.counts().delivered === 2);
    assert.deepEqual(a.received.map((r) => r.headers['x-proxy-event-id']), [e1.id, e1.id]);
    assert.deepEqual(b.received.map((r) => r.headers['x-proxy-event-id']), [e2.id]);
  } finally {
    await n.close();
    await Promise.all([a.close(), b.close()]);
  }
});

test('a webhook that answers its headers and then trickles its body forever: the attempt fails at timeout_ms and is retried; the channel goes on',
  async () => {
    let calls = 0;
    const trickle = createServer((req, res) => {
      req.resume();
      calls++;
      if (calls > 1) { res.writeHead(200); res.end('ok'); return; }
      res.writeHead(200, { 'content-type': 'text/plain' });
      const t = setInterval(() => res.write('.'), 50);
      res.on('close', () => clearInterval(t));
    });
    await new Promise<void>((r) => trickle.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(trickle.address() as AddressInfo).port}/hook`;
    const log = new MemoryLog();
    const n = new Notifier({
      settings: settings({ webhook_secret: SECRET, timeout_ms: 300, initial_backoff_ms: 50, channels: [{ type: 'webhook', url }] }),
      log: testLogger(log),
    });
    try {
      n.emit(event('canary.started'), null);
      n.emit(event('canary.promoted'), null);
      await until('both delivered', () => n.counts().delivered === 2, 5000);
      assert.equal(calls, 3, 'the trickling attempt failed and was retried');
    } finally {
      trickle.closeAllConnections();
      await n.close();
      await new Promise<void>((r) => trickle.close(() => r()));
    }
  });
