// The CanaryEventSink of the proxy: emit() writes one outbox row per (event, channel) that wants
// the event, synchronously, and returns; a pump delivers the rows in the background — per channel
// in order, retried with jittered exponential backoff up to notifications.max_attempts — and marks
// each delivered or given up. Rows left pending by a stop or a crash are delivered when the next
// Notifier opens the same outbox file. Nothing here throws into the controller.
import { createHash } from 'node:crypto';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { channelProblems, PAGER_EVENTS, type NotificationChannelConfig, type NotificationsConfig, type ProxyConfig } from '../../config/index.ts';
import type { Log } from '../../log/index.ts';
import type { CanaryEvent, CanaryEventSink, NotificationChannel } from '../events.ts';
import { EmailSender } from './email.ts';
import type { Outcome } from './outcome.ts';
import { Outbox, type OutboxRow } from './outbox.ts';
import { sendPager } from './pager.ts';
import { sendWebhook } from './webhook.ts';
import { URL_REFUSED } from './http-post.ts';

export type ChannelType = NotificationChannel['type'];
export const CHANNEL_TYPES: readonly ChannelType[] = ['webhook', 'email', 'pager'];

/** A channel as the outbox keeps it: SPEC §6 fields plus the webhook's own secret, if it has one. */
export type StoredChannel = NotificationChannel & { secret?: string };

export interface ChannelStats { delivered: number; failed: number; retries: number; refused: number }

export interface NotifierOptions {
  settings: NotificationsConfig;
  /** The outbox file when settings.outbox_path is absent (outboxPath(config) gives the configured default). */
  defaultOutboxPath?: string;
  log: Log;
  /** Wall clock (epoch ms); injectable for tests. */
  now?: () => number;
  /** [0,1) source of the backoff jitter. */
  random?: () => number;
}

/** Messages attempted at the same time (each channel still gets one at a time, in order). */
const MAX_IN_FLIGHT = 8;
/** Delivered and given-up rows are kept this long (for diagnostics and to drop re-emitted events). */
const KEEP_DONE_MS = 7 * 24 * 3600 * 1000;
const PRUNE_EVERY_MS = 3600 * 1000;

/** The outbox file of a configuration: notifications.outbox_path, else <canary.data_dir>/outbox.sqlite. */
export function outboxPath(config: Pick<ProxyConfig, 'notifications' | 'canary'>): string {
  return config.notifications.outbox_path ?? join(config.canary.data_dir, 'outbox.sqlite');
}

/** Stable identity of a channel: what decides where a message goes (not its filter or severity). */
export function channelKey(ch: StoredChannel): string {
  const id = JSON.stringify([ch.type, ch.url ?? null, ch.addresses ?? null, ch.integration_key ?? null]);
  return createHash('sha256').update(id).digest('hex').slice(0, 16);
}

/** Whether a channel receives this event type (its `events`, or the default for its kind). */
export function wants(ch: NotificationChannel, type: CanaryEvent['type']): boolean {
  if (ch.events !== undefined) return (ch.events as readonly string[]).includes(type);
  return ch.type !== 'pager' || (PAGER_EVENTS as readonly string[]).includes(type);
}

export class Notifier implements CanaryEventSink {
  readonly stats: Record<ChannelType, ChannelStats>;
  private settings: NotificationsConfig;
  private instance: string;
  private email: EmailSender | null;
  private readonly outbox: Outbox;
  private readonly log: Log;
  private readonly now: () => number;
  private readonly random: () => number;
  private readonly inFlight = new Map<string, Promise<void>>();
  private timer: NodeJS.Timeout | null = null;
  private timerAt = Infinity;
  private closed = false;
  private prunedAt: number;

