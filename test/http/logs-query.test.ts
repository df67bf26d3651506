// GET /api/v1/logs takes its query values as written or refuses them (400 PROXY_ERR_BAD_QUERY):
// `tail` and `worker` are plain decimal numbers (no exponent, hex prefix, point, sign or blank, all
// of which Number() would take), `follow` is true/false (or 1/0), and no parameter is given twice.
// A `tail` above the ring's size is every line the ring holds.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { parseConfig } from '../../runtime/config/index.ts';
import { startProxy, type RunningProxy } from '../../runtime/app/serve.ts';
import { Logger, LogRing } from '../../runtime/log/index.ts';
import { ringOnlyAdminApp } from '../helpers/admin-surface.ts';

const TOKEN = 'logs-query-token-0123456789';
const RING = 50;
let proxy: RunningProxy;
let log: Logger;

before(async () => {
  const config = parseConfig({ listen: '127.0.0.1:0', log: { level: 'info', ring_lines: RING }, admin: { listen: '127.0.0.1:0', token: TOKEN } }, null);
  log = new Logger('proxy', 'info', 'json', { write() {} }, new LogRing(config.log.ring_lines));
  proxy = await startProxy(config, { log });
  for (let i = 0; i < 2 * RING; i++) log.info('numbered line', { i });
});

after(async () => {
  await proxy?.close();
});

async function get(query: string): Promise<{ status: number; text: string }> {
  const res = await fetch(`${proxy.adminUrl}/api/v1/logs?${query}`, { headers: { authorization: `Bearer ${TOKEN}` } });
  return { status: res.status, text: await res.text() };
}

function badQuery(r: { status: number; text: string }, what: RegExp, query: string): void {
  assert.equal(r.status, 400, query);
  const body = JSON.parse(r.text) as { error: { code: string; message: string } };
  assert.equal(body.error.code, 'PROXY_ERR_BAD_QUERY', query);
  assert.match(body.error.message, what, query);
}

test('tail: digits only; 1e3, 0x10, " 5", 5.0, +5, -1, "" and a repeated tail are refused', async () => {
  for (const tail of ['1e3', '0x10', '%205', '5%20', '+5', '5.0', '-1', '', 'five', 'Infinity']) {
    badQuery(await get(`tail=${tail}&follow=false`), /^tail must be a number of lines, digits only/, `tail=${tail}`);
  }
  badQuery(await get('tail=1&tail=2'), /^tail is given more than once$/, 'tail=1&tail=2');
  const five = await get('tail=5&filter=numbered');
  assert.equal(five.status, 200);
  assert.deepEqual(five.text.trim().split('\n').map((l) => (JSON.parse(l) as { i: number }).i), [95, 96, 97, 98, 99]);
  assert.equal((await get('tail=0')).text, '');
});

test('tail above the ring\'s size (even past what a double holds) is every line the ring holds', async () => {
  for (const tail of ['1000', '9'.repeat(400)]) {
    const r = await get(`tail=${tail}`);
    assert.equal(r.status, 200, tail.slice(0, 10));
    assert.equal(r.text.trim().split('\n').length, RING, tail.slice(0, 10));
  }
});

test('follow: true, false, 1 or 0; anything else is refused, not read as false', async () => {
  for (const follow of ['maybe', 'yes', 'TRUE', 'False', '', '2', ' true']) {
    badQuery(await get(`tail=1&follow=${encodeURIComponent(follow)}`), /^follow must be true or false/, `follow=${follow}`);
  }
  badQuery(await get('follow=false&follow=true'), /^follow is given more than once$/, 'follow twice');
  for (const follow of ['false', '0']) {
    const r = await get(`tail=1&follow=${follow}`);
    assert.equal(r.status, 200, follow);
    assert.equal(r.text.trim().split('\n').length, 1, follow);
  }
  for (const follow of ['true', '1']) {
    const stop = new AbortController();
    const res = await fetch(`${proxy.adminUrl}/api/v1/logs?tail=0&filter=followed&follow=${follow}`, { headers: { authorization: `Bearer ${TOKEN}` },
      signal: stop.signal });
    assert.equal(res.status, 200, follow);
    const reader = res.body!.getReader();
    log.info('followed line', { follow });
    let text = '';
    while (!text.includes('followed line')) text += new TextDecoder().decode((await reader.read()).value);
    assert.equal(JSON.parse(text).follow, follow);
    stop.abort();
    await reader.cancel().catch(() => {});
  }
});

test('worker: digits only, a worker\'s index; a repeated level or filter is refused too', async () => {
  const ring = new LogRing(10);
  const app = ringOnlyAdminApp(ring, TOKEN, 2);
  try {
    const inject = async (query: string) => {
      const r = await app.inject({ url: `/api/v1/logs?${query}`, headers: { authorization: `Bearer ${TOKEN}` } });
      return { status: r.statusCode, text: r.body };
    };
    for (const w of ['0x1', '1e0', '1.0', '%201', '+1', '-0', '', '2']) {
      badQuery(await inject(`worker=${w}`), /^worker must be the index of a worker, 0 to 1/, `worker=${w}`);
    }
    for (const w of ['0', '1']) assert.equal((await inject(`worker=${w}`)).status, 200, w);
    badQuery(await inject('level=info&level=warn'), /^level is given more than once$/, 'level twice');
    badQuery(await inject('filter=a&filter=b'), /^filter is given more than once$/, 'filter twice');
  } finally {
    await app.close();
  }
});

test('/metrics on the admin port: ?worker= is checked as on /api/v1/logs, not ignored (one process: no worker to choose)', async () => {
  const metrics = async (query: string) => {
    const res = await fetch(`${proxy.adminUrl}/metrics${query}`, { headers: { authorization: `Bearer ${TOKEN}` } });
    return { status: res.status, text: await res.text() };
  };
  const all = await metrics('');
  assert.equal(all.status, 200);
  assert.match(all.text, /^proxy_wire_requests_total /m);
  for (const w of ['0', 'abc', '-1', '0&worker=1']) {
    const r = await metrics(`?worker=${w}`);
    badQuery(r, w.includes('&') ? /^worker is given more than once$/ : /^worker: this proxy runs in one process/, `worker=${w}`);
  }
});
