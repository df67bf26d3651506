// Durable promotion, end to end with the official driver through a real proxy: a completed canary's
// graph stays the pipeline's baseline across a reload of the unchanged file and a restart (same
// canary store); a reload whose file changes that pipeline's steps replaces it, with a warning; the
// file edited while the proxy was down wins at the next start, with a warning; a file that takes
// the promoted steps (adopt) retires the promotion quietly. Never a silent revert.
// The promoted candidate is told apart by what it does: its filter step denies `{ k: "probe" }`.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MongoClient, MongoServerError } from 'mongodb';
import { parseConfig } from '../../runtime/config/index.ts';
import { startProxy, type RunningProxy } from '../../runtime/app/serve.ts';
import { Logger, type LogSink } from '../../runtime/log/index.ts';

const TOKEN = 'canary-promotion-token-0123456789';
const DENY_PROBE = { rules: [{ name: 'no-probe', action: 'deny', field: { path: 'filter.k', equals: 'probe' } }] };

class Lines implements LogSink {
  lines: Array<Record<string, any>> = [];
  write(line: string): void { this.lines.push(JSON.parse(line)); }
  find(re: RegExp, level?: string): Array<Record<string, any>> {
    return this.lines.filter((l) => re.test(String(l.msg ?? l.message ?? '')) && (level === undefined || l.level === level || l.level === ({ warn: 40,
      info: 30, error: 50 } as Record<string, number>)[level]));
  }
}

function fileConfig(dir: string, request: string[] = []): Record<string, unknown> {
  return {
    listen: '127.0.0.1:0', log: { level: 'info' },
    pipeline: { request, response: [] },
    control_plane: { port: 0, tokens: [TOKEN] }, canary: { data_dir: dir },
  };
}

async function start(cfg: Record<string, unknown>, log: Lines): Promise<{ proxy: RunningProxy; client: MongoClient }> {
  const proxy = await startProxy(parseConfig(cfg, null), { log: new Logger('test', 'info', 'json', log) });
  return { proxy, client: new MongoClient(proxy.uri, { maxPoolSize: 2 }) };
}

async function stop(p: { proxy: RunningProxy; client: MongoClient }): Promise<void> {
  await p.client.close();
  await p.proxy.close();
}

