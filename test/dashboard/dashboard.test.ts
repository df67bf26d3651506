// The dashboard in headless Chromium against a running proxy with real driver traffic: the table
// renders live data and sorts, a trend chart draws from in-memory and from persisted snapshots, the flame graph zooms,
// a token-protected endpoint asks for the token, a proxy with profiling off says so. Screenshots go
// to test-artifacts/dashboard/.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { parseConfig } from '../../runtime/config/index.ts';
import { startProxy } from '../../runtime/app/serve.ts';
import { ARTIFACTS, quiet, running, start, open, holdFirst } from './helpers.ts';

const column = (page: Page, i: number) => page.$$eval(`#steps tbody tr td:nth-child(${i})`, (tds) => tds.map((t) => t.textContent ?? ''));
const num = (s: string) => Number(s.replace(/[^\d.]/g, ''));

test('profiling table: live rows from the running proxy, every column sortable, P99 descending in one click, refreshed every 5 s',
  { timeout: 90_000 }, async () => {
    const { proxy, client } = await start({});
    const db = client.db('dash');
    for (let i = 0; i < 30; i++) await db.collection('us_200').findOne({});
    for (let i = 0; i < 5; i++) await db.collection('us_3000').findOne({});
    const page = await open(`${proxy.profilingUrl}/`);
    assert.match(page.url(), /\/dashboard\/$/, '/ leads to the dashboard');
    await page.waitForSelector('#steps tbody tr');
    const headers = await page.$$eval('#steps thead th', (ths) => ths.map((t) => t.textContent?.trim()));
    assert.deepEqual(headers, ['Step Name', 'Phase', 'Avg (µs)', 'P50', 'P95', 'P99', 'Max', 'Error Rate']);
    const names = await column(page, 1);
    assert.deepEqual([...names].sort(), ['wasm:filter', 'wasm:logging', 'wasm:spin']);
    // Default order: P99 descending, so the busy-waiting step comes first.
    assert.equal(names[0], 'wasm:spin');
    const p99 = (await column(page, 6)).map(num);
    assert.ok(p99[0] >= 3000, `spin p99 ${p99[0]}`);
    assert.deepEqual(p99, [...p99].sort((a, b) => b - a));
    assert.match(await page.textContent('#summary') ?? '', /35 requests/);

    await page.click('#steps th[data-key=name] button');
    assert.deepEqual(await column(page, 1), ['wasm:filter', 'wasm:logging', 'wasm:spin'], 'name ascending');
    assert.equal(await page.getAttribute('#steps th[data-key=name]', 'aria-sort'), 'ascending');
    await page.click('#steps th[data-key=name] button');
    assert.deepEqual(await column(page, 1), ['wasm:spin', 'wasm:logging', 'wasm:filter'], 'name descending');
    await page.click('#steps th[data-key=avg_latency_us] button');
    const avg = (await column(page, 3)).map(num);
    assert.deepEqual(avg, [...avg].sort((a, b) => b - a), 'Avg descending on first click');
    // Keyboard: the headers are buttons.
    await page.focus('#steps th[data-key=phase] button');
    await page.keyboard.press('Enter');
    assert.deepEqual(await column(page, 2), ['request', 'request', 'response']);
    await page.click('#sort-p99');
    assert.equal(await page.getAttribute('#steps th[data-key=p99_latency_us]', 'aria-sort'), 'descending');
    assert.equal((await column(page, 1))[0], 'wasm:spin');

    // Live: new traffic shows up at the next refresh.
    for (let i = 0; i < 15; i++) await db.collection('us_10').findOne({});
    await page.waitForFunction(() => /50 requests/.test(document.getElementById('summary')?.textContent ?? ''), undefined, { timeout: 12_000 });
    await page.screenshot({ path: join(ARTIFACTS, 'profiling-table.png'), fullPage: true });
    const extra = page as unknown as { errors: string[]; foreign: string[] };
    assert.deepEqual(extra.errors, []);
    assert.deepEqual(extra.foreign, []);
    await page.close();
  });

/** The dashboard's Trends tab, drawn, with the spin step's series in the legend. */
async function openTrends(profilingUrl: string) {
  const page = await open(`${profilingUrl}/dashboard/`);
  await page.waitForSelector('#steps tbody tr');
  await page.click('#tab-trends');
  await page.waitForSelector('#chart canvas');
  const legend = await page.$$eval('#chart .u-legend .u-series .u-label', (els) => els.map((e) => e.textContent));
  assert.ok(legend.includes('wasm:spin (request)'), `legend ${legend.join(', ')}`);
  return page;
}

