// Webhook channel: the event as JSON, signed. The signature is HMAC-SHA256 with the channel's
// secret over `<timestamp>.<body>` (timestamp = X-Proxy-Timestamp, Unix seconds of this attempt),
// hex, sent as `X-Proxy-Signature: sha256=<hex>`. Signing the timestamp lets a receiver refuse
// replays (reject timestamps older than a few minutes); the event id lets it drop duplicates.
import { createHmac, timingSafeEqual } from 'node:crypto';
import type { CanaryEvent, NotificationChannel } from '../events.ts';
import { USER_AGENT } from '../../version.ts';
import { postJson } from './http-post.ts';
import type { Outcome } from './outcome.ts';
import { webhookBody } from './payload.ts';

export const SIGNATURE_HEADER = 'x-proxy-signature';
export const TIMESTAMP_HEADER = 'x-proxy-timestamp';

export function sign(secret: string, timestamp: string, body: string): string {
  return `sha256=${createHmac('sha256', secret).update(`${timestamp}.${body}`).digest('hex')}`;
}

/** For receivers (and tests): true when `signature` is the one `secret` gives for this timestamp and body. */
export function verifySignature(secret: string, timestamp: string, body: string, signature: string): boolean {
  const want = Buffer.from(sign(secret, timestamp, body));
  const got = Buffer.from(signature);
  return want.length === got.length && timingSafeEqual(want, got);
}

export function sendWebhook(
  event: CanaryEvent, channel: NotificationChannel, secret: string, instance: string, attempt: number, timeoutMs: number,
  now: () => number,
): Promise<Outcome> {
  const body = JSON.stringify(webhookBody(event, instance));
  const timestamp = String(Math.floor(now() / 1000));
  return postJson(channel.url ?? '', body, {
    'user-agent': USER_AGENT,
    'x-proxy-event': event.type,
    'x-proxy-event-id': event.id,
    'x-proxy-delivery-attempt': String(attempt),
    [TIMESTAMP_HEADER]: timestamp,
    [SIGNATURE_HEADER]: sign(secret, timestamp, body),
  }, timeoutMs);
}
