// Requests a step rejects never reach the response phase, so the logging and metrics steps cannot
// see them: the graph counts them itself. Through a real proxy and the Node driver: the admin
// API's /metrics carries proxy_pipeline_rejections_total by pipeline id, graph, step and code, and
// each rejection is logged at debug with the step and the plugin's reason.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { MongoClient, MongoServerError } from 'mongodb';
import { parseConfig } from '../../runtime/config/index.ts';
import { startProxy, type RunningProxy } from '../../runtime/app/serve.ts';
import { Logger } from '../../runtime/log/index.ts';
import { DevDbServer } from '../../runtime/devdb/index.ts';

const TOKEN = 'test-token-0123456789';
const lines: string[] = [];
let devdb: DevDbServer;
let proxy: RunningProxy;

before(async () => {
  devdb = new DevDbServer();
  const d = await devdb.listen(0);
  const config = parseConfig({
    listen: '127.0.0.1:0',
    upstream: { uri: d.uri },
    log: { level: 'debug' },
    admin: { listen: '127.0.0.1:0', token: TOKEN },
    pipeline: { id: 'shop', request: ['filter'], response: [] },
    steps: {
      filter: { config: { default: 'allow', rules: [{ name: 'no-secrets', action: 'deny', collections: ['secret'] }] } },
    },
  }, null);
  const log = new Logger('proxy', 'debug', 'json', { write(line: string) { lines.push(line); } });
  proxy = await startProxy(config, { log });
});

after(async () => {
  await proxy?.close();
  await devdb?.close();
});

function series(text: string, labels: string): number {
  const escaped = labels.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  const m = new RegExp(`^proxy_pipeline_rejections_total\\{${escaped}\\} (\\S+)$`, 'm').exec(text);
  return m ? Number(m[1]) : NaN;
}

test('rejected requests are counted per graph, step and code in /metrics and logged at debug with the reason', async () => {
  const client = await new MongoClient(proxy.uri, { retryReads: false, retryWrites: false }).connect();
  try {
    const db = client.db('app');
    await db.collection('open').insertOne({ a: 1 });
    for (let i = 0; i < 3; i++) {
      await assert.rejects(db.collection('secret').findOne({}), (err: unknown) =>
        err instanceof MongoServerError && err.code === 13 && /no-secrets/.test(err.message));
    }
    assert.equal((await db.collection('open').findOne({ a: 1 }))?.a, 1);
  } finally {
    await client.close();
  }
  const res = await fetch(`${proxy.adminUrl}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } });
  assert.equal(res.status, 200);
  const text = await res.text();
  assert.equal(series(text, 'pipeline_id="shop",pipeline="baseline",step="wasm:filter",code="13"'), 3,
    text.split('\n').filter((l) => l.includes('rejections')).join('\n'));
  assert.equal([...text.matchAll(/^proxy_pipeline_rejections_total\{/gm)].length, 1, 'allowed requests add no series');

  const logged = lines.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l.msg === 'request rejected by a step');
  assert.equal(logged.length, 3);
  for (const l of logged) {
    assert.equal(l.level, 'debug');
    assert.equal(l.step, 'wasm:filter');
    assert.equal(l.op, 'find');
    assert.equal(l.code, 13);
    assert.match(String(l.reason), /denied by filter rule "no-secrets"/);
  }
});
