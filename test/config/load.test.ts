import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError, MAX_CONFIG_BYTES, loadConfig, parseConfig } from '../../runtime/config/index.ts';
import { defaultConfig } from '../../runtime/config/schema.ts';

function dirWith(files: Record<string, string>): string {
  const dir = mkdtempSync(join(tmpdir(), 'proxy-config-'));
  for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
  return dir;
}

function refused(fn: () => unknown): ConfigError {
  try {
    fn();
  } catch (err) {
    assert.ok(err instanceof ConfigError, `expected ConfigError, got ${err}`);
    return err;
  }
  assert.fail('expected the config to be refused');
}

async function refusedAsync(p: Promise<unknown>): Promise<ConfigError> {
  try {
    await p;
  } catch (err) {
    assert.ok(err instanceof ConfigError, `expected ConfigError, got ${err}`);
    return err;
  }
  assert.fail('expected the config to be refused');
}

test('with no file anywhere the defaults are used', async () => {
  const { config, source } = await loadConfig({ cwd: dirWith({}) });
  assert.equal(source, null);
  assert.deepEqual(config, defaultConfig());
});

const SAME = {
  json: JSON.stringify({
    listen: '0.0.0.0:27020',
    upstream: { uri: 'mongodb://db:27017', pool_size: 10, min_idle: 2 },
    pipeline: { request: ['logging', 'wasm:redact'], response: ['metrics'] },
    steps: { redact: { module: 'redact.wasm', config: { fields: ['ssn'] } } },
  }),
  yaml: `
listen: 0.0.0.0:27020
upstream:
  uri: mongodb://db:27017
  pool_size: 10
  min_idle: 2
pipeline:
  request: [logging, "wasm:redact"]
  response: [metrics]
steps:
  redact:
    module: redact.wasm
    config: { fields: [ssn] }
`,
  toml: `
listen = "0.0.0.0:27020"
[upstream]
uri = "mongodb://db:27017"
pool_size = 10
min_idle = 2
[pipeline]
request = ["logging", "wasm:redact"]
response = ["metrics"]
[steps.redact]
module = "redact.wasm"
config = { fields = ["ssn"] }
`,
};

test('json, yaml and toml files load the same config', async () => {
  const loaded = await Promise.all(
    (['json', 'yaml', 'toml'] as const).map((ext) => loadConfig({ cwd: dirWith({ [`proxy.${ext}`]: SAME[ext] }) })),
  );
  assert.match(loaded[0].source!, /proxy\.json$/);
  assert.match(loaded[1].source!, /proxy\.yaml$/);
  assert.match(loaded[2].source!, /proxy\.toml$/);
  assert.deepEqual(loaded[1].config, loaded[0].config);
  assert.deepEqual(loaded[2].config, loaded[0].config);
  assert.equal(loaded[0].config.upstream.pool_size, 10);
  assert.equal(loaded[0].config.upstream.connect_timeout_ms, 5000);
  assert.deepEqual(loaded[0].config.steps.redact.config, { fields: ['ssn'] });
});

test('proxy.json is preferred over proxy.yaml in the working directory', async () => {
  const dir = dirWith({ 'proxy.json': '{"listen":"127.0.0.1:1"}', 'proxy.yaml': 'listen: 127.0.0.1:2' });
  assert.equal((await loadConfig({ cwd: dir })).config.listen, '127.0.0.1:1');
});

test('an explicit file is read relative to cwd', async () => {
  const dir = dirWith({ 'custom.yml': 'log: { level: debug }' });
  const { config, source } = await loadConfig({ file: 'custom.yml', cwd: dir });
  assert.equal(config.log.level, 'debug');
  assert.equal(source, join(dir, 'custom.yml'));
});

