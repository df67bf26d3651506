// The canary tab when things happen out of order: a widget closed while it waits to reconnect its
// feed, and two quick changes of the canary list's "all" box whose answers come back the other way round.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { open, startWithControlPlane, createCanary, holdFirst } from './helpers.ts';

const STAGES = [{ traffic_pct: 50, min_duration: '0', min_requests: 0 }, { traffic_pct: 100, min_duration: '0', min_requests: 0 }];

test('canary widget: closed while it waits to reconnect a dropped feed, it opens no other', { timeout: 60_000 }, async () => {
  const TOKEN = 'dashboard-late-token-0123456789';
  const proxy = await startWithControlPlane(TOKEN);
  const canaryId = await createCanary(proxy, TOKEN, {
    pipeline_id: 'default', candidate_config: { steps: [{ type: 'logging', config: {} }] }, auto_promote: false, stages: STAGES,
  });
  const page = await open(`${proxy.profilingUrl}/dashboard/`);
  // Every WebSocket the page opens is kept in window.sockets.
  await page.evaluate(([baseUrl, token, id]) => {
    const w = window as unknown as Record<string, unknown> & { WebSocket: typeof WebSocket };
    const Native = w.WebSocket;
    const sockets: WebSocket[] = [];
    w.sockets = sockets;
    w.WebSocket = class extends Native {
      constructor(url: string | URL, protocols?: string | string[]) { super(url, protocols); sockets.push(this); }
    };
    const el = document.createElement('div');
    el.id = 'late-probe';
    document.body.append(el);
    w.widget = (w.ProxyCanaryWidget as { mount: (e: Element, o: object) => unknown }).mount(el,
      { baseUrl, canaryId: id, token, refreshInterval: 5000 });
  }, [proxy.controlPlaneUrl!, TOKEN, canaryId]);
  const opened = (n: number) => page.waitForFunction((k) => {
    const s = (window as unknown as { sockets: WebSocket[] }).sockets;
    return s.length === k && s[k - 1]!.readyState === WebSocket.OPEN;
  }, n, { timeout: 15_000 });
  await opened(1);
  await page.locator('#late-probe [data-status=active]').waitFor();
  // A dropped feed is reconnected (after a second's back-off)...
  await page.evaluate(() => (window as unknown as { sockets: WebSocket[] }).sockets[0]!.close());
  await opened(2);
  // ...but not once the widget is closed during that back-off.
  await page.evaluate(() => new Promise<void>((resolve) => {
    const w = window as unknown as { sockets: WebSocket[]; widget: { close(): void } };
    const s = w.sockets[1]!;
    s.addEventListener('close', () => setTimeout(() => { w.widget.close(); resolve(); }, 0));
    s.close();
  }));
  await new Promise((r) => setTimeout(r, 3000));
  assert.equal(await page.evaluate(() => (window as unknown as { sockets: WebSocket[] }).sockets.length), 2);
  await page.close();
});

test('canary list: of two quick changes of "all", the list the later one asked for stays, whichever answer comes last', { timeout: 60_000 }, async () => {
  const TOKEN = 'dashboard-list-token-0123456789';
  const proxy = await startWithControlPlane(TOKEN);
  const auth = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };
  const body = { pipeline_id: 'default', candidate_config: { steps: [{ type: 'logging', config: {} }] }, auto_promote: false, stages: STAGES };
  const ended = await createCanary(proxy, TOKEN, body);
  const rolled = await fetch(`${proxy.controlPlaneUrl}/api/v1/canary/${ended}/rollback`, {
    method: 'POST', headers: auth, body: JSON.stringify({ reason: 'make room' }),
  });
  assert.equal(rolled.status, 200, await rolled.text());
  const live = await createCanary(proxy, TOKEN, body);

  const page = await open(`${proxy.profilingUrl}/dashboard/`);
  await page.click('#tab-canary');
  await page.waitForSelector('#canary-form:not([hidden])');
  await page.fill('#canary-token', TOKEN);
  await page.click('#canary-form button[type=submit]');
  await page.locator('#canary-widget .pcw [data-status=active]').waitFor();
  const options = () => page.locator('#canary-select option').evaluateAll((os) => os.map((o) => (o as HTMLOptionElement).value));
  assert.deepEqual(await options(), [live]);

  const hold = await holdFirst(page, /\/api\/v1\/canary\?status=/);
  await page.evaluate(() => { document.getElementById('canary-info')!.textContent = 'asked'; });
  await page.check('#canary-all');
  assert.match((await hold.seen).url(), /status=all/);
  await page.uncheck('#canary-all');
  await page.waitForFunction(() => document.getElementById('canary-info')!.textContent !== 'asked', undefined, { timeout: 15_000 });
  await hold.release();
  // The held answer (both canaries) has reached the page; let it run whatever it would.
  await page.waitForTimeout(300);
  assert.deepEqual(await options(), [live]);
  assert.equal(await page.textContent('#canary-info'), '1 canary');
  await page.close();
});
