// Each canary arm counts every request it serves, whatever the profiler samples or filters and
// whether profiling is on at all (issue 19, item 11): with profiling.filters.collections naming a
// collection the traffic never touches, and with profiling.enabled false, a candidate that rejects
// every request is still rolled back. Also: the arms' recorders follow the graphs (a reload of the
// baseline mid-canary keeps it counted; a rollback or completion detaches them).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MongoClient, MongoServerError } from 'mongodb';
import { parseConfig } from '../../runtime/config/index.ts';
import { startProxy, BUILTIN_PLUGIN_DIR } from '../../runtime/app/serve.ts';
import { Logger } from '../../runtime/log/index.ts';
import { PipelineManager } from '../../runtime/pipeline/index.ts';
import { ArmEvidence, PipelineCanaryGraphs, buckets, emptyHistogram } from '../../runtime/canary/index.ts';

const TOKEN = 'canary-evidence-token-0123456789';
const DENY_ALL = { steps: [{ type: 'filter', config: { rules: [], default: 'deny' } }] };

async function waitFor<T>(what: string, fn: () => Promise<T | null>, timeoutMs: number): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v !== null) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Finds on app.items from `workers` loops until stop(); counts the filter's rejections. */
function traffic(client: MongoClient, workers = 8) {
  const counts = { ok: 0, denied: 0, other: [] as string[] };
  let running = true;
  const coll = client.db('app').collection('items');
  const loops = Array.from({ length: workers }, async () => {
    while (running) {
      try {
        await coll.find({ k: 1 }).limit(1).toArray();
        counts.ok++;
      } catch (err) {
        if (err instanceof MongoServerError && err.code === 13) counts.denied++;
        else counts.other.push(String(err));
      }
    }
  });
  return { counts, stop: async () => { running = false; await Promise.all(loops); } };
}

/**
 * A proxy (embedded upstream) with `profiling`, a deny-all candidate at 50 % under driver traffic to
 * app.items: the canary must roll it back on its error rate.
 */
async function denyAllIsRolledBack(profiling: Record<string, unknown>): Promise<{ candidateProfiled: number; denied: number }> {
  const proxy = await startProxy(parseConfig({
    listen: '127.0.0.1:0', log: { level: 'error' }, profiling: { port: 0, ...profiling },
    control_plane: { port: 0, tokens: [TOKEN] }, canary: { data_dir: mkdtempSync(join(tmpdir(), 'canary-evidence-')) },
  }, null), { log: new Logger('test', 'error') });
  const client = new MongoClient(proxy.uri, { maxPoolSize: 8 });
  try {
    await client.db('app').collection('items').insertOne({ k: 1 });
    const load = traffic(client);
    try {
      const res = await fetch(`${proxy.controlPlaneUrl}/api/v1/canary`, {
        method: 'POST', headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify({
          pipeline_id: 'default', auto_promote: false, candidate_config: DENY_ALL,
          stages: [{ traffic_pct: 50, min_duration: '1h', min_requests: 1000 }, { traffic_pct: 100, min_duration: '0', min_requests: 0 }],
          rollback_rules: { error_rate_delta_pct: 5, latency_p95_delta_ms: 10_000, sustained_duration: '1s', check_interval: '500ms', min_window_requests: 10 },
        }),
      });
      const created = await res.json() as any;
      assert.equal(res.status, 201, JSON.stringify(created));
      const id = created.canary_id as string;
      const status = await waitFor('the rollback', async () => {
        const s = await (await fetch(`${proxy.controlPlaneUrl}/api/v1/canary/${id}`, { headers: { authorization: `Bearer ${TOKEN}` } })).json() as any;
        return s.status === 'rolled_back' ? s : null;
      }, 15_000);
      assert.equal(status.status, 'rolled_back');
      const report = await (await fetch(`${proxy.controlPlaneUrl}/api/v1/canary/${id}/report`,
        { headers: { authorization: `Bearer ${TOKEN}` } })).json() as any;
      assert.equal(report.triggered_by, 'automatic');
      assert.equal(report.triggering_rules[0].rule, 'error_rate_delta_pct');
      // The rule saw the candidate's requests: all of them failed.
      assert.equal(report.triggering_rules[0].value, 100);
      assert.equal(proxy.pipelines.candidate('default'), null);
    } finally {
      await load.stop();
    }
    assert.deepEqual(load.counts.other, []);
    return { candidateProfiled: proxy.profiler?.snapshot('default', 'candidate').total_requests ?? 0, denied: load.counts.denied };
  } finally {
    await client.close();
    await proxy.close();
  }
}

