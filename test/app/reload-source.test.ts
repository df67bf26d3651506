// A reload refused for what only applying it finds (here: a listener address that cannot be bound)
// names what the configuration came from: the request body for POST /api/v1/reload with a body, the
// configuration file for one without, as a refusal by the schema does.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseConfig, type ProxyConfigInput } from '../../runtime/config/index.ts';
import { startProxy, type RunningProxy } from '../../runtime/app/serve.ts';
import { Logger } from '../../runtime/log/index.ts';

const TOKEN = 'reload-source-token-0123456789';
let proxy: RunningProxy;
let file: string;
let taken: Server;
let takenPort: number;

function config(profilingPort: number): ProxyConfigInput {
  return {
    listen: '127.0.0.1:0', log: { level: 'error' },
    admin: { listen: '127.0.0.1:0', token: TOKEN, reload_on_change: false },
    profiling: { enabled: true, port: profilingPort, token: TOKEN },
  };
}

before(async () => {
  const dir = mkdtempSync(join(tmpdir(), 'proxy-reload-source-'));
  file = join(dir, 'proxy.json');
  writeFileSync(file, JSON.stringify(config(0)));
  proxy = await startProxy(parseConfig(config(0), file), { log: new Logger('test', 'error'), configFile: file });
  taken = await new Promise((resolve) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => resolve(s));
  });
  takenPort = (taken.address() as { port: number }).port;
});

after(async () => {
  await proxy?.close();
  await new Promise((r) => taken?.close(r));
});

async function reload(body?: ProxyConfigInput): Promise<{ status: number; body: any }> {
  const res = await fetch(`${proxy.adminUrl}/api/v1/reload`, {
    method: 'POST', headers: { authorization: `Bearer ${TOKEN}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, body: await res.json() };
}

test('a body whose profiling.port cannot be bound: the message names the request body, not the file', async () => {
  const profilingUrl = proxy.profilingUrl;
  const r = await reload(config(takenPort));
  assert.equal(r.status, 400, JSON.stringify(r.body));
  assert.equal(r.body.error.code, 'PROXY_ERR_CONFIG');
  assert.match(r.body.error.message, /^invalid configuration: request body: profiling\.port: cannot listen on 127\.0\.0\.1\b/);
  assert.ok(!r.body.error.message.includes(file), r.body.error.message);
  assert.deepEqual(r.body.error.details.map((i: { path: string }) => i.path), ['profiling.port']);
  assert.equal(proxy.profilingUrl, profilingUrl, 'the running endpoint stays');
});

test('the same body refused by the schema names the request body too (the wording the bind failure follows)', async () => {
  const r = await reload({ ...config(0), upstream: { pool_size: -1 } } as ProxyConfigInput);
  assert.equal(r.status, 400);
  assert.match(r.body.error.message, /^ {2}request body: upstream\.pool_size: /m);
});

test('without a body the file is re-read, and a bind failure names the file', async () => {
  writeFileSync(file, JSON.stringify(config(takenPort)));
  try {
    const r = await reload();
    assert.equal(r.status, 400, JSON.stringify(r.body));
    assert.ok(r.body.error.message.startsWith(`invalid configuration: ${file}: profiling.port: cannot listen on 127.0.0.1`), r.body.error.message);
  } finally {
    writeFileSync(file, JSON.stringify(config(0)));
  }
});
