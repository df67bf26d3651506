// The admin HTTP API (fastify): reload the configuration, inspect the running pipeline.
// Enabled only when `admin.listen` is set, and behind a bearer token (`admin.token`) — except the
// health probes /healthz and /readyz, which orchestrators (Kubernetes httpGet probes) call without
// credentials and which reveal nothing but up/ready and why not.
import type { ServerResponse } from 'node:http';
import type { FastifyInstance } from 'fastify';
import { ConfigError, hostPort, loadConfig, parseConfig, type ConfigFormat } from '../config/index.ts';
import { sendError } from './reply.ts';
import { createApp, listenApp, type ConnectionCap } from './app.ts';
import { Tokens } from './tokens.ts';
import type { AdminSurface } from './surface.ts';
import { LOG_LEVELS, LOG_LEVEL_VALUES, isLogLevel, type Log } from '../log/index.ts';

export interface AdminOptions {
  /** `admin.token`, or a live holder of the accepted tokens (a reload replaces them). */
  token: string | Tokens;
  /** The configuration file the proxy was started with (reload re-reads it when no body is sent). */
  configFile: string | null;
  /** Its format when its name does not say it (serve --config-format); absent: by the extension. */
  configFormat?: ConfigFormat;
  /** Where an answer 500 (an error no route expected) is logged; absent: not logged. */
  log?: Pick<Log, 'error'>;
  /** The listener's connection cap (absent: none). */
  connectionCap?: ConnectionCap;
}

/** Largest body: a whole configuration as JSON. */
export const ADMIN_BODY_LIMIT_BYTES = 1024 * 1024;

const send = sendError;

/** How a refused configuration sent in a reload's body is named in the error message. */
const BODY_SOURCE = 'request body';

/** Routes answered without the admin token (health probes). */
const PROBES: ReadonlySet<string> = new Set(['/healthz', '/readyz']);

/** The query parameters of GET /api/v1/logs; each is taken once. */
const LOGS_QUERY = ['tail', 'level', 'filter', 'worker', 'follow'] as const;

/** A plain decimal number: no sign, point, exponent, hex prefix or blank (Number() takes all of those). */
const DIGITS = /^\d+$/;

/** The values a yes/no query parameter takes (`follow`, `allow_admin_change`). */
const BOOLEAN: ReadonlyMap<string, boolean> = new Map([['true', true], ['1', true], ['false', false], ['0', false]]);

/** A `?worker=` value: a worker's index (digits only, given once), or why not. `count`: the workers, undefined in one process. */
function workerParam(value: string | string[], count: number | undefined): number | { problem: string } {
  if (typeof value !== 'string') return { problem: 'worker is given more than once' };
  if (count === undefined) return { problem: 'worker: this proxy runs in one process (workers: 1); there is no worker to choose' };
  const i = DIGITS.test(value) ? Number(value) : -1;
  return i >= 0 && i < count ? i : { problem: `worker must be the index of a worker, 0 to ${count - 1}, got "${value}"` };
}

/** The most a `follow=true` stream holds of lines its client has not read yet; lines past it are left out of that stream. */
export const FOLLOW_MAX_UNSENT_BYTES = 1024 * 1024;

/** The line a follower is sent after lines were left out of its stream (it read too slowly). */
function skippedLine(skipped: number): string {
  return JSON.stringify({ level: 'warn', time: new Date().toISOString(), logger: 'proxy', skipped,
    msg: `${skipped} log line(s) left out of this stream: its client read them slower than the proxy wrote them (the ring and stderr keep them)` }) + '\n';
}

/** Whether a JSON log line is at `min` or above and contains `filter` (case-insensitive; '' matches all). */
function logMatcher(min: number, filter: string, worker: number | null): (line: string) => boolean {
  const needle = filter.toLowerCase();
  return (line) => {
    const m = /"level":"(\w+)"/.exec(line);
    const lv = m !== null && isLogLevel(m[1]!) ? LOG_LEVEL_VALUES[m[1]] : LOG_LEVEL_VALUES.info;
    return lv >= min && (needle === '' || line.toLowerCase().includes(needle)) && (worker === null || lineWorker(line) === worker);
  };
}

/**
 * The worker that wrote a line, or null (the primary, or one process). A worker's logger puts its
 * index right after `time` (its base field, ahead of the logger name and every field of the line),
 * so a field named `worker` further on — the primary saying which worker exited — is not taken for it.
 */
function lineWorker(line: string): number | null {
  const m = /^\{"level":"\w+","time":"[^"]*","worker":(\d+),/.exec(line);
  return m === null ? null : Number(m[1]);
}

