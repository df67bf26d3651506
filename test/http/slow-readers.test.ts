// The HTTP answers that stay open and keep writing — the admin API's `GET /api/v1/logs?follow=true`
// and the control plane's WebSocket feed — hold a bounded amount for a client that reads slower than
// they write, or never reads: without a bound, each line (each status message) waited in the
// proxy's memory for as long as the client stayed connected, a few hundred MB within a minute of
// busy logging for a handful of followers that never read.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';
import WebSocket from 'ws';
import { LogRing } from '../../runtime/log/index.ts';
import { buildControlPlane, FEED_MAX_UNSENT_BYTES, FOLLOW_MAX_UNSENT_BYTES } from '../../runtime/http/index.ts';
import { CanaryError, type CanaryController } from '../../runtime/canary/index.ts';
import { ringOnlyAdminApp } from '../helpers/admin-surface.ts';

const TOKEN = 'slow-readers-token-0123456789';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The server side of every connection `server` accepts, for what it holds unsent (writableLength). */
function serverSockets(server: { on(event: 'connection', fn: (s: Socket) => void): unknown }): Socket[] {
  const list: Socket[] = [];
  server.on('connection', (s) => list.push(s));
  return list;
}

test('logs follow: a client that never reads holds at most ~1 MiB of lines in the proxy; once it reads, it is told how many were left out',
  { timeout: 60_000 }, async () => {
    const ring = new LogRing(100);
    const app = ringOnlyAdminApp(ring, TOKEN);
    const accepted = serverSockets(app.server);
    await app.listen({ host: '127.0.0.1', port: 0 });
    const port = (app.server.address() as { port: number }).port;
    const client = connect(port, '127.0.0.1');
    try {
      await new Promise((r) => client.once('connect', r));
      client.write(`GET /api/v1/logs?follow=true&tail=0 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${TOKEN}\r\n\r\n`);
      // Wait for the answer's head, then read nothing more.
      await new Promise((r) => client.once('data', r));
      client.pause();
      const line = JSON.stringify({ level: 'info', time: new Date().toISOString(), logger: 'proxy', msg: 'x'.repeat(1000) });
      // 64 MB of lines, far past what the kernel's socket buffers take.
      for (let i = 0; i < 64 * 1024; i++) {
        ring.push(line);
        if (i % 4096 === 0) await sleep(5);
      }
      const held = Math.max(...accepted.map((s) => s.writableLength));
      assert.ok(held <= FOLLOW_MAX_UNSENT_BYTES + 2 * line.length, `the follower's unsent lines are bounded: ${held} bytes held`);
      // The client reads again: the next line is preceded by one saying how many were left out.
      let text = '';
      client.on('data', (d: Buffer) => { text += d.toString('latin1'); });
      client.resume();
      for (let i = 0; i < 200 && !text.includes('left out of this stream'); i++) {
        await sleep(20);
        ring.push(JSON.stringify({ level: 'info', msg: 'after' }));
      }
      // (Several such lines when the kernel took more of the stream while the lines were written.)
      const told = text.split('\n').filter((l) => l.includes('left out of this stream')).map((l) => JSON.parse(l.slice(l.indexOf('{'))));
      assert.ok(told.length > 0, 'a line says lines were left out');
      assert.ok(told.every((t) => t.level === 'warn' && t.logger === 'proxy'), JSON.stringify(told[0]));
      const n = told.reduce((sum, t) => sum + t.skipped, 0);
      assert.ok(n > 1000, `what the kernel did not take was left out: ${n} lines`);
    } finally {
      client.destroy();
      await app.close();
    }
  });

/** A controller with one canary, `id`, whose status is `size` bytes of JSON; `gone()` makes it unknown from then on. */
function fakeController(id: string, size: number): { controller: CanaryController; gone(): void } {
  let exists = true;
  const view = { canary_id: id, pad: 'p'.repeat(size) };
  const live = (x: string) => {
    if (!exists || x !== id) throw new CanaryError('PROXY_ERR_CANARY_NOT_FOUND', `no canary "${x}"`);
  };
  const controller = {
    settled: async () => {},
    status: (x: string) => { live(x); return view; },
    subscribe: (x: string) => { live(x); return () => {}; },
  } as unknown as CanaryController;
  return { controller, gone: () => { exists = false; } };
}

test('WebSocket feed: a client that never reads holds at most ~1 MiB of status messages in the proxy', { timeout: 60_000 }, async () => {
  const size = 256 * 1024;
  const { controller } = fakeController('c-big', size);
  const app = buildControlPlane(controller, { tokens: [TOKEN] });
  const accepted = serverSockets(app.server);
  await app.listen({ host: '127.0.0.1', port: 0 });
  const port = (app.server.address() as { port: number }).port;
  const ws = new WebSocket(`ws://127.0.0.1:${port}/api/v1/canary/c-big/feed?interval_ms=100`, { headers: { authorization: `Bearer ${TOKEN}` } });
  try {
    await new Promise((r) => ws.once('open', r));
    // Stop reading the socket under the client: the server's messages (2.5 MB/s) pile up.
    (ws as unknown as { _socket: Socket })._socket.pause();
    await sleep(8000);
    const held = Math.max(...accepted.map((s) => s.writableLength));
    assert.ok(held <= FEED_MAX_UNSENT_BYTES + 2 * size, `the feed's unsent messages are bounded: ${held} bytes held`);
  } finally {
    ws.terminate();
    await app.close();
  }
});

test('WebSocket feed: a canary gone after the feed opened closes the feed with 4404, not the process with an uncaught throw', async () => {
  const { controller, gone } = fakeController('c-gone', 10);
  const app = buildControlPlane(controller, { tokens: [TOKEN] });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const port = (app.server.address() as { port: number }).port;
  try {
    const ws = new WebSocket(`ws://127.0.0.1:${port}/api/v1/canary/c-gone/feed?interval_ms=100`, { headers: { authorization: `Bearer ${TOKEN}` } });
    await new Promise((r) => ws.once('message', r));
    gone();
    const code = await new Promise<number>((r) => ws.once('close', (c) => r(c)));
    assert.equal(code, 4404);
  } finally {
    await app.close();
  }
});
