// What the dashboard tests share: headless Chromium (Debian `chromium`, driven by playwright-core,
// launched once per test file), proxies with the busy-wait fixture step, pages that record script
// errors and requests to other hosts. Every wait is bounded, so a hang fails the test that hangs.
import { before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MongoClient } from 'mongodb';
import { chromium, type Browser, type Page, type Request } from 'playwright-core';
import { parseConfig } from '../../runtime/config/index.ts';
import { startProxy, type RunningProxy } from '../../runtime/app/serve.ts';
import { Logger } from '../../runtime/log/index.ts';
import { fixture } from '../wasm/fixtures.ts';

export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
export const ARTIFACTS = new URL('../../test-artifacts/dashboard/', import.meta.url).pathname;
export const quiet = new Logger('test', 'error', 'json', { write: () => {} });

let browser: Browser;
export const running: RunningProxy[] = [];
export const clients: MongoClient[] = [];
export const dirs: string[] = [];

/** Bounds a cleanup step: a stuck close must not hold the file past the runner's limit. */
function bounded(p: Promise<unknown>, ms = 10_000): Promise<unknown> {
  return Promise.race([p.catch(() => {}), new Promise((r) => setTimeout(r, ms).unref())]);
}

before(async () => {
  assert.ok(existsSync(CHROMIUM), `Chromium at ${CHROMIUM} (apt-get install chromium; .ci/run installs it)`);
  mkdirSync(ARTIFACTS, { recursive: true });
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
});
after(async () => {
  if (browser !== undefined) await bounded(browser.close());
  for (const c of clients) await bounded(c.close(true));
  for (const p of running) await bounded(p.close());
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

export async function start(profiling: Record<string, unknown>) {
  const dir = mkdtempSync(join(tmpdir(), 'proxy-dashboard-'));
  dirs.push(dir);
  const raw = {
    listen: '127.0.0.1:0', log: { level: 'error' },
    pipeline: { request: ['spin', 'filter'], response: ['logging'] },
    steps: { spin: { module: await fixture('spin'), config: {} }, filter: { config: { rules: [], default: 'allow' } },
      logging: { config: { sample_rate: 0 } } },
    profiling: { enabled: true, port: 0, slow_step_threshold_us: 1_000_000, snapshot_dir: dir, snapshot_interval_s: 3600, ...profiling },
  };
  const proxy = await startProxy(parseConfig(raw, null), { log: quiet });
  running.push(proxy);
  const client = new MongoClient(proxy.uri, { serverSelectionTimeoutMS: 5000 });
  clients.push(client);
  return { proxy, client };
}

export async function open(url: string): Promise<Page> {
  const page = await browser.newPage({ viewport: { width: 1366, height: 900 } });
  page.setDefaultTimeout(20_000);
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(e.message));
  page.on('console', (m) => { if (m.type() === 'error' && !/401|404/.test(m.text())) errors.push(m.text()); });
  // Every request the page makes goes to the proxy that served it: nothing from the internet.
  const foreign: string[] = [];
  page.on('request', (r) => { const u = new URL(r.url()); if (u.protocol.startsWith('http') && u.host !== new URL(url).host) foreign.push(r.url()); });
  await page.goto(url);
  (page as unknown as { errors: string[]; foreign: string[] }).errors = errors;
  (page as unknown as { errors: string[]; foreign: string[] }).foreign = foreign;
  return page;
}

export type CheckedPage = Page & { errors: string[]; foreign: string[] };

/**
 * A proxy with a control plane (token `token`) and a canary store in a temporary directory, the
 * profiling port serving the dashboard; `extra` is merged into its configuration. Closed after the file.
 */
export async function startWithControlPlane(token: string, extra: Record<string, unknown> = {}): Promise<RunningProxy> {
  const dir = mkdtempSync(join(tmpdir(), 'proxy-dashboard-canary-'));
  dirs.push(dir);
  const proxy = await startProxy(parseConfig({
    listen: '127.0.0.1:0', log: { level: 'error' },
    profiling: { enabled: true, port: 0 },
    control_plane: { port: 0, tokens: [token] },
    canary: { data_dir: dir },
    ...extra,
  }, null), { log: quiet });
  running.push(proxy);
  return proxy;
}

/** POST /api/v1/canary on `proxy`'s control plane; the created canary's id (the test fails otherwise). */
export async function createCanary(proxy: RunningProxy, token: string, body: Record<string, unknown>): Promise<string> {
  const created = await fetch(`${proxy.controlPlaneUrl}/api/v1/canary`, {
    method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify(body),
  }).then((r) => r.json()) as { canary_id?: string };
  assert.match(created.canary_id ?? '', /./, JSON.stringify(created));
  return created.canary_id!;
}

/**
 * Holds back the page's first request to a URL matching `url` (the others pass): `seen` resolves
 * with it when it is made; after `release()` it goes on, and the promise release() returns
 * resolves once its answer has reached the page.
 */
export async function holdFirst(page: Page, url: string | RegExp): Promise<{ seen: Promise<Request>; release: () => Promise<void> }> {
  let letGo!: () => void;
  const held = new Promise<void>((resolve) => { letGo = resolve; });
  let seenIt!: (r: Request) => void;
  const seen = new Promise<Request>((resolve) => { seenIt = resolve; });
  let first = true;
  await page.route(url, async (route) => {
    if (!first) return route.continue();
    first = false;
    seenIt(route.request());
    await held;
    await route.continue();
  });
  return {
    seen,
    release: async () => {
      const late = await seen;
      const finished = page.waitForEvent('requestfinished', (r) => r === late);
      letGo();
      await finished;
    },
  };
}
