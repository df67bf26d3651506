// POST /api/v1/reload does not lock the operator out: a configuration that would close the admin API
// (no admin block: the body `{}` is all defaults) or move it to another address is refused with 422
// PROXY_ERR_RELOAD_CHANGES_ADMIN and nothing of it applies, unless the request says
// ?allow_admin_change=true. Re-reading a file with the same admin section, and SIGHUP, are not refused.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseConfig, type ProxyConfigInput } from '../../runtime/config/index.ts';
import { startProxy, watchReload, type RunningProxy } from '../../runtime/app/serve.ts';
import { Logger } from '../../runtime/log/index.ts';
import { freePort } from '../helpers/ports.ts';
import { until } from '../helpers/until.ts';

const TOKEN = 'reload-admin-change-token-0123';
const running: RunningProxy[] = [];

after(async () => {
  for (const p of running) await p.close().catch(() => {});
});

function config(over: Record<string, unknown> = {}): ProxyConfigInput {
  return { listen: '127.0.0.1:0', log: { level: 'error' }, admin: { listen: '127.0.0.1:0', token: TOKEN, reload_on_change: false }, ...over };
}

/** A proxy started from a file, as `proxy serve --config` is. */
async function start(): Promise<{ proxy: RunningProxy; file: string }> {
  const file = join(mkdtempSync(join(tmpdir(), 'proxy-reload-admin-')), 'proxy.json');
  writeFileSync(file, JSON.stringify(config()));
  const proxy = await startProxy(parseConfig(config(), file), { log: new Logger('test', 'error'), configFile: file });
  running.push(proxy);
  return { proxy, file };
}

async function reload(proxy: RunningProxy, body: object | undefined, query = ''): Promise<{ status: number; body: any }> {
  const res = await fetch(`${proxy.adminUrl}/api/v1/reload${query}`, {
    method: 'POST', headers: { authorization: `Bearer ${TOKEN}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, body: await res.json() };
}

async function adminAnswers(url: string): Promise<boolean> {
  const res = await fetch(`${url}/api/v1/pipeline`, { headers: { authorization: `Bearer ${TOKEN}` } });
  await res.arrayBuffer();
  return res.status === 200;
}

function refusesConnections(url: string): Promise<boolean> {
  const u = new URL(url);
  return new Promise((resolve) => {
    const s = connect(Number(u.port), u.hostname);
    s.once('connect', () => { s.destroy(); resolve(false); });
    s.once('error', () => resolve(true));
  });
}

test('the body {} (all defaults, no admin block) is refused with 422: the admin API and the configuration stay', async () => {
  const { proxy } = await start();
  const url = proxy.adminUrl!;
  const before = proxy.config;
  const r = await reload(proxy, {});
  assert.equal(r.status, 422, JSON.stringify(r.body));
  assert.equal(r.body.error.code, 'PROXY_ERR_RELOAD_CHANGES_ADMIN');
  assert.match(r.body.error.message, /^this reload would close the admin API on 127\.0\.0\.1:0 \(the configuration has no admin\.listen\); nothing was applied/);
  assert.match(r.body.error.message, /\?allow_admin_change=true/);
  assert.deepEqual(r.body.error.details, { admin_listen: '127.0.0.1:0', requested: null });
  assert.equal(proxy.config, before, 'the running configuration stays');
  assert.equal(proxy.adminUrl, url);
  assert.ok(await adminAnswers(url), 'the admin API still answers');
});

test('a body that moves admin.listen is refused with 422; the new port is not opened', async () => {
  const { proxy } = await start();
  const port = await freePort();
  const r = await reload(proxy, config({ admin: { listen: `127.0.0.1:${port}`, token: TOKEN, reload_on_change: false } }));
  assert.equal(r.status, 422, JSON.stringify(r.body));
  assert.equal(r.body.error.code, 'PROXY_ERR_RELOAD_CHANGES_ADMIN');
  assert.match(r.body.error.message, new RegExp(`^this reload would move the admin API from 127\\.0\\.0\\.1:0 to 127\\.0\\.0\\.1:${port};`));
  assert.ok(await refusesConnections(`http://127.0.0.1:${port}`), 'nothing listens on the requested port');
  assert.ok(await adminAnswers(proxy.adminUrl!));
});

test('?allow_admin_change=true applies it: a move, then closing the admin API', async () => {
  const { proxy } = await start();
  const old = proxy.adminUrl!;
  const port = await freePort();
  const moved = await reload(proxy, config({ admin: { listen: `127.0.0.1:${port}`, token: TOKEN, reload_on_change: false } }), '?allow_admin_change=true');
  assert.equal(moved.status, 200, JSON.stringify(moved.body));
  assert.equal(proxy.adminUrl, `http://127.0.0.1:${port}`);
  await until('the old admin address to close', () => refusesConnections(old));
  const closed = await reload(proxy, {}, '?allow_admin_change=1');
  assert.equal(closed.status, 200, JSON.stringify(closed.body));
  assert.equal(proxy.adminUrl, null);
  await until('the admin API to close', () => refusesConnections(`http://127.0.0.1:${port}`));
});

test('allow_admin_change takes true, false, 1 or 0 once; anything else is 400 and nothing applies', async () => {
  const { proxy } = await start();
  for (const q of ['?allow_admin_change=maybe', '?allow_admin_change=', '?allow_admin_change=true&allow_admin_change=true']) {
    const r = await reload(proxy, {}, q);
    assert.equal(r.status, 400, q);
    assert.equal(r.body.error.code, 'PROXY_ERR_BAD_QUERY', q);
  }
  const refused = await reload(proxy, {}, '?allow_admin_change=false');
  assert.equal(refused.status, 422);
  assert.ok(await adminAnswers(proxy.adminUrl!));
});

test('a reload that keeps the admin section applies as before: a body with it, and re-reading the file (no body)', async () => {
  const { proxy, file } = await start();
  const body = await reload(proxy, config({ pipeline: { request: ['logging'] } }));
  assert.equal(body.status, 200, JSON.stringify(body.body));
  assert.deepEqual(body.body.pipeline.request, ['wasm:logging']);
  writeFileSync(file, JSON.stringify(config({ pipeline: { request: ['metrics'] } })));
  const reread = await reload(proxy, undefined);
  assert.equal(reread.status, 200, JSON.stringify(reread.body));
  assert.deepEqual(reread.body.pipeline.request, ['wasm:metrics']);
});

test('re-reading a file that removes the admin block through the API is refused; SIGHUP applies it', async () => {
  const { proxy, file } = await start();
  const url = proxy.adminUrl!;
  const next = config() as Record<string, unknown>;
  delete next.admin;
  writeFileSync(file, JSON.stringify(next));
  const r = await reload(proxy, undefined);
  assert.equal(r.status, 422, JSON.stringify(r.body));
  assert.equal(r.body.error.code, 'PROXY_ERR_RELOAD_CHANGES_ADMIN');
  assert.ok(await adminAnswers(url));
  const stop = watchReload(proxy, file, new Logger('test', 'error'));
  try {
    process.emit('SIGHUP', 'SIGHUP');
    await until('SIGHUP to close the admin API', () => proxy.adminUrl === null);
  } finally {
    stop();
  }
});
