// Configuration of canary notifications (SPEC §6), key `notifications`: default channels, the
// outbox, retries, the SMTP server. Delivered by runtime/canary/notify; the control plane checks
// channels given inline at canary start with the same schema and channelProblems.
import * as v from 'valibot';
import { onReload, onRestart } from './applies.ts';
import { MAX_TIMER_MS, expects, int } from './expects.ts';
import { notRefusedHost, notRefusedUrl } from './address.ts';

/** SPEC §6 event names. runtime/canary/events.ts owns the list (CANARY_EVENT_TYPES); config sits
 *  below canary in the layers, so it keeps this copy and test/canary/notify/config.test.ts checks
 *  the two are equal. */
export const NOTIFICATION_EVENTS = [
  'canary.started',
  'canary.promoted',
  'canary.rolled_back',
  'canary.completed',
  'canary.threshold_warning',
  'canary.diverged',
  'canary.store_unreachable',
  'canary.fail_safe',
] as const;
/** What a pager channel may receive: a rollback or a warning opens (triggers) the canary's incident,
 *  completion resolves it; starts and promotions never page anyone. */
export const PAGER_EVENTS = ['canary.rolled_back', 'canary.threshold_warning', 'canary.completed'] as const;
export const PAGER_SEVERITIES = ['critical', 'error', 'warning', 'info'] as const;
export const PAGERDUTY_EVENTS_URL = 'https://events.pagerduty.com/v2/enqueue';

export const notificationChannel = v.strictObject({
  type: onReload(v.pipe(v.picklist(['webhook', 'email', 'pager']), v.description('Channel kind.'))),
  url: onReload(v.optional(expects(v.pipe(v.string(), v.url(), v.regex(/^https?:/), notRefusedUrl,
    v.description(`webhook: the URL the JSON event is POSTed to (required). pager: the PagerDuty Events API v2 URL; ` +
    `default ${PAGERDUTY_EVENTS_URL}.`)), 'http(s) URL'))),
  secret: onReload(v.optional(expects(v.pipe(v.string(), v.minLength(16), v.description('webhook: HMAC-SHA256 signing secret of this channel ' +
    '(X-Proxy-Signature); default notifications.webhook_secret. Never sent.')), 'string of at least 16 characters'))),
  addresses: onReload(v.optional(expects(v.pipe(v.array(expects(v.pipe(v.string(), v.email()), 'e-mail address')), v.minLength(1),
    v.description('email: recipients (required, at least one).')), 'non-empty array of e-mail addresses'))),
  integration_key: onReload(v.optional(v.pipe(v.string(), v.minLength(1), v.description('pager: the PagerDuty integration (routing) key ' +
    '(required); sent as routing_key.')))),
  severity: onReload(v.optional(v.pipe(v.picklist(PAGER_SEVERITIES), v.description('pager: severity of the incident a rollback triggers; default ' +
    '"critical" (a threshold warning is always "warning").')))),
  events: onReload(v.optional(expects(v.pipe(v.array(v.picklist(NOTIFICATION_EVENTS)), v.minLength(1),
    v.description('Only these events are sent to the channel; absent: all (for pager: canary.rolled_back, canary.threshold_warning, ' +
    'canary.completed).')), `non-empty array of ${NOTIFICATION_EVENTS.map((e) => JSON.stringify(e)).join(' | ')}`))),
});

