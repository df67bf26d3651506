// The primary's heartbeat and restart backoff, with a real `proxy serve --workers 2`: a stopped
// (SIGSTOP) worker is ended and replaced within worker_heartbeat.timeout_ms, and new clients all
// connect and are served afterwards while the other worker's client is never interrupted; a reload
// waiting on it is refused then rather than after two minutes; a worker that is killed again each
// time it is replaced is forked again after growing delays, and is counted in the machine's /metrics; a
// worker ready seconds before the other is not ended at the first beat.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MongoClient } from 'mongodb';
import { until } from '../helpers/until.ts';
import { RawClient, opMsg } from '../helpers/wire.ts';
import { admin, startWorkers, type Started } from '../helpers/workers.ts';
import type { WorkersView } from '../../runtime/http/surface.ts';
import { restartDelayMs, RESTART_DELAY_MAX_MS } from '../../runtime/cluster/machine.ts';
import { parseConfig } from '../../runtime/config/index.ts';

const dir = mkdtempSync(join(tmpdir(), 'proxy-heartbeat-'));

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

test('the restart delay doubles from 0.5 s and stops growing at 30 s', () => {
  assert.deepEqual([0, 1, 2, 3, 4].map(restartDelayMs), [500, 1000, 2000, 4000, 8000]);
  assert.equal(restartDelayMs(6), RESTART_DELAY_MAX_MS);
  assert.equal(restartDelayMs(1000), RESTART_DELAY_MAX_MS);
});

test('worker_heartbeat: defaults, and a timeout shorter than two intervals refused with its key path', () => {
  assert.deepEqual(parseConfig({}, null).worker_heartbeat, { interval_ms: 1000, timeout_ms: 10000 });
  assert.equal(parseConfig({ worker_heartbeat: { timeout_ms: 0 } }, null).worker_heartbeat.timeout_ms, 0);
  assert.throws(() => parseConfig({ worker_heartbeat: { interval_ms: 1000, timeout_ms: 1500 } }, null),
    (err: Error) => /worker_heartbeat\.timeout_ms/.test(err.message) && /at least twice worker_heartbeat\.interval_ms \(2000\)/.test(err.message));
  assert.throws(() => parseConfig({ worker_heartbeat: { interval_ms: 10 } }, null), /worker_heartbeat\.interval_ms/);
});

test('a stopped worker is ended and replaced within the heartbeat timeout; new clients are all served, the other worker\'s client throughout',
  { timeout: 180_000 }, async () => {
    const s = await startWorkers(dir, 'stopped', { worker_heartbeat: { interval_ms: 200, timeout_ms: 2000 } });
    const raw: RawClient[] = [];
    let stoppedPid = 0;
    let load = true;
    let survivorLoad: Promise<void> = Promise.resolve();
    try {
      // Two connections, one per worker (handed out in turn), and which worker holds which.
      for (let i = 0; i < 2; i++) raw.push(await RawClient.connect(s.port));
      for (const c of raw) assert.equal((await c.roundTrip(opMsg({ find: 'items', filter: {}, $db: 'hb' }), 15_000)).body?.ok, 1);
      const before = (await admin<WorkersView>(s, '/api/v1/workers')).body;
      assert.deepEqual(before.workers.map((w) => w.connections_active), [1, 1], JSON.stringify(before.workers));
      stoppedPid = before.workers[0].pid;
      process.kill(stoppedPid, 'SIGSTOP');
      const stoppedAt = Date.now();
      // The survivor's client keeps being answered while the stopped one is found out and replaced.
      let served = 0, failed = 0;
      survivorLoad = (async () => {
        while (load) {
          for (const c of raw) {
            try {
              const r = await c.roundTrip(opMsg({ find: 'items', filter: {}, $db: 'hb' }), 1000);
              if (r.body?.ok === 1) served++;
            } catch {
              failed++;
            }
          }
        }
      })();
      await until('the stopped worker replaced', async () => {
        const v = (await admin<WorkersView>(s, '/api/v1/workers')).body;
        return v.workers.length === 2 && v.workers.every((w) => w.pid !== stoppedPid) && v.unresponsive === 1 && v.replaced === 1;
      }, 30_000, 100);
      const tookMs = Date.now() - stoppedAt;
      assert.ok(tookMs < 10_000, `replaced ${tookMs} ms after SIGSTOP (timeout 2000 ms)`);
      const text = await machineMetrics(s);
      assert.match(text, /^proxy_worker_restarts_total\{reason="unresponsive"\} 1$/m);
      assert.match(text, /^proxy_worker_restarts_total\{reason="exited"\} 0$/m);
      assert.match(text, /^proxy_workers 2$/m);
      await until('the stopped worker gone', () => !alive(stoppedPid), 10_000, 50);
      load = false;
      await survivorLoad;
      // Every round asked both: the stopped worker's client failed each time, the survivor's never.
      assert.ok(served > 0 && served >= failed, `survivor served ${served}, stopped worker's client failed ${failed}`);
      assert.match(s.served.err(), /worker unresponsive; ending it/);
      // Eight new clients with the real driver: all connect and are served (none lands on a hung worker).
      const outcomes = await Promise.all(Array.from({ length: 8 }, async (_, i) => {
        const client = new MongoClient(`mongodb://127.0.0.1:${s.port}/?directConnection=true`, { serverSelectionTimeoutMS: 5000, socketTimeoutMS: 5000 });
        try {
          await client.db('hb').collection('items').insertOne({ i });
          return (await client.db('hb').collection('items').findOne({ i }))?.i === i ? 'ok' : 'wrong';
        } catch (err) {
          return (err as Error).message;
        } finally {
          await client.close();
        }
      }));
      assert.deepEqual(outcomes, Array.from({ length: 8 }, () => 'ok'));
    } finally {
      load = false;
      await survivorLoad;
      for (const c of raw) c.destroy();
      if (stoppedPid !== 0 && alive(stoppedPid)) process.kill(stoppedPid, 'SIGKILL');
      assert.equal(await s.served.stop(), 0);
    }
  });

