// A shadow canary across `proxy serve --workers 2` (a real child process, the embedded devdb
// upstream, raw wire clients spread over both workers): transform v2 redacts one more field than
// v1. Both workers shadow their requests (GET /api/v1/workers shows each one's counts, and a
// stage's own shadow_pct reaching both); the primary merges their figures, so the diffs endpoint, the status and /metrics count exactly the
// divergent requests sent across both workers, the merged ring keeps max_diffs of them, and the
// clients get v1's replies. A divergence_rate rule decided on the merged figures rolls the canary
// back once, and canary.diverged is delivered (a real webhook receiver) once.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '../helpers/ports.ts';
import { until } from '../helpers/until.ts';
import { spawnServe, type Served } from '../helpers/serve.ts';
import { RawClient, opMsg } from '../helpers/wire.ts';
import { callJson } from '../helpers/http.ts';
import { httpReceiver, type HttpReceiver } from '../canary/notify/helpers.ts';
import type { WorkersView } from '../../runtime/http/surface.ts';

const TOKEN = 'cluster-shadow-token-0123';
const SECRET = 'cluster-shadow-webhook-secret-0123';
const REDACT_SSN = { op: 'redact', path: 'ssn' };
const REDACT_EMAIL = { op: 'redact', path: 'email' };
const V2 = { steps: [{ type: 'transform', config: { response: [REDACT_SSN, REDACT_EMAIL] } }] };
/** A shadow stage that never promotes by itself, then full exposure. */
const HOLD = [{ traffic_pct: 0, min_duration: '1h', min_requests: 1_000_000 }, { traffic_pct: 100, min_duration: '0', min_requests: 0 }];
/** Every third document holds an email (the field v2 redacts and v1 does not). */
const DOCS = Array.from({ length: 12 }, (_, i) => i % 3 === 0 ? { _id: i, name: `p${i}`, ssn: `ssn-${i}`, email: `p${i}@x.test` }
  : { _id: i, name: `p${i}`, ssn: `ssn-${i}` });
const WITH_EMAIL = DOCS.filter((d) => 'email' in d).length;

let served: Served;
let port: number;
let adminUrl: string;
let cpUrl: string;
let hook: HttpReceiver;
const clients: RawClient[] = [];

const call = (base: string, method: string, path: string, body?: unknown) => callJson(base, TOKEN, method, path, body);

const canary = (method: string, path: string, body?: unknown) => call(cpUrl, method, `/api/v1/canary${path}`, body);
const workers = async () => (await call(adminUrl, 'GET', '/api/v1/workers')).body as WorkersView;

/** Every client finds every document once: the documents each got (JSON), in order. */
async function findEverything(): Promise<string[]> {
  const out: string[] = [];
  for (const c of clients) {
    for (const d of DOCS) {
      const r = await c.roundTrip(opMsg({ find: 'people', filter: { _id: d._id }, $db: 'app' }), 15_000);
      assert.equal(r.body?.ok, 1, JSON.stringify(r.body));
      out.push(JSON.stringify(r.body!.cursor.firstBatch));
    }
  }
  return out;
}

/** Each worker's shadow counts for the default pipeline (by worker index). */
async function perWorker(): Promise<Array<{ sampled: number; diverged: number }>> {
  return (await workers()).workers.map((w) => w.canary?.default?.shadow ?? { sampled: 0, diverged: 0 });
}

/** One worker's reply divergences since it started (its /metrics?worker=, which outlives the canary). */
async function workerDivergences(worker: number): Promise<number> {
  const text = await (await fetch(`${adminUrl}/metrics?worker=${worker}`, { headers: { authorization: `Bearer ${TOKEN}` } })).text();
  const m = /^proxy_canary_divergence_total\{kind="reply"\} (\d+)$/m.exec(text);
  assert.ok(m !== null, text);
  return Number(m[1]);
}

before(async () => {
  const dir = mkdtempSync(join(tmpdir(), 'proxy-cluster-shadow-'));
  hook = await httpReceiver();
  port = await freePort();
  const [adminPort, cpPort] = [await freePort(), await freePort()];
  const file = join(dir, 'proxy.json');
  writeFileSync(file, JSON.stringify({
    listen: `127.0.0.1:${port}`, log: { level: 'warn' },
    pipeline: { request: [], response: ['transform'] }, steps: { transform: { config: { response: [REDACT_SSN] } } },
    admin: { listen: `127.0.0.1:${adminPort}`, token: TOKEN, reload_on_change: false },
    control_plane: { port: cpPort, tokens: [TOKEN] }, canary: { data_dir: join(dir, 'canary') },
    notifications: { webhook_secret: SECRET, initial_backoff_ms: 50, max_backoff_ms: 200, channels: [{ type: 'webhook', url: hook.url }] },
  }));
  served = await spawnServe(['--config', file, '--workers', '2']);
  adminUrl = `http://127.0.0.1:${adminPort}`;
  cpUrl = `http://127.0.0.1:${cpPort}`;
  // Clients until both workers hold some (round-robin: a few suffice).
  for (;;) {
    const w = await workers();
    if (w.workers.length === 2 && w.workers.every((x) => x.connections_active >= 2)) break;
    clients.push(await RawClient.connect(port));
    assert.ok(clients.length < 40, `connections spread over both workers: ${JSON.stringify(w)}`);
  }
  const ins = await clients[0].roundTrip(opMsg({ insert: 'people', documents: DOCS, $db: 'app' }), 15_000);
  assert.equal(ins.body?.ok, 1, JSON.stringify(ins.body));
});

after(async () => {
  for (const c of clients) c.destroy();
  await served?.stop();
  await hook?.close();
});

