// The base of every HTTP app of the proxy (admin API, profiling endpoint, canary control plane):
// the bearer-token check against a live token holder, one JSON body parser, and every answer the
// framework gives on its own (404, 405, 413, 415, 431, malformed HTTP) in the one error shape
// `{ "error": { code, message } }` with a code of the catalogue (runtime/errors/catalogue.ts). Built here once, so each app has
// the same edges by construction.
import { STATUS_CODES } from 'node:http';
import type { Server as NetServer, Socket } from 'node:net';
import type { IncomingMessage, ServerResponse } from 'node:http';
import Fastify, { type FastifyInstance, type FastifyRequest } from 'fastify';
import { httpUrl, listenFailure } from '../config/index.ts';
import { ERRORS } from '../errors/catalogue.ts';
import { httpError, isHttpErrorCode, type HttpErrorCode } from './errors.ts';
import { sendError } from './reply.ts';
import { jsonBodyProblem } from './json-body.ts';
import type { Tokens } from './tokens.ts';
import type { Log } from '../log/index.ts';

export interface AppOptions {
  /** The accepted bearer tokens, read on every request (a reload may replace them). */
  tokens: Tokens;
  /** Requests that pass without a token (health probes, the dashboard's files). */
  isPublic?: (req: FastifyRequest) => boolean;
  /** Largest request body in bytes; a larger one is answered 413. */
  bodyLimit: number;
  /**
   * Cross-origin calls allowed from any page, with these methods (the control plane, which the
   * dashboard calls from another port); the preflight is answered before the token check.
   */
  corsMethods?: string;
  /** Where an answer 500 (an error no route expected) is logged, with its route and stack; absent: not logged (tests building an app alone). */
  log?: Pick<Log, 'error'>;
  /** The listener's connection cap (absent: none; tests building an app alone). */
  connectionCap?: ConnectionCap;
}

/**
 * How many connections one HTTP listener (the admin API, the profiling endpoint, the control plane)
 * serves at once. A connection past the cap is closed as it is accepted (node:net's
 * `maxConnections`), so connections opened to an HTTP port, which needs no token, cannot use up the
 * process's file descriptors and with them the wire listener's clients and upstream connections.
 * The count of those refused survives a listener moved by a reload; a reload changes the cap of the
 * running listener.
 */
export class ConnectionCap {
  /** Connections refused at the cap since the proxy started. */
  refused = 0;
  private readonly servers = new Set<NetServer>();

  /** `onRefused` runs for each connection refused (after `refused` counts it). */
  constructor(private max: number, private readonly onRefused: (cap: ConnectionCap) => void = () => {}) {}

  get limit(): number {
    return this.max;
  }

  attach(server: NetServer): void {
    server.maxConnections = this.max;
    server.on('drop', () => {
      this.refused++;
      this.onRefused(this);
    });
    this.servers.add(server);
    server.once('close', () => this.servers.delete(server));
  }

  /** A reload's new cap, for the listeners open now and later. */
  set(max: number): void {
    this.max = max;
    for (const s of this.servers) s.maxConnections = max;
  }
}

/**
 * A body answered before it was read (401, 413) is read and thrown away up to this many bytes, so
 * the client gets the answer rather than a reset connection; past it the connection is closed.
 */
export const DISCARD_LIMIT_BYTES = 64 * 1024 * 1024;

/** A request (its headers and body) not received within this long is answered 408. */
export const REQUEST_TIMEOUT_MS = 60_000;

/** Once an app closes, an answer still being delivered (its client reading slowly, or not at all) gets this long; then its connection is cut. */
export const CLOSE_GRACE_MS = 10_000;

/** An error the app's handlers throw to answer with a code of the table. */
export class HttpError extends Error {
  constructor(readonly code: HttpErrorCode, message?: string, readonly details?: unknown) {
    super(message ?? ERRORS[code].meaning);
  }
}

/**
 * The JSON body parser of every app: an empty body is no body; otherwise the body must be a JSON
 * object (not null, an array or a scalar) that jsonBodyProblem finds nothing wrong with: no key
 * given twice in one object, no `__proto__` key or `constructor` holding `prototype` (they would
 * reach an object's prototype when the body is merged or spread), no number out of range, nesting
 * at most MAX_JSON_DEPTH deep.
 */
export function parseJsonBody(text: string): Record<string, unknown> | undefined {
  if (text.trim() === '') return undefined;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new HttpError('PROXY_ERR_BAD_BODY', `body is not valid JSON: ${(err as Error).message}`);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new HttpError('PROXY_ERR_BAD_BODY', `expected a JSON object, got ${value === null ? 'null' : Array.isArray(value) ? 'an array' : typeof value}`);
  }
  const problem = jsonBodyProblem(text);
  if (problem !== null) throw new HttpError('PROXY_ERR_BAD_BODY', problem);
  return value as Record<string, unknown>;
}

