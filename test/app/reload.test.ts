// Reloading the pipeline under load: through the admin API and on config-file change. Requests
// keep succeeding during every swap; a configuration a plugin refuses is rejected and the old graph
// keeps running; no client connection is dropped.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MongoClient } from 'mongodb';
import { parseConfig } from '../../runtime/config/index.ts';
import { startProxy, watchReload, type RunningProxy } from '../../runtime/app/serve.ts';
import { Logger } from '../../runtime/log/index.ts';

const TOKEN = 'test-token-0123456789';
const fixture = (n: string) => `build/test-plugins/${n}.wasm`;

function configWith(request: string[], refuse = false) {
  return {
    listen: '127.0.0.1:0',
    log: { level: 'error' as const },
    admin: { listen: '127.0.0.1:0', token: TOKEN, reload_on_change: true },
    pipeline: { request, response: request.includes('wasm:counter') ? ['wasm:counter'] : [] },
    steps: {
      counter: { module: fixture('counter') },
      props: { module: fixture('props'), config: refuse ? { refuse: true } : {} },
    },
  };
}

let proxy: RunningProxy;
let dir: string;

before(async () => {
  execFileSync(process.execPath, ['scripts/build-plugins.mjs', '--fixtures'], { stdio: 'inherit' });
  dir = mkdtempSync(join(tmpdir(), 'proxy-reload-'));
  proxy = await startProxy(parseConfig(configWith(['wasm:counter']), null), { log: new Logger('test', 'error') });
});

after(async () => {
  await proxy?.close();
});

async function post(body?: object) {
  const res = await fetch(`${proxy.adminUrl}/api/v1/reload`, {
    method: 'POST',
    headers: { authorization: `Bearer ${TOKEN}`, ...(body ? { 'content-type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  return { status: res.status, body: await res.json() as Record<string, any> };
}

test('admin API swaps the pipeline under load without a failed request', async () => {
  const clients = await Promise.all(Array.from({ length: 8 }, () => new MongoClient(proxy.uri, { maxPoolSize: 2 }).connect()));
  let ok = 0;
  const failures: unknown[] = [];
  let running = true;
  const workers = clients.map(async (c, i) => {
    const col = c.db('reload').collection(`c${i}`);
    while (running) {
      try {
        await col.insertOne({ i, at: Date.now() });
        await col.findOne({ i });
        ok++;
      } catch (err) {
        failures.push(err);
      }
    }
  });
  const graphs = [['wasm:counter', 'wasm:props'], ['wasm:props'], [], ['wasm:counter']];
  for (let round = 0; round < 8; round++) {
    const request = graphs[round % graphs.length];
    const r = await post(configWith(request));
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.deepEqual(r.body.pipeline.request, request);
    await new Promise((res) => setTimeout(res, 50));
  }
  running = false;
  await Promise.all(workers);
  await Promise.all(clients.map((c) => c.close()));
  assert.deepEqual(failures, []);
  assert.ok(ok > 50, `expected steady traffic during reloads, got ${ok} round trips`);
});

test('a configuration a plugin refuses is rejected with 422 and the old graph keeps running', async () => {
  assert.equal((await post(configWith(['wasm:props']))).status, 200);
  const r = await post(configWith(['wasm:counter', 'wasm:props'], true));
  assert.equal(r.status, 422);
  assert.equal(r.body.error.code, 'PROXY_ERR_PLUGIN');
  const p = await (await fetch(`${proxy.adminUrl}/api/v1/pipeline`, { headers: { authorization: `Bearer ${TOKEN}` } })).json() as { request: string[] };
  assert.deepEqual(p.request, ['wasm:props']);
  // The old graph still serves: props answers ping locally with {local: true}.
  const c = await new MongoClient(proxy.uri).connect();
  assert.deepEqual(await c.db('admin').command({ ping: 1 }), { ok: 1, local: true });
  await c.close();
});

test('a configuration the schema refuses gets 400 with the key path; no token gets 401', async () => {
  const r = await post({ ...configWith([]), upstream: { pool_size: 'many' } });
  assert.equal(r.status, 400);
  assert.equal(r.body.error.code, 'PROXY_ERR_CONFIG');
  assert.match(r.body.error.message, /upstream\.pool_size/);
  const unauth = await fetch(`${proxy.adminUrl}/api/v1/reload`, { method: 'POST' });
  assert.equal(unauth.status, 401);
  assert.equal(((await unauth.json()) as any).error.code, 'PROXY_ERR_UNAUTHORIZED');
});

test('a changed configuration file is picked up; a broken one is refused and logged', async () => {
  const file = join(dir, 'proxy.json');
  writeFileSync(file, JSON.stringify(configWith([])));
  const lines: string[] = [];
  const log = new Logger('test', 'info', 'json', { write: (l: string) => { lines.push(l); } });
  const stop = watchReload(proxy, file, log);
  try {
    writeFileSync(file, JSON.stringify(configWith(['wasm:props'])));
    await waitFor(() => proxy.pipelines.get().requestSteps.map((s) => s.id).join() === 'wasm:props');
    writeFileSync(file, '{ "pipeline": { "request": [42] } }');
    await waitFor(() => lines.some((l) => l.includes('configuration reload refused')));
    assert.match(lines.find((l) => l.includes('reload refused'))!, /pipeline\.request\[0\]/);
    assert.deepEqual(proxy.pipelines.get().requestSteps.map((s) => s.id), ['wasm:props']);
  } finally {
    stop();
  }
});

async function waitFor(cond: () => boolean, ms = 5000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 25));
  }
}

test('admin /metrics exposes proxy counters, pool state and plugin metrics', async () => {
  assert.equal((await post(configWith(['wasm:counter']))).status, 200);
  const c = await new MongoClient(proxy.uri).connect();
  await c.db('m').collection('c').insertOne({ a: 1 });
  await c.close();
  const res = await fetch(`${proxy.adminUrl}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } });
  assert.equal(res.status, 200);
  assert.match(res.headers.get('content-type') ?? '', /text\/plain/);
  const text = await res.text();
  const requests = Number(/^proxy_wire_requests_total (\d+)/m.exec(text)?.[1]);
  assert.ok(requests > 0, 'request counter moved');
  assert.match(text, /^# TYPE proxy_wire_requests_total counter$/m);
  assert.match(text, /^proxy_upstream_pool_connections \d+/m);
  assert.match(text, /^# HELP proxy_step_errors_total/m);
  // The counter fixture plugin defines proxy_plugin_test_requests_total and counts each request.
  assert.ok(Number(/^proxy_plugin_test_requests_total\{pipeline_id="default",pipeline="baseline"\} (\d+)/m.exec(text)?.[1]) > 0, 'plugin metric moved');
  assert.equal((await fetch(`${proxy.adminUrl}/metrics`)).status, 401);
});
