// Port-like options of the real CLI (bin/proxy.mjs): a port outside 0..65535 (or 1..65535 where a
// port is connected to) is a usage error, exit 2, with a message naming the option and the value —
// not listen()'s "options.port should be >= 0 and < 65536" (exit 1), nor "is not a URL", nor a
// benchmark run to the end that reports the endpoint unreachable. `devdb --port 0` (documented: any
// free port) keeps working.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { once } from 'node:events';

const bin = new URL('../../bin/proxy.mjs', import.meta.url).pathname;

const run = (args: string[], env: Record<string, string> = {}) => new Promise<{ code: number | null; stderr: string }>((resolve) => {
  const child = execFile(process.execPath, [bin, ...args], { encoding: 'utf8', timeout: 20_000, env: { ...process.env, ...env } },
    (_err, _stdout, stderr) => resolve({ code: child.exitCode, stderr }));
});

test('proxy devdb --port: 0..65535 (0: any free port); with --replica-set every member\'s port too', async () => {
  for (const [args, shown] of [
    [['--port', '99999'], '--port must be a port number 0..65535 (0: any free port), got 99999'],
    [['--port=65536'], '--port must be a port number 0..65535 (0: any free port), got 65536'],
    [['--port', '99999', '--replica-set', '2'], '--port must be a port number 0..65535 (0: any free port), got 99999'],
    [['--port', '65535', '--replica-set', '3'], '3 members need ports 65535..65537, past 65535: give a lower port (or 0 for free ones)'],
  ] as const) {
    const r = await run(['devdb', ...args]);
    assert.equal(r.code, 2, `${args.join(' ')}: ${r.stderr}`);
    assert.equal(r.stderr, `proxy devdb: ${shown}\n`);
  }
  const child = spawn(process.execPath, [bin, 'devdb', '--port', '0'], { stdio: ['ignore', 'pipe', 'ignore'] });
  try {
    let out = '';
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', (d: string) => { out += d; });
    while (!/mongodb:\/\/127\.0\.0\.1:\d+/.test(out)) await once(child.stdout, 'data');
    assert.notEqual(/:(\d+)/.exec(out)![1], '0', 'a free port was picked');
  } finally {
    child.kill('SIGTERM');
    await once(child, 'exit');
  }
});

test('URL options (--url, --instances, --profiling-url, $PROXY_*_URL): a port outside 1..65535 is said as such, naming the option or ' +
  'variable, exit 2', async () => {
  const cases: [string[], Record<string, string>, string][] = [
    [['logs', '--url', 'http://127.0.0.1:99999', '--no-follow'], {}, 'proxy logs: --url "http://127.0.0.1:99999": the port must be 1..65535, got 99999'],
    [['logs', '--no-follow'], { PROXY_ADMIN_URL: 'http://[::1]:0/' }, 'proxy logs: $PROXY_ADMIN_URL "http://[::1]:0/": the port must be 1..65535, got 0'],
    [['canary', 'list', '--url', '127.0.0.1:70000'], {}, 'proxy canary list: --url "127.0.0.1:70000": the port must be 1..65535, got 70000'],
    [['fleet', 'status', '--url', 'http://127.0.0.1:99999'], {}, 'proxy fleet status: --url "http://127.0.0.1:99999": the port must be 1..65535, ' +
      'got 99999'],
    [['canary', 'list'], { PROXY_CONTROL_URL: '127.0.0.1:70000' }, 'proxy canary list: $PROXY_CONTROL_URL "127.0.0.1:70000": the port must be ' +
      '1..65535, got 70000'],
    [['fleet', 'status'], { PROXY_CONTROL_URL: 'ftp://127.0.0.1:21' }, 'proxy fleet status: $PROXY_CONTROL_URL "ftp://127.0.0.1:21" must be ' +
      'http:// or https://'],
    [['profile'], { PROXY_PROFILE_URL: 'http://127.0.0.1:0' }, 'proxy profile: $PROXY_PROFILE_URL "http://127.0.0.1:0": the port must be 1..65535, got 0'],
    [['profile', '--aggregate', '--instances', '127.0.0.1:9090,127.0.0.1:99999'], {}, 'proxy profile: --instances "127.0.0.1:99999": the port ' +
      'must be 1..65535, got 99999'],
    [['bench', '--target', 'mongodb://127.0.0.1:1', '--duration', '1s', '--profiling-url', 'http://127.0.0.1:99999'], {},
      'proxy bench: --profiling-url "http://127.0.0.1:99999": the port must be 1..65535, got 99999'],
    [['bench', '--target', 'mongodb://127.0.0.1:1', '--duration', '1s'], { PROXY_PROFILE_URL: 'http://user@127.0.0.1:123456/x' },
      'proxy bench: $PROXY_PROFILE_URL "http://user@127.0.0.1:123456/x": the port must be 1..65535, got 123456'],
    [['bench', '--target', 'mongodb://127.0.0.1:99999', '--duration', '1s'], {}, 'proxy bench: --target: target port 99999 is out of range'],
  ];
  for (const [args, env, shown] of cases) {
    const r = await run(args, env);
    assert.equal(r.code, 2, `${args.join(' ')}: ${r.stderr}`);
    assert.equal(r.stderr.trimEnd(), shown, args.join(' '));
  }
});

test('proxy serve --listen: a port outside 0..65535 is refused as the configuration\'s listen is, exit 2', async () => {
  const r = await run(['serve', '--workers', '1', '--listen', '127.0.0.1:99999']);
  assert.equal(r.code, 2, r.stderr);
  assert.match(r.stderr, /--listen: listen: "127\.0\.0\.1:99999": the port must be an integer 0\.\.65535/);
});
