// `proxy canary` end to end, continued (see canary.e2e.test.ts): every exit code with the API's
// error code and message, and `status --watch` redrawing every 5 s, against a real proxy.
import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

import { bin, TOKEN, startStack, type Run, type Stack } from './canary-stack.ts';
import { until } from '../helpers/until.ts';

let stack: Stack;
let dir = '';
let controlUrl = '';
const cli = (args: string[], env: Record<string, string> = {}): Promise<Run> => stack.cli(args, env);

before(async () => {
  stack = await startStack();
  dir = stack.dir;
  controlUrl = stack.controlUrl;
});

after(async () => {
  await stack.close();
});

test('errors: wrong token exit 4, unknown canary exit 3, unreachable exit 5, usage exit 2 — each with the code and message', async () => {
  const bad = await cli(['list'], { PROXY_CONTROL_TOKEN: 'wrong-token-0123456789' });
  assert.equal(bad.code, 4);
  assert.match(bad.stderr, /^proxy canary list: 401 PROXY_ERR_UNAUTHORIZED: /);
  const flagToken = await cli(['list', '--token', TOKEN], { PROXY_CONTROL_TOKEN: 'wrong-token-0123456789' });
  assert.equal(flagToken.code, 0, '--token wins over the environment');
  const unknown = await cli(['history', 'c-does-not-exist']);
  assert.equal(unknown.code, 3);
  assert.match(unknown.stderr, /^proxy canary history: 404 PROXY_ERR_CANARY_NOT_FOUND: /);
  const noPipe = await cli(['status', 'no-such-pipeline']);
  assert.equal(noPipe.code, 3);
  assert.match(noPipe.stderr, /no canary on pipeline "no-such-pipeline"/);
  const down = await cli(['list', '--url', 'http://127.0.0.1:9']);
  assert.equal(down.code, 5);
  assert.match(down.stderr, /PROXY_ERR_CANARY_CLI_UNREACHABLE: the control plane at http:\/\/127\.0\.0\.1:9 is not reachable/);
  const missing = await cli(['start', '--pipeline', 'default', '--candidate-config', join(dir, 'nope.json')]);
  assert.equal(missing.code, 2);
  assert.match(missing.stderr, /--candidate-config .*nope\.json: no such file/);
  const badTraffic = await cli(['start', '--pipeline', 'default', '--candidate-config', 'examples/canary/candidate.json', '--traffic', '150']);
  assert.equal(badTraffic.code, 2);
  const badStages = join(dir, 'bad-stages.json');
  writeFileSync(badStages, JSON.stringify([{ traffic_pct: 50, min_duration: '1m', min_requests: 0 }, { traffic_pct: 10, min_duration: '0', min_requests: 0 }]));
  const refused = await cli(['start', '--pipeline', 'default', '--candidate-config', 'examples/canary/candidate.json', '--stages', badStages]);
  assert.equal(refused.code, 1);
  assert.match(refused.stderr, /^proxy canary start: 400 PROXY_ERR_CANARY_INVALID_STAGES: /);
});

test('status --watch redraws every 5 s while the canary runs', async () => {
  const r = await cli(['start', '--pipeline', 'default', '--candidate-config', 'examples/canary/candidate.json', '--json']);
  assert.equal(r.code, 0, r.stderr);
  const child = spawn(process.execPath, [bin, 'canary', 'status', 'default', '--watch'], {
    env: { ...process.env, PROXY_CONTROL_URL: controlUrl, PROXY_CONTROL_TOKEN: TOKEN }, stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  const stamps: number[] = [];
  child.stdout.on('data', (d: Buffer) => { stdout += d; for (const _ of String(d).matchAll(/Ctrl-C to stop/g)) stamps.push(Date.now()); });
  try {
    await until('two frames', () => stamps.length >= 2, 15_000);
    const gap = stamps[1] - stamps[0];
    assert.ok(gap >= 4500 && gap < 8000, `frames ${gap} ms apart`);
    assert.match(stdout, /ACTIVE/);
  } finally {
    child.kill('SIGINT');
    await new Promise((res) => child.once('exit', res));
  }
  const rb = await cli(['rollback', 'default', '--reason', 'cleanup']);
  assert.equal(rb.code, 0, rb.stderr);
});
