// runBench against an in-process devdb behind the proxy, and the CLI's refusal of bad options.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createServer, type AddressInfo } from 'node:net';
import { serialize } from 'bson';
import { CommandPeek, Framer, encodeOpMsg, parseOpMsg } from '../../runtime/wire/index.ts';
import { errorDocument } from '../../runtime/errors/index.ts';
import { after, before, describe, it } from 'node:test';
import { DevDbServer } from '../../runtime/devdb/index.ts';
import { startProxy, type RunningProxy } from '../../runtime/app/serve.ts';
import { parseConfig } from '../../runtime/config/index.ts';
import { runBench, parseDuration, BenchError } from '../../runtime/bench/index.ts';
import { withProxy } from '../helpers/proxy.ts';

describe('runBench through the proxy', () => {
  let devdb: DevDbServer;
  let proxy: RunningProxy;

  before(async () => {
    devdb = new DevDbServer();
    const { uri } = await devdb.listen();
    proxy = await startProxy(parseConfig({ listen: '127.0.0.1:0', upstream: { uri }, log: { level: 'error' } }, null));
  });
  after(async () => {
    await proxy?.close();
    await devdb?.close();
  });

  it('completes requests without errors and reports ordered percentiles', async () => {
    const progress: number[] = [];
    const r = await runBench({ target: proxy.uri, connections: 4, durationMs: 1100, op: 'find', onProgress: (p) => progress.push(p.requests) });
    assert.ok(r.requests > 0, `requests ${r.requests}`);
    assert.equal(r.errors, 0);
    const l = r.latencyUs;
    assert.ok(l.p50 > 0 && l.p50 <= l.p90 && l.p90 <= l.p99 && l.p99 <= l.max, JSON.stringify(l));
    assert.ok(r.throughput > 0);
    assert.equal(r.overheadNote, 'n/a (no profiling endpoint given)');
    assert.equal(r.overhead, null);
    assert.ok(progress.length >= 1, 'a progress report each second');
  });

  it('runs the insert and ping loops without errors', async () => {
    for (const op of ['insert', 'ping'] as const) {
      const r = await runBench({ target: proxy.uri, connections: 2, durationMs: 200, op });
      assert.ok(r.requests > 0, `${op}: requests ${r.requests}`);
      assert.equal(r.errors, 0, `${op}: errors`);
    }
  });
});

describe('runBench error counting', () => {
  it('counts ok: 0 replies as errors, matched by responseTo', async () => {
    // A target that accepts hello and refuses everything else with an error document.
    const server = createServer((socket) => {
      const framer = new Framer({
        onFrame(frame: Buffer) {
          const body = parseOpMsg(frame).body;
          const reply = new CommandPeek().read(body).op === 'hello' ? serialize({ ok: 1, isWritablePrimary: true }) : errorDocument(8000, 'refused ' +
            'for the test');
          socket.write(encodeOpMsg(1, frame.readInt32LE(4), 0, reply));
        },
        onFrameError() { socket.destroy(); },
      });
      socket.on('data', (c: Buffer) => framer.push(c));
      socket.on('error', () => {});
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const port = (server.address() as AddressInfo).port;
      const r = await runBench({ target: `mongodb://127.0.0.1:${port}`, connections: 2, durationMs: 200, op: 'ping' });
      assert.ok(r.requests > 0);
      assert.equal(r.errors, r.requests);
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });
});

describe('bench options', () => {
  it('parses durations with units and refuses the rest', () => {
    assert.equal(parseDuration('500ms'), 500);
    assert.equal(parseDuration('10s'), 10_000);
    assert.equal(parseDuration('1m'), 60_000);
    assert.equal(parseDuration('1.5s'), 1500);
    for (const bad of ['10', 'ten', '5x', '', '-1s', '0s']) assert.throws(() => parseDuration(bad), BenchError, bad);
  });

  it('proxy bench with a bad --duration exits 2 with a message', () => {
    const r = spawnSync(process.execPath, ['bin/proxy.mjs', 'bench', '--duration', '10x', '--target', 'mongodb://127.0.0.1:1'],
      { encoding: 'utf8', timeout: 30_000 });
    assert.equal(r.status, 2, r.stderr);
    assert.match(r.stderr, /--duration "10x" is not a duration/);
  });

  it('proxy bench with a bad --connections exits 2 with a message', () => {
    const r = spawnSync(process.execPath, ['bin/proxy.mjs', 'bench', '--connections', 'many', '--duration', '1s'], { encoding: 'utf8', timeout: 30_000 });
    assert.equal(r.status, 2, r.stderr);
    assert.match(r.stderr, /--connections "many" is not a whole number/);
  });
});

describe('proxy bench pipeline overhead', () => {
  it('reads the overhead of the run from the proxy\'s profiling endpoint (total − upstream), or says why not', async (t) => {
    const { proxy: p } = await withProxy(t, { profiling: { enabled: true, port: 0 } });
    const r = await runBench({ target: p.uri, connections: 2, durationMs: 500, op: 'find', profilingUrl: p.profilingUrl });
    assert.ok(r.overhead !== null, r.overheadNote);
    assert.ok(r.overhead.requests >= r.requests, `sampled ${r.overhead.requests} of ${r.requests} (plus the seeding)`);
    assert.equal(r.overhead.avgOverheadUs, r.overhead.avgTotalUs - r.overhead.avgUpstreamUs);
    assert.ok(r.overhead.avgTotalUs > 0);
    assert.match(r.overheadNote, /^\d+ µs per request \(total \d+ µs − upstream \d+ µs; \d+ requests sampled at http:/);
    const none = await runBench({ target: p.uri, connections: 1, durationMs: 100, op: 'ping', profilingUrl: 'http://127.0.0.1:1' });
    assert.equal(none.overhead, null);
    assert.match(none.overheadNote, /^n\/a \(profiling endpoint not reachable at http:\/\/127\.0\.0\.1:1\)$/);
  });
});
