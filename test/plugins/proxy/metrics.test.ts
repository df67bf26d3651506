// metrics through the proxy with the real driver: proxy_plugin_* request counters and duration
// histograms move per operation.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startPipelineProxy, metricValue, type Doc } from './_proxy.ts';

const PID = 'px_metrics';
const v = (name: string) => metricValue(name, PID);

test('metrics: request counters and histograms per operation', { timeout: 60_000 }, async () => {
  const p = await startPipelineProxy({ id: PID, request: ['metrics'], response: ['metrics'], steps: { metrics: { config: {} } } });
  try {
    const client = await p.client();
    const coll = client.db('app').collection<Doc>('m');
    const names = ['requests_total', 'request_errors_total', 'request_duration_us_count', 'op_find_requests_total', 'op_find_duration_us_count',
      'op_insert_requests_total', 'op_insert_duration_us_count', 'op_update_requests_total', 'op_delete_requests_total',
      'op_aggregate_requests_total', 'op_getmore_requests_total', 'op_distinct_requests_total', 'op_other_requests_total',
      'op_findandmodify_requests_total'];
    const snap = async () => Object.fromEntries(await Promise.all(names.map(async (n) => [n, await v(`proxy_plugin_${n}`)] as const)));
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
    const d = (n: string) => s1[n] - s0[n];
    assert.equal(d('op_insert_requests_total'), 1);
    assert.equal(d('op_insert_duration_us_count'), 1);
    assert.equal(d('op_find_requests_total'), 1);
    assert.equal(d('op_find_duration_us_count'), 1);
    assert.equal(d('op_getmore_requests_total'), 2);
    assert.equal(d('op_update_requests_total'), 1);
    assert.equal(d('op_delete_requests_total'), 1);
    assert.equal(d('op_aggregate_requests_total'), 1);
    assert.equal(d('op_distinct_requests_total'), 1);
    assert.equal(d('op_findandmodify_requests_total'), 1);
    assert.equal(d('op_other_requests_total'), 1);
    assert.equal(d('requests_total'), 10); // 1 insert + 1 find + 2 getMore + update + delete + aggregate + distinct + findAndModify + unknown
    assert.equal(d('request_duration_us_count'), 10);
    assert.equal(d('request_errors_total'), 1);
    // histogram buckets are cumulative and carry the pipeline label
    const text = await p.proxy.pipelines.host.registry.metrics();
    assert.match(text, new RegExp(`proxy_plugin_op_find_duration_us_bucket\\{[^}]*le="\\+Inf"[^}]*pipeline_id="${PID}"[^}]*\\}|proxy_plugin_op_find_duration_us_bucket\\{[^}]*pipeline_id="${PID}"[^}]*le="\\+Inf"[^}]*\\}`));
    assert.ok(await v('proxy_plugin_request_duration_us_sum') > 0);
  } finally {
    await p.close();
  }
});
