// Email channel: one plain-text message per event through nodemailer's SMTP transport (one
// transport per sink, pooled connections off: canary events are rare, and a fresh session per
// message recovers by itself from a server restart). SMTP 5xx answers are permanent (given up),
// 4xx and connection failures are retried.
import nodemailer, { type Transporter } from 'nodemailer';
import type { NotificationsConfig } from '../../config/index.ts';
import type { CanaryEvent, NotificationChannel } from '../events.ts';
import type { Outcome } from './outcome.ts';
import { emailMessage } from './payload.ts';

export type SmtpSettings = NonNullable<NotificationsConfig['smtp']>;

export class EmailSender {
  private readonly transport: Transporter;
  private readonly from: string;

  constructor(smtp: SmtpSettings, timeoutMs: number) {
    this.from = smtp.from;
    this.transport = nodemailer.createTransport({
      host: smtp.host,
      port: smtp.port,
      secure: smtp.secure,
      auth: smtp.user === undefined ? undefined : { user: smtp.user, pass: smtp.password ?? '' },
      connectionTimeout: timeoutMs,
      greetingTimeout: timeoutMs,
      socketTimeout: timeoutMs,
    });
  }

  async send(event: CanaryEvent, channel: NotificationChannel, channelKey: string, instance: string): Promise<Outcome> {
    const { subject, text } = emailMessage(event, instance);
    try {
      const info = await this.transport.sendMail({
        from: this.from,
        to: channel.addresses ?? [],
        subject,
        text,
        // The same id on a retry lets a mail system drop the duplicate.
        messageId: `<${event.id}.${channelKey}@pipeline-proxy>`,
        headers: { 'X-Proxy-Event': event.type, 'X-Proxy-Event-Id': event.id },
      });
      return { ok: true, detail: info.response ?? 'sent' };
    } catch (err) {
      const e = err as Error & { responseCode?: number; code?: string };
      const permanent = e.responseCode !== undefined && e.responseCode >= 500;
      return { ok: false, retry: !permanent, error: `${e.code ? `${e.code}: ` : ''}${e.message}` };
    }
  }

  close(): void {
    this.transport.close();
  }
}
