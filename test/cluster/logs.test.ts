// `proxy logs` across workers: with `proxy serve --workers 2` (a real child process) the primary's
// ring holds every worker's lines, each with its `worker` index — the logging step's access lines
// too — and ?worker=<i> (proxy logs --worker) shows one worker's; a follower sees a worker's new
// lines. The forwarding is bounded: a worker whose batch has not left keeps at most MAX_LINES lines
// and drops (and counts) the rest without blocking; the primary's ring keeps its fixed size.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '../helpers/ports.ts';
import { until } from '../helpers/until.ts';
import { spawnServe } from '../helpers/serve.ts';
import { RawClient, opMsg } from '../helpers/wire.ts';
import { LogRing } from '../../runtime/log/index.ts';
import { FLUSH_MS, MAX_BYTES, MAX_LINES, WorkerLogForwarder, WorkerLogReceiver, type LogBatch } from '../../runtime/ipc/log-forward.ts';
import { runLogs } from '../../runtime/cli/logs.ts';
import type { WorkersView } from '../../runtime/http/surface.ts';

const TOKEN = 'cluster-logs-token-0123';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

test('a worker\'s forwarder keeps at most MAX_LINES lines while a batch is on its way, drops and counts the rest, and sends them next', async () => {
  const batches: LogBatch[] = [];
  const done: Array<() => void> = [];
  const f = new WorkerLogForwarder((b, d) => { batches.push(b); done.push(d); });
  for (let i = 0; i < 10; i++) f.push(`{"n":${i}}\n`);
  await until('the first batch', () => batches.length === 1, 5000, 5);
  assert.equal(batches[0].lines.length, 10);
  // The channel has not taken it: a flood waits here, bounded, and never blocks the caller.
  for (let i = 0; i < 5 * MAX_LINES; i++) f.push(Buffer.from(`{"flood":${i}}\n`));
  f.push('x'.repeat(MAX_BYTES + 1));
  assert.equal(f.waiting, MAX_LINES);
  await sleep(FLUSH_MS * 3);
  assert.equal(batches.length, 1, 'one batch in flight at a time');
  done[0]();
  await until('the second batch', () => batches.length === 2, 5000, 5);
  assert.equal(batches[1].lines.length, MAX_LINES);
  assert.equal(batches[1].dropped, 4 * MAX_LINES + 1);
  // The primary's end: its ring keeps its size, and the drop is said once.
  const ring = new LogRing(5);
  const warned: unknown[] = [];
  const r = new WorkerLogReceiver(ring, { warn: (_m, fields) => { warned.push(fields); } });
  r.accept(1, batches[1]);
  r.accept(1, { lines: [], dropped: 3 });
  assert.equal(ring.recent(100).length, 5);
  assert.deepEqual(warned, [{ worker: 1, dropped: 4 * MAX_LINES + 1 }]);
});

