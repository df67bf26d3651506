// Several pipelines in one proxy (config `pipelines`), end to end with the official `mongodb` driver
// through a real proxy to the embedded upstream: two applications (two appNames) get their own
// pipelines and their own profiles (/api/profile?pipeline_id=), a request-level match (collection,
// command) picks a pipeline per request, a canary on one pipeline leaves the other untouched,
// `proxy canary rollback --all` (the real CLI) rolls back the canary of every pipeline, and a
// reload replaces the pipelines for connections already open; `match.user` follows the login. A pipeline is told apart by what it
// does: its filter step denies one probe value, which the others serve.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MongoClient, MongoServerError } from 'mongodb';
import { parseConfig, ConfigError } from '../../runtime/config/index.ts';
import { startProxy, type RunningProxy } from '../../runtime/app/serve.ts';
import { Logger } from '../../runtime/log/index.ts';
import { scramUserEntry } from '../../runtime/cli/user.ts';

const TOKEN = 'pipelines-e2e-token-0123456789';
const deny = (name: string, value: string) => ({ config: { rules: [{ name, action: 'deny', field: { path: 'filter.k', equals: value } }] } });

function rawConfig(dataDir: string, pipelines: unknown[]): Record<string, unknown> {
  return {
    listen: '127.0.0.1:0', log: { level: 'error' },
    profiling: { enabled: true, port: 0, alert_on_slow_step: false },
    control_plane: { port: 0, tokens: [TOKEN] }, canary: { data_dir: dataDir },
    admin: { listen: '127.0.0.1:0', token: TOKEN },
    steps: { filter: deny('default-filter', 'nobody') },
    pipelines,
  };
}

const PIPELINES = [
  // Per connection: the reporting application; its filter denies "reports-probe".
  { id: 'reports', match: { app_name: 'reports-*' }, request: ['filter'], steps: { filter: deny('reports-only', 'reports-probe') } },
  // Per request: inserts into audit.* collections of any application; its filter denies "audit-probe".
  { id: 'audit', match: { collection: 'audit_*', command: ['insert', 'find'] }, request: ['filter'], steps: { filter: deny('audit-only', 'audit-probe') } },
  { id: 'default', request: [] },
];

let proxy: RunningProxy;
let dataDir = '';
const clients: MongoClient[] = [];

function client(appName: string): MongoClient {
  const c = new MongoClient(proxy.uri, { appName, maxPoolSize: 2 });
  clients.push(c);
  return c;
}

/** 'denied' when a filter refused `{ k: value }` on `collection`, 'served' otherwise. */
async function probe(c: MongoClient, value: string, collection = 'items'): Promise<'denied' | 'served'> {
  try {
    await c.db('app').collection(collection).findOne({ k: value });
    return 'served';
  } catch (err) {
    if (err instanceof MongoServerError && err.code === 13) return 'denied';
    throw err;
  }
}

