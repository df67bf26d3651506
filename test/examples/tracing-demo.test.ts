// docs/tracing.md's "Try it": the collector stand-in, the proxy with examples/tracing/proxy.yaml
// and examples/tracing/app.mjs print the app's span with the proxy's requests under it, one tree
// (the docs show that output), not the app's span and the proxy's as two traces printed apart.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { freePort } from '../helpers/ports.ts';
import { spawnServe } from '../helpers/serve.ts';
import { until } from '../helpers/until.ts';

test('the tracing demo prints the app span with the proxy requests under it', { timeout: 120_000 }, async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'tracing-demo-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const port = await freePort();
  const collector = spawn(process.execPath, ['examples/tracing/print-collector.mjs'],
    { env: { ...process.env, PORT: String(port) }, stdio: ['ignore', 'pipe', 'pipe'] });
  t.after(() => collector.kill());
  let printed = '';
  collector.stdout.on('data', (d) => { printed += d; });
  await until(() => `the collector: ${printed}`, () => printed.includes(`127.0.0.1:${port}/v1/traces`));

  // The example as it is, but on ports of the test's own.
  const config = join(dir, 'proxy.yaml');
  writeFileSync(config, readFileSync('examples/tracing/proxy.yaml', 'utf8')
    .replace('http://127.0.0.1:4318', `http://127.0.0.1:${port}`)
    .replace('listen: 127.0.0.1:9092', 'listen: 127.0.0.1:0'));
  const proxy = await spawnServe(['--config', config, '--listen', '127.0.0.1:0']);
  t.after(() => proxy.stop());
  const uri = /mongodb:\/\/[^\s"]+/.exec(proxy.out())![0];

  const { stdout } = await promisify(execFile)(process.execPath, ['examples/tracing/app.mjs'],
    { env: { ...process.env, OTLP_URL: `http://127.0.0.1:${port}/v1/traces`, PROXY_URI: uri } });
  const traceId = /^trace ([0-9a-f]{32}):/.exec(stdout)![1];
  // The app's trace, printed once quiet: checkout at depth 1, the proxy's three requests under it.
  const tree = (): string => printed.split(/^(?=trace )/m).find((b) => b.startsWith(`trace ${traceId}\n  checkout [shop-app]`)) ?? '';
  await until(() => `the app's trace with the proxy's spans under checkout: ${printed}`,
    () => ['insert', 'find', 'count'].every((op) => new RegExp(`^ {4}proxy\\.request \\[proxy\\] \\d+ µs db\\.operation=${op} `, 'm').test(tree())),
    20_000, 100);
  assert.match(tree(), /^ {6}proxy\.step\.cache \[proxy\] \d+ µs proxy\.step\.phase=request/m);
  // No second print of the same trace with the proxy's spans at its root.
  assert.doesNotMatch(printed, new RegExp(`^trace ${traceId}\\n  proxy\\.request`, 'm'));
});