test('trend chart without snapshot_dir: drawn from the snapshots kept in memory', { timeout: 90_000 }, async () => {
  const { proxy, client } = await start({ snapshot_dir: undefined });
  assert.equal(proxy.snapshots!.persistent, false);
  for (let i = 0; i < 10; i++) await client.db('dash').collection('us_300').findOne({});
  await proxy.snapshots!.snapshot();
  for (let i = 0; i < 10; i++) await client.db('dash').collection('us_2000').findOne({});
  await proxy.snapshots!.snapshot();
  const page = await openTrends(proxy.profilingUrl!);
  assert.match(await page.textContent('#trends-info') ?? '', /^2 snapshots, one every 3600 s/);
  await page.close();
});

/** Pixels of the chart's canvas in a saturated colour: the series' lines and points, not the grey axes and grid. */
const seriesPixels = (page: Page) => page.$eval('#chart canvas', (c) => {
  const cv = c as HTMLCanvasElement;
  const d = cv.getContext('2d')!.getImageData(0, 0, cv.width, cv.height).data;
  let n = 0;
  for (let i = 0; i < d.length; i += 4) {
    if (d[i + 3] > 128 && Math.max(d[i], d[i + 1], d[i + 2]) - Math.min(d[i], d[i + 1], d[i + 2]) > 80) n++;
  }
  return n;
});

test('trend chart right after a start (30 s snapshot interval, no snapshot yet): the interval so far is drawn at once', { timeout: 90_000 }, async () => {
  const startedMs = Date.now();
  const { proxy, client } = await start({ snapshot_dir: undefined, snapshot_interval_s: 30 });
  for (let i = 0; i < 10; i++) await client.db('dash').collection('us_300').findOne({});
  const page = await openTrends(proxy.profilingUrl!);
  assert.ok(Date.now() - startedMs < 30_000, 'drawn before the first snapshot');
  assert.match(await page.textContent('#trends-info') ?? '', /^0 snapshots, one every 30 s, and the current interval so far \(\d+ s\)/);
  assert.equal(await page.getAttribute('#chart', 'data-live'), 'true');
  assert.equal(await page.getAttribute('#chart', 'data-points'), '0');
  const drawn = await seriesPixels(page);
  assert.ok(drawn > 20, `${drawn} pixels of the series drawn`);
  await page.screenshot({ path: join(ARTIFACTS, 'trends-live.png'), fullPage: true });
  await page.close();
});

test('trend chart: drawn from the persisted snapshots, with a range picker', { timeout: 90_000 }, async () => {
  const { proxy, client } = await start({});
  const db = client.db('dash');
  await proxy.snapshots!.snapshot();
  for (let i = 0; i < 10; i++) await db.collection('us_300').findOne({});
  await proxy.snapshots!.snapshot();
  for (let i = 0; i < 10; i++) await db.collection('us_2000').findOne({});
  await proxy.snapshots!.snapshot();
  const page = await openTrends(proxy.profilingUrl!);
  assert.match(await page.textContent('#trends-info') ?? '', /^3 snapshots, one every 3600 s/);
  // The canvas has something drawn on it.
  const drawn = await page.$eval('#chart canvas', (c) => {
    const cv = c as HTMLCanvasElement;
    const d = cv.getContext('2d')!.getImageData(0, 0, cv.width, cv.height).data;
    let n = 0;
    for (let i = 3; i < d.length; i += 4) if (d[i] !== 0) n++;
    return n;
  });
  assert.ok(drawn > 1000, `${drawn} painted pixels`);
  await page.selectOption('#range', '900000');
  await page.selectOption('#figure', 'p99_latency_us');
  await page.waitForSelector('#chart[data-figure=p99_latency_us] canvas');
  assert.equal(await page.getAttribute('#chart', 'data-points'), '3');
  await page.screenshot({ path: join(ARTIFACTS, 'trends.png'), fullPage: true });
  await page.close();
});

test('trend chart: two quick changes end on the chart the last one asked for, whichever answer comes last', { timeout: 90_000 }, async () => {
  const { proxy, client } = await start({});
  for (let i = 0; i < 10; i++) await client.db('dash').collection('us_300').findOne({});
  await proxy.snapshots!.snapshot();
  const page = await openTrends(proxy.profilingUrl!);
  // The range change's answer is held back until the figure change has drawn its chart.
  const hold = await holdFirst(page, '**/api/profile/series*');
  await page.selectOption('#range', '900000');
  await hold.seen;
  await page.selectOption('#figure', 'p99_latency_us');
  await page.waitForSelector('#chart[data-figure=p99_latency_us] canvas');
  await hold.release();
  // The late answer (asked for while the figure was still P95) has reached the page; give its handler time to draw.
  await page.waitForTimeout(300);
  assert.equal(await page.getAttribute('#chart', 'data-figure'), 'p99_latency_us');
  assert.equal(await page.$$eval('#chart canvas', (cs) => cs.length), 1);
  await page.close();
});

