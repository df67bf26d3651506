// The canary widget in headless Chromium: a real canary on a running proxy with its control plane,
// the widget fed over the WebSocket, its promote and rollback buttons; the canary tab without a
// control plane. Screenshots go to test-artifacts/dashboard/.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { MongoClient } from 'mongodb';
import { ARTIFACTS, clients, start, open, startWithControlPlane, createCanary } from './helpers.ts';

test('canary widget: baseline vs candidate fed over the WebSocket, stage and traffic, rules with thresholds; its buttons promote and roll back',
  { timeout: 120_000 }, async () => {
    const TOKEN = 'dashboard-canary-token-0123456789';
    const proxy = await startWithControlPlane(TOKEN, { rollback_rules: { check_interval: '1s', min_window_requests: 1 } });
    const canaryId = await createCanary(proxy, TOKEN, {
      pipeline_id: 'default', candidate_config: { steps: [{ type: 'logging', config: {} }] }, auto_promote: false,
      stages: [{ traffic_pct: 50, min_duration: '0', min_requests: 0 }, { traffic_pct: 75, min_duration: '0', min_requests: 0 },
        { traffic_pct: 100, min_duration: '0', min_requests: 0 }],
    });
    const client = new MongoClient(proxy.uri, { serverSelectionTimeoutMS: 5000 });
    clients.push(client);
    for (let i = 0; i < 40; i++) await client.db('dash').collection('c').findOne({});

    const page = await open(`${proxy.profilingUrl}/dashboard/`);
    await page.click('#tab-canary');
    await page.waitForSelector('#canary-form:not([hidden])');
    await page.fill('#canary-token', TOKEN);
    await page.check('#canary-actions');
    await page.click('#canary-form button[type=submit]');
    const widget = page.locator('#canary-widget .pcw');
    await widget.locator('[data-status=active]').waitFor();
    assert.equal(await widget.locator('[data-field=stage]').textContent(), '1');
    assert.equal(await widget.locator('[data-field=traffic]').textContent(), '50%');
    const head = await widget.locator('table').first().locator('thead th').allTextContents();
    assert.deepEqual(head, ['', 'Baseline', 'Candidate']);
    // Both sides served requests (50 %): the counts arrive over the feed and grow with traffic.
    const requests = async () => (await widget.locator('table').first().locator('tbody ' +
    'tr').first().locator('td').allTextContents()).map((t) => Number(t.replace(/,/g, '')));
    await page.waitForFunction(() => {
      const tds = document.querySelectorAll('#canary-widget .pcw table:first-of-type tbody tr:first-child td');
      return tds.length === 2 && Number(tds[0].textContent!.replace(/,/g, '')) > 0 && Number(tds[1].textContent!.replace(/,/g, '')) > 0;
    }, undefined, { timeout: 20_000 });
    const [b1, c1] = await requests();
    for (let i = 0; i < 40; i++) await client.db('dash').collection('c').findOne({});
    await page.waitForFunction((before) => {
      const tds = document.querySelectorAll('#canary-widget .pcw table:first-of-type tbody tr:first-child td');
      return Number(tds[0].textContent!.replace(/,/g, '')) + Number(tds[1].textContent!.replace(/,/g, '')) > before;
    }, b1 + c1, { timeout: 20_000 });
    const rules = await widget.locator('[data-rule]').evaluateAll((trs) => trs.map((t) => t.getAttribute('data-rule')));
    assert.ok(rules.includes('error_rate_delta_pct') && rules.includes('latency_p95_delta_ms'), `rules ${rules.join(', ')}`);
    await page.screenshot({ path: join(ARTIFACTS, 'canary-widget.png'), fullPage: true });

    await widget.locator('[data-action=promote]').click();
    await page.waitForFunction(() => document.querySelector('#canary-widget [data-field=traffic]')?.textContent === '75%', undefined, { timeout: 15_000 });
    assert.match(await widget.locator('[data-field=action-message]').textContent() ?? '', /stage 2/);
    page.once('dialog', (d) => d.accept('from the dashboard test'));
    await widget.locator('[data-action=rollback]').click();
    await widget.locator('[data-status=rolled_back]').waitFor({ timeout: 15_000 });
    const status = await fetch(`${proxy.controlPlaneUrl}/api/v1/canary/${canaryId}`,
      { headers: { authorization: `Bearer ${TOKEN}` } }).then((r) => r.json());
    assert.equal(status.status, 'rolled_back');
    const history = await fetch(`${proxy.controlPlaneUrl}/api/v1/canary/${canaryId}/history`,
      { headers: { authorization: `Bearer ${TOKEN}` } }).then((r) => r.json());
    assert.ok(JSON.stringify(history).includes('from the dashboard test'), 'the reason typed in the dialog reached the control plane');
    const extra = page as unknown as { errors: string[]; foreign: string[] };
    assert.deepEqual(extra.errors, []);
    await page.close();
  });

