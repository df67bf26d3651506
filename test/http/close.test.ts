// An HTTP app closing (the proxy shutting down on SIGTERM, or a reload moving an API to another
// address) is never held by a client. Node's HTTP server stops enforcing the request timeout once it
// closes and waits for every connection, so a client that sent part of a request and nothing more
// (no token needed), an open canary feed (the dashboard's widget) or a `proxy logs` follow kept
// `proxy serve` from exiting for as long as that client stayed — the profiling endpoint and the
// control plane close before the wire port drains, so the data plane was not even drained.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import WebSocket from 'ws';
import { LogRing } from '../../runtime/log/index.ts';
import { buildControlPlane, CLOSE_GRACE_MS } from '../../runtime/http/index.ts';
import type { CanaryController } from '../../runtime/canary/index.ts';
import { ringOnlyAdminApp } from '../helpers/admin-surface.ts';
import { spawnServe } from '../helpers/serve.ts';
import { freePort } from '../helpers/ports.ts';

const TOKEN = 'close-test-token-0123456789';

/** A raw connection that writes `text` and then nothing; resolves once connected. */
async function stalled(port: number, text: string): Promise<Socket> {
  const s = connect(port, '127.0.0.1');
  s.on('error', () => {});
  await new Promise((r) => s.once('connect', r));
  s.write(text);
  return s;
}

/** How long `close` takes (ms), or Infinity past `limit` ms. */
async function timed(close: () => Promise<unknown>, limit: number): Promise<number> {
  const t = Date.now();
  const done = close().then(() => Date.now() - t);
  return Promise.race([done, new Promise<number>((r) => setTimeout(() => r(Infinity), limit).unref())]);
}

test('admin app: closes at once with a request stalled in its headers, one stalled in its body and a logs follow open', { timeout: 30_000 }, async () => {
  const ring = new LogRing(10);
  const app = ringOnlyAdminApp(ring, TOKEN);
  await app.listen({ host: '127.0.0.1', port: 0 });
  const port = (app.server.address() as { port: number }).port;
  const headers = await stalled(port, 'GET /healthz HTTP/1.1\r\nHost: x\r\n');
  const body = await stalled(port, `POST /api/v1/reload HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${TOKEN}\r\n` +
    'content-type: application/json\r\ncontent-length: 100\r\n\r\n{');
  const follow = await stalled(port, `GET /api/v1/logs?follow=true HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${TOKEN}\r\n\r\n`);
  let followed = '';
  follow.on('data', (d: Buffer) => { followed += d; });
  await new Promise((r) => setTimeout(r, 200));
  assert.match(followed, /^HTTP\/1\.1 200/);
  const closedFollow = new Promise((r) => follow.once('close', r));
  const ms = await timed(() => app.close(), 5000);
  assert.ok(ms < 2000, `closed in ${ms} ms`);
  await closedFollow;
  // The follow was ended properly (the chunked stream's last chunk), not cut.
  assert.match(followed, /\r\n0\r\n\r\n$/);
  for (const s of [headers, body, follow]) s.destroy();
});

test(`control plane: closes at once with a canary feed open; an answer its client does not read is cut ${CLOSE_GRACE_MS / 1000} s after`,
  { timeout: 60_000 }, async () => {
    const controller = {
      settled: async () => {},
      status: () => ({ canary_id: 'c-1', pad: 'p'.repeat(64 * 1024) }),
      subscribe: () => () => {},
      // An answer of 32 MB, still being made when the close begins.
      list: async () => {
        await new Promise((r) => setTimeout(r, 500));
        return { canaries: [], total: 0, pad: 'q'.repeat(32 * 1024 * 1024) };
      },
    } as unknown as CanaryController;
    const app = buildControlPlane(controller, { tokens: [TOKEN] });
    await app.listen({ host: '127.0.0.1', port: 0 });
    const port = (app.server.address() as { port: number }).port;
    const ws = new WebSocket(`ws://127.0.0.1:${port}/api/v1/canary/c-1/feed`, { headers: { authorization: `Bearer ${TOKEN}` } });
    await new Promise((r) => ws.once('open', r));
    const feedClosed = new Promise((r) => ws.once('close', r));
    assert.ok((await timed(() => app.close(), 5000)) < 2000, 'closed with the feed open');
    await feedClosed;

    // A request being answered when the close begins is answered; its client reads the head and then nothing.
    const app2 = buildControlPlane(controller, { tokens: [TOKEN] });
    await app2.listen({ host: '127.0.0.1', port: 0 });
    const port2 = (app2.server.address() as { port: number }).port;
    const reader = await stalled(port2, `GET /api/v1/canary HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${TOKEN}\r\n\r\n`);
    const head = new Promise((r) => reader.once('data', r)).then(() => reader.pause());
    await new Promise((r) => setTimeout(r, 100));
    const ms = await timed(() => app2.close(), CLOSE_GRACE_MS + 10_000);
    await head;
    assert.ok(ms >= CLOSE_GRACE_MS - 100 && ms < CLOSE_GRACE_MS + 3000, `closed in ${ms} ms`);
    reader.destroy();
  });

test('proxy serve: SIGTERM exits within the drain with stalled HTTP clients on every API, a canary feed and a logs follow open', { timeout: 120_000 },
  async () => {
    const dir = mkdtempSync(join(tmpdir(), 'http-close-'));
    const [admin, profiling, cp] = [await freePort(), await freePort(), await freePort()];
    const file = join(dir, 'proxy.json');
    writeFileSync(file, JSON.stringify({
      listen: '127.0.0.1:0', log: { level: 'warn' },
      admin: { listen: `127.0.0.1:${admin}`, token: TOKEN, reload_on_change: false },
      profiling: { enabled: true, port: profiling },
      control_plane: { port: cp, tokens: [TOKEN] },
      canary: { data_dir: join(dir, 'canary') },
      shutdown: { drain_timeout_ms: 2000 },
    }));
    const served = await spawnServe(['--config', file]);
    const clients: Socket[] = [];
    let ws: WebSocket | null = null;
    try {
      for (const port of [admin, profiling, cp]) clients.push(await stalled(port, 'GET /metrics HTTP/1.1\r\nHost: x\r\n'));
      clients.push(await stalled(admin, `GET /api/v1/logs?follow=true HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${TOKEN}\r\n\r\n`));
      const started = await fetch(`http://127.0.0.1:${cp}/api/v1/canary`, { method: 'POST', headers: { authorization: `Bearer ${TOKEN}`,
        'content-type': 'application/json' }, body: JSON.stringify({ pipeline_id: 'default', candidate_config: { steps: [] } }) });
      const id = ((await started.json()) as { canary_id: string }).canary_id;
      assert.equal(started.status, 201, id);
      ws = new WebSocket(`ws://127.0.0.1:${cp}/api/v1/canary/${id}/feed`, { headers: { authorization: `Bearer ${TOKEN}` } });
      ws.on('error', () => {});
      await new Promise((r) => ws!.once('open', r));
      const t = Date.now();
      const code = await Promise.race([served.stop('SIGTERM'), new Promise((r) => setTimeout(r, 20_000, 'still running after 20 s'))]);
      assert.equal(code, 0, served.err().slice(-2000));
      assert.ok(Date.now() - t < 15_000, `exited in ${Date.now() - t} ms`);
    } finally {
      for (const s of clients) s.destroy();
      ws?.terminate();
      await served.stop('SIGKILL');
    }
  });
