// The notification outbox deleted or replaced under a real proxy (`rm -rf` of its directory, a
// restore over it) while a message is pending (its webhook answers 500): the proxy notices at the
// next write (or within 10 s), logs it at `error` once, and writes the outbox anew from its open
// handle, so the message is still delivered when the receiver recovers, and after a kill -9 and a
// restart. Without the watch, the proxy went on writing into the unlinked file and the message was
// lost at the next restart with nothing said.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { httpReceiver, outboxRows, type HttpReceiver } from './helpers.ts';
import { until } from '../../helpers/until.ts';
import { freePort } from '../../helpers/ports.ts';

const bin = join(process.cwd(), 'bin/proxy.mjs');
const dir = mkdtempSync(join(tmpdir(), 'proxy-outbox-deleted-'));
after(() => rmSync(dir, { recursive: true, force: true }));
const TOKEN = 'outbox-control-token-0123456789';
const SECRET = 'outbox-webhook-secret-0123456789';

interface Running { child: ChildProcess; lines: Array<Record<string, unknown>>; stop(signal?: NodeJS.Signals): Promise<void> }

/** `proxy serve` until stopped; its JSON log lines as they come. */
async function serve(config: string): Promise<Running> {
  const child = spawn(process.execPath, [bin, 'serve', '--config', config, '--workers', '1'], { stdio: ['ignore', 'pipe', 'pipe'] });
  const lines: Array<Record<string, unknown>> = [];
  let out = '';
  let partial = '';
  child.stdout!.on('data', (d: Buffer) => { out += d; });
  child.stderr!.on('data', (d: Buffer) => {
    const parts = (partial + String(d)).split('\n');
    partial = parts.pop()!;
    for (const line of parts) {
      try { lines.push(JSON.parse(line)); } catch { out += `${line}\n`; }
    }
  });
  const stop = async (signal: NodeJS.Signals = 'SIGTERM') => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((r) => child.once('exit', r));
    child.kill(signal);
    await exited;
  };
  await until('the proxy', () => out.includes('is ready') || child.exitCode !== null, 60_000);
  assert.ok(out.includes('is ready'), out);
  return { child, lines, stop };
}

/** A proxy whose one webhook channel answers 500 until told otherwise, and a canary started: one message pending, failing. */
async function pendingMessage(name: string): Promise<{ proxy: Running; rx: HttpReceiver; outbox: string; config: string }> {
  const rx = await httpReceiver();
  rx.statuses.push(...Array.from({ length: 10_000 }, () => 500));
  const controlPort = await freePort();
  const outbox = join(dir, name, 'notify', 'outbox.sqlite');
  const config = join(dir, `${name}.json`);
  writeFileSync(config, JSON.stringify({
    listen: '127.0.0.1:0', log: { level: 'info', format: 'json' },
    pipeline: { id: 'default', request: [], response: [] },
    control_plane: { port: controlPort, tokens: [TOKEN] },
    canary: { data_dir: join(dir, name, 'canary') },
    notifications: {
      webhook_secret: SECRET, outbox_path: outbox, initial_backoff_ms: 100, max_backoff_ms: 300, max_attempts: 100,
      channels: [{ type: 'webhook', url: rx.url, events: ['canary.started'] }],
    },
  }));
  const proxy = await serve(config);
  const r = await fetch(`http://127.0.0.1:${controlPort}/api/v1/canary`, {
    method: 'POST', headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify({ pipeline_id: 'default', candidate_config: { steps: [{ type: 'logging', config: {} }] } }),
  });
  assert.equal(r.status, 201, await r.text());
  await until('two failed attempts', () => rx.received.length >= 2, 20_000);
  assert.equal(outboxRows(outbox)[0].state, 'pending');
  return { proxy, rx, outbox, config };
}

const outboxErrors = (p: Running, outbox: string, how: string) => p.lines.filter((l) => l.level === 'error' &&
  String(l.msg).startsWith(`the notification outbox ${outbox} was ${how} while the proxy runs`));

test('outbox directory deleted (rm -rf) with a message pending: logged once, written anew; delivered once the receiver recovers', {
  timeout: 120_000 }, async () => {
  const { proxy, rx, outbox } = await pendingMessage('deleted');
  try {
    const eventId = outboxRows(outbox)[0].event_id;
    rmSync(join(outbox, '..'), { recursive: true, force: true });
    // The next failed attempt is a write: the outbox notices before it.
    await until('the error line', () => outboxErrors(proxy, outbox, 'deleted').length > 0, 10_000);
    const e = outboxErrors(proxy, outbox, 'deleted')[0];
    assert.equal(e.file, outbox);
    assert.match(String(e.msg), /the notifications not yet delivered .* were written to a new .*outbox\.sqlite, so nothing is lost/);
    assert.ok(existsSync(outbox), 'written anew');
    assert.deepEqual(outboxRows(outbox).map((r) => [r.event_id, r.state]), [[eventId, 'pending']]);

    rx.statuses.length = 0; // the receiver recovers
    await until('the delivery', () => rx.received.some((r) => r.headers['x-proxy-event-id'] === eventId && rx.statuses.length === 0 &&
      outboxRows(outbox)[0].state === 'delivered'), 20_000);
    await proxy.stop();
    assert.equal(outboxRows(outbox)[0].state, 'delivered', 'in the file the next start opens');
    assert.equal(outboxErrors(proxy, outbox, 'deleted').length, 1, 'reported once');
  } finally {
    await proxy.stop('SIGKILL');
    await rx.close();
  }
});

test('outbox replaced by another file with a message pending: the other file is moved aside; after a kill -9 and a restart the message ' +
  'is delivered once', { timeout: 120_000 }, async () => {
  const { proxy, rx, outbox, config } = await pendingMessage('replaced');
  let second: Running | null = null;
  try {
    const eventId = outboxRows(outbox)[0].event_id;
    rmSync(outbox);
    const other = new Database(outbox);
    other.exec('CREATE TABLE unrelated (x)');
    other.close();
    await until('the error line', () => outboxErrors(proxy, outbox, 'replaced').length > 0, 10_000);
    const aside = String(outboxErrors(proxy, outbox, 'replaced')[0].moved_aside);
    assert.match(aside, /outbox\.sqlite\.replaced-\d{4}-\d\d-\d\dT\d{6}\.\d{3}Z$/);
    assert.ok(existsSync(aside), 'the replacing file is kept');
    await until('a later attempt recorded in the new file', () => outboxRows(outbox)[0].attempts >= 3, 10_000);
    await proxy.stop('SIGKILL');
    assert.deepEqual(outboxRows(outbox).map((r) => [r.event_id, r.state]), [[eventId, 'pending']]);

    rx.statuses.length = 0;
    const before = rx.received.length;
    second = await serve(config);
    await until('the delivery after the restart', () => outboxRows(outbox)[0].state === 'delivered', 20_000);
    const delivered = rx.received.slice(before);
    assert.equal(delivered.length, 1, 'exactly once');
    assert.equal(delivered[0].headers['x-proxy-event-id'], eventId);
  } finally {
    await proxy.stop('SIGKILL');
    await second?.stop();
    await rx.close();
  }
});