test('both workers shadow; the merged diffs, status and metrics count the divergent requests of both; clients get v1\'s replies', async () => {
  const v1 = await findEverything();
  const created = await canary('POST', '', { pipeline_id: 'default', mode: 'shadow', shadow_pct: 100, auto_promote: false,
    rollback_rules: { check_interval: '1h' }, shadow: { max_diffs: 5 }, candidate_config: V2,
    stages: [HOLD[0], { traffic_pct: 50, shadow_pct: 40, min_duration: '1h', min_requests: 1_000_000 }, HOLD[1]] });
  assert.equal(created.status, 201, JSON.stringify(created.body));
  const id = created.body.canary_id;
  try {
    assert.deepEqual(await findEverything(), v1, 'every client gets v1\'s documents');
    const sent = clients.length * DOCS.length;
    const divergent = clients.length * WITH_EMAIL;
    const mine = await perWorker();
    assert.equal(mine.length, 2);
    for (const [i, w] of mine.entries()) assert.ok(w.sampled > 0 && w.diverged > 0, `worker ${i} shadows its requests: ${JSON.stringify(mine)}`);
    assert.equal(mine[0].sampled + mine[1].sampled, sent, JSON.stringify(mine));
    const diffs = (await canary('GET', `/${id}/diffs`)).body;
    assert.equal(diffs.sampled, sent, JSON.stringify(diffs));
    assert.equal(diffs.diverged, divergent);
    assert.deepEqual(diffs.by_kind, { outcome: 0, request: 0, reply: divergent });
    assert.equal(diffs.diffs.length, 5, 'the merged ring keeps max_diffs records');
    assert.ok(diffs.memory_bytes > 0, 'the workers\' rings are counted');
    for (const d of diffs.diffs) {
      assert.equal(d.kind, 'reply');
      assert.equal(`${d.op} ${d.db}.${d.collection}`, 'find app.people');
      assert.deepEqual(d.paths, [{ path: 'cursor.firstBatch.0.email', change: 'changed', baseline_type: 'string', candidate_type: 'string' }]);
    }
    assert.doesNotMatch(JSON.stringify(diffs), /@x\.test/, 'values hidden');
    const status = (await canary('GET', `/${id}`)).body;
    assert.equal(status.shadow.sampled, sent);
    assert.equal(status.shadow.diverged, divergent);
    assert.equal(status.shadow.latest_diffs.length, 5);
    const metrics = await (await fetch(`${adminUrl}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } })).text();
    assert.match(metrics, new RegExp(`^proxy_canary_divergence_total\\{kind="reply"\\} ${divergent}$`, 'm'));
    assert.match(metrics, new RegExp(`^proxy_canary_shadow_requests_total ${sent}$`, 'm'));
    // A stage's own shadow_pct reaches every worker with its split.
    const promoted = await canary('POST', `/${id}/promote`, { force: true });
    assert.equal(promoted.status, 200, JSON.stringify(promoted.body));
    for (const w of (await workers()).workers) {
      assert.deepEqual({ traffic: w.canary?.default?.traffic_pct, shadow: w.canary?.default?.shadow?.shadow_pct }, { traffic: 50, shadow: 40 },
        `worker ${w.worker} at stage 2`);
    }
  } finally {
    await canary('POST', `/${id}/rollback`, {});
  }
});

test('a divergence_rate rule on the merged figures rolls the shadow canary back once; canary.diverged is sent once', { timeout: 120_000 }, async () => {
  const created = await canary('POST', '', { pipeline_id: 'default', mode: 'shadow', shadow_pct: 100, auto_promote: true, candidate_config: V2,
    stages: HOLD, rollback_rules: { check_interval: '250ms', sustained_duration: '500ms', min_window_requests: 5, divergence_rate: 0.2 } });
  assert.equal(created.status, 201, JSON.stringify(created.body));
  const id = created.body.canary_id;
  const before = [await workerDivergences(0), await workerDivergences(1)];
  let stop = false;
  // Every client: the documents with an email (divergent) and those without, in turn (a rate of 1/3).
  const load = Promise.all(clients.map(async (c, k) => {
    for (let i = k; !stop; i++) await c.roundTrip(opMsg({ find: 'people', filter: { _id: i % DOCS.length }, $db: 'app' }), 15_000);
  }));
  try {
    await until('rollback', async () => (await canary('GET', `/${id}`)).body.status === 'rolled_back', 60_000);
  } finally {
    stop = true;
    await load;
  }
  const after = [await workerDivergences(0), await workerDivergences(1)];
  for (const i of [0, 1]) assert.ok(after[i] > before[i], `worker ${i} saw divergences: ${JSON.stringify({ before, after })}`);
  const rep = (await canary('GET', `/${id}/report`)).body;
  assert.equal(rep.triggered_by, 'automatic');
  assert.equal(rep.triggering_rules[0].rule, 'divergence_rate', JSON.stringify(rep));
  const history = (await canary('GET', `/${id}/history`)).body;
  assert.equal(history.history.filter((e: { event: string }) => e.event === 'rolled_back').length, 1, 'one rollback');
  const events = () => hook.received.map((r) => JSON.parse(r.body) as { type: string; canary: { canary_id: string }; divergence?: any })
    .filter((e) => e.canary.canary_id === id);
  await until('canary.rolled_back delivered', () => events().some((e) => e.type === 'canary.rolled_back'), 20_000);
  const diverged = events().filter((e) => e.type === 'canary.diverged');
  assert.equal(diverged.length, 1, 'one canary.diverged within diverged_event_interval (1m)');
  assert.ok(diverged[0].divergence.diverged > 0 && diverged[0].divergence.by_kind.reply === diverged[0].divergence.diverged,
    JSON.stringify(diverged[0]));
});
