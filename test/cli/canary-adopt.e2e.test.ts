// `proxy canary start --match-* --sticky` and `proxy canary adopt` against a real `proxy serve`:
// the aim reaches the canary; after a completion, adopt prints the fragment that makes the file say
// what runs, and --write puts it into JSON (indent kept), YAML (comments kept) and TOML files, each
// of which then loads as a configuration with the promoted steps.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { loadConfig } from '../../runtime/config/index.ts';
import { startStack, type Stack } from './canary-stack.ts';

let stack: Stack;
/** TOML and YAML parsers hand out null-prototype objects: compare the data. */
const plain = (x: unknown) => JSON.parse(JSON.stringify(x));
const DENY_PROBE = { rules: [{ name: 'no-probe', action: 'deny', field: { path: 'filter.k', equals: 'probe' } }] };

before(async () => { stack = await startStack(); });
after(async () => { await stack?.close(); });

test('start --match-app/--match-client (repeatable) and --sticky reach the canary; a bad --sticky is a usage error', async () => {
  const cand = join(stack.dir, 'cand-logging.json');
  writeFileSync(cand, JSON.stringify({ steps: [{ type: 'logging', config: {} }] }));
  const stages = join(stack.dir, 'stages-2.json');
  writeFileSync(stages, JSON.stringify([{ traffic_pct: 50, min_duration: '1h', min_requests: 0 }, { traffic_pct: 100, min_duration: '0', min_requests: 0 }]));
  const bad = await stack.cli(['start', '--pipeline', 'default', '--candidate-config', cand, '--sticky', 'forever']);
  assert.notEqual(bad.code, 0);
  assert.match(bad.stderr, /--sticky is connection or session/);
  const r = await stack.cli(['start', '--pipeline', 'default', '--candidate-config', cand, '--stages', stages,
    '--match-app', 'reports-*', '--match-app', 'etl', '--match-client', '10.0.0.0/8', '--sticky', 'session', '--json']);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(JSON.parse(r.stdout).traffic_pct, 0, 'match alone: stage 1 sends only the chosen clients');
  const st = await stack.cli(['status', 'default', '--json']);
  const s = JSON.parse(st.stdout);
  assert.deepEqual(s.match, { app_name: ['reports-*', 'etl'], client: ['10.0.0.0/8'] });
  assert.equal(s.sticky, 'session');
  assert.equal((await stack.cli(['rollback', 'default', '--reason', 'flags checked'])).code, 0);
});

test('adopt: nothing to adopt before a promotion; after one, the fragment printed and written into JSON, YAML and TOML files', async () => {
  const none = await stack.cli(['adopt', 'default']);
  assert.equal(none.code, 0, none.stderr);
  assert.match(none.stdout, /runs the steps of the configuration file .*: nothing to adopt/);

  const cand = join(stack.dir, 'cand-filter.json');
  writeFileSync(cand, JSON.stringify({ steps: [{ type: 'filter', config: DENY_PROBE }] }));
  const stages = join(stack.dir, 'stages-1.json');
  writeFileSync(stages, JSON.stringify([{ traffic_pct: 100, min_duration: '0', min_requests: 0 }]));
  const started = await stack.cli(['start', '--pipeline', 'default', '--candidate-config', cand, '--stages', stages, '--json']);
  assert.equal(started.code, 0, started.stderr);
  assert.equal(JSON.parse(started.stdout).status, 'completed');

  // Printed: YAML on stdout, the explanation on stderr.
  const printed = await stack.cli(['adopt', 'default']);
  assert.equal(printed.code, 0, printed.stderr);
  assert.match(printed.stderr, /runs the baseline canary c-[0-9a-f]+ promoted/);
  const frag = parseYaml(printed.stdout);
  assert.deepEqual(frag.pipeline, { request: ['filter'], response: [] });
  assert.deepEqual(frag.steps.filter.config, DENY_PROBE);

  // --write needs --config.
  assert.notEqual((await stack.cli(['adopt', 'default', '--write'])).code, 0);

  // JSON: the indent of the file is kept.
  const json = join(stack.dir, 'proxy-adopt.json');
  writeFileSync(json, `${JSON.stringify({ listen: '127.0.0.1:0', pipeline: { request: [], response: [] } }, null, 4)}\n`);
  const wj = await stack.cli(['adopt', 'default', '--write', '--config', json]);
  assert.equal(wj.code, 0, wj.stderr);
  assert.match(readFileSync(json, 'utf8'), /^ {4}"pipeline": \{$/m);
  const lj = (await loadConfig({ file: json })).config;
  assert.deepEqual(lj.pipeline.request, ['filter']);
  assert.deepEqual(plain(lj.steps.filter.config), DENY_PROBE);

  // YAML: comments and untouched keys kept.
  const yaml = join(stack.dir, 'proxy-adopt.yaml');
  writeFileSync(yaml, '# the team\'s proxy\nlisten: 127.0.0.1:0 # local only\npipeline:\n  request: []\n  response: []\n');
  const wy = await stack.cli(['adopt', 'default', '--write', '--config', yaml]);
  assert.equal(wy.code, 0, wy.stderr);
  const ytext = readFileSync(yaml, 'utf8');
  assert.match(ytext, /^# the team's proxy$/m);
  assert.match(ytext, /listen: 127\.0\.0\.1:0 # local only/);
  assert.deepEqual((await loadConfig({ file: yaml })).config.pipeline.request, ['filter']);

  // TOML.
  const toml = join(stack.dir, 'proxy-adopt.toml');
  writeFileSync(toml, 'listen = "127.0.0.1:0"\n\n[pipeline]\nrequest = []\nresponse = []\n');
  const wt = await stack.cli(['adopt', 'default', '--write', '--config', toml]);
  assert.equal(wt.code, 0, wt.stderr);
  const lt = (await loadConfig({ file: toml })).config;
  assert.deepEqual(lt.pipeline.request, ['filter']);
  assert.deepEqual(plain(lt.steps.filter.config), DENY_PROBE);
});
