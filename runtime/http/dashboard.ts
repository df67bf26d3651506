// The dashboard's files, served by the profiling endpoint under /dashboard/ (docs/dashboard.md):
// the page, its script and style (runtime/dashboard/) and uPlot from node_modules — every asset
// from the proxy itself, so the page works without internet access. Read once at start and kept
// in memory. The files are not secret: with profiling.token set they load without it, and the
// page sends the token with every API call it makes.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { sendError } from './reply.ts';
import { defaultScriptHashSource } from '../profiling/flamegraph-svg.ts';

const require = createRequire(import.meta.url);
const OWN = new URL('../dashboard/', import.meta.url).pathname;

interface Asset { type: string; body: Buffer }

function assets(): Map<string, Asset> {
  const uplot = dirname(require.resolve('uplot/dist/uPlot.iife.min.js'));
  const files: Array<[string, string, string]> = [
    ['', join(OWN, 'index.html'), 'text/html; charset=utf-8'],
    ['dashboard.js', join(OWN, 'dashboard.js'), 'text/javascript; charset=utf-8'],
    ['dashboard.css', join(OWN, 'dashboard.css'), 'text/css; charset=utf-8'],
    ['canary-widget.js', join(OWN, 'canary-widget.js'), 'text/javascript; charset=utf-8'],
    ['vendor/uPlot.iife.min.js', join(uplot, 'uPlot.iife.min.js'), 'text/javascript; charset=utf-8'],
    ['vendor/uPlot.min.css', join(uplot, 'uPlot.min.css'), 'text/css; charset=utf-8'],
  ];
  return new Map(files.map(([path, file, type]) => [path, { type, body: readFileSync(file) }]));
}

/** Paths the token check lets through: the page and its assets (never data). */
export function isDashboardAsset(url: string): boolean {
  return url === '/' || url === '/dashboard' || url.startsWith('/dashboard/');
}

export interface DashboardOptions {
  /** Base URL of the canary control plane (the Canary tab calls it), or null when it is not configured. */
  controlPlaneUrl: () => string | null;
}

/**
 * The page's Content-Security-Policy: scripts and styles from the proxy only (no inline script, so
 * markup that ever reached the page from a string could not run), the API calls to this origin and
 * the control plane's (HTTP and its WebSocket feed), the flame graph as a blob: frame whose one
 * script is the flame graph's own (by hash: a blob: document inherits this policy). Inline styles
 * are allowed: uPlot and the canary widget set them.
 */
export function dashboardCsp(controlPlaneUrl: string | null, flameScript: string): string {
  const connect = ["'self'"];
  if (controlPlaneUrl !== null) {
    const u = new URL(controlPlaneUrl);
    const ws = u.protocol === 'https:' ? 'wss:' : 'ws:';
    // A policy cannot name an IPv6 literal host: the schemes then.
    if (u.hostname.startsWith('[')) connect.push(u.protocol, ws);
    else connect.push(u.origin, `${ws}//${u.host}`);
  }
  return [
    "default-src 'none'", `script-src 'self' ${flameScript}`, "style-src 'self' 'unsafe-inline'", "img-src 'self' data: blob:",
    'frame-src blob:', `connect-src ${connect.join(' ')}`, "base-uri 'none'", "form-action 'none'", "object-src 'none'",
  ].join('; ');
}

export function registerDashboard(app: FastifyInstance, opts: DashboardOptions): void {
  const files = assets();
  const flameScript = defaultScriptHashSource();
  // What the page needs to know about this proxy beyond the profiling API.
  app.get('/dashboard/config.json', async () => ({ control_plane_url: opts.controlPlaneUrl() }));
  app.get('/', async (_req, reply) => reply.redirect('/dashboard/'));
  app.get('/dashboard', async (_req, reply) => reply.redirect('/dashboard/'));
  app.get('/dashboard/*', async (req, reply) => {
    const path = (req.params as { '*': string })['*'];
    const a = files.get(path);
    if (a === undefined) return sendError(reply, 'PROXY_ERR_NOT_FOUND', `no dashboard file ${path}`);
    reply.header('content-type', a.type);
    reply.header('cache-control', 'no-cache');
    if (path === '') reply.header('content-security-policy', dashboardCsp(opts.controlPlaneUrl(), flameScript));
    return reply.send(a.body);
  });
}