/** `/api/v1/canary/:id/promote`, `/dashboard/*` → a regex of the paths the route matches. */
function routeRegex(pattern: string): RegExp {
  const src = pattern.split('/').map((seg) => (seg === '*' ? '.*' : seg.startsWith(':') ? '[^/]+' : seg.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))).join('/');
  return new RegExp(`^${src}$`);
}

/** Reads and drops what is left of a body, closing the connection past DISCARD_LIMIT_BYTES. */
function discardRest(raw: IncomingMessage): void {
  let left = DISCARD_LIMIT_BYTES;
  raw.on('data', (chunk: Buffer) => {
    left -= chunk.length;
    if (left < 0) raw.socket?.destroy();
  });
  raw.resume();
}

/** Malformed HTTP, headers over the limit, a request too slow: answered on the socket, then closed. */
function clientError(err: NodeJS.ErrnoException, socket: Socket): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  let code: HttpErrorCode;
  let message: string | undefined;
  if (err.code === 'HPE_HEADER_OVERFLOW') code = 'PROXY_ERR_HEADERS_TOO_LARGE';
  else if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT') code = 'PROXY_ERR_REQUEST_TIMEOUT';
  else {
    code = 'PROXY_ERR_BAD_REQUEST';
    message = `not a valid HTTP/1.1 request${err.code?.startsWith('HPE_') ? ` (${err.code})` : ''}`;
  }
  const e = httpError(code, message);
  const body = JSON.stringify(e.body);
  if (socket.writable) {
    socket.write(`HTTP/1.1 ${e.status} ${STATUS_CODES[e.status]}\r\ncontent-type: application/json; ` +
      `charset=utf-8\r\nx-content-type-options: nosniff\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`);
  }
  socket.destroySoon();
}

/**
 * When the app closes (the proxy shuts down, or a reload moved the API to another address), no
 * client holds the close, nor the proxy's exit. Node's HTTP server stops enforcing the request
 * timeout once it closes, and waits for every connection: one that never finished sending its
 * request (a stalled or slow client, no token needed), an upgraded one (the canary feed) or a
 * stream that never ends (a logs follow, ended by the admin app's own preClose) held it for ever.
 * At close, a connection without a request being answered is closed at once (a request not wholly
 * received is not answered); one being answered is closed once its answer is written, and cut
 * CLOSE_GRACE_MS later if its client does not read it.
 */
function closeWithoutWaitingForClients(app: FastifyInstance): void {
  const connections = new Set<Socket>();
  /** The answer each connection is being given (from its request's head received to the answer's end). */
  const answering = new Map<Socket, ServerResponse>();
  let closing = false;
  app.server.on('connection', (socket: Socket) => {
    if (closing) return void socket.destroy();
    connections.add(socket);
    socket.once('close', () => {
      connections.delete(socket);
      answering.delete(socket);
    });
  });
  app.server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    const socket = req.socket;
    answering.set(socket, res);
    // 'prefinish': the whole answer is written (handed to the socket, maybe not sent yet: 'finish'
    // waits for that, which a client that does not read never lets happen).
    res.once('prefinish', () => {
      if (answering.get(socket) === res) answering.delete(socket);
      if (closing) closeAfterAnswer(socket);
    });
  });
  app.addHook('preClose', (done) => {
    closing = true;
    for (const socket of connections) {
      const res = answering.get(socket);
      // (Node closes the rest of those not being answered, idle ones, itself.)
      if (res === undefined || !res.req.complete) socket.destroy();
    }
    done();
  });
}

/** Closes a connection once the answer written to it is sent, or after CLOSE_GRACE_MS when its client does not read it. */
function closeAfterAnswer(socket: Socket): void {
  socket.destroySoon();
  setTimeout(() => socket.destroy(), CLOSE_GRACE_MS).unref();
}