export function buildAdminApp(proxy: AdminSurface, opts: AdminOptions): FastifyInstance {
  const app = createApp({
    tokens: typeof opts.token === 'string' ? new Tokens([opts.token]) : opts.token,
    // routeOptions.url is the matched route's pattern, not the raw path: no path trick reaches
    // another route through this exemption.
    isPublic: (req) => (req.method === 'GET' || req.method === 'HEAD') && PROBES.has(req.routeOptions.url ?? ''),
    bodyLimit: ADMIN_BODY_LIMIT_BYTES,
    log: opts.log,
    connectionCap: opts.connectionCap,
  });

  // The logs follows open: ended when the app closes (they would hold the close, and the proxy's exit, for ever).
  const follows = new Set<ServerResponse>();
  app.addHook('preClose', (done) => {
    for (const res of follows) res.end();
    done();
  });

  // Liveness: the event loop answered. Nothing else is checked, so a restart is never triggered by
  // an upstream outage.
  app.get('/healthz', async () => ({ status: 'ok' }));

  // Readiness: not draining, and the upstream able to serve — one host: reachable (an open pooled
  // connection, or a new one opened now within upstream.connect_timeout_ms); a replica set: a
  // primary known; a mongos list: a router that answered its last check (the monitors' view, not
  // the first seed's pool). 503 with the reason otherwise.
  app.get('/readyz', async (_req, reply) => {
    reply.header('cache-control', 'no-store');
    const r = await proxy.readiness();
    return r.ready ? r : reply.code(503).send(r);
  });

  // Prometheus text exposition: the proxy's counters, pool state, and plugin metrics (proxy_plugin_*).
  // ?worker=<i>: worker i's figures alone (with workers; the default is the machine's).
  app.get('/metrics', async (req, reply) => {
    const w = (req.query as Record<string, string | string[] | undefined>).worker;
    let worker: number | undefined;
    if (w !== undefined) {
      const chosen = workerParam(w, proxy.workerCount);
      if (typeof chosen !== 'number') return send(reply, 'PROXY_ERR_BAD_QUERY', chosen.problem);
      worker = chosen;
    }
    reply.header('content-type', proxy.metrics.contentType);
    return proxy.metrics.text(worker);
  });

  // Recent log lines (NDJSON, oldest first), then with follow=true every new line as it is written.
  // level: the lowest level shown; filter: text a line must contain (case-insensitive); tail: how many recent lines;
  // worker: one worker's lines (with workers, the ring holds every worker's lines too). Values are
  // taken as written or refused: `tail=1e3`, `tail=5.0` or `follow=maybe` is a 400, not a guess.
  app.get('/api/v1/logs', async (req, reply) => {
    const ring = proxy.logRing;
    if (ring === null || ring.capacity === 0) return send(reply, 'PROXY_ERR_NOT_FOUND', 'no recent logs are kept (log.ring_lines is 0)');
    const raw = req.query as Record<string, string | string[] | undefined>;
    for (const name of LOGS_QUERY) {
      if (Array.isArray(raw[name])) return send(reply, 'PROXY_ERR_BAD_QUERY', `${name} is given more than once`);
    }
    const q = raw as Record<string, string | undefined>;
    if (q.tail !== undefined && !DIGITS.test(q.tail)) {
      return send(reply, 'PROXY_ERR_BAD_QUERY', `tail must be a number of lines, digits only (0 or more), got "${q.tail}"`);
    }
    // More than the ring holds is every line it holds.
    const tail = q.tail === undefined ? 100 : Math.min(Number(q.tail), ring.capacity);
    const level = q.level ?? 'trace';
    if (!isLogLevel(level)) return send(reply, 'PROXY_ERR_BAD_QUERY', `level must be one of ${LOG_LEVELS.join(', ')}`);
    const follow = q.follow === undefined ? false : BOOLEAN.get(q.follow);
    if (follow === undefined) return send(reply, 'PROXY_ERR_BAD_QUERY', `follow must be true or false (or 1 or 0), got "${q.follow}"`);
    // ?worker=<i>: the lines worker i wrote (every line forwarded from a worker carries its index).
    let worker: number | null = null;
    if (q.worker !== undefined) {
      const chosen = workerParam(q.worker, proxy.workerCount);
      if (typeof chosen !== 'number') return send(reply, 'PROXY_ERR_BAD_QUERY', chosen.problem);
      worker = chosen;
    }
    const match = logMatcher(LOG_LEVEL_VALUES[level], q.filter ?? '', worker);
    const lines = tail === 0 ? [] : ring.recent(ring.capacity).filter(match).slice(-tail);
    const text = lines.map((l) => l + '\n').join('');
    if (!follow) {
      reply.header('content-type', 'application/x-ndjson');
      return text;
    }
    reply.hijack();
    const res = reply.raw;
    res.writeHead(200, { 'content-type': 'application/x-ndjson', 'cache-control': 'no-store' });
    res.write(text);
    // A follower that reads slower than lines are written (or not at all) holds at most
    // FOLLOW_MAX_UNSENT_BYTES of them: the lines past that are left out of its stream (the ring and
    // stderr keep them), and the next line it is sent is preceded by one saying how many.
    let skipped = 0;
    const stop = ring.follow((line) => {
      const l = line.endsWith('\n') ? line.slice(0, -1) : line;
      if (!match(l)) return;
      if (res.writableLength >= FOLLOW_MAX_UNSENT_BYTES) {
        skipped++;
        return;
      }
      if (skipped > 0) {
        res.write(skippedLine(skipped));
        skipped = 0;
      }
      res.write(l + '\n');
    });
    follows.add(res);
    const end = () => {
      stop();
      follows.delete(res);
    };
    req.raw.on('close', end);
    res.on('close', end);
  });

  app.get('/api/v1/pipeline', async () => proxy.pipeline());

  // The processes serving clients: one (workers: 1), or each worker of the machine.
  app.get('/api/v1/workers', async () => proxy.workers());

  // Body: a whole configuration object (JSON) to apply, or nothing to re-read the file.
  // ?allow_admin_change=true: apply a configuration that closes or moves this API (refused otherwise).
  app.post('/api/v1/reload', async (req, reply) => {
    const allow = (req.query as Record<string, string | string[] | undefined>).allow_admin_change;
    const allowAdminChange = allow === undefined ? false : typeof allow === 'string' ? BOOLEAN.get(allow) : undefined;
    if (allowAdminChange === undefined) {
      return send(reply, 'PROXY_ERR_BAD_QUERY', `allow_admin_change must be true or false (or 1 or 0), given once, got "${String(allow)}"`);
    }
    let next;
    // What the configuration came from, named in every refusal's message (a schema issue, or one
    // only applying it finds: an address that cannot be bound, a TLS file that cannot be read).
    let source: string | null;
    try {
      // The body parser (app.ts) has refused anything but a JSON object; undefined is no body.
      if (req.body !== undefined) {
        source = BODY_SOURCE;
        next = parseConfig(req.body, source);
      } else {
        if (opts.configFile === null) return send(reply, 'PROXY_ERR_NO_CONFIG_FILE');
        source = opts.configFile;
        next = (await loadConfig({ file: source, format: opts.configFormat })).config;
      }
    } catch (err) {
      if (err instanceof ConfigError) return send(reply, 'PROXY_ERR_CONFIG', err.message, err.issues);
      throw err;
    }
    // The operator is using this API: a reload that closes it, or moves it where they may not reach
    // (another interface, a port a firewall closes), is applied only when asked for by name.
    const running = proxy.adminListen();
    const requested = next.admin?.listen ?? null;
    if (!allowAdminChange && running !== null && requested !== running) {
      const what = requested === null ? `close the admin API on ${running} (the configuration has no admin.listen)`
        : `move the admin API from ${running} to ${requested}`;
      return send(reply, 'PROXY_ERR_RELOAD_CHANGES_ADMIN', `this reload would ${what}; nothing was applied. To apply it, send it again ` +
        'with ?allow_admin_change=true (or put it in the configuration file and send the proxy SIGHUP)', { admin_listen: running, requested });
    }
    try {
      await proxy.reload(next, source);
    } catch (err) {
      // Refused by what only a reload can check (a listener address that cannot be bound, a TLS
      // file): the configuration's fault, with its key path; otherwise a plugin's.
      if (err instanceof ConfigError) return send(reply, 'PROXY_ERR_CONFIG', err.message, err.issues);
      return send(reply, 'PROXY_ERR_PLUGIN', (err as Error).message);
    }
    return { reloaded: true, pipeline: proxy.pipeline() };
  });

  return app;
}

/** Listens on `admin.listen` ("host:port" or "[ipv6]:port"); `tokens` is the live holder the app checks. */
export async function startAdmin(proxy: AdminSurface, listen: string, opts: AdminOptions): Promise<{ app: FastifyInstance; url: string; tokens: Tokens }> {
  const tokens = typeof opts.token === 'string' ? new Tokens([opts.token]) : opts.token;
  const app = buildAdminApp(proxy, { ...opts, token: tokens });
  const { host, port } = hostPort(listen);
  return { app, url: await listenApp(app, host, port), tokens };
}