test('canary widget of a shadow canary: shadowed and diverged counts, by kind, the latest diffs with their paths and no values',
  { timeout: 120_000 }, async () => {
    const TOKEN = 'dashboard-shadow-token-0123456789';
    const proxy = await startWithControlPlane(TOKEN, {
      pipeline: { request: [], response: ['transform'] }, steps: { transform: { config: { response: [{ op: 'redact', path: 'ssn' }] } } },
    });
    await createCanary(proxy, TOKEN, {
      mode: 'shadow', shadow_pct: 100, auto_promote: false,
      candidate_config: { steps: [{ type: 'transform', config: { response: [{ op: 'redact', path: 'ssn' }, { op: 'redact', path: 'email' }] } }] },
      stages: [{ traffic_pct: 0, min_duration: '1h', min_requests: 1000 }, { traffic_pct: 100, min_duration: '0', min_requests: 0 }],
    });
    const client = new MongoClient(proxy.uri, { serverSelectionTimeoutMS: 5000 });
    clients.push(client);
    const coll = client.db('dash').collection('people');
    await coll.insertMany([{ ssn: '1', email: 'a@x.test' }, { ssn: '2' }]);
    for (let i = 0; i < 3; i++) {
      await coll.findOne({ email: { $exists: true } });
      await coll.findOne({ email: { $exists: false } });
    }

    const page = await open(`${proxy.profilingUrl}/dashboard/`);
    await page.click('#tab-canary');
    await page.waitForSelector('#canary-form:not([hidden])');
    await page.fill('#canary-token', TOKEN);
    await page.click('#canary-form button[type=submit]');
    const widget = page.locator('#canary-widget .pcw');
    await widget.locator('[data-status=active]').waitFor();
    assert.equal(await widget.locator('[data-field=traffic]').textContent(), '0%');
    assert.equal(await widget.locator('[data-field=shadow-pct]').textContent(), '100%');
    // The three finds of the document with an email diverged; the other three and the insert did not.
    assert.equal(await widget.locator('[data-field=shadow-diverged]').textContent(), '3');
    assert.equal(await widget.locator('[data-field=shadow-sampled]').textContent(), '7');
    assert.match(await widget.locator('[data-field=shadow]').textContent() ?? '', /reply 3/);
    const rows = widget.locator('table[aria-label="Latest diffs"] tbody tr');
    assert.equal(await rows.count(), 3);
    const cells = await rows.first().locator('td').allTextContents();
    assert.deepEqual(cells, ['reply', 'find', 'dash.people', 'cursor.firstBatch.0.email']);
    assert.doesNotMatch(await widget.textContent() ?? '', /a@x\.test/);
    await page.screenshot({ path: join(ARTIFACTS, 'canary-widget-shadow.png'), fullPage: true });
    const extra = page as unknown as { errors: string[]; foreign: string[] };
    assert.deepEqual(extra.errors, []);
    await page.close();
  });

test('canary tab without a control plane says canary deployments are disabled', { timeout: 60_000 }, async () => {
  const { proxy } = await start({});
  const page = await open(`${proxy.profilingUrl}/dashboard/`);
  await page.click('#tab-canary');
  await page.waitForSelector('#canary-off:not([hidden])');
  assert.match(await page.textContent('#canary-off') ?? '', /Canary deployments are disabled/);
  await page.close();
});
