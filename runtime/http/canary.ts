// The canary control plane (SPEC §4.2, docs/canary.md): fastify on control_plane.host:port, every
// request behind a bearer token (constant-time compare against each configured token), errors as
// { "error": { code, message, details? } } from the one table (errors.ts); plus the WebSocket feed
// of a canary's status for the dashboard widget.
import Fastify, { type FastifyInstance, type FastifyReply } from 'fastify';
import { WebSocketServer, type WebSocket } from 'ws';
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { CanaryError, type CanaryController, type CanaryStatus, type Sample } from '../canary/index.ts';
import { sendError, tokenMatches } from './reply.ts';

export interface ControlPlaneOptions {
  /** Accepted bearer tokens (configured ones plus the environment variable's value, if set). */
  tokens: string[];
  /** Feed period, ms (5000: SPEC §4.2's dashboard refresh). */
  feedIntervalMs?: number;
}

const STATUSES = new Set(['active', 'paused', 'completed', 'rolled_back', 'all']);

function authorized(header: string | undefined, tokens: readonly string[]): boolean {
  // Every token is compared (no early exit), each in constant time.
  let ok = false;
  for (const t of tokens) if (tokenMatches(header, t)) ok = true;
  return ok;
}

function fail(reply: FastifyReply, err: unknown): FastifyReply {
  if (err instanceof CanaryError) return sendError(reply, err.code, err.message, err.details);
  throw err;
}

function objectBody(body: unknown): Record<string, unknown> {
  if (body === undefined || body === null) return {};
  if (typeof body !== 'object' || Array.isArray(body)) throw new CanaryError('PROXY_ERR_BAD_BODY', 'expected a JSON object');
  return body as Record<string, unknown>;
}

function optionalVersion(b: Record<string, unknown>): number | undefined {
  const v = b.expected_version;
  if (v === undefined) return undefined;
  if (typeof v !== 'number' || !Number.isInteger(v)) throw new CanaryError('PROXY_ERR_BAD_BODY', 'expected_version: expected an integer');
  return v;
}

export function csvSamples(samples: Sample[]): string {
  const lines = ['at,stage,traffic_pct,pipeline,requests,errors,error_rate_pct,latency_p50_ms,latency_p95_ms,latency_p99_ms'];
  for (const s of samples) {
    const at = new Date(s.at).toISOString();
    for (const side of ['baseline', 'candidate'] as const) {
      const m = s[side];
      lines.push([at, s.stage, s.traffic_pct, side, m.requests, m.errors, m.error_rate_pct, m.latency_p50_ms, m.latency_p95_ms, m.latency_p99_ms].join(','));
    }
  }
  return lines.join('\n') + '\n';
}

