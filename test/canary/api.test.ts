// The control plane over HTTP on a real proxy: SPEC §4.2's six endpoints with their fields, the
// history/report/metrics endpoints, the WebSocket feed, and every error case with its status and code.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import WebSocket from 'ws';
import { parseConfig } from '../../runtime/config/index.ts';
import { startProxy, type RunningProxy } from '../../runtime/app/serve.ts';
import { Logger } from '../../runtime/log/index.ts';
import { CANARY_ERROR_CODES } from '../../runtime/canary/index.ts';
import { isHttpErrorCode } from '../../runtime/http/index.ts';

const TOKEN = 'canary-test-token-0123456789';
const ENV_TOKEN = 'canary-env-token-0123456789';
let proxy: RunningProxy;
let base: string;

before(async () => {
  process.env.PROXY_CANARY_TEST_TOKEN = ENV_TOKEN;
  const dir = mkdtempSync(join(tmpdir(), 'canary-api-'));
  proxy = await startProxy(parseConfig({
    listen: '127.0.0.1:0', log: { level: 'error' },
    control_plane: { port: 0, tokens: [TOKEN], token_env: 'PROXY_CANARY_TEST_TOKEN' },
    canary: { data_dir: dir },
    rollback_rules: { check_interval: '1h' },
  }, null), { log: new Logger('test', 'error') });
  base = `${proxy.controlPlaneUrl}/api/v1/canary`;
});

after(async () => {
  await proxy?.close();
});