test('a reload waiting on a stopped worker is refused once the heartbeat ends it, not after 2 minutes; sent again, it applies', { timeout: 180_000 },
  async () => {
    const s = await startWorkers(dir, 'reload', { worker_heartbeat: { interval_ms: 200, timeout_ms: 2000 } });
    const pids = (await admin<WorkersView>(s, '/api/v1/workers')).body.workers.map((w) => w.pid);
    try {
      process.kill(pids[1], 'SIGSTOP');
      const next = { ...s.config, pipeline: { request: ['logging'], response: ['metrics'] } };
      const t0 = Date.now();
      const first = await admin<{ error?: { code: string; message: string } }>(s, '/api/v1/reload', { method: 'POST', body: JSON.stringify(next) });
      const tookMs = Date.now() - t0;
      assert.ok(first.status >= 400, `refused: ${first.status} ${JSON.stringify(first.body)}`);
      assert.match(first.body.error?.message ?? '', /worker 1.*exited/);
      assert.ok(tookMs < 30_000, `answered ${tookMs} ms after it was sent`);
      await until('the replacement', async () => {
        const v = (await admin<WorkersView>(s, '/api/v1/workers')).body;
        return v.workers.length === 2 && v.unresponsive === 1;
      }, 30_000, 100);
      assert.deepEqual((await admin<WorkersView>(s, '/api/v1/workers')).body.workers.map((w) => w.generations.default), [1, 1]);
      const again = await admin(s, '/api/v1/reload', { method: 'POST', body: JSON.stringify(next) });
      assert.equal(again.status, 200, JSON.stringify(again.body));
      assert.deepEqual((await admin<WorkersView>(s, '/api/v1/workers')).body.workers.map((w) => w.generations.default), [2, 2]);
    } finally {
      if (alive(pids[1])) process.kill(pids[1], 'SIGKILL');
      assert.equal(await s.served.stop(), 0);
    }
  });

/** The machine's /metrics (the profiling endpoint's). */
async function machineMetrics(s: Started): Promise<string> {
  return (await fetch(`${s.profiling}/metrics`)).text();
}

/** The primary's child processes (its workers), from /proc. */
function childrenOf(pid: number): number[] {
  return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter((x) => x !== '').map(Number);
}

