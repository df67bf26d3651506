import { test } from 'node:test';
import assert from 'node:assert/strict';
import { load, refuses } from './helpers.ts';

/** The value of one series of `metric` in `text`, selected by its labels (in exposition order). */
function value(text: string, metric: string, labels: string): number {
  const escaped = labels.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  const m = new RegExp(`^${metric}\\{${escaped}\\} (\\S+)$`, 'm').exec(text);
  return m ? Number(m[1]) : NaN;
}

test('metrics: one counter and one histogram family labelled op, db, collection, status; unknown ops are "other"', async () => {
  const h = await load('metrics', {});
  const g = `pipeline_id="${h.pipeline.id}",pipeline="baseline"`;
  for (let i = 0; i < 3; i++) h.roundTrip({ find: 'c', $db: 'a' }, { ok: 1 });
  h.roundTrip({ insert: 'c', documents: [], $db: 'a' }, { ok: 0, code: 11000, errmsg: 'dup' });
  h.roundTrip({ findAndModify: 'd', query: {}, $db: 'b' }, { ok: 1 });
  h.roundTrip({ ping: 1, $db: 'admin' }, { ok: 1 });
  const text = await h.metrics();
  assert.equal(value(text, 'proxy_plugin_requests_total', `op="find",db="a",collection="c",status="ok",${g}`), 3);
  assert.equal(value(text, 'proxy_plugin_requests_total', `op="insert",db="a",collection="c",status="error",${g}`), 1);
  assert.equal(value(text, 'proxy_plugin_requests_total', `op="findAndModify",db="b",collection="d",status="ok",${g}`), 1);
  assert.equal(value(text, 'proxy_plugin_requests_total', `op="other",db="admin",collection="",status="ok",${g}`), 1);
  assert.equal(value(text, 'proxy_plugin_request_duration_us_count', `op="find",db="a",collection="c",status="ok",${g}`), 3);
  assert.equal(value(text, 'proxy_plugin_request_duration_us_bucket', `le="+Inf",op="find",db="a",collection="c",status="ok",${g}`), 3);
  // two families, no per-operation metric names
  const families = new Set([...text.matchAll(/^# TYPE (proxy_plugin_\w+)/gm)].map((m) => m[1]));
  assert.deepEqual([...families].filter((f) => f !== 'proxy_plugin_label_overflow_total').sort(),
    ['proxy_plugin_request_duration_us', 'proxy_plugin_requests_total']);
});

test('metrics: config labels chooses the labels, in that order', async () => {
  const h = await load('metrics', { labels: ['status', 'op'] });
  const g = `pipeline_id="${h.pipeline.id}",pipeline="baseline"`;
  h.roundTrip({ find: 'x', $db: 'a' }, { ok: 1 });
  h.roundTrip({ find: 'y', $db: 'b' }, { ok: 1 });
  h.roundTrip({ find: 'y', $db: 'b' }, { ok: 0, errmsg: 'no' });
  const text = await h.metrics();
  assert.equal(value(text, 'proxy_plugin_requests_total', `status="ok",op="find",${g}`), 2);
  assert.equal(value(text, 'proxy_plugin_requests_total', `status="error",op="find",${g}`), 1);
  assert.doesNotMatch(text, /collection="/);
  const none = await load('metrics', { labels: [] });
  none.roundTrip({ find: 'x', $db: 'a' }, { ok: 1 });
  assert.equal(value(await none.metrics(), 'proxy_plugin_requests_total', `pipeline_id="${none.pipeline.id}",pipeline="baseline"`), 1);
});

test('metrics: past 1000 label sets per family, observations go to "other" and are counted as overflow', async () => {
  const h = await load('metrics', { labels: ['collection'] });
  const g = `pipeline_id="${h.pipeline.id}",pipeline="baseline"`;
  for (let i = 0; i < 1010; i++) h.roundTrip({ find: `c${i}`, $db: 'a' }, { ok: 1 });
  const text = await h.metrics();
  assert.equal((text.match(/^proxy_plugin_requests_total\{/gm) ?? []).length, 1001);
  assert.equal(value(text, 'proxy_plugin_requests_total', `collection="c999",${g}`), 1);
  assert.ok(Number.isNaN(value(text, 'proxy_plugin_requests_total', `collection="c1000",${g}`)));
  assert.equal(value(text, 'proxy_plugin_requests_total', `collection="other",${g}`), 10);
  assert.equal(value(text, 'proxy_plugin_label_overflow_total', `metric="proxy_plugin_requests_total",${g}`), 10);
  assert.equal(value(text, 'proxy_plugin_label_overflow_total', `metric="proxy_plugin_request_duration_us",${g}`), 10);
});

test('metrics: bad configs are refused with the reason', async () => {
  await refuses('metrics', {}, { labels: ['op', 'user'] }, /labels: "user" is not one of op, db, collection, status/);
  await refuses('metrics', {}, { labels: ['op', 'op'] }, /labels: "op" is listed twice/);
  await refuses('metrics', {}, { buckets: [1] }, /unknown key "buckets"/);
});

test('metrics: a reload with other labels starts new series; the old ones keep their values', async () => {
  const h = await load('metrics', { labels: ['op'] });
  const g = `pipeline_id="${h.pipeline.id}",pipeline="baseline"`;
  h.roundTrip({ find: 'x', $db: 'a' }, { ok: 1 });
  await h.reload((await import('./helpers.ts')).PLUGIN_DIR + '/metrics.wasm', { config: { labels: ['op', 'status'] } });
  h.roundTrip({ find: 'x', $db: 'a' }, { ok: 1 });
  h.roundTrip({ find: 'x', $db: 'a' }, { ok: 1 });
  const text = await h.metrics();
  assert.equal(value(text, 'proxy_plugin_requests_total', `op="find",${g}`), 1);
  assert.equal(value(text, 'proxy_plugin_requests_total', `op="find",status="ok",${g}`), 2);
});