test('profiling.filters.collections names another collection: a deny-all candidate at 50 % is still rolled back', async () => {
  const r = await denyAllIsRolledBack({ enabled: true, filters: { collections: ['orders'] } });
  assert.ok(r.denied > 0);
  // The profiler kept nothing of the candidate: the canary's evidence did not come from it.
  assert.equal(r.candidateProfiled, 0);
});

test('profiling.enabled false: a canary starts, and a deny-all candidate at 50 % is rolled back', async () => {
  const r = await denyAllIsRolledBack({ enabled: false });
  assert.ok(r.denied > 0);
  assert.equal(r.candidateProfiled, 0);
});

test('an arm\'s latency histogram holds exactly what one recordValue per request would (sub-2 ms latencies are handed over in bulk)', () => {
  const arm = new ArmEvidence();
  const direct = emptyHistogram();
  let x = 12345;
  for (let i = 0; i < 20_000; i++) {
    x = (x * 1103515245 + 12345) % 2147483648;
    const us = i % 10 === 0 ? 2048 + (x % 100_000) : x % 2048;
    arm.record(us / 1000, i % 3 !== 0);
    direct.recordValue(us);
    if (i === 10_000) assert.equal(arm.latencyUs.totalCount, 10_001, 'a read in between hands over what is pending');
  }
  assert.equal(arm.requests, 20_000);
  assert.equal(arm.errors, 6667);
  assert.deepEqual(buckets(arm.latencyUs), buckets(direct));
});

test('the arms\' recorders follow the graphs: a baseline reloaded mid-canary is counted, a removed split counts nothing more', async () => {
  const base = { pipeline: { id: 'default', request: ['logging'], response: [] as string[] }, steps: {} };
  const manager = new PipelineManager({ pluginDir: BUILTIN_PLUGIN_DIR });
  await manager.load(base);
  const graphs = new PipelineCanaryGraphs(manager, [base], () => 0.5);
  assert.equal(graphs.totals('default', 'baseline'), null, 'no figures without a split');
  assert.equal(manager.get('default').evidence, null);
  const p = await graphs.prepare('default', { steps: [{ type: 'rate_limit', config: { max_rps: 1000 } }] });
  graphs.activate(p, 50);
  const b = graphs.totals('default', 'baseline') as ArmEvidence;
  const c = graphs.totals('default', 'candidate') as ArmEvidence;
  assert.ok(b instanceof ArmEvidence && c instanceof ArmEvidence && b !== c);
  assert.equal(manager.get('default').evidence, b);
  assert.equal(p.graph.evidence, c);
  // A reload publishes a new baseline graph: it is counted to the same arm.
  const reloaded = await manager.load(base);
  assert.notEqual(reloaded, p.graph);
  assert.equal(reloaded.evidence, b);
  reloaded.evidence!.record(2.5, true);
  p.graph.evidence!.record(1, false);
  assert.deepEqual([b.requests, b.errors, c.requests, c.errors], [1, 0, 1, 1]);
  assert.ok(Math.abs(b.latencyUs.getValueAtPercentile(100) - 2500) <= 3, 'recorded in µs');
  // Beyond the histogram's 60 s range: counted as 60 s, not thrown.
  c.record(120_000, true);
  assert.equal(c.requests, 2);
  graphs.remove('default');
  assert.equal(graphs.totals('default', 'candidate'), null);
  assert.equal(manager.get('default').evidence, null);
  assert.equal((await manager.load(base)).evidence, null, 'a graph loaded after the canary is not counted');
});
