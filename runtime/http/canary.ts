// The canary control plane (SPEC §4.2, docs/canary.md): fastify on control_plane.host:port, every
// request behind a bearer token (constant-time compare against each configured token), errors as
// { "error": { code, message, details? } } from the one table (errors.ts); plus the WebSocket feed
// of a canary's status for the dashboard widget.
import type { FastifyInstance, FastifyReply } from 'fastify';
import { WebSocketServer, type WebSocket } from 'ws';
import { STATUS_CODES, ServerResponse, type IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { CanaryError, MAX_REASON_CHARS, optionalText, type CanaryController, type CanaryStatus, type Sample } from '../canary/index.ts';
import { parseHost } from '../config/index.ts';
import { sendError } from './reply.ts';
import { httpError, type HttpErrorCode } from './errors.ts';
import { createApp, listenApp, type ConnectionCap } from './app.ts';
import type { Log } from '../log/index.ts';
import { Tokens } from './tokens.ts';
import { parseCustomQuery } from '../fleet/custom-evidence.ts';

export interface ControlPlaneOptions {
  /**
   * Accepted bearer tokens (configured ones plus the environment variable's value, if set), or a
   * live holder of them (a reload replaces them). None: every request is refused.
   */
  tokens: readonly string[] | Tokens;
  /** Feed period, ms (5000: SPEC §4.2's dashboard refresh). */
  feedIntervalMs?: number;
  /** The fleet this instance belongs to (runtime/app/fleet.ts): /api/v1/fleet and fleet-wide writes. */
  fleet?: ControlPlaneFleet | null;
  /** Where an answer 500 (an error no route expected) is logged; absent: not logged. */
  log?: Pick<Log, 'error'>;
  /** The listener's connection cap (absent: none). */
  connectionCap?: ConnectionCap;
}

/** What the control plane needs of the fleet. */
export interface ControlPlaneFleet {
  /** GET /api/v1/fleet. */
  status(): Promise<unknown>;
  /**
   * GET /api/v1/fleet/evidence/{pipeline}[?custom=a,b]: this instance's arms, cumulative, HDR-encoded
   * (with workers: merged from every worker); its shadow canary's figures; the readings of the
   * plugin metrics named (runtime/fleet/evidence.ts).
   */
  evidence(pipelineId: string, custom: readonly string[], diffs: number | undefined): Promise<unknown>;
  /** Runs a write (a transition of canary `id`, or a start when null) as one fleet transaction. */
  transact<T>(id: string | null, fn: () => T | Promise<T>): Promise<T>;
  /**
   * Before a start: the candidate loads here, its modules are published by content hash, and every
   * other instance loads it too, or the start fails naming the one that cannot; returns the request
   * to start (its modules named by hash).
   */
  precheck(body: unknown): Promise<unknown>;
  /** The fleet's pipeline configuration (etcd only): GET and POST /api/v1/fleet/pipelines. */
  pipelines: { current(): Promise<unknown>; publish(body: unknown): Promise<unknown> } | null;
}

/** One instance: a write is just the write. */
const direct = <T>(_id: string | null, fn: () => T | Promise<T>): Promise<T> => Promise.resolve().then(fn);

/** Largest body: a canary start with its candidate configuration. */
export const CONTROL_PLANE_BODY_LIMIT_BYTES = 1024 * 1024;
/** The largest message a feed client may send (bytes); the feed reads none, a larger one closes it (1009). */
export const FEED_MAX_CLIENT_MESSAGE = 4096;
/** The range of a feed's `?interval_ms=` (ms between two status messages). */
export const FEED_MIN_INTERVAL_MS = 100;
export const FEED_MAX_INTERVAL_MS = 60_000;
/**
 * The most a feed holds of messages its client has not read yet (bytes); a message that would find
 * more is not sent. Every message carries the whole status, so the next one sent brings a client
 * that caught up up to date.
 */
export const FEED_MAX_UNSENT_BYTES = 1024 * 1024;

/** The close reason of a feed whose canary is not (or no longer) there: fixed, as a reason holds 123 bytes at most (an id may be longer). */
const FEED_GONE = 'no such canary';

const STATUSES = new Set(['active', 'paused', 'completed', 'rolled_back', 'all']);

/** An upgrade refused before it happens: a plain HTTP answer in the error shape, then the socket closes. */
function refuseUpgrade(socket: Duplex, code: HttpErrorCode, message?: string): void {
  const e = httpError(code, message);
  const body = JSON.stringify(e.body);
  socket.end(`HTTP/1.1 ${e.status} ${STATUS_CODES[e.status]}\r\ncontent-type: application/json; ` +
    `charset=utf-8\r\nx-content-type-options: nosniff\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`);
}

/**
 * A request offering an upgrade to a protocol other than WebSocket, served as a plain request: Node
 * hands every request with an `Upgrade` header to the 'upgrade' listener, with its parser detached,
 * so a request with a body cannot be read here and is refused (400) instead.
 */
function serveIgnoringUpgrade(app: FastifyInstance, req: IncomingMessage, socket: Duplex): void {
  const length = req.headers['content-length'];
  if (req.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0')) {
    return refuseUpgrade(socket, 'PROXY_ERR_BAD_REQUEST', `Upgrade: ${String(req.headers.upgrade).slice(0, 40)} is not served here; ` +
      'send the request without it');
  }
  const res = new ServerResponse(req);
  res.shouldKeepAlive = false;
  res.assignSocket(socket as Socket);
  res.once('finish', () => {
    res.detachSocket(socket as Socket);
    socket.end();
  });
  app.server.emit('request', req, res);
}

function fail(reply: FastifyReply, err: unknown): FastifyReply {
  if (err instanceof CanaryError) return sendError(reply, err.code, err.message, err.details);
  throw err;
}

/** The body parser (app.ts) has refused anything but a JSON object; no body reads as {}. */
function objectBody(body: unknown): Record<string, unknown> {
  return (body ?? {}) as Record<string, unknown>;
}

function optionalVersion(b: Record<string, unknown>): number | undefined {
  const v = b.expected_version;
  if (v === undefined) return undefined;
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0) throw new CanaryError('PROXY_ERR_BAD_BODY', 'expected_version: expected an integer >= 0');
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
  const tokens = opts.tokens instanceof Tokens ? opts.tokens : new Tokens(opts.tokens);
  const app = createApp({
    tokens,
    bodyLimit: CONTROL_PLANE_BODY_LIMIT_BYTES,
    // CORS, so that the dashboard (served on the profiling port, another origin) and pages
    // embedding the canary widget can call the API.
    corsMethods: 'GET, POST, PATCH, OPTIONS',
    log: opts.log,
    connectionCap: opts.connectionCap,
  });

  // With workers, nothing is answered (a transition, or a read showing one, the evaluator's rollback
  // too) before every worker serves what the answer says.
  app.addHook('onSend', async (_req, _reply, payload) => {
    await controller.settled();
    return payload;
  });

  type P = { Params: { id: string }; Body: unknown; Querystring: Record<string, string | undefined> };
  const fleet = opts.fleet ?? null;
  const tx = fleet === null ? direct : <T>(id: string | null, fn: () => T | Promise<T>) => fleet.transact(id, fn);

  app.post('/api/v1/canary', async (req, reply) => {
    try {
      const body = fleet === null ? req.body : await fleet.precheck(req.body);
      const created = await tx(null, () => controller.start(body));
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

  app.get<{ Params: { pipeline: string } }>('/api/v1/canary/pipelines/:pipeline/baseline', async (req, reply) => {
    try {
      return controller.baseline(req.params.pipeline);
    } catch (err) {
      return fail(reply, err);
    }
  });

  app.get<P>('/api/v1/canary/:id', async (req, reply) => {
    try {
      await controller.refresh(req.params.id);
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
      return await tx(req.params.id, () => controller.promote(req.params.id, { force, expectedVersion: optionalVersion(b) }));
    } catch (err) {
      return fail(reply, err);
    }
  });

  app.post<P>('/api/v1/canary/:id/rollback', async (req, reply) => {
    try {
      const b = objectBody(req.body);
      const reason = optionalText(b.reason, 'reason', MAX_REASON_CHARS);
      return await tx(req.params.id, () => controller.rollback(req.params.id, { reason,
        expectedVersion: optionalVersion(b), triggeredBy: 'manual' }));
    } catch (err) {
      return fail(reply, err);
    }
  });

  app.patch<P>('/api/v1/canary/:id', async (req, reply) => {
    try {
      const b = objectBody(req.body);
      for (const k of Object.keys(b)) if (k !== 'traffic_pct' && k !== 'expected_version') throw new CanaryError('PROXY_ERR_BAD_BODY', `unknown ` +
        `field "${k}" (only traffic_pct changes)`);
      controller.record(req.params.id);
      if (b.traffic_pct === undefined) throw new CanaryError('PROXY_ERR_BAD_BODY', 'traffic_pct: required');
      return await tx(req.params.id, () => controller.patch(req.params.id, b.traffic_pct, optionalVersion(b)));
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

  app.get<P>('/api/v1/canary/:id/diffs', async (req, reply) => {
    try {
      await controller.refresh(req.params.id);
      return controller.diffs(req.params.id);
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
      const s = await controller.samples(req.params.id);
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
      return await tx(req.params.id, () => controller.restoreBaseline(req.params.id));
    } catch (err) {
      return fail(reply, err);
    }
  });

  if (fleet !== null) {
    app.get('/api/v1/fleet', async () => fleet.status());
    app.get<{ Params: { pipeline: string }; Querystring: { custom?: string; diffs?: string } }>('/api/v1/fleet/evidence/:pipeline', async (req, reply) => {
      let custom: string[];
      try {
        custom = parseCustomQuery(req.query.custom);
      } catch (err) {
        return sendError(reply, 'PROXY_ERR_BAD_QUERY', (err as Error).message);
      }
      // Digits only: Number() would take "" as 0, and "0x10", "1e3" or " 5" too.
      const diffs = req.query.diffs === undefined ? undefined : /^\d{1,5}$/.test(req.query.diffs) ? Number(req.query.diffs) : NaN;
      if (diffs !== undefined && !(Number.isInteger(diffs) && diffs >= 0 && diffs <= 10_000)) {
        return sendError(reply, 'PROXY_ERR_BAD_QUERY', 'diffs: expected an integer 0..10000, digits only');
      }
      try {
        return await fleet.evidence(req.params.pipeline, custom, diffs);
      } catch (err) {
        return fail(reply, err);
      }
    });
    const pipelines = fleet.pipelines;
    if (pipelines !== null) {
      app.get('/api/v1/fleet/pipelines', async () => pipelines.current());
      app.post('/api/v1/fleet/pipelines', async (req, reply) => {
        try {
          return reply.code(201).send(await pipelines.publish(req.body));
        } catch (err) {
          return fail(reply, err);
        }
      });
    }
    // Asked by the instance a start request came to: can this instance load the candidate?
    app.post('/api/v1/fleet/check', async (req, reply) => {
      try {
        return { ok: true, candidate_version: await controller.check(req.body) };
      } catch (err) {
        return fail(reply, err);
      }
    });
  }

  // The WebSocket feed: upgrades on /api/v1/canary/{id}/feed, outside fastify's routing.
  // The feed only sends: a client's messages are read and dropped, so one larger than a few KiB is
  // refused (close 1009) instead of buffered (the library's default allows 100 MiB per message).
  const wss = new WebSocketServer({ noServer: true, maxPayload: FEED_MAX_CLIENT_MESSAGE });
  const feedMs = opts.feedIntervalMs ?? 5000;
  const sockets = new Set<WebSocket>();
  app.server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    // Node's HTTP server takes its own error listener off a socket it hands to 'upgrade': without
    // this one, a client that resets the connection while being refused crashed the whole proxy
    // (an unhandled ECONNRESET from the write of the answer). ws adds its own once it upgrades.
    socket.on('error', () => socket.destroy());
    // Another protocol offered (`Upgrade: h2c`, which `curl --http2` sends) may be ignored (RFC 9110
    // §7.8): a request without a body is served as any other; its connection closes after the answer.
    if (!/^websocket$/i.test(String(req.headers.upgrade ?? '').trim())) return serveIgnoringUpgrade(app, req, socket);
    // Refused before the upgrade, as plain HTTP answers: no WebSocket is opened for a client
    // without a valid token, nor for a canary that does not exist.
    let url: URL;
    try {
      url = new URL(req.url ?? '/', 'http://localhost');
    } catch {
      return refuseUpgrade(socket, 'PROXY_ERR_BAD_REQUEST', 'the request target is not a valid URL');
    }
    const q = url.searchParams.get('access_token');
    const header = req.headers.authorization ?? (q === null ? undefined : `Bearer ${q}`);
    if (!tokens.allows(header)) return refuseUpgrade(socket, 'PROXY_ERR_UNAUTHORIZED');
    const m = /^\/api\/v1\/canary\/([^/]+)\/feed$/.exec(url.pathname);
    let id: string;
    try {
      if (m === null) throw new URIError();
      id = decodeURIComponent(m[1]);
    } catch {
      return refuseUpgrade(socket, 'PROXY_ERR_NOT_FOUND', `no WebSocket at ${url.pathname} (the feed is /api/v1/canary/{canary_id}/feed)`);
    }
    try {
      controller.status(id);
    } catch (err) {
      if (err instanceof CanaryError) return refuseUpgrade(socket, err.code, err.message);
      opts.log?.error('HTTP request failed', { method: 'GET', route: '/api/v1/canary/:id/feed', error: (err as Error).message, stack: (err as Error).stack });
      return refuseUpgrade(socket, 'PROXY_ERR_INTERNAL', (err as Error).message);
    }
    let interval = feedMs;
    const iq = url.searchParams.getAll('interval_ms');
    if (iq.length > 0) {
      const n = iq.length === 1 && /^\d+$/.test(iq[0]!) ? Number(iq[0]) : NaN;
      if (!(n >= FEED_MIN_INTERVAL_MS && n <= FEED_MAX_INTERVAL_MS)) {
        return refuseUpgrade(socket, 'PROXY_ERR_BAD_QUERY', `interval_ms must be an integer from ${FEED_MIN_INTERVAL_MS} to ` +
          `${FEED_MAX_INTERVAL_MS}, given once; got ${iq.map((x) => `"${x}"`).join(', ')}`);
      }
      interval = n;
    }
    wss.handleUpgrade(req, socket, head, (ws) => {
      let unsubscribe: () => void;
      const status = () => controller.status(id);
      // A client that reads slower than messages come (or not at all) is not sent more while
      // FEED_MAX_UNSENT_BYTES wait for it: the feed's memory stays bounded.
      const sendable = () => ws.readyState === ws.OPEN && ws.bufferedAmount < FEED_MAX_UNSENT_BYTES;
      try {
        unsubscribe = controller.subscribe(id, (entry) => {
          if (sendable()) ws.send(JSON.stringify({ type: 'event', at: new Date().toISOString(),
            event: { ...entry, at: new Date(entry.at).toISOString() }, canary: status() }));
        });
      } catch {
        ws.close(4404, FEED_GONE);
        return;
      }
      sockets.add(ws);
      // A reload that removes the token this feed was opened with closes the feed at once.
      const stopRevocation = tokens.onReplace(() => {
        if (!tokens.allows(header)) ws.close(4401, 'bearer token revoked');
      });
      // A canary gone since (a fleet's start the store refused, discarded here) ends its feed as an
      // unknown one at the upgrade would (4404): a throw from the timer would end the process.
      const push = () => {
        if (!sendable()) return;
        let canary: Record<string, unknown>;
        try {
          canary = status();
        } catch {
          ws.close(4404, FEED_GONE);
          return;
        }
        ws.send(JSON.stringify({ type: 'status', at: new Date().toISOString(), canary }));
      };
      push();
      const timer = setInterval(push, interval);
      ws.on('close', () => {
        clearInterval(timer);
        unsubscribe();
        stopRevocation();
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

/** Listens on `control_plane.host` (a host name, IPv4 or IPv6 address, bracketed or not) and port. */
export async function startControlPlane(controller: CanaryController, host: string, port: number,
  opts: ControlPlaneOptions): Promise<{ app: FastifyInstance; url: string; tokens: Tokens }> {
  const tokens = opts.tokens instanceof Tokens ? opts.tokens : new Tokens(opts.tokens);
  const app = buildControlPlane(controller, { ...opts, tokens });
  const bare = parseHost(host);
  if (typeof bare !== 'string') throw new TypeError(`control_plane.host: ${bare.problem}`);
  return { app, url: await listenApp(app, bare, port), tokens };
}
