// A reload rotates credentials and moves listeners (issue 19, item 3): after a reload by the admin
// API or by SIGHUP, the old admin, profiling and control-plane tokens are refused at once and the
// new ones accepted, a canary feed opened with a removed token is closed, a changed listener
// address is bound before the old one closes, an address that cannot be bound refuses the whole
// reload, and restart-only keys are named in a warning.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import WebSocket from 'ws';
import { parseConfig, type ProxyConfigInput } from '../../runtime/config/index.ts';
import { startProxy, watchReload, type RunningProxy } from '../../runtime/app/serve.ts';
import { Logger } from '../../runtime/log/index.ts';
import { until } from '../helpers/until.ts';
import { freePort } from '../helpers/ports.ts';

const ENV = 'PROXY_TEST_ROTATED_CONTROL_TOKEN';
const ALLOW_ADMIN_CHANGE = '?allow_admin_change=true';
let proxy: RunningProxy;
let dir: string;
const lines: string[] = [];

interface Tokens { admin: string; profiling: string; control: string[]; tokenEnv?: string }

function config(t: Tokens, over: { adminListen?: string; profilingPort?: number; controlPort?: number; poolSize?: number } = {}): ProxyConfigInput {
  return {
    listen: '127.0.0.1:0',
    log: { level: 'info' },
    upstream: { pool_size: over.poolSize ?? 100 },
    admin: { listen: over.adminListen ?? '127.0.0.1:0', token: t.admin, reload_on_change: false },
    profiling: { enabled: true, port: over.profilingPort ?? 0, token: t.profiling },
    control_plane: { port: over.controlPort ?? 0, tokens: t.control, token_env: t.tokenEnv ?? 'PROXY_TEST_UNSET_TOKEN_VARIABLE' },
    canary: { data_dir: dir },
    rollback_rules: { check_interval: '1h' },
  };
}

const FIRST: Tokens = { admin: 'admin-token-first-0123456789', profiling: 'profiling-token-first-0123', control: ['control-token-first-012345'] };

before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'proxy-reload-tokens-'));
  const log = new Logger('test', 'info', 'json', { write: (l: string) => { lines.push(l); } });
  proxy = await startProxy(parseConfig(config(FIRST), null), { log });
});

after(async () => {
  await proxy?.close();
});

async function status(url: string, token: string): Promise<number> {
  const res = await fetch(url, { headers: { authorization: `Bearer ${token}` } });
  await res.arrayBuffer();
  return res.status;
}

const adminStatus = (token: string) => status(`${proxy.adminUrl}/api/v1/pipeline`, token);
const profilingStatus = (token: string) => status(`${proxy.profilingUrl}/api/profile/graphs`, token);
const controlStatus = (token: string) => status(`${proxy.controlPlaneUrl}/api/v1/canary`, token);

/** `query`: ?allow_admin_change=true for a reload that moves or closes the admin API. */
async function reloadByApi(body: ProxyConfigInput, token: string, query = '') {
  const res = await fetch(`${proxy.adminUrl}/api/v1/reload${query}`, {
    method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify(body),
  });
  return { status: res.status, body: await res.json() as any };
}

/** Every surface accepts `now` and refuses `old`. */
async function assertRotated(old: Tokens, now: Tokens) {
  assert.equal(await adminStatus(old.admin), 401, 'old admin token refused');
  assert.equal(await adminStatus(now.admin), 200, 'new admin token accepted');
  assert.equal(await profilingStatus(old.profiling), 401, 'old profiling token refused');
  assert.equal(await profilingStatus(now.profiling), 200, 'new profiling token accepted');
  for (const t of old.control) if (!now.control.includes(t)) assert.equal(await controlStatus(t), 401, 'old control-plane token refused');
  for (const t of now.control) assert.equal(await controlStatus(t), 200, 'new control-plane token accepted');
}

function feed(id: string, token: string): WebSocket {
  return new WebSocket(`${proxy.controlPlaneUrl!.replace('http', 'ws')}/api/v1/canary/${id}/feed?interval_ms=200`,
    { headers: { authorization: `Bearer ${token}` } });
}

/** The HTTP status of a refused upgrade, or 101 when the feed opened. */
function upgradeStatus(id: string, token: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const ws = feed(id, token);
    ws.on('open', () => { ws.close(); resolve(101); });
    ws.on('unexpected-response', (_req, res) => { res.resume(); resolve(res.statusCode ?? 0); });
    // A server that upgrades and then closes with 4401 (the older behaviour) counts as refused.
    ws.on('close', (code) => { if (code === 4401) resolve(401); });
    ws.on('error', (err) => { if (!/Unexpected server response/.test(err.message)) reject(err); });
  });
}

