// The notifier's metrics, declared in one place, read from its counters at scrape time.
import { Counter, Gauge, type Registry } from 'prom-client';
import { CHANNEL_TYPES, type Notifier } from './notifier.ts';

export const NOTIFICATION_METRICS = {
  delivered: 'proxy_notifications_delivered_total',
  failed: 'proxy_notifications_failed_total',
  retries: 'proxy_notifications_retries_total',
  refused: 'proxy_notifications_refused_total',
  pending: 'proxy_notifications_pending',
} as const;

/** Registers the notifier's metrics in `registry` (label `channel`: webhook, email, pager). */
export function registerNotificationMetrics(registry: Registry, notifier: Notifier): void {
  const perChannel = (name: string, help: string, field: 'delivered' | 'failed' | 'retries' | 'refused') =>
    new Counter({
      name, help, labelNames: ['channel'] as const, registers: [registry],
      collect() {
        this.reset();
        for (const t of CHANNEL_TYPES) this.inc({ channel: t }, notifier.stats[t][field]);
      },
    });
  perChannel(NOTIFICATION_METRICS.delivered, 'Notification messages delivered (2xx, or accepted by the SMTP server), by channel type', 'delivered');
  perChannel(NOTIFICATION_METRICS.failed, 'Notification messages given up (refused by the receiver, or max_attempts reached), by channel type', 'failed');
  perChannel(NOTIFICATION_METRICS.retries, 'Failed notification attempts that were scheduled again, by channel type', 'retries');
  perChannel(NOTIFICATION_METRICS.refused, 'Messages not queued because their channel was invalid (e.g. a webhook without a secret), by channel type', 'refused');
  new Gauge({
    name: NOTIFICATION_METRICS.pending, help: 'Notification messages in the outbox not yet delivered or given up', registers: [registry],
    collect() { this.set(notifier.counts().pending); },
  });
}
