// Aimed canaries end to end, with the official `mongodb` driver (appName in the client options)
// through a real proxy to the embedded upstream: `match` sends only the chosen clients to the
// candidate (the others get stage 1's traffic, 0 with `match` alone); `sticky` keeps a session's
// or a connection's requests on one version. The candidate is told apart by what it does: its
// filter step denies `{ k: "probe" }`, which the baseline serves.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MongoClient, MongoServerError, type ClientSession } from 'mongodb';
import { parseConfig } from '../../runtime/config/index.ts';
import { startProxy, type RunningProxy } from '../../runtime/app/serve.ts';
import { Logger } from '../../runtime/log/index.ts';
import { scramUserEntry } from '../../runtime/cli/user.ts';

const TOKEN = 'canary-aimed-token-0123456789';
const CANDIDATE = { steps: [{ type: 'filter', config: { rules: [{ name: 'no-probe', action: 'deny', field: { path: 'filter.k', equals: 'probe' } }] } }] };

let proxy: RunningProxy;
const clients: MongoClient[] = [];

async function call(method: string, path: string, body?: unknown): Promise<{ status: number; body: any }> {
  const res = await fetch(`${proxy.controlPlaneUrl}/api/v1/canary${path}`, {
    method, headers: { authorization: `Bearer ${TOKEN}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, body: await res.json() };
}

function client(opts: { appName?: string; maxPoolSize?: number } = {}): MongoClient {
  const c = new MongoClient(proxy.uri, { maxPoolSize: opts.maxPoolSize ?? 4, ...(opts.appName === undefined ? {} : { appName: opts.appName }) });
  clients.push(c);
  return c;
}

/** 'candidate' when the probe was denied by the candidate's filter, 'baseline' when it was served. */
async function probe(c: MongoClient, session?: ClientSession): Promise<'candidate' | 'baseline'> {
  try {
    await c.db('app').collection('items').findOne({ k: 'probe' }, session === undefined ? {} : { session });
    return 'baseline';
  } catch (err) {
    if (err instanceof MongoServerError && err.code === 13 && /no-probe/.test(err.message)) return 'candidate';
    throw err;
  }
}

async function startCanary(extra: Record<string, unknown>): Promise<string> {
  const r = await call('POST', '', {
    pipeline_id: 'default', auto_promote: false, candidate_config: CANDIDATE,
    stages: [{ traffic_pct: 50, min_duration: '1h', min_requests: 0 }, { traffic_pct: 100, min_duration: '0', min_requests: 0 }],
    rollback_rules: { check_interval: '1h' }, ...extra,
  });
  assert.equal(r.status, 201, JSON.stringify(r.body));
  return r.body.canary_id;
}

before(async () => {
  proxy = await startProxy(parseConfig({
    listen: '127.0.0.1:0', log: { level: 'error' },
    control_plane: { port: 0, tokens: [TOKEN] }, canary: { data_dir: mkdtempSync(join(tmpdir(), 'canary-aimed-')) },
  }, null), { log: new Logger('test', 'error') });
});

after(async () => {
  for (const c of clients) await c.close();
  await proxy?.close();
});

test('match on app_name: only the chosen application reaches the candidate; with match alone stage 1 sends no one else', async () => {
  const id = await startCanary({ match: { app_name: 'reports-*' } });
  const st = (await call('GET', `/${id}`)).body;
  assert.equal(st.traffic_pct, 0, 'match without initial_traffic_pct: stage 1 is the chosen clients alone');
  assert.deepEqual(st.match, { app_name: 'reports-*' });
  const reports = client({ appName: 'reports-v2' });
  const orders = client({ appName: 'orders' });
  const seen = { reports: new Set<string>(), orders: new Set<string>() };
  for (let i = 0; i < 40; i++) {
    seen.reports.add(await probe(reports));
    seen.orders.add(await probe(orders));
  }
  assert.deepEqual([...seen.reports], ['candidate'], 'every request of reports-v2 on the candidate');
  assert.deepEqual([...seen.orders], ['baseline'], 'no request of orders on the candidate');
  // Raising the stage's traffic gives the unmatched their share; the matched stay on the candidate.
  assert.equal((await call('PATCH', `/${id}`, { traffic_pct: 100 })).status, 200);
  assert.equal(await probe(orders), 'candidate');
  assert.equal(await probe(reports), 'candidate');
  assert.equal((await call('POST', `/${id}/rollback`, { reason: 'done' })).status, 200);
  assert.equal(await probe(reports), 'baseline', 'after the rollback everyone is on the baseline');
});

test('match on client (CIDR): a block holding the client address sends it to the candidate, another block does not', async () => {
  const here = client({ appName: 'anything' });
  let id = await startCanary({ match: { client: ['10.0.0.0/8', '127.0.0.0/8'] } });
  assert.equal(await probe(here), 'candidate', '127.0.0.1 is in 127.0.0.0/8');
  assert.equal((await call('POST', `/${id}/rollback`, { reason: 'done' })).status, 200);
  id = await startCanary({ match: { client: '10.0.0.0/8', app_name: 'anything' } });
  assert.equal(await probe(here), 'baseline', 'every key given must hold: the address does not');
  assert.equal((await call('POST', `/${id}/rollback`, { reason: 'done' })).status, 200);
});

test('match on user: the client logged in as the chosen user reaches the candidate, another user does not', async () => {
  const p = await startProxy(parseConfig({
    listen: '127.0.0.1:0', log: { level: 'error' },
    auth: { users: [scramUserEntry('ann', 'admin', 'ann-pw', 4096), scramUserEntry('bob', 'admin', 'bob-pw', 4096)] },
    control_plane: { port: 0, tokens: [TOKEN] }, canary: { data_dir: mkdtempSync(join(tmpdir(), 'canary-aimed-user-')) },
  }, null), { log: new Logger('test', 'error') });
  const ann = new MongoClient(`mongodb://ann:ann-pw@127.0.0.1:${p.port}/?authSource=admin`, { maxPoolSize: 2 });
  const bob = new MongoClient(`mongodb://bob:bob-pw@127.0.0.1:${p.port}/?authSource=admin`, { maxPoolSize: 2 });
  try {
    const r = await fetch(`${p.controlPlaneUrl}/api/v1/canary`, {
      method: 'POST', headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ pipeline_id: 'default', auto_promote: false, candidate_config: CANDIDATE, match: { user: 'ann' },
        rollback_rules: { check_interval: '1h' } }),
    });
    assert.equal(r.status, 201, await r.text());
    for (let i = 0; i < 10; i++) {
      assert.equal(await probe(ann), 'candidate');
      assert.equal(await probe(bob), 'baseline');
    }
  } finally {
    await ann.close();
    await bob.close();
    await p.close();
  }
});

