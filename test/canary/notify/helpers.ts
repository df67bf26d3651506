// Real receivers for the notification tests: an HTTP server on 127.0.0.1 that records every
// request and answers from a script, an SMTP server (smtp-server) that records every message.
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { SMTPServer } from 'smtp-server';
import Database from 'better-sqlite3';
import { parseConfig, type NotificationsConfig } from '../../../runtime/config/index.ts';
import type { CanaryEvent } from '../../../runtime/canary/events.ts';
import { Logger, type LogSink } from '../../../runtime/log/index.ts';

export interface Received { method: string; path: string; headers: IncomingHttpHeaders; body: string; at: number }

export interface HttpReceiver {
  url: string;
  port: number;
  received: Received[];
  /** Status for the next requests, in order; past the end, 200. */
  statuses: number[];
  close(): Promise<void>;
}

export async function httpReceiver(port = 0): Promise<HttpReceiver> {
  const received: Received[] = [];
  const statuses: number[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (d: Buffer) => chunks.push(d));
    req.on('end', () => {
      received.push({ method: req.method ?? '', path: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks).toString('utf8'), at: Date.now() });
      const status = statuses.shift() ?? 200;
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(status < 300 ? '{"status":"success"}' : `{"error":"status ${status}"}`);
    });
  });
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  const p = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${p}/hook`,
    port: p,
    received,
    statuses,
    close: () => new Promise<void>((resolve) => { server.closeAllConnections(); server.close(() => resolve()); }),
  };
}

export interface Mail { from: string; to: string[]; raw: string; user: string | null }

export async function smtpReceiver(opts: { user?: string; password?: string } = {}): Promise<{ port: number; mails: Mail[]; close(): Promise<void> }> {
  const mails: Mail[] = [];
  const server = new SMTPServer({
    disabledCommands: opts.user === undefined ? ['STARTTLS', 'AUTH'] : ['STARTTLS'],
    allowInsecureAuth: true,
    authOptional: opts.user === undefined,
    logger: false,
    onAuth(auth, _session, cb) {
      if (auth.username === opts.user && auth.password === opts.password) cb(null, { user: auth.username });
      else cb(new Error('invalid credentials'));
    },
    onData(stream, session, cb) {
      const chunks: Buffer[] = [];
      stream.on('data', (d: Buffer) => chunks.push(d));
      stream.on('end', () => {
        mails.push({
          from: session.envelope.mailFrom === false ? '' : session.envelope.mailFrom.address,
          to: session.envelope.rcptTo.map((r) => r.address),
          raw: Buffer.concat(chunks).toString('utf8'),
          user: typeof session.user === 'string' ? session.user : null,
        });
        cb();
      });
    },
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const port = (server.server.address() as AddressInfo).port;
  return { port, mails, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}

/** Settings as the config loader produces them, with fast retries for tests. */
export function settings(overrides: Record<string, unknown>): NotificationsConfig {
  return parseConfig({ notifications: { outbox_path: ':memory:', initial_backoff_ms: 20, max_backoff_ms: 200, timeout_ms: 2000,
    instance_name: 'proxy-test-1', ...overrides } }, 'test').notifications;
}

export class MemoryLog implements LogSink {
  lines: string[] = [];
  write(line: string): void { this.lines.push(line); }
  find(msg: string): Record<string, unknown>[] {
    return this.lines.map((l) => JSON.parse(l) as Record<string, unknown>).filter((o) => o.msg === msg || o.message === msg);
  }
}

export function testLogger(sink: MemoryLog): Logger {
  return new Logger('proxy::canary::notify', 'debug', 'json', sink);
}

let seq = 0;
export function event(type: CanaryEvent['type'], extra: Partial<CanaryEvent> = {}): CanaryEvent {
  seq++;
  return {
    id: `evt-${process.pid}-${seq}`,
    type,
    at: '2026-11-24T06:00:00.000Z',
    canary_id: 'cn_test1',
    pipeline_id: 'orders',
    stage: 2,
    traffic_pct: 25,
    baseline_version: 'redact@1.0.0',
    candidate_version: 'redact@2.0.0',
    ...extra,
  };
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The rows of an outbox file, oldest first, read through a read-only handle of its own (the proxy may hold it open). */
export function outboxRows(path: string): { event_id: string; state: string; attempts: number }[] {
  const db = new Database(path, { readonly: true, fileMustExist: true });
  try {
    return db.prepare('SELECT event_id, state, attempts FROM outbox ORDER BY seq').all() as { event_id: string; state: string; attempts: number }[];
  } finally {
    db.close();
  }
}