  constructor(opts: NotifierOptions) {
    this.settings = opts.settings;
    this.log = opts.log;
    this.now = opts.now ?? Date.now;
    this.random = opts.random ?? Math.random;
    this.instance = opts.settings.instance_name ?? hostname();
    this.email = opts.settings.smtp === undefined ? null : new EmailSender(opts.settings.smtp, opts.settings.timeout_ms);
    this.stats = { webhook: newStats(), email: newStats(), pager: newStats() };
    const path = opts.settings.outbox_path ?? opts.defaultOutboxPath ?? ':memory:';
    // Watched (before each write, every 10 s, at close): deleted or replaced while the proxy runs, it is written anew and logged.
    this.outbox = new Outbox(path, { log: this.log });
    this.prunedAt = this.now();
    this.outbox.prune(this.prunedAt - KEEP_DONE_MS);
    const pending = this.outbox.counts().pending;
    if (pending > 0) this.log.info('notification outbox: resuming undelivered messages', { pending, outbox: path });
    this.schedule(0);
  }

  /** New settings on a config reload: default channels, secrets, SMTP, retry bounds. The outbox
   *  file is kept (it changes with a restart only). */
  configure(settings: NotificationsConfig): void {
    // The SMTP transport is replaced only when its settings change (an attempt in flight keeps the old one).
    if (JSON.stringify([settings.smtp, settings.timeout_ms]) !== JSON.stringify([this.settings.smtp, this.settings.timeout_ms])) {
      this.email?.close();
      this.email = settings.smtp === undefined ? null : new EmailSender(settings.smtp, settings.timeout_ms);
    }
    this.settings = settings;
    this.instance = settings.instance_name ?? hostname();
    this.schedule(0);
  }

  emit(event: CanaryEvent, channels: NotificationChannel[] | null): void {
    if (this.closed) {
      this.log.warn('notification dropped: notifier closed', { event_id: event.id, type: event.type });
      return;
    }
    try {
      const list = (channels ?? this.settings.channels) as StoredChannel[];
      const at = this.now();
      let queued = 0;
      for (const ch of list) {
        if (!wants(ch, event.type)) continue;
        // Inline channels were checked by the control plane; configured ones by the config loader.
        // Checked again so that a channel that cannot be delivered is said once, here, not retried.
        const problems = channelProblems(ch as NotificationChannelConfig, this.settings);
        if (problems.length > 0) {
          (this.stats[ch.type] ?? this.stats.webhook).refused++;
          this.log.error('notification channel refused', { event_id: event.id, type: ch.type,
            problems: problems.map((p) => (p.key ? `${p.key}: ${p.message}` : p.message)) });
          continue;
        }
        if (this.outbox.enqueue(event, channelKey(ch), ch, at)) queued++;
      }
      this.log.info('canary event', { event_id: event.id, type: event.type, canary_id: event.canary_id, pipeline_id: event.pipeline_id,
        stage: event.stage, traffic_pct: event.traffic_pct, messages: queued });
      if (queued > 0) this.schedule(0);
    } catch (err) {
      this.log.error('notification not recorded', { event_id: event.id, type: event.type, error: (err as Error).message });
    }
  }

  /** Rows by state (the pending ones are also the gauge proxy_notifications_pending). */
  counts(): { pending: number; delivered: number; failed: number } {
    return this.outbox.counts();
  }

  /** Every outbox row, oldest first. */
  rows(): OutboxRow[] {
    return this.outbox.all();
  }

