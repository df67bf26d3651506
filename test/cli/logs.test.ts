// `proxy logs` against a running proxy: the recent lines from the admin port's ring, filtered by
// text and level, the last --tail of them, readable or --json, then following new lines as they are
// written; and the logger under it (pino JSON lines with ISO 8601 UTC times and logger names).
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';
import { MongoClient } from 'mongodb';
import { parseConfig } from '../../runtime/config/index.ts';
import { startProxy, type RunningProxy } from '../../runtime/app/serve.ts';
import { Logger, LogRing } from '../../runtime/log/index.ts';
import { runLogs } from '../../runtime/cli/logs.ts';

const TOKEN = 'logs-test-token-0123456789';
const running: RunningProxy[] = [];
after(async () => {
  for (const p of running) await p.close().catch(() => {});
});

async function start(ringLines = 1000): Promise<{ proxy: RunningProxy; log: Logger; stderr: string[] }> {
  const config = parseConfig({
    listen: '127.0.0.1:0', log: { level: 'debug', ring_lines: ringLines },
    admin: { listen: '127.0.0.1:0', token: TOKEN },
    pipeline: { request: ['filter'], response: ['logging'] },
    steps: { logging: { config: { sample_rate: 1 } } },
  }, null);
  const stderr: string[] = [];
  // The logger `proxy serve` builds, with a sink the test reads instead of stderr.
  const log = new Logger('proxy', 'debug', 'json', { write: (l) => { stderr.push(l); } }, new LogRing(config.log.ring_lines));
  const proxy = await startProxy(config, { log });
  running.push(proxy);
  return { proxy, log, stderr };
}

async function collect(opts: Parameters<typeof runLogs>[0], proxy: RunningProxy): Promise<string[]> {
  const out: string[] = [];
  await runLogs({ url: proxy.adminUrl!, token: TOKEN, follow: false, ...opts }, (s) => { out.push(s); });
  return out.join('').split('\n').filter((l) => l !== '');
}