test('a worker that dies again at every start is forked again after growing delays: 0.5, 1, 2, 4 s', { timeout: 180_000 }, async () => {
  const s = await startWorkers(dir, 'crashloop');
  const primary = s.served.child.pid!;
  try {
    let victim = (await admin<WorkersView>(s, '/api/v1/workers')).body.workers[1].pid;
    const delays: number[] = [];
    for (let round = 0; round < 4; round++) {
      const known = new Set(childrenOf(primary));
      process.kill(victim, 'SIGKILL');
      const killedAt = Date.now();
      // The fork itself (a new child of the primary), not the worker's start, which takes seconds on a busy machine.
      let forked = 0;
      await until(`fork ${round + 1}`, () => {
        forked = childrenOf(primary).find((p) => !known.has(p)) ?? 0;
        return forked !== 0;
      }, 60_000, 10);
      delays.push(Date.now() - killedAt);
      // Killed once it serves: a worker that dies soon after it is ready continues the crash loop.
      await until(`worker ${forked} ready`, async () => (await admin<WorkersView>(s, '/api/v1/workers')).body.workers.some((w) => w.pid === forked),
        90_000, 50);
      victim = forked;
    }
    [500, 1000, 2000, 4000].forEach((ms, i) => {
      assert.ok(delays[i] >= ms - 20 && delays[i] < ms + 1500, `fork ${i + 1} came ${delays[i]} ms after the exit, expected ${ms}: ${delays}`);
    });
    assert.match(s.served.err(), /"restart_in_ms":4000/);
    const text = await machineMetrics(s);
    assert.match(text, /^proxy_worker_restarts_total\{reason="exited"\} 4$/m);
    assert.match(text, /^proxy_worker_restarts_total\{reason="unresponsive"\} 0$/m);
    assert.match(text, /^proxy_worker_start_failures_total 0$/m);
  } finally {
    assert.equal(await s.served.stop(), 0);
  }
});

test('a replacement that dies while starting is counted as a start failure and tried again; the next one serves', { timeout: 180_000 }, async () => {
  const s = await startWorkers(dir, 'startfail');
  const primary = s.served.child.pid!;
  try {
    const victim = (await admin<WorkersView>(s, '/api/v1/workers')).body.workers[1].pid;
    const known = new Set(childrenOf(primary));
    process.kill(victim, 'SIGKILL');
    // The replacement is killed as soon as it is forked: seconds before it could be ready.
    let forked = 0;
    await until('the replacement forked', () => {
      forked = childrenOf(primary).find((p) => !known.has(p)) ?? 0;
      return forked !== 0;
    }, 60_000, 5);
    process.kill(forked, 'SIGKILL');
    await until('a second replacement serving', async () => {
      const v = (await admin<WorkersView>(s, '/api/v1/workers')).body;
      return v.workers.length === 2 && v.workers.every((w) => w.pid !== victim && w.pid !== forked);
    }, 90_000, 100);
    const v = (await admin<WorkersView>(s, '/api/v1/workers')).body;
    assert.deepEqual([v.replaced, v.unresponsive, v.start_failures], [1, 0, 1]);
    assert.match(s.served.err(), /a replacement worker failed to start; trying again/);
    const text = await machineMetrics(s);
    assert.match(text, /^proxy_worker_start_failures_total 1$/m);
    assert.match(text, /^proxy_worker_restarts_total\{reason="exited"\} 1$/m);
    assert.match(text, /^proxy_workers 2$/m);
  } finally {
    assert.equal(await s.served.stop(), 0);
  }
});

test('a worker ready seconds before the other is not ended at the first beat: silence counts from the first ping', { timeout: 180_000 }, async () => {
  // The second worker is held (SIGSTOP) for 5 s while it starts, so the first is ready 5 s before
  // it; the heartbeat (2 s timeout) starts once both are. Counted from its readiness, the first
  // worker would be 5 s silent at the first beat and ended.
  let held = 0;
  let watch: NodeJS.Timeout | undefined;
  const s = await startWorkers(dir, 'startgap', { worker_heartbeat: { interval_ms: 200, timeout_ms: 2000 } }, (primary) => {
    watch = setInterval(() => {
      let kids: number[] = [];
      try {
        kids = childrenOf(primary.pid!);
      } catch {
        return;
      }
      if (held !== 0 || kids.length < 2) return;
      held = Math.max(...kids);
      clearInterval(watch);
      process.kill(held, 'SIGSTOP');
      setTimeout(() => { if (alive(held)) process.kill(held, 'SIGCONT'); }, 5000).unref();
    }, 5);
  });
  clearInterval(watch);
  try {
    assert.ok(held !== 0, 'the second worker was held while it started');
    const pids = (await admin<WorkersView>(s, '/api/v1/workers')).body.workers.map((w) => w.pid).sort();
    // Longer than the timeout, from the first beat on.
    await new Promise((r) => setTimeout(r, 4000));
    const v = (await admin<WorkersView>(s, '/api/v1/workers')).body;
    assert.deepEqual(v.workers.map((w) => w.pid).sort(), pids, 'the same two workers serve');
    assert.equal(v.unresponsive, 0);
    assert.equal(v.replaced, 0);
    assert.doesNotMatch(s.served.err(), /worker unresponsive/);
  } finally {
    if (held !== 0 && alive(held)) process.kill(held, 'SIGCONT');
    assert.equal(await s.served.stop(), 0);
  }
});
