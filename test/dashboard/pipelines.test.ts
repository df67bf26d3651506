// The dashboard's pipeline selector with several pipelines (config `pipelines`), in headless
// Chromium against a running proxy with real driver traffic from two applications: it lists the
// configured pipelines in matching order (the default marked), even one with no request yet, and
// choosing one shows that pipeline's steps and requests.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { MongoClient } from 'mongodb';
import type { Page } from 'playwright-core';
import { parseConfig } from '../../runtime/config/index.ts';
import { startProxy } from '../../runtime/app/serve.ts';
import { ARTIFACTS, quiet, running, clients, open, holdFirst } from './helpers.ts';

const names = (page: Page) => page.$$eval('#steps tbody tr td:nth-child(1)', (tds) => tds.map((t) => t.textContent ?? ''));

/** A proxy with three pipelines, 7 requests through `reports` and 3 through `default`. */
async function threePipelines() {
  const proxy = await startProxy(parseConfig({
    listen: '127.0.0.1:0', log: { level: 'error' },
    profiling: { enabled: true, port: 0, alert_on_slow_step: false },
    steps: { filter: { config: { rules: [], default: 'allow' } }, logging: { config: { sample_rate: 0 } } },
    pipelines: [
      { id: 'reports', match: { app_name: 'reports' }, request: ['filter'] },
      { id: 'idle', match: { app_name: 'nobody' }, request: ['cache'] },
      { id: 'default', response: ['logging'] },
    ],
  }, null), { log: quiet });
  running.push(proxy);
  const reports = new MongoClient(proxy.uri, { appName: 'reports' });
  const shop = new MongoClient(proxy.uri, { appName: 'shop' });
  clients.push(reports, shop);
  for (let i = 0; i < 7; i++) await reports.db('d').collection('c').findOne({});
  for (let i = 0; i < 3; i++) await shop.db('d').collection('c').findOne({});
  return proxy;
}

test('pipeline selector: the configured pipelines, each showing its own steps and requests', { timeout: 90_000 }, async () => {
  const proxy = await threePipelines();
  const page = await open(`${proxy.profilingUrl}/dashboard/`);
  await page.waitForSelector('#steps tbody tr');
  const options = await page.$$eval('#pipeline-id option', (os) => os.map((o) => [(o as HTMLOptionElement).value, o.textContent]));
  assert.deepEqual(options, [['reports', 'reports'], ['idle', 'idle'], ['default', 'default (default)']]);
  assert.deepEqual(await names(page), ['wasm:logging'], 'the default pipeline first');
  assert.match(await page.textContent('#summary') ?? '', /3 requests/);
  await page.selectOption('#pipeline-id', 'reports');
  await page.waitForFunction(() => /7 requests/.test(document.getElementById('summary')?.textContent ?? ''), undefined, { timeout: 10_000 });
  assert.deepEqual(await names(page), ['wasm:filter']);
  await page.screenshot({ path: join(ARTIFACTS, 'pipeline-selector.png'), fullPage: true });
  const extra = page as unknown as { errors: string[]; foreign: string[] };
  assert.deepEqual(extra.errors, []);
  assert.deepEqual(extra.foreign, []);
});

test('pipeline selector: an answer for an earlier choice that comes late does not replace the table of the later one', { timeout: 90_000 }, async () => {
  const proxy = await threePipelines();
  const page = await open(`${proxy.profilingUrl}/dashboard/`);
  await page.waitForSelector('#steps tbody tr');
  // The table's answer for `idle` is held back until `reports` has been chosen and shown.
  const hold = await holdFirst(page, /\/api\/profile\?.*pipeline_id=idle/);
  await page.selectOption('#pipeline-id', 'idle');
  await hold.seen;
  await page.selectOption('#pipeline-id', 'reports');
  await page.waitForFunction(() => /7 requests/.test(document.getElementById('summary')?.textContent ?? ''), undefined, { timeout: 10_000 });
  await hold.release();
  // The late answer (no requests, step cache) has reached the page; give its handler time to run.
  await page.waitForTimeout(300);
  assert.match(await page.textContent('#summary') ?? '', /7 requests/);
  assert.deepEqual(await names(page), ['wasm:filter']);
  await page.close();
});