test('the logger writes pino JSON lines: level, ISO 8601 UTC time, logger name, fields, msg; the plugin record path too', async () => {
  const { proxy, stderr } = await start();
  const client = new MongoClient(proxy.uri);
  await client.db('app').collection('c').findOne({});
  await client.close();
  const lines = stderr.join('').trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
  const listening = lines.find((l) => l.msg === 'proxy listening')!;
  assert.equal(listening.level, 'info');
  assert.equal(listening.logger, 'proxy');
  assert.match(String(listening.time), /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
  assert.ok(lines.some((l) => l.logger === 'proxy::pipeline' && l.msg === 'pipeline loaded'));
  // The logging step's access line comes through the pre-encoded record path.
  const access = lines.find((l) => l.op === 'find' && l.collection === 'c');
  assert.ok(access !== undefined, 'the logging step wrote its access line');
  assert.equal(access.logger, 'proxy::pipeline');
  // The ring holds the same lines, byte for byte.
  const ringLines = proxy.logRing!.recent(1000);
  assert.deepEqual(ringLines, stderr.join('').trim().split('\n'));
});

test('proxy logs: --filter, --level and --tail select from the ring; readable by default, --json as written', async () => {
  const { proxy, log } = await start();
  const tel = log.child('proxy::telemetry');
  for (let i = 0; i < 30; i++) tel.debug('debug line', { i });
  tel.warn('export trouble', { i: 1 });
  tel.error('export broken', { i: 2 });
  log.child('proxy::canary').warn('canary trouble', { pipeline_id: 'p1' });

  const warn = await collect({ level: 'warn', json: true }, proxy);
  assert.deepEqual(warn.map((l) => JSON.parse(l).msg), ['export trouble', 'export broken', 'canary trouble']);
  const filtered = await collect({ filter: 'CANARY', json: true }, proxy);
  assert.deepEqual(filtered.map((l) => JSON.parse(l).logger), ['proxy::canary'], '--filter is case-insensitive text');
  const tail = await collect({ filter: 'debug line', tail: 5, json: true }, proxy);
  assert.deepEqual(tail.map((l) => JSON.parse(l).i), [25, 26, 27, 28, 29], '--tail keeps the last n matching lines');
  const human = await collect({ level: 'error' }, proxy);
  assert.equal(human.length, 1);
  assert.match(human[0], /^\d{4}-\d\d-\d\dT[\d:.]+Z ERROR proxy::telemetry export broken i=2$/);
});

test('GET /api/v1/logs?worker=<i> on a proxy in one process: 400 PROXY_ERR_BAD_QUERY, no worker to choose', async () => {
  const { proxy } = await start();
  const res = await fetch(`${proxy.adminUrl}/api/v1/logs?worker=0`, { headers: { authorization: `Bearer ${TOKEN}` } });
  assert.equal(res.status, 400);
  const body = await res.json() as { error: { code: string; message: string } };
  assert.equal(body.error.code, 'PROXY_ERR_BAD_QUERY');
  assert.match(body.error.message, /one process/);
});

test('proxy logs follows: lines written after it started arrive, filtered, until it is stopped', async () => {
  const { proxy, log } = await start();
  const out: string[] = [];
  const stop = new AbortController();
  const done = runLogs({ url: proxy.adminUrl!, token: TOKEN, tail: 0, level: 'info', filter: 'wanted', json: true }, (s) => { out.push(s); }, stop.signal);
  await new Promise((r) => setTimeout(r, 200));
  log.info('wanted one', { n: 1 });
  log.debug('wanted but debug', { n: 2 });
  log.info('unrelated', { n: 3 });
  log.warn('wanted two', { n: 4 });
  const deadline = Date.now() + 5000;
  while (out.join('').split('\n').filter(Boolean).length < 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  stop.abort();
  await done;
  assert.deepEqual(out.join('').trim().split('\n').map((l) => JSON.parse(l).n), [1, 4]);
});

test('the proxy logs command: exits 2 with a reason when the token is wrong; log.ring_lines 0 answers 404', async () => {
  const { proxy } = await start(0);
  const bin = fileURLToPath(new URL('../../bin/proxy.mjs', import.meta.url));
  const run = (args: string[]) => new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
    const p = spawn(process.execPath, [bin, 'logs', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    p.stdout.on('data', (c) => { stdout += c; });
    p.stderr.on('data', (c) => { stderr += c; });
    p.on('close', (code) => resolve({ code, stdout, stderr }));
  });
  const bad = await run(['--url', proxy.adminUrl!, '--token', 'wrong-token-0123456789', '--no-follow']);
  assert.equal(bad.code, 2);
  assert.match(bad.stderr, /token rejected/);
  const none = await run(['--url', proxy.adminUrl!, '--token', TOKEN, '--no-follow']);
  assert.equal(none.code, 2);
  assert.match(none.stderr, /404: no recent logs are kept \(log.ring_lines is 0\)/);
});

test('proxy logs reaches an admin API on a port fetch refuses (6000)', async (t) => {
  // Fetch (undici) refuses the Fetch standard's "bad ports" whatever the server; 6000 is one.
  const probe = createServer();
  const free = await new Promise<boolean>((resolve) => {
    probe.once('error', () => resolve(false));
    probe.listen(6000, '127.0.0.1', () => probe.close(() => resolve(true)));
  });
  if (!free) {
    t.skip('port 6000 is in use on this machine: the bad-port case is not tested');
    return;
  }
  await assert.rejects(fetch('http://127.0.0.1:6000/'), (err: Error & { cause?: Error }) => /bad port/.test(String(err.cause?.message)), 'fetch ' +
    'refuses port 6000');
  const config = parseConfig({ listen: '127.0.0.1:0', admin: { listen: '127.0.0.1:6000', token: TOKEN } }, null);
  const log = new Logger('proxy', 'info', 'json', { write: () => {} }, new LogRing(100));
  const proxy = await startProxy(config, { log });
  running.push(proxy);
  log.info('said on a bad port', { n: 6000 });
  const lines = await collect({ filter: 'bad port', json: true }, proxy);
  assert.deepEqual(lines.map((l) => JSON.parse(l).n), [6000]);
  await proxy.close();
});

test('proxy logs: a client-chosen string (a collection name with ESC sequences, a newline) prints as one line, control characters escaped', async () => {
  const { proxy } = await start();
  const hostile = 'c\x1b[2J\x1b]0;pwned\x07\nforged ERROR proxy fake line\u202e';
  const client = new MongoClient(proxy.uri, { appName: 'app\x1b[31m' });
  await client.db('app').collection(hostile).findOne({});
  await client.close();
  const out: string[] = [];
  await runLogs({ url: proxy.adminUrl!, token: TOKEN, follow: false, filter: 'forged' }, (s) => { out.push(s); });
  const text = out.join('');
  assert.ok(text.length > 0, 'the access line was shown');
  // eslint-disable-next-line no-control-regex -- looking for the control characters is the point
  assert.doesNotMatch(text.slice(0, -1), /[\u0000-\u001f\u007f-\u009f\u202e]/, 'nothing a terminal acts on is printed raw');
  assert.equal(text.split('\n').length, 2, 'the newline in the name forged no line');
  assert.ok(text.includes('collection=c\\u001b[2J\\u001b]0;pwned\\u0007\\nforged ERROR proxy fake line\\u202e'), text);
});

test('log.format pretty: a plugin\'s access line holding a client\'s C1 control or bidi override prints them escaped', async () => {
  const config = parseConfig({
    listen: '127.0.0.1:0', log: { level: 'info', format: 'pretty' },
    pipeline: { request: [], response: ['logging'] }, steps: { logging: { config: { sample_rate: 1 } } },
  }, null);
  const stderr: string[] = [];
  const proxy = await startProxy(config, { log: new Logger('proxy', 'info', 'pretty', { write: (l) => { stderr.push(l); } }) });
  running.push(proxy);
  const client = new MongoClient(proxy.uri);
  await client.db('app').collection('c\u009b2J\u202eevil').findOne({});
  await client.close();
  const access = stderr.join('').split('\n').find((l) => l.includes('"op":"find"'));
  assert.ok(access !== undefined, stderr.join(''));
  // eslint-disable-next-line no-control-regex -- looking for the control characters is the point
  assert.doesNotMatch(access, /[\u0000-\u001f\u007f-\u009f\u202e]/, JSON.stringify(access));
  assert.ok(access.includes('"collection":"c\\u009b2J\\u202eevil"'), access);
});
