// A promoted canary baseline across a restart of `proxy serve --workers 2` (a real child process, a
// control plane, the same canary data dir): every worker starts with the graph the primary serves —
// the promoted one — at the primary's generation, and its "pipeline loaded" line names that graph and
// its steps (a worker does not load the file's steps under that generation and then switch silently).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '../helpers/ports.ts';
import { callJson } from '../helpers/http.ts';
import { spawnServe, type Served } from '../helpers/serve.ts';
import { startWorkers, admin, WORKERS_TOKEN, type Started } from '../helpers/workers.ts';
import type { WorkersView } from '../../runtime/http/surface.ts';

const NO_BAD = { steps: [{ type: 'filter', config: { rules: [{ name: 'no-bad', action: 'deny', field: { path: 'filter.k', equals: 'bad' } }] } }] };

/** The "pipeline loaded" lines of worker `index` in `stderr` (JSON log lines). */
function loadedLines(stderr: string, index: number): Array<{ graph: string; request: string[]; response: string[] }> {
  return stderr.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, unknown>)
    .filter((l) => l.msg === 'pipeline loaded' && l.worker === index) as unknown as Array<{ graph: string; request: string[]; response: string[] }>;
}

test('after a restart, the workers serve a promoted canary baseline at the primary\'s generation and log the graph they serve', { timeout: 240_000 },
  async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'proxy-cluster-promotion-'));
    const cpPort = await freePort();
    const cp = `http://127.0.0.1:${cpPort}`;
    const canary = (method: string, path: string, body?: unknown) => callJson(cp, WORKERS_TOKEN, method, `/api/v1/canary${path}`, body);
    const first = await startWorkers(dir, 'promotion', {
      log: { level: 'info' }, control_plane: { port: cpPort, tokens: [WORKERS_TOKEN] }, canary: { data_dir: join(dir, 'canary') },
    });
    let served: Served = first.served;
    t.after(() => served.stop());
    const created = await canary('POST', '', { pipeline_id: 'default', auto_promote: false, candidate_config: NO_BAD,
      stages: [{ traffic_pct: 50, min_duration: '1h', min_requests: 0 }, { traffic_pct: 100, min_duration: '0', min_requests: 0 }],
      rollback_rules: { check_interval: '1h' } });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const id = created.body.canary_id as string;
    const promoted = await canary('POST', `/${id}/promote`, { force: true });
    assert.equal(promoted.status, 200, JSON.stringify(promoted.body));
    assert.equal((await canary('GET', `/${id}`)).body.status, 'completed');
    assert.equal(await served.stop(), 0, served.err().slice(-3000));

    // The same file and data dir: the promotion outranks the file's steps.
    served = await spawnServe(['--config', first.file, '--workers', '2']);
    const again: Started = { ...first, served };
    type Graph = { id: string; request: string[]; response: string[]; generation: number };
    const pipeline = (await admin<{ pipelines: Graph[] }>(again, '/api/v1/pipeline')).body;
    const primary = pipeline.pipelines.find((p) => p.id === 'default')!;
    assert.ok(primary.generation > 1, `the primary loaded the file's graph, then the promoted one: ${JSON.stringify(pipeline)}`);
    assert.ok(primary.request.some((s) => /filter/.test(s)), `the primary serves the promoted steps: ${JSON.stringify(pipeline)}`);
    const workers = (await admin<WorkersView>(again, '/api/v1/workers')).body;
    assert.equal(workers.workers.length, 2, JSON.stringify(workers));
    for (const w of workers.workers) {
      assert.equal(w.generations.default, primary.generation, `worker ${w.worker} serves the machine's generation: ${JSON.stringify(workers)}`);
      // One line per graph it published: the promoted graph, at that generation, with the promoted steps.
      const lines = loadedLines(served.err(), w.worker);
      assert.deepEqual(lines.map((l) => l.graph), [`default/baseline#${primary.generation}`], `worker ${w.worker}: ${JSON.stringify(lines)}`);
      assert.deepEqual([lines[0].request, lines[0].response], [primary.request, primary.response], `worker ${w.worker} logs the steps it serves`);
    }
  });