async function call(proxy: RunningProxy, method: string, path: string, body?: unknown): Promise<{ status: number; body: any }> {
  const res = await fetch(`${proxy.controlPlaneUrl}/api/v1/canary${path}`, {
    method, headers: { authorization: `Bearer ${TOKEN}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, body: await res.json() };
}

/** 'promoted' when the promoted filter denied the probe, 'file' when the file's (empty) pipeline served it. */
async function probe(c: MongoClient): Promise<'promoted' | 'file'> {
  try {
    await c.db('app').collection('items').findOne({ k: 'probe' });
    return 'file';
  } catch (err) {
    if (err instanceof MongoServerError && err.code === 13 && /no-probe/.test(err.message)) return 'promoted';
    throw err;
  }
}

/** A canary whose single stage (100 %, no minimums) completes as it starts. */
async function completeCanary(proxy: RunningProxy): Promise<string> {
  const r = await call(proxy, 'POST', '', {
    pipeline_id: 'default', candidate_config: { steps: [{ type: 'filter', config: DENY_PROBE }] },
    stages: [{ traffic_pct: 100, min_duration: '0', min_requests: 0 }],
  });
  assert.equal(r.status, 201, JSON.stringify(r.body));
  assert.equal(r.body.status, 'completed');
  return r.body.canary_id;
}

test('a completed canary survives a reload of the unchanged file and a restart; a reload that edits the pipeline replaces it with a warning', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'canary-promotion-'));
  const log = new Lines();
  let p = await start(fileConfig(dir), log);
  try {
    assert.equal(await probe(p.client), 'file');
    const id = await completeCanary(p.proxy);
    assert.equal(await probe(p.client), 'promoted');
    const b = (await call(p.proxy, 'GET', '/pipelines/default/baseline')).body;
    assert.equal(b.source, 'promotion');
    assert.equal(b.canary_id, id);
    assert.deepEqual(b.config.pipeline.request, ['filter']);
    assert.deepEqual(b.file.pipeline.request, []);

    // Reload, file unchanged: the promotion holds, and the log says the file's steps do not run.
    await p.proxy.reload(parseConfig(fileConfig(dir), null));
    assert.equal(await probe(p.client), 'promoted', 'a reload of the unchanged file kept the promotion');
    assert.equal(log.find(/runs the baseline promoted by canary/, 'warn').length, 1);
    assert.deepEqual(p.proxy.pipelines.get('default').requestSteps.map((s) => s.id), ['wasm:filter']);

    // Restart with the same file and store: still promoted.
    await stop(p);
    p = await start(fileConfig(dir), log);
    assert.equal(await probe(p.client), 'promoted', 'a restart kept the promotion');
    assert.equal(log.find(/runs the baseline promoted by canary/, 'warn').length, 2);
    assert.equal((await call(p.proxy, 'GET', '/pipelines/default/baseline')).body.source, 'promotion');

    // A reload whose file edits that pipeline's steps: the file wins, and says so.
    await p.proxy.reload(parseConfig(fileConfig(dir, ['logging']), null));
    assert.equal(await probe(p.client), 'file', 'the edited file replaced the promotion');
    assert.deepEqual(p.proxy.pipelines.get('default').requestSteps.map((s) => s.id), ['wasm:logging']);
    const w = log.find(/changed the steps of pipeline "default": they replace the baseline promoted by canary/, 'warn');
    assert.equal(w.length, 1);
    assert.equal(w[0].canary_id, id);
    assert.equal((await call(p.proxy, 'GET', '/pipelines/default/baseline')).body.source, 'file');

    // And it stays replaced: the next restart runs the file.
    await stop(p);
    p = await start(fileConfig(dir, ['logging']), log);
    assert.equal(await probe(p.client), 'file');
  } finally {
    await stop(p);
  }
});

test('the file edited while the proxy was down wins at the next start, with a warning', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'canary-promotion-'));
  const log = new Lines();
  let p = await start(fileConfig(dir), log);
  try {
    await completeCanary(p.proxy);
    assert.equal(await probe(p.client), 'promoted');
    await stop(p);
    p = await start(fileConfig(dir, ['logging']), log);
    assert.equal(await probe(p.client), 'file');
    assert.equal(log.find(/changed the steps of pipeline "default"/, 'warn').length, 1);
  } finally {
    await stop(p);
  }
});

test('a file that takes the promoted steps (adopt) retires the promotion without a warning; restore-baseline puts the file back', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'canary-promotion-'));
  const log = new Lines();
  const p = await start(fileConfig(dir), log);
  try {
    const id = await completeCanary(p.proxy);
    const b = (await call(p.proxy, 'GET', '/pipelines/default/baseline')).body;
    // The file as `proxy canary adopt` writes it: the promoted pipeline and its steps.
    await p.proxy.reload(parseConfig({ ...fileConfig(dir), pipeline: b.config.pipeline, steps: b.config.steps }, null));
    assert.equal(await probe(p.client), 'promoted');
    assert.equal(log.find(/changed the steps/, 'warn').length, 0);
    assert.equal(log.find(/now has the steps canary .* promoted/).length, 1);
    assert.equal((await call(p.proxy, 'GET', '/pipelines/default/baseline')).body.source, 'file');

    // restore-baseline of a second canary drops its promotion too.
    await p.proxy.reload(parseConfig(fileConfig(dir), null));
    assert.equal(await probe(p.client), 'file');
    const id2 = await completeCanary(p.proxy);
    assert.notEqual(id2, id);
    assert.equal((await call(p.proxy, 'POST', `/${id2}/restore-baseline`)).status, 200);
    assert.equal(await probe(p.client), 'file');
    assert.equal((await call(p.proxy, 'GET', '/pipelines/default/baseline')).body.source, 'file');
  } finally {
    await stop(p);
  }
});

test('with several pipelines: a reload that edits another pipeline keeps the promotion; one that edits its pipeline replaces it; the other ' +
  'pipeline never runs it', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'canary-promotion-'));
  const log = new Lines();
  const cfg = (defaultRequest: string[], reportsRequest: string[]) => ({
    ...fileConfig(dir, defaultRequest),
    pipelines: [{ id: 'reports', match: { app_name: 'reports-*' }, request: reportsRequest, response: [] }],
  });
  const p = await start(cfg([], []), log);
  const reports = new MongoClient(p.proxy.uri, { maxPoolSize: 2, appName: 'reports-v1' });
  try {
    const r = await call(p.proxy, 'POST', '', {
      pipeline_id: 'reports', candidate_config: { steps: [{ type: 'filter', config: DENY_PROBE }] },
      stages: [{ traffic_pct: 100, min_duration: '0', min_requests: 0 }],
    });
    assert.equal(r.status, 201, JSON.stringify(r.body));
    assert.equal(await probe(reports), 'promoted');
    assert.equal(await probe(p.client), 'file', 'the default pipeline does not run the promotion');
    // Edit the default pipeline only: the reports promotion holds, without a "changed" warning.
    await p.proxy.reload(parseConfig(cfg(['logging'], []), null));
    assert.equal(await probe(reports), 'promoted');
    assert.equal(log.find(/changed the steps/, 'warn').length, 0);
    assert.equal((await call(p.proxy, 'GET', '/pipelines/reports/baseline')).body.source, 'promotion');
    assert.equal((await call(p.proxy, 'GET', '/pipelines/default/baseline')).body.source, 'file');
    // Edit the reports pipeline: the file wins there, with the warning naming it.
    await p.proxy.reload(parseConfig(cfg(['logging'], ['logging']), null));
    assert.equal(await probe(reports), 'file');
    assert.equal(log.find(/changed the steps of pipeline "reports"/, 'warn').length, 1);
  } finally {
    await reports.close();
    await stop(p);
  }
});
