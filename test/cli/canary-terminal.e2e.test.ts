// `proxy canary` prints strings others chose to the operator's terminal: a shadow canary's diffs
// hold the namespaces and values of client documents (the `mongodb` driver's), a canary's
// description and rollback reason come from API bodies. None of them may reach the terminal raw:
// an ESC sequence would clear the screen or retitle the window, a newline would forge a line.
// A real proxy (in this process) and the real CLI as child processes (run asynchronously).
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MongoClient } from 'mongodb';
import { Closes, withProxy } from '../helpers/proxy.ts';

const TOKEN = 'terminal-e2e-token-0123456789';
const dirs: string[] = [];
const clients: MongoClient[] = [];
const proxies = new Closes();
after(async () => {
  for (const c of clients) await c.close(true);
  await proxies.run();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

// Clear the screen, retitle the window (OSC … BEL), a newline that starts a forged line, a
// bidirectional override and a C1 CSI.
const HOSTILE = '\x1b[2J\x1b]0;pwned\x07\nFORGED line\u202e\u009b31m';
// eslint-disable-next-line no-control-regex -- looking for the control characters is the point
const RAW = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/;

test('proxy canary diffs / status / history / list: client and API-body strings are printed escaped, one line each', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'canary-terminal-'));
  dirs.push(dir);
  const { proxy, uri } = await withProxy(proxies, {
    control_plane: { port: 0, tokens: [TOKEN] }, canary: { data_dir: dir },
    pipeline: { request: [], response: ['transform'] }, steps: { transform: { config: { response: [{ op: 'redact', path: 'ssn' }] } } },
  });
  const client = new MongoClient(uri, { maxPoolSize: 2, appName: `app${HOSTILE}` });
  clients.push(client);
  const coll = client.db('app').collection<{ _id: number; email: string }>(`people${HOSTILE}`);
  await coll.insertOne({ _id: 1, email: `a${HOSTILE}@x.test` });

  const call = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`${proxy.controlPlaneUrl!}/api/v1/canary${path}`, {
      method, headers: { authorization: `Bearer ${TOKEN}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: res.status, body: await res.json() as Record<string, unknown> };
  };
  const created = await call('POST', '', {
    mode: 'shadow', shadow_pct: 100, auto_promote: false, description: `about${HOSTILE}`, shadow: { show_values: true },
    candidate_config: { steps: [{ type: 'transform', config: { response: [{ op: 'redact', path: 'email' }] } }] },
    stages: [{ traffic_pct: 0, min_duration: '1h', min_requests: 1_000_000 }, { traffic_pct: 100, min_duration: '0', min_requests: 0 }],
  });
  assert.equal(created.status, 201, JSON.stringify(created.body));
  const id = String(created.body.canary_id);
  await coll.findOne({ _id: 1 });
  const diffs = (await call('GET', `/${id}/diffs`)).body as { diffs: Array<{ collection: string }> };
  assert.equal(diffs.diffs[0]?.collection, `people${HOSTILE}`, 'the client\'s collection name is in the diffs as sent');

  const cli = async (...args: string[]) => (await promisify(execFile)(process.execPath, [join(process.cwd(), 'bin/proxy.mjs'), 'canary', ...args], {
    env: { ...process.env, PROXY_CONTROL_URL: proxy.controlPlaneUrl!, PROXY_CONTROL_TOKEN: TOKEN }, encoding: 'utf8',
  })).stdout;
  const escaped = '\\u001b[2J\\u001b]0;pwned\\u0007\\nFORGED line\\u202e\\u009b31m';
  const check = (what: string, out: string, ...wants: string[]) => {
    assert.doesNotMatch(out, RAW, `${what}: no control character printed raw:\n${JSON.stringify(out)}`);
    assert.doesNotMatch(out, /^FORGED/m, `${what}: no forged line`);
    for (const w of wants) assert.ok(out.includes(w), `${what} shows ${JSON.stringify(w)}:\n${out}`);
  };
  check('diffs', await cli('diffs', 'default'), `app.people${escaped}`, `a${escaped}@x.test`);
  check('status', await cli('status', 'default'), `about${escaped}`);
  check('list', await cli('list'), `about${escaped}`);
  const rolled = await call('POST', `/${id}/rollback`, { reason: `reason${HOSTILE}` });
  assert.equal(rolled.status, 200, JSON.stringify(rolled.body));
  check('finished status', await cli('status', 'default'), `reason${escaped}`);
  check('history', await cli('history', id), `about${escaped}`, `reason${escaped}`);
  check('rollback', await cli('list', '--all'), `about${escaped}`);
});