const SECOND: Tokens = { admin: 'admin-token-second-012345678', profiling: 'profiling-token-second-012', control: ['control-token-second-01234'] };

test('POST /api/v1/reload rotates the admin, profiling and control-plane tokens at once; a feed opened with a removed token is closed', async () => {
  // A canary and its WebSocket feed, opened with the first control-plane token.
  const started = await fetch(`${proxy.controlPlaneUrl}/api/v1/canary`, {
    method: 'POST', headers: { authorization: `Bearer ${FIRST.control[0]}`, 'content-type': 'application/json' },
    body: JSON.stringify({ pipeline_id: 'default', candidate_config: { steps: [{ type: 'logging', config: {} }] } }),
  });
  assert.equal(started.status, 201);
  const id = ((await started.json()) as { canary_id: string }).canary_id;
  const ws = feed(id, FIRST.control[0]);
  await new Promise((r, j) => { ws.once('open', r); ws.once('error', j); });
  const closed = new Promise<number>((r) => ws.once('close', (code) => r(code)));

  const r = await reloadByApi(config(SECOND), FIRST.admin);
  assert.equal(r.status, 200, JSON.stringify(r.body));
  await assertRotated(FIRST, SECOND);
  assert.equal(await closed, 4401, 'the feed opened with the removed token is closed');
  assert.equal(await upgradeStatus(id, FIRST.control[0]), 401, 'a new feed with the old token is refused');
  assert.equal(await upgradeStatus(id, SECOND.control[0]), 101, 'a new feed with the new token opens');
  const rolledBack = await fetch(`${proxy.controlPlaneUrl}/api/v1/canary/${id}/rollback`,
    { method: 'POST', headers: { authorization: `Bearer ${SECOND.control[0]}` } });
  assert.equal(rolledBack.status, 200);
});

const THIRD: Tokens = { admin: 'admin-token-third-0123456789', profiling: 'profiling-token-third-0123', control: [], tokenEnv: ENV };
const ENV_TOKEN = 'control-token-from-env-0123';

test('SIGHUP rotates them too, the control plane\'s environment-variable token included', async () => {
  const file = join(dir, 'proxy.json');
  writeFileSync(file, JSON.stringify(config(SECOND)));
  const stop = watchReload(proxy, file, new Logger('test', 'info', 'json', { write: (l: string) => { lines.push(l); } }));
  try {
    process.env[ENV] = ENV_TOKEN;
    writeFileSync(file, JSON.stringify(config(THIRD)));
    const before = lines.filter((l) => l.includes('"configuration reloaded"')).length;
    process.emit('SIGHUP', 'SIGHUP');
    await until('the reload', () => lines.filter((l) => l.includes('"configuration reloaded"')).length > before);
    await assertRotated(SECOND, { ...THIRD, control: [ENV_TOKEN] });
    assert.equal(await controlStatus(SECOND.control[0]), 401);
  } finally {
    stop();
    delete process.env[ENV];
  }
  // Back to the second set for the tests below.
  assert.equal((await reloadByApi(config(SECOND), THIRD.admin)).status, 200);
});

async function refusesConnections(url: string): Promise<boolean> {
  try {
    const res = await fetch(url);
    await res.arrayBuffer();
    return false;
  } catch {
    return true;
  }
}

test('a changed admin.listen, profiling.port and control_plane.port rebind on reload: the new addresses answer, the old ones close', async () => {
  const old = { admin: proxy.adminUrl!, profiling: proxy.profilingUrl!, control: proxy.controlPlaneUrl! };
  const [a, p, c] = [await freePort(), await freePort(), await freePort()];
  const r = await reloadByApi(config(SECOND, { adminListen: `127.0.0.1:${a}`, profilingPort: p, controlPort: c }), SECOND.admin, ALLOW_ADMIN_CHANGE);
  assert.equal(r.status, 200, JSON.stringify(r.body));
  assert.equal(proxy.adminUrl, `http://127.0.0.1:${a}`);
  assert.equal(proxy.profilingUrl, `http://127.0.0.1:${p}`);
  assert.equal(proxy.controlPlaneUrl, `http://127.0.0.1:${c}`);
  assert.equal(await adminStatus(SECOND.admin), 200);
  assert.equal(await profilingStatus(SECOND.profiling), 200);
  assert.equal(await controlStatus(SECOND.control[0]), 200);
  for (const url of [old.admin, old.profiling, old.control]) await until(`${url} to close`, () => refusesConnections(url));
  assert.ok(!lines.some((l) => l.includes('take effect only after a restart')), 'no key was left for a restart');
});

