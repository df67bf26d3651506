// The canary widget when the control plane refuses its feed before the upgrade (a plain 401 or 404,
// which a browser's WebSocket only sees as a failed connection): it asks the API why and says so,
// instead of reconnecting forever.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { open, startWithControlPlane } from './helpers.ts';

test('canary widget: a refused token and an unknown canary are said in place of the figures', { timeout: 60_000 }, async () => {
  const TOKEN = 'dashboard-refused-token-0123456789';
  const proxy = await startWithControlPlane(TOKEN);
  const page = await open(`${proxy.profilingUrl}/dashboard/`);
  const mounted = async (token: string, canaryId: string) => {
    await page.evaluate(([baseUrl, t, id]) => {
      const el = document.createElement('div');
      el.id = 'refusal-probe';
      document.getElementById('refusal-probe')?.remove();
      document.body.append(el);
      (window as unknown as { ProxyCanaryWidget: { mount: (e: Element, o: object) => void } }).ProxyCanaryWidget.mount(el,
        { baseUrl, canaryId: id, token: t, refreshInterval: 5000 });
    }, [proxy.controlPlaneUrl!, token, canaryId]);
    await page.waitForFunction(() => !/Connecting/.test(document.querySelector('#refusal-probe [data-field=message]')?.textContent ?? 'Connecting'),
      undefined, { timeout: 15_000 });
    return page.textContent('#refusal-probe [data-field=message]');
  };
  assert.equal(await mounted('wrong-token-0123456789', 'c-1'), 'The control plane refused the token.');
  assert.equal(await mounted(TOKEN, 'no-such-canary'), 'No canary no-such-canary on this proxy.');
  await page.close();
});