export const notificationsSchema = v.strictObject({
  channels: onReload(v.optional(v.pipe(v.array(notificationChannel), v.description('Default channels of every canary; a canary started with its ' +
    'own channels uses those instead.')), [])),
  instance_name: onReload(v.optional(v.pipe(v.string(), v.minLength(1), v.description('Name of this proxy instance in every message; default the ' +
    'host name.')))),
  outbox_path: onRestart(v.optional(v.pipe(v.string(), v.minLength(1), v.description('SQLite file of the outbox; default ' +
    '<canary.data_dir>/outbox.sqlite. Every message is written there before it is sent and marked when delivered, so a restart resumes what was ' +
    'not delivered (relative to the working directory; created if missing). One proxy per file. ":memory:" keeps it in memory (lost on restart).')))),
  webhook_secret: onReload(v.optional(expects(v.pipe(v.string(), v.minLength(16),
    v.description('Default HMAC-SHA256 secret of webhook channels (X-Proxy-Signature over "<X-Proxy-Timestamp>.<body>"). A webhook channel without ' +
    'a secret here or its own is refused.')), 'string of at least 16 characters'))),
  timeout_ms: onReload(v.optional(int(100, MAX_TIMER_MS, 'Milliseconds allowed for one delivery attempt (HTTP request or SMTP session).'), 10000)),
  max_attempts: onReload(v.optional(int(1, 100, 'Attempts per message before it is given up (logged and counted as failed).'), 8)),
  initial_backoff_ms: onReload(v.optional(int(1, MAX_TIMER_MS, 'Delay before the second attempt; each later one doubles it, up to max_backoff_ms, ' +
    'with random jitter (50..100% of the delay).'), 1000)),
  max_backoff_ms: onReload(v.optional(int(1, MAX_TIMER_MS, 'Largest delay between two attempts.'), 60000)),
  smtp: onReload(v.optional(v.pipe(v.strictObject({
    host: onReload(v.pipe(v.string(), v.minLength(1), notRefusedHost, v.description('SMTP server host. Never a link-local (169.254.0.0/16, ' +
      'fe80::/10) or unspecified (0.0.0.0/8, ::) address, nor, at delivery, a name resolving to one (nothing is sent: the attempt fails and ' +
      'is retried).'))),
    port: onReload(v.optional(int(1, 65535, 'SMTP server port.'), 587)),
    secure: onReload(v.optional(v.pipe(v.boolean(), v.description('TLS from the first byte (port 465); false: STARTTLS when the server offers it.')), false)),
    from: onReload(v.pipe(v.string(), v.minLength(3), v.description('Sender address, e.g. "Pipeline Proxy <proxy@example.com>".'))),
    user: onReload(v.optional(v.pipe(v.string(), v.minLength(1), v.description('SMTP AUTH user; absent: no authentication.')))),
    password: onReload(v.optional(v.pipe(v.string(), v.description('SMTP AUTH password (with user).')))),
  }), v.description('SMTP server of email channels (through nodemailer). Required when an email channel is configured.')))),
});

export type NotificationsConfig = v.InferOutput<typeof notificationsSchema>;
export type NotificationChannelConfig = v.InferOutput<typeof notificationChannel>;

/** What a channel lacks or may not have, given the notifications settings it is used with (a
 *  channel given inline at canary start is checked the same way). `key` null: the channel itself. */
export function channelProblems(ch: NotificationChannelConfig, settings: Pick<NotificationsConfig, 'webhook_secret' | 'smtp'>): { key: string | null;
  message: string }[] {
  const out: { key: string | null; message: string }[] = [];
  const foreign = (keys: string[]) => {
    for (const k of keys) if ((ch as Record<string, unknown>)[k] !== undefined) out.push({ key: k, message: `is not a key of a ${ch.type} channel` });
  };
  if (ch.type === 'webhook') {
    if (ch.url === undefined) out.push({ key: 'url', message: 'is required for a webhook channel' });
    if (ch.secret === undefined && settings.webhook_secret === undefined) out.push({ key: 'secret', message: 'is required for a webhook channel ' +
      'when notifications.webhook_secret is not set (webhooks are always signed)' });
    foreign(['addresses', 'integration_key', 'severity']);
  } else if (ch.type === 'email') {
    if (ch.addresses === undefined) out.push({ key: 'addresses', message: 'is required for an email channel' });
    if (settings.smtp === undefined) out.push({ key: null, message: 'an email channel needs notifications.smtp (host, from)' });
    foreign(['url', 'secret', 'integration_key', 'severity']);
  } else {
    if (ch.integration_key === undefined) out.push({ key: 'integration_key', message: 'is required for a pager channel' });
    ch.events?.forEach((e) => {
      if (!(PAGER_EVENTS as readonly string[]).includes(e)) out.push({ key: 'events', message: `"${e}" is not sent to a pager channel ` +
        `(allowed: ${PAGER_EVENTS.join(', ')})` });
    });
    foreign(['secret', 'addresses']);
  }
  return out;
}
