// A worker that is still starting when a reload completes, with a real `proxy serve --workers 2`:
// only ready workers take part in a reload, so the replacement of a killed worker, held (SIGSTOP)
// while it starts, misses it. Once it is ready it must not serve the configuration it was forked
// with: it is drained and started again, and then serves the reloaded steps at the machine's
// generation. Starting it again is not counted as a replacement.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { until } from '../helpers/until.ts';
import { admin, startWorkers } from '../helpers/workers.ts';
import type { WorkersView } from '../../runtime/http/surface.ts';

/** The process ids whose parent is `pid` (from /proc: no procps needed). */
function childrenOf(pid: number): number[] {
  const out: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      // pid (comm) state ppid …: comm may hold spaces and parentheses, so read after the last ')'.
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === pid) out.push(Number(name));
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

function cmdline(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8');
  } catch {
    return '';
  }
}

test('a worker that was starting while a reload completed is started again and serves the reloaded pipeline', { timeout: 240_000 }, async () => {
  const dir = mkdtempSync(join(tmpdir(), 'proxy-late-start-'));
  const s = await startWorkers(dir, 'late', { log: { level: 'info' } });
  const primary = s.served.child.pid!;
  let held = 0;
  try {
    type Graph = { id: string; request: string[]; response: string[]; generation: number };
    const graph = async () => (await admin<{ pipelines: Graph[] }>(s, '/api/v1/pipeline')).body.pipelines.find((p) => p.id === 'default')!;
    const before = (await admin<WorkersView>(s, '/api/v1/workers')).body;
    assert.equal(before.workers.length, 2, JSON.stringify(before));
    const known = new Set(childrenOf(primary));
    process.kill(before.workers[0].pid, 'SIGKILL');
    // Its replacement is forked 0.5 s later; hold it before it can compile its plugins and listen,
    // but not before it has run the worker's command line: until then the primary waits for it (a
    // child between fork and exec holds up its parent's spawn).
    const own = readFileSync(`/proc/${primary}/cmdline`, 'utf8');
    await until('the replacement forked', () => {
      held = childrenOf(primary).find((p) => !known.has(p) && ![own, ''].includes(cmdline(p))) ?? 0;
      return held !== 0;
    }, 30_000, 5);
    process.kill(held, 'SIGSTOP');

    // A reload while it is held: the other worker and the primary apply it.
    const generation = (await graph()).generation;
    writeFileSync(s.file, JSON.stringify({ ...s.config, pipeline: { request: ['logging'], response: ['metrics'] } }));
    const reloaded = await admin<Record<string, unknown>>(s, '/api/v1/reload', { method: 'POST' });
    assert.equal(reloaded.status, 200, JSON.stringify(reloaded.body));
    const after = await graph();
    assert.equal(after.generation, generation + 1, JSON.stringify(after));
    assert.ok(after.request.some((id) => /logging/.test(id)), JSON.stringify(after));

    // Let it go on: it becomes ready with the configuration it was forked with, and is started again.
    process.kill(held, 'SIGCONT');
    let view: WorkersView | null = null;
    await until(() => `both workers at generation ${after.generation}: ${JSON.stringify(view)}`, async () => {
      view = (await admin<WorkersView>(s, '/api/v1/workers')).body;
      return view.workers.length === 2 && view.workers.every((w) => w.generations.default === after.generation && w.pid !== held);
    }, 120_000, 200);
    assert.match(s.served.err(), /a worker started while a reload was applied; draining it and starting it again/);
    assert.equal(view!.replaced, 1, `the kill is a replacement, starting it again is not: ${JSON.stringify(view)}`);
    // The restarted worker's last "pipeline loaded" line has the reloaded steps.
    const restarted = view!.workers.find((w) => w.pid !== before.workers[1].pid)!;
    const lines = s.served.err().split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, unknown>)
      .filter((l) => l.msg === 'pipeline loaded' && l.worker === restarted.worker);
    assert.deepEqual(lines.at(-1)?.request, after.request, JSON.stringify(lines));
    assert.equal(lines.at(-1)?.graph, `default/baseline#${after.generation}`, JSON.stringify(lines));
  } finally {
    if (held !== 0) {
      try {
        process.kill(held, 'SIGCONT');
      } catch {
        // already gone
      }
    }
    assert.equal(await s.served.stop(), 0, s.served.err().slice(-3000));
  }
});
