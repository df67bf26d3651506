// Email channel: one plain-text message per event through nodemailer's SMTP transport (one
// transport per sink, pooled connections off: canary events are rare, and a fresh session per
// message recovers by itself from a server restart). SMTP 5xx answers are permanent (given up),
// 4xx and connection failures are retried. The TCP connection is opened here (nodemailer's
// getSocket), through the same guarded lookup as webhooks: a host name resolving to a link-local or
// unspecified address fails the attempt (retried) before any byte, AUTH credentials above all, is sent.
import { connect, type Socket } from 'node:net';
import { lookup as dnsLookup } from 'node:dns';
import nodemailer, { type Transporter } from 'nodemailer';
import { refusedHost } from '../../config/index.ts';
import { guardedLookup } from './http-post.ts';
import type { NotificationsConfig } from '../../config/index.ts';
import type { CanaryEvent, NotificationChannel } from '../events.ts';
import type { Outcome } from './outcome.ts';
import { emailMessage } from './payload.ts';

/** The code of an attempt refused because notifications.smtp.host is, or resolves to, a link-local or unspecified address. */
export const SMTP_HOST_REFUSED = 'PROXY_ERR_SMTP_HOST_REFUSED';

export type SmtpSettings = NonNullable<NotificationsConfig['smtp']>;

export class EmailSender {
  private readonly transport: Transporter;
  private readonly from: string;

  /** `resolver`: how the host name is resolved (dns.lookup; tests give names of their own). */
  constructor(smtp: SmtpSettings, timeoutMs: number, resolver: typeof dnsLookup = dnsLookup) {
    this.from = smtp.from;
    this.transport = nodemailer.createTransport({
      getSocket: (_options, callback) => openSocket(smtp.host, smtp.port, timeoutMs, resolver, callback),
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

/**
 * The plain TCP connection of one SMTP session (nodemailer starts TLS on it when `secure`): a
 * refused address, literal or resolved, fails it with code SMTP_HOST_REFUSED before it is opened.
 */
function openSocket(host: string, port: number, timeoutMs: number, resolver: typeof dnsLookup,
  callback: (err: Error | null, socket?: { connection: Socket }) => void): void {
  const refused = refusedHost(host);
  if (refused !== null) {
    setImmediate(() => callback(Object.assign(new Error(refused), { code: SMTP_HOST_REFUSED })));
    return;
  }
  const socket = connect({ host, port, lookup: guardedLookup(resolver, SMTP_HOST_REFUSED) });
  const fail = (err: Error) => {
    socket.destroy();
    callback(err);
  };
  const timer = setTimeout(() => fail(Object.assign(new Error(`no connection to ${host}:${port} within ${timeoutMs} ms`), { code: 'ETIMEDOUT' })),
    timeoutMs);
  socket.once('error', (err) => { clearTimeout(timer); fail(err); });
  socket.once('connect', () => {
    clearTimeout(timer);
    socket.removeAllListeners('error');
    callback(null, { connection: socket });
  });
}