  /** Stops the pump, lets attempts in flight finish (each is bounded by timeout_ms) and closes the
   *  outbox; what is still pending is delivered by the next Notifier on the same file. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    await Promise.allSettled([...this.inFlight.values()]);
    this.email?.close();
    this.outbox.close();
  }

  // ---- the pump ----------------------------------------------------------------------------

  private schedule(delayMs: number): void {
    if (this.closed) return;
    const at = this.now() + delayMs;
    if (this.timer !== null && this.timerAt <= at) return;
    if (this.timer !== null) clearTimeout(this.timer);
    this.timerAt = at;
    this.timer = setTimeout(() => {
      this.timer = null;
      this.timerAt = Infinity;
      this.pump();
    }, Math.max(0, delayMs));
    this.timer.unref();
  }

  private pump(): void {
    if (this.closed) return;
    let heads: OutboxRow[];
    try {
      if (this.now() - this.prunedAt > PRUNE_EVERY_MS) {
        this.prunedAt = this.now();
        this.outbox.prune(this.prunedAt - KEEP_DONE_MS);
      }
      heads = this.outbox.heads();
    } catch (err) {
      this.log.error('notification outbox unreadable', { error: (err as Error).message });
      this.schedule(this.settings.max_backoff_ms);
      return;
    }
    const now = this.now();
    let nextDue = Infinity;
    for (const row of heads) {
      if (this.inFlight.has(row.channel_key)) continue;
      if (row.next_attempt_at > now) {
        nextDue = Math.min(nextDue, row.next_attempt_at);
        continue;
      }
      if (this.inFlight.size >= MAX_IN_FLIGHT) break; // the next finishing attempt pumps again
      const p = this.attempt(row).finally(() => {
        this.inFlight.delete(row.channel_key);
        this.schedule(0);
      });
      this.inFlight.set(row.channel_key, p);
    }
    if (nextDue !== Infinity) this.schedule(nextDue - now);
  }

  private async attempt(row: OutboxRow): Promise<void> {
    const attempt = row.attempts + 1;
    let outcome: Outcome;
    try {
      outcome = await this.send(row, attempt);
    } catch (err) {
      outcome = { ok: false, retry: true, error: (err as Error).message };
    }
    const stats = this.stats[row.channel_type];
    const fields = { event_id: row.event_id, event: row.event.type, channel: row.channel_type, attempt };
    if (outcome.ok) {
      this.outbox.markDelivered(row.seq, attempt, this.now());
      stats.delivered++;
      this.log.info('notification delivered', { ...fields, result: outcome.detail });
    } else if (outcome.retry && attempt < this.settings.max_attempts) {
      const delay = this.backoff(attempt, outcome.retryAfterMs);
      this.outbox.markRetry(row.seq, attempt, this.now() + delay, outcome.error);
      stats.retries++;
      this.log.warn('notification attempt failed; will retry', { ...fields, error: outcome.error, retry_in_ms: delay });
    } else {
      this.outbox.markFailed(row.seq, attempt, outcome.error);
      stats.failed++;
      const reason = outcome.retry ? 'max_attempts reached' : outcome.error.startsWith(URL_REFUSED) ? 'address refused' : 'refused by the receiver';
      this.log.error('notification given up', { ...fields, error: outcome.error, reason });
    }
  }

  /** initial · 2^(attempt−1), capped at max_backoff_ms, times a random 50..100% (so many proxies
   *  retrying one receiver spread out); a Retry-After the receiver asked for is honoured up to the cap. */
  private backoff(attempt: number, retryAfterMs: number | undefined): number {
    const s = this.settings;
    const base = Math.min(s.max_backoff_ms, s.initial_backoff_ms * 2 ** (attempt - 1));
    const jittered = Math.round(base * (0.5 + this.random() * 0.5));
    return retryAfterMs === undefined ? jittered : Math.min(s.max_backoff_ms, Math.max(jittered, retryAfterMs));
  }

  private send(row: OutboxRow, attempt: number): Promise<Outcome> {
    const ch = row.channel;
    const timeout = this.settings.timeout_ms;
    switch (ch.type) {
      case 'webhook': {
        const secret = ch.secret ?? this.settings.webhook_secret;
        if (secret === undefined) return Promise.resolve({ ok: false, retry: false, error: 'no webhook secret (channel secret or ' +
          'notifications.webhook_secret)' });
        return sendWebhook(row.event, ch, secret, this.instance, attempt, timeout, this.now);
      }
      case 'email':
        if (this.email === null) return Promise.resolve({ ok: false, retry: true, error: 'notifications.smtp is not configured' });
        return this.email.send(row.event, ch, row.channel_key, this.instance);
      case 'pager':
        return sendPager(row.event, ch, this.instance, timeout);
      default:
        return Promise.resolve({ ok: false, retry: false, error: `unknown channel type ${String((ch as { type: unknown }).type)}` });
    }
  }
}

function newStats(): ChannelStats {
  return { delivered: 0, failed: 0, retries: 0, refused: 0 };
}
