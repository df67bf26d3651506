// Pager channel: PagerDuty Events API v2 (POST {routing_key, event_action, dedup_key, payload}).
// PagerDuty answers 202 when it accepted the event, 400 when it is invalid (given up), 429 when
// throttled (retried). The URL is the channel's `url`, PagerDuty's own by default.
import { PAGERDUTY_EVENTS_URL } from '../../config/index.ts';
import type { CanaryEvent, NotificationChannel } from '../events.ts';
import { USER_AGENT } from '../../version.ts';
import { postJson } from './http-post.ts';
import type { Outcome } from './outcome.ts';
import { pagerEvent } from './payload.ts';

export async function sendPager(event: CanaryEvent, channel: NotificationChannel, instance: string, timeoutMs: number): Promise<Outcome> {
  const body = pagerEvent(event, channel, instance);
  if (body === null) return { ok: false, retry: false, error: `${event.type} is not sent to a pager` };
  return postJson(channel.url ?? PAGERDUTY_EVENTS_URL, JSON.stringify(body), { 'user-agent': USER_AGENT }, timeoutMs);
}
