// The trace export thread (runtime/telemetry/export-thread.ts) against a real HTTP server: a batch
// arrives as its envelope-wrapped bytes, a refusal and a dead thread are reported as failed exports
// (the queue counts their spans as dropped), and the next export after a dead thread starts another.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { ThreadedTraceExporter } from '../../runtime/telemetry/export-thread.ts';
import { BatchEnvelope } from '../../runtime/telemetry/span-writer.ts';
import type { ExportResult } from '../../runtime/telemetry/span-queue.ts';

interface Received { url: string; type: string; body: Buffer }

/** An HTTP server on 127.0.0.1 answering each POST with `status()`, or holding it while `hold` is set. */
async function collector(status: () => number) {
  const received: Received[] = [];
  const held: http.ServerResponse[] = [];
  let hold = false;
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      received.push({ url: req.url ?? '', type: req.headers['content-type'] ?? '', body: Buffer.concat(chunks) });
      if (hold) held.push(res);
      else res.writeHead(status(), { 'content-type': 'application/x-protobuf' }).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}/v1/traces`, received, held,
    set hold(on: boolean) { hold = on; },
    close: () => new Promise<void>((resolve) => { for (const r of held) r.destroy(); server.closeAllConnections(); server.close(() => resolve()); }),
  };
}

const exportOnce = (exp: ThreadedTraceExporter, bytes: Uint8Array, spans: number) =>
  new Promise<ExportResult>((resolve) => exp.export({ bytes, spans }, resolve));

test('a batch goes through the thread as its envelope-wrapped bytes; a refusal is a failed export', async () => {
  let status = 200;
  const c = await collector(() => status);
  const envelope = new BatchEnvelope({ 'service.name': 'export-thread-test' }, 'pipeline-proxy');
  const exp = new ThreadedTraceExporter(envelope, { url: c.url, timeoutMillis: 5000 });
  try {
    const spans = Uint8Array.from([0x0a, 0x03, 1, 2, 3]);
    const ok = await exportOnce(exp, spans, 1);
    assert.equal(ok.code, 0, String(ok.error));
    assert.equal(c.received.length, 1);
    assert.equal(c.received[0]!.url, '/v1/traces');
    assert.equal(c.received[0]!.type, 'application/x-protobuf');
    assert.deepEqual(c.received[0]!.body, Buffer.from(envelope.wrap(spans)), 'the envelope-wrapped batch, byte for byte');

    status = 400;
    const refused = await exportOnce(exp, spans, 1);
    assert.equal(refused.code, 1);
    assert.ok(refused.error instanceof Error && refused.error.message.length > 0, 'the failure carries a message');
  } finally {
    await exp.shutdown();
    await c.close();
  }
});

test('a thread that dies fails the exports it had; the next export starts another thread', async () => {
  const c = await collector(() => 200);
  const exp = new ThreadedTraceExporter(new BatchEnvelope({ 'service.name': 'x' }, 'pipeline-proxy'), { url: c.url, timeoutMillis: 5000 });
  try {
    c.hold = true;
    const inFlight = exportOnce(exp, Uint8Array.from([0x0a, 0x00]), 3);
    while (c.received.length === 0) await new Promise((r) => setTimeout(r, 10));
    const thread = (exp as unknown as { worker: { terminate(): Promise<number> } }).worker;
    await thread.terminate();
    const failed = await inFlight;
    assert.equal(failed.code, 1);
    assert.match(String(failed.error?.message), /trace export thread exited/);

    c.hold = false;
    const next = await exportOnce(exp, Uint8Array.from([0x0a, 0x00]), 1);
    assert.equal(next.code, 0, String(next.error));
    assert.notEqual((exp as unknown as { worker: unknown }).worker, thread, 'a new thread');
    assert.equal(c.received.length, 2);
  } finally {
    await exp.shutdown();
    await c.close();
  }
});

test('shutdown waits for an export in flight, then ends the thread and fails what it had not answered', async () => {
  const c = await collector(() => 200);
  const envelope = new BatchEnvelope({ 'service.name': 'x' }, 'pipeline-proxy');
  // A collector that answers: shutdown lets the export finish first.
  const exp = new ThreadedTraceExporter(envelope, { url: c.url, timeoutMillis: 5000 }, 2000);
  const answered = exportOnce(exp, Uint8Array.from([0x0a, 0x00]), 1);
  await exp.shutdown();
  assert.equal((await answered).code, 0);
  // A collector that holds the request past the shutdown wait (200 ms): the export fails, the thread ends.
  const held = new ThreadedTraceExporter(envelope, { url: c.url, timeoutMillis: 5000 }, 200);
  try {
    c.hold = true;
    const inFlight = exportOnce(held, Uint8Array.from([0x0a, 0x00]), 2);
    while (c.received.length < 2) await new Promise((r) => setTimeout(r, 10));
    const started = Date.now();
    await held.shutdown();
    assert.ok(Date.now() - started < 2000, 'shutdown ends after its wait, not the export timeout');
    const result = await inFlight;
    assert.equal(result.code, 1);
    assert.match(String(result.error?.message), /trace export thread was ended at shutdown/);
    assert.equal((held as unknown as { worker: unknown }).worker, null);
  } finally {
    await c.close();
  }
});