async function call(method: string, path: string, body?: unknown, opts: { token?: string | null; raw?: string } = {}) {
  const headers: Record<string, string> = {};
  const token = opts.token === undefined ? TOKEN : opts.token;
  if (token !== null) headers.authorization = `Bearer ${token}`;
  let payload: string | undefined;
  if (opts.raw !== undefined) payload = opts.raw;
  else if (body !== undefined) payload = JSON.stringify(body);
  if (payload !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(`${base}${path}`, { method, headers, body: payload });
  const text = await res.text();
  let json: any = null;
  try { json = JSON.parse(text); } catch { /* csv */ }
  return { status: res.status, body: json, text, type: res.headers.get('content-type') ?? '' };
}

function expectError(r: { status: number; body: any }, status: number, code: string) {
  assert.equal(r.status, status, JSON.stringify(r.body));
  assert.equal(r.body.error.code, code);
  assert.equal(typeof r.body.error.message, 'string');
}

const STAGES = [
  { traffic_pct: 10, min_duration: '1h', min_requests: 10 },
  { traffic_pct: 50, min_duration: '0', min_requests: 0, manual_gate: true },
  { traffic_pct: 100, min_duration: '0', min_requests: 0 },
];
const CANDIDATE = { steps: [{ type: 'logging', config: {} }] };

test('every canary error code is an HTTP answer of the catalogue and documented in docs/canary.md', () => {
  const doc = readFileSync('docs/canary.md', 'utf8');
  for (const code of [...CANARY_ERROR_CODES, 'PROXY_ERR_UNAUTHORIZED', 'PROXY_ERR_NOT_FOUND', 'PROXY_ERR_BAD_QUERY']) {
    assert.ok(isHttpErrorCode(code), code);
    assert.ok(doc.includes(`\`${code}\``), `${code} documented`);
  }
});

test('401 without a token, with a wrong one; the configured token and the environment variable\'s both work', async () => {
  expectError(await call('GET', '', undefined, { token: null }), 401, 'PROXY_ERR_UNAUTHORIZED');
  expectError(await call('GET', '', undefined, { token: 'wrong-token-0123456789abcd' }), 401, 'PROXY_ERR_UNAUTHORIZED');
  expectError(await call('POST', '', { pipeline_id: 'default' }, { token: 'x' }), 401, 'PROXY_ERR_UNAUTHORIZED');
  assert.equal((await call('GET', '')).status, 200);
  assert.equal((await call('GET', '', undefined, { token: ENV_TOKEN })).status, 200);
});

test('400s on start: malformed JSON, not an object, invalid stages, rules, traffic, unknown pipeline, candidate refused', async () => {
  expectError(await call('POST', '', undefined, { raw: '{"pipeline_id": ' }), 400, 'PROXY_ERR_BAD_BODY');
  expectError(await call('POST', '', [1, 2]), 400, 'PROXY_ERR_BAD_BODY');
  expectError(await call('POST', '', { pipeline_id: 7, candidate_config: CANDIDATE }), 400, 'PROXY_ERR_BAD_BODY');
  const ok = { pipeline_id: 'default', candidate_config: CANDIDATE, stages: STAGES };
  expectError(await call('POST', '', { ...ok, stages: [] }), 400, 'PROXY_ERR_CANARY_INVALID_STAGES');
  expectError(await call('POST', '', { ...ok, stages: [{ traffic_pct: -1, min_duration: '0', min_requests: 0 }] }), 400, 'PROXY_ERR_CANARY_INVALID_STAGES');
  expectError(await call('POST', '', { ...ok, stages: [{ traffic_pct: 60, min_duration: '0', min_requests: 0 },
    { traffic_pct: 20, min_duration: '0', min_requests: 0 }] }), 400, 'PROXY_ERR_CANARY_INVALID_STAGES');
  expectError(await call('POST', '', { ...ok, stages: [{ traffic_pct: 5, min_duration: '10 minutes', min_requests: 0 }] }), 400,
    'PROXY_ERR_CANARY_INVALID_STAGES');
  expectError(await call('POST', '', { ...ok, stages: 'fast' }), 400, 'PROXY_ERR_CANARY_INVALID_STAGES');
  expectError(await call('POST', '', { ...ok, rollback_rules: { error_rate_delta_pct: -2 } }), 400, 'PROXY_ERR_CANARY_INVALID_RULES');
  expectError(await call('POST', '', { ...ok, auto_promote_rules: { min_requests: 'many' } }), 400, 'PROXY_ERR_CANARY_INVALID_RULES');
  // An evaluation (histograms read, a sample stored) every millisecond would busy the proxy: 100ms at least.
  for (const ci of ['0', '1ms', '99ms']) {
    expectError(await call('POST', '', { ...ok, rollback_rules: { check_interval: ci } }), 400, 'PROXY_ERR_CANARY_INVALID_RULES');
  }
  expectError(await call('POST', '', { ...ok, initial_traffic_pct: 101 }), 400, 'PROXY_ERR_CANARY_INVALID_TRAFFIC');
  expectError(await call('POST', '', { ...ok, pipeline_id: 'elsewhere' }), 400, 'PROXY_ERR_CANARY_UNKNOWN_PIPELINE');
  // Inline channels meet the config file's rules: a webhook needs a secret, email needs notifications.smtp.
  const noSecret = await call('POST', '', { ...ok, notifications: { channels: [{ type: 'webhook', url: 'http://127.0.0.1:1/hook' }] } });
  expectError(noSecret, 400, 'PROXY_ERR_BAD_BODY');
  assert.match(noSecret.body.error.message, /^notifications\.channels\[0\]/);
  const noSmtp = await call('POST', '', { ...ok, notifications: { channels: [{ type: 'email', addresses: ['ops@example.com'] }] } });
  expectError(noSmtp, 400, 'PROXY_ERR_BAD_BODY');
  assert.match(noSmtp.body.error.message, /smtp/);
  // Inline channels replace the configured ones: a misspelt key or a missing list would have
  // started the canary with no channel at all, silently.
  const typo = await call('POST', '', { ...ok, notifications: { chanels: [{ type: 'webhook', url: 'http://127.0.0.1:1/hook', secret: 'a-secret-of-16-chars' }] } });
  expectError(typo, 400, 'PROXY_ERR_BAD_BODY');
  assert.match(typo.body.error.message, /^notifications: unknown field "chanels"/);
  const empty = await call('POST', '', { ...ok, notifications: {} });
  expectError(empty, 400, 'PROXY_ERR_BAD_BODY');
  assert.match(empty.body.error.message, /^notifications\.channels: required/);
  const refused = await call('POST', '', { ...ok, candidate_config: { steps: [{ type: 'filter', config: { rules: [{ action: 'perhaps' }] } }] } });
  expectError(refused, 400, 'PROXY_ERR_CANARY_CANDIDATE_REFUSED');
  assert.match(refused.body.error.message, /filter/);
  assert.equal(proxy.pipelines.candidate('default'), null);
});

test('the six SPEC §4.2 endpoints with their fields; 404, 409 and PATCH errors; history, report, metrics', async () => {
  const created = await call('POST', '', { pipeline_id: 'default', candidate_config: CANDIDATE, stages: STAGES, auto_promote: false,
    description: 'logging on', initial_traffic_pct: 5 });
  assert.equal(created.status, 201, JSON.stringify(created.body));
  const c = created.body;
  for (const k of ['canary_id', 'pipeline_id', 'status', 'current_stage', 'traffic_pct', 'created_at', 'baseline_version', 'candidate_version',
    'metrics_url']) assert.ok(k in c, k);
  assert.equal(c.status, 'active');
  assert.equal(c.traffic_pct, 5);
  assert.equal(c.metrics_url, `/api/v1/canary/${c.canary_id}/metrics`);
  const id = c.canary_id;
  expectError(await call('POST', '', { pipeline_id: 'default', candidate_config: CANDIDATE }), 409, 'PROXY_ERR_CANARY_EXISTS');

  const st = await call('GET', `/${id}`);
  assert.equal(st.status, 200);
  for (const k of ['canary_id', 'pipeline_id', 'status', 'current_stage', 'traffic_pct', 'started_at', 'stage_entered_at', 'elapsed', 'metrics',
    'rollback_status']) assert.ok(k in st.body, k);
  for (const side of ['baseline', 'candidate']) {
    for (const k of ['requests', 'error_rate_pct', 'latency_p50_ms', 'latency_p95_ms',
      'latency_p99_ms']) assert.equal(typeof st.body.metrics[side][k], 'number', `${side}.${k}`);
  }
  for (const k of ['error_rate_sustained_for', 'latency_sustained_for', 'healthy']) assert.ok(k in st.body.rollback_status, k);
  // Before the first evaluation (check_interval 1h here) every condition and rule is listed, the
  // ones that need a window's data as null / no_data.
  assert.equal(st.body.evaluation.result, 'pending');
  assert.deepEqual(st.body.promotion.conditions.map((x: any) => [x.condition, x.value === null, x.met]),
    [['min_duration', false, false], ['min_requests', false, false], ['max_error_rate_delta_pct', true, false], ['max_latency_p95_delta_ms', true, false]]);
  assert.deepEqual(st.body.rules.map((r: any) => [r.rule, r.value, r.state]),
    [['error_rate_delta_pct', null, 'no_data'], ['latency_p95_delta_ms', null, 'no_data']]);

  const list = await call('GET', '?status=active');
  assert.equal(list.body.total, 1);
  assert.deepEqual(Object.keys(list.body.canaries[0]).slice(0, 6), ['canary_id', 'pipeline_id', 'status', 'current_stage', 'traffic_pct', 'started_at']);
  expectError(await call('GET', '?status=sleeping'), 400, 'PROXY_ERR_BAD_QUERY');

  // Promote: the stage's minimums are unmet without force (409); ?force=true skips them.
  expectError(await call('POST', `/${id}/promote`), 409, 'PROXY_ERR_CANARY_INVALID_STATE');
  const pr = await call('POST', `/${id}/promote?force=true`);
  assert.equal(pr.status, 200, JSON.stringify(pr.body));
  for (const k of ['canary_id', 'previous_stage', 'current_stage', 'traffic_pct', 'promoted_at', 'message']) assert.ok(k in pr.body, k);
  assert.deepEqual([pr.body.previous_stage, pr.body.current_stage, pr.body.traffic_pct], [1, 2, 50]);
  expectError(await call('POST', `/${id}/promote`, { force: 'yes' }), 400, 'PROXY_ERR_BAD_BODY');
  expectError(await call('POST', `/${id}/promote?force=maybe`), 400, 'PROXY_ERR_BAD_QUERY');

  const pa = await call('PATCH', `/${id}`, { traffic_pct: 30 });
  assert.equal(pa.status, 200);
  for (const k of ['canary_id', 'traffic_pct', 'updated_at', 'message']) assert.ok(k in pa.body, k);
  assert.equal((await call('GET', `/${id}`)).body.current_stage, 2);
  expectError(await call('PATCH', `/${id}`, { traffic_pct: 250 }), 400, 'PROXY_ERR_CANARY_INVALID_TRAFFIC');
  expectError(await call('PATCH', `/${id}`, {}), 400, 'PROXY_ERR_BAD_BODY');
  expectError(await call('PATCH', `/${id}`, { traffic_pct: 10, stage: 3 }), 400, 'PROXY_ERR_BAD_BODY');
  expectError(await call('PATCH', `/${id}`, { traffic_pct: 10, expected_version: 1 }), 409, 'PROXY_ERR_CANARY_CONFLICT');

  const rb = await call('POST', `/${id}/rollback`, { reason: 'api test' });
  assert.equal(rb.status, 200);
  for (const k of ['canary_id', 'status', 'rolled_back_at', 'reason', 'triggered_by', 'final_metrics']) assert.ok(k in rb.body, k);
  assert.deepEqual(Object.keys(rb.body.final_metrics.baseline), ['requests', 'error_rate_pct', 'latency_p95_ms']);
  assert.equal(rb.body.triggered_by, 'manual');
  assert.equal(proxy.pipelines.candidate('default'), null);
  expectError(await call('POST', `/${id}/rollback`, { reason: 'again' }), 409, 'PROXY_ERR_CANARY_INVALID_STATE');
  expectError(await call('POST', `/${id}/promote?force=true`), 409, 'PROXY_ERR_CANARY_INVALID_STATE');
  expectError(await call('PATCH', `/${id}`, { traffic_pct: 10 }), 409, 'PROXY_ERR_CANARY_INVALID_STATE');
  expectError(await call('POST', `/${id}/rollback`, { reason: 7 }), 400, 'PROXY_ERR_BAD_BODY');

  const hist = await call('GET', `/${id}/history`);
  assert.deepEqual(hist.body.history.map((e: any) => e.event), ['started', 'promoted', 'traffic_changed', 'rolled_back']);
  assert.equal(hist.body.description, 'logging on');
  const rep = await call('GET', `/${id}/report`);
  assert.equal(rep.body.outcome, 'rolled_back');
  assert.equal(rep.body.reason, 'api test');
  assert.equal(rep.body.timeline.length, 2);
  const mj = await call('GET', `/${id}/metrics`);
  assert.equal(mj.status, 200);
  assert.ok(Array.isArray(mj.body.samples));
  const mc = await call('GET', `/${id}/metrics?format=csv`);
  assert.match(mc.type, /text\/csv/);
  assert.equal(mc.text.split('\n')[0], 'at,stage,traffic_pct,pipeline,requests,errors,error_rate_pct,latency_p50_ms,latency_p95_ms,latency_p99_ms');
  expectError(await call('GET', `/${id}/metrics?format=xml`), 400, 'PROXY_ERR_BAD_QUERY');

  for (const [m, p] of [['GET', '/nope'], ['POST', '/nope/promote'], ['POST', '/nope/rollback'], ['PATCH', '/nope'], ['GET', '/nope/history'],
    ['GET', '/nope/report'], ['GET', '/nope/metrics']] as const) {
    expectError(await call(m, p, m === 'PATCH' ? { traffic_pct: 5 } : undefined), 404, 'PROXY_ERR_CANARY_NOT_FOUND');
  }
  expectError(await call('GET', '/x/y/z'), 404, 'PROXY_ERR_NOT_FOUND');
  assert.equal((await call('GET', '?status=all')).body.total, 1);
  assert.equal((await call('GET', '?status=active')).body.total, 0);
});

test('free text and numbers of the bodies are bounded: 400 naming the field (1 MiB was copied into every event and notification)', async () => {
  const ok = { pipeline_id: 'default', candidate_config: CANDIDATE, stages: STAGES };
  const refused = async (body: unknown, code: string, field: RegExp, path = '') => {
    const r = await call('POST', path, body);
    expectError(r, 400, code);
    assert.match(r.body.error.message, field);
  };
  await refused({ ...ok, description: 'd'.repeat(4097) }, 'PROXY_ERR_BAD_BODY', /^description: at most 4096 characters, got 4097/);
  await refused({ ...ok, candidate_config: { steps: [{ type: 'x'.repeat(129) }] } }, 'PROXY_ERR_BAD_BODY', /^candidate_config\.steps\.0\.type: at most 128/);
  await refused({ ...ok, candidate_config: { steps: [{ type: 'logging', plugin_id: 'p'.repeat(4097) }] } }, 'PROXY_ERR_BAD_BODY',
    /^candidate_config\.steps\.0\.plugin_id: at most 4096/);
  // Numbers: finite, integral where a count, and bounded (1e300 is an integer to JavaScript; 1e400 is out of a double's range).
  await refused({ ...ok, auto_promote_rules: { min_requests: 1e300 } }, 'PROXY_ERR_CANARY_INVALID_RULES', /^auto_promote_rules\.min_requests: /);
  await refused({ ...ok, rollback_rules: { min_window_requests: 1e300 } }, 'PROXY_ERR_CANARY_INVALID_RULES', /^rollback_rules\.min_window_requests: /);
  await refused({ ...ok, stages: [{ traffic_pct: 100, min_duration: '0', min_requests: 1e300 }] }, 'PROXY_ERR_CANARY_INVALID_STAGES',
    /^stages\.0\.min_requests: /);
  await refused({ ...ok, rollback_rules: { error_rate_delta_pct: 101 } }, 'PROXY_ERR_CANARY_INVALID_RULES', /^rollback_rules\.error_rate_delta_pct: /);
  await refused({ ...ok, auto_promote_rules: { max_error_rate_delta_pct: 1e300 } }, 'PROXY_ERR_CANARY_INVALID_RULES',
    /^auto_promote_rules\.max_error_rate_delta_pct: /);
  await refused({ ...ok, rollback_rules: { latency_p95_delta_ms: 1e300 } }, 'PROXY_ERR_CANARY_INVALID_RULES', /^rollback_rules\.latency_p95_delta_ms: /);
  await refused({ ...ok, auto_promote_rules: { max_latency_p95_delta_ms: 86_400_001 } }, 'PROXY_ERR_CANARY_INVALID_RULES',
    /^auto_promote_rules\.max_latency_p95_delta_ms: /);
  await refused({ ...ok, rollback_rules: { custom_metrics: [{ metric: 'proxy_plugin_x', threshold_delta: 1e300 }] } }, 'PROXY_ERR_CANARY_INVALID_RULES',
    /^rollback_rules\.custom_metrics\.0\.threshold_delta: /);
  const inf = await call('POST', '', undefined, { raw: JSON.stringify({ ...ok, auto_promote_rules: { max_latency_p95_delta_ms: 7 } })
    .replace('"max_latency_p95_delta_ms":7', '"max_latency_p95_delta_ms":1e400') });
  // Out of a double's range: refused as the body's (every API's) number check, naming the path.
  expectError(inf, 400, 'PROXY_ERR_BAD_BODY');
  assert.match(inf.body.error.message, /^number 1e400 is out of range .*, at auto_promote_rules\.max_latency_p95_delta_ms$/);
  await refused({ ...ok, stages: [{ traffic_pct: 100, min_duration: '8761h', min_requests: 0 }] }, 'PROXY_ERR_CANARY_INVALID_STAGES',
    /^stages\.0\.min_duration: expected a duration of at most 8760h/);
  await refused({ ...ok, rollback_rules: { sustained_duration: `${'9'.repeat(400)}h` } }, 'PROXY_ERR_CANARY_INVALID_RULES', /^rollback_rules\.sustained_duration: /);
  await refused({ ...ok, stages: Array.from({ length: 101 }, () => ({ traffic_pct: 100, min_duration: '0', min_requests: 0 })) },
    'PROXY_ERR_CANARY_INVALID_STAGES', /^stages: at most 100 stages/);
  // Within the bounds, all is taken.
  const c = await call('POST', '', { ...ok, description: 'd'.repeat(4096), auto_promote_rules: { min_requests: 1_000_000_000 } });
  assert.equal(c.status, 201, JSON.stringify(c.body));
  await refused({ reason: 'r'.repeat(1025) }, 'PROXY_ERR_BAD_BODY', /^reason: at most 1024 characters, got 1025/, `/${c.body.canary_id}/rollback`);
  await refused({ expected_version: 1e300 }, 'PROXY_ERR_BAD_BODY', /^expected_version: /, `/${c.body.canary_id}/rollback`);
  const rolled = await call('POST', `/${c.body.canary_id}/rollback`, { reason: 'r'.repeat(1024) });
  assert.equal(rolled.status, 200, JSON.stringify(rolled.body));
  assert.equal(rolled.body.reason, 'r'.repeat(1024));
});

test('a candidate step that is not a built-in and has no plugin_id: the step and the built-ins named, not the plugin directory', async () => {
  for (const candidate of [{ steps: [{ type: 'nosuch' }] }, { steps: [{ type: 'wasm:nosuch', phase: 'response' }] },
    { steps: [], pipeline: { request: ['logging', 'nosuch'] } }]) {
    const r = await call('POST', '', { pipeline_id: 'default', candidate_config: candidate, stages: STAGES });
    expectError(r, 400, 'PROXY_ERR_CANARY_CANDIDATE_REFUSED');
    assert.equal(r.body.error.message, 'candidate refused: unknown step type "nosuch": not a built-in step (logging, filter, cache, metrics, ' +
      'rate_limit, auth, transform, route), and no plugin_id gives its module (a .wasm path or an npm package)');
    assert.ok(!r.text.includes(process.cwd()) && !r.text.includes('plugins/'), r.text);
  }
});

test('promote while auto-promotion runs and the canary is not at a gate: 409', async () => {
  const c = await call('POST', '', { pipeline_id: 'default', candidate_config: CANDIDATE, stages: STAGES, auto_promote: true });
  assert.equal(c.status, 201);
  expectError(await call('POST', `/${c.body.canary_id}/promote?force=true`), 409, 'PROXY_ERR_CANARY_INVALID_STATE');
  assert.equal((await call('POST', `/${c.body.canary_id}/rollback`)).status, 200);
});

test('no client input gives a 5xx', async () => {
  const bodies = ['', 'null', '[]', '"x"', '{"pipeline_id":{}}', '{"pipeline_id":"default","candidate_config":[]}',
    '{"pipeline_id":"default","candidate_config":{"steps":[{"type":"../../etc"}]}}', '{"pipeline_id":"default","candidate_config":{"steps":[]},"stages":[{}]}',
    '{"pipeline_id":"default","candidate_config":{"steps":[]},"notifications":{"channels":[{"type":"pigeon"}]}}', '\u0000'];
  for (const raw of bodies) {
    for (const [m, p] of [['POST', ''], ['POST', '/x/promote'], ['POST', '/x/rollback'], ['PATCH', '/x']] as const) {
      const r = await call(m, p, undefined, { raw });
      assert.ok(r.status >= 400 && r.status < 500, `${m} ${p} ${JSON.stringify(raw)} → ${r.status}`);
      assert.ok(typeof r.body?.error?.code === 'string');
    }
  }
});

test('WebSocket feed: a status message at once and on every interval; an event message on a transition; 401 and 404 before the upgrade', async () => {
  const c = await call('POST', '', { pipeline_id: 'default', candidate_config: CANDIDATE, stages: STAGES });
  const id = c.body.canary_id;
  const url = `${proxy.controlPlaneUrl!.replace('http', 'ws')}/api/v1/canary/${id}/feed?interval_ms=200`;
  const ws = new WebSocket(url, { headers: { authorization: `Bearer ${TOKEN}` } });
  const messages: any[] = [];
  ws.on('message', (d) => messages.push(JSON.parse(String(d))));
  await new Promise((r) => ws.once('open', r));
  await new Promise((r) => setTimeout(r, 500));
  const statuses = messages.filter((m) => m.type === 'status');
  assert.ok(statuses.length >= 2, String(statuses.length));
  assert.equal(statuses[0].canary.canary_id, id);
  assert.ok('metrics' in statuses[0].canary && 'rollback_status' in statuses[0].canary);
  await call('PATCH', `/${id}`, { traffic_pct: 20 });
  await new Promise((r) => setTimeout(r, 100));
  const ev = messages.find((m) => m.type === 'event');
  assert.equal(ev.event.event, 'traffic_changed');
  assert.equal(ev.canary.traffic_pct, 20);
  ws.close();
  // Browsers pass the token as access_token.
  const viaQuery = new WebSocket(`${url}&access_token=${TOKEN}`);
  const first = await new Promise<any>((r) => viaQuery.once('message', (d) => r(JSON.parse(String(d)))));
  assert.equal(first.type, 'status');
  viaQuery.close();
  // Refused before the upgrade: a plain HTTP answer in the error shape, never a 101.
  const refusal = (u: string, headers: Record<string, string> = {}) => new Promise<{ status: number; code: string }>((r, reject) => {
    const s = new WebSocket(u, { headers });
    s.on('open', () => { s.terminate(); reject(new Error('upgraded')); });
    s.on('unexpected-response', (_req, res) => {
      let text = '';
      res.on('data', (d: Buffer) => { text += d; });
      res.on('end', () => r({ status: res.statusCode ?? 0, code: JSON.parse(text).error.code }));
    });
    s.on('error', () => {});
  });
  assert.deepEqual(await refusal(url, { authorization: 'Bearer nope' }), { status: 401, code: 'PROXY_ERR_UNAUTHORIZED' });
  assert.deepEqual(await refusal(url.replace(id, 'nope'), { authorization: `Bearer ${TOKEN}` }), { status: 404, code: 'PROXY_ERR_CANARY_NOT_FOUND' });
  // An interval outside 100..60000 ms, not a plain integer, or given twice: refused, not quietly 5 s.
  for (const q of ['50', '60001', 'abc', '1e3', '200&interval_ms=300', '']) {
    assert.deepEqual(await refusal(url.replace('interval_ms=200', `interval_ms=${q}`), { authorization: `Bearer ${TOKEN}` }),
      { status: 400, code: 'PROXY_ERR_BAD_QUERY' }, q);
  }
  await call('POST', `/${id}/rollback`);
});

test('WebSocket feed: a client message over 4 KiB closes that feed with 1009, not buffered; the control plane goes on', async () => {
  const c = await call('POST', '', { pipeline_id: 'default', candidate_config: CANDIDATE, stages: STAGES });
  const id = c.body.canary_id;
  const url = `${proxy.controlPlaneUrl!.replace('http', 'ws')}/api/v1/canary/${id}/feed`;
  const open = async () => {
    const ws = new WebSocket(url, { headers: { authorization: `Bearer ${TOKEN}` } });
    await new Promise((r) => ws.once('open', r));
    return ws;
  };
  const closed = (ws: WebSocket) => new Promise<number>((r) => ws.once('close', (code) => r(code)));
  // A small message is read and dropped: the feed stays open.
  const small = await open();
  small.send('x'.repeat(4096));
  const next = await new Promise<any>((r) => small.once('message', (d) => r(JSON.parse(String(d)))));
  assert.equal(next.type, 'status');
  assert.equal(small.readyState, WebSocket.OPEN);
  small.close();
  const big = await open();
  try {
    const code = Promise.race([closed(big), new Promise<number>((r) => setTimeout(() => r(-1), 5000))]);
    big.send(Buffer.alloc(64 * 1024));
    assert.equal(await code, 1009, 'closed with 1009 (-1: still open after 5 s)');
  } finally {
    big.terminate();
  }
  assert.equal((await call('GET', `/${id}`)).status, 200);
  await call('POST', `/${id}/rollback`);
});

test('restore-baseline: 200 within the grace period after completion, then 409; 409 for a canary that did not complete', async () => {
  const before = proxy.pipelines.get('default');
  const c = await call('POST', '', { pipeline_id: 'default', candidate_config: CANDIDATE, stages: [{ traffic_pct: 100, min_duration: '0', min_requests: 0 }] });
  assert.equal(c.status, 201);
  assert.equal(c.body.status, 'completed');
  assert.notEqual(proxy.pipelines.get('default'), before);
  const r = await call('POST', `/${c.body.canary_id}/restore-baseline`);
  assert.equal(r.status, 200, JSON.stringify(r.body));
  for (const k of ['canary_id', 'restored_at', 'baseline_version', 'message']) assert.ok(k in r.body, k);
  assert.equal(r.body.baseline_version, c.body.baseline_version);
  assert.equal(proxy.pipelines.get('default'), before);
  expectError(await call('POST', `/${c.body.canary_id}/restore-baseline`), 409, 'PROXY_ERR_CANARY_INVALID_STATE');
  const d = await call('POST', '', { pipeline_id: 'default', candidate_config: CANDIDATE, stages: STAGES });
  expectError(await call('POST', `/${d.body.canary_id}/restore-baseline`), 409, 'PROXY_ERR_CANARY_INVALID_STATE');
  expectError(await call('POST', '/nope/restore-baseline'), 404, 'PROXY_ERR_CANARY_NOT_FOUND');
  await call('POST', `/${d.body.canary_id}/rollback`);
});