test('match is validated: an unknown key, a bad CIDR, a bad sticky are 400 PROXY_ERR_BAD_BODY naming the field', async () => {
  const bad = async (extra: Record<string, unknown>, re: RegExp) => {
    const r = await call('POST', '', { pipeline_id: 'default', candidate_config: CANDIDATE, ...extra });
    assert.equal(r.status, 400, JSON.stringify(r.body));
    assert.equal(r.body.error.code, 'PROXY_ERR_BAD_BODY');
    assert.match(r.body.error.message, re);
  };
  await bad({ match: { app: 'x' } }, /match: unknown field "app"/);
  await bad({ match: { client: '10.0.0.0/33' } }, /match\.client: .*prefix length/);
  await bad({ match: {} }, /at least one of app_name, user, client/);
  await bad({ sticky: 'request' }, /sticky: expected "connection" or "session"/);
});

test('sticky: "session": every request of one session stays on one version; sessions are split between them', async () => {
  const id = await startCanary({ sticky: 'session' });
  const c = client({ maxPoolSize: 4 });
  const arms: string[] = [];
  // All open at once: the driver reuses an ended session's lsid for the next session it starts.
  const sessions = Array.from({ length: 24 }, () => c.startSession());
  for (const [s, session] of sessions.entries()) {
    const seen = new Set<string>();
    // Concurrent requests, so the session's requests travel on several pooled connections.
    for (let round = 0; round < 5; round++) for (const a of await Promise.all([0, 1, 2, 3].map(() => probe(c, session)))) seen.add(a);
    assert.equal(seen.size, 1, `session ${s} saw both versions`);
    arms.push([...seen][0]);
  }
  for (const session of sessions) await session.endSession();
  assert.ok(arms.includes('candidate') && arms.includes('baseline'), `50 %: both versions among 24 sessions (${arms.join(',')})`);
  assert.equal((await call('POST', `/${id}/rollback`, { reason: 'done' })).status, 200);
});

test('without sticky one session flips between versions (per-request split), so the sticky test above measures stickiness', async () => {
  const id = await startCanary({});
  const c = client({ maxPoolSize: 1 });
  const session = c.startSession();
  const seen = new Set<string>();
  for (let i = 0; i < 40; i++) seen.add(await probe(c, session));
  await session.endSession();
  assert.equal(seen.size, 2);
  assert.equal((await call('POST', `/${id}/rollback`, { reason: 'done' })).status, 200);
});

test('sticky: "connection": every request of one connection stays on one version; connections are split', async () => {
  const id = await startCanary({ sticky: 'connection' });
  const arms: string[] = [];
  for (let n = 0; n < 16; n++) {
    const c = client({ maxPoolSize: 1 });
    const seen = new Set<string>();
    // Each operation has its own implicit session: only the connection is shared.
    for (let i = 0; i < 12; i++) seen.add(await probe(c));
    assert.equal(seen.size, 1, `connection ${n} saw both versions`);
    arms.push([...seen][0]);
  }
  assert.ok(arms.includes('candidate') && arms.includes('baseline'), `50 %: both versions among 16 connections (${arms.join(',')})`);
  assert.equal((await call('POST', `/${id}/rollback`, { reason: 'done' })).status, 200);
});