test('an address that cannot be bound refuses the whole reload: old listener, old tokens, old configuration', async () => {
  const taken: Server = await new Promise((resolve) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => resolve(s));
  });
  try {
    const port = (taken.address() as { port: number }).port;
    const adminUrl = proxy.adminUrl;
    const running = proxy.config;
    const r = await reloadByApi(config(THIRD, { adminListen: `127.0.0.1:${port}` }), SECOND.admin, ALLOW_ADMIN_CHANGE);
    assert.equal(r.status, 400, JSON.stringify(r.body));
    assert.equal(r.body.error.code, 'PROXY_ERR_CONFIG');
    assert.match(r.body.error.message, /admin\.listen: cannot listen on 127\.0\.0\.1:\d+/);
    assert.equal(proxy.adminUrl, adminUrl);
    assert.equal(proxy.config, running);
    assert.equal(await adminStatus(SECOND.admin), 200, 'the old admin token still works');
    assert.equal(await adminStatus(THIRD.admin), 401, 'the refused reload\'s token is not accepted');
    assert.equal(await profilingStatus(SECOND.profiling), 200);
  } finally {
    await new Promise((r) => taken.close(r));
  }
});

test('a reload that changes restart-only keys applies the rest and names those keys in a warning', async () => {
  const before = lines.length;
  const r = await reloadByApi(config(THIRD, { poolSize: 7, adminListen: new URL(proxy.adminUrl!).host }), SECOND.admin);
  assert.equal(r.status, 200, JSON.stringify(r.body));
  const warning = lines.slice(before).map((l) => JSON.parse(l)).find((l) => l.msg === 'configuration reloaded; these keys take effect only after a restart');
  assert.ok(warning !== undefined, lines.slice(before).join('\n'));
  assert.deepEqual(warning.keys, ['upstream.pool_size']);
  assert.equal(await adminStatus(THIRD.admin), 200, 'the token changed in the same reload applies');
});

test('removing the profiling block is a restart: its endpoint runs on with the token it had, never unauthenticated', async () => {
  const next = config(THIRD, { adminListen: new URL(proxy.adminUrl!).host }) as Record<string, unknown>;
  delete next.profiling;
  const before = lines.length;
  const r = await reloadByApi(next, THIRD.admin);
  assert.equal(r.status, 200, JSON.stringify(r.body));
  const warning = lines.slice(before).map((l) => JSON.parse(l)).find((l) => l.msg === 'configuration reloaded; these keys take effect only after a restart');
  assert.deepEqual(warning?.keys, ['profiling']);
  const res = await fetch(`${proxy.profilingUrl}/api/profile/graphs`);
  assert.equal(res.status, 401, 'no token: still refused');
  await res.arrayBuffer();
  assert.equal(await profilingStatus(THIRD.profiling), 200);
});

test('removing the admin block closes the admin API; adding it back (SIGHUP) opens it', async () => {
  const url = proxy.adminUrl!;
  const next = config(THIRD) as Record<string, unknown>;
  delete next.admin;
  delete next.profiling; // as in the test before: no restart-only change
  const r = await reloadByApi(next, THIRD.admin, ALLOW_ADMIN_CHANGE);
  assert.equal(r.status, 200, JSON.stringify(r.body));
  assert.equal(proxy.adminUrl, null);
  await until('the admin API to close', () => refusesConnections(url));
  const file = join(dir, 'admin-back.json');
  writeFileSync(file, JSON.stringify({ ...next, admin: { listen: '127.0.0.1:0', token: SECOND.admin, reload_on_change: false } }));
  const stop = watchReload(proxy, file, new Logger('test', 'error'));
  try {
    process.emit('SIGHUP', 'SIGHUP');
    await until('the admin API to open', () => proxy.adminUrl !== null);
    assert.equal(await adminStatus(SECOND.admin), 200);
    assert.equal(await adminStatus(THIRD.admin), 401);
  } finally {
    stop();
  }
});
