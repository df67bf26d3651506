import { test } from 'node:test';
import assert from 'node:assert/strict';
import { load, refuses } from './helpers.ts';

function value(text: string, metric: string, pipeline: string): number {
  const m = new RegExp(`^${metric}\\{pipeline_id="${pipeline}",pipeline="baseline"\\} (\\S+)$`, 'm').exec(text);
  return m ? Number(m[1]) : NaN;
}

test('metrics: per-operation counters and duration histograms; unknown ops count as other', async () => {
  const h = await load('metrics', {});
  const p = h.pipeline.id;
  for (let i = 0; i < 3; i++) h.roundTrip({ find: 'c', $db: 'a' }, { ok: 1 });
  h.roundTrip({ insert: 'c', documents: [], $db: 'a' }, { ok: 0, code: 11000, errmsg: 'dup' });
  h.roundTrip({ ping: 1, $db: 'admin' }, { ok: 1 });
  const text = await h.metrics();
  assert.equal(value(text, 'proxy_plugin_requests_total', p), 5);
  assert.equal(value(text, 'proxy_plugin_request_errors_total', p), 1);
  assert.equal(value(text, 'proxy_plugin_op_find_requests_total', p), 3);
  assert.equal(value(text, 'proxy_plugin_op_insert_requests_total', p), 1);
  assert.equal(value(text, 'proxy_plugin_op_other_requests_total', p), 1);
  assert.equal(value(text, 'proxy_plugin_op_find_duration_us_count', p), 3);
  assert.equal(value(text, 'proxy_plugin_request_duration_us_count', p), 5);
  assert.match(text, /proxy_plugin_op_findandmodify_requests_total/);
});

test('metrics: config takes no keys', async () => {
  await refuses('metrics', {}, { labels: ['op'] }, /unknown key "labels"/);
});