test('flame graph view: the interactive SVG embedded, click zooms and Reset Zoom appears, download link', { timeout: 90_000 }, async () => {
  const { proxy, client } = await start({});
  const db = client.db('dash');
  for (let i = 0; i < 20; i++) await db.collection('us_500').findOne({});
  const page = await open(`${proxy.profilingUrl}/dashboard/`);
  await page.waitForSelector('#steps tbody tr');
  await page.click('#tab-flame');
  await page.fill('#flame-title', 'dashboard test');
  await page.click('#flame-form button[type=submit]');
  const frame = page.frameLocator('#flame');
  await frame.locator('[id$=title]').filter({ hasText: 'dashboard test' }).waitFor();
  const unzoom = frame.locator('[id$=unzoom]');
  assert.match(await unzoom.getAttribute('class') ?? '', /hidden/);
  await frame.locator('g[id$=frames] g:has(title:text-matches("wasm:spin"))').first().click();
  assert.doesNotMatch(await unzoom.getAttribute('class') ?? '', /hidden/, 'zoomed: Reset Zoom shown');
  assert.equal(await page.isVisible('#flame-download'), true);
  assert.match(await page.getAttribute('#flame-download', 'href') ?? '', /^blob:/);
  await page.screenshot({ path: join(ARTIFACTS, 'flamegraph.png'), fullPage: true });
  await page.close();
});

test('flame graph: of two quick submits the later one\'s graph stays, whichever answer comes last', { timeout: 90_000 }, async () => {
  const { proxy, client } = await start({});
  for (let i = 0; i < 20; i++) await client.db('dash').collection('us_500').findOne({});
  const page = await open(`${proxy.profilingUrl}/dashboard/`);
  await page.waitForSelector('#steps tbody tr');
  await page.click('#tab-flame');
  // The first submit's answer is held back until the second one's graph is shown.
  const hold = await holdFirst(page, '**/api/profile/flamegraph*');
  await page.fill('#flame-title', 'first submit');
  await page.click('#flame-form button[type=submit]');
  await hold.seen;
  await page.fill('#flame-title', 'second submit');
  await page.click('#flame-form button[type=submit]');
  const frame = page.frameLocator('#flame');
  await frame.locator('[id$=title]').filter({ hasText: 'second submit' }).waitFor();
  await hold.release();
  // The late answer (titled "first submit") has reached the page; give its handler time to run.
  await page.waitForTimeout(300);
  assert.equal(await frame.locator('[id$=title]').filter({ hasText: 'second submit' }).count(), 1);
  assert.equal(await frame.locator('[id$=title]').filter({ hasText: 'first submit' }).count(), 0);
  await page.close();
});

test('a token-protected endpoint: the page loads, asks for the token, then shows data', { timeout: 60_000 }, async () => {
  const { proxy, client } = await start({ token: 'sesame-dashboard' });
  await client.db('dash').collection('us_10').findOne({});
  const page = await open(`${proxy.profilingUrl}/dashboard/`);
  await page.waitForSelector('#auth:not([hidden])');
  assert.match(await page.textContent('#notice') ?? '', /needs a token/);
  await page.fill('#token', 'sesame-dashboard');
  await page.click('#auth button');
  await page.waitForSelector('#steps tbody tr');
  assert.equal(await page.isVisible('#notice'), false);
  await page.close();
});

test('profiling disabled: the dashboard says so instead of an empty table', { timeout: 60_000 }, async () => {
  const proxy = await startProxy(parseConfig({ listen: '127.0.0.1:0', log: { level: 'error' }, profiling: { enabled: false, port: 0 } }, null), { log: quiet });
  running.push(proxy);
  if (proxy.profilingUrl === null) return assert.fail('the profiling port serves the dashboard even with profiling off');
  const page = await open(`${proxy.profilingUrl}/dashboard/`);
  await page.waitForSelector('#notice:not([hidden])');
  assert.match(await page.textContent('#notice') ?? '', /Profiling is disabled/);
  await page.screenshot({ path: join(ARTIFACTS, 'disabled.png') });
  await page.close();
});