export function createApp(opts: AppOptions): FastifyInstance {
  const app = Fastify({
    logger: false,
    bodyLimit: opts.bodyLimit,
    requestTimeout: REQUEST_TIMEOUT_MS,
    // A path parameter (a canary id, a pipeline id) of any length the headers allow reaches its
    // route, which answers for an unknown one (404, or 401 without a token); fastify's default of
    // 100 characters answered a longer one 400 before the token was checked.
    routerOptions: { maxParamLength: 16 * 1024 }, // the headers (the request line too) hold 16 KiB at most
    clientErrorHandler: clientError,
    // A path that does not decode (`/%zz`): fastify answers it before any hook or route.
    frameworkErrors: (err, _req, reply) => sendError(reply, 'PROXY_ERR_BAD_REQUEST', err.message),
    // Requests arriving while the app closes are served like any other (fastify's own 503 has
    // another body shape); the admin API says it is draining through /readyz.
    return503OnClosing: false,
  });

  opts.connectionCap?.attach(app.server);

  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_req, body, done) => {
    try {
      done(null, parseJsonBody(body as string));
    } catch (err) {
      done(err as Error, undefined);
    }
  });

  // Every answer says what it is and forbids guessing: a JSON error quoting the request is never
  // read as HTML or script.
  app.addHook('onRequest', async (_req, reply) => {
    reply.header('x-content-type-options', 'nosniff');
  });

  closeWithoutWaitingForClients(app);

  const corsMethods = opts.corsMethods;
  if (corsMethods !== undefined) {
    // Any origin: every request carries a bearer token, which a browser never attaches by itself
    // (no cookies), so a foreign page gains nothing it was not given.
    app.addHook('onRequest', async (req, reply) => {
      if (req.headers.origin === undefined) return;
      reply.header('access-control-allow-origin', '*');
      reply.header('vary', 'origin');
      if (req.method === 'OPTIONS') {
        reply.header('access-control-allow-methods', corsMethods);
        reply.header('access-control-allow-headers', 'authorization, content-type');
        reply.header('access-control-max-age', '600');
        return reply.code(204).send();
      }
    });
  }

  const tokens = opts.tokens;
  const isPublic = opts.isPublic ?? (() => false);
  app.addHook('onRequest', async (req, reply) => {
    if (isPublic(req)) return;
    if (!tokens.allows(req.headers.authorization)) return sendError(reply, 'PROXY_ERR_UNAUTHORIZED');
  });

  // Every query parameter of the three APIs takes one value: one given twice is refused by name,
  // never read as the first, the last, or "a,b" (nor reaching a route that expects a string).
  app.addHook('onRequest', async (req, reply) => {
    for (const [name, value] of Object.entries(req.query as Record<string, unknown>)) {
      if (Array.isArray(value)) return sendError(reply, 'PROXY_ERR_BAD_QUERY', `${name.slice(0, 100)} is given more than once`);
    }
  });

  // An answer sent before the body was read (a 401, a 413 on the declared length) keeps the
  // connection open while the rest of the body is read and dropped: closing it at once would reset
  // a client still writing (EPIPE) before it reads the answer, even one that asked to close.
  app.addHook('onSend', async (req, reply, payload) => {
    if (req.raw.complete) return payload;
    if (Number(req.headers['content-length']) > DISCARD_LIMIT_BYTES) {
      reply.header('connection', 'close');
      return payload;
    }
    reply.removeHeader('connection');
    reply.raw.shouldKeepAlive = true;
    return payload;
  });
  app.addHook('onResponse', async (req) => {
    if (!req.raw.complete && !req.raw.destroyed) discardRest(req.raw);
  });

  app.setErrorHandler((err: Error & { code?: string; statusCode?: number; details?: unknown }, req, reply) => {
    if (isHttpErrorCode(err.code)) {
      return sendError(reply, err.code, err.message, err.details);
    }
    if (err.statusCode === 413) {
      return sendError(reply, 'PROXY_ERR_BODY_TOO_LARGE', `request body over ${opts.bodyLimit} bytes`);
    }
    if (err.statusCode === 415) {
      return sendError(reply, 'PROXY_ERR_UNSUPPORTED_MEDIA_TYPE', `content type "${req.headers['content-type'] ?? ''}" is not accepted; send application/json`);
    }
    if (err.statusCode !== undefined && err.statusCode < 500) {
      return sendError(reply, err.code?.startsWith('FST_ERR_CTP_') ? 'PROXY_ERR_BAD_BODY' : 'PROXY_ERR_BAD_REQUEST', err.message);
    }
    // A fault of the proxy, not of the request: the one answer an operator must be able to trace.
    opts.log?.error('HTTP request failed', {
      method: req.method, route: req.routeOptions.url ?? req.url.split('?', 1)[0].slice(0, 200), error: err.message, stack: err.stack,
    });
    return sendError(reply, 'PROXY_ERR_INTERNAL', err.message);
  });

  // 405 for a path that exists with other methods (and an Allow header), else 404.
  const routes: Array<{ method: string; path: RegExp }> = [];
  app.addHook('onRoute', (r) => {
    for (const m of Array.isArray(r.method) ? r.method : [r.method]) routes.push({ method: m, path: routeRegex(r.url) });
  });
  app.setNotFoundHandler((req, reply) => {
    const path = req.url.split('?', 1)[0];
    const allowed = [...new Set(routes.filter((r) => r.path.test(path)).map((r) => r.method))];
    if (allowed.length > 0) {
      reply.header('allow', allowed.join(', '));
      return sendError(reply, 'PROXY_ERR_METHOD_NOT_ALLOWED', `${req.method} is not allowed on ${path}; allowed: ${allowed.join(', ')}`);
    }
    return sendError(reply, 'PROXY_ERR_NOT_FOUND', `no route ${req.method} ${path}`);
  });

  return app;
}

/** Listens on host (bare, as the address parser gives it) and port; the app's base URL. */
export async function listenApp(app: FastifyInstance, host: string, port: number): Promise<string> {
  try {
    await app.listen({ host, port });
  } catch (err) {
    throw new Error(listenFailure(host, port, err as Error), { cause: err });
  }
  const a = app.server.address();
  return httpUrl(host, typeof a === 'object' && a !== null ? a.port : port);
}