test('an unknown key is refused with its path', () => {
  const err = refused(() => parseConfig({ upstream: { pool_size: 5, foo: 1 } }, 'proxy.yaml'));
  assert.equal(err.code, 'PROXY_ERR_CONFIG');
  assert.deepEqual(err.issues, [{ path: 'upstream.foo', message: 'unknown key "foo"' }]);
  assert.match(err.message, /proxy\.yaml: upstream\.foo: unknown key "foo"/);
});

test('a misspelt key is refused with the nearest known key at its place as a suggestion', () => {
  const top = refused(() => parseConfig({ pipline: { request: [] } }, 'proxy.yaml'));
  assert.deepEqual(top.issues, [{ path: 'pipline', message: 'unknown key "pipline"; did you mean "pipeline"?' }]);
  const nested = refused(() => parseConfig({ upstream: { pool_sise: 5 } }, null));
  assert.deepEqual(nested.issues, [{ path: 'upstream.pool_sise', message: 'unknown key "pool_sise"; did you mean "pool_size"?' }]);
  const swapped = refused(() => parseConfig({ upstream: { uir: 'mongodb://127.0.0.1:1' } }, null));
  assert.deepEqual(swapped.issues, [{ path: 'upstream.uir', message: 'unknown key "uir"; did you mean "uri"?' }]);
});

test('an unknown step type names the built-in steps', () => {
  const err = refused(() => parseConfig({ pipeline: { request: ['nosuch'] } }, null));
  assert.equal(err.issues.length, 1);
  assert.equal(err.issues[0].path, 'pipeline.request[0]');
  assert.match(err.issues[0].message,
    /^unknown step type "nosuch": not a built-in step \(logging, filter, cache, metrics, rate_limit, auth, transform, route\)/);
});

test('a number out of bounds is refused naming the bounds, not its type (keys without a phrase of their own)', () => {
  const err = refused(() => parseConfig({ fleet: { lease_ttl_s: 0, evidence_quorum_pct: 150 }, canary: { max_samples: 3 } }, 'proxy.yaml'));
  assert.deepEqual(err.issues, [
    { path: 'canary.max_samples', message: 'expected integer 10..10000000, received 3' },
    { path: 'fleet.lease_ttl_s', message: 'expected integer 1..300, received 0' },
    { path: 'fleet.evidence_quorum_pct', message: 'expected integer 1..100, received 150' },
  ]);
  assert.deepEqual(refused(() => parseConfig({ fleet: { lease_ttl_s: 2.5 } }, null)).issues,
    [{ path: 'fleet.lease_ttl_s', message: 'expected integer 1..300, received 2.5' }]);
});

test('a wrong type is refused with its path, what was expected and what was received', () => {
  const err = refused(() => parseConfig({ upstream: { pool_size: 'abc' } }, 'proxy.yaml'));
  assert.deepEqual(err.issues, [{ path: 'upstream.pool_size', message: 'expected integer >= 1, received "abc"' }]);
  assert.match(err.message, /proxy\.yaml: upstream\.pool_size: expected integer >= 1, received "abc"/);
  const enumErr = refused(() => parseConfig({ compression: ['zlib', 'lz4'] }, null));
  assert.deepEqual(enumErr.issues, [
    { path: 'compression[1]', message: 'expected "snappy" | "zlib" | "zstd", received "lz4"' },
  ]);
});

test('an admin token that is too short is refused naming the minimum length', () => {
  const err = refused(() => parseConfig({ admin: { listen: '127.0.0.1:0', token: 'abcde' } }, 'proxy.yaml'));
  assert.deepEqual(err.issues, [{ path: 'admin.token', message: 'expected string of at least 16 characters, received "abcde"' }]);
  assert.equal(parseConfig({ admin: { listen: '127.0.0.1:0', token: 'x'.repeat(16) } }, null).admin?.token, 'x'.repeat(16));
});

test('a profiling token that is too short is refused naming the minimum length', () => {
  const err = refused(() => parseConfig({ profiling: { token: 'short' } }, 'proxy.yaml'));
  assert.deepEqual(err.issues, [{ path: 'profiling.token', message: 'expected string of at least 16 characters, received "short"' }]);
  assert.equal(parseConfig({ profiling: { token: 'x'.repeat(16) } }, null).profiling?.token, 'x'.repeat(16));
});