export function buildControlPlane(controller: CanaryController, opts: ControlPlaneOptions): FastifyInstance {
  const tokens = opts.tokens.filter((t) => t.length > 0);
  const app = Fastify({ logger: false, bodyLimit: 1024 * 1024 });

  // JSON bodies; an empty body is "no body" (promote, rollback without a reason), malformed is 400.
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_req, body, done) => {
    const text = (body as string).trim();
    if (text === '') return done(null, undefined);
    try {
      done(null, JSON.parse(text));
    } catch (err) {
      done(new CanaryError('PROXY_ERR_BAD_BODY', `malformed JSON: ${(err as Error).message}`), undefined);
    }
  });

  // CORS, so that the dashboard (served on the profiling port, another origin) and pages embedding
  // the canary widget can call the API. Any origin: every request carries a bearer token, which a
  // browser never attaches by itself (no cookies), so a foreign page gains nothing it was not given.
  app.addHook('onRequest', async (req, reply) => {
    if (req.headers.origin === undefined) return;
    reply.header('access-control-allow-origin', '*');
    reply.header('vary', 'origin');
    if (req.method === 'OPTIONS') {
      reply.header('access-control-allow-methods', 'GET, POST, PATCH, OPTIONS');
      reply.header('access-control-allow-headers', 'authorization, content-type');
      reply.header('access-control-max-age', '600');
      return reply.code(204).send();
    }
  });

  app.addHook('onRequest', async (req, reply) => {
    if (!authorized(req.headers.authorization, tokens)) return sendError(reply, 'PROXY_ERR_UNAUTHORIZED');
  });

  app.setErrorHandler((err: { statusCode?: number; message: string }, _req, reply) => {
    if (err instanceof CanaryError) return sendError(reply, err.code, err.message, err.details);
    if (err.statusCode !== undefined && err.statusCode < 500) return sendError(reply, 'PROXY_ERR_BAD_BODY', err.message);
    return sendError(reply, 'PROXY_ERR_INTERNAL', err.message);
  });

  app.setNotFoundHandler((req, reply) => sendError(reply, 'PROXY_ERR_NOT_FOUND', `no route ${req.method} ${req.url}`));

  type P = { Params: { id: string }; Body: unknown; Querystring: Record<string, string | undefined> };

  app.post('/api/v1/canary', async (req, reply) => {
    try {
      const created = await controller.start(req.body);
      return reply.code(201).send(created);
    } catch (err) {
      return fail(reply, err);
    }
  });

  app.get<{ Querystring: { status?: string } }>('/api/v1/canary', async (req, reply) => {
    const status = req.query.status ?? 'all';
    if (!STATUSES.has(status)) return sendError(reply, 'PROXY_ERR_BAD_QUERY', `status: expected one of ${[...STATUSES].join(', ')}`);
    return controller.list(status as CanaryStatus | 'all');
  });

  app.get<P>('/api/v1/canary/:id', async (req, reply) => {
    try {
      return controller.status(req.params.id);
    } catch (err) {
      return fail(reply, err);
    }
  });

  app.post<P>('/api/v1/canary/:id/promote', async (req, reply) => {
    try {
      const b = objectBody(req.body);
      const q = req.query.force;
      if (q !== undefined && q !== 'true' && q !== 'false') return sendError(reply, 'PROXY_ERR_BAD_QUERY', 'force: expected true or false');
      if (b.force !== undefined && typeof b.force !== 'boolean') throw new CanaryError('PROXY_ERR_BAD_BODY', 'force: expected a boolean');
      const force = b.force === true || q === 'true';
      return await controller.promote(req.params.id, { force, expectedVersion: optionalVersion(b) });
    } catch (err) {
      return fail(reply, err);
    }
  });

  app.post<P>('/api/v1/canary/:id/rollback', async (req, reply) => {
    try {
      const b = objectBody(req.body);
      if (b.reason !== undefined && typeof b.reason !== 'string') throw new CanaryError('PROXY_ERR_BAD_BODY', 'reason: expected a string');
      return controller.rollback(req.params.id, { reason: b.reason as string | undefined, expectedVersion: optionalVersion(b), triggeredBy: 'manual' });
    } catch (err) {
      return fail(reply, err);
    }
  });

  app.patch<P>('/api/v1/canary/:id', async (req, reply) => {
    try {
      const b = objectBody(req.body);
      for (const k of Object.keys(b)) if (k !== 'traffic_pct' && k !== 'expected_version') throw new CanaryError('PROXY_ERR_BAD_BODY', `unknown field "${k}" (only traffic_pct changes)`);
      controller.record(req.params.id);
      if (b.traffic_pct === undefined) throw new CanaryError('PROXY_ERR_BAD_BODY', 'traffic_pct: required');
      return controller.patch(req.params.id, b.traffic_pct, optionalVersion(b));
    } catch (err) {
      return fail(reply, err);
    }
  });

  app.get<P>('/api/v1/canary/:id/history', async (req, reply) => {
    try {
      return controller.history(req.params.id);
    } catch (err) {
      return fail(reply, err);
    }
  });

  app.get<P>('/api/v1/canary/:id/report', async (req, reply) => {
    try {
      return controller.report(req.params.id);
    } catch (err) {
      return fail(reply, err);
    }
  });

  app.get<P>('/api/v1/canary/:id/metrics', async (req, reply) => {
    try {
      const format = req.query.format ?? 'json';
      if (format !== 'json' && format !== 'csv') return sendError(reply, 'PROXY_ERR_BAD_QUERY', 'format: expected json or csv');
      const s = controller.samples(req.params.id);
      if (format === 'csv') return reply.header('content-type', 'text/csv; charset=utf-8').send(csvSamples(s.samples));
      return {
        canary_id: req.params.id, check_interval: s.check_interval,
        samples: s.samples.map((x) => ({ ...x, at: new Date(x.at).toISOString() })),
      };
    } catch (err) {
      return fail(reply, err);
    }
  });

  app.post<P>('/api/v1/canary/:id/restore-baseline', async (req, reply) => {
    try {
      return controller.restoreBaseline(req.params.id);
    } catch (err) {
      return fail(reply, err);
    }
  });

  // The WebSocket feed: upgrades on /api/v1/canary/{id}/feed, outside fastify's routing.
  const wss = new WebSocketServer({ noServer: true });
  const feedMs = opts.feedIntervalMs ?? 5000;
  const sockets = new Set<WebSocket>();
  app.server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    const url = new URL(req.url ?? '/', 'http://localhost');
    const m = /^\/api\/v1\/canary\/([^/]+)\/feed$/.exec(url.pathname);
    if (m === null) {
      socket.end('HTTP/1.1 404 Not Found\r\nConnection: close\r\n\r\n');
      return;
    }
    const id = decodeURIComponent(m[1]);
    const q = url.searchParams.get('access_token');
    const header = req.headers.authorization ?? (q === null ? undefined : `Bearer ${q}`);
    let interval = feedMs;
    const iq = url.searchParams.get('interval_ms');
    if (iq !== null) {
      const n = Number(iq);
      if (Number.isInteger(n) && n >= 100 && n <= 60000) interval = n;
    }
    wss.handleUpgrade(req, socket, head, (ws) => {
      if (!authorized(header, tokens)) {
        ws.close(4401, 'missing or invalid bearer token');
        return;
      }
      let unsubscribe: () => void;
      const status = () => controller.status(id);
      try {
        unsubscribe = controller.subscribe(id, (entry) => {
          if (ws.readyState === ws.OPEN) ws.send(JSON.stringify({ type: 'event', at: new Date().toISOString(), event: { ...entry, at: new Date(entry.at).toISOString() }, canary: status() }));
        });
      } catch {
        ws.close(4404, `no canary "${id}"`);
        return;
      }
      sockets.add(ws);
      const push = () => {
        if (ws.readyState === ws.OPEN) ws.send(JSON.stringify({ type: 'status', at: new Date().toISOString(), canary: status() }));
      };
      push();
      const timer = setInterval(push, interval);
      ws.on('close', () => {
        clearInterval(timer);
        unsubscribe();
        sockets.delete(ws);
      });
      ws.on('error', () => ws.terminate());
    });
  });
  app.addHook('onClose', async () => {
    for (const ws of sockets) ws.terminate();
    wss.close();
  });

  return app;
}

export async function startControlPlane(controller: CanaryController, host: string, port: number, opts: ControlPlaneOptions): Promise<{ app: FastifyInstance; url: string }> {
  const app = buildControlPlane(controller, opts);
  await app.listen({ host, port });
  const a = app.server.address();
  const bound = typeof a === 'object' && a !== null ? a.port : port;
  return { app, url: `http://${host.includes(':') ? `[${host}]` : host}:${bound}` };
}
