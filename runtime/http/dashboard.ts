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

const require = createRequire(import.meta.url);
const OWN = new URL('../dashboard/', import.meta.url).pathname;

interface Asset { type: string; body: Buffer }

function assets(): Map<string, Asset> {
  const uplot = dirname(require.resolve('uplot/dist/uPlot.iife.min.js'));
  const files: Array<[string, string, string]> = [
    ['', join(OWN, 'index.html'), 'text/html; charset=utf-8'],
    ['dashboard.js', join(OWN, 'dashboard.js'), 'text/javascript; charset=utf-8'],
    ['dashboard.css', join(OWN, 'dashboard.css'), 'text/css; charset=utf-8'],
    ['vendor/uPlot.iife.min.js', join(uplot, 'uPlot.iife.min.js'), 'text/javascript; charset=utf-8'],
    ['vendor/uPlot.min.css', join(uplot, 'uPlot.min.css'), 'text/css; charset=utf-8'],
  ];
  return new Map(files.map(([path, file, type]) => [path, { type, body: readFileSync(file) }]));
}

/** Paths the token check lets through: the page and its assets (never data). */
export function isDashboardAsset(url: string): boolean {
  return url === '/' || url === '/dashboard' || url.startsWith('/dashboard/');
}

export function registerDashboard(app: FastifyInstance): void {
  const files = assets();
  app.get('/', async (_req, reply) => reply.redirect('/dashboard/'));
  app.get('/dashboard', async (_req, reply) => reply.redirect('/dashboard/'));
  app.get('/dashboard/*', async (req, reply) => {
    const path = (req.params as { '*': string })['*'];
    const a = files.get(path);
    if (a === undefined) return sendError(reply, 'PROXY_ERR_NOT_FOUND', `no dashboard file ${path}`);
    reply.header('content-type', a.type);
    reply.header('cache-control', 'no-cache');
    reply.header('x-content-type-options', 'nosniff');
    return reply.send(a.body);
  });
}
