// The notifier's metrics (declared in the metric table, runtime/metrics/table.ts), read from its
// counters at scrape time.
import { Counter, Gauge, type Registry } from 'prom-client';
import { CHANNEL_TYPES, type Notifier } from './notifier.ts';
import { promOptions, type MetricName } from '../../metrics/index.ts';

export const NOTIFICATION_METRICS = {
  delivered: 'proxy_notifications_delivered_total',
  failed: 'proxy_notifications_failed_total',
  retries: 'proxy_notifications_retries_total',
  refused: 'proxy_notifications_refused_total',
  pending: 'proxy_notifications_pending',
} as const satisfies Record<string, MetricName>;

/** Registers the notifier's metrics in `registry` (label `channel`: webhook, email, pager); names,
 *  help and labels from the metric table. */
export function registerNotificationMetrics(registry: Registry, notifier: Notifier): void {
  const perChannel = (name: (typeof NOTIFICATION_METRICS)[Exclude<keyof typeof NOTIFICATION_METRICS, 'pending'>],
    field: 'delivered' | 'failed' | 'retries' | 'refused') =>
    new Counter({
      ...promOptions(name), registers: [registry],
      collect() {
        this.reset();
        for (const t of CHANNEL_TYPES) this.inc({ channel: t }, notifier.stats[t][field]);
      },
    });
  perChannel(NOTIFICATION_METRICS.delivered, 'delivered');
  perChannel(NOTIFICATION_METRICS.failed, 'failed');
  perChannel(NOTIFICATION_METRICS.retries, 'retries');
  perChannel(NOTIFICATION_METRICS.refused, 'refused');
  new Gauge({
    ...promOptions(NOTIFICATION_METRICS.pending), registers: [registry],
    collect() { this.set(notifier.counts().pending); },
  });
}
