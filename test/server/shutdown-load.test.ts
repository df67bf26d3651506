// SIGTERM under steady load: `proxy serve` (a child process) drains and exits 0, and no request a
// client wrote goes unanswered — each gets its reply, or ShutdownInProgress (91) with the
// RetryableWriteError label — and every connection ends on a reply boundary. Some clients pipeline
// two requests, so requests read but not yet started are covered too.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import type { ChildProcess } from 'node:child_process';
import { deserialize } from 'bson';
import { freePort, startChild } from '../../bench/lib.ts';
import { Framer } from '../../runtime/wire/index.ts';
import { opMsg } from '../helpers/wire.ts';

const ROOT = new URL('../..', import.meta.url).pathname;
const CONNECTIONS = 16;
const DRAIN_MS = 3000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Outcome { sent: number; ok: number; shutdown: number; otherErrors: number; unanswered: number; midReplyClose: boolean }

/** One client: keeps `depth` find requests outstanding until the proxy closes the connection. */
function loadClient(port: number, depth: number): { done: Promise<Outcome> } {
  const out: Outcome = { sent: 0, ok: 0, shutdown: 0, otherErrors: 0, unanswered: 0, midReplyClose: false };
  const outstanding = new Set<number>();
  let nextId = 1;
  let refused = false;
  const socket: Socket = connect({ host: '127.0.0.1', port });
  const send = () => {
    if (socket.destroyed || socket.writableEnded) return;
    const id = nextId++;
    outstanding.add(id);
    out.sent++;
    socket.write(opMsg({ find: 'items', filter: { _id: id % 10 }, $db: 'shutdown_load' }, { reqId: id }));
  };
  const framer = new Framer({
    onFrame(f: Buffer) {
      const responseTo = f.readInt32LE(8);
      outstanding.delete(responseTo);
      const body = deserialize(f.subarray(21));
      if (body.ok === 1) out.ok++;
      else if (body.code === 91 && (body.errorLabels as string[] | undefined)?.includes('RetryableWriteError')) {
        // As a driver does: a shutdown error marks the server unknown; this connection is not used again.
        out.shutdown++;
        refused = true;
      } else out.otherErrors++;
      if (!refused) send();
    },
    onFrameError() { out.otherErrors++; },
  });
  socket.on('data', (c: Buffer) => framer.push(c));
  socket.once('connect', () => { for (let i = 0; i < depth; i++) send(); });
  const done = new Promise<Outcome>((resolve) => {
    socket.on('error', () => {});
    socket.once('close', () => {
      out.unanswered = outstanding.size;
      out.midReplyClose = framer.buffered > 0;
      resolve(out);
    });
  });
  return { done };
}

for (const workers of [1, 2]) test(`SIGTERM under ${CONNECTIONS} connections of load${workers > 1 ? ` with ${workers} workers (each drains)` : ''}: exit 0 ` +
  'within the drain deadline, every request written is answered', { timeout: 90_000 }, async () => {
  const tmp = mkdtempSync(join(tmpdir(), 'shutdown-load-'));
  const port = await freePort();
  const configFile = join(tmp, 'proxy.json');
  writeFileSync(configFile, JSON.stringify({ listen: `127.0.0.1:${port}`, log: { level: 'warn' }, shutdown: { drain_timeout_ms: DRAIN_MS } }));
  let child: ChildProcess | null = null;
  try {
    child = await startChild('proxy', process.execPath, [join(ROOT, 'bin/proxy.mjs'), 'serve', '--config', configFile, '--workers', String(workers)],
      port, ROOT);
    const exited = new Promise<number | null>((resolve) => child!.once('exit', (code) => resolve(code)));
    const clients = Array.from({ length: CONNECTIONS }, (_, i) => loadClient(port, i % 4 === 0 ? 2 : 1));
    await sleep(1500);
    const t0 = performance.now();
    child.kill('SIGTERM');
    const code = await exited;
    const exitMs = performance.now() - t0;
    const outcomes = await Promise.all(clients.map((c) => c.done));
    const sum = (k: 'sent' | 'ok' | 'shutdown' | 'otherErrors' | 'unanswered') => outcomes.reduce((n, o) => n + o[k], 0);
    console.log(`shutdown under load (${workers} workers): exit ${code} after ${exitMs.toFixed(0)} ms; ${sum('sent')} requests, ${sum('ok')} ok, `
      + `${sum('shutdown')} ShutdownInProgress, ${sum('otherErrors')} other errors, ${sum('unanswered')} unanswered`);
    assert.equal(code, 0, 'exit code');
    assert.ok(exitMs < DRAIN_MS + 2000, `exited after ${exitMs.toFixed(0)} ms (drain deadline ${DRAIN_MS} ms)`);
    assert.ok(sum('ok') > CONNECTIONS * 10, 'the load ran before the signal');
    assert.equal(sum('otherErrors'), 0, 'no error other than ShutdownInProgress');
    assert.equal(sum('unanswered'), 0, 'every request written got an answer before its connection closed');
    assert.ok(outcomes.every((o) => !o.midReplyClose), 'connections close on reply boundaries');
  } finally {
    if (child !== null && child.exitCode === null) child.kill('SIGKILL');
    rmSync(tmp, { recursive: true, force: true });
  }
});