async function canary(method: string, path: string, body?: unknown): Promise<{ status: number; body: any }> {
  const res = await fetch(`${proxy.controlPlaneUrl}/api/v1/canary${path}`, {
    method, headers: { authorization: `Bearer ${TOKEN}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, body: await res.json() };
}

async function profile(query: string): Promise<{ status: number; body: any }> {
  const res = await fetch(`${proxy.profilingUrl}/api/profile${query}`);
  return { status: res.status, body: await res.json() };
}

before(async () => {
  dataDir = mkdtempSync(join(tmpdir(), 'pipelines-e2e-'));
  proxy = await startProxy(parseConfig(rawConfig(dataDir, PIPELINES), null), { log: new Logger('test', 'error') });
});

after(async () => {
  for (const c of clients) await c.close();
  await proxy?.close();
});

test('two applications get their own pipelines: the reports app runs its filter, the other app the empty default', async () => {
  const reports = client('reports-nightly');
  const orders = client('orders');
  for (let i = 0; i < 5; i++) {
    assert.equal(await probe(reports, 'reports-probe'), 'denied', 'reports-* goes through pipeline "reports"');
    assert.equal(await probe(orders, 'reports-probe'), 'served', 'orders goes through the default pipeline');
  }
  // The reports pipeline's filter is its own (steps laid over the top-level ones): the top-level
  // filter's rule is not in it, and the default pipeline runs no filter at all.
  assert.equal(await probe(reports, 'nobody'), 'served');
  assert.equal(await probe(orders, 'nobody'), 'served');
});

test('a request-level match (collection glob and command) picks a pipeline per request, ahead of the default', async () => {
  const orders = client('orders');
  assert.equal(await probe(orders, 'audit-probe', 'audit_log'), 'denied', 'find on audit_* goes through "audit"');
  assert.equal(await probe(orders, 'audit-probe', 'items'), 'served', 'find on items goes through the default');
  // The reports app reaches "reports" first: its connection-level match comes before "audit".
  const reports = client('reports-nightly');
  assert.equal(await probe(reports, 'audit-probe', 'audit_log'), 'served');
  assert.equal(await probe(reports, 'reports-probe', 'audit_log'), 'denied');
});

test('each pipeline has its own profile: /api/profile?pipeline_id= selects its graph; an unknown id is 404', async () => {
  const r = await profile('?pipeline_id=reports');
  assert.equal(r.status, 200, JSON.stringify(r.body));
  assert.ok(r.body.total_requests >= 8, `reports saw its requests (${r.body.total_requests})`);
  assert.deepEqual(r.body.steps.map((s: { name: string }) => s.name), ['wasm:filter']);
  const d = await profile('?pipeline_id=default');
  assert.equal(d.status, 200);
  assert.ok(d.body.total_requests >= 7, `default saw its requests (${d.body.total_requests})`);
  assert.deepEqual(d.body.steps, [], 'the default pipeline has no steps');
  const a = await profile('?pipeline_id=audit');
  assert.ok(a.body.total_requests >= 1 && a.body.total_requests < r.body.total_requests);
  const none = await profile('?pipeline_id=nope');
  assert.equal(none.status, 404, JSON.stringify(none.body));
  assert.match(none.body.error.message, /no pipeline "nope"/);
  const graphs = await (await fetch(`${proxy.profilingUrl}/api/profile/graphs`)).json() as { pipelines: string[]; default_pipeline_id: string };
  assert.deepEqual(graphs.pipelines, ['reports', 'audit', 'default'], 'configured pipelines, in matching order');
  // The admin API shows every pipeline, its match and its graph's generation.
  const admin = await (await fetch(`${proxy.adminUrl}/api/v1/pipeline`, { headers: { authorization: `Bearer ${TOKEN}` } })).json() as { id: string;
    pipelines: Array<{ id: string; match: unknown; request: string[]; generation: number }> };
  assert.equal(admin.id, 'default');
  assert.deepEqual(admin.pipelines.map((p) => [p.id, p.match, p.request]), [
    ['reports', { app_name: 'reports-*' }, ['wasm:filter']], ['audit', { collection: 'audit_*', command: ['insert', 'find'] }, ['wasm:filter']],
    ['default', {}, []],
  ]);
  assert.ok(admin.pipelines.every((p) => p.generation >= 1));
  // Metrics carry each pipeline's id.
  const metrics = await (await fetch(`${proxy.profilingUrl}/metrics`)).text();
  assert.match(metrics, /proxy_step_latency_us_count\{[^}]*pipeline_id="reports"[^}]*step="wasm:filter"/);
});

test('a canary on one pipeline leaves the other untouched; one canary per pipeline; pipeline_id defaults to "default"', async () => {
  const reports = client('reports-nightly');
  const orders = client('orders');
  const stages = [{ traffic_pct: 100, min_duration: '1h', min_requests: 0 }, { traffic_pct: 100, min_duration: '0', min_requests: 0 }];
  const started = await canary('POST', '', {
    pipeline_id: 'reports', auto_promote: false, stages, rollback_rules: { check_interval: '1h' },
    candidate_config: { steps: [{ type: 'filter', config: { rules: [{ name: 'candidate', action: 'deny',
      field: { path: 'filter.k', equals: 'candidate-probe' } }] } }] },
  });
  assert.equal(started.status, 201, JSON.stringify(started.body));
  assert.equal(started.body.pipeline_id, 'reports');
  for (let i = 0; i < 5; i++) {
    assert.equal(await probe(reports, 'candidate-probe'), 'denied', 'reports at 100 % on its candidate');
    assert.equal(await probe(orders, 'candidate-probe'), 'served', 'the default pipeline has no candidate');
  }
  assert.equal(proxy.pipelines.candidate('default'), null);
  assert.equal(proxy.pipelines.candidate('audit'), null);
  const again = await canary('POST', '', { pipeline_id: 'reports', candidate_config: { steps: [{ type: 'logging' }] } });
  assert.equal(again.status, 409);
  assert.equal(again.body.error.code, 'PROXY_ERR_CANARY_EXISTS');
  // No pipeline_id: the default pipeline; a second canary on another pipeline is allowed.
  const onDefault = await canary('POST', '', { auto_promote: false, stages, rollback_rules: { check_interval: '1h' },
    candidate_config: { steps: [{ type: 'logging' }] } });
  assert.equal(onDefault.status, 201, JSON.stringify(onDefault.body));
  assert.equal(onDefault.body.pipeline_id, 'default');
  const unknown = await canary('POST', '', { pipeline_id: 'nope', candidate_config: { steps: [{ type: 'logging' }] } });
  assert.equal(unknown.status, 400, JSON.stringify(unknown.body));
  assert.equal(unknown.body.error.code, 'PROXY_ERR_CANARY_UNKNOWN_PIPELINE');
  // The candidate's own profile is separate from its baseline's.
  const cand = await profile('?pipeline_id=reports&pipeline=candidate');
  assert.ok(cand.body.total_requests >= 5);
});

test('a reload that removes a pipeline with a canary under way is refused, the pipelines unchanged', async () => {
  await assert.rejects(proxy.reload(parseConfig(rawConfig(dataDir, PIPELINES.filter((p) => p.id !== 'reports')), null)),
    (err: unknown) => err instanceof ConfigError && /removes pipeline "reports", which canary \S+ is active on/.test(err.message));
  // "reports" still routes its application, to its candidate (at 100 %, its filter denies the candidate probe).
  assert.equal(await probe(client('reports-x'), 'candidate-probe'), 'denied');
  assert.ok(proxy.server.routing.ids.includes('reports'));
});

test('proxy canary rollback --all rolls back the canary of every pipeline', async () => {
  const run = await new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
    const p = spawn(process.execPath, [join(process.cwd(), 'bin/proxy.mjs'), 'canary', 'rollback', '--all', '--reason', 'e2e: every pipeline'], {
      env: { ...process.env, PROXY_CONTROL_URL: proxy.controlPlaneUrl!, PROXY_CONTROL_TOKEN: TOKEN }, stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    p.stdout.on('data', (d: Buffer) => { stdout += d; });
    p.stderr.on('data', (d: Buffer) => { stderr += d; });
    p.on('close', (code) => resolve({ code: code ?? 1, stdout, stderr }));
  });
  assert.equal(run.code, 0, run.stderr);
  const listed = await canary('GET', '?status=all');
  const byPipeline = new Map(listed.body.canaries.map((c: { pipeline_id: string; status: string }) => [c.pipeline_id, c.status]));
  assert.equal(byPipeline.get('reports'), 'rolled_back');
  assert.equal(byPipeline.get('default'), 'rolled_back');
  assert.equal(proxy.pipelines.candidate('reports'), null);
  assert.equal(proxy.pipelines.candidate('default'), null);
  assert.equal(await probe(client('reports-nightly'), 'candidate-probe'), 'served');
});

test('a reload replaces the pipelines: an open connection is routed by the new matches at its next request', async () => {
  const reports = client('reports-nightly');
  const orders = client('orders');
  assert.equal(await probe(reports, 'reports-probe'), 'denied');
  assert.equal(await probe(orders, 'orders-probe'), 'served');
  const generation = proxy.pipelines.get('reports').key.generation;
  await proxy.reload(parseConfig(rawConfig(dataDir, [
    { id: 'orders', match: { app_name: 'orders' }, request: ['filter'], steps: { filter: deny('orders-only', 'orders-probe') } },
    PIPELINES[0], PIPELINES[2],
  ]), null));
  assert.equal(await probe(orders, 'orders-probe'), 'denied', 'the open orders connection now goes through "orders"');
  assert.equal(await probe(orders, 'audit-probe', 'audit_log'), 'served', '"audit" is gone');
  assert.equal(await probe(reports, 'reports-probe'), 'denied');
  assert.ok(proxy.pipelines.get('reports').key.generation > generation, 'each pipeline has its own generation, bumped by the reload');
  assert.ok(!proxy.pipelines.ids().includes('audit'), 'the removed pipeline\'s graphs are let go');
  const graphs = await (await fetch(`${proxy.profilingUrl}/api/profile/graphs`)).json() as { pipelines: string[] };
  assert.deepEqual(graphs.pipelines, ['orders', 'reports', 'default']);
  // A removed pipeline takes no canary; an added one does.
  const gone = await canary('POST', '', { pipeline_id: 'audit', candidate_config: { steps: [{ type: 'logging' }] } });
  assert.equal(gone.status, 400, JSON.stringify(gone.body));
  assert.equal(gone.body.error.code, 'PROXY_ERR_CANARY_UNKNOWN_PIPELINE');
  const added = await canary('POST', '', { pipeline_id: 'orders', auto_promote: false, rollback_rules: { check_interval: '1h' },
    candidate_config: { steps: [{ type: 'logging' }] } });
  assert.equal(added.status, 201, JSON.stringify(added.body));
  assert.equal((await canary('POST', `/${added.body.canary_id}/rollback`, { reason: 'done' })).status, 200);
});

test('match.user routes by the logged-in user (auth optional: anonymous connections take the default)', async () => {
  const users = [scramUserEntry('ann', 'admin', 'ann-pw', 4096), scramUserEntry('bob', 'admin', 'bob-pw', 4096)];
  const p = await startProxy(parseConfig({
    listen: '127.0.0.1:0', log: { level: 'error' }, auth: { mode: 'optional', users },
    pipelines: [{ id: 'ann', match: { user: 'ann' }, request: ['filter'], steps: { filter: deny('ann-only', 'ann-probe') } }],
  }, null), { log: new Logger('test', 'error') });
  const port = p.port;
  const as = (user: string | null) => {
    const c = new MongoClient(user === null ? `mongodb://127.0.0.1:${port}/` : `mongodb://${user}:${user}-pw@127.0.0.1:${port}/?authSource=admin`,
      { maxPoolSize: 1 });
    clients.push(c);
    return c;
  };
  try {
    assert.equal(await probe(as('ann'), 'ann-probe'), 'denied');
    assert.equal(await probe(as('bob'), 'ann-probe'), 'served');
    assert.equal(await probe(as(null), 'ann-probe'), 'served');
  } finally {
    await p.close();
  }
});
