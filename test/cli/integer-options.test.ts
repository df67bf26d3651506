// Integer options are taken as typed, digits only, as the HTTP APIs take their integer
// parameters: cac (mri) turns "1e3" into 1000 and "0x10" into 16 before a command sees them, so
// `proxy logs --tail 1e3` asked for 1000 lines. Now such a value is a usage error (exit 2) naming
// the option and the value as typed.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';

const bin = new URL('../../bin/proxy.mjs', import.meta.url).pathname;

const run = (args: string[], input = '') => new Promise<{ code: number | null; stderr: string }>((resolve) => {
  const child = execFile(process.execPath, [bin, ...args], { encoding: 'utf8', timeout: 20_000 }, (_err, _stdout, stderr) => {
    resolve({ code: child.exitCode, stderr });
  });
  child.stdin?.end(input);
});

test('proxy logs: --tail and --worker digits only (1e3, 0x10, 20.0 refused before any request), exit 2', async () => {
  for (const [args, shown] of [
    [['--tail', '1e3'], '--tail must be digits only (a whole number), got "1e3"'],
    [['--tail=1e3'], '--tail must be digits only (a whole number), got "1e3"'],
    [['--tail', '0x10'], '--tail must be digits only (a whole number), got "0x10"'],
    [['--tail', '20.0'], '--tail must be digits only (a whole number), got "20.0"'],
    [['--worker', '1e0'], '--worker must be digits only (a whole number), got "1e0"'],
  ] as const) {
    const r = await run(['logs', '--url', 'http://127.0.0.1:1', '--no-follow', ...args]);
    assert.equal(r.code, 2, `${args.join(' ')}: ${r.stderr}`);
    assert.equal(r.stderr, `proxy logs: ${shown}\n`);
  }
});

test('proxy user add --iterations, proxy bench --connections, proxy devdb --port/--replica-set, proxy serve --workers: digits only, exit 2', async () => {
  const user = await run(['user', 'add', 'carol', '--iterations', '1e4'], 'pw\n');
  assert.equal(user.code, 2, user.stderr);
  assert.match(user.stderr, /--iterations must be digits only \(a whole number\), got "1e4"/);
  const bench = await run(['bench', '--connections', '1e1', '--duration', '100ms', '--target', 'mongodb://127.0.0.1:1']);
  assert.equal(bench.code, 2, bench.stderr);
  assert.match(bench.stderr, /--connections "1e1" is not a whole number/);
  const port = await run(['devdb', '--port', '0x0']);
  assert.equal(port.code, 2, port.stderr);
  assert.match(port.stderr, /^proxy devdb: --port must be digits only \(a whole number\), got "0x0"/);
  const rs = await run(['devdb', '--port', '0', '--replica-set', '2e0']);
  assert.equal(rs.code, 2, rs.stderr);
  assert.match(rs.stderr, /--replica-set must be digits only \(a whole number\), got "2e0"/);
  const serve = await run(['serve', '--listen', '127.0.0.1:0', '--workers', '1e0']);
  assert.equal(serve.code, 2, serve.stderr);
  assert.match(serve.stderr, /--workers.*1e0/);
});
