// metrics through the proxy with the real driver: the two labelled families
// (proxy_plugin_requests_total, proxy_plugin_request_duration_us by op, db, collection, status)
// move per operation, namespace and outcome.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startPipelineProxy, metricValue, type Doc } from './_proxy.ts';

const PID = 'px_metrics';

test('metrics: request counters and histograms by op, db, collection and status', { timeout: 60_000 }, async () => {
  const p = await startPipelineProxy({ id: PID, request: ['metrics'], response: ['metrics'], steps: { metrics: { config: {} } } });
  try {
    const client = await p.client();
    const coll = client.db('app').collection<Doc>('m');
    const series = {
      insert: 'op="insert",db="app",collection="m",status="ok"',
      find: 'op="find",db="app",collection="m",status="ok"',
      getMore: 'op="getMore",db="app",collection="m",status="ok"',
      update: 'op="update",db="app",collection="m",status="ok"',
      delete: 'op="delete",db="app",collection="m",status="ok"',
      aggregate: 'op="aggregate",db="app",collection="m",status="ok"',
      distinct: 'op="distinct",db="app",collection="m",status="ok"',
      findAndModify: 'op="findAndModify",db="app",collection="m",status="ok"',
      unknown: 'op="other",db="app",collection="",status="error"',
    };
    const snap = async () => {
      const out: Record<string, number> = { all: await metricValue('proxy_plugin_requests_total', PID),
        durations: await metricValue('proxy_plugin_request_duration_us_count', PID) };
      for (const [k, labels] of Object.entries(series)) out[k] = await metricValue('proxy_plugin_requests_total', PID, labels);
      out.findDurations = await metricValue('proxy_plugin_request_duration_us_count', PID, series.find);
      return out;
    };
    const s0 = await snap();
    await coll.insertMany(Array.from({ length: 5 }, (_, i) => ({ _id: i })) as never[]);
    await coll.find({}, { batchSize: 2 }).toArray(); // find + 2 getMore
    await coll.updateOne({ _id: 1 }, { $set: { x: 1 } });
    await coll.deleteOne({ _id: 2 });
    await coll.aggregate([{ $match: {} }]).toArray();
    await coll.distinct('_id');
    await coll.findOneAndUpdate({ _id: 3 }, { $set: { y: 1 } });
    await assert.rejects(client.db('app').command({ noSuchCommand: 1 }));
    const s1 = await snap();
    const d = (n: string) => s1[n]! - s0[n]!;
    assert.equal(d('insert'), 1);
    assert.equal(d('find'), 1);
    assert.equal(d('findDurations'), 1);
    assert.equal(d('getMore'), 2);
    assert.equal(d('update'), 1);
    assert.equal(d('delete'), 1);
    assert.equal(d('aggregate'), 1);
    assert.equal(d('distinct'), 1);
    assert.equal(d('findAndModify'), 1);
    assert.equal(d('unknown'), 1);
    assert.equal(d('all'), 10); // 1 insert + 1 find + 2 getMore + update + delete + aggregate + distinct + findAndModify + unknown
    assert.equal(d('durations'), 10);
    // histogram buckets are cumulative and carry the plugin's labels and the graph's
    const text = await p.proxy.pipelines.host.registry.metrics();
    assert.match(text,
      new RegExp(`^proxy_plugin_request_duration_us_bucket\\{le="\\+Inf",${series.find},pipeline_id="${PID}",pipeline="baseline"\\} \\d+$`, 'm'));
    assert.ok(await metricValue('proxy_plugin_request_duration_us_sum', PID) > 0);
  } finally {
    await p.close();
  }
});
