// The pipeline overhead `proxy bench` prints (runtime/bench/overhead.ts): from the exact sums of
// GET /api/profile/histograms, before and after, over the difference in requests — not from rounded
// averages times counts — and over every graph of the default pipeline (baseline and candidate).
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { MongoClient } from 'mongodb';
import { overheadBetween, readTotals, totalsOf } from '../../runtime/bench/index.ts';
import { Closes, withProxy } from '../helpers/proxy.ts';

const running = new Closes();
const clients: MongoClient[] = [];
after(async () => {
  for (const c of clients) await c.close(true).catch(() => {});
  await running.run().catch(() => {});
});

test('the run\'s mean comes from exact sums: a long history before the run does not skew it (rounded average × count would be off by 400 µs here)', () => {
  // A million requests averaging 500.4 µs before; ten of 900 µs (upstream 300 µs) in the run.
  const before = { requests: 1_000_000, totalNs: 1_000_000 * 500_400, upstreamNs: 1_000_000 * 200_000 };
  const after = { requests: 1_000_010, totalNs: before.totalNs + 10 * 900_000, upstreamNs: before.upstreamNs + 10 * 300_000 };
  const o = overheadBetween(before, after, 'http://x');
  assert.ok(typeof o !== 'string');
  assert.deepEqual({ total: o.avgTotalUs, upstream: o.avgUpstreamUs, overhead: o.avgOverheadUs, n: o.requests },
    { total: 900, upstream: 300, overhead: 600, n: 10 });
  // What the old reading did: /api/profile's rounded averages times the counts.
  const rounded = (t: typeof before) => Math.round(t.totalNs / t.requests / 1000) * t.requests;
  assert.equal((rounded(after) - rounded(before)) / 10, 500, 'the rounded reconstruction loses the run');
});

test('readTotals: exact sums and counts of the default pipeline\'s baseline and candidate graphs from a running proxy; other pipeline ids left out',
  { timeout: 60_000 }, async () => {
    const { proxy } = await withProxy(running, { profiling: { enabled: true, port: 0 } });
    const client = new MongoClient(proxy.uri, { serverSelectionTimeoutMS: 5000 });
    clients.push(client);
    const coll = client.db('bench').collection('c');
    for (let i = 0; i < 30; i++) await coll.findOne({}); // history before the run
    const url = proxy.profilingUrl!;
    const profiler = proxy.profiler!;
    const base = profiler.graph('default', 'baseline');
    const before = await readTotals(url, null);
    assert.ok(typeof before !== 'string', String(before));
    assert.deepEqual(before, { requests: base.ok + base.errors, totalNs: base.total.sumNs, upstreamNs: base.upstream.sumNs });
    const sums0 = { total: base.total.sumNs, upstream: base.upstream.sumNs };
    for (let i = 0; i < 7; i++) await coll.findOne({}); // the run
    // A canary's candidate serves part of a run; another pipeline id is not this proxy's pipeline.
    const cand = profiler.graph('default', 'candidate');
    cand.total.record(2_000_000, false); cand.upstream.record(500_000, false); cand.ok++;
    const other = profiler.graph('other', 'baseline');
    other.total.record(90_000_000, false); other.upstream.record(1_000, false); other.ok++;
    const afterTotals = await readTotals(url, null);
    assert.ok(typeof afterTotals !== 'string', String(afterTotals));
    assert.equal(afterTotals.requests - before.requests, 8, 'seven finds on the baseline and one on the candidate');
    assert.equal(afterTotals.totalNs - before.totalNs, base.total.sumNs - sums0.total + 2_000_000);
    assert.equal(afterTotals.upstreamNs - before.upstreamNs, base.upstream.sumNs - sums0.upstream + 500_000);
    const o = overheadBetween(before, afterTotals, url);
    assert.ok(typeof o !== 'string', String(o));
    assert.equal(o.requests, 8);
    assert.equal(o.avgTotalUs, Math.round((base.total.sumNs - sums0.total + 2_000_000) / 8 / 1000));
    assert.equal(o.avgUpstreamUs, Math.round((base.upstream.sumNs - sums0.upstream + 500_000) / 8 / 1000));
    assert.equal(o.avgOverheadUs, o.avgTotalUs - o.avgUpstreamUs);
    // An answer without default_pipeline_id (an older proxy) counts every graph.
    assert.equal(totalsOf({ graphs: [{ pipeline_id: 'a', pipeline: 'baseline', ok: 1, errors: 1, total_sum_ns: 5, upstream_sum_ns: 2 },
      { pipeline_id: 'b', pipeline: 'baseline', ok: 1, errors: 0, total_sum_ns: 3, upstream_sum_ns: 1 }] }).requests, 3);
  });
