// Public surface of the canary notifications (SPEC §6): the outbox-backed CanaryEventSink, its
// metrics, the inline-channel check for the control plane, and the webhook signature helpers.
export { Notifier, outboxPath, channelKey, wants, CHANNEL_TYPES, type NotifierOptions, type ChannelStats, type ChannelType,
  type StoredChannel } from './notifier.ts';
export { registerNotificationMetrics, NOTIFICATION_METRICS } from './metrics.ts';
export { checkChannels, type ChannelIssue } from './channels.ts';
export { sign, verifySignature, SIGNATURE_HEADER, TIMESTAMP_HEADER } from './webhook.ts';
export { webhookBody, emailMessage, pagerEvent, pagerDedupKey, summary, WEBHOOK_PAYLOAD_VERSION } from './payload.ts';
export type { OutboxRow, OutboxState } from './outbox.ts';
