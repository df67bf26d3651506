// Checking channels given inline at canary start (POST /api/v1/canary `notifications.channels`,
// or the CLI's candidate file) with the same schema and rules as the config file's
// notifications.channels, so the control plane can refuse a bad one with its key path (400)
// instead of the notifier finding out at delivery.
import * as v from 'valibot';
import { channelProblems, formatPath, notificationChannel, type NotificationsConfig } from '../../config/index.ts';
import type { NotificationChannel } from '../events.ts';

export interface ChannelIssue { path: string; message: string }

/** `input` as channels, or the issues (paths like `notifications.channels[1].url`, under `prefix`). */
export function checkChannels(
  input: unknown, settings: Pick<NotificationsConfig, 'webhook_secret' | 'smtp'>, prefix = 'notifications.channels',
): { channels: NotificationChannel[]; issues: [] } | { channels: null; issues: ChannelIssue[] } {
  const r = v.safeParse(v.array(notificationChannel), input);
  if (!r.success) {
    return {
      channels: null,
      issues: r.issues.map((i) => {
        const keys = (i.path ?? []).map((p) => p.key as string | number);
        return { path: prefix + formatPath(keys), message: i.message };
      }),
    };
  }
  const issues: ChannelIssue[] = [];
  r.output.forEach((ch, n) => {
    for (const p of channelProblems(ch, settings)) issues.push({ path: `${prefix}[${n}]${p.key === null ? '' : `.${p.key}`}`, message: p.message });
  });
  return issues.length > 0 ? { channels: null, issues } : { channels: r.output as NotificationChannel[], issues: [] };
}
