// The one address parser (runtime/config/address.ts): what every listener's key accepts, what it
// refuses and why, how an IPv6 host is written back; and the schema refusing a bad address with its
// key path at load, before any port opens.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ConfigError, parseConfig, parseHost, parseHostPort, formatHostPort, httpUrl, MAX_STEPS_PER_PHASE } from '../../runtime/config/index.ts';

test('host:port and [v6]:port are accepted; the host comes back without brackets', () => {
  assert.deepEqual(parseHostPort('127.0.0.1:9090'), { host: '127.0.0.1', port: 9090 });
  assert.deepEqual(parseHostPort('[::1]:9090'), { host: '::1', port: 9090 });
  assert.deepEqual(parseHostPort('[::]:0'), { host: '::', port: 0 });
  assert.deepEqual(parseHostPort('[fe80::1:2]:65535'), { host: 'fe80::1:2', port: 65535 });
  assert.deepEqual(parseHostPort('localhost:27018'), { host: 'localhost', port: 27018 });
  assert.deepEqual(parseHostPort('proxy-1.internal.example.com:80'), { host: 'proxy-1.internal.example.com', port: 80 });
  assert.deepEqual(parseHostPort('0.0.0.0:1'), { host: '0.0.0.0', port: 1 });
  assert.deepEqual(parseHostPort('compose_service:9090'), { host: 'compose_service', port: 9090 });
});

test('a bad address is refused with the reason', () => {
  const problem = (s: string) => {
    const r = parseHostPort(s);
    assert.ok('problem' in r, `${s} is refused`);
    return r.problem;
  };
  assert.match(problem('::1:9090'), /IPv6 host goes in brackets/);
  assert.match(problem('9090'), /no port/);
  assert.match(problem(':9090'), /no host/);
  assert.match(problem('127.0.0.1:65536'), /port must be an integer 0\.\.65535/);
  assert.match(problem('127.0.0.1:'), /port/);
  assert.match(problem('127.0.0.1:-1'), /port/);
  assert.match(problem('127.0.0.1:80x'), /port/);
  assert.match(problem('[::1:9090'), /bracketed IPv6/);
  assert.match(problem('[not-v6]:9090'), /bracketed IPv6/);
  assert.match(problem('[127.0.0.1]:9090'), /bracketed IPv6/);
  assert.match(problem('300.1.2.3:80'), /not an IPv4 address/);
  assert.match(problem('bad/host:80'), /not a host name/);
  assert.match(problem('-x:80'), /not a host name/);
  assert.match(problem('a b:80'), /not a host name/);
});

test('a host alone: bare or bracketed IPv6, IPv4, a name', () => {
  assert.equal(parseHost('::1'), '::1');
  assert.equal(parseHost('[::1]'), '::1');
  assert.equal(parseHost('127.0.0.1'), '127.0.0.1');
  assert.equal(parseHost('localhost'), 'localhost');
  for (const bad of ['', '[::1', '::g', '1.2.3', 'a/b', '[]']) assert.equal(typeof parseHost(bad), 'object', bad);
});

test('addresses and URLs written back bracket an IPv6 host', () => {
  assert.equal(formatHostPort('::1', 9090), '[::1]:9090');
  assert.equal(formatHostPort('127.0.0.1', 9090), '127.0.0.1:9090');
  assert.equal(httpUrl('::1', 9090), 'http://[::1]:9090');
  assert.equal(httpUrl('localhost', 80), 'http://localhost:80');
  assert.equal(new URL(httpUrl('::1', 9090)).hostname, '[::1]');
});

function refusal(config: object): string[] {
  try {
    parseConfig(config, 'proxy.yaml');
  } catch (err) {
    assert.ok(err instanceof ConfigError);
    return err.issues.map((i) => `${i.path}: ${i.message}`);
  }
  assert.fail('accepted');
}

test('every listener key takes its address from the one parser: refused at load with the key path', () => {
  assert.deepEqual(refusal({ listen: '::1:27018' }), ['listen: "::1:27018": an IPv6 host goes in brackets, e.g. [::1]:9090']);
  assert.deepEqual(refusal({ admin: { listen: '[::1]:99999', token: 'a-token-of-16-chars' } }),
    ['admin.listen: "[::1]:99999": the port must be an integer 0..65535']);
  assert.deepEqual(refusal({ admin: { listen: 'bad/host:9090', token: 'a-token-of-16-chars' } }),
    ['admin.listen: "bad/host" is not a host name or IP address']);
  assert.deepEqual(refusal({ profiling: { host: '[::1' } }), ['profiling.host: "[::1" is not a bracketed IPv6 address']);
  assert.deepEqual(refusal({ control_plane: { host: 'a host' } }), ['control_plane.host: "a host" is not a host name or IP address']);
  const ok = parseConfig({ listen: '[::1]:0', admin: { listen: '[::1]:9090', token: 'a-token-of-16-chars' }, profiling: { host: '::1' },
    control_plane: { host: '[::1]' } }, null);
  assert.equal(ok.admin?.listen, '[::1]:9090');
});

test(`a pipeline phase holds at most ${MAX_STEPS_PER_PHASE} steps`, () => {
  const steps = (n: number) => Array.from({ length: n }, () => 'logging');
  assert.equal(parseConfig({ pipeline: { request: steps(MAX_STEPS_PER_PHASE) } }, null).pipeline.request.length, MAX_STEPS_PER_PHASE);
  assert.deepEqual(refusal({ pipeline: { request: steps(100_000) } }), [`pipeline.request: at most ${MAX_STEPS_PER_PHASE} steps per phase, got 100000`]);
  assert.deepEqual(refusal({ pipeline: { response: steps(MAX_STEPS_PER_PHASE + 1) } }),
    [`pipeline.response: at most ${MAX_STEPS_PER_PHASE} steps per phase, got ${MAX_STEPS_PER_PHASE + 1}`]);
});
