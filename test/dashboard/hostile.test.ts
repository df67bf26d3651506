// Strings clients chose, on the dashboard, in headless Chromium: a `mongodb` client whose appName,
// collection name and document values are markup drives a shadow canary whose diffs the canary
// widget shows. They show as text, and the page's Content-Security-Policy would stop an inline
// handler even if markup ever reached the page; the flame graph's own script still runs in its
// frame (dashboard.test.ts zooms it). Every answer of the HTTP apps carries nosniff.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MongoClient } from 'mongodb';
import { clients, open, start, startWithControlPlane, createCanary } from './helpers.ts';

const TOKEN = 'dashboard-hostile-token-0123456789';
const MARKUP = '<img src=x onerror="window.__pwned=(window.__pwned||0)+1">';

test('dashboard: markup in a client\'s collection name, appName and values shows as text; the page\'s CSP refuses inline handlers; nosniff',
  { timeout: 120_000 }, async () => {
    const proxy = await startWithControlPlane(TOKEN, {
      pipeline: { request: [], response: ['transform'] }, steps: { transform: { config: { response: [{ op: 'redact', path: 'ssn' }] } } },
    });
    const client = new MongoClient(proxy.uri, { serverSelectionTimeoutMS: 5000, appName: `app${MARKUP}` });
    clients.push(client);
    const coll = client.db('app').collection<{ _id: number; email: string }>(`people${MARKUP}`);
    await coll.insertOne({ _id: 1, email: `a${MARKUP}` });
    await createCanary(proxy, TOKEN, {
      mode: 'shadow', shadow_pct: 100, auto_promote: false, shadow: { show_values: true },
      candidate_config: { steps: [{ type: 'transform', config: { response: [{ op: 'redact', path: 'email' }] } }] },
      stages: [{ traffic_pct: 0, min_duration: '1h', min_requests: 1_000_000 }, { traffic_pct: 100, min_duration: '0', min_requests: 0 }],
    });
    await coll.findOne({ _id: 1 });

    const res = await fetch(`${proxy.profilingUrl}/dashboard/`);
    const csp = res.headers.get('content-security-policy') ?? '';
    assert.match(csp, /script-src 'self' 'sha256-[A-Za-z0-9+/]+=*'(;|$)/, `the page has a policy: ${csp}`);
    assert.ok(csp.includes(new URL(proxy.controlPlaneUrl!).origin), 'the page may call the control plane');

    const page = await open(`${proxy.profilingUrl}/dashboard/`);
    await page.click('#tab-canary');
    await page.waitForSelector('#canary-form:not([hidden])');
    await page.fill('#canary-token', TOKEN);
    await page.click('#canary-form button[type=submit]');
    const diffs = page.locator('#canary-widget table.diffs tbody tr');
    await diffs.first().waitFor();
    const row = await diffs.first().locator('td').allTextContents();
    assert.equal(row[2], `app.people${MARKUP}`, 'the namespace shows as the client sent it, as text');
    assert.ok(row[3].includes(`"a${MARKUP.replace(/"/g, '\\"')}"`), `the value shows as text: ${row[3]}`);
    assert.equal(await page.locator('#canary-widget img').count(), 0, 'no element was made from the strings');

    // Were markup ever to reach the page, its inline handler would not run: the policy refuses it.
    const violations = await page.evaluate(async (markup) => {
      const seen: string[] = [];
      document.addEventListener('securitypolicyviolation', (e) => seen.push(e.violatedDirective));
      document.body.insertAdjacentHTML('beforeend', markup);
      await new Promise((r) => setTimeout(r, 500));
      return seen;
    }, MARKUP);
    assert.equal(await page.evaluate(() => (window as unknown as { __pwned?: number }).__pwned), undefined, 'no inline handler ran');
    assert.ok(violations.some((d) => d.startsWith('script-src')), `the policy refused the handler: ${violations.join(', ')}`);
    const pageErrors = (page as unknown as { errors: string[] }).errors.filter((e) => !/Content Security Policy|net::ERR/.test(e));
    assert.deepEqual(pageErrors, [], 'the dashboard itself broke no rule of its policy');
    await page.close();

    // nosniff on the APIs too, their error answers JSON (quoting the request as data, never as HTML).
    for (const url of [`${proxy.profilingUrl}/api/profile?pipeline_id=${encodeURIComponent(MARKUP)}`, `${proxy.profilingUrl}/nope${MARKUP}`,
      `${proxy.controlPlaneUrl}/api/v1/canary/${encodeURIComponent(MARKUP)}`, `${proxy.controlPlaneUrl}/api/v1/canary`]) {
      const r = await fetch(url, { headers: { authorization: `Bearer ${TOKEN}` } });
      assert.equal(r.headers.get('x-content-type-options'), 'nosniff', url);
      assert.match(r.headers.get('content-type') ?? '', /^application\/json/, url);
    }
  });

test('the flame graph SVG opened directly: a policy lets its own script alone run (it still zooms); the title is text', { timeout: 90_000 }, async () => {
  const { proxy, client } = await start({});
  for (let i = 0; i < 20; i++) await client.db('dash').collection('us_200').findOne({});
  const url = `${proxy.profilingUrl}/api/profile/flamegraph?title=${encodeURIComponent(`t</title><script>window.__pwned=1</script>${MARKUP}`)}`;
  const res = await fetch(url);
  assert.match(res.headers.get('content-security-policy') ?? '', /^default-src 'none'; script-src 'sha256-[A-Za-z0-9+/]+=*'; style-src 'unsafe-inline'$/);
  assert.equal(res.headers.get('x-content-type-options'), 'nosniff');
  const page = await open(url);
  await page.locator('[id$=title]').filter({ hasText: '</script>' }).waitFor();
  const unzoom = page.locator('[id$=unzoom]');
  await page.locator('g[id$=frames] g:has(title:text-matches("wasm:spin"))').first().click();
  assert.doesNotMatch(await unzoom.getAttribute('class') ?? '', /hidden/, 'its script ran: zoomed, Reset Zoom shown');
  assert.equal(await page.evaluate(() => (window as unknown as { __pwned?: number }).__pwned), undefined);
  await page.close();
});