test('proxy serve --workers 2: the logs show both workers\' lines with their index, ?worker=<i> (proxy logs --worker) one worker\'s, and follow ' +
  'streams a worker\'s new lines', { timeout: 180_000 }, async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'proxy-cluster-logs-'));
  const [port, adminPort] = [await freePort(), await freePort()];
  const file = join(dir, 'proxy.json');
  writeFileSync(file, JSON.stringify({
    listen: `127.0.0.1:${port}`, log: { level: 'info' }, admin: { listen: `127.0.0.1:${adminPort}`, token: TOKEN, reload_on_change: false },
    pipeline: { response: ['logging'] }, steps: { logging: { config: { sample_rate: 1 } } },
  }));
  const served = await spawnServe(['--config', file, '--workers', '2']);
  t.after(() => served.stop());
  const adminUrl = `http://127.0.0.1:${adminPort}`;
  const get = (path: string) => fetch(`${adminUrl}${path}`, { headers: { authorization: `Bearer ${TOKEN}` } });
  const lines = async (query: string) => (await (await get(`/api/v1/logs?tail=1000${query}`)).text()).split('\n').filter((l) => l !== '')
    .map((l) => JSON.parse(l) as Record<string, unknown>);

  // Clients on both workers; each one finds in a collection of its own.
  const clients: RawClient[] = [];
  t.after(() => { for (const c of clients) c.destroy(); });
  for (;;) {
    const w = await (await get('/api/v1/workers')).json() as WorkersView;
    if (w.workers.length === 2 && w.workers.every((x) => x.connections_active >= 2)) break;
    clients.push(await RawClient.connect(port));
    assert.ok(clients.length < 40, `connections spread over both workers: ${JSON.stringify(w)}`);
  }
  await Promise.all(clients.map(async (c, i) => {
    const r = await c.roundTrip(opMsg({ find: `c${i}`, filter: {}, $db: 'logs' }), 15_000);
    assert.equal(r.body?.ok, 1);
  }));
  let access: Array<Record<string, unknown>> = [];
  await until('every client\'s access line in the primary\'s ring', async () => {
    access = (await lines('')).filter((l) => l.op === 'find' && l.db === 'logs');
    return access.length === clients.length;
  }, 10_000, 50);
  const byWorker = new Map<number, string[]>([[0, []], [1, []]]);
  for (const l of access) {
    assert.ok(l.worker === 0 || l.worker === 1, `an access line names its worker: ${JSON.stringify(l)}`);
    byWorker.get(l.worker as number)!.push(String(l.collection));
  }
  assert.ok(byWorker.get(0)!.length > 0 && byWorker.get(1)!.length > 0, 'both workers\' lines');
  const all = await lines('');
  assert.ok(all.some((l) => l.msg === 'proxy listening' && l.worker === undefined), 'the primary\'s own lines too');
  assert.ok(all.some((l) => l.msg === 'pipeline loaded' && l.worker === 1), 'a worker\'s start-up lines');

  // ?worker=0: worker 0's lines only, its access lines among them.
  const zero = await lines('&worker=0');
  assert.ok(zero.length > 0 && zero.every((l) => l.worker === 0), JSON.stringify(zero.slice(0, 3)));
  assert.deepEqual(zero.filter((l) => l.op === 'find' && l.db === 'logs').map((l) => String(l.collection)).sort(), byWorker.get(0)!.sort());
  for (const bad of ['2', 'x', '-1']) {
    const res = await get(`/api/v1/logs?worker=${bad}`);
    assert.equal(res.status, 400, bad);
    assert.equal((await res.json() as { error: { code: string } }).error.code, 'PROXY_ERR_BAD_QUERY');
  }
  // proxy logs --worker 1: the same filter from the command.
  const out: string[] = [];
  await runLogs({ url: adminUrl, token: TOKEN, follow: false, json: true, tail: 1000, worker: 1 }, (s) => { out.push(s); });
  const one = out.join('').split('\n').filter((l) => l !== '').map((l) => JSON.parse(l) as Record<string, unknown>);
  assert.deepEqual(one.filter((l) => l.op === 'find' && l.db === 'logs').map((l) => String(l.collection)).sort(), byWorker.get(1)!.sort());
  assert.ok(one.every((l) => l.worker === 1));

  // Following worker 1: a new request it serves shows up in the stream.
  const ac = new AbortController();
  const followed: string[] = [];
  const following = runLogs({ url: adminUrl, token: TOKEN, json: true, tail: 0, worker: 1 }, (s) => { followed.push(s); }, ac.signal);
  t.after(() => ac.abort());
  const oneIndex = Number(byWorker.get(1)![0].slice(1));
  await until('the followed line from worker 1', async () => {
    await clients[oneIndex].roundTrip(opMsg({ find: 'followed', filter: {}, $db: 'logs' }), 15_000);
    return followed.join('').includes('"collection":"followed"');
  }, 20_000, 200);
  assert.ok(followed.join('').split('\n').filter((l) => l !== '').every((l) => (JSON.parse(l) as { worker?: number }).worker === 1));
  ac.abort();
  await following;
});