test('min_idle greater than pool_size is refused', () => {
  const err = refused(() => parseConfig({ upstream: { pool_size: 4, min_idle: 5 } }, 'proxy.json'));
  assert.equal(err.issues.length, 1);
  assert.equal(err.issues[0].path, 'upstream.min_idle');
  assert.match(err.issues[0].message, /pool_size/);
});

test('a plugin step without a module is refused at its pipeline position', () => {
  const err = refused(() =>
    parseConfig({ pipeline: { request: ['logging', 'cache', 'wasm:redact'], response: ['audit'] } }, 'proxy.yaml'),
  );
  assert.deepEqual(
    err.issues.map((i) => i.path),
    ['pipeline.request[2]', 'pipeline.response[0]'],
  );
  assert.match(err.issues[0].message, /steps\.redact/);
  // A package is as good as a module.
  parseConfig({ pipeline: { request: ['wasm:redact'] }, steps: { redact: { package: '@acme/redact' } } }, null);
});

test('malformed YAML gives a ConfigError naming the file and the line', async () => {
  const dir = dirWith({ 'proxy.yaml': 'listen: 127.0.0.1:27018\nupstream: [1, 2\nlog: x: y\n' });
  const err = await refusedAsync(loadConfig({ cwd: dir }));
  assert.equal(err.source, join(dir, 'proxy.yaml'));
  assert.ok(err.message.includes(join(dir, 'proxy.yaml')));
  assert.match(err.message, /invalid YAML: .*line \d+, column \d+/);
});

test('malformed JSON and TOML report the line', async () => {
  const json = await refusedAsync(loadConfig({ cwd: dirWith({ 'proxy.json': '{\n  "listen": 1,\n}' }) }));
  assert.match(json.message, /proxy\.json: invalid JSON: .*line 3, column 1/);
  const toml = await refusedAsync(loadConfig({ cwd: dirWith({ 'proxy.toml': 'listen = \n' }) }));
  assert.match(toml.message, /proxy\.toml: invalid TOML at line 1/);
});

test('a missing explicit file is a ConfigError', async () => {
  const err = await refusedAsync(loadConfig({ file: 'nope.yaml', cwd: dirWith({}) }));
  assert.match(err.message, /nope\.yaml: cannot read file/);
});

test('examples/proxy.yaml (used by npm start) loads and starts the dev upstream', async () => {
  const { config } = await loadConfig({ file: 'examples/proxy.yaml', cwd: join(import.meta.dirname, '../..') });
  assert.equal(config.listen, '127.0.0.1:27018');
  assert.equal(config.upstream.uri, undefined);
  assert.deepEqual(config.pipeline.request, []);
  assert.deepEqual(config.pipeline.response, []);
  assert.equal(config.log.level, 'info');
});

test('a configuration file larger than 4 MiB, or an endless device, is refused as too large (not read into memory whole)', async () => {
  const dir = dirWith({ 'big.json': `{"listen":"127.0.0.1:27017","x":"${'a'.repeat(MAX_CONFIG_BYTES)}"}` });
  const big = await refusedAsync(loadConfig({ file: join(dir, 'big.json') }));
  assert.match(big.message, /big\.json.*larger than 4 MiB/);
  const zero = await refusedAsync(loadConfig({ file: '/dev/zero' }));
  assert.match(zero.message, /\/dev\/zero.*larger than 4 MiB/);
  // Just under the bound is read (and then judged on its content).
  const ok = dirWith({ 'ok.json': `{"listen":"127.0.0.1:27017"}${' '.repeat(MAX_CONFIG_BYTES - 40)}` });
  assert.equal((await loadConfig({ file: join(ok, 'ok.json') })).config.listen, '127.0.0.1:27017');
});
